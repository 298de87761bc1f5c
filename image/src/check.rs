//! `pgappliance check`: the daemon's plan parser and validator, run ahead of the build,
//! and the warnings about what a valid plan may still get wrong.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use pgappliance::plan::{BetweenRounds, Builtin, Checksums, Credentials, Devices, KeyPath, Plan};
use pgappliance::platform::Profile;
use pgappliance::sweep::{expand, Limit, SweepPoint};

/// `pgbench -i`'s pace (docs/performance.md), the same figure `pgapplianced status` uses.
const INIT_SECONDS_PER_SCALE: f64 = pgappliance::engine::status::INIT_SECONDS_PER_SCALE;

/// The plan's credentials file, when it names one that exists on this machine: mode,
/// owner and the profile, as the daemon will read it. One that is not here only warns: it
/// may be provisioned on the target later.
fn check_credentials_file(plan: &Plan) -> Result<Option<String>> {
    let Some(file) = plan.upload.credentials_file.as_deref() else {
        return Ok(None);
    };
    // A file:// store reads no credentials (a warning says so): nothing more to say.
    if plan.upload.credentials != Credentials::File || !plan.upload.store.starts_with("s3://") {
        return Ok(None);
    }
    let path = Path::new(file);
    if !path.exists() {
        // One sentence of where it must be and how it gets there, not two.
        return Ok(Some(match crate::build::credentials::target_file(plan) {
            Some(target) => format!(
                "credentials file {file} is not on this machine; {}",
                crate::build::credentials::undelivered_warning(plan, target)
            ),
            None => format!(
                "credentials file {file} is not on this machine; it must be there (mode 0600, owned by the daemon's user, profile \"{}\") when the daemon runs",
                plan.upload.profile()
            ),
        }));
    }
    pgappliance::upload::store::read_credentials_file(path, plan.upload.profile())?;
    Ok(None)
}

/// A `file://` sysbench-tpcc archive must be here: `build` packs it from this machine and
/// local mode reads it here. Present, it must be a regular file of the plan's sha256. An
/// http(s) source is left to `build` (it is not fetched by a check).
fn check_tpcc_source(plan: &Plan) -> std::result::Result<(), String> {
    use std::io::Read;
    let Some(sb) = &plan.sysbench else {
        return Ok(());
    };
    let Some(path) = sb.tpcc_source.strip_prefix("file://") else {
        return Ok(());
    };
    let limit = pgappliance::sysbench::scripts::MAX_ARCHIVE_BYTES;
    let mut bytes = Vec::new();
    pgappliance::fsutil::open_regular(Path::new(path))
        .and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "{path} is not on this machine: `build` packs the sysbench-tpcc archive from here (and local mode reads it here); put the archive there or name where it is"
                )
            } else {
                format!("the sysbench-tpcc archive cannot be read: {e}")
            }
        })?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{path} is larger than {} MiB: not a sysbench-tpcc release",
            limit >> 20
        ));
    }
    pgappliance::sysbench::scripts::verify(&bytes, sb, path).map_err(|e| format!("{e:#}"))
}

/// `check --packages DIR`: prints the packages the plan needs on its platform and which of
/// them DIR lacks (or what is wrong with DIR); false when it lacks some or is refused.
fn check_packages(
    path: &Path,
    plan: &Plan,
    args: &crate::build::medium::PackageArgs,
    dir: &Path,
) -> bool {
    let platform = Profile::of(plan.appliance.platform).name();
    let wanted = pgappliance::steps::packages::wanted(plan);
    pgappliance::outln!(
        "{}: packages the plan needs on {platform} {}: {}",
        path.display(),
        plan.appliance.arch.as_str(),
        wanted.join(" ")
    );
    match crate::build::medium::inventory(args, dir, plan) {
        Err(e) => {
            pgappliance::errln!("{}: {e:#}", path.display());
            false
        }
        Ok(inv) if inv.lacking.is_empty() => {
            pgappliance::outln!(
                "{}: {} has all of them ({} package files{})",
                path.display(),
                dir.display(),
                inv.packages.len(),
                if args.packages_key.is_empty() {
                    ""
                } else {
                    ", every signature checked"
                }
            );
            true
        }
        Ok(inv) => {
            pgappliance::errln!(
                "{}: {} lacks {}: download them into it (docs/launch.md)",
                path.display(),
                dir.display(),
                inv.lacking.join(" ")
            );
            false
        }
    }
}

