//! The one command runner. Every external program the appliance starts goes through
//! [`Runner::run`], which hands a [`CommandSpec`] to an [`Executor`] (plain processes here;
//! transient systemd units on the appliance) and turns failure into a [`CommandError`] that
//! carries the command line, its exit status and the tail of its stderr.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// Lines of stderr kept in errors.
const STDERR_TAIL_LINES: usize = 12;

/// Variables a command inherits from the daemon's own environment; every `LC_*` locale
/// category too. Nothing else passes: the daemon may hold object-store credentials
/// (`AWS_*`), a BMC password or `PG*` connection settings, and the server or pgbench must
/// never see them. What a command needs beyond this, its spec says ([`CommandSpec::env`]).
pub(crate) const INHERITED_VARIABLES: &[&str] = &["PATH", "LANG", "LANGUAGE", "TZ"];

/// `PATH` when the daemon has none.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether a variable of the daemon's environment passes to commands.
pub(crate) fn is_inherited(name: &str) -> bool {
    INHERITED_VARIABLES.contains(&name) || name.starts_with("LC_")
}

/// What to run and how.
#[derive(Debug, Clone, Default)]
pub struct CommandSpec {
    pub(crate) program: String,
    pub args: Vec<String>,
    /// Run as this user (and its primary group) instead of the daemon's.
    pub(crate) user: Option<String>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) env: BTreeMap<String, String>,
    /// Open-files limit (pgbench at 1000 clients needs well above 1024).
    pub(crate) limit_nofile: Option<u64>,
    /// Write stdout/stderr to these files (raw evidence) instead of capturing them.
    pub(crate) stdout_file: Option<PathBuf>,
    pub(crate) stderr_file: Option<PathBuf>,
    /// Kill the command when it runs longer than this.
    pub(crate) timeout: Option<Duration>,
}

impl CommandSpec {
    pub fn new(program: impl Into<String>) -> Self {
        CommandSpec {
            program: program.into(),
            ..Default::default()
        }
    }
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
    pub(crate) fn user(mut self, user: Option<&str>) -> Self {
        self.user = user.map(str::to_string);
        self
    }
    pub(crate) fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_path_buf());
        self
    }
    pub fn env(mut self, k: &str, v: impl Into<String>) -> Self {
        self.env.insert(k.to_string(), v.into());
        self
    }
    pub(crate) fn output_files(mut self, stdout: &Path, stderr: &Path) -> Self {
        self.stdout_file = Some(stdout.to_path_buf());
        self.stderr_file = Some(stderr.to_path_buf());
        self
    }
    pub(crate) fn limit_nofile(mut self, n: u64) -> Self {
        self.limit_nofile = Some(n);
        self
    }
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    /// The complete environment of the command (pure): the allowed variables of the
    /// daemon's environment `parent` ([`INHERITED_VARIABLES`], `LC_*`), `HOME`, `USER` and
    /// `LOGNAME` of the user it runs as, then the spec's own variables.
    pub(crate) fn environment<I>(
        &self,
        parent: I,
        user: Option<&crate::sys::Identity>,
    ) -> BTreeMap<String, String>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut env: BTreeMap<String, String> = parent
            .into_iter()
            .filter(|(k, _)| is_inherited(k))
            .collect();
        env.entry("PATH".into())
            .or_insert_with(|| DEFAULT_PATH.into());
        if let Some(id) = user {
            env.insert("HOME".into(), id.home.display().to_string());
            env.insert("USER".into(), id.name.clone());
            env.insert("LOGNAME".into(), id.name.clone());
        }
        env.extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    }

    /// The user the command runs as: the spec's, else the daemon's own (None when the
    /// daemon's uid has no passwd entry).
    pub(crate) fn identity(&self) -> std::io::Result<Option<crate::sys::Identity>> {
        match &self.user {
            Some(name) => crate::sys::lookup_user(name).map(Some),
            None => Ok(crate::sys::current_user()),
        }
    }

    /// The command line as a shell would show it (for logs and errors).
    pub fn display(&self) -> String {
        let mut parts = Vec::with_capacity(self.args.len() + 1);
        parts.push(shell_quote(&self.program));
        parts.extend(self.args.iter().map(|a| shell_quote(a)));
        let line = parts.join(" ");
        match &self.user {
            Some(u) => format!("{line} (as {u})"),
            None => line,
        }
    }
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// How a finished command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
    TimedOut,
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitStatus::Code(c) => write!(f, "exit status {c}"),
            ExitStatus::Signal(s) => write!(f, "killed by signal {s}"),
            ExitStatus::TimedOut => write!(f, "timed out"),
        }
    }
}

