//! Tuning: the computed and planned settings via ALTER SYSTEM, a restart, then proof that
//! every setting took effect and none is pending a restart. In place when
//! postgresql.auto.conf holds exactly the wanted settings and nothing waits for a restart.
//! (The tuned profile and kernel arguments are the OS tuning step's.)

use std::collections::BTreeMap;

use anyhow::{bail, Context as _, Result};

use super::{Check, Context, Looking, Product, Step};
use crate::journal::StepName;
use crate::plan::tuning::{effective_settings, MachineShape};
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::{literal, Session};

pub(crate) struct Tuning;

/// The server refused a value the plan itself gives (`[tuning.settings]`): the same run
/// would set the same value again, so resuming cannot help. A refusal, like a device the
/// plan may not touch.
#[derive(Debug, thiserror::Error)]
#[error(
    "PostgreSQL refused the plan's tuning.settings.{name} = {value}: {reason}; fix it in the plan, then `pgapplianced reset` and start again (resuming would set the same value)"
)]
pub(crate) struct PlanValueRefused {
    pub(crate) name: String,
    pub(crate) value: String,
    pub(crate) reason: String,
}

/// SQLSTATEs of a refused setting: invalid_parameter_value (22023, a value out of range or
/// not of the setting's kind), undefined_object (42704, an unrecognized parameter),
/// cant_change_runtime_param (55P02).
const REFUSED_SETTING: &[&str] = &["22023", "42704", "55P02"];

/// The server's word when `e` is its refusal of a setting: the message, else None.
fn refused_setting(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|c| {
        let db = c.downcast_ref::<tokio_postgres::Error>()?.as_db_error()?;
        REFUSED_SETTING
            .contains(&db.code().code())
            .then(|| db.message().to_string())
    })
}

/// Whether `name` is one of the plan's own settings (not the calculator's).
fn planned(cx: &Context, name: &str) -> bool {
    cx.plan.tuning.settings.contains_key(name)
}

/// The settings this run wants in postgresql.auto.conf: the plan's and the calculator's,
/// less those the host's way of running the server decides.
fn desired(cx: &Context) -> Result<BTreeMap<String, String>> {
    let inv = cx.inventory()?;
    let shape = MachineShape {
        ram_bytes: inv.memory_bytes,
        cores: inv.cpu.cpus,
        max_clients: cx.plan.max_clients(),
        storage: cx.plan.storage.kind,
        pg_major: cx.server()?.bin.major,
    };
    let mut desired = effective_settings(&cx.plan, &shape);
    for k in cx.host.server_owned_settings() {
        if desired.remove(*k).is_some() {
            tracing::info!(setting = k, "left to the server's own options on this host");
        }
    }
    Ok(desired)
}

async fn connect(cx: &Context) -> Result<Session> {
    let c = cx.server()?;
    Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres").await
}

impl Step for Tuning {
    const NAME: StepName = StepName::Tuning;
    const NEEDS: &'static [Product] = &[Product::Inventory, Product::Server];
    const GIVES: &'static [Product] = &[Product::Settings];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        let desired = desired(cx)?;
        let session = connect(cx).await?;
        let in_file = auto_conf_settings(&session).await?;
        let pending = pending_restart(&session).await?;
        if in_file != desired {
            return Ok(Check::Todo(format!(
                "{} planned setting(s), postgresql.auto.conf differs",
                desired.len()
            )));
        }
        if !pending.is_empty() {
            return Ok(Check::Todo(format!(
                "pending a restart: {}",
                pending.join(", ")
            )));
        }
        save_settings(cx, &session, &desired).await?;
        cx.set_settings(desired);
        Ok(Check::Done)
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        let desired = desired(cx)?;
        let cluster = cx.server()?.clone();
        crate::notify::status(&format!("tuning: {} settings", desired.len()));
        let session = connect(cx).await?;
        session.execute("ALTER SYSTEM RESET ALL").await?;
        for (name, value) in &desired {
            if let Err(e) = session
                .execute(&format!("ALTER SYSTEM SET {name} = {}", literal(value)))
                .await
            {
                if let Some(reason) = refused_setting(&e).filter(|_| planned(cx, name)) {
                    return Err(anyhow::Error::new(PlanValueRefused {
                        name: name.clone(),
                        value: value.clone(),
                        reason,
                    }));
                }
                return Err(e.context(format!(
                    "setting {name} = {value} (from the plan or the auto calculator)"
                )));
            }
        }
        drop(session);
        cluster.restart().await.context(
            "restarting PostgreSQL with the new settings (a setting may be too large for this machine)",
        )?;
        let session = connect(cx).await?;
        let errors = session
            .rows(
                "SELECT name, error FROM pg_file_settings WHERE error IS NOT NULL \
                 OR (NOT applied AND sourcefile LIKE '%/postgresql.auto.conf')",
            )
            .await?;
        let errors: Vec<String> = errors
            .into_iter()
            .filter(|r| {
                r.first()
                    .cloned()
                    .flatten()
                    .is_some_and(|n| desired.contains_key(&n))
            })
            .map(|r| {
                format!(
                    "{}: {}",
                    r.first().cloned().flatten().unwrap_or_default(),
                    r.get(1)
                        .cloned()
                        .flatten()
                        .unwrap_or_else(|| "not applied".into())
                )
            })
            .collect();
        if !errors.is_empty() {
            // A value of the plan's own that the server took but could not apply.
            if let Some((name, reason)) = errors
                .iter()
                .filter_map(|e| e.split_once(": "))
                .find(|(name, _)| planned(cx, name))
            {
                return Err(anyhow::Error::new(PlanValueRefused {
                    name: name.to_string(),
                    value: desired.get(name).cloned().unwrap_or_default(),
                    reason: format!(
                        "it did not take effect ({reason}); all: {}",
                        errors.join("; ")
                    ),
                }));
            }
            bail!("settings did not take effect: {}", errors.join("; "));
        }
        let pending = pending_restart(&session).await?;
        if !pending.is_empty() {
            bail!(
                "settings still pending a restart after the restart: {}",
                pending.join(", ")
            );
        }
        save_settings(cx, &session, &desired).await?;
        cx.set_settings(desired);
        Ok(())
    }
}

async fn auto_conf_settings(session: &Session) -> Result<BTreeMap<String, String>> {
    let rows = session
        .rows(
            "SELECT name, setting FROM pg_file_settings \
             WHERE sourcefile LIKE '%/postgresql.auto.conf' ORDER BY seqno",
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| Some((r.first()?.clone()?, r.get(1)?.clone()?)))
        .collect())
}

async fn pending_restart(session: &Session) -> Result<Vec<String>> {
    Ok(session
        .column("SELECT name FROM pg_settings WHERE pending_restart ORDER BY name")
        .await?
        .into_iter()
        .flatten()
        .collect())
}

async fn save_settings(
    cx: &Context,
    session: &Session,
    applied: &BTreeMap<String, String>,
) -> Result<()> {
    let settings = session.effective_settings().await?;
    crate::fsutil::write_json(&cx.raw().join("pg_settings.json"), &settings)?;
    crate::fsutil::write_json(&cx.run_dir.join("applied_settings.json"), applied)?;
    Ok(())
}
