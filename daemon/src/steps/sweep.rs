//! Sweep: every point of the expanded plan, in order. A point recorded in the journal with
//! its JSON on disk is never run again; an interrupted point is rerun as a new attempt in a
//! fresh raw directory, so each point appears exactly once in the results. A round of
//! adaptive repeats past `min` runs only for the points whose earlier rounds' interval is
//! still too wide ([`wanted`], decided from the recorded results alone, so a resumed run
//! decides the same). Before each round after the first, `[sweep] between_rounds` restarts
//! PostgreSQL with the page cache dropped or reboots the machine, once per round (the
//! journal's `sweep` state).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use super::dataset::{self, phase::Moment};
use super::{Check, Context, Looking, Product, Step};
use crate::journal::StepName;
use crate::plan::{BetweenRounds, Checksums, SweepOrder};
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::Session;
use crate::postgres::stats;
use crate::results::{PointResult, PointStatus, RESULTS_SCHEMA_VERSION};
use crate::runner::{CommandError, CommandSpec};
use crate::sampler::Sampler;
use crate::sweep::{expand, same_series, wants_another_round, SweepPoint};
use crate::workload::{self, Kind as _, Measured, PointEnv};

pub(crate) struct Sweep;

pub(crate) fn points(cx: &Context) -> Result<Vec<SweepPoint>> {
    Ok(expand(&cx.plan, cx.inventory()?.cpu.cpus))
}

/// A point's recorded result: its journal entry and a readable JSON that matches it.
fn recorded_result(cx: &Context, p: &SweepPoint) -> Option<PointResult> {
    let rec = cx.journal.state.points.get(&p.id)?;
    std::fs::read_to_string(cx.run_dir.join(&rec.result))
        .ok()
        .and_then(|t| serde_json::from_str::<PointResult>(&t).ok())
        .filter(|r| r.matches(p))
}

/// Whether a point already has its result on disk (journal entry plus a readable JSON).
pub(crate) fn recorded(cx: &Context, p: &SweepPoint) -> bool {
    recorded_result(cx, p).is_some()
}

/// Whether point `i` is measured. Every point is but a round of adaptive repeats past
/// `min`, which is while the 95 % interval of the mean tps of the point's earlier rounds
/// is wider than its bound (or while an earlier round that may still run is not recorded:
/// undecided counts as wanted), and a warm-up, which is when the measured point after it
/// is. Decided from the recorded results alone.
pub(crate) fn wanted(cx: &Context, points: &[SweepPoint], i: usize) -> bool {
    let p = &points[i];
    if p.warmup {
        return match points.get(i + 1) {
            Some(next) if !next.warmup && next.workload == p.workload => wanted(cx, points, i + 1),
            _ => true,
        };
    }
    let Some(ci) = p.while_ci_wider_than_pct else {
        return true;
    };
    let mut tps = Vec::new();
    for q in points
        .iter()
        .filter(|q| same_series(q, p) && q.repeat < p.repeat)
    {
        match recorded_result(cx, q) {
            Some(r) => {
                if r.status == PointStatus::Ok {
                    tps.extend(r.tps());
                }
            }
            // An earlier round not run yet: it decides nothing yet, unless it is itself a
            // round the figures so far already leave out (then so is this one).
            None => {
                return q.while_ci_wider_than_pct.is_none() || wants_another_round(ci, &tps);
            }
        }
    }
    wants_another_round(ci, &tps)
}

