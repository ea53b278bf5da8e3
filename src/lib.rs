//! Basalt: an embedded Rust storage engine with HBase's data model.
//!
//! This facade re-exports the public API of the engine (`basalt-core`), the coprocessor
//! framework (`basalt-coprocessors`) and secondary indexes (`basalt-index`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use basalt_coprocessors as coprocessors;
pub use basalt_core::*;
pub use basalt_index as index;

/// The snippets of `docs/recovery.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/recovery.md")]
pub struct RecoveryGuideSnippets;

/// The snippets of `docs/hbase.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/hbase.md")]
pub struct HBaseDifferencesSnippets;
