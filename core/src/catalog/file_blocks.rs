//! Which WAL writer reserved which block of store file ids on a shared store
//! ([`CatalogState::file_blocks`](super::CatalogState::file_blocks), catalog format 14),
//! so that a collector can tell whose a store file no region lists is.
//!
//! An engine on a versioned store hands out store file ids only from blocks it reserved
//! through a catalog update (its claim, then `Catalog::reserve_file_ids`); each
//! reservation records `start -> writer`. Blocks are [`FILE_ID_BLOCK`] ids long and never
//! overlap (the next file id only grows). A store file becomes listed for the first time
//! only by a catalog update of the engine that wrote it, in its own block; every other
//! listing (a split's daughters, a clone or restore of a snapshot) lists a file that is
//! listed already. So once a writer is dead (fenced, and named by no region: see
//! `server/open/garbage.rs`), a file of its blocks that no region and no snapshot lists
//! will never be listed again, and can be deleted.
//!
//! A local directory records nothing (one engine; it removes its orphans at open), nor does
//! a catalog older than format 14: files of unknown blocks are never collected.

use std::collections::BTreeMap;

/// How many store file ids an engine reserves at a time: it hands out ids of its block
/// only, and reserves the next block through a catalog update (refused once another
/// engine claimed the whole store), so engines sharing a store never hand out one id
/// twice.
pub(crate) const FILE_ID_BLOCK: u64 = 1 << 20;

/// The writer that reserved the block of `blocks` (first id -> writer) holding store file
/// id `id`, if one holds it.
pub(super) fn block_writer(blocks: &BTreeMap<u64, u64>, id: u64) -> Option<u64> {
    let (start, writer) = blocks.range(..=id).next_back()?;
    (id - start < FILE_ID_BLOCK).then_some(*writer)
}

/// The store file id in an object name `data/{id:016}[-g{generation}].sf`, if it is one.
pub fn store_file_id(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("data/")?.get(..16)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Version 13: the current catalog without file blocks.
pub(crate) mod v13 {
    use super::super::{PluginEntry, SnapshotEntry, TableEntry};
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// A version-13 catalog.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct CatalogState {
        pub next_region_id: u64,
        pub next_file_id: u64,
        pub namespaces: BTreeSet<String>,
        pub tables: BTreeMap<String, TableEntry>,
        pub next_writer: u64,
        pub store_claim: u64,
        pub lineage: Vec<(u64, u64)>,
        pub snapshots: BTreeMap<String, SnapshotEntry>,
        pub plugins: BTreeMap<String, PluginEntry>,
    }

    /// The current state of a version-13 one: no blocks known.
    pub fn upgrade(o: CatalogState) -> super::super::CatalogState {
        super::super::CatalogState {
            next_region_id: o.next_region_id,
            next_file_id: o.next_file_id,
            namespaces: o.namespaces,
            tables: o.tables,
            next_writer: o.next_writer,
            store_claim: o.store_claim,
            lineage: o.lineage,
            snapshots: o.snapshots,
            plugins: o.plugins,
            file_blocks: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::CatalogState;
    use super::*;

    #[test]
    fn a_block_holds_its_ids_and_no_others() {
        let mut state = CatalogState::default();
        state.file_blocks.insert(100, 7);
        state.file_blocks.insert(100 + 2 * FILE_ID_BLOCK, 9);
        assert_eq!(state.block_writer(99), None);
        assert_eq!(state.block_writer(100), Some(7));
        assert_eq!(state.block_writer(100 + FILE_ID_BLOCK - 1), Some(7));
        assert_eq!(state.block_writer(100 + FILE_ID_BLOCK), None);
        assert_eq!(state.block_writer(100 + 2 * FILE_ID_BLOCK), Some(9));
        assert_eq!(state.block_writer(u64::MAX), None);
    }

    #[test]
    fn store_file_ids_are_read_from_names() {
        assert_eq!(
            store_file_id(&super::super::store_file_name(42, 3)),
            Some(42)
        );
        assert_eq!(
            store_file_id(&super::super::store_file_name(42, 0)),
            Some(42)
        );
        for bad in [
            "data/x",
            "data/00000000000000ab.sf",
            "wal/0000000000000001",
            "",
        ] {
            assert_eq!(store_file_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_version_13_catalog_reads_with_no_blocks() {
        let state = CatalogState {
            next_file_id: 9,
            ..Default::default()
        };
        let old = v13::CatalogState {
            next_region_id: state.next_region_id,
            next_file_id: state.next_file_id,
            namespaces: state.namespaces.clone(),
            tables: state.tables.clone(),
            next_writer: state.next_writer,
            store_claim: state.store_claim,
            lineage: state.lineage.clone(),
            snapshots: state.snapshots.clone(),
            plugins: state.plugins.clone(),
        };
        let payload = postcard::to_stdvec(&old).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let read = super::super::tests::read_written(dir.path(), 13, &payload);
        assert_eq!(read.next_file_id, 9);
        assert!(read.file_blocks.is_empty());
        assert_eq!(read, state);
    }
}
