//! The catalog's older format versions (see the module doc of `crate::catalog`): the
//! shapes they were written in, and their upgrade to the current state.

/// The shape of an old catalog, generic over its table descriptor (the only part that
/// changed between versions), and its upgrade to the current one.
pub(crate) mod old {
    use bytes::Bytes;
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// A store file of a catalog before version 8: no generation.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct FileEntry {
        pub id: u64,
        pub max_seq: u64,
        pub size: u64,
        pub entries: u64,
    }

    /// A region of a catalog before version 8: no generation.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct RegionEntry {
        pub id: u64,
        pub start: Bytes,
        pub end: Bytes,
        pub flushed_seq: u64,
        pub files: BTreeMap<Bytes, Vec<FileEntry>>,
    }

    impl From<RegionEntry> for super::super::RegionEntry {
        fn from(old: RegionEntry) -> Self {
            let files = old
                .files
                .into_iter()
                .map(|(family, list)| {
                    let list = list
                        .into_iter()
                        .map(|f| super::super::FileEntry {
                            id: f.id,
                            max_seq: f.max_seq,
                            size: f.size,
                            entries: f.entries,
                            generation: 0,
                        })
                        .collect();
                    (family, list)
                })
                .collect();
            super::super::RegionEntry {
                id: old.id,
                start: old.start,
                end: old.end,
                flushed_seq: old.flushed_seq,
                files,
                generation: 0,
                writers: Vec::new(),
            }
        }
    }

    /// A table entry of an old catalog.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TableEntry<D> {
        pub descriptor: D,
        pub enabled: bool,
        pub regions: Vec<RegionEntry>,
    }

    /// An old catalog.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct CatalogState<D> {
        pub next_region_id: u64,
        pub next_file_id: u64,
        pub namespaces: BTreeSet<String>,
        pub tables: BTreeMap<String, TableEntry<D>>,
    }

    impl<D: Into<crate::schema::TableDescriptor>> From<CatalogState<D>> for super::super::CatalogState {
        fn from(old: CatalogState<D>) -> Self {
            let tables = old
                .tables
                .into_iter()
                .map(|(k, t)| {
                    let entry = super::super::TableEntry {
                        descriptor: t.descriptor.into(),
                        enabled: t.enabled,
                        regions: t.regions.into_iter().map(Into::into).collect(),
                    };
                    (k, entry)
                })
                .collect();
            super::super::CatalogState {
                next_region_id: old.next_region_id,
                next_file_id: old.next_file_id,
                namespaces: old.namespaces,
                tables,
                next_writer: 1,
                store_claim: 0,
                lineage: Vec::new(),
                snapshots: BTreeMap::new(),
                plugins: BTreeMap::new(),
                file_blocks: BTreeMap::new(),
            }
        }
    }
}

/// Catalog format version 1: table descriptors without compaction settings.
pub(crate) mod v1 {
    use super::v4::ColumnFamilyDescriptor;
    use crate::schema::{CompactionSettings, TableName};
    use serde::{Deserialize, Serialize};

    /// A version-1 table descriptor: no compaction settings.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TableDescriptor {
        pub name: TableName,
        pub families: Vec<ColumnFamilyDescriptor>,
        pub memstore_flush_size: Option<u64>,
    }

    impl From<TableDescriptor> for crate::schema::TableDescriptor {
        fn from(d: TableDescriptor) -> Self {
            crate::schema::TableDescriptor {
                name: d.name,
                families: super::v4::upgrade(d.families),
                memstore_flush_size: d.memstore_flush_size,
                compaction: CompactionSettings::default(),
                coprocessors: Vec::new(),
                salt: None,
                split_restriction: None,
            }
        }
    }

    /// A version-1 table entry (tests write old catalogs with it).
    #[cfg(test)]
    pub type TableEntry = super::old::TableEntry<TableDescriptor>;
    /// A version-1 catalog.
    pub type CatalogState = super::old::CatalogState<TableDescriptor>;
}

/// Catalog format version 2: table descriptors without coprocessors.
pub(crate) mod v2 {
    use super::v4::ColumnFamilyDescriptor;
    use crate::schema::{CompactionSettings, TableName};
    use serde::{Deserialize, Serialize};

