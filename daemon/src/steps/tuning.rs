//! Tuning: the computed and planned settings via ALTER SYSTEM, a restart, then proof that
//! every setting took effect and none is pending a restart. The tuned profile and kernel
//! arguments are appliance-only (they change the host), so local mode leaves them out.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::Run;
use crate::journal::StepName;
use crate::plan::tuning::{effective_settings, MachineShape};
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::{literal, Session};

/// Settings local mode controls itself (pg_ctl options), never taken from the plan.
const LOCAL_OWNED: [&str; 3] = ["port", "listen_addresses", "unix_socket_directories"];

pub async fn run(run: &mut Run) -> Result<()> {
    let inv = run.inventory()?;
    let bin = run.bin()?;
    let shape = MachineShape {
        ram_bytes: inv.memory_bytes,
        cores: inv.cpu.cpus,
        max_clients: run.plan.max_clients(),
        storage: run.plan.storage.kind,
        pg_major: bin.major,
    };
    let mut desired = effective_settings(&run.plan, &shape);
    for k in LOCAL_OWNED {
        // The appliance's server listens where the plan says; the socket and port are
        // the platform's.
        if k == "listen_addresses" && run.is_appliance() {
            continue;
        }
        if desired.remove(k).is_some() {
            tracing::info!(setting = k, "left to local mode's own server options");
        }
    }
    let cluster = run.cluster()?.clone();
    let session =
        Session::connect(&cluster.socket_dir(), cluster.port, SUPERUSER, "postgres").await?;
    let in_file = auto_conf_settings(&session).await?;
    let pending = pending_restart(&session).await?;
    if in_file == desired && pending.is_empty() {
        run.applied_settings = desired;
        save_settings(run, &session).await?;
        if !run.is_appliance() {
            super::os_tuning::record_in_effect(run).await?;
        }
        if !run.journal.is_done(StepName::Tuning) {
            run.journal.begin(StepName::Tuning, None)?;
            run.journal.finish(StepName::Tuning, 0.0)?;
        }
        return Ok(());
    }
    let t0 = Instant::now();
    run.journal.begin(StepName::Tuning, None)?;
    crate::notify::status(&format!("tuning: {} settings", desired.len()));
    session.execute("ALTER SYSTEM RESET ALL").await?;
    for (name, value) in &desired {
        session
            .execute(&format!("ALTER SYSTEM SET {name} = {}", literal(value)))
            .await
            .with_context(|| {
                format!("setting {name} = {value} (from the plan or the auto calculator)")
            })?;
    }
    drop(session);
    cluster.restart().await.context(
        "restarting PostgreSQL with the new settings (a setting may be too large for this machine)",
    )?;
    let session =
        Session::connect(&cluster.socket_dir(), cluster.port, SUPERUSER, "postgres").await?;
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
        bail!("settings did not take effect: {}", errors.join("; "));
    }
    let pending = pending_restart(&session).await?;
    if !pending.is_empty() {
        bail!(
            "settings still pending a restart after the restart: {}",
            pending.join(", ")
        );
    }
    run.applied_settings = desired;
    save_settings(run, &session).await?;
    // On the appliance the OS tuning step records it, after its reboot.
    if !run.is_appliance() {
        super::os_tuning::record_in_effect(run).await?;
    }
    run.journal
        .finish(StepName::Tuning, t0.elapsed().as_secs_f64())
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

async fn save_settings(run: &Run, session: &Session) -> Result<()> {
    let settings = session.effective_settings().await?;
    crate::fsutil::write_json(&run.run_dir.join("raw").join("pg_settings.json"), &settings)?;
    crate::fsutil::write_json(
        &run.run_dir.join("applied_settings.json"),
        &run.applied_settings,
    )?;
    Ok(())
}
