//! pgappliance: the library shared by the `pgapplianced` daemon and the `pgappliance`
//! builder. Plans, the step engine and its journal, the command runner, pgbench invocation
//! and parsing, and results.

pub mod plan;
pub mod pgbench;
pub mod runner;
pub mod sweep;
pub mod sys;
