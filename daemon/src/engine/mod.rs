//! The step engine: one ordered list of steps ([`ORDER`]), each a [`Step`] that first checks
//! whether its effect is already in place and acts only when it is not. The engine owns the
//! bookkeeping every step shares: the journal's begin/finish and interruption marks, the
//! order, systemd's STATUS line and the timings; a step file holds only its own logic.
//!
//! A run ([`run`]) opens the work directory's journal (or starts one), chooses its
//! [`Host`](crate::host::Host) once, then drives the steps in order: the measuring steps
//! (inventory … report) unless the report already exists, then the upload, then the host's
//! end of run (done marker, power-off). A kill, a crash or the planned reboot resumes where
//! it stopped: every step's `check` finds what is already done.
//!
//! How to add a step: see `docs/architecture.md` ("Adding a step").

pub mod live;
mod lock;
mod plan_arg;
pub mod reset;
mod run;
pub mod status;
pub mod upload;

use std::time::Instant;

use anyhow::Result;

pub(crate) use crate::steps::{Check, Context, Product, Step};
pub use plan_arg::PlanArg;
pub(crate) use run::{prepare, Prepared};
pub use run::{run, Outcome, RunMode, RunOptions};

use crate::journal::StepName;
use crate::steps;

/// Which part of a run a step belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Brings the machine and the cluster into the plan's state, with the dataset.
    Prepare,
    /// Produces the results (skipped once the report exists).
    Measure,
    /// Delivers them.
    Deliver,
}

/// `ORDER`, `contract` and `drive` from the one list of steps ([`crate::step_list`]).
macro_rules! define_engine_steps {
    ($($variant:ident($module:ident) in $phase:ident, changes_machine: $machine:literal;)*) => {
        /// Every step, in the order it runs, with its phase.
        pub const ORDER: [(StepName, Phase); StepName::ALL.len()] =
            [$((StepName::$variant, Phase::$phase),)*];

        /// What a step needs and gives, by name (for the order check and the docs).
        // Read by the engine's order test and the docs only.
        #[allow(dead_code)]
        pub(crate) fn contract(step: StepName) -> (&'static [Product], &'static [Product]) {
            fn of<S: Step>() -> (&'static [Product], &'static [Product]) {
                (S::NEEDS, S::GIVES)
            }
            match step {
                $(StepName::$variant => of::<steps::$module::$variant>(),)*
            }
        }

        /// Runs one step by name (when the host runs it).
        pub(crate) async fn drive(
            step: StepName,
            cx: &mut Context,
            live: Option<&live::Live>,
        ) -> Result<()> {
            if !cx.host.runs(step) {
                return Ok(());
            }
            match step {
                $(StepName::$variant => drive_step(&steps::$module::$variant, cx, live).await,)*
            }
        }
    };
}

crate::step_list::step_list!(define_engine_steps);

/// The steps of the given phases, in order.
pub(crate) fn steps_of(phases: &[Phase]) -> impl Iterator<Item = StepName> + '_ {
    ORDER
        .iter()
        .filter(move |(_, p)| phases.contains(p))
        .map(|(s, _)| *s)
}

/// Whether an error is a refusal: the plan or the machine must change before the run can
/// go on (a device the plan may not touch, a plan value the server refused, a package that
/// fails its signature check).
pub fn is_refusal(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<crate::storage::StorageRefusal>().is_some()
            || c.downcast_ref::<crate::steps::tuning::PlanValueRefused>()
                .is_some()
            || c.downcast_ref::<crate::steps::packages::SignatureRefused>()
                .is_some()
    })
}

/// Keeps why the run stopped in the journal (for `pgapplianced status`); a journal that
/// cannot be written is only logged, the step's error is what counts.
fn record_failure(cx: &mut Context, step: StepName, e: &anyhow::Error) {
    let refused = is_refusal(e);
    if let Err(save) = cx.journal.record_failure(step, e, refused) {
        tracing::warn!(error = %format!("{save:#}"), "recording the failure in the journal");
    }
    crate::notify::status(&format!(
        "{} in step {}: {}",
        if refused { "refused" } else { "failed" },
        step.as_str(),
        e.root_cause()
    ));
}

/// Has the status object in the store written soon (a step began or ended).
fn poke(live: Option<&live::Live>) {
    if let Some(live) = live {
        live.poke();
    }
}

/// Check, then (when something is left to do) begin, apply and finish in the journal.
pub(crate) async fn drive_step<S: Step>(
    step: &S,
    cx: &mut Context,
    live: Option<&live::Live>,
) -> Result<()> {
    let name = S::NAME.as_str();
    let t0 = Instant::now();
    let check = match step.check(&mut crate::steps::Looking::new(cx)).await {
        Ok(c) => c,
        Err(e) => {
            let e = e.context(format!("step {name} failed (checking what is in place)"));
            record_failure(cx, S::NAME, &e);
            return Err(e);
        }
    };
    match check {
        Check::Done => {
            tracing::debug!(step = name, "in place");
            cx.journal.record_in_place(S::NAME)?;
        }
        Check::Todo(why) => {
            tracing::info!(step = name, why = %why, "applying");
            crate::notify::status(&format!("step {name}"));
            cx.journal.begin(S::NAME, None)?;
            poke(live);
            if let Err(e) = step.apply(cx).await {
                let e = e.context(format!("step {name} failed"));
                record_failure(cx, S::NAME, &e);
                return Err(e);
            }
            cx.journal.finish(S::NAME, t0.elapsed().as_secs_f64())?;
            poke(live);
        }
    }
    if let Some(missing) = S::GIVES.iter().find(|p| !cx.has(**p)) {
        anyhow::bail!(
            "internal: step {name} finished without providing {}",
            missing.as_str()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // ORDER and StepName come from the one list (step_list.rs): each step is there once
    // by construction; what is left to hold is the order.
    fn every_step_runs_after_what_it_needs_and_the_phases_come_in_order() {
        let mut given: Vec<Product> = Vec::new();
        for (step, _) in ORDER {
            let (needs, gives) = contract(step);
            for n in needs {
                assert!(
                    given.contains(n),
                    "step {} needs {} before any step gives it",
                    step.as_str(),
                    n.as_str()
                );
            }
            given.extend_from_slice(gives);
        }
        // The phases come in order: prepare, measure, deliver.
        let phases: Vec<Phase> = ORDER.iter().map(|(_, p)| *p).collect();
        let mut sorted = phases.clone();
        sorted.sort_by_key(|p| match p {
            Phase::Prepare => 0,
            Phase::Measure => 1,
            Phase::Deliver => 2,
        });
        assert_eq!(phases, sorted);
    }
}
