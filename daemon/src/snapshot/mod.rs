//! Dataset snapshots (docs/plan.md, `[dataset]`).

pub mod key;
pub mod local;
pub mod manifest;
