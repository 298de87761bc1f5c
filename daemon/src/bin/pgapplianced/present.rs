//! How the benchmarks' figures are shown: one line per measurement as it is made, then the
//! summary, the ratio against the named baseline last (docs/performance.md reads it).

use pgappliance::bench::init::{InitEvent, InitReport};
use pgappliance::bench::overhead::OverheadReport;
use pgappliance::bench::upload::UploadBenchReport;

pub fn overhead(r: &OverheadReport) {
    println!(
        "{} point pairs; daemon CPU {:.3} s over {:.1} s of sweep through the appliance",
        r.pairs.len(),
        r.daemon_cpu_s,
        r.sweep_wall_s
    );
    println!(
        "daemon CPU per minute of sweep: {:.3} s",
        r.cpu_per_minute()
    );
    println!("harness tps ratio: {:.3}", r.ratio);
}

pub fn init_event(e: &InitEvent) {
    match e {
        InitEvent::Phases { workers, phases } => {
            let phases: Vec<String> = phases
                .iter()
                .map(|(p, s)| format!("{p} {s:.2} s"))
                .collect();
            println!(
                "  parallel, {workers} worker(s) phases: {}",
                phases.join(", ")
            );
        }
        InitEvent::Timed {
            round,
            candidate,
            seconds,
        } => println!("round {round}: {}: {seconds:.2} s", candidate.label()),
    }
}

pub fn init(r: &InitReport) {
    println!("scale {}, {} round(s), medians:", r.scale, r.rounds);
    for (cand, m) in &r.medians {
        println!("  {}: {m:.2} s", cand.label());
    }
    for (cand, speedup) in r.speedups() {
        println!(
            "  {} speedup vs best pgbench mode: {speedup:.2}",
            cand.label()
        );
    }
    println!("init speedup vs best pgbench mode: {:.2}", r.ratio());
}

pub fn upload(r: &UploadBenchReport) {
    let mib = r.size_mib as f64;
    println!(
        "pgappliance upload: {mib:.0} MiB in {:.2} s = {:.1} MiB/s (sha256, multipart, read-back verified), peak RSS {:.1} MiB",
        r.ours_s,
        mib / r.ours_s,
        r.peak_rss_mib
    );
    println!(
        "aws s3 cp: {mib:.0} MiB in {:.2} s = {:.1} MiB/s",
        r.awscli_s,
        mib / r.awscli_s
    );
    println!("upload throughput vs awscli: {:.2}", r.ratio());
}