/// `under 1 s`, `90 s`, `40 min`, `2 h 5 min`.
pub(crate) fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        "under 1 s".to_string()
    } else if s < 120 {
        format!("{s} s")
    } else if s < 2 * 3600 {
        format!("{} min", (s + 30) / 60)
    } else {
        let m = (s + 30) / 60;
        format!("{} h {} min", m / 60, m % 60)
    }
}

/// The throughput a `-t` point's time is estimated from, (slow, fast) in tps: the slow end
/// a small VM's (docs/performance.md's 2-vCPU machine runs TPC-B at about a thousand), the
/// fast end a large server's (scenario A's Altra: 44,133 tps of TPC-B at 1000 clients,
/// daemon/tests/fixtures/pgbench/v14-banner-distro-altra.txt). Read-only transactions are
/// one primary-key lookup, some twenty times cheaper.
fn tps_range(builtin: Builtin) -> (f64, f64) {
    match builtin {
        Builtin::TpcbLike | Builtin::SimpleUpdate => (1_000.0, 50_000.0),
        Builtin::SelectOnly => (20_000.0, 1_000_000.0),
    }
}

/// `1,935,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How long the sweep runs at least: the `-T` of every point and warm-up, and for points
/// bounded by `-t` a range from their transaction count at a large server's and a small
/// VM's throughput ([`tps_range`]).
pub(crate) fn run_time(plan: &Plan, points: &[SweepPoint]) -> String {
    let sweep = if points.iter().any(|p| p.while_ci_wider_than_pct.is_some()) {
        // Adaptive repeats: the points of the `min` rounds always run, the rest may.
        let fewest: Vec<SweepPoint> = points
            .iter()
            .filter(|p| p.while_ci_wider_than_pct.is_none())
            .cloned()
            .collect();
        format!(
            "adaptive repeats: from {} (every point's min rounds) to {} (every point's max rounds)",
            sweep_time(&fewest),
            sweep_time(points)
        )
    } else {
        sweep_time(points)
    };
    let between = match plan.sweep.between_rounds {
        BetweenRounds::None => "",
        BetweenRounds::Restart => {
            "a PostgreSQL restart with the page cache dropped before each round after the first, "
        }
        BetweenRounds::Reboot => "a reboot before each round after the first, ",
    };
    let scale = plan.dataset.scale;
    let init = Duration::from_secs_f64(f64::from(scale) * INIT_SECONDS_PER_SCALE);
    let pgbench_init = if plan.has_pgbench() {
        format!(
            "the dataset init (scale {scale}: roughly {} at the pace of pgbench -i on a 2-vCPU VM, docs/performance.md), ",
            human(init)
        )
    } else {
        String::new()
    };
    let prepares = plan.tpcc_datasets().len();
    let tpcc = if prepares > 0 {
        format!(
            "{prepares} sysbench-tpcc prepare(s) (each at least the script's fixed 30 s wait), "
        )
    } else {
        String::new()
    };
    format!(
        "{sweep}; plus {pgbench_init}{tpcc}{between}a checkpoint before each point and, on an appliance, the package install and the tuning reboot",
    )
}

