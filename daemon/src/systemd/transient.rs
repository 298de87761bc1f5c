//! Every external command as a transient systemd service (`StartTransientUnit`): its argv,
//! user, working directory, environment, `LimitNOFILE` and output files become unit
//! properties. The environment is the spec's complete one ([`CommandSpec::environment`]):
//! a unit never sees the daemon's environment (systemd does not pass a caller's), only
//! this list and the manager's own block (`systemctl show-environment`); the daemon waits for the start job (a `Type=oneshot` job ends when the
//! command does) and reads `ExecMainCode`/`ExecMainStatus`/`Result`. The commands appear in
//! the journal under their unit, get their own cgroup and limits, and survive a daemon
//! restart (the next daemon stops what an earlier one left, then redoes the step).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use zbus::zvariant::Value;

use super::{ServiceProxy, Systemd};
use crate::runner::{
    CommandError, CommandOutput, CommandSpec, CpuUse, ExecFuture, Executor, ExitStatus,
};

/// Prefix of every transient unit the daemon starts.
pub(crate) const UNIT_PREFIX: &str = "pga-cmd-";

/// The values of the transient unit's properties, before they become D-Bus variants.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Prop {
    Str(String),
    Bool(bool),
    U64(u64),
    StrList(Vec<String>),
    /// `ExecStart`: `a(sasb)` — path, argv (with argv\[0\]), ignore-failure.
    Exec(String, Vec<String>),
}

impl Prop {
    /// The D-Bus signature the value is sent with (checked against systemd 239's).
    #[cfg(test)]
    pub(crate) fn dbus_signature(&self) -> String {
        self.to_value().value_signature().to_string()
    }

    fn to_value(&self) -> Value<'_> {
        match self {
            Prop::Str(s) => Value::from(s.as_str()),
            Prop::Bool(b) => Value::from(*b),
            Prop::U64(n) => Value::from(*n),
            Prop::StrList(l) => Value::from(l.clone()),
            Prop::Exec(path, argv) => Value::from(vec![(path.clone(), argv.clone(), false)]),
        }
    }
}

/// The unit properties for a command (pure; tested). `program` must be absolute;
/// `environment` is the command's complete environment.
pub(crate) fn unit_properties(
    spec: &CommandSpec,
    program: &str,
    stdout: &Path,
    stderr: &Path,
    environment: &BTreeMap<String, String>,
) -> Vec<(&'static str, Prop)> {
    let mut description = spec.display();
    if description.len() > 200 {
        let mut cut = 200;
        while !description.is_char_boundary(cut) {
            cut -= 1;
        }
        description.truncate(cut);
        description.push('…');
    }
    let mut argv = vec![program.to_string()];
    argv.extend(spec.args.iter().cloned());
    let mut props = vec![
        (
            "Description",
            Prop::Str(format!("pgappliance: {description}")),
        ),
        ("Type", Prop::Str("oneshot".into())),
        // Keeps the unit (and its exit status) loaded after a successful exit until the
        // daemon has read it and stops it.
        ("RemainAfterExit", Prop::Bool(true)),
        ("ExecStart", Prop::Exec(program.to_string(), argv)),
        ("StandardInput", Prop::Str("null".into())),
        // The command's CPU time, read back before the unit is stopped (the client CPU of
        // a benchmark point, docs/results.md).
        ("CPUAccounting", Prop::Bool(true)),
        (
            "StandardOutputFile",
            Prop::Str(stdout.display().to_string()),
        ),
        ("StandardErrorFile", Prop::Str(stderr.display().to_string())),
        (
            "TimeoutStartUSec",
            Prop::U64(
                spec.timeout
                    .map(|t| u64::try_from(t.as_micros()).unwrap_or(u64::MAX))
                    .unwrap_or(u64::MAX),
            ),
        ),
    ];
    if let Some(user) = &spec.user {
        props.push(("User", Prop::Str(user.clone())));
    }
    if let Some(dir) = &spec.cwd {
        props.push(("WorkingDirectory", Prop::Str(dir.display().to_string())));
    }
    if !environment.is_empty() {
        props.push((
            "Environment",
            Prop::StrList(
                environment
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect(),
            ),
        ));
    }
    if let Some(n) = spec.limit_nofile {
        props.push(("LimitNOFILE", Prop::U64(n)));
        props.push(("LimitNOFILESoft", Prop::U64(n)));
    }
    props
}