    /// A version-2 table descriptor: no coprocessors.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TableDescriptor {
        pub name: TableName,
        pub families: Vec<ColumnFamilyDescriptor>,
        pub memstore_flush_size: Option<u64>,
        pub compaction: CompactionSettings,
    }

    impl From<TableDescriptor> for crate::schema::TableDescriptor {
        fn from(d: TableDescriptor) -> Self {
            crate::schema::TableDescriptor {
                name: d.name,
                families: super::v4::upgrade(d.families),
                memstore_flush_size: d.memstore_flush_size,
                compaction: d.compaction,
                coprocessors: Vec::new(),
                salt: None,
                split_restriction: None,
            }
        }
    }

    /// A version-2 table entry (tests write old catalogs with it).
    #[cfg(test)]
    pub type TableEntry = super::old::TableEntry<TableDescriptor>;
    /// A version-2 catalog.
    pub type CatalogState = super::old::CatalogState<TableDescriptor>;
}

/// Catalog format version 3: table descriptors without a salt.
pub(crate) mod v3 {
    use super::v4::ColumnFamilyDescriptor;
    use crate::schema::{CompactionSettings, CoprocessorDescriptor, TableName};
    use serde::{Deserialize, Serialize};

    /// A version-3 table descriptor: no salt.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TableDescriptor {
        pub name: TableName,
        pub families: Vec<ColumnFamilyDescriptor>,
        pub memstore_flush_size: Option<u64>,
        pub compaction: CompactionSettings,
        pub coprocessors: Vec<CoprocessorDescriptor>,
    }

    impl From<TableDescriptor> for crate::schema::TableDescriptor {
        fn from(d: TableDescriptor) -> Self {
            crate::schema::TableDescriptor {
                name: d.name,
                families: super::v4::upgrade(d.families),
                memstore_flush_size: d.memstore_flush_size,
                compaction: d.compaction,
                coprocessors: d.coprocessors,
                salt: None,
                split_restriction: None,
            }
        }
    }

    /// A version-3 table entry (tests write old catalogs with it).
    #[cfg(test)]
    pub type TableEntry = super::old::TableEntry<TableDescriptor>;
    /// A version-3 catalog.
    pub type CatalogState = super::old::CatalogState<TableDescriptor>;
}

/// Catalog format version 4: column-family descriptors without a compaction compression.
pub(crate) mod v4 {
    use crate::schema::{
        salt::SaltSpec, BloomType, CompactionSettings, Compression, CoprocessorDescriptor,
        TableName,
    };
    use bytes::Bytes;
    use serde::{Deserialize, Serialize};

    /// A version-4 (and older) column-family descriptor: no compaction compression.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct ColumnFamilyDescriptor {
        pub name: Bytes,
        pub max_versions: u32,
        pub min_versions: u32,
        pub ttl_secs: Option<u64>,
        pub keep_deleted_cells: bool,
        pub bloom: BloomType,
        pub block_size: u32,
        pub compression: Compression,
        pub block_cache: bool,
        pub in_memory: bool,
    }

    impl From<ColumnFamilyDescriptor> for crate::schema::ColumnFamilyDescriptor {
        fn from(d: ColumnFamilyDescriptor) -> Self {
            crate::schema::ColumnFamilyDescriptor {
                name: d.name,
                max_versions: d.max_versions,
                min_versions: d.min_versions,
                ttl_secs: d.ttl_secs,
                keep_deleted_cells: d.keep_deleted_cells.into(),
                bloom: d.bloom,
                block_size: d.block_size,
                compression: d.compression,
                compaction_compression: None,
                block_cache: d.block_cache,
                in_memory: d.in_memory,
            }
        }
    }

    /// Tests write old catalogs from current descriptors.
    #[cfg(test)]
    impl From<crate::schema::ColumnFamilyDescriptor> for ColumnFamilyDescriptor {
        fn from(d: crate::schema::ColumnFamilyDescriptor) -> Self {
            ColumnFamilyDescriptor {
                name: d.name,
                max_versions: d.max_versions,
                min_versions: d.min_versions,
                ttl_secs: d.ttl_secs,
                keep_deleted_cells: d.keep_deleted_cells != crate::schema::KeepDeletedCells::False,
                bloom: d.bloom,
                block_size: d.block_size,
                compression: d.compression,
                block_cache: d.block_cache,
                in_memory: d.in_memory,
            }
        }
    }

    /// Old families in the current shape.
    pub fn upgrade(
        families: Vec<ColumnFamilyDescriptor>,
    ) -> Vec<crate::schema::ColumnFamilyDescriptor> {
        families.into_iter().map(Into::into).collect()
    }

    /// A version-4 table descriptor: old column families.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TableDescriptor {
        pub name: TableName,
        pub families: Vec<ColumnFamilyDescriptor>,
        pub memstore_flush_size: Option<u64>,
        pub compaction: CompactionSettings,
        pub coprocessors: Vec<CoprocessorDescriptor>,
        pub salt: Option<SaltSpec>,
    }

    impl From<TableDescriptor> for crate::schema::TableDescriptor {
        fn from(d: TableDescriptor) -> Self {
            crate::schema::TableDescriptor {
                name: d.name,
                families: upgrade(d.families),
                memstore_flush_size: d.memstore_flush_size,
                compaction: d.compaction,
                coprocessors: d.coprocessors,
                salt: d.salt,
                split_restriction: None,
            }
        }
    }

    /// A version-4 table entry (tests write old catalogs with it).
    #[cfg(test)]
    pub type TableEntry = super::old::TableEntry<TableDescriptor>;
    /// A version-4 catalog.
    pub type CatalogState = super::old::CatalogState<TableDescriptor>;
}

