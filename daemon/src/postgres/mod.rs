//! PostgreSQL as the appliance drives it: finding the binaries of a major version, the
//! cluster's life cycle (initdb, start, stop, checksums) and SQL sessions.

pub mod binaries;
pub mod cluster;
pub mod parse;
pub mod sql;
pub mod stats;

pub use binaries::PgBin;
pub use cluster::Cluster;
