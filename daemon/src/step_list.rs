//! The one list of steps: every step of a run, once, in the order it runs. Each line names
//! the step (`Variant(module)`: the `journal::StepName` variant, which is also the name of
//! the step's struct in `steps/<module>.rs`, and the module, whose name is the step's name
//! in the journal, the status and the logs), the phase it belongs to, and whether it
//! changes the machine (then only a host that may change it runs it: the appliance).
//!
//! [`step_list!`] hands the list to a macro of the caller's: `journal.rs` defines
//! `StepName` from it, `engine/mod.rs` the order with phases, `contract` and `drive`. Adding
//! a step is one line here and its file (docs/architecture.md, "Adding a step").

/// Calls `$then! { Variant(module) in Phase, changes_machine: bool; … }` with every step in
/// the order it runs.
macro_rules! step_list {
    ($then:ident) => {
        $then! {
            Inventory(inventory) in Prepare, changes_machine: false;
            Packages(packages) in Prepare, changes_machine: true;
            Storage(storage) in Prepare, changes_machine: true;
            Postgres(postgres) in Prepare, changes_machine: false;
            Tuning(tuning) in Prepare, changes_machine: false;
            OsTuning(os_tuning) in Prepare, changes_machine: true;
            InEffect(in_effect) in Prepare, changes_machine: false;
            Dataset(dataset) in Prepare, changes_machine: false;
            Sweep(sweep) in Measure, changes_machine: false;
            Report(report) in Measure, changes_machine: false;
            Upload(upload) in Deliver, changes_machine: false;
        }
    };
}

pub(crate) use step_list;