/// Catalog format version 8: no WAL writers per region, no writer counter, no store claim.
pub(crate) mod v8 {
    use super::v10::TableDescriptor;
    use bytes::Bytes;
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// A version-8 region: no WAL writers.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct RegionEntry {
        pub id: u64,
        pub start: Bytes,
        pub end: Bytes,
        pub flushed_seq: u64,
        pub files: BTreeMap<Bytes, Vec<super::super::FileEntry>>,
        pub generation: u64,
    }

    /// A version-8 table entry.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TableEntry {
        pub descriptor: TableDescriptor,
        pub enabled: bool,
        pub regions: Vec<RegionEntry>,
    }

    /// A version-8 catalog.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct CatalogState {
        pub next_region_id: u64,
        pub next_file_id: u64,
        pub namespaces: BTreeSet<String>,
        pub tables: BTreeMap<String, TableEntry>,
    }

    impl From<CatalogState> for super::super::CatalogState {
        fn from(old: CatalogState) -> Self {
            let tables = old
                .tables
                .into_iter()
                .map(|(k, t)| {
                    let regions = t
                        .regions
                        .into_iter()
                        .map(|r| super::super::RegionEntry {
                            id: r.id,
                            start: r.start,
                            end: r.end,
                            flushed_seq: r.flushed_seq,
                            files: r.files,
                            generation: r.generation,
                            writers: Vec::new(),
                        })
                        .collect();
                    let entry = super::super::TableEntry {
                        descriptor: t.descriptor.into(),
                        enabled: t.enabled,
                        regions,
                    };
                    (k, entry)
                })
                .collect();
            super::super::CatalogState {
                next_region_id: old.next_region_id,
                next_file_id: old.next_file_id,
                namespaces: old.namespaces,
                tables,
                next_writer: 1,
                store_claim: 0,
                lineage: Vec::new(),
                snapshots: BTreeMap::new(),
                plugins: BTreeMap::new(),
                file_blocks: BTreeMap::new(),
            }
        }
    }
}

/// Catalog format version 9: no lineage (a version did not record the ones it descends
/// from).
pub(crate) mod v9 {
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// A version-9 catalog.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct CatalogState {
        pub next_region_id: u64,
        pub next_file_id: u64,
        pub namespaces: BTreeSet<String>,
        pub tables: BTreeMap<String, super::v10::TableEntry>,
        pub next_writer: u64,
        pub store_claim: u64,
    }

    impl From<CatalogState> for super::super::CatalogState {
        fn from(old: CatalogState) -> Self {
            super::v10::CatalogState {
                next_region_id: old.next_region_id,
                next_file_id: old.next_file_id,
                namespaces: old.namespaces,
                tables: old.tables,
                next_writer: old.next_writer,
                store_claim: old.store_claim,
                lineage: Vec::new(),
            }
            .into()
        }
    }
}

