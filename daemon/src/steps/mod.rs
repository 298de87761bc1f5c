//! The steps of a run, one file each, in the order of [`crate::engine::ORDER`]: inventory →
//! packages → storage → postgres → tuning → OS tuning (→ reboot, resume) → tuning in effect
//! → dataset → sweep → report → upload. Each is a [`crate::engine::Step`]: a check whether
//! its effect is already in place, and the action that brings it about; the engine keeps
//! the journal, the order and the status. What differs between local mode and the
//! appliance is the host's ([`crate::host`]).

pub mod dataset;
pub mod in_effect;
pub mod inventory;
pub mod os_tuning;
pub mod packages;
pub mod postgres;
pub mod report;
pub mod storage;
pub mod sweep;
pub mod tpcc;
pub mod tuning;
pub mod upload;
