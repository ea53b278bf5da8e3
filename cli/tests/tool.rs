//! The tests of the `basalt` tool that drive its shell, its commands and its servers, in
//! one test binary: the shell is generic over its backend, and each test crate that used
//! it compiled all of it again. Tests that must be alone in their process keep binaries
//! of their own (see `cli/Cargo.toml`).

mod common;
#[path = "common/pytest.rs"]
mod runner;
#[path = "common/web.rs"]
mod web;

mod backup;
mod import;
mod interrupt;
mod malformed;
mod offline;
mod read_only;
mod report;
mod serve_cluster;
mod shell_cluster;
mod transcripts;
