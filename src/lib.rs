//! Basalt: an embedded Rust storage engine with HBase's data model.
//!
//! This facade re-exports the public API of the engine (`basalt-core`), the coprocessor
//! framework (`basalt-coprocessors`) and secondary indexes (`basalt-index`); with the
//! `plugins` feature, the sandboxed plugin runtime (`basalt-plugins`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use basalt_coprocessors as coprocessors;
pub use basalt_core::*;
pub use basalt_index as index;
/// Coprocessors as sandboxed WebAssembly plugins (the `plugins` feature).
#[cfg(feature = "plugins")]
pub use basalt_plugins as plugins;

/// The snippets of `docs/plugins.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/plugins.md")]
pub struct PluginsGuideSnippets;

/// The snippets of `docs/cluster.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/cluster.md")]
pub struct ClusterGuideSnippets;

/// The snippets of `docs/recovery.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/recovery.md")]
pub struct RecoveryGuideSnippets;

/// The snippets of `docs/hbase.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/hbase.md")]
pub struct HBaseDifferencesSnippets;

/// The snippets of `docs/backup.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/backup.md")]
pub struct BackupGuideSnippets;

/// The snippets of `README.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeSnippets;

/// The snippets of `docs/ARCHITECTURE.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/ARCHITECTURE.md")]
pub struct ArchitectureSnippets;

/// The snippets of `docs/BENCHMARKS.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/BENCHMARKS.md")]
pub struct BenchmarksSnippets;

/// The snippets of `docs/coprocessors.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/coprocessors.md")]
pub struct CoprocessorsGuideSnippets;

/// The snippets of `docs/endpoints.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/endpoints.md")]
pub struct EndpointsGuideSnippets;

/// The snippets of `docs/indexes.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/indexes.md")]
pub struct IndexesGuideSnippets;

/// The snippets of `docs/salting.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/salting.md")]
pub struct SaltingGuideSnippets;

/// The snippets of `docs/filters.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/filters.md")]
pub struct FiltersGuideSnippets;

/// The snippets of `docs/snapshots.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/snapshots.md")]
pub struct SnapshotsGuideSnippets;

/// The snippets of `docs/shell.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/shell.md")]
pub struct ShellGuideSnippets;

/// The snippets of `docs/cli.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/cli.md")]
pub struct CliGuideSnippets;

/// The snippets of `docs/object-store.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/object-store.md")]
pub struct ObjectStoreGuideSnippets;
