//! How the benchmarks' figures are shown: one line per measurement as it is made, then the
//! summary, the ratio against the named baseline last (docs/performance.md reads it).

use pgappliance::bench::init::{InitEvent, InitReport};
use pgappliance::bench::overhead::OverheadReport;
use pgappliance::bench::upload::UploadBenchReport;

pub(crate) fn overhead(r: &OverheadReport) {
    pgappliance::outln!(
        "{} point pairs; daemon CPU {:.3} s over {:.1} s of sweep through the appliance",
        r.pairs.len(),
        r.daemon_cpu_s,
        r.sweep_wall_s
    );
    pgappliance::outln!(
        "daemon CPU per minute of sweep: {:.3} s",
        r.cpu_per_minute()
    );
    pgappliance::outln!("harness tps ratio: {:.3}", r.ratio);
}

pub(crate) fn init_event(e: &InitEvent) {
    match e {
        InitEvent::Phases { workers, phases } => {
            let phases: Vec<String> = phases
                .iter()
                .map(|(p, s)| format!("{p} {s:.2} s"))
                .collect();
            pgappliance::outln!(
                "  parallel, {workers} worker(s) phases: {}",
                phases.join(", ")
            );
        }
        InitEvent::Timed {
            round,
            candidate,
            seconds,
        } => pgappliance::outln!("round {round}: {}: {seconds:.2} s", candidate.label()),
    }
}

pub(crate) fn init(r: &InitReport) {
    pgappliance::outln!("scale {}, {} round(s), medians:", r.scale, r.rounds);
    for (cand, m) in &r.medians {
        pgappliance::outln!("  {}: {m:.2} s", cand.label());
    }
    for (cand, speedup) in r.speedups() {
        pgappliance::outln!(
            "  {} speedup vs best pgbench mode: {speedup:.2}",
            cand.label()
        );
    }
    pgappliance::outln!("init speedup vs best pgbench mode: {:.2}", r.ratio());
}

pub(crate) fn restore_event(e: &pgappliance::bench::restore::RestoreEvent) {
    use pgappliance::bench::restore::RestoreEvent;
    match e {
        RestoreEvent::Note(text) => pgappliance::outln!("{text}"),
        RestoreEvent::Timed {
            round,
            candidate,
            seconds,
        } => pgappliance::outln!("round {round}: {}: {seconds:.2} s", candidate.label()),
    }
}

pub(crate) fn restore(run: &pgappliance::bench::restore::RestoreRun) {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    for r in &run.reports {
        pgappliance::outln!(
            "compression of the archive, first {:.0} MiB, one thread:",
            mib(r.sample_bytes)
        );
        for c in &r.codecs {
            pgappliance::outln!(
                "  {}: {:.1} % of the size, compress {:.0} MiB/s, decompress {:.0} MiB/s",
                c.codec,
                c.ratio * 100.0,
                c.compress_mib_s,
                c.decompress_mib_s
            );
        }
        pgappliance::outln!(
            "scale {}, data directory {:.0} MiB, in the store {:.0} MiB, {} round(s), medians:",
            r.scale,
            mib(r.data_bytes),
            mib(r.archive_bytes),
            r.rounds
        );
        for (cand, m) in &r.medians {
            pgappliance::outln!("  {}: {m:.2} s", cand.label());
        }
        pgappliance::outln!(
            "local restore with every chunk hashed (a dataset step's first): speedup {:.2}",
            r.verified_speedup()
        );
        pgappliance::outln!(
            "restore floor here: {:.2} s (restart + write), local speedup ceiling {:.2}",
            r.floor_s(),
            r.ceiling()
        );
        pgappliance::outln!(
            "object store restore into a new directory (an appliance's first): speedup {:.2}; floor there {:.2} s (restart + making the files + write)",
            r.store_new_speedup(),
            r.new_dir_floor_s()
        );
        pgappliance::outln!(
            "scale {}: speedup vs best pgbench mode {:.2} local, {:.2} store",
            r.scale,
            r.local_speedup(),
            r.store_speedup()
        );
    }
    let Some(first) = run.reports.first() else {
        return;
    };
    pgappliance::outln!(
        "store restore threads {} vs 1: {:.2}",
        first.threads,
        first.threads_speedup()
    );
    pgappliance::outln!("first restore speedup: {:.2}", first.store_new_speedup());
    if let Some((a, b, g)) = run.growth() {
        pgappliance::outln!(
            "local restore growth from scale {a} to {b} on {}: {g:.2}",
            run.dir.display()
        );
    }
    pgappliance::outln!(
        "restore speedup vs best pgbench mode: {:.2} local, {:.2} store",
        first.local_speedup(),
        first.store_speedup()
    );
}

