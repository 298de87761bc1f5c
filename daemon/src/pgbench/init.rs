//! Parser for the end of `pgbench -i`: `done in T s (drop tables …, create tables …,
//! client-side generate … | server-side generate …, vacuum …, primary keys …).`

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitPhase {
    pub(crate) phase: String,
    pub(crate) seconds: f64,
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

/// The phases pgbench 13 to 19 time, by the names it prints.
const KNOWN_PHASES: &[&str] = &[
    "drop tables",
    "create tables",
    "client-side generate",
    "server-side generate",
    "vacuum",
    "primary keys",
    "foreign keys",
];

/// How far the phases' sum may be from the total: each figure is printed to two decimals
/// (half a hundredth each, for the phases and the total), and pgbench's total also covers
/// the moments between phases, which we allow as 2 % of it.
fn sum_tolerance(total_s: f64, phases: usize) -> f64 {
    0.005 * (phases as f64 + 1.0) + 0.02 * total_s
}

/// Finds and parses the one `done in` line of `pgbench -i` output: its total, then every
/// phase in parentheses, which must add up to the total. A line cut short, a second
/// `done in` line, an unknown phase or a sum that contradicts the total is refused naming
/// the line.
pub fn parse_init(text: &str) -> Result<InitBreakdown, InitParseError> {
    let mut done = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("done in "));
    let line = done.next().ok_or(InitParseError::NotDone)?;
    if let Some(second) = done.next() {
        return Err(InitParseError::Impossible {
            problem: format!(
                "a second \"done in\" line (\"{second}\"): two initialisations in one output"
            ),
            line: line.to_string(),
        });
    }
    if let Some(c) = line
        .chars()
        .find(|c| *c == '\u{feff}' || (c.is_control() && *c != '\t'))
    {
        return Err(InitParseError::Impossible {
            problem: format!("character U+{:04X}: the output is damaged", u32::from(c)),
            line: line.escape_debug().to_string(),
        });
    }
    let bad = || InitParseError::Malformed(line.to_string());
    let rest = line.strip_prefix("done in ").ok_or_else(bad)?;
    let (total, rest) = rest.split_once(" s").ok_or_else(bad)?;
    let total_s = seconds(total, "the total", line)?;
    // 13 to 19 always print the phases: `done in T s (…).`
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(")."))
        .ok_or_else(|| InitParseError::Impossible {
            problem: "the line is cut short: no \"(phase T s, …).\" after the total".into(),
            line: line.to_string(),
        })?;
    let mut phases = Vec::new();
    for part in inner.split(", ") {
        let part = part.trim().strip_suffix(" s").ok_or_else(bad)?;
        let (name, secs) = part.rsplit_once(' ').ok_or_else(bad)?;
        if !KNOWN_PHASES.contains(&name) {
            return Err(InitParseError::Impossible {
                problem: format!("\"{name}\" is not a phase pgbench times"),
                line: line.to_string(),
            });
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
    let sum: f64 = phases.iter().map(|p| p.seconds).sum();
    let tolerance = sum_tolerance(total_s, phases.len());
    if (sum - total_s).abs() > tolerance {
        return Err(InitParseError::Impossible {
            problem: format!(
                "the phases add up to {sum:.2} s, not the total {total_s:.2} s (allowed: {tolerance:.2} s)"
            ),
            line: line.to_string(),
        });
    }
    Ok(InitBreakdown { total_s, phases })
}
