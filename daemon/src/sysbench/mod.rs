//! sysbench-tpcc: its Lua scripts (fetched and pinned), its command lines, its output.
//! The output layouts by version and the captured fixtures are described in
//! daemon/tests/fixtures/sysbench/README.md.

pub(crate) mod output;
pub mod scripts;
pub(crate) mod tpcc;

pub use output::{parse_output, SummaryLayout, SysbenchParseError, SysbenchRun, SysbenchSecond};