impl Step for Sweep {
    const NAME: StepName = StepName::Sweep;
    const NEEDS: &'static [Product] = &[Product::Inventory, Product::Server];
    const GIVES: &'static [Product] = &[];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        let points = points(cx)?;
        let done: Vec<bool> = points.iter().map(|p| recorded(cx, p)).collect();
        let todo = (0..points.len())
            .filter(|&i| !done[i] && wanted(cx, &points, i))
            .count();
        // Adaptive rounds left out count no more; those still undecided do.
        let total = done.iter().filter(|d| **d).count() + todo;
        Ok(if todo == 0 {
            Check::Done
        } else {
            Check::Todo(format!("{todo} of {total} points to run"))
        })
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        let points = points(cx)?;
        let total = points.len();
        let rounds = points.iter().map(|p| p.repeat).max().unwrap_or(1);
        let between = cx.plan.sweep.between_rounds;
        if between == BetweenRounds::Reboot && rounds > 1 && !cx.host.reboots() {
            anyhow::bail!(
                "[sweep] between_rounds = \"reboot\" needs the appliance: this host does not reboot the machine (use \"restart\" or \"none\" for a local run)"
            );
        }
        let adaptive = points.iter().any(|p| p.while_ci_wider_than_pct.is_some());
        for n in 0..points.len() {
            let p = &points[n];
            // Decided now, from every point recorded so far: an adaptive round runs only
            // while the earlier rounds leave its interval too wide. A warm-up counts only
            // together with the point it warms: when that point is still to run (it was
            // interrupted), its warm-up runs again right before it, so no restore and no
            // restart come between them.
            if n == 0 || (adaptive && !p.warmup) {
                record_total(cx, &points)?;
            }
            let todo = |i: usize| !recorded(cx, &points[i]) && wanted(cx, &points, i);
            let warms_todo = p.warmup
                && points
                    .get(n + 1)
                    .is_some_and(|next| !next.warmup && next.workload == p.workload && todo(n + 1));
            if !(todo(n) || warms_todo) {
                continue;
            }
            if cx.plan.sweep.order == SweepOrder::Rounds && p.repeat > 1 {
                between_rounds(cx, between, p.repeat).await?;
            }
            let label = format!(
                "sweep {}/{total}: {} clients ({}{})",
                n + 1,
                p.clients,
                p.workload,
                if p.warmup { ", warm-up" } else { "" }
            );
            crate::notify::status(&label);
            // The data as the point needs it (put back from the snapshot when the plan's
            // restore policy or its checksum state asks), then the point starts on it.
            dataset::drive(cx, Moment::Point(p.clone())).await?;
            ensure_checksums(cx, p.checksums).await?;
            let result = run_point(cx, p, label).await?;
            if result.status == PointStatus::Failed {
                tracing::warn!(
                    point = %p.id,
                    error = result.error.as_deref().unwrap_or(""),
                    "point failed"
                );
            } else {
                tracing::info!(
                    point = %p.id,
                    clients = p.clients,
                    tps = result.tps().unwrap_or(0.0),
                    "point done"
                );
            }
        }
        dataset::drive(cx, Moment::SweepOver).await
    }
}

/// Records how many points the sweep measures: those recorded and those still wanted
/// (adaptive rounds left out count no more; those still undecided do).
fn record_total(cx: &mut Context, points: &[SweepPoint]) -> Result<()> {
    let planned = (0..points.len())
        .filter(|&i| recorded(cx, &points[i]) || wanted(cx, points, i))
        .count();
    if cx.journal.state.points_total != planned {
        cx.journal.state.points_total = planned;
        cx.journal.save()?;
    }
    Ok(())
}

/// Before the first point measured in round `round` (after the first): what
/// `[sweep] between_rounds` asks, once per round. `restart`: PostgreSQL stopped, the page
/// cache dropped, PostgreSQL started. `reboot`: the boot is recorded, then the machine
/// reboots; after the boot the sweep resumes here and finds the round's boot done.
async fn between_rounds(cx: &mut Context, between: BetweenRounds, round: u32) -> Result<()> {
    if between == BetweenRounds::None || cx.journal.state.state.sweep.prepared_round >= round {
        return Ok(());
    }
    match between {
        BetweenRounds::None => {}
        BetweenRounds::Restart => {
            crate::notify::status(&format!(
                "sweep: restarting PostgreSQL with the page cache dropped before round {round}"
            ));
            tracing::info!(round, "restarting PostgreSQL with the page cache dropped");
            let cluster = cx.server()?.clone();
            cluster.stop().await?;
            cx.host
                .drop_page_cache()
                .context("[sweep] between_rounds = \"restart\" drops the page cache")?;
            cluster.start().await?;
        }
        BetweenRounds::Reboot => {
            let boot = cx.host.boot_id()?;
            let sweep = &cx.journal.state.state.sweep;
            let rebooted = sweep.reboot_for_round == Some(round)
                && sweep.reboot_from_boot.as_deref().is_some_and(|b| b != boot);
            if !rebooted {
                cx.journal.update(|s| {
                    s.sweep.reboot_for_round = Some(round);
                    s.sweep.reboot_from_boot = Some(boot);
                })?;
                cx.journal.begin(
                    StepName::Sweep,
                    Some(&format!("reboot before round {round}")),
                )?;
                crate::notify::status(&format!("sweep: rebooting before round {round}"));
                tracing::info!(round, "rebooting between rounds");
                match cx.host.reboot().await? {}
            }
            tracing::info!(round, "rebooted between rounds");
        }
    }
    cx.journal.update(|s| s.sweep.prepared_round = round)
}