/// The points' own time: `-T` summed, `-t` as a range.
fn sweep_time(points: &[SweepPoint]) -> String {
    let (mut timed, mut timed_points, mut warmups, mut by_transactions) = (0u64, 0, 0, 0);
    let (mut transactions, mut fast_s, mut slow_s) = (0u64, 0f64, 0f64);
    for p in points {
        match p.limit {
            Limit::DurationS(s) => {
                timed = timed.saturating_add(s);
                if p.warmup {
                    warmups += 1;
                } else {
                    timed_points += 1;
                }
            }
            Limit::Transactions(t) => {
                by_transactions += 1;
                let n = t.saturating_mul(u64::from(p.clients));
                transactions = transactions.saturating_add(n);
                let (slow, fast) = tps_range(p.builtin);
                fast_s += n as f64 / fast;
                slow_s += n as f64 / slow;
            }
        }
    }
    let mut parts = Vec::new();
    if timed > 0 {
        parts.push(format!(
            "at least {} of -T over {timed_points} point(s){}",
            human(Duration::from_secs(timed)),
            if warmups > 0 {
                format!(" and {warmups} warm-up(s)")
            } else {
                String::new()
            }
        ));
    }
    if by_transactions > 0 {
        let secs = |x: f64| human(Duration::from_secs_f64(x.min(1e12)));
        let (fast, slow) = (secs(fast_s), secs(slow_s));
        let range = if fast == slow {
            format!("roughly {fast}")
        } else if fast_s < 1.0 {
            format!("up to roughly {slow}")
        } else {
            format!("roughly {fast} to {slow}")
        };
        parts.push(format!(
            "{by_transactions} point(s) bounded by -t: {} transactions, {range} (from a large server's throughput to a small VM's; the machine decides)",
            thousands(transactions),
        ));
    }
    parts.join(", ")
}

/// The checksum states the cluster runs the points in, in order.
fn checksums(plan: &Plan, points: &[SweepPoint]) -> String {
    let initial = if plan.postgres.data_checksums {
        Checksums::On
    } else {
        Checksums::Off
    };
    let mut states: Vec<Checksums> = Vec::new();
    for p in points {
        let s = p.checksums.unwrap_or(initial);
        if !states.contains(&s) {
            states.push(s);
        }
    }
    let names: Vec<&str> = states.iter().map(|s| Checksums::label(Some(*s))).collect();
    match names.as_slice() {
        [] => Checksums::label(Some(initial)).to_string(),
        [one] => one.to_string(),
        many => format!("{} (switched with pg_checksums)", many.join(" then ")),
    }
}

fn storage(plan: &Plan) -> String {
    let s = &plan.storage;
    let layout = match s.layout {
        pgappliance::plan::Layout::Stripe => format!("stripe ({})", s.stripe_size),
        pgappliance::plan::Layout::Linear => "linear".to_string(),
        pgappliance::plan::Layout::Single => "single".to_string(),
    };
    let fs = s.filesystem.as_str();
    match &s.devices {
        Devices::None => format!(
            "no data volume (PGDATA under {} on the root filesystem)",
            s.mount_point
        ),
        Devices::Auto => format!(
            "{layout} over the empty NVMe namespaces found at boot, {fs} at {}",
            s.mount_point
        ),
        Devices::List(devs) => format!(
            "{layout} over {}{}, {fs} at {}",
            devs.join(", "),
            if s.wipe { " (wiped)" } else { "" },
            s.mount_point
        ),
    }
}

fn summary(plan: &Plan, points: &[SweepPoint]) -> String {
    let a = &plan.appliance;
    let version = match plan.postgres.version {
        Some(v) => v.to_string(),
        None => format!(
            "{} on an appliance ({} default), newest installed in local mode",
            Profile::of(a.platform).default_pg_version(),
            a.platform
        ),
    };
    let measured = points.iter().filter(|p| !p.warmup).count();
    format!(
        "appliance {} ({}, {}), PostgreSQL {version}, checksums {}, storage: {}, {}{} workload(s), {measured} point(s), up to {} connections{}",
        a.name,
        a.platform,
        a.arch,
        checksums(plan, points),
        storage(plan),
        bare_metal(plan),
        plan.workloads.len(),
        plan.max_clients(),
        tpcc_datasets(plan)
    )
}

/// `, sysbench-tpcc datasets: 10x10 warehouses (sbtest_w10_t10), …` when there are any.
fn tpcc_datasets(plan: &Plan) -> String {
    let ds = plan.tpcc_datasets();
    if ds.is_empty() {
        return String::new();
    }
    let list: Vec<String> = ds
        .iter()
        .map(|d| format!("{} x {} warehouses ({})", d.tables, d.scale, d.database()))
        .collect();
    format!(", sysbench-tpcc datasets: {}", list.join(", "))
}

