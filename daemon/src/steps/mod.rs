//! The steps of a run, one file each, in the order of `engine::ORDER`: inventory →
//! packages → storage → postgres → tuning → OS tuning (→ reboot, resume) → tuning in effect
//! → dataset → sweep → report → upload. Each is a [`Step`]: a check whether its effect is
//! already in place, and the action that brings it about; the engine (which drives them,
//! above this folder) keeps the journal, the order and the status. What differs between
//! local mode and the appliance is the host's ([`crate::host`]). A step knows the
//! [`Context`] it is given, never the engine.

mod context;
pub(crate) mod dataset;
pub(crate) mod in_effect;
pub(crate) mod inventory;
pub(crate) mod os_tuning;
pub mod packages;
pub(crate) mod postgres;
pub(crate) mod report;
pub(crate) mod storage;
pub(crate) mod sweep;
pub(crate) mod tpcc;
pub(crate) mod tuning;
pub(crate) mod upload;

use anyhow::Result;

pub(crate) use context::{Context, Looking, Product, UploadTarget};

use crate::journal::StepName;

/// What a step's check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Check {
    /// The effect is in place (and the step's products are in the context).
    Done,
    /// Something is left to do, and why (logged when the step acts).
    Todo(String),
}

/// One step of a run.
///
/// `check` looks (reads the machine, the cluster, the run directory and the step's own
/// journal state) through a [`Looking`], which cannot write the journal, and may put into
/// the context what it found (the products later steps need, [`Step::GIVES`]). `apply` brings the effect about; the engine
/// has already marked the step begun in the journal and marks it finished after. A step
/// that has sub-operations worth resuming separately (initdb, a point of the sweep) marks
/// them with [`crate::journal::JournalFile::begin`] and its item, and keeps what it must
/// remember across restarts in its own field of [`crate::journal::StepState`].
#[allow(async_fn_in_trait)]
pub(crate) trait Step {
    const NAME: StepName;
    /// Products of earlier steps this one reads.
    const NEEDS: &'static [Product];
    /// Products this step puts into the context (after `check` says done, or `apply`).
    const GIVES: &'static [Product];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check>;
    async fn apply(&self, cx: &mut Context) -> Result<()>;
}

#[cfg(test)]
mod tests;