/// Brings the cluster's data checksums to the state a point needs.
async fn ensure_checksums(cx: &mut Context, want: Option<Checksums>) -> Result<()> {
    let Some(want) = want else { return Ok(()) };
    let cluster = cx.server()?.clone();
    let enabled = cluster.checksums_enabled().await?;
    let want_on = want == Checksums::On;
    if enabled == want_on {
        return Ok(());
    }
    let verb = if want_on { "enable" } else { "disable" };
    cx.journal
        .begin(StepName::Sweep, Some(&format!("checksums-{verb}")))?;
    crate::notify::status(&format!("sweep: pg_checksums --{verb}"));
    let raw = cx.raw();
    cluster
        .set_checksums(
            want_on,
            &raw.join(format!("pg_checksums-{verb}.stdout")),
            &raw.join(format!("pg_checksums-{verb}.stderr")),
        )
        .await?;
    Ok(())
}

async fn run_point(cx: &mut Context, p: &SweepPoint, label: String) -> Result<PointResult> {
    let attempt = cx.journal.begin_point(&p.id)?;
    let raw = cx
        .raw()
        .join("points")
        .join(&p.id)
        .join(format!("attempt-{attempt}"));
    // The point's elapsed time of its -T, with pgbench's own --progress line (stderr) or
    // sysbench's per-interval line (stdout).
    let total = match p.limit {
        crate::sweep::Limit::DurationS(s) => Some(std::time::Duration::from_secs(s)),
        crate::sweep::Limit::Transactions(_) => None,
    };
    let tail = raw.join(if p.tpcc.is_some() {
        "stdout.txt"
    } else {
        "stderr.txt"
    });
    let progress = crate::progress::Progress::start(
        crate::progress::Kind::Point,
        label,
        total,
        Some(crate::progress::Detail::Tail(tail)),
    );
    let result = measure_point(cx, p, &raw, attempt).await;
    drop(progress);
    let result = result?;
    let rel = format!("points/{}.json", p.id);
    crate::fsutil::write_json(&cx.run_dir.join(&rel), &result)?;
    cx.journal.finish_point(&p.id, &rel)?;
    Ok(result)
}

/// What a point's command needs from the run (the workload's scripts put in place when
/// its kind has any).
pub(crate) async fn point_env<'a>(cx: &'a Context, p: &SweepPoint) -> Result<PointEnv<'a>> {
    let scripts_dir = if workload::of(p.kind).needs_scripts() {
        Some(super::tpcc::script_dir(cx).await?)
    } else {
        None
    };
    Ok(PointEnv {
        cluster: cx.server()?,
        database: &cx.plan.dataset.database,
        bench_user: cx.host.bench_user(),
        scripts_dir,
    })
}

/// The pgbench command line of a pgbench point, logs going to `raw` (the benchmarks'
/// point; the sweep asks the point's kind).
pub(crate) fn point_command(cx: &Context, p: &SweepPoint, raw: &Path) -> Result<CommandSpec> {
    let env = PointEnv {
        cluster: cx.server()?,
        database: &cx.plan.dataset.database,
        bench_user: cx.host.bench_user(),
        scripts_dir: None,
    };
    workload::pgbench::Pgbench.command(p, &env, raw)
}

/// CHECKPOINT (when the point asks), statistics reset and snapshot; returns the snapshot.
pub(crate) async fn before_point(cx: &Context, p: &SweepPoint) -> Result<stats::Snapshot> {
    let cluster = cx.server()?;
    let major = cluster.bin.major;
    let s = Session::connect(
        &cluster.socket_dir(),
        cluster.port,
        SUPERUSER,
        &p.database(&cx.plan),
    )
    .await?;
    if p.checkpoint {
        s.execute("CHECKPOINT").await?;
    }
    stats::reset(&s, major).await?;
    stats::snapshot(&s, major).await
}