pub(crate) fn upload(r: &UploadBenchReport) {
    let mib = r.size_mib as f64;
    pgappliance::outln!(
        "pgappliance upload: {mib:.0} MiB in {:.2} s = {:.1} MiB/s (sha256, multipart, read-back verified), peak RSS {:.1} MiB",
        r.ours_s,
        mib / r.ours_s,
        r.peak_rss_mib
    );
    pgappliance::outln!(
        "aws s3 cp: {mib:.0} MiB in {:.2} s = {:.1} MiB/s",
        r.awscli_s,
        mib / r.awscli_s
    );
    pgappliance::outln!("upload throughput vs awscli: {:.2}", r.ratio());
}

/// `pgapplianced status`.
pub(crate) fn status(workdir: &std::path::Path) -> anyhow::Result<i32> {
    let s = pgappliance::engine::status::read(workdir)?;
    let j = &s.journal;
    pgappliance::outln!("run {} (started {})", j.run_id, j.started_at);
    for (step, _) in pgappliance::engine::ORDER {
        let line = match j.steps.get(&step) {
            Some(r) if r.finished_at.is_some() => format!(
                "done in {:.1} s{}",
                r.duration_s.unwrap_or(0.0),
                if r.attempts > 1 {
                    format!(" ({} attempts)", r.attempts)
                } else {
                    String::new()
                }
            ),
            Some(_) => "started".to_string(),
            None => "-".to_string(),
        };
        pgappliance::outln!("  {:<10} {line}", step.as_str());
    }
    if let Some(p) = &j.pending {
        pgappliance::outln!(
            "current: {}{} since {}",
            p.step.as_str(),
            p.item
                .as_deref()
                .map(|i| format!(" {i}"))
                .unwrap_or_default(),
            p.started_at
        );
    }
    pgappliance::outln!("points: {}/{}", j.points.len(), j.points_total);
    match s.daemon {
        Some(pid) => pgappliance::outln!("daemon: running (pid {pid})"),
        None => pgappliance::outln!("daemon: not running"),
    }
    if let Some(last) = &s.last {
        pgappliance::outln!("last report: {} ({})", last.text, ago(&last.at));
    } else if let Some(at) = &j.updated_at {
        pgappliance::outln!("last journal update: {}", ago(at));
    }
    if let Some(f) = &j.failure {
        if f.refused {
            pgappliance::outln!(
                "stopped: refused in step {} at {}: {}",
                f.step.as_str(),
                f.at,
                f.error
            );
            pgappliance::outln!(
                "  change the plan (or the machine) as it says, then `pgapplianced reset` and start again"
            );
        } else {
            pgappliance::outln!(
                "stopped: step {} failed at {}: {}",
                f.step.as_str(),
                f.at,
                f.error
            );
            if s.daemon.is_none() {
                pgappliance::outln!(
                    "  start it again to resume, or `pgapplianced reset` to put this run aside"
                );
            }
        }
    }
    match &j.finished_at {
        Some(t) => pgappliance::outln!("finished {t}"),
        None => {
            pgappliance::outln!("not finished");
            if let Some(e) = &s.estimate {
                let known = e.points_left - e.unknown_points;
                let unknown = format!(
                    "{} point(s) of unknown length (-t, none of their workload finished yet)",
                    e.unknown_points
                );
                let mut before = Vec::new();
                if e.dataset_s > 0.0 {
                    before.push(format!(
                        "about {} for the dataset's generation (at pgbench -i's pace on a 2-vCPU VM; the log shows its own progress)",
                        duration(e.dataset_s)
                    ));
                }
                if e.prepares_left > 0 {
                    before.push(format!(
                        "at least {} for {} sysbench-tpcc prepare(s)",
                        duration(
                            e.prepares_left as f64
                                * pgappliance::engine::status::TPCC_PREPARE_MIN_S
                        ),
                        e.prepares_left
                    ));
                }
                if !before.is_empty() {
                    pgappliance::outln!("before the sweep: {}", before.join(", "));
                }
                match (known, e.unknown_points) {
                    (0, 0) => {}
                    (0, _) => pgappliance::outln!("time left: {unknown}"),
                    (k, 0) => pgappliance::outln!(
                        "time left: about {} for {k} point(s)",
                        duration(e.seconds)
                    ),
                    (k, _) => pgappliance::outln!(
                        "time left: about {} for {k} point(s), and {unknown}",
                        duration(e.seconds)
                    ),
                }
            }
        }
    }
    if s.done_marker {
        pgappliance::outln!(
            "done marker present: the appliance will not run again until `pgapplianced reset`"
        );
    }
    Ok(0)
}

