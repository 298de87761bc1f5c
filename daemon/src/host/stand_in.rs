//! The stand-in host of the unit tests (compiled for tests only): what a step asks of a
//! host, answered in a temporary directory, so every step's `check` and `apply` can be
//! tested without changing the machine.
//!
//! - Commands go to a [`Script`]: each rule names a program and the first arguments, and
//!   answers with an exit code, stdout and stderr (written to the command's output files
//!   when it has them, as the real executors do); the newest matching rule answers, so a
//!   test changes the machine by adding a rule. Every command run is recorded. A command no
//!   rule answers fails with an error naming it, and is a test failure when the host is
//!   dropped. PostgreSQL's own programs (under `/usr/lib/postgresql/` or `/usr/pgsql-`)
//!   run for real: the server is a real scratch cluster under the directory.
//! - What changes the machine (mounting a volume, SELinux labels, tuned, the reboot, the
//!   power-off, the server's start and stop through its [`ServerControl`]) is recorded as a
//!   [`Did`] and changes nothing outside the directory.
//! - The machine's files a step reads or writes (`/proc/cmdline`, the boot id,
//!   `/proc/self/mountinfo`, `/etc/default/grub`, repository files) are under
//!   [`StandInHost::root`] ([`super::Host::machine_path`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Result;

use crate::plan::{FinishAction, Plan, Storage};
use crate::ports::free_loopback_port;
use crate::postgres::cluster::{ControlFuture, ServerControl};
use crate::postgres::{Cluster, PgBin};
use crate::runner::{
    CommandError, CommandOutput, CommandSpec, ExecFuture, Executor, ExitStatus, LocalExecutor,
    Runner,
};
use crate::systemd::tuned::TunedState;

/// Where the PostgreSQL packages put their programs (which run for real).
const POSTGRES_PROGRAM_DIRS: &[&str] = &["/usr/lib/postgresql/", "/usr/pgsql-"];

/// What a command is answered with.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// This exit code and output.
    Answer {
        code: i32,
        stdout: String,
        stderr: String,
    },
    /// The command is run for real (PostgreSQL's own programs).
    Real,
}

/// Exit 0 with `stdout`.
pub(crate) fn ok(stdout: &str) -> Reply {
    Reply::Answer {
        code: 0,
        stdout: stdout.to_string(),
        stderr: String::new(),
    }
}

/// Exit `code` with `stderr`.
pub(crate) fn fails(code: i32, stderr: &str) -> Reply {
    Reply::Answer {
        code,
        stdout: String::new(),
        stderr: stderr.to_string(),
    }
}

/// Which commands a rule answers.
#[derive(Debug, Clone)]
enum Matches {
    /// The program (its path's last component) and the first arguments.
    Program { program: String, args: Vec<String> },
    /// Every program under this directory prefix.
    Under(String),
}

impl Matches {
    fn matches(&self, spec: &CommandSpec) -> bool {
        match self {
            Matches::Program { program, args } => {
                let name = Path::new(&spec.program)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                name == *program && spec.args.starts_with(args)
            }
            Matches::Under(prefix) => spec.program.starts_with(prefix.as_str()),
        }
    }
}

/// The answers of the stand-in host's executor, and what it ran.
#[derive(Default)]
pub(crate) struct Script {
    rules: Mutex<Vec<(Matches, Reply)>>,
    ran: Mutex<Vec<CommandSpec>>,
    unanswered: Mutex<Vec<String>>,
}

impl Script {
    /// Answers `program` whose arguments begin with `args` (newer rules first).
    pub(crate) fn on(&self, program: &str, args: &[&str], reply: Reply) {
        self.rules.lock().expect("script").push((
            Matches::Program {
                program: program.to_string(),
                args: args.iter().map(|a| a.to_string()).collect(),
            },
            reply,
        ));
    }

