//! What the steps of a run share: the plan, the work and run directories, the runner, the
//! journal, the host, and the products earlier steps left for later ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::host::Host;
use crate::inventory::Inventory;
use crate::journal::JournalFile;
use crate::plan::Plan;
use crate::postgres::Cluster;
use crate::results::RunResults;
use crate::runner::Runner;
use crate::upload::{StoreOverrides, Stored, UploadOptions};

/// Something a step leaves for the steps after it (see [`super::Step::NEEDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Product {
    /// The machine's inventory.
    Inventory,
    /// The PostgreSQL server, running and accepting connections.
    Server,
    /// The settings the tuning step applied (what a load restores).
    Settings,
    /// The run's results (results.json).
    Results,
    /// Where the upload stored the run.
    Stored,
}

impl Product {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Product::Inventory => "the inventory",
            Product::Server => "the PostgreSQL server",
            Product::Settings => "the applied settings",
            Product::Results => "the results",
            Product::Stored => "the stored run",
        }
    }
}

/// Where the run is uploaded.
#[derive(Debug, Clone, Default)]
pub(crate) struct UploadTarget {
    /// What the command line changes of the plan's `[upload]`.
    pub(crate) overrides: StoreOverrides,
    pub(crate) options: UploadOptions,
}

pub(crate) struct Context {
    pub(crate) plan: Plan,
    pub(crate) workdir: PathBuf,
    pub(crate) run_dir: PathBuf,
    pub(crate) runner: Runner,
    pub(crate) journal: JournalFile,
    pub(crate) host: Host,
    pub(crate) upload: UploadTarget,
    inventory: Option<Inventory>,
    server: Option<Cluster>,
    settings: Option<BTreeMap<String, String>>,
    results: Option<RunResults>,
    stored: Option<Stored>,
}

fn missing(what: Product) -> anyhow::Error {
    anyhow::anyhow!(
        "internal: {} is needed before the step that provides it ran (engine::ORDER)",
        what.as_str()
    )
}

impl Context {
    pub(crate) fn new(
        plan: Plan,
        workdir: PathBuf,
        run_dir: PathBuf,
        journal: JournalFile,
        host: Host,
        upload: UploadTarget,
    ) -> Self {
        Context {
            runner: host.runner(),
            plan,
            workdir,
            run_dir,
            journal,
            host,
            upload,
            inventory: None,
            server: None,
            settings: None,
            results: None,
            stored: None,
        }
    }

    /// The run's key in the store.
    pub(crate) fn run_key(&self) -> crate::upload::RunKey {
        crate::upload::RunKey {
            appliance: self.plan.appliance.name.clone(),
            machine_id: crate::upload::machine_id(),
            run_id: self.journal.state.run_id.clone(),
        }
    }

    /// The run's directory for raw program output.
    pub(crate) fn raw(&self) -> PathBuf {
        self.run_dir.join("raw")
    }

    /// `p` relative to the run directory, for records.
    pub(crate) fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.run_dir)
            .unwrap_or(p)
            .display()
            .to_string()
    }

    pub(crate) fn run_id(&self) -> &str {
        &self.journal.state.run_id
    }

    /// The store URL the run goes to.
    pub(crate) fn store_url(&self) -> String {
        self.upload.overrides.url(&self.plan.upload)
    }

    pub(crate) fn has(&self, p: Product) -> bool {
        match p {
            Product::Inventory => self.inventory.is_some(),
            Product::Server => self.server.is_some(),
            Product::Settings => self.settings.is_some(),
            Product::Results => self.results.is_some(),
            Product::Stored => self.stored.is_some(),
        }
    }

    pub(crate) fn inventory(&self) -> Result<&Inventory> {
        self.inventory
            .as_ref()
            .ok_or_else(|| missing(Product::Inventory))
    }
    pub(crate) fn set_inventory(&mut self, inv: Inventory) {
        self.inventory = Some(inv);
    }

    pub(crate) fn server(&self) -> Result<&Cluster> {
        self.server.as_ref().ok_or_else(|| missing(Product::Server))
    }
    /// The server, if a step has found or started it (for stopping it after a failure).
    pub(crate) fn server_if_known(&self) -> Option<&Cluster> {
        self.server.as_ref()
    }
    pub(crate) fn set_server(&mut self, c: Cluster) {
        self.server = Some(c);
    }

    pub(crate) fn settings(&self) -> Result<&BTreeMap<String, String>> {
        self.settings
            .as_ref()
            .ok_or_else(|| missing(Product::Settings))
    }
    pub(crate) fn set_settings(&mut self, s: BTreeMap<String, String>) {
        self.settings = Some(s);
    }

    pub(crate) fn results(&self) -> Result<&RunResults> {
        self.results
            .as_ref()
            .ok_or_else(|| missing(Product::Results))
    }
    pub(crate) fn set_results(&mut self, r: RunResults) {
        self.results = Some(r);
    }

    pub(crate) fn stored(&self) -> Result<&Stored> {
        self.stored.as_ref().ok_or_else(|| missing(Product::Stored))
    }
    pub(crate) fn set_stored(&mut self, s: Stored) {
        self.stored = Some(s);
    }
}

/// What a step's `check` gets: the context to read (a shared borrow, so the journal, the
/// plan and the run's settings cannot be changed through it) and the products it may leave
/// for later steps. Whatever must be written belongs in `apply`.
pub(crate) struct Looking<'a> {
    cx: &'a mut Context,
}

impl<'a> Looking<'a> {
    pub(crate) fn new(cx: &'a mut Context) -> Self {
        Looking { cx }
    }
    pub(crate) fn set_inventory(&mut self, inv: Inventory) {
        self.cx.set_inventory(inv);
    }
    pub(crate) fn set_server(&mut self, c: Cluster) {
        self.cx.set_server(c);
    }
    pub(crate) fn set_settings(&mut self, s: BTreeMap<String, String>) {
        self.cx.set_settings(s);
    }
    pub(crate) fn set_results(&mut self, r: RunResults) {
        self.cx.set_results(r);
    }
}

impl std::ops::Deref for Looking<'_> {
    type Target = Context;
    fn deref(&self) -> &Context {
        self.cx
    }
}
