//! Every step's `check` and `apply` against the stand-in host
//! ([`crate::host::stand_in`]): commands answered by a script, changes to the machine
//! recorded, PostgreSQL a real scratch cluster in the host's temporary directory.

mod inventory;
mod measure;
mod os_tuning;
mod packages;
mod postgres;
mod storage;

use std::path::Path;

use super::{Check, Context, Looking, Step, UploadTarget};
use crate::host::stand_in::{ok, StandInHost};
use crate::host::Host;
use crate::journal::{journal_path, JournalFile};
use crate::plan::Plan;

/// The tests' plans, on Debian 12 (what the machine running the tests has) or Rocky 8.
pub(crate) const DEBIAN_PLAN: &str = r#"
[appliance]
name = "stand-in"
platform = "debian12"

[postgres]
data_checksums = false

[storage]
devices = "none"
mount_point = "/var/lib/pgappliance/pgdata"

[tuning]
auto = false
tuned_profile = "none"

[tuning.settings]
shared_buffers = "32MB"
work_mem = "8MB"
max_wal_size = "1GB"

[dataset]
scale = 1

[[workloads]]
name = "ro"
builtin = "select-only"
clients = [1, 2]
threads = 1
transactions = 50

[upload]
store = "file:///nonexistent"

[finish]
action = "stay-up"
"#;

pub(crate) const ROCKY_PLAN: &str = r#"
[appliance]
name = "stand-in"
platform = "rocky8"
arch = "x86_64"

[postgres]
version = 15
repository = "https://download.postgresql.org/pub/repos/yum/reporpms/EL-8-x86_64/pgdg-redhat-repo-latest.noarch.rpm"

[storage]
devices = ["/dev/nvme0n1", "/dev/nvme1n1"]
layout = "stripe"
stripe_size = "64KiB"
filesystem = "xfs"
mount_point = "/var/lib/pgappliance/pgdata"

[tuning]
auto = false
tuned_profile = "postgresql"
kernel_args = ["transparent_hugepage=never"]

[dataset]
scale = 1

[[workloads]]
name = "ro"
builtin = "select-only"
clients = [1]
threads = 1
transactions = 10

[upload]
store = "file:///nonexistent"

[finish]
action = "power-off"
"#;

/// A run of `plan` on `host`, with its journal and run directory in the host's directory.
pub(crate) fn context(plan: &str, host: StandInHost) -> Context {
    let plan = Plan::parse(plan).unwrap_or_else(|e| panic!("the tests' plan: {e:?}"));
    let workdir = host.dir().join("work");
    crate::fsutil::create_dir_all(&workdir).expect("workdir");
    let journal = JournalFile::open_or_create(&journal_path(&workdir), "stand-in", "r-1".into())
        .expect("journal");
    let run_dir = workdir.join("runs").join("r-1");
    for d in ["points", "raw"] {
        crate::fsutil::create_dir_all(&run_dir.join(d)).expect("run dir");
    }
    Context::new(
        plan,
        workdir,
        run_dir,
        journal,
        Host::StandIn(host),
        UploadTarget::default(),
    )
}

/// The stand-in host of a test's context.
pub(crate) fn host(cx: &Context) -> &StandInHost {
    match &cx.host {
        Host::StandIn(h) => h,
        _ => unreachable!("the tests' context is on the stand-in host"),
    }
}

/// What `check` says (an error fails the test).
pub(crate) async fn check<S: Step>(step: &S, cx: &mut Context) -> Check {
    step.check(&mut Looking::new(cx))
        .await
        .unwrap_or_else(|e| panic!("checking {}: {e:#}", S::NAME.as_str()))
}

/// `apply` with the journal's begin and finish around it, as the engine does.
pub(crate) async fn apply<S: Step>(step: &S, cx: &mut Context) -> anyhow::Result<()> {
    cx.journal.begin(S::NAME, None)?;
    step.apply(cx).await?;
    cx.journal.finish(S::NAME, 0.1)
}

/// The engine's own drive of one step (check, apply when something is left to do, then its
/// products checked), for the steps a test needs before the one it tests.
pub(crate) async fn bring_about<S: Step>(step: &S, cx: &mut Context) {
    crate::engine::drive_step(step, cx, None)
        .await
        .unwrap_or_else(|e| panic!("bringing about {}: {e:#}", S::NAME.as_str()));
}

/// A fixture of `daemon/tests/fixtures/`.
pub(crate) fn fixture(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The script's answers for what the inventory reads with commands (lscpu, lsblk).
pub(crate) fn answer_inventory(host: &StandInHost, lsblk: &str) {
    host.script().on(
        "lscpu",
        &["-J"],
        ok(&fixture("inventory/lscpu-debian12-x86_64.json")),
    );
    host.script().on("lsblk", &["-J"], ok(&fixture(lsblk)));
}

/// Whether `check` is `Todo`.
pub(crate) fn todo(c: &Check) -> bool {
    matches!(c, Check::Todo(_))
}