    /// Every command run so far, as `program arg …` (the program's path as given).
    pub(crate) fn commands(&self) -> Vec<String> {
        self.ran
            .lock()
            .expect("script")
            .iter()
            .map(|s| {
                std::iter::once(s.program.clone())
                    .chain(s.args.clone())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    /// The commands run so far whose program is `program` (its last path component).
    pub(crate) fn commands_of(&self, program: &str) -> Vec<String> {
        self.commands()
            .into_iter()
            .filter(|c| {
                let first = c.split(' ').next().unwrap_or_default();
                Path::new(first).file_name().is_some_and(|n| n == program)
            })
            .collect()
    }

    /// Forgets the commands run so far (to see what one call runs).
    pub(crate) fn clear_commands(&self) {
        self.ran.lock().expect("script").clear();
    }

    /// Commands no rule answered.
    pub(crate) fn unanswered(&self) -> Vec<String> {
        self.unanswered.lock().expect("script").clone()
    }

    fn reply(&self, spec: &CommandSpec) -> Option<Reply> {
        self.rules
            .lock()
            .expect("script")
            .iter()
            .rev()
            .find(|(m, _)| m.matches(spec))
            .map(|(_, r)| r.clone())
    }
}

/// The executor that answers from a [`Script`].
struct Scripted(Arc<Script>);

fn write_output(path: &Option<PathBuf>, text: &str, command: &str) -> Result<(), CommandError> {
    if let Some(p) = path {
        let written = p
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(p, text));
        written.map_err(|source| CommandError::Spawn {
            command: format!("{command} (writing {})", p.display()),
            source,
        })?;
    }
    Ok(())
}

impl Executor for Scripted {
    fn execute<'a>(&'a self, spec: &'a CommandSpec) -> ExecFuture<'a> {
        Box::pin(async move {
            self.0.ran.lock().expect("script").push(spec.clone());
            match self.0.reply(spec) {
                Some(Reply::Real) => LocalExecutor.execute(spec).await,
                Some(Reply::Answer {
                    code,
                    stdout,
                    stderr,
                }) => {
                    let command = spec.display();
                    write_output(&spec.stdout_file, &stdout, &command)?;
                    write_output(&spec.stderr_file, &stderr, &command)?;
                    Ok(CommandOutput {
                        status: ExitStatus::Code(code),
                        stdout: if spec.stdout_file.is_some() {
                            String::new()
                        } else {
                            stdout
                        },
                        stderr: if spec.stderr_file.is_some() {
                            String::new()
                        } else {
                            stderr
                        },
                        cpu: None,
                    })
                }
                None => {
                    let command = spec.display();
                    self.0
                        .unanswered
                        .lock()
                        .expect("script")
                        .push(command.clone());
                    Err(CommandError::Spawn {
                        command,
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "the stand-in host's script has no answer for it",
                        ),
                    })
                }
            }
        })
    }
}

/// Something the stand-in host was asked to do to the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Did {
    /// The server's files written (before initdb).
    InstallServer,
    Initdb,
    /// What must hold before every start (labels, the enabled unit).
    BeforeStart,
    ServerStart,
    ServerStop,
    ServerRestart,
    /// The data volume `what` mounted at `at`, now and at every boot.
    Mount {
        what: String,
        at: String,
    },
    /// SELinux labels on `path` (at `stage`).
    Label {
        path: String,
        stage: String,
    },
    /// The tuned profile activated.
    Tuned(String),
    Reboot,
    DoneMarker,
    PowerOff,
}

type Record = Arc<Mutex<Vec<Did>>>;

fn record(log: &Record, did: Did) {
    log.lock().expect("record").push(did);
}

/// The server's start and stop: recorded, then carried out with pg_ctl on the scratch
/// cluster.
struct Control {
    pg_ctl: Cluster,
    log: Record,
}

impl ServerControl for Control {
    fn is_running(&self) -> ControlFuture<'_, bool> {
        Box::pin(self.pg_ctl.is_running())
    }
    fn start(&self) -> ControlFuture<'_, ()> {
        record(&self.log, Did::ServerStart);
        Box::pin(self.pg_ctl.start())
    }
    fn stop(&self) -> ControlFuture<'_, ()> {
        record(&self.log, Did::ServerStop);
        Box::pin(self.pg_ctl.stop())
    }
    fn restart(&self) -> ControlFuture<'_, ()> {
        record(&self.log, Did::ServerRestart);
        Box::pin(self.pg_ctl.restart())
    }
}

/// A host in a temporary directory (see the module's text).
pub(crate) struct StandInHost {
    dir: tempfile::TempDir,
    script: Arc<Script>,
    runner: Runner,
    log: Record,
    port: u16,
    /// Whether it runs the steps that change the machine (as the appliance does), which
    /// also makes it a host that tunes the OS.
    changes_machine: bool,
}