/// What a command produced. Output sent to files is not captured (empty here).
#[derive(Debug, Clone)]
pub struct CommandOutput {
    pub(crate) status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// The CPU the command used, where its executor could measure it.
    pub(crate) cpu: Option<CpuUse>,
}

/// The CPU a finished command used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuUse {
    /// User plus system CPU seconds of the command's process, every thread of it (a plain
    /// process: /proc/<pid>/stat read as it exits; a transient unit: its control group's
    /// `CPUUsageNSec`).
    pub(crate) cpu_s: f64,
    /// Seconds the process's main thread was ready to run but waited on a run queue for a
    /// CPU (/proc/<pid>/schedstat); none where it cannot be read (a transient unit).
    pub(crate) main_thread_wait_s: Option<f64>,
}

/// /proc's clock ticks per second: USER_HZ, which the kernel converts its own tick rate to
/// and which is 100 on every architecture the appliance runs on (x86_64, aarch64).
const USER_HZ: f64 = 100.0;

/// The user and system CPU time of /proc/<pid>/stat, in clock ticks: fields 14 and 15,
/// counted after the command name, which is in parentheses and may hold spaces and
/// parentheses itself (so the fields start after the last `)`).
pub(crate) fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// /proc/<pid>/schedstat: nanoseconds the thread ran on a CPU and nanoseconds it waited on
/// a run queue (the third field, its time slices, is not needed).
pub(crate) fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace();
    let ran = fields.next()?.parse().ok()?;
    let waited = fields.next()?.parse().ok()?;
    Some((ran, waited))
}

/// The CPU use of process `pid`, read from /proc: whole once it has exited and is not yet
/// reaped (a zombie's stat holds every thread's time, those of the threads that ended
/// before it included).
fn read_cpu_use(pid: u32) -> Option<CpuUse> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let wait = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|t| parse_schedstat(&t));
    Some(CpuUse {
        cpu_s: parse_stat_cpu_ticks(&stat)? as f64 / USER_HZ,
        main_thread_wait_s: wait.map(|(_, waited)| waited as f64 / 1e9),
    })
}

/// Waits until child `pid` has exited without reaping it (`waitid` with `WNOWAIT`), reads
/// its CPU use while it is a zombie, and leaves the reaping to tokio's `Child::wait`.
async fn cpu_at_exit(pid: u32) -> Option<CpuUse> {
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    tokio::task::spawn_blocking(move || {
        let pid_t = nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?);
        loop {
            match waitid(Id::Pid(pid_t), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
                Ok(_) => return read_cpu_use(pid),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return None,
            }
        }
    })
    .await
    .ok()
    .flatten()
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.status == ExitStatus::Code(0)
    }
}

/// A command that could not be started or did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("`{command}` could not be started: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}){}", render_tail(.stderr_tail))]
    Failed {
        command: String,
        status: ExitStatus,
        stderr_tail: String,
    },
}

fn render_tail(tail: &str) -> String {
    if tail.trim().is_empty() {
        "; stderr was empty".to_string()
    } else {
        format!("; stderr ends with:\n{}", tail.trim_end())
    }
}

/// The last `n` lines of some text.
pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub(crate) type ExecFuture<'a> =
    Pin<Box<dyn Future<Output = Result<CommandOutput, CommandError>> + 'a>>;

/// Something that runs commands: plain processes ([`LocalExecutor`]) or transient units.
pub(crate) trait Executor {
    fn execute<'a>(&'a self, spec: &'a CommandSpec) -> ExecFuture<'a>;
}