/// For a bare-metal plan: where the kickstart puts the OS and how root gets in.
fn bare_metal(plan: &Plan) -> String {
    let Some(i) = &plan.install else {
        return String::new();
    };
    let keys = i.ssh_authorized_keys.len();
    let way_in = match (keys, i.root_password_hash.is_some()) {
        (0, true) => "root logs in on the console".to_string(),
        (n, false) => format!("root logs in over SSH with {n} key(s)"),
        (n, true) => format!("root logs in over SSH with {n} key(s) or on the console"),
    };
    format!(
        "bare metal: the kickstart installs the OS on {}, {way_in}, ",
        i.os_disk()
    )
}

/// Prints `PLAN: ok: …` and `PLAN: run time: …` per valid plan, `PLAN:LINE:COL: key:
/// problem` per error and `PLAN:LINE:COL: key: warning: …` per warning (errors and
/// warnings on stderr). Returns the exit code: 0 when every plan is valid, 1 otherwise;
/// with `deny_warnings` a warning fails its plan too.
pub(crate) fn run(
    plans: &[PathBuf],
    deny_warnings: bool,
    packages: &crate::build::medium::PackageArgs,
) -> Result<i32> {
    let mut code = 0;
    for path in plans {
        let text = match Plan::read_text(path) {
            Ok(text) => text,
            Err(e) => {
                pgappliance::errln!("{e}");
                code = 1;
                continue;
            }
        };
        let mut found = Plan::examine(&text);
        for e in &found.errors {
            pgappliance::errln!("{}", e.render(path, ""));
        }
        if let Some(plan) = &found.plan {
            // Thread counts depend on the target's cores; the point list does not.
            let points = expand(plan, 1);
            pgappliance::outln!("{}: ok: {}", path.display(), summary(plan, &points));
            pgappliance::outln!("{}: run time: {}", path.display(), run_time(plan, &points));
            if let Err(problem) = check_tpcc_source(plan) {
                let at = KeyPath::root().key("sysbench").key("tpcc_source");
                let issue = Plan::locate(&text, &at, problem);
                pgappliance::errln!("{}", issue.render(path, ""));
                code = 1;
            }
            match check_credentials_file(plan) {
                Ok(None) => {}
                Ok(Some(warning)) => {
                    let at = KeyPath::root().key("upload").key("credentials_file");
                    found.warnings.push(Plan::locate(&text, &at, warning));
                    found.warnings.sort_by_key(|w| (w.line, w.column));
                }
                Err(problem) => {
                    let at = KeyPath::root().key("upload").key("credentials_file");
                    let issue = Plan::locate(&text, &at, format!("{problem:#}"));
                    pgappliance::errln!("{}", issue.render(path, ""));
                    code = 1;
                }
            }
            if let Some(dir) = &packages.packages {
                if !check_packages(path, plan, packages, dir) {
                    code = 1;
                }
            }
            // A file store that cannot be one on this machine (a regular file on its path):
            // found now, not by the upload after the sweep.
            if let Some(dir) = plan.upload.store.strip_prefix("file://") {
                if let Err(problem) =
                    pgappliance::upload::store::check_file_store_dir(Path::new(dir))
                {
                    let at = KeyPath::root().key("upload").key("store");
                    let issue = Plan::locate(&text, &at, format!("{problem:#}"));
                    pgappliance::errln!("{}", issue.render(path, ""));
                    code = 1;
                }
            }
        } else {
            code = 1;
        }
        pgappliance::stdout::flush();
        for w in &found.warnings {
            pgappliance::errln!("{}", w.render(path, "warning: "));
        }
        if deny_warnings && !found.warnings.is_empty() {
            pgappliance::errln!(
                "{}: {} warning(s), denied by --deny-warnings",
                path.display(),
                found.warnings.len()
            );
            code = 1;
        }
    }
    Ok(code)
}
