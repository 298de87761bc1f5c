//! Pure parsers for the /proc files the OS sampler reads.

/// Aggregate CPU jiffies from the first line of /proc/stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CpuTimes {
    pub(crate) busy: u64,
    pub(crate) iowait: u64,
    pub(crate) total: u64,
}

/// `cpu  user nice system idle iowait irq softirq steal guest guest_nice`; guest time is
/// already counted in user/nice, so it is left out of the total.
pub(crate) fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    let idle = get(3);
    let iowait = get(4);
    // Jiffies counters: a sum that overflows is not a /proc/stat line.
    let total = v.iter().try_fold(0u64, |sum, x| sum.checked_add(*x))?;
    Some(CpuTimes {
        busy: total - idle - iowait,
        iowait,
        total,
    })
}

/// Sectors (512 bytes) read and written, summed over whole disks (`is_disk` decides which
/// names count, so partitions and holders are not counted twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DiskTotals {
    pub(crate) read_bytes: u64,
    pub(crate) write_bytes: u64,
}

pub(crate) fn parse_diskstats(text: &str, is_disk: impl Fn(&str) -> bool) -> DiskTotals {
    let mut t = DiskTotals::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 || !is_disk(f[2]) {
            continue;
        }
        let sectors_read: u64 = f[5].parse().unwrap_or(0);
        let sectors_written: u64 = f[9].parse().unwrap_or(0);
        t.read_bytes = t
            .read_bytes
            .saturating_add(sectors_read.saturating_mul(512));
        t.write_bytes = t
            .write_bytes
            .saturating_add(sectors_written.saturating_mul(512));
    }
    t
}

/// MemTotal, MemAvailable and Dirty from /proc/meminfo, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Memory {
    pub(crate) total: u64,
    pub(crate) available: u64,
    pub(crate) dirty: u64,
}

pub(crate) fn parse_meminfo(text: &str) -> Option<Memory> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .and_then(|kb| kb.checked_mul(1024))
    };
    Some(Memory {
        total: field("MemTotal:")?,
        available: field("MemAvailable:")?,
        dirty: field("Dirty:").unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat() {
        let t = parse_proc_stat("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 1 2 3 4\n").expect("cpu");
        assert_eq!(t.total, 1000);
        assert_eq!(t.iowait, 40);
        assert_eq!(t.busy, 160);
        assert!(parse_proc_stat("intr 1 2 3").is_none());
        let overflow = format!("cpu  {} {} 0 0\n", u64::MAX, u64::MAX);
        assert!(
            parse_proc_stat(&overflow).is_none(),
            "a sum past u64 is refused"
        );
    }

    #[test]
    fn diskstats_counts_whole_disks_only() {
        let text = " 259 0 nvme0n1 10 0 200 5 20 0 400 9 0 0 0\n 259 1 nvme0n1p1 10 0 200 5 20 0 400 9 0 0 0\n   7 0 loop0 1 0 8 0 0 0 0 0 0 0 0\n";
        let t = parse_diskstats(text, |n| n == "nvme0n1");
        assert_eq!(t.read_bytes, 200 * 512);
        assert_eq!(t.write_bytes, 400 * 512);
        let huge = format!(
            " 259 0 nvme0n1 1 0 {} 0 1 0 {} 0 0 0 0\n",
            u64::MAX,
            u64::MAX
        );
        let t = parse_diskstats(&huge, |_| true);
        assert_eq!(
            (t.read_bytes, t.write_bytes),
            (u64::MAX, u64::MAX),
            "saturates"
        );
    }

    #[test]
    fn meminfo() {
        let m =
            parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\nMemAvailable: 600 kB\nDirty: 2 kB\n")
                .expect("mem");
        assert_eq!(m.total, 1_024_000);
        assert_eq!(m.available, 614_400);
        assert_eq!(m.dirty, 2048);
        let huge = format!("MemTotal: {} kB\nMemAvailable: 1 kB\n", u64::MAX / 2);
        assert!(
            parse_meminfo(&huge).is_none(),
            "a size past u64 bytes is refused"
        );
    }
}
