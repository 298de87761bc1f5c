//! PostgreSQL as the appliance drives it: finding the binaries of a major version, the
//! cluster's life cycle (initdb, start, stop, checksums) and SQL sessions.

pub(crate) mod binaries;
pub(crate) mod cluster;
pub(crate) mod parse;
pub(crate) mod sql;
pub(crate) mod stats;

pub(crate) use binaries::PgBin;
pub(crate) use cluster::Cluster;