/// Runs commands and turns non-zero exits into [`CommandError::Failed`].
#[derive(Clone)]
pub struct Runner {
    executor: Arc<dyn Executor + Send + Sync>,
}

impl Runner {
    pub(crate) fn new(executor: Arc<dyn Executor + Send + Sync>) -> Self {
        Runner { executor }
    }

    pub fn local() -> Self {
        Runner::new(Arc::new(LocalExecutor))
    }

    /// Runs a command; any exit other than 0 is an error.
    pub async fn run(&self, spec: &CommandSpec) -> Result<CommandOutput, CommandError> {
        self.run_accepting(spec, &[0]).await
    }

    /// Runs a command; exit codes in `ok_codes` count as success.
    pub async fn run_accepting(
        &self,
        spec: &CommandSpec,
        ok_codes: &[i32],
    ) -> Result<CommandOutput, CommandError> {
        tracing::debug!(command = %spec.display(), "run");
        let out = self.executor.execute(spec).await?;
        match out.status {
            ExitStatus::Code(c) if ok_codes.contains(&c) => Ok(out),
            _ => {
                let stderr = match &spec.stderr_file {
                    Some(path) => std::fs::read_to_string(path).unwrap_or_default(),
                    None => out.stderr.clone(),
                };
                Err(CommandError::Failed {
                    command: spec.display(),
                    status: out.status,
                    stderr_tail: tail_lines(&stderr, STDERR_TAIL_LINES),
                })
            }
        }
    }
}

/// Plain child processes of the daemon. Children die with the daemon (`PR_SET_PDEATHSIG`)
/// so a killed run leaves no orphan pgbench loading the server; the journal redoes the step.
pub(crate) struct LocalExecutor;

impl Executor for LocalExecutor {
    fn execute<'a>(&'a self, spec: &'a CommandSpec) -> ExecFuture<'a> {
        Box::pin(run_local(spec))
    }
}

fn open_output(path: &Option<PathBuf>, command: &str) -> Result<Stdio, CommandError> {
    match path {
        None => Ok(Stdio::piped()),
        Some(p) => crate::fsutil::open_own_file(p, false, true)
            .map(Stdio::from)
            .map_err(|source| CommandError::Spawn {
                command: format!("{command} (opening {})", p.display()),
                source,
            }),
    }
}

