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
    #[error("{problem} in \"{line}\"")]
    Impossible { problem: String, line: String },
}

/// Seconds as pgbench prints them: finite and not negative.
fn seconds(text: &str, what: &str, line: &str) -> Result<f64, InitParseError> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| InitParseError::Malformed(line.to_string()))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(InitParseError::Impossible {
            problem: format!(
                "{what} \"{}\" is not a finite, non-negative number of seconds",
                text.trim()
            ),
            line: line.to_string(),
        })
    }
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
    let total_s = seconds(total, "the total", line)?;
    let mut phases = Vec::new();
    if let Some(inner) = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.trim_end_matches('.').strip_suffix(')'))
    {
        for part in inner.split(", ") {
            let part = part.trim().strip_suffix(" s").ok_or_else(bad)?;
            let (name, secs) = part.rsplit_once(' ').ok_or_else(bad)?;
            if name.trim().is_empty() {
                return Err(bad());
            }
            if phases.iter().any(|p: &InitPhase| p.phase == name) {
                return Err(InitParseError::Impossible {
                    problem: format!("phase \"{name}\" listed twice"),
                    line: line.to_string(),
                });
            }
            phases.push(InitPhase {
                phase: name.to_string(),
                seconds: seconds(secs, name, line)?,
            });
        }
    }
    Ok(InitBreakdown { total_s, phases })
}