impl StandInHost {
    /// A fresh machine: nothing installed, nothing mounted, an empty script but for
    /// PostgreSQL's own programs, a kernel command line without arguments.
    pub(crate) fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("pga-standin-")
            .tempdir()
            .expect("temporary directory");
        // The cluster's OS user (postgres, when the tests run as root) reaches it.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .expect("opening the temporary directory");
        }
        let script = Arc::new(Script::default());
        for prefix in POSTGRES_PROGRAM_DIRS {
            script
                .rules
                .lock()
                .expect("script")
                .push((Matches::Under(prefix.to_string()), Reply::Real));
        }
        let host = StandInHost {
            runner: Runner::new(Arc::new(Scripted(script.clone()))),
            script,
            log: Arc::default(),
            port: free_loopback_port().expect("a free port"),
            changes_machine: true,
            dir,
        };
        host.write_file("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro\n");
        host.write_file("/proc/sys/kernel/random/boot_id", "boot-1\n");
        host.write_file("/proc/self/mountinfo", "");
        host.write_file(
            "/sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        );
        host
    }

    /// A host that leaves out the steps that change the machine (as local mode does).
    pub(crate) fn leaving_the_machine_alone(mut self) -> Self {
        self.changes_machine = false;
        self
    }

    pub(crate) fn changes_machine(&self) -> bool {
        self.changes_machine
    }

    /// The temporary directory (the work directory of the tests' runs lives in it).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The stand-in machine's root: its `/proc/cmdline` is `root()/proc/cmdline`.
    pub(crate) fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// Where the stand-in machine keeps `path` (an absolute path on a real machine).
    pub(crate) fn machine_path(&self, path: &Path) -> PathBuf {
        self.root().join(path.strip_prefix("/").unwrap_or(path))
    }

    /// Writes a file of the stand-in machine.
    pub(crate) fn write_file(&self, path: &str, text: &str) {
        let p = self.machine_path(Path::new(path));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }

    /// Reads a file of the stand-in machine (None: it does not exist).
    pub(crate) fn read_file(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.machine_path(Path::new(path))).ok()
    }

    /// The machine boots again: a new boot id, and `cmdline` as the kernel's command line.
    pub(crate) fn boot(&self, boot_id: &str, cmdline: &str) {
        self.write_file("/proc/sys/kernel/random/boot_id", &format!("{boot_id}\n"));
        self.write_file("/proc/cmdline", &format!("{cmdline}\n"));
    }

    pub(crate) fn script(&self) -> &Script {
        &self.script
    }

    /// What the host was asked to do to the machine, in order.
    pub(crate) fn did(&self) -> Vec<Did> {
        self.log.lock().expect("record").clone()
    }

    pub(crate) fn runner(&self) -> Runner {
        self.runner.clone()
    }

    fn cluster_dir(&self) -> PathBuf {
        self.dir.path().join("cluster")
    }

    fn os_user(&self) -> Result<String> {
        if crate::sys::is_root() {
            Ok("postgres".to_string())
        } else {
            crate::sys::current_user()
                .map(|u| u.name)
                .ok_or_else(|| anyhow::anyhow!("the tests' user has no passwd entry"))
        }
    }

    /// A real scratch cluster of the plan's PostgreSQL under the directory, started and
    /// stopped through the recording [`ServerControl`].
    pub(crate) async fn server(&self, plan: &Plan, port: Option<u16>) -> Result<Cluster> {
        let bin = PgBin::find(&self.runner, plan.postgres.version, None).await?;
        let port = port.unwrap_or(self.port);
        let user = self.os_user()?;
        let pg_ctl = Cluster::new(
            bin.clone(),
            &self.cluster_dir(),
            port,
            Some(user.clone()),
            self.runner.clone(),
        )?;
        // A `Cluster` is neither Send nor Sync (its control is an `Arc<dyn ServerControl>`),
        // nor is the control it is given.
        #[allow(clippy::arc_with_non_send_sync)]
        let control = Arc::new(Control {
            pg_ctl: pg_ctl.clone(),
            log: self.log.clone(),
        });
        Ok(Cluster::controlled(
            bin,
            &pg_ctl.data_dir(),
            &pg_ctl.socket_dir(),
            port,
            &user,
            self.runner.clone(),
            control,
        ))
    }

    pub(crate) fn snapshot_root(&self) -> PathBuf {
        self.dir.path().join("snapshots")
    }

    pub(crate) fn install_server(&self, cluster: &Cluster) -> Result<()> {
        record(&self.log, Did::InstallServer);
        cluster.prepare_dir()
    }

    pub(crate) async fn initdb(&self, cluster: &Cluster, plan: &Plan, raw: &Path) -> Result<()> {
        record(&self.log, Did::Initdb);
        cluster
            .initdb(
                plan.postgres.data_checksums,
                &raw.join("initdb.stdout"),
                &raw.join("initdb.stderr"),
            )
            .await
    }

    pub(crate) fn before_start(&self) {
        record(&self.log, Did::BeforeStart);
    }

    /// Records the mount, writes its `.mount` unit where the appliance does (under the
    /// root) and shows the mount in the stand-in machine's `/proc/self/mountinfo`.
    pub(crate) fn mount_volume(&self, what: &str, storage: &Storage) -> Result<()> {
        let unit = crate::storage::mount_unit_name(&storage.mount_point);
        self.write_file(
            &Path::new(crate::platform::SYSTEMD_UNIT_DIR)
                .join(&unit)
                .display()
                .to_string(),
            &crate::storage::mount_unit(what, &storage.mount_point, storage.filesystem),
        );
        let fstype = storage.filesystem.as_str();
        record(
            &self.log,
            Did::Mount {
                what: what.to_string(),
                at: storage.mount_point.clone(),
            },
        );
        let mut mountinfo = self.read_file("/proc/self/mountinfo").unwrap_or_default();
        mountinfo.push_str(&format!(
            "90 29 253:0 / {} rw,noatime shared:50 - {fstype} {what} rw,attr2,inode64,logbufs=8,logbsize=32k,noquota\n",
            storage.mount_point,
        ));
        self.write_file("/proc/self/mountinfo", &mountinfo);
        Ok(())
    }

    pub(crate) fn label_data_dir(&self, path: &str, stage: &str) {
        record(
            &self.log,
            Did::Label {
                path: path.to_string(),
                stage: stage.to_string(),
            },
        );
    }

    pub(crate) fn activate_tuned(&self, profile: &str) -> TunedState {
        record(&self.log, Did::Tuned(profile.to_string()));
        TunedState {
            active: profile.to_string(),
            verified: true,
        }
    }

    /// Records the reboot and returns the error a reboot that "returns" is.
    pub(crate) fn reboot(&self) -> anyhow::Error {
        record(&self.log, Did::Reboot);
        anyhow::anyhow!("the stand-in host rebooted (the step ends here)")
    }

    pub(crate) fn finish(&self, plan: &Plan) {
        record(&self.log, Did::DoneMarker);
        if plan.finish.action == FinishAction::PowerOff {
            record(&self.log, Did::PowerOff);
        }
    }
}

