//! Fault points: named places in the daemon where a test stops or kills it, so that "killed
//! in the middle of X" happens exactly in X instead of whenever a polling test happens to
//! look. A test sets `PGAPPLIANCE_FAULT` to a comma-separated list of `NAME[@N]=ACTION`:
//!
//! - `NAME`: the point, e.g. `upload-part-journaled`, `begin-point:ID` (one sweep point's
//!   begin, journaled) or `begin-point` (any point's), or `spawned:pgbench` (see the calls of
//!   [`point`] and [`spawned`]); `@N` acts on its N-th hit only (default 1), `@*` on every hit.
//! - `ACTION`: `kill` (the daemon sends itself SIGKILL: a kill -9 at that place), `stop` (it
//!   sends itself SIGSTOP: the test sees the stop with `waitpid(WUNTRACED)`, looks at the
//!   state, then kills or continues it), `stop-child` (at a `spawned:` point: the child just
//!   started is stopped too, so the test can read it before it ends).
//!
//! Fault points are compiled into debug builds only (the tests' builds); in a release build
//! [`point`] and [`spawned`] are empty and the variable is never read.
// The arms' reading is used only where the points are compiled in (and by its tests).
#![cfg_attr(not(debug_assertions), allow(dead_code))]

/// Reached a named place.
#[inline]
pub(crate) fn point(name: &str) {
    #[cfg(debug_assertions)]
    imp::hit(name, None, None);
    #[cfg(not(debug_assertions))]
    let _ = name;
}

/// A child process `program` was just started (its pid `child`, its output going to
/// `stdout`): the point `spawned:<file name of program>`. An arm may add the end of the
/// output file's path, `spawned:<program>:<path suffix>` (e.g.
/// `spawned:pgbench:p001-rw-c00001-r1/attempt-1/stdout.txt`: one point of the sweep), to act
/// only on the commands whose output goes there.
#[inline]
pub(crate) fn spawned(program: &str, child: Option<u32>, stdout: Option<&std::path::Path>) {
    #[cfg(debug_assertions)]
    {
        let base = std::path::Path::new(program)
            .file_name()
            .map_or_else(|| program.to_string(), |n| n.to_string_lossy().into_owned());
        imp::hit(&format!("spawned:{base}"), stdout, child);
    }
    #[cfg(not(debug_assertions))]
    let _ = (program, child, stdout);
}

/// The variable that arms fault points.
pub const VARIABLE: &str = "PGAPPLIANCE_FAULT";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Kill,
    Stop,
    StopChild,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Arm {
    /// The point's name, e.g. `spawned:pgbench`.
    name: String,
    /// For `spawned:` points: the end of the output file's path the command must have.
    output: Option<String>,
    /// The hit to act on; None for every hit.
    nth: Option<u64>,
    action: Action,
}

/// Reads `NAME[@N]=ACTION,...`; an error names the entry that is wrong.
fn parse(spec: &str) -> Result<Vec<Arm>, String> {
    let mut arms = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (target, action) = entry
            .split_once('=')
            .ok_or_else(|| format!("{VARIABLE}: \"{entry}\" has no \"=ACTION\""))?;
        let action = match action {
            "kill" => Action::Kill,
            "stop" => Action::Stop,
            "stop-child" => Action::StopChild,
            other => {
                return Err(format!(
                    "{VARIABLE}: \"{entry}\": unknown action \"{other}\" (kill, stop, stop-child)"
                ))
            }
        };
        let (name, nth) = match target.rsplit_once('@') {
            None => (target, Some(1)),
            Some((n, "*")) => (n, None),
            Some((n, k)) => match k.parse::<u64>() {
                Ok(k) if k >= 1 => (n, Some(k)),
                _ => {
                    return Err(format!(
                        "{VARIABLE}: \"{entry}\": \"@{k}\" is not a hit number from 1 or \"*\""
                    ))
                }
            },
        };
        if name.is_empty() {
            return Err(format!("{VARIABLE}: \"{entry}\" names no point"));
        }
        let (name, output) = match name.strip_prefix("spawned:").map(|r| r.split_once(':')) {
            Some(Some((program, output))) => {
                (format!("spawned:{program}"), Some(output.to_string()))
            }
            _ => (name.to_string(), None),
        };
        arms.push(Arm {
            name,
            output,
            nth,
            action,
        });
    }
    Ok(arms)
}

