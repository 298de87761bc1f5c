//! Sweep: every point of the expanded plan, in order. A point recorded in the journal with
//! its JSON on disk is never run again; an interrupted point is rerun as a new attempt in a
//! fresh raw directory, so each point appears exactly once in the results.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::dataset::conn_args;
use super::Run;
use crate::journal::StepName;
use crate::pgbench::{latency_from_logs, log_files, parse_progress, parse_summary};
use crate::plan::{Checksums, LatencyLog};
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::Session;
use crate::postgres::stats;
use crate::results::{PointResult, PointStatus, RESULTS_SCHEMA_VERSION};
use crate::runner::{CommandError, CommandSpec};
use crate::sampler::Sampler;
use crate::sweep::{expand, pgbench_args, Limit, SweepPoint};

/// Base name of pgbench's latency logs inside a point's raw directory.
const LOG_NAME: &str = "pgbench_log";

pub fn points(run: &Run) -> Result<Vec<SweepPoint>> {
    Ok(expand(&run.plan, run.inventory()?.cpu.cpus))
}

/// Whether a point already has its result on disk (journal entry plus a readable JSON).
pub fn recorded(run: &Run, p: &SweepPoint) -> bool {
    run.journal.state.points.get(&p.id).is_some_and(|rec| {
        std::fs::read_to_string(run.run_dir.join(&rec.result))
            .ok()
            .and_then(|t| serde_json::from_str::<PointResult>(&t).ok())
            .is_some_and(|r| r.matches(p))
    })
}

