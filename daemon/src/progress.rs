//! Progress of a long operation (a dataset's generation, the TPC-C prepare, a sweep point):
//! while it runs, the status line (log, `STATUS=`, `pgapplianced status`, the status object)
//! says every [`INTERVAL`] how long it has taken, of how long when that is known, and the
//! last progress line the program itself wrote (`pgbench -i`'s "… of … tuples (40%) done",
//! sysbench's prepare). Nothing here waits on the operation: the ticker is a task that is
//! aborted when the [`Progress`] is dropped.
//!
//! Each tick passes the fault point `progress:<kind>` ([`Kind`]) after its status line, and
//! a debug build (the tests') takes the interval from [`INTERVAL_VARIABLE`], so a test can
//! stop the daemon right after a progress line and read `status` at that moment.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a long operation says where it is.
pub(crate) const INTERVAL: Duration = Duration::from_secs(30);

/// In a debug build only: the interval instead of [`INTERVAL`] (a humantime duration, e.g.
/// `1s`), for the tests. A release build never reads it.
pub const INTERVAL_VARIABLE: &str = "PGAPPLIANCE_PROGRESS_INTERVAL";

/// The shortest interval [`INTERVAL_VARIABLE`] may set: a shorter one floods the log (a
/// status line per tick).
#[cfg(any(debug_assertions, test))]
pub(crate) const SHORTEST_INTERVAL: Duration = Duration::from_millis(100);

/// The interval in effect: [`INTERVAL`], or in a debug build [`INTERVAL_VARIABLE`] when it
/// is set (a value that is not a duration of at least [`SHORTEST_INTERVAL`] is named, once
/// per process, and ignored).
pub(crate) fn interval() -> Duration {
    #[cfg(debug_assertions)]
    {
        static IN_EFFECT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
        *IN_EFFECT.get_or_init(|| {
            let (every, warning) = interval_from(std::env::var(INTERVAL_VARIABLE).ok().as_deref());
            if let Some(w) = warning {
                tracing::warn!("{w}");
            }
            every
        })
    }
    #[cfg(not(debug_assertions))]
    INTERVAL
}

/// The interval [`INTERVAL_VARIABLE`]'s value sets, and a warning when it is ignored (pure).
#[cfg(any(debug_assertions, test))]
pub(crate) fn interval_from(value: Option<&str>) -> (Duration, Option<String>) {
    let Some(v) = value else {
        return (INTERVAL, None);
    };
    match humantime::parse_duration(v.trim()) {
        Ok(d) if d >= SHORTEST_INTERVAL => (d, None),
        _ => (
            INTERVAL,
            Some(format!(
                "{INTERVAL_VARIABLE}=\"{v}\" is not a duration of at least {}; using {}",
                humantime::format_duration(SHORTEST_INTERVAL),
                humantime::format_duration(INTERVAL)
            )),
        ),
    }
}

/// Which long operation it is: the fault point each tick passes is `progress:<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `pgbench -i`, the dataset's generation.
    Dataset,
    /// The parallel loader's generation.
    Load,
    /// A sysbench-tpcc prepare.
    Prepare,
    /// A sweep point.
    Point,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Dataset => "dataset",
            Kind::Load => "load",
            Kind::Prepare => "prepare",
            Kind::Point => "point",
        }
    }
}

/// A running operation's ticker; dropping it stops it.
pub(crate) struct Progress {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What an operation says about itself besides its time.
pub(crate) enum Detail {
    /// The last line of a file the program writes its progress to.
    Tail(PathBuf),
    /// Rows done (a counter the operation keeps) of a total.
    Rows(Arc<AtomicU64>, u64),
}

impl Detail {
    fn read(&self) -> Option<String> {
        match self {
            Detail::Tail(p) => last_line_of(p),
            Detail::Rows(done, total) => Some(rows(done.load(Ordering::Relaxed), *total)),
        }
    }
}

impl Progress {
    /// Says `label` with the time elapsed (of `total`) and `detail` (the program's own
    /// progress output, or a count) every [`interval`], from a background task.
    pub(crate) fn start(
        kind: Kind,
        label: String,
        total: Option<Duration>,
        detail: Option<Detail>,
    ) -> Progress {
        let started = Instant::now();
        let every = interval();
        let point = format!("progress:{}", kind.as_str());
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let last = detail.as_ref().and_then(Detail::read);
                crate::notify::status(&line(&label, started.elapsed(), total, last.as_deref()));
                crate::faults::point(&point);
            }
        });
        Progress { task }
    }
}

