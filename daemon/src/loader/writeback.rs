//! Background writeback while the loader runs with `fsync = off`.
//!
//! Left alone, the kernel starts writing dirty pages only when they exceed
//! `vm.dirty_background_ratio` of RAM (gigabytes on a benchmark machine) or grow 30 s old, so
//! a load finishes with the whole dataset dirty in the page cache and the final sync writes
//! it all while nothing else happens. This thread calls `syncfs` on the data directory's
//! filesystem over and over from the first COPY on: the disk writes what the load produced
//! while the CPUs produce the rest, and the sync that makes the load durable finds little
//! left. It never replaces that final sync: pages dirtied after its last pass are covered by
//! `sync_filesystem` + CHECKPOINT at the end.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

/// A pass that took less than this found (almost) nothing to write: pause before the next.
const IDLE_PASS: Duration = Duration::from_millis(20);
const IDLE_PAUSE: Duration = Duration::from_millis(50);

/// `syncfs` on the filesystem holding `dir`: every dirty page of it reaches the disk.
pub(crate) fn sync_filesystem(dir: &Path) -> Result<()> {
    let f = std::fs::File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    nix::unistd::syncfs(&f).with_context(|| format!("syncfs on {}", dir.display()))
}

pub(crate) struct Writeback {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<u64>>>,
}

impl Writeback {
    /// Starts writing back the filesystem of `dir` until [`Writeback::stop`].
    pub(crate) fn start(dir: PathBuf) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("pga-writeback".into())
            .spawn(move || {
                let mut passes = 0u64;
                loop {
                    let t = Instant::now();
                    sync_filesystem(&dir)?;
                    passes += 1;
                    if flag.load(Ordering::Relaxed) {
                        return Ok(passes);
                    }
                    if t.elapsed() < IDLE_PASS {
                        std::thread::sleep(IDLE_PAUSE);
                    }
                }
            })
            .context("starting the writeback thread")?;
        Ok(Writeback {
            stop,
            thread: Some(thread),
        })
    }

    /// Ends the passes after the current one (there is always at least one); the number of
    /// passes, or the error of the one that failed.
    pub(crate) async fn stop(mut self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("stopped once");
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .context("waiting for the writeback thread")?
            .map_err(|_| anyhow!("the writeback thread panicked"))?
    }
}

impl Drop for Writeback {
    /// A load that fails midway leaves the thread to end on its own after its pass.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passes_until_stopped_and_reports_a_missing_directory() {
        let dir = std::env::temp_dir();
        let w = Writeback::start(dir).expect("start");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(w.stop().await.expect("passes") >= 1);

        let gone = std::env::temp_dir().join("pga-writeback-no-such-dir");
        let w = Writeback::start(gone.clone()).expect("start");
        let err = format!("{:#}", w.stop().await.expect_err("missing dir"));
        assert!(err.contains(&gone.display().to_string()), "{err}");
    }
}
