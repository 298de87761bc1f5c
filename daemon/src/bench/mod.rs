//! Benchmark commands: each runs its candidates side by side in one invocation and prints
//! the ratio against the named baseline as its last line. They measure; they assert
//! nothing (docs/performance.md has the figures and how to reproduce them).

pub mod init;
pub mod overhead;
pub mod restore;
pub mod seaweed;
pub mod upload;

/// Geometric mean of positive ratios.
pub(crate) fn geometric_mean(values: &[f64]) -> Option<f64> {
    let logs: Vec<f64> = values
        .iter()
        .filter(|v| **v > 0.0)
        .map(|v| v.ln())
        .collect();
    (!logs.is_empty() && logs.len() == values.len())
        .then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

pub(crate) fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// CPU seconds (user + system) this process has used so far.
pub(crate) fn own_cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_and_medians() {
        assert_eq!(geometric_mean(&[2.0, 8.0]), Some(4.0));
        assert_eq!(geometric_mean(&[]), None);
        assert_eq!(geometric_mean(&[1.0, 0.0]), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
