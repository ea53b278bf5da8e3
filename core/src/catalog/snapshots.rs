//! What the catalog tells of its table snapshots ([`super::SnapshotEntry`]): their
//! descriptions (tables, read point, files, and the space each holds that no table shares),
//! and the rule for their names.
//!
//! Invariant: a description is computed from one catalog state, so its sizes add up:
//! `size == shared_size + own_size`, where a file counts as shared when some table lists it
//! and as the snapshots' own otherwise.

use super::{CatalogState, FileEntry};
use crate::error::{Error, Result};
use std::collections::BTreeSet;

/// The longest snapshot name accepted.
pub const MAX_SNAPSHOT_NAME: usize = 128;

/// Checks a snapshot name as HBase does: ASCII letters, digits, `_`, `-` and `.`, not
/// starting with `.` or `-`, at most [`MAX_SNAPSHOT_NAME`] bytes.
pub fn validate_snapshot_name(name: &str) -> Result<()> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    let ok_start = !name.starts_with('.') && !name.starts_with('-');
    if name.is_empty() || name.len() > MAX_SNAPSHOT_NAME || !ok_chars || !ok_start {
        return Err(Error::bad_argument(format!(
            "bad snapshot name {name:?}: 1 to {MAX_SNAPSHOT_NAME} ASCII letters, digits, `_`, \
             `-` and `.`, not starting with `.` or `-`"
        )));
    }
    Ok(())
}

/// A table snapshot as `describe_snapshot` and `list_snapshots` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotDescription {
    /// Its name.
    pub name: String,
    /// The engine-wide read point it was taken at.
    pub read_point: u64,
    /// When it was taken, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Its tables (`ns:name`), in name order.
    pub tables: Vec<String>,
    /// Their descriptors as they stood (coprocessors and their arguments included), in
    /// the order of `tables`.
    pub descriptors: Vec<crate::schema::TableDescriptor>,
    /// Its regions, over every table.
    pub regions: usize,
    /// The store files it lists.
    pub files: usize,
    /// Their bytes.
    pub size: u64,
    /// Bytes of its files that a live table lists too (kept for that table anyway).
    pub shared_size: u64,
    /// Bytes of its files no table lists: held only by snapshots, freed when the last
    /// snapshot listing them is deleted.
    pub own_size: u64,
    /// Those files, as (file id, bytes): several snapshots may list one, so the space all
    /// snapshots hold counts each id once.
    pub own_files: Vec<(u64, u64)>,
}

/// The description of snapshot `name`, or [`Error::SnapshotNotFound`].
pub fn snapshot_description(state: &CatalogState, name: &str) -> Result<SnapshotDescription> {
    let entry = state
        .snapshots
        .get(name)
        .ok_or_else(|| Error::SnapshotNotFound(name.to_string()))?;
    let live = table_file_ids(state);
    let files = entry.files();
    let size = files.values().map(|f| f.size).sum();
    let shared_size = files
        .values()
        .filter(|f| live.contains(&f.id))
        .map(|f| f.size)
        .sum();
    Ok(SnapshotDescription {
        name: name.to_string(),
        read_point: entry.read_point,
        created_ms: entry.created_ms,
        tables: entry.tables.keys().cloned().collect(),
        descriptors: entry
            .tables
            .values()
            .map(|t| t.descriptor.clone())
            .collect(),
        regions: entry.tables.values().map(|t| t.regions.len()).sum(),
        files: files.len(),
        size,
        shared_size,
        own_size: size - shared_size,
        own_files: files
            .values()
            .filter(|f| !live.contains(&f.id))
            .map(|f| (f.id, f.size))
            .collect(),
    })
}

/// Every snapshot's description, in name order.
pub fn all_snapshot_descriptions(state: &CatalogState) -> Vec<SnapshotDescription> {
    state
        .snapshots
        .keys()
        .filter_map(|n| snapshot_description(state, n).ok())
        .collect()
}

