//! Uploaded plugins in the catalog: each one is a WebAssembly component stored once in the
//! catalog's object space under the sha256 of its bytes (`plugins/{sha256}.wasm`) and
//! listed here with its size, kind and upload time. Tables attach one by listing the
//! coprocessor `plugin:{sha256}`.
//!
//! Invariants: a listed plugin's object exists and hashes to its name (the object is
//! written before the catalog lists it, and checked when read); a plugin some table lists
//! is never removed; ids are 64 lowercase hex digits, so an id is always a safe object
//! name.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The folder of plugin objects in the catalog's object space.
pub const PLUGIN_DIR: &str = "plugins";

/// What a plugin component exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PluginKind {
    /// The `region-observer` world: hooks on a table's writes.
    Observer,
    /// The `region-endpoint` world: a function run per region, and its merge.
    Endpoint,
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::Observer => "observer",
            PluginKind::Endpoint => "endpoint",
        })
    }
}

/// One uploaded plugin, as the catalog lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginEntry {
    /// Its size in bytes.
    pub size: u64,
    /// What it exports.
    pub kind: PluginKind,
    /// When it was uploaded, in milliseconds since the epoch.
    pub uploaded_ms: u64,
}

/// The object name of plugin `id`.
pub fn plugin_path(id: &str) -> String {
    format!("{PLUGIN_DIR}/{id}.wasm")
}

/// Checks that `id` is a plugin id: 64 lowercase hex digits (a sha256).
pub fn validate_plugin_id(id: &str) -> Result<()> {
    let hex = id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex {
        Ok(())
    } else {
        Err(Error::bad_argument(format!(
            "plugin id {id:?} is not a sha256 (64 lowercase hex digits)"
        )))
    }
}

/// Version 12: the current catalog without plugins.
pub(crate) mod v12 {
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// A version-12 catalog.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct CatalogState {
        pub next_region_id: u64,
        pub next_file_id: u64,
        pub namespaces: BTreeSet<String>,
        pub tables: BTreeMap<String, super::super::TableEntry>,
        pub next_writer: u64,
        pub store_claim: u64,
        pub lineage: Vec<(u64, u64)>,
        pub snapshots: BTreeMap<String, super::super::SnapshotEntry>,
    }

    impl From<CatalogState> for super::super::CatalogState {
        fn from(o: CatalogState) -> Self {
            let (next_region_id, next_file_id, next_writer) =
                (o.next_region_id, o.next_file_id, o.next_writer);
            let (store_claim, lineage, snapshots) = (o.store_claim, o.lineage, o.snapshots);
            let (namespaces, tables, plugins) = (o.namespaces, o.tables, BTreeMap::new());
            super::super::CatalogState {
                next_region_id,
                next_file_id,
                namespaces,
                tables,
                next_writer,
                store_claim,
                lineage,
                snapshots,
                plugins,
                file_blocks: BTreeMap::new(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ids_are_lowercase_sha256_hex() {
        assert!(validate_plugin_id(&"ab".repeat(32)).is_ok());
        for bad in [
            "",
            "AB",
            &"AB".repeat(32),
            &"a".repeat(63),
            &"g".repeat(64),
            "../x",
        ] {
            assert!(validate_plugin_id(bad).is_err(), "{bad}");
        }
        assert_eq!(
            plugin_path(&"0".repeat(64)),
            format!("plugins/{}.wasm", "0".repeat(64))
        );
    }

    #[test]
    fn a_version_12_catalog_reads_with_no_plugins() {
        let state = super::super::CatalogState {
            next_file_id: 9,
            ..Default::default()
        };
        let old = v12::CatalogState {
            next_region_id: state.next_region_id,
            next_file_id: state.next_file_id,
            namespaces: state.namespaces.clone(),
            tables: state.tables.clone(),
            next_writer: state.next_writer,
            store_claim: state.store_claim,
            lineage: state.lineage.clone(),
            snapshots: state.snapshots.clone(),
        };
        let bytes = postcard::to_stdvec(&old).unwrap();
        let read: super::super::CatalogState = postcard::from_bytes::<v12::CatalogState>(&bytes)
            .map(Into::into)
            .unwrap();
        assert_eq!(read.next_file_id, 9);
        assert!(read.plugins.is_empty());
    }
}