/// "12 s ago" for an RFC 3339 time (the time itself when it does not read).
fn ago(at: &str) -> String {
    match humantime::parse_rfc3339(at)
        .ok()
        .and_then(|t| t.elapsed().ok())
    {
        Some(d) => format!("{} ago, at {at}", duration(d.as_secs_f64())),
        None => at.to_string(),
    }
}

fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", (s + 30) / 60),
        _ => format!("{:.1} h", s as f64 / 3600.0),
    }
}

/// `pgapplianced reset`: what was done, then what to do next.
pub(crate) fn reset(o: &pgappliance::engine::reset::ResetOutcome, workdir: &std::path::Path) {
    for (archive, result) in &o.retried {
        match result {
            Ok(where_) => pgappliance::outln!(
                "earlier evidence in {} uploaded: {where_}",
                archive.display()
            ),
            Err(why) => pgappliance::outln!(
                "earlier evidence in {} not uploaded yet: {why}",
                archive.display()
            ),
        }
    }
    if o.run_id.is_empty() {
        pgappliance::outln!("no run to put aside");
        return;
    }
    pgappliance::outln!(
        "run {}{} put aside in {}",
        o.run_id,
        if o.was_finished { " (finished)" } else { "" },
        o.archived_to.display()
    );
    if let Some(s) = &o.stopped {
        pgappliance::outln!("{s}");
    }
    match &o.upload {
        Ok(where_) => pgappliance::outln!("evidence uploaded: {where_}"),
        Err(why) => pgappliance::outln!("evidence not uploaded: {why}"),
    }
    pgappliance::outln!("the next run starts clean");
    for line in reset_next(o, workdir) {
        pgappliance::outln!("next: {line}");
    }
}

/// What to do after a reset (pure): fix the plan when the run was refused, then start the
/// next run, the appliance's way or local mode's.
pub(crate) fn reset_next(
    o: &pgappliance::engine::reset::ResetOutcome,
    workdir: &std::path::Path,
) -> Vec<String> {
    let mut next = Vec::new();
    if o.refused {
        next.push(format!(
            "the run was refused: change the plan (or the machine) as its error said ({}/state.json keeps it) before the next run, or it is refused again",
            o.archived_to.display()
        ));
    }
    next.push(if o.appliance {
        format!(
            "start the next run with `systemctl start pgapplianced` (or a reboot): it runs {}",
            pgappliance::platform::APPLIANCE_PLAN
        )
    } else {
        format!(
            "start the next run with `pgapplianced run --local PLAN --workdir {}`",
            workdir.display()
        )
    });
    next
}