impl Default for StandInHost {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for StandInHost {
    /// Ends the scratch server (immediate shutdown) and fails the test over any command
    /// the script did not answer.
    fn drop(&mut self) {
        let pid_file = self.cluster_dir().join("data").join("postmaster.pid");
        if let Some(pid) = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
            .filter(|p| *p > 0)
        {
            let pid = nix::unistd::Pid::from_raw(pid);
            if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGQUIT).is_ok() {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while nix::sys::signal::kill(pid, None).is_ok()
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
        let unanswered = self.script.unanswered();
        if !unanswered.is_empty() && !std::thread::panicking() {
            panic!(
                "the stand-in host was asked to run commands its script does not answer: {}",
                unanswered.join("; ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_from_the_newest_matching_rule_into_the_output_files_and_records_each_command()
    {
        let host = StandInHost::new();
        host.script().on("dnf", &[], ok("any"));
        host.script()
            .on("dnf", &["install"], fails(1, "no such package"));
        let runner = host.runner();
        let out = runner
            .run(&CommandSpec::new("dnf").args(["-qy", "module", "disable", "postgresql"]))
            .await
            .expect("answered");
        assert_eq!(out.stdout, "any");
        let stderr = host.dir().join("raw/install.stderr");
        let e = runner
            .run(
                &CommandSpec::new("/usr/bin/dnf")
                    .args(["install", "-y", "x"])
                    .output_files(&host.dir().join("raw/install.stdout"), &stderr),
            )
            .await
            .expect_err("fails");
        assert!(e.to_string().contains("no such package"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&stderr).expect("stderr file"),
            "no such package"
        );
        assert_eq!(
            host.script().commands(),
            [
                "dnf -qy module disable postgresql",
                "/usr/bin/dnf install -y x"
            ]
        );
        assert_eq!(host.script().commands_of("dnf").len(), 2);
    }

    #[tokio::test]
    #[should_panic(expected = "its script does not answer: lvremove -f pgappliance")]
    async fn a_command_no_rule_answers_fails_naming_it_and_fails_the_test() {
        let host = StandInHost::new();
        let e = host
            .runner()
            .run(&CommandSpec::new("lvremove").args(["-f", "pgappliance"]))
            .await
            .expect_err("no answer");
        assert!(e.to_string().contains("lvremove -f pgappliance"), "{e}");
        drop(host);
    }
}