async fn run_local(spec: &CommandSpec) -> Result<CommandOutput, CommandError> {
    let display = spec.display();
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(open_output(&spec.stdout_file, &display)?)
        .stderr(open_output(&spec.stderr_file, &display)?)
        .kill_on_drop(true);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    let identity = spec.identity().map_err(|source| CommandError::Spawn {
        command: display.clone(),
        source,
    })?;
    cmd.env_clear()
        .envs(spec.environment(std::env::vars(), identity.as_ref()));
    let switch_to = if spec.user.is_some() {
        identity.as_ref()
    } else {
        None
    };
    crate::sys::prepare_child(cmd.as_std_mut(), spec.limit_nofile, switch_to);

    let mut child = cmd.spawn().map_err(|source| CommandError::Spawn {
        command: display.clone(),
        source,
    })?;
    crate::faults::spawned(&spec.program, child.id(), spec.stdout_file.as_deref());
    let mut stdout_pipe = child.stdout.take();
    let mut stderr_pipe = child.stderr.take();
    let read_out = async {
        let mut s = String::new();
        if let Some(p) = stdout_pipe.as_mut() {
            let mut buf = Vec::new();
            let _ = p.read_to_end(&mut buf).await;
            s = String::from_utf8_lossy(&buf).into_owned();
        }
        s
    };
    let read_err = async {
        let mut s = String::new();
        if let Some(p) = stderr_pipe.as_mut() {
            let mut buf = Vec::new();
            let _ = p.read_to_end(&mut buf).await;
            s = String::from_utf8_lossy(&buf).into_owned();
        }
        s
    };
    let pid = child.id();
    let exited = async {
        // Read before the child is reaped: a reaped process's CPU time is gone from /proc.
        let cpu = match pid {
            Some(pid) => cpu_at_exit(pid).await,
            None => None,
        };
        (cpu, child.wait().await)
    };
    let wait = async {
        let (stdout, stderr, (cpu, status)) = tokio::join!(read_out, read_err, exited);
        (stdout, stderr, status, cpu)
    };
    let result = match spec.timeout {
        Some(t) => tokio::time::timeout(t, wait).await.ok(),
        None => Some(wait.await),
    };
    let Some((stdout, stderr, status, cpu)) = result else {
        return Ok(CommandOutput {
            status: ExitStatus::TimedOut,
            stdout: String::new(),
            stderr: String::new(),
            cpu: None,
        });
    };
    let status = status.map_err(|source| CommandError::Spawn {
        command: display.clone(),
        source,
    })?;
    use std::os::unix::process::ExitStatusExt;
    let status = match (status.code(), status.signal()) {
        (Some(c), _) => ExitStatus::Code(c),
        (None, Some(s)) => ExitStatus::Signal(s),
        (None, None) => ExitStatus::Code(-1),
    };
    Ok(CommandOutput {
        status,
        stdout,
        stderr,
        cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn display_quotes_what_a_shell_would_need() {
        let spec = CommandSpec::new("psql").args(["-c", "SELECT 1", "it's"]);
        assert_eq!(spec.display(), r"psql -c 'SELECT 1' 'it'\''s'");
    }

    #[test]
    fn failure_carries_command_status_and_stderr_tail() {
        let spec = CommandSpec::new("sh").args([
            "-c",
            "for i in $(seq 1 30); do echo line$i >&2; done; exit 3",
        ]);
        let err = rt()
            .block_on(Runner::local().run(&spec))
            .expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains("`sh -c"), "{msg}");
        assert!(msg.contains("exit status 3"), "{msg}");
        assert!(msg.contains("line30"), "{msg}");
        assert!(!msg.contains("line18\n"), "only the tail: {msg}");
    }

    #[test]
    fn missing_program_is_a_spawn_error_naming_it() {
        let spec = CommandSpec::new("/nonexistent/pgbench").arg("--version");
        let err = rt()
            .block_on(Runner::local().run(&spec))
            .expect_err("fails");
        assert!(err.to_string().contains("/nonexistent/pgbench"));
    }

    #[test]
    fn output_files_receive_the_streams_and_failures_read_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let errf = dir.path().join("err");
        let spec = CommandSpec::new("sh")
            .args(["-c", "echo hello; echo oops >&2; exit 1"])
            .output_files(&out, &errf);
        let err = rt()
            .block_on(Runner::local().run(&spec))
            .expect_err("fails");
        assert_eq!(std::fs::read_to_string(&out).unwrap_or_default(), "hello\n");
        assert!(err.to_string().contains("oops"));
    }

    #[test]
    fn an_output_file_planted_as_a_link_is_refused_and_its_target_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("precious");
        std::fs::write(&victim, "keep me\n").expect("write");
        let out = dir.path().join("out");
        std::os::unix::fs::symlink(&victim, &out).expect("symlink");
        let spec = CommandSpec::new("sh")
            .args(["-c", "echo overwritten"])
            .output_files(&out, &dir.path().join("err"));
        let err = rt()
            .block_on(Runner::local().run(&spec))
            .expect_err("refused");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep me\n");
    }

    #[test]
    fn cpu_time_is_read_after_the_command_name_whatever_it_holds() {
        let fixture = |f: &str| {
            std::fs::read_to_string(format!(
                "{}/tests/fixtures/proc/{f}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .expect("fixture")
        };
        assert_eq!(
            parse_stat_cpu_ticks(&fixture("rustc.stat")),
            Some(662 + 132)
        );
        assert_eq!(
            parse_stat_cpu_ticks(&fixture("parenthesised-name.stat")),
            Some(0)
        );
        assert_eq!(
            parse_schedstat(&fixture("rustc.schedstat")),
            Some((11_940_619, 13_812_308))
        );
        assert_eq!(parse_stat_cpu_ticks("13694 (rustc) S 7688"), None);
        assert_eq!(parse_stat_cpu_ticks("no name here"), None);
        assert_eq!(parse_schedstat("12"), None);
    }

    #[test]
    fn a_plain_command_reports_the_cpu_it_used() {
        // Busy in the shell itself: CPU time of its own, whatever else the machine runs.
        let busy = CommandSpec::new("sh")
            .arg("-c")
            .arg("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done");
        let out = rt().block_on(Runner::local().run(&busy)).expect("runs");
        let cpu = out.cpu.expect("measured");
        assert!(cpu.cpu_s > 0.0, "{cpu:?}");
        assert!(cpu.main_thread_wait_s.is_some(), "{cpu:?}");
        // Asleep: next to no CPU.
        let idle = CommandSpec::new("sleep").arg("0.3");
        let out = rt().block_on(Runner::local().run(&idle)).expect("runs");
        let cpu = out.cpu.expect("measured");
        assert!(cpu.cpu_s < 0.05, "{cpu:?}");
    }

    #[test]
    fn timeout_is_reported() {
        let spec = CommandSpec::new("sleep")
            .arg("5")
            .timeout(Duration::from_millis(100));
        let err = rt()
            .block_on(Runner::local().run(&spec))
            .expect_err("fails");
        assert!(err.to_string().contains("timed out"), "{err}");
    }

    #[test]
    fn environment_keeps_only_the_allow_list_the_user_and_the_spec() {
        let parent = [
            ("PATH", "/usr/bin:/bin"),
            ("LANG", "C.UTF-8"),
            ("LC_MESSAGES", "C"),
            ("TZ", "UTC"),
            ("HOME", "/root"),
            ("USER", "root"),
            ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("AWS_SESSION_TOKEN", "tok"),
            ("PGAPPLIANCE_BMC_PASSWORD", "bmc"),
            ("PGPASSWORD", "pw"),
            ("PGHOST", "elsewhere"),
            ("NOTIFY_SOCKET", "/run/systemd/notify"),
            ("http_proxy", "http://u:p@proxy:3128"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let postgres = crate::sys::Identity {
            name: "postgres".into(),
            uid: 26,
            gid: 26,
            groups: vec![26],
            home: PathBuf::from("/var/lib/pgsql"),
        };
        let spec = CommandSpec::new("pgbench").env("PGHOST", "/run/postgresql");
        let env = spec.environment(parent.clone(), Some(&postgres));
        let want: BTreeMap<String, String> = [
            ("PATH", "/usr/bin:/bin"),
            ("LANG", "C.UTF-8"),
            ("LC_MESSAGES", "C"),
            ("TZ", "UTC"),
            ("HOME", "/var/lib/pgsql"),
            ("USER", "postgres"),
            ("LOGNAME", "postgres"),
            ("PGHOST", "/run/postgresql"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, want);
        // Without a PATH of its own the daemon still gives commands one.
        let env = CommandSpec::new("lsblk").environment(Vec::new(), None);
        assert_eq!(env.get("PATH").map(String::as_str), Some(DEFAULT_PATH));
        assert_eq!(env.len(), 1);
    }

    #[test]
    fn a_child_sees_only_its_explicit_environment() {
        // The test process's own environment stands in for the daemon's: whatever it holds
        // beyond the allow-list must not reach the child.
        let spec = CommandSpec::new("env").env("PGAPPLIANCE_TEST_SET", "1");
        let out = rt().block_on(Runner::local().run(&spec)).expect("runs");
        let mut names: Vec<&str> = out
            .stdout
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect();
        names.sort_unstable();
        for n in &names {
            assert!(
                is_inherited(n) || ["HOME", "USER", "LOGNAME", "PGAPPLIANCE_TEST_SET"].contains(n),
                "{n} reached the child: {names:?}"
            );
        }
        assert!(names.contains(&"PATH") && names.contains(&"PGAPPLIANCE_TEST_SET"));
    }

    #[test]
    fn file_limit_is_applied() {
        let spec = CommandSpec::new("sh")
            .args(["-c", "ulimit -n"])
            .limit_nofile(2048);
        let out = rt().block_on(Runner::local().run(&spec)).expect("runs");
        assert_eq!(out.stdout.trim(), "2048");
    }
}