/// "12000000 of 100000000 rows (12%)" (pure).
pub(crate) fn rows(done: u64, total: u64) -> String {
    let pct = (done.min(total) * 100).checked_div(total).unwrap_or(100);
    format!("{done} of {total} rows ({pct}%)")
}

/// The last progress line in a file: its last non-empty line, where `\r` ends a line too
/// (pgbench and sysbench redraw one line on a terminal). Only the file's end is read.
fn last_line_of(path: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(4096);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    last_line(&String::from_utf8_lossy(&buf)).map(str::to_string)
}

/// The last non-empty line of `text`, `\r` and `\n` both ending lines (pure).
pub(crate) fn last_line(text: &str) -> Option<&str> {
    text.split(['\r', '\n'])
        .map(str::trim)
        .rfind(|l| !l.is_empty())
}

/// "dataset: pgbench -i -s 100: 4m 30s; 4500000 of 10000000 tuples (45%) done (elapsed …)"
/// (pure).
pub(crate) fn line(
    label: &str,
    elapsed: Duration,
    total: Option<Duration>,
    last: Option<&str>,
) -> String {
    let secs = |d: Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
    let mut out = match total {
        Some(t) => format!("{label}: {} of {}", secs(elapsed), secs(t)),
        None => format!("{label}: {} so far", secs(elapsed)),
    };
    if let Some(l) = last {
        let l: String = l.chars().take(160).collect();
        out.push_str(&format!("; {l}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_variable_is_a_duration_of_at_least_100ms_or_named_and_ignored() {
        assert_eq!(interval_from(None), (INTERVAL, None));
        assert_eq!(interval_from(Some("1s")), (Duration::from_secs(1), None));
        assert_eq!(interval_from(Some("100ms")), (SHORTEST_INTERVAL, None));
        for bad in ["garbage", "0", "1ns", "99ms", ""] {
            let (every, warning) = interval_from(Some(bad));
            assert_eq!(every, INTERVAL, "{bad}");
            let w = warning.expect(bad);
            assert!(
                w.contains(&format!("PGAPPLIANCE_PROGRESS_INTERVAL=\"{bad}\""))
                    && w.contains("at least 100ms; using 30s"),
                "{w}"
            );
        }
    }

    #[test]
    fn the_line_says_the_time_of_the_total_and_the_programs_own_progress() {
        // pgbench -i's stderr (PostgreSQL 15), captured with its progress lines.
        let stderr = "dropping old tables...\ncreating tables...\ngenerating data (client-side)...\n100000 of 1000000 tuples (10%) done (elapsed 0.05 s, remaining 0.46 s)\r400000 of 1000000 tuples (40%) done (elapsed 0.21 s, remaining 0.31 s)\r";
        let last = last_line(stderr);
        assert_eq!(
            last,
            Some("400000 of 1000000 tuples (40%) done (elapsed 0.21 s, remaining 0.31 s)")
        );
        assert_eq!(
            line(
                "dataset: pgbench -i -s 10",
                Duration::from_millis(270_400),
                None,
                last
            ),
            "dataset: pgbench -i -s 10: 4m 30s so far; 400000 of 1000000 tuples (40%) done (elapsed 0.21 s, remaining 0.31 s)"
        );
        assert_eq!(
            line(
                "sweep 3/8: point rw-c16",
                Duration::from_secs(125),
                Some(Duration::from_secs(600)),
                None
            ),
            "sweep 3/8: point rw-c16: 2m 5s of 10m"
        );
        assert_eq!(last_line("\n\r \n"), None);
        assert_eq!(
            rows(12_000_000, 100_000_000),
            "12000000 of 100000000 rows (12%)"
        );
        assert_eq!(rows(0, 0), "0 of 0 rows (100%)");
    }

    #[test]
    fn only_the_end_of_a_long_file_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("stderr");
        let mut text = "x".repeat(100_000);
        text.push_str("\nlast line\n");
        std::fs::write(&p, text).expect("write");
        assert_eq!(last_line_of(&p).as_deref(), Some("last line"));
        assert_eq!(last_line_of(&dir.path().join("missing")), None);
    }
}