pub async fn run(run: &mut Run) -> Result<()> {
    let points = points(run)?;
    let total = points.len();
    if run.journal.state.points_total != total {
        run.journal.state.points_total = total;
        run.journal.save()?;
    }
    let todo: Vec<&SweepPoint> = points.iter().filter(|p| !recorded(run, p)).collect();
    if todo.is_empty() {
        if !run.journal.is_done(StepName::Sweep) {
            run.journal.begin(StepName::Sweep, None)?;
            run.journal.finish(StepName::Sweep, 0.0)?;
        }
        return Ok(());
    }
    let t0 = Instant::now();
    run.journal.begin(StepName::Sweep, None)?;
    for p in points.iter() {
        if recorded(run, p) {
            continue;
        }
        let ordinal = points.iter().position(|q| q.id == p.id).unwrap_or(0) + 1;
        crate::notify::status(&format!(
            "sweep {ordinal}/{total}: {} clients ({}{})",
            p.clients,
            p.workload,
            if p.warmup { ", warm-up" } else { "" }
        ));
        ensure_checksums(run, p.checksums).await?;
        let result = run_point(run, p).await?;
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
    run.journal
        .finish(StepName::Sweep, t0.elapsed().as_secs_f64())
}

/// Brings the cluster's data checksums to the state a point needs.
async fn ensure_checksums(run: &mut Run, want: Option<Checksums>) -> Result<()> {
    let Some(want) = want else { return Ok(()) };
    let cluster = run.cluster()?.clone();
    let enabled = cluster.checksums_enabled().await?;
    let want_on = want == Checksums::On;
    if enabled == want_on {
        return Ok(());
    }
    let verb = if want_on { "enable" } else { "disable" };
    run.journal
        .begin(StepName::Sweep, Some(&format!("checksums-{verb}")))?;
    crate::notify::status(&format!("sweep: pg_checksums --{verb}"));
    let raw = run.run_dir.join("raw");
    cluster
        .set_checksums(
            want_on,
            &raw.join(format!("pg_checksums-{verb}.stdout")),
            &raw.join(format!("pg_checksums-{verb}.stderr")),
        )
        .await?;
    Ok(())
}

fn nofile_for(clients: u32) -> u64 {
    (u64::from(clients) * 2 + 256).max(4096)
}

async fn run_point(run: &mut Run, p: &SweepPoint) -> Result<PointResult> {
    let attempt = run.journal.begin_point(&p.id)?;
    let raw = run
        .run_dir
        .join("raw")
        .join("points")
        .join(&p.id)
        .join(format!("attempt-{attempt}"));
    let result = measure_point(run, p, &raw, attempt).await?;
    let rel = format!("points/{}.json", p.id);
    crate::fsutil::write_json(&run.run_dir.join(&rel), &result)?;
    run.journal.finish_point(&p.id, &rel)?;
    Ok(result)
}

/// The pgbench command line of a point, logs going to `raw`.
pub fn point_command(run: &Run, p: &SweepPoint, raw: &Path) -> Result<CommandSpec> {
    let bin = run.bin()?;
    let mut args = conn_args(run)?;
    args.extend(pgbench_args(p, &raw.join(LOG_NAME).display().to_string()));
    args.push(run.plan.dataset.database.clone());
    let mut spec = CommandSpec::new(bin.tool("pgbench"))
        .args(args)
        .cwd(raw)
        .user(run.bench_user())
        .output_files(&raw.join("stdout.txt"), &raw.join("stderr.txt"))
        .limit_nofile(nofile_for(p.clients));
    if let Limit::DurationS(s) = p.limit {
        spec = spec.timeout(Duration::from_secs(s + 600));
    }
    Ok(spec)
}

/// CHECKPOINT (when the point asks), statistics reset and snapshot; returns the snapshot.
pub async fn before_point(run: &Run, p: &SweepPoint) -> Result<stats::Snapshot> {
    let cluster = run.cluster()?;
    let major = run.bin()?.major;
    let s = Session::connect(
        &cluster.socket_dir(),
        cluster.port,
        SUPERUSER,
        &run.plan.dataset.database,
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
pub async fn measure_point(
    run: &Run,
    p: &SweepPoint,
    raw: &Path,
    attempt: u32,
) -> Result<PointResult> {
    if raw.exists() {
        std::fs::remove_dir_all(raw).with_context(|| format!("clearing {}", raw.display()))?;
    }
    crate::fsutil::create_dir_all(raw)?;
    if let Some(user) = run.bench_user() {
        // pgbench writes its transaction logs into its working directory.
        let id = crate::sys::lookup_user(user)?;
        nix::unistd::chown(
            raw,
            Some(nix::unistd::Uid::from_raw(id.uid)),
            Some(nix::unistd::Gid::from_raw(id.gid)),
        )
        .with_context(|| format!("giving {} to {user}", raw.display()))?;
    }
    let cluster = run.cluster()?.clone();
    let bin = run.bin()?.clone();
    let db = run.plan.dataset.database.clone();
    let socket_dir = cluster.socket_dir();
    let connect = || Session::connect(&socket_dir, cluster.port, SUPERUSER, &db);
    // The session is closed before pgbench starts so every connection slot is pgbench's.
    let before = before_point(run, p).await?;
    let spec = point_command(run, p, raw)?;
    let (stdout, stderr) = (raw.join("stdout.txt"), raw.join("stderr.txt"));
    let started_at = crate::journal::now();
    let t0 = Instant::now();
    let sampler = Sampler::start(Duration::from_secs(1));
    let exec = run.runner.run(&spec).await;
    let wall_s = t0.elapsed().as_secs_f64();
    let os = sampler.stop().await;
    let stats = {
        let s = connect().await?;
        let after = stats::snapshot(&s, bin.major).await?;
        let wal = match (&before.wal_lsn, &after.wal_lsn) {
            (Some(a), Some(b)) => stats::wal_bytes(&s, a, b).await?,
            _ => None,
        };
        stats::delta(&before, &after, wal)
    };
    let command_error = match exec {
        Ok(_) => None,
        Err(e @ CommandError::Failed { .. }) => Some(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    let out_text = std::fs::read_to_string(&stdout).unwrap_or_default();
    let err_text = std::fs::read_to_string(&stderr).unwrap_or_default();
    let summary = parse_summary(&out_text);
    let mut error = command_error;
    let summary = match summary {
        Ok(s) => Some(s),
        Err(e) => {
            error = Some(match error {
                Some(cmd) => format!("{e}; {cmd}"),
                None => e.to_string(),
            });
            None
        }
    };
    let latency = if p.warmup || summary.is_none() {
        None
    } else {
        let files = log_files(raw, LOG_NAME)?;
        match latency_from_logs(&files, p.latency_log == LatencyLog::Aggregate, bin.major) {
            Ok(l) => Some(l),
            Err(e) => {
                error.get_or_insert_with(|| format!("latency log: {e}"));
                None
            }
        }
    };
    let tps_series = match parse_progress(&err_text) {
        Ok(series) => series,
        Err(e) => {
            error.get_or_insert_with(|| e.to_string());
            Vec::new()
        }
    };
    let status = if error.is_some() {
        PointStatus::Failed
    } else {
        PointStatus::Ok
    };
    let result = PointResult {
        schema_version: RESULTS_SCHEMA_VERSION,
        id: p.id.clone(),
        workload: p.workload.clone(),
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
        finished_at: crate::journal::now(),
        wall_s,
        command: spec.display(),
        raw_dir: run.rel(raw),
        summary,
        latency,
        tps_series,
        stats: Some(stats),
        os,
    };
    Ok(result)
}
