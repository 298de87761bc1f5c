//! sysbench (running Percona-Lab's sysbench-tpcc Lua scripts): everything here is parsing.
//! The output layouts by version and the captured fixtures are described in
//! daemon/tests/fixtures/sysbench/README.md.

pub mod output;

pub use output::{parse_output, SummaryLayout, SysbenchParseError, SysbenchRun, SysbenchSecond};
