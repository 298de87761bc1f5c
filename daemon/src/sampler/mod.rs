//! The OS sampler: once a second during a point, CPU busy/iowait, disk bytes read and
//! written, and memory, read straight from /proc (no external tools). It measures its own
//! CPU time (thread CPU clock around each sample) so its cost is on record.

pub(crate) mod parse;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use parse::{parse_diskstats, parse_meminfo, parse_proc_stat, CpuTimes, DiskTotals};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OsSample {
    /// Seconds since the sampler started (end of the interval).
    pub(crate) t_s: f64,
    pub(crate) cpu_busy_pct: f64,
    pub(crate) cpu_iowait_pct: f64,
    pub(crate) disk_read_bytes_per_s: f64,
    pub(crate) disk_write_bytes_per_s: f64,
    pub(crate) mem_used_bytes: u64,
    pub(crate) mem_dirty_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OsSamples {
    pub(crate) interval_s: f64,
    pub(crate) samples: Vec<OsSample>,
    pub(crate) cpu_busy_avg_pct: Option<f64>,
    pub(crate) disk_read_bytes: u64,
    pub(crate) disk_write_bytes: u64,
    pub(crate) mem_used_max_bytes: Option<u64>,
    /// CPU seconds the sampler itself used, and that as a share of one core over the run.
    pub(crate) sampler_cpu_s: f64,
    pub(crate) sampler_cpu_pct_of_core: f64,
}

struct Reading {
    at: Instant,
    cpu: CpuTimes,
    disk: DiskTotals,
}

fn is_whole_disk(name: &str) -> bool {
    // /sys/block lists whole disks (and dm/md devices, which sit on top of them).
    !name.starts_with("loop")
        && !name.starts_with("ram")
        && !name.starts_with("zram")
        && !name.starts_with("dm-")
        && !name.starts_with("md")
        && std::path::Path::new("/sys/block").join(name).exists()
}

fn read_now() -> Option<(Reading, parse::Memory)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let disk = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some((
        Reading {
            at: Instant::now(),
            cpu: parse_proc_stat(&stat)?,
            disk: parse_diskstats(&disk, is_whole_disk),
        },
        parse_meminfo(&mem)?,
    ))
}

fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default()
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// A running sampler; [`Sampler::stop`] ends it and returns what it saw.
pub(crate) struct Sampler {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<OsSamples>,
}

impl Sampler {
    pub(crate) fn start(interval: Duration) -> Sampler {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut own_cpu = Duration::ZERO;
            let mut samples = Vec::new();
            let c0 = thread_cpu();
            let first = read_now();
            own_cpu += thread_cpu().saturating_sub(c0);
            let (mut prev, _) = match first {
                Some(r) => r,
                None => return summarise(interval, samples, own_cpu, started.elapsed(), None),
            };
            let origin = prev.disk;
            let mut ticker = tokio::time::interval(interval);
            ticker.tick().await;
            loop {
                let stopping = tokio::select! {
                    _ = ticker.tick() => false,
                    _ = &mut stopped => true,
                };
                // On stop, a last partial interval if it is long enough to mean something.
                if stopping && prev.at.elapsed() < Duration::from_millis(100) {
                    break;
                }
                let c0 = thread_cpu();
                if let Some((now, mem)) = read_now() {
                    let dt = now.at.duration_since(prev.at).as_secs_f64().max(1e-6);
                    let dtotal = now.cpu.total.saturating_sub(prev.cpu.total);
                    samples.push(OsSample {
                        t_s: now.at.duration_since(started).as_secs_f64(),
                        cpu_busy_pct: pct(now.cpu.busy.saturating_sub(prev.cpu.busy), dtotal),
                        cpu_iowait_pct: pct(now.cpu.iowait.saturating_sub(prev.cpu.iowait), dtotal),
                        disk_read_bytes_per_s: now
                            .disk
                            .read_bytes
                            .saturating_sub(prev.disk.read_bytes)
                            as f64
                            / dt,
                        disk_write_bytes_per_s: now
                            .disk
                            .write_bytes
                            .saturating_sub(prev.disk.write_bytes)
                            as f64
                            / dt,
                        mem_used_bytes: mem.total.saturating_sub(mem.available),
                        mem_dirty_bytes: mem.dirty,
                    });
                    prev = now;
                }
                own_cpu += thread_cpu().saturating_sub(c0);
                if stopping {
                    break;
                }
            }
            let last = DiskTotals {
                read_bytes: prev.disk.read_bytes.saturating_sub(origin.read_bytes),
                write_bytes: prev.disk.write_bytes.saturating_sub(origin.write_bytes),
            };
            summarise(interval, samples, own_cpu, started.elapsed(), Some(last))
        });
        Sampler { stop, task }
    }

    pub(crate) async fn stop(self) -> Option<OsSamples> {
        let _ = self.stop.send(());
        self.task.await.ok()
    }
}

fn summarise(
    interval: Duration,
    samples: Vec<OsSample>,
    own_cpu: Duration,
    wall: Duration,
    disk: Option<DiskTotals>,
) -> OsSamples {
    let n = samples.len();
    OsSamples {
        interval_s: interval.as_secs_f64(),
        cpu_busy_avg_pct: (n > 0)
            .then(|| samples.iter().map(|s| s.cpu_busy_pct).sum::<f64>() / n as f64),
        mem_used_max_bytes: samples.iter().map(|s| s.mem_used_bytes).max(),
        disk_read_bytes: disk.map(|d| d.read_bytes).unwrap_or(0),
        disk_write_bytes: disk.map(|d| d.write_bytes).unwrap_or(0),
        sampler_cpu_s: own_cpu.as_secs_f64(),
        sampler_cpu_pct_of_core: own_cpu.as_secs_f64() * 100.0 / wall.as_secs_f64().max(1e-6),
        samples,
    }
}