/// How a oneshot unit's main process ended, from `ExecMainCode` (CLD_* of waitid),
/// `ExecMainStatus` and the service `Result`.
pub(crate) fn exit_status(code: i32, status: i32, result: &str) -> ExitStatus {
    const CLD_EXITED: i32 = 1;
    if result == "timeout" {
        return ExitStatus::TimedOut;
    }
    match code {
        CLD_EXITED => ExitStatus::Code(status),
        0 => ExitStatus::Code(-1),
        _ => ExitStatus::Signal(status),
    }
}

/// What systemd's own exit statuses (200–243, set when a unit could not even start the
/// program) mean, for the error message.
pub(crate) fn systemd_exit_meaning(status: i32) -> Option<&'static str> {
    Some(match status {
        200 => "CHDIR: the working directory could not be entered",
        203 => "EXEC: the program could not be executed",
        205 => "LIMITS: the resource limits could not be set",
        209 => "STDOUT: the output file could not be opened",
        210 => "CHROOT",
        216 => "GROUP: the group could not be set",
        217 => "USER: the user could not be set (does it exist?)",
        _ => return None,
    })
}

/// Finds `program` the way a shell would (systemd 239 wants an absolute path).
pub(crate) fn resolve_program(program: &str, path_var: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Runs commands as transient units.
pub(crate) struct SystemdExecutor {
    systemd: Systemd,
    capture_dir: PathBuf,
    tag: String,
    counter: AtomicU64,
}

impl SystemdExecutor {
    /// `capture_dir` holds the output of commands whose spec names no output files.
    pub(crate) fn new(systemd: Systemd, capture_dir: &Path) -> anyhow::Result<Arc<Self>> {
        crate::fsutil::create_dir_all(capture_dir)?;
        Ok(Arc::new(SystemdExecutor {
            systemd,
            capture_dir: capture_dir.to_path_buf(),
            tag: format!("{:x}", std::process::id()),
            counter: AtomicU64::new(0),
        }))
    }

    /// Stops the transient units an earlier daemon process left running (its step is
    /// redone) and clears failed ones.
    pub(crate) async fn stop_leftovers(&self) -> anyhow::Result<usize> {
        let pattern = format!("{UNIT_PREFIX}*.service");
        let units = self
            .systemd
            .manager()
            .list_units_by_patterns(&[], &[pattern.as_str()])
            .await
            .context("listing leftover transient units")?;
        let mut n = 0;
        for u in units {
            let name = u.0;
            tracing::warn!(unit = %name, state = %u.3, "stopping a command left by an earlier daemon");
            if u.3 == "failed" {
                let _ = self.systemd.manager().reset_failed_unit(&name).await;
            } else {
                self.systemd.stop_unit(&name).await?;
                let _ = self.systemd.manager().reset_failed_unit(&name).await;
            }
            n += 1;
        }
        Ok(n)
    }

    fn unit_name(&self, program: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let base: String = Path::new(program)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        format!("{UNIT_PREFIX}{}-{n}-{base}.service", self.tag)
    }

    async fn run(&self, spec: &CommandSpec) -> Result<CommandOutput, CommandError> {
        let display = spec.display();
        let spawn_err = |e: anyhow::Error| CommandError::Spawn {
            command: display.clone(),
            source: std::io::Error::other(format!("{e:#}")),
        };
        let identity = spec
            .identity()
            .map_err(|e| spawn_err(anyhow::Error::from(e)))?;
        let environment = spec.environment(std::env::vars(), identity.as_ref());
        let path_var = environment
            .get("PATH")
            .cloned()
            .unwrap_or_else(|| crate::runner::DEFAULT_PATH.into());
        let program = resolve_program(&spec.program, &path_var).ok_or_else(|| {
            spawn_err(anyhow::anyhow!(
                "{} is not an executable in {path_var}",
                spec.program
            ))
        })?;
        let name = self.unit_name(&spec.program);
        let capture_out = spec.stdout_file.is_none();
        let capture_err = spec.stderr_file.is_none();
        let stdout = spec
            .stdout_file
            .clone()
            .unwrap_or_else(|| self.capture_dir.join(format!("{name}.out")));
        let stderr = spec
            .stderr_file
            .clone()
            .unwrap_or_else(|| self.capture_dir.join(format!("{name}.err")));
        // systemd 239 opens output files without truncating them: start them empty.
        for f in [&stdout, &stderr] {
            crate::fsutil::open_own_file(f, false, true)
                .with_context(|| format!("creating {}", f.display()))
                .map_err(spawn_err)?;
        }
        // No daemon-reload while this unit exists (systemd 239-58 would re-read its
        // StandardErrorFile as StandardOutput): held until the unit is stopped below.
        let _unit_exists = self.systemd.gate().command().await;
        let props = unit_properties(
            spec,
            &program.display().to_string(),
            &stdout,
            &stderr,
            &environment,
        );
        let values: Vec<(&str, Value<'_>)> =
            props.iter().map(|(k, v)| (*k, v.to_value())).collect();
        let job_result = self
            .systemd
            .job(&format!("run {display} as {name}"), || async {
                self.systemd
                    .manager()
                    .start_transient_unit(&name, "fail", &values, &[])
                    .await
            })
            .await
            .map_err(spawn_err)?;
        let (code, status, result, cpu_ns) = self.main_status(&name).await.map_err(spawn_err)?;
        // Leave nothing behind: stop the exited unit or clear the failed one.
        if result == "success" {
            if let Err(e) = self.systemd.stop_unit(&name).await {
                tracing::warn!(unit = %name, error = %format!("{e:#}"), "could not stop a finished command unit");
            }
        }
        let _ = self.systemd.manager().reset_failed_unit(&name).await;
        let read = |p: &Path, captured: bool| {
            if !captured {
                return String::new();
            }
            let text = std::fs::read(p)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let _ = std::fs::remove_file(p);
            text
        };
        let out = read(&stdout, capture_out);
        let mut err = read(&stderr, capture_err);
        let exit = exit_status(code, status, &result);
        tracing::debug!(unit = %name, job = %job_result, result = %result, "command unit ended");
        if let ExitStatus::Code(c) = exit {
            if let Some(meaning) = systemd_exit_meaning(c) {
                err.push_str(&format!(
                    "\nsystemd: unit {name} ended with status {c}/{meaning} (see `journalctl -u {name}`)"
                ));
            }
        }
        Ok(CommandOutput {
            status: exit,
            stdout: out,
            stderr: err,
            cpu: cpu_ns.map(|ns| CpuUse {
                cpu_s: ns as f64 / 1e9,
                main_thread_wait_s: None,
            }),
        })
    }

    /// `ExecMainCode`, `ExecMainStatus`, `Result` and the CPU time (none when systemd has
    /// no figure or cannot say) of an ended unit.
    async fn main_status(&self, unit: &str) -> anyhow::Result<(i32, i32, String, Option<u64>)> {
        let path = self.systemd.unit_path(unit).await?;
        let svc = ServiceProxy::builder(self.systemd.connection())
            .path(path)?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        Ok((
            svc.exec_main_code().await.context("reading ExecMainCode")?,
            svc.exec_main_status()
                .await
                .context("reading ExecMainStatus")?,
            svc.result().await.context("reading Result")?,
            svc.cpu_usage_nsec().await.ok().filter(|ns| *ns != u64::MAX),
        ))
    }
}

impl Executor for SystemdExecutor {
    fn execute<'a>(&'a self, spec: &'a CommandSpec) -> ExecFuture<'a> {
        Box::pin(self.run(spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn properties_carry_everything_the_spec_says() {
        let spec = CommandSpec::new("pgbench")
            .args(["-c", "1000", "bench"])
            .user(Some("postgres"))
            .cwd(Path::new("/var/lib/pgappliance"))
            .env("PGHOST", "/run/postgresql")
            .limit_nofile(4096)
            .timeout(Duration::from_secs(90));
        let postgres = crate::sys::Identity {
            name: "postgres".into(),
            uid: 26,
            gid: 26,
            groups: vec![26],
            home: PathBuf::from("/var/lib/pgsql"),
        };
        let daemon_env = [
            ("PATH", "/usr/sbin:/usr/bin"),
            ("LANG", "C.UTF-8"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("INVOCATION_ID", "abc"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let props = unit_properties(
            &spec,
            "/usr/pgsql-14/bin/pgbench",
            Path::new("/r/out"),
            Path::new("/r/err"),
            &spec.environment(daemon_env, Some(&postgres)),
        );
        let get = |k: &str| props.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(
            get("ExecStart"),
            Some(Prop::Exec(
                "/usr/pgsql-14/bin/pgbench".into(),
                vec![
                    "/usr/pgsql-14/bin/pgbench".into(),
                    "-c".into(),
                    "1000".into(),
                    "bench".into()
                ]
            ))
        );
        assert_eq!(get("Type"), Some(Prop::Str("oneshot".into())));
        assert_eq!(get("CPUAccounting"), Some(Prop::Bool(true)));
        assert_eq!(get("User"), Some(Prop::Str("postgres".into())));
        assert_eq!(get("LimitNOFILE"), Some(Prop::U64(4096)));
        assert_eq!(get("LimitNOFILESoft"), Some(Prop::U64(4096)));
        assert_eq!(get("TimeoutStartUSec"), Some(Prop::U64(90_000_000)));
        // Exactly the allow-listed part of the daemon's environment, the user's and the spec's.
        assert_eq!(
            get("Environment"),
            Some(Prop::StrList(
                [
                    "HOME=/var/lib/pgsql",
                    "LANG=C.UTF-8",
                    "LOGNAME=postgres",
                    "PATH=/usr/sbin:/usr/bin",
                    "PGHOST=/run/postgresql",
                    "USER=postgres",
                ]
                .map(String::from)
                .to_vec()
            ))
        );
        assert_eq!(get("StandardOutputFile"), Some(Prop::Str("/r/out".into())));
        assert_eq!(
            get("WorkingDirectory"),
            Some(Prop::Str("/var/lib/pgappliance".into()))
        );
        // Signature systemd expects for ExecStart.
        let exec = get("ExecStart").expect("ExecStart");
        assert_eq!(exec.to_value().value_signature().to_string(), "a(sasb)");
    }

    #[test]
    fn no_timeout_is_infinity_and_absent_fields_are_left_out() {
        let props = unit_properties(
            &CommandSpec::new("/bin/true"),
            "/bin/true",
            Path::new("/o"),
            Path::new("/e"),
            &BTreeMap::new(),
        );
        let names: Vec<&str> = props.iter().map(|(n, _)| *n).collect();
        assert!(!names.contains(&"User"));
        assert!(!names.contains(&"LimitNOFILE"));
        assert!(props.contains(&("TimeoutStartUSec", Prop::U64(u64::MAX))));
    }

    #[test]
    fn exit_statuses_map_like_waitid() {
        assert_eq!(exit_status(1, 0, "success"), ExitStatus::Code(0));
        assert_eq!(exit_status(1, 3, "exit-code"), ExitStatus::Code(3));
        assert_eq!(exit_status(2, 9, "signal"), ExitStatus::Signal(9));
        assert_eq!(exit_status(2, 15, "timeout"), ExitStatus::TimedOut);
        assert!(systemd_exit_meaning(203).is_some_and(|m| m.starts_with("EXEC")));
        assert_eq!(systemd_exit_meaning(3), None);
    }

    #[test]
    fn programs_resolve_on_path() {
        assert_eq!(
            resolve_program("sh", "/nonexistent:/bin:/usr/bin"),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(resolve_program("no-such-tool-x", "/bin"), None);
        assert_eq!(
            resolve_program("/opt/x/y", ""),
            Some(PathBuf::from("/opt/x/y"))
        );
    }
}
