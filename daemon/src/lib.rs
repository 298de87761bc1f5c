//! pgappliance: the library shared by the `pgapplianced` daemon and the `pgappliance`
//! builder. Plans, the step engine ([`engine`], [`steps`], [`host`]) and its journal, the
//! command runner, pgbench invocation and parsing, and results. The library returns data;
//! the binaries present it (`src/bin/pgapplianced/`, `image/src/`).

// What the binaries, the image crate and the tests do not use is `pub(crate)`: an item
// marked `pub` that nothing outside can reach fails the build.
#![deny(unreachable_pub)]

pub mod assets;
pub mod bench;
pub mod clock;
pub mod compare;
pub mod csv;
pub mod el8_facts;
pub mod engine;
pub mod faults;
pub mod fsutil;
pub mod host;
pub mod identity;
pub mod in_effect;
pub mod inventory;
pub mod journal;
pub mod loader;
pub mod logging;
pub mod notify;
pub mod pgbench;
pub mod plan;
pub mod platform;
pub mod ports;
pub mod postgres;
pub mod progress;
pub mod report;
pub mod results;
pub mod runner;
pub mod sampler;
pub mod snapshot;
pub mod stats;
pub mod stdout;
mod step_list;
pub mod steps;
pub mod storage;
pub mod sweep;
pub mod synthetic;
pub mod sys;
pub mod sysbench;
pub mod systemd;
pub mod third_party;
pub mod upload;
pub mod url;
pub mod workload;