/// Catalog format version 10 (and the table descriptor of versions 5 to 10): no split
/// restriction.
pub(crate) mod v10 {
    use crate::schema::salt::SaltSpec;
    use crate::schema::{
        ColumnFamilyDescriptor, CompactionSettings, CoprocessorDescriptor, TableName,
    };
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// A table descriptor of versions 5 to 10.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TableDescriptor {
        pub name: TableName,
        pub families: Vec<ColumnFamilyDescriptor>,
        pub memstore_flush_size: Option<u64>,
        pub compaction: CompactionSettings,
        pub coprocessors: Vec<CoprocessorDescriptor>,
        pub salt: Option<SaltSpec>,
    }

    impl From<TableDescriptor> for crate::schema::TableDescriptor {
        fn from(d: TableDescriptor) -> Self {
            crate::schema::TableDescriptor {
                name: d.name,
                families: d.families,
                memstore_flush_size: d.memstore_flush_size,
                compaction: d.compaction,
                coprocessors: d.coprocessors,
                salt: d.salt,
                split_restriction: None,
            }
        }
    }

    /// A current descriptor as versions 5 to 10 wrote it (tests write old catalogs).
    #[cfg(test)]
    impl From<crate::schema::TableDescriptor> for TableDescriptor {
        fn from(d: crate::schema::TableDescriptor) -> Self {
            TableDescriptor {
                name: d.name,
                families: d.families,
                memstore_flush_size: d.memstore_flush_size,
                compaction: d.compaction,
                coprocessors: d.coprocessors,
                salt: d.salt,
            }
        }
    }

    /// A version-10 table entry.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TableEntry {
        pub descriptor: TableDescriptor,
        pub enabled: bool,
        pub regions: Vec<super::super::RegionEntry>,
    }

    /// A current table entry as versions 9 and 10 wrote it (tests write old catalogs).
    #[cfg(test)]
    impl From<super::super::TableEntry> for TableEntry {
        fn from(t: super::super::TableEntry) -> Self {
            TableEntry {
                descriptor: t.descriptor.into(),
                enabled: t.enabled,
                regions: t.regions,
            }
        }
    }

    /// A version-10 catalog.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct CatalogState {
        pub next_region_id: u64,
        pub next_file_id: u64,
        pub namespaces: BTreeSet<String>,
        pub tables: BTreeMap<String, TableEntry>,
        pub next_writer: u64,
        pub store_claim: u64,
        pub lineage: Vec<(u64, u64)>,
    }

    impl From<CatalogState> for super::super::CatalogState {
        fn from(old: CatalogState) -> Self {
            let tables = old
                .tables
                .into_iter()
                .map(|(k, t)| {
                    let entry = super::super::TableEntry {
                        descriptor: t.descriptor.into(),
                        enabled: t.enabled,
                        regions: t.regions,
                    };
                    (k, entry)
                })
                .collect();
            super::super::CatalogState {
                next_region_id: old.next_region_id,
                next_file_id: old.next_file_id,
                namespaces: old.namespaces,
                tables,
                next_writer: old.next_writer,
                store_claim: old.store_claim,
                lineage: old.lineage,
                snapshots: BTreeMap::new(),
                plugins: BTreeMap::new(),
                file_blocks: BTreeMap::new(),
            }
        }
    }
}

/// Version 11: the current tables, no snapshots.
pub(crate) mod v11 {
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// A version-11 catalog.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct CatalogState {
        pub next_region_id: u64,
        pub next_file_id: u64,
        pub namespaces: BTreeSet<String>,
        pub tables: BTreeMap<String, super::super::TableEntry>,
        pub next_writer: u64,
        pub store_claim: u64,
        pub lineage: Vec<(u64, u64)>,
    }

    impl From<CatalogState> for super::super::CatalogState {
        fn from(old: CatalogState) -> Self {
            super::super::CatalogState {
                next_region_id: old.next_region_id,
                next_file_id: old.next_file_id,
                namespaces: old.namespaces,
                tables: old.tables,
                next_writer: old.next_writer,
                store_claim: old.store_claim,
                lineage: old.lineage,
                snapshots: BTreeMap::new(),
                plugins: BTreeMap::new(),
                file_blocks: BTreeMap::new(),
            }
        }
    }
}