/// Runs one point into a fresh `raw` directory with the OS sampler and statistics, and
/// parses everything pgbench left there. Writes nothing else.
pub(crate) async fn measure_point(
    cx: &Context,
    p: &SweepPoint,
    raw: &Path,
    attempt: u32,
) -> Result<PointResult> {
    if raw.exists() {
        std::fs::remove_dir_all(raw).with_context(|| format!("clearing {}", raw.display()))?;
    }
    crate::fsutil::create_dir_all(raw)?;
    if let Some(user) = cx.host.bench_user() {
        // pgbench writes its transaction logs into its working directory.
        let id = crate::sys::lookup_user(user)?;
        nix::unistd::chown(
            raw,
            Some(nix::unistd::Uid::from_raw(id.uid)),
            Some(nix::unistd::Gid::from_raw(id.gid)),
        )
        .with_context(|| format!("giving {} to {user}", raw.display()))?;
    }
    let cluster = cx.server()?.clone();
    let bin = cluster.bin.clone();
    let cpus = cx.inventory()?.cpu.cpus;
    let db = p.database(&cx.plan);
    let socket_dir = cluster.socket_dir();
    let connect = || Session::connect(&socket_dir, cluster.port, SUPERUSER, &db);
    // The session is closed before pgbench starts so every connection slot is pgbench's.
    let before = before_point(cx, p).await?;
    let kind = workload::of(p.kind);
    let spec = kind.command(p, &point_env(cx, p).await?, raw)?;
    let (stdout, stderr) = (raw.join("stdout.txt"), raw.join("stderr.txt"));
    let started_at = crate::clock::now();
    let t0 = Instant::now();
    let sampler = Sampler::start(Duration::from_secs(1));
    let exec = cx.runner.run(&spec).await;
    let wall_s = t0.elapsed().as_secs_f64();
    let os = sampler.stop().await;
    let stats = {
        let s = connect().await?;
        // A backend reports its counters when it exits; pgbench or sysbench having exited
        // does not mean every server backend has: wait for them, or the delta misses some.
        stats::wait_for_other_backends(&s, Duration::from_secs(10)).await?;
        let after = stats::snapshot(&s, bin.major).await?;
        let wal = match (&before.wal_lsn, &after.wal_lsn) {
            (Some(a), Some(b)) => stats::wal_bytes(&s, a, b).await?,
            _ => None,
        };
        stats::delta(&before, &after, wal)
    };
    let (command_error, cpu) = match exec {
        Ok(out) => (None, out.cpu),
        Err(e @ CommandError::Failed { .. }) => (Some(e.to_string()), None),
        Err(e) => return Err(e.into()),
    };
    let out_text = std::fs::read_to_string(&stdout).unwrap_or_default();
    let err_text = std::fs::read_to_string(&stderr).unwrap_or_default();
    let Measured {
        summary,
        sysbench,
        latency,
        tps_series,
        error,
    } = kind.read(p, raw, bin.major, &out_text, &err_text, command_error)?;
    let status = if error.is_some() {
        PointStatus::Failed
    } else {
        PointStatus::Ok
    };
    let result = PointResult {
        schema_version: RESULTS_SCHEMA_VERSION,
        id: p.id.clone(),
        workload: p.workload.clone(),
        kind: p.kind,
        builtin: p.builtin,
        clients: p.clients,
        threads: p.threads,
        limit: p.limit,
        protocol: p.protocol,
        repeat: p.repeat,
        checksums: p.checksums,
        status,
        error,
        attempt,
        started_at,
        finished_at: crate::clock::now(),
        wall_s,
        command: spec.display(),
        raw_dir: cx.rel(raw),
        summary,
        sysbench,
        latency,
        steady: crate::results::steady::steady_window(&tps_series),
        // Over a failed point the client's CPU says nothing about the server.
        client: cpu
            .filter(|_| status == PointStatus::Ok)
            .and_then(|cpu| crate::results::client::client_cpu(cpu, wall_s, p.threads, cpus)),
        tps_series,
        stats: Some(stats),
        os,
    };
    Ok(result)
}
