//! sysbench-tpcc: its Lua scripts (fetched and pinned), its command lines, its output.

pub mod scripts;
pub mod tpcc;