/// The ids of the store files the tables list.
fn table_file_ids(state: &CatalogState) -> BTreeSet<u64> {
    state
        .tables
        .values()
        .flat_map(|t| &t.regions)
        .flat_map(|r| r.files.values().flatten())
        .map(|f: &FileEntry| f.id)
        .collect()
}
#[cfg(test)]
mod tests {
    use super::super::*;
    use bytes::Bytes;
    #[test]
    fn version_11_catalogs_are_read_without_snapshots_and_snapshots_keep_their_files() {
        use crate::schema::{ColumnFamilyDescriptor, TableName};
        let dir = tempfile::tempdir().unwrap();
        let name = TableName::parse("t").unwrap();
        let file = FileEntry {
            id: 9,
            max_seq: 30,
            size: 100,
            entries: 4,
            generation: 2,
        };
        let region = RegionEntry {
            id: 2,
            start: Bytes::new(),
            end: Bytes::new(),
            flushed_seq: 40,
            files: [(Bytes::from_static(b"f"), vec![file.clone()])].into(),
            generation: 3,
            writers: vec![1],
        };
        let table = TableEntry {
            descriptor: TableDescriptor::new(name.clone()).family(ColumnFamilyDescriptor::new("f")),
            enabled: true,
            regions: vec![region],
        };
        let state = v11::CatalogState {
            next_region_id: 3,
            next_file_id: 13,
            namespaces: ["default".to_string()].into(),
            tables: [(name.to_string(), table.clone())].into(),
            next_writer: 5,
            store_claim: 7,
            lineage: vec![(7, 99)],
        };
        let s = super::super::tests::read_written(
            dir.path(),
            11,
            &postcard::to_stdvec(&state).unwrap(),
        );
        assert_eq!(s.tables[&name.to_string()], table);
        assert!(s.snapshots.is_empty());
        assert_eq!((s.next_writer, s.store_claim), (5, 7));
        // A snapshot survives the current format and keeps its files listed once the table
        // no longer lists them.
        let objects = crate::objects::local(crate::fs::StdFs::shared(), dir.path());
        let c = Catalog::open(&objects).unwrap();
        c.update(|s| {
            let entry = SnapshotEntry {
                read_point: 40,
                created_ms: 5,
                tables: s.tables.clone(),
            };
            s.snapshots.insert("snap".into(), entry);
            s.tables.clear();
            Ok(())
        })
        .unwrap();
        drop(c);
        let s = Catalog::open(&objects).unwrap().snapshot();
        assert!(s.lists_file(9) && !s.lists_file(10));
        assert_eq!(
            s.snapshots["snap"]
                .files()
                .into_values()
                .collect::<Vec<_>>(),
            vec![file.clone()]
        );
        assert!(s.listed_file_names().contains(&file.name()));
        assert_eq!(s.snapshots["snap"].tables[&name.to_string()], table);
    }

    #[test]
    fn descriptions_split_shared_and_own_bytes() {
        use crate::schema::{ColumnFamilyDescriptor, TableName};
        let file = |id, size| FileEntry {
            id,
            max_seq: 1,
            size,
            entries: 1,
            generation: 1,
        };
        let region = |files: Vec<FileEntry>| RegionEntry {
            id: 1,
            start: Bytes::new(),
            end: Bytes::new(),
            flushed_seq: 1,
            files: [(Bytes::from_static(b"f"), files)].into(),
            generation: 1,
            writers: Vec::new(),
        };
        let table = |files| TableEntry {
            descriptor: TableDescriptor::new(TableName::parse("t").unwrap())
                .family(ColumnFamilyDescriptor::new("f")),
            enabled: true,
            regions: vec![region(files)],
        };
        let mut s = CatalogState::default();
        s.tables
            .insert("default:t".into(), table(vec![file(1, 10)]));
        let snap = SnapshotEntry {
            read_point: 3,
            created_ms: 4,
            tables: [(
                "default:t".to_string(),
                table(vec![file(1, 10), file(2, 5)]),
            )]
            .into(),
        };
        s.snapshots.insert("s".into(), snap);
        let d = snapshot_description(&s, "s").unwrap();
        assert_eq!((d.size, d.shared_size, d.own_size), (15, 10, 5));
        assert_eq!(
            (d.files, d.regions, d.own_files.clone()),
            (2, 1, vec![(2, 5)])
        );
        assert_eq!(all_snapshot_descriptions(&s), vec![d]);
        assert!(matches!(
            snapshot_description(&s, "x"),
            Err(Error::SnapshotNotFound(_))
        ));
        for bad in ["", ".a", "-a", "a b", "a/b"] {
            assert!(validate_snapshot_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_snapshot_name(&"a".repeat(MAX_SNAPSHOT_NAME)).is_ok());
        assert!(validate_snapshot_name(&"a".repeat(MAX_SNAPSHOT_NAME + 1)).is_err());
        assert!(validate_snapshot_name("hbase-failsafe-s.1_x").is_ok());
    }
}