impl Arm {
    /// Whether a hit of point `name` (a command's output going to `output`) is this arm's.
    fn matches(&self, name: &str, output: Option<&std::path::Path>) -> bool {
        self.name == name
            && self.output.as_deref().is_none_or(|want| {
                output.is_some_and(|o| {
                    let o = o.to_string_lossy();
                    o == want || o.ends_with(&format!("/{want}"))
                })
            })
    }
}

#[cfg(debug_assertions)]
mod imp {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use nix::sys::signal::{kill, raise, Signal};
    use nix::unistd::Pid;

    use super::{parse, Action, Arm, VARIABLE};

    fn arms() -> &'static [Arm] {
        static ARMS: OnceLock<Vec<Arm>> = OnceLock::new();
        ARMS.get_or_init(|| match std::env::var(VARIABLE) {
            Err(_) => Vec::new(),
            Ok(spec) => parse(&spec).unwrap_or_else(|e| {
                crate::errln!("{e}");
                std::process::exit(2)
            }),
        })
    }

    pub(super) fn hit(name: &str, output: Option<&std::path::Path>, child: Option<u32>) {
        let arms = arms();
        if arms.is_empty() {
            return;
        }
        // Hits are counted per arm: the N-th command whose output goes where the arm says.
        static HITS: OnceLock<Mutex<HashMap<usize, u64>>> = OnceLock::new();
        for (i, arm) in arms.iter().enumerate() {
            if !arm.matches(name, output) {
                continue;
            }
            let n = {
                let mut hits = HITS
                    .get_or_init(Default::default)
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let n = hits.entry(i).or_insert(0);
                *n += 1;
                *n
            };
            if arm.nth.is_some_and(|k| k != n) {
                continue;
            }
            crate::errln!("fault point {name} (hit {n}): {:?}", arm.action);
            match arm.action {
                Action::Kill => {
                    let _ = raise(Signal::SIGKILL);
                }
                Action::Stop => {
                    let _ = raise(Signal::SIGSTOP);
                }
                Action::StopChild => {
                    if let Some(pid) = child.and_then(|c| i32::try_from(c).ok()) {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
                    }
                    let _ = raise(Signal::SIGSTOP);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_with_their_hit_and_action() {
        let arms = parse("upload-part-journaled@2=kill, spawned:pgbench@*=stop-child,x=stop")
            .expect("valid");
        assert_eq!(
            arms,
            vec![
                Arm {
                    name: "upload-part-journaled".into(),
                    output: None,
                    nth: Some(2),
                    action: Action::Kill
                },
                Arm {
                    name: "spawned:pgbench".into(),
                    output: None,
                    nth: None,
                    action: Action::StopChild
                },
                Arm {
                    name: "x".into(),
                    output: None,
                    nth: Some(1),
                    action: Action::Stop
                },
            ]
        );
    }

    #[test]
    fn a_spawned_arm_may_name_where_the_output_goes() {
        let arms = parse("spawned:pgbench:p001-rw/attempt-1/stdout.txt=stop").expect("valid");
        let arm = &arms[0];
        assert_eq!(arm.name, "spawned:pgbench");
        fn at(p: &str) -> Option<&std::path::Path> {
            Some(std::path::Path::new(p))
        }
        assert!(arm.matches(
            "spawned:pgbench",
            at("/w/run/raw/points/p001-rw/attempt-1/stdout.txt")
        ));
        assert!(!arm.matches(
            "spawned:pgbench",
            at("/w/run/raw/points/xp001-rw/attempt-1/stdout.txt")
        ));
        assert!(!arm.matches("spawned:pgbench", None));
        assert!(!arm.matches("spawned:psql", at("/p001-rw/attempt-1/stdout.txt")));
    }

    #[test]
    fn a_wrong_entry_is_named() {
        for (spec, says) in [
            ("x", "has no \"=ACTION\""),
            ("x=pause", "unknown action \"pause\""),
            ("x@0=kill", "\"@0\" is not a hit number"),
            ("x@two=kill", "\"@two\""),
            ("@2=kill", "names no point"),
        ] {
            let e = parse(spec).expect_err(spec);
            assert!(e.contains(says) && e.contains(spec), "{spec}: {e}");
        }
    }
}
