//! Engine setup shared by the coprocessor integration tests: an engine with a [`Registry`]
//! as its coprocessor loader, on a temporary directory or on an in-memory
//! [`FaultFs`] (for simulated crashes), and whole-table reads.
//!
//! Include it with `#[path = "common/coprocessor_setup.rs"] mod coprocessor_setup;` (it is
//! not part of `common/mod.rs`, so test binaries that do not use it do not compile it).

#![allow(dead_code)]

use basalt::client::{RowResult, Scan};
use basalt::coprocessors::Registry;
use basalt::fs::FaultFs;
use basalt::{Config, Connection, Result, Table};
use futures::TryStreamExt;
use std::path::Path;
use std::sync::Arc;

/// The directory a [`FaultFs`] engine lives in.
pub const FAULT_DIR: &str = "/db";

/// A registry with `register` applied to it.
pub fn registry(register: impl FnOnce(&Registry) -> Result<()>) -> Arc<Registry> {
    let r = Registry::new();
    register(&r).unwrap();
    Arc::new(r)
}

/// The config of an engine in `dir` loading coprocessors from `registry`.
pub fn dir_config(dir: &Path, registry: &Arc<Registry>) -> Config {
    Config::new(dir).coprocessor_loader(registry.clone())
}

/// The config of an engine on `fs` loading coprocessors from `registry`, with a small
/// MemStore flush size and WAL segments (so that flushes and rolls fall inside a short
/// workload's crash windows).
pub fn fault_config(fs: &FaultFs, registry: &Arc<Registry>) -> Config {
    Config::new(FAULT_DIR)
        .filesystem(fs.as_dyn())
        .coprocessor_loader(registry.clone())
        .memstore_flush_size(2048)
        .wal_segment_size(4096)
        .blocking_wait_ms(0)
}

/// Opens an engine in `dir` loading coprocessors from `registry`.
pub async fn open_dir(dir: &Path, registry: &Arc<Registry>) -> Connection {
    Connection::open_with(dir_config(dir, registry))
        .await
        .unwrap()
}

/// Every row of `table` (one snapshot), reading only `family`.
pub async fn scan_family(table: &Table, family: &str) -> Result<Vec<RowResult>> {
    table
        .scan(Scan::new().add_family(family))?
        .try_collect()
        .await
}

/// Bytes as text, lossily.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
