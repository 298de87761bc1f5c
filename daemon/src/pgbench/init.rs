//! Parser for the end of `pgbench -i`: `done in T s (drop tables …, create tables …,
//! client-side generate … | server-side generate …, vacuum …, primary keys …).`

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitPhase {
    pub phase: String,
    pub seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitBreakdown {
    pub total_s: f64,
    /// In the order pgbench printed them.
    pub phases: Vec<InitPhase>,
}

impl InitBreakdown {
    pub fn phase(&self, name: &str) -> Option<f64> {
        self.phases
            .iter()
            .find(|p| p.phase == name)
            .map(|p| p.seconds)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InitParseError {
    #[error("pgbench -i output has no \"done in … s\" line: the initialisation did not finish")]
    NotDone,
    #[error("cannot read the init breakdown from \"{0}\"")]
    Malformed(String),
}

/// Finds and parses the last `done in` line of `pgbench -i` output.
pub fn parse_init(text: &str) -> Result<InitBreakdown, InitParseError> {
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with("done in "))
        .ok_or(InitParseError::NotDone)?;
    let bad = || InitParseError::Malformed(line.to_string());
    let rest = line.strip_prefix("done in ").ok_or_else(bad)?;
    let (total, rest) = rest.split_once(" s").ok_or_else(bad)?;
    let total_s: f64 = total.trim().parse().map_err(|_| bad())?;
    let mut phases = Vec::new();
    if let Some(inner) = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.trim_end_matches('.').strip_suffix(')'))
    {
        for part in inner.split(", ") {
            let part = part.trim().strip_suffix(" s").ok_or_else(bad)?;
            let (name, secs) = part.rsplit_once(' ').ok_or_else(bad)?;
            phases.push(InitPhase {
                phase: name.to_string(),
                seconds: secs.parse().map_err(|_| bad())?,
            });
        }
    }
    Ok(InitBreakdown { total_s, phases })
}
