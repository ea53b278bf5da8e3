//! Tests of the catalog file: every older format version reads into the current state, a
//! round trip holds, and any damage to the file is reported.

use super::*;
use std::fs;

/// Writes `old` as the catalog of format `version` in `dir`.
fn write_old_catalog(dir: &Path, version: u32, old: &impl Serialize) {
    let payload = postcard::to_stdvec(old).unwrap();
    let mut buf = Vec::new();
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&version.to_be_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(&crc32fast::hash(&payload).to_be_bytes());
    buf.extend_from_slice(&payload);
    fs::write(dir.join("catalog"), &buf).unwrap();
}

#[test]
fn version_1_catalogs_are_read_with_default_compaction_settings() {
    use crate::schema::{CompactionSettings, TableName};
    let dir = tempfile::tempdir().unwrap();
    let name = TableName::parse("ns:t").unwrap();
    let old = v1::CatalogState {
        next_region_id: 5,
        next_file_id: 9,
        namespaces: ["default".to_string(), "ns".to_string()].into(),
        tables: [(
            name.to_string(),
            v1::TableEntry {
                descriptor: v1::TableDescriptor {
                    name: name.clone(),
                    families: vec![crate::schema::ColumnFamilyDescriptor::new("f").into()],
                    memstore_flush_size: Some(4096),
                },
                enabled: true,
                regions: vec![old::RegionEntry {
                    id: 4,
                    start: Bytes::new(),
                    end: Bytes::new(),
                    flushed_seq: 17,
                    files: BTreeMap::new(),
                }],
            },
        )]
        .into(),
    };
    write_old_catalog(dir.path(), 1, &old);
    let c = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    let s = c.snapshot();
    let t = &s.tables[&name.to_string()];
    assert_eq!(t.descriptor.memstore_flush_size, Some(4096));
    assert_eq!(t.descriptor.compaction, CompactionSettings::default());
    assert_eq!(t.regions[0].flushed_seq, 17);
    assert_eq!(s.next_file_id, 9);
    // The next update writes version 2, which reads back the same.
    c.update(|_| Ok(())).unwrap();
    drop(c);
    assert_eq!(
        Catalog::open(&crate::objects::local(
            crate::fs::StdFs::shared(),
            dir.path()
        ))
        .unwrap()
        .snapshot(),
        s
    );
}

#[test]
fn version_2_catalogs_are_read_without_coprocessors() {
    use crate::schema::{CompactionSettings, TableName};
    let dir = tempfile::tempdir().unwrap();
    let name = TableName::parse("t").unwrap();
    let old = v2::CatalogState {
        next_region_id: 2,
        next_file_id: 3,
        namespaces: ["default".to_string()].into(),
        tables: [(
            name.to_string(),
            v2::TableEntry {
                descriptor: v2::TableDescriptor {
                    name: name.clone(),
                    families: vec![crate::schema::ColumnFamilyDescriptor::new("f").into()],
                    memstore_flush_size: None,
                    compaction: CompactionSettings::default(),
                },
                enabled: true,
                regions: Vec::new(),
            },
        )]
        .into(),
    };
    write_old_catalog(dir.path(), 2, &old);
    let c = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    let s = c.snapshot();
    assert!(s.tables[&name.to_string()]
        .descriptor
        .coprocessors
        .is_empty());
    c.update(|_| Ok(())).unwrap();
    drop(c);
    let again = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    assert_eq!(again.snapshot(), s);
}

#[test]
fn version_3_catalogs_are_read_as_unsalted() {
    use crate::schema::{CompactionSettings, CoprocessorDescriptor, TableName};
    let dir = tempfile::tempdir().unwrap();
    let name = TableName::parse("t").unwrap();
    let old = v3::CatalogState {
        next_region_id: 2,
        next_file_id: 3,
        namespaces: ["default".to_string()].into(),
        tables: [(
            name.to_string(),
            v3::TableEntry {
                descriptor: v3::TableDescriptor {
                    name: name.clone(),
                    families: vec![crate::schema::ColumnFamilyDescriptor::new("f").into()],
                    memstore_flush_size: None,
                    compaction: CompactionSettings::default(),
                    coprocessors: vec![CoprocessorDescriptor::new("audit")],
                },
                enabled: true,
                regions: Vec::new(),
            },
        )]
        .into(),
    };
    write_old_catalog(dir.path(), 3, &old);
    let c = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    let mut s = c.snapshot();
    let d = &s.tables[&name.to_string()].descriptor;
    assert_eq!(d.salt, None);
    assert_eq!(d.coprocessors[0].name, "audit");
    // A salted descriptor survives the current version's round trip.
    let salt = crate::schema::salt::SaltSpec::new(128)
        .format(crate::schema::salt::SaltFormat::Hex)
        .hash_prefix(8);
    c.update(|st| {
        st.table_mut(&name.to_string())?.descriptor.salt = Some(salt.clone());
        Ok(())
    })
    .unwrap();
    s.table_mut(&name.to_string()).unwrap().descriptor.salt = Some(salt);
    drop(c);
    let again = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    assert_eq!(again.snapshot(), s);
}

#[test]
fn version_4_catalogs_are_read_without_a_compaction_compression() {
    use crate::schema::{ColumnFamilyDescriptor, CompactionSettings, Compression, TableName};
    let dir = tempfile::tempdir().unwrap();
    let name = TableName::parse("t").unwrap();
    let salt = crate::schema::salt::SaltSpec::new(16);
    let old = v4::CatalogState {
        next_region_id: 2,
        next_file_id: 3,
        namespaces: ["default".to_string()].into(),
        tables: [(
            name.to_string(),
            v4::TableEntry {
                descriptor: v4::TableDescriptor {
                    name: name.clone(),
                    families: vec![ColumnFamilyDescriptor::new("f")
                        .compression(Compression::Zstd)
                        .into()],
                    memstore_flush_size: Some(1 << 20),
                    compaction: CompactionSettings::default(),
                    coprocessors: Vec::new(),
                    salt: Some(salt.clone()),
                },
                enabled: true,
                regions: Vec::new(),
            },
        )]
        .into(),
    };
    write_old_catalog(dir.path(), 4, &old);
    let c = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    let mut s = c.snapshot();
    let d = &s.tables[&name.to_string()].descriptor;
    assert_eq!(d.salt, Some(salt));
    assert_eq!(d.memstore_flush_size, Some(1 << 20));
    assert_eq!(d.families[0].compression, Compression::Zstd);
    assert_eq!(d.families[0].compaction_compression, None);
    assert_eq!(
        d.families[0].compression_for_compaction(),
        Compression::Zstd
    );
    // The next update writes version 5, which keeps a compaction compression.
    c.update(|st| {
        st.table_mut(&name.to_string())?.descriptor.families[0].compaction_compression =
            Some(Compression::Lz4);
        Ok(())
    })
    .unwrap();
    s.table_mut(&name.to_string()).unwrap().descriptor.families[0].compaction_compression =
        Some(Compression::Lz4);
    drop(c);
    let bytes = fs::read(dir.path().join("catalog")).unwrap();
    assert_eq!(&bytes[8..12], &VERSION.to_be_bytes());
    let again = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    assert_eq!(again.snapshot(), s);
}

/// Version 7 widened keep-deleted-cells from a bool to an enum whose first two
/// discriminants encode as the bool did: a version-6 catalog reads unchanged.
#[test]
fn version_6_catalogs_read_keep_deleted_cells_unchanged() {
    use crate::schema::{ColumnFamilyDescriptor, KeepDeletedCells, TableName};
    for (old, new) in [
        (false, KeepDeletedCells::False),
        (true, KeepDeletedCells::True),
    ] {
        assert_eq!(
            postcard::to_stdvec(&old).unwrap(),
            postcard::to_stdvec(&new).unwrap()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let name = TableName::parse("t").unwrap();
    let d = TableDescriptor::new(name.clone())
        .family(ColumnFamilyDescriptor::new("f").keep_deleted_cells(true))
        .family(ColumnFamilyDescriptor::new("g"));
    let state = old::CatalogState::<v10::TableDescriptor> {
        next_region_id: 1,
        next_file_id: 1,
        namespaces: ["default".to_string()].into(),
        tables: [(
            name.to_string(),
            old::TableEntry {
                descriptor: d.clone().into(),
                enabled: true,
                regions: Vec::new(),
            },
        )]
        .into(),
    };
    let again = read_written(dir.path(), 6, &postcard::to_stdvec(&state).unwrap());
    assert_eq!(again.tables[&name.to_string()].descriptor, d);
    let d = &again.tables[&name.to_string()].descriptor;
    assert_eq!(d.families[0].keep_deleted_cells, KeepDeletedCells::True);
}

/// Version 8 added region and file generations: a version-7 catalog reads with generation 0
/// everywhere, and its files keep their names without one.
#[test]
fn version_7_catalogs_are_read_with_generation_0() {
    use crate::schema::{ColumnFamilyDescriptor, TableName};
    let dir = tempfile::tempdir().unwrap();
    let name = TableName::parse("t").unwrap();
    let file = old::FileEntry {
        id: 12,
        max_seq: 40,
        size: 4096,
        entries: 9,
    };
    let state = old::CatalogState::<v10::TableDescriptor> {
        next_region_id: 3,
        next_file_id: 13,
        namespaces: ["default".to_string()].into(),
        tables: [(
            name.to_string(),
            old::TableEntry {
                descriptor: TableDescriptor::new(name.clone())
                    .family(ColumnFamilyDescriptor::new("f"))
                    .into(),
                enabled: true,
                regions: vec![old::RegionEntry {
                    id: 2,
                    start: Bytes::new(),
                    end: Bytes::new(),
                    flushed_seq: 40,
                    files: [(Bytes::from_static(b"f"), vec![file])].into(),
                }],
            },
        )]
        .into(),
    };
    let payload = postcard::to_stdvec(&state).unwrap();
    let mut bytes = Vec::new();
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&7u32.to_be_bytes());
    bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    let crc = checksum(7, &bytes, &payload);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes.extend_from_slice(&payload);
    fs::write(dir.path().join("catalog"), &bytes).unwrap();
    let objects = crate::objects::local(crate::fs::StdFs::shared(), dir.path());
    let c = Catalog::open(&objects).unwrap();
    let s = c.snapshot();
    let r = &s.tables[&name.to_string()].regions[0];
    assert_eq!((r.id, r.flushed_seq, r.generation), (2, 40, 0));
    let f = &r.files[&Bytes::from_static(b"f")][0];
    assert_eq!(
        (f.id, f.max_seq, f.size, f.entries, f.generation),
        (12, 40, 4096, 9, 0)
    );
    assert_eq!(f.name(), "data/0000000000000012.sf");
    // An engine's claim raises every region's generation; the next update stores it in
    // the current version.
    c.claim(0).unwrap();
    c.update(|_| Ok(())).unwrap();
    drop(c);
    let again = Catalog::open(&objects).unwrap().snapshot();
    assert_eq!(again.tables[&name.to_string()].regions[0].generation, 1);
    assert_eq!(
        fs::read(dir.path().join("catalog")).unwrap()[8..12],
        VERSION.to_be_bytes()
    );
}

#[test]
fn version_8_catalogs_are_read_with_unknown_writers() {
    use crate::schema::{ColumnFamilyDescriptor, TableName};
    let dir = tempfile::tempdir().unwrap();
    let name = TableName::parse("t").unwrap();
    let file = FileEntry {
        id: 12,
        max_seq: 40,
        size: 4096,
        entries: 9,
        generation: 3,
    };
    let state = v8::CatalogState {
        next_region_id: 3,
        next_file_id: 13,
        namespaces: ["default".to_string()].into(),
        tables: [(
            name.to_string(),
            v8::TableEntry {
                descriptor: TableDescriptor::new(name.clone())
                    .family(ColumnFamilyDescriptor::new("f"))
                    .into(),
                enabled: true,
                regions: vec![v8::RegionEntry {
                    id: 2,
                    start: Bytes::new(),
                    end: Bytes::new(),
                    flushed_seq: 40,
                    files: [(Bytes::from_static(b"f"), vec![file.clone()])].into(),
                    generation: 3,
                }],
            },
        )]
        .into(),
    };
    let s = read_written(dir.path(), 8, &postcard::to_stdvec(&state).unwrap());
    let r = &s.tables[&name.to_string()].regions[0];
    assert_eq!((r.id, r.flushed_seq, r.generation), (2, 40, 3));
    assert!(r.writers.is_empty(), "writers unknown");
    assert_eq!(r.files[&Bytes::from_static(b"f")], vec![file]);
    assert_eq!((s.next_writer, s.store_claim, s.next_file_id), (1, 0, 13));
}

/// Writes a catalog of format `version` with `payload` into `dir` and opens it.
pub(super) fn read_written(dir: &std::path::Path, version: u32, payload: &[u8]) -> CatalogState {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&version.to_be_bytes());
    bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    let crc = checksum(version, &bytes, payload);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes.extend_from_slice(payload);
    fs::write(dir.join("catalog"), &bytes).unwrap();
    let objects = crate::objects::local(crate::fs::StdFs::shared(), dir);
    Catalog::open(&objects).unwrap().snapshot()
}

#[test]
fn version_10_catalogs_are_read_without_split_restrictions() {
    use crate::schema::salt::SaltSpec;
    use crate::schema::{ColumnFamilyDescriptor, SplitRestriction, TableName};
    let dir = tempfile::tempdir().unwrap();
    let name = TableName::parse("t").unwrap();
    let desc = TableDescriptor::new(name.clone())
        .family(ColumnFamilyDescriptor::new("f").max_versions(3))
        .salt(SaltSpec::new(4))
        .memstore_flush_size(1 << 20);
    let region = RegionEntry {
        id: 2,
        start: Bytes::new(),
        end: Bytes::new(),
        flushed_seq: 40,
        files: BTreeMap::new(),
        generation: 3,
        writers: vec![1, 4],
    };
    let state = v10::CatalogState {
        next_region_id: 3,
        next_file_id: 13,
        namespaces: ["default".to_string()].into(),
        tables: [(
            name.to_string(),
            v10::TableEntry {
                descriptor: desc.clone().into(),
                enabled: false,
                regions: vec![region.clone()],
            },
        )]
        .into(),
        next_writer: 5,
        store_claim: 7,
        lineage: vec![(7, 99)],
    };
    let s = read_written(dir.path(), 10, &postcard::to_stdvec(&state).unwrap());
    let t = &s.tables[&name.to_string()];
    assert_eq!(t.descriptor, desc);
    assert_eq!(t.descriptor.split_restriction, None);
    assert_eq!((t.enabled, t.regions.clone()), (false, vec![region]));
    assert_eq!(
        (s.next_writer, s.store_claim, s.lineage),
        (5, 7, vec![(7, 99)])
    );
    // A restriction survives the current format.
    let objects = crate::objects::local(crate::fs::StdFs::shared(), dir.path());
    let c = Catalog::open(&objects).unwrap();
    c.update(|s| {
        s.table_mut(&name.to_string())?.descriptor.split_restriction =
            Some(SplitRestriction::KeyPrefix(6));
        Ok(())
    })
    .unwrap();
    drop(c);
    let s = Catalog::open(&objects).unwrap().snapshot();
    let got = s.tables[&name.to_string()].descriptor.split_restriction;
    assert_eq!(got, Some(SplitRestriction::KeyPrefix(6)));
}

#[test]
fn store_file_names_carry_their_generation() {
    assert_eq!(store_file_name(7, 0), "data/0000000000000007.sf");
    assert_eq!(store_file_name(7, 3), "data/0000000000000007-g3.sf");
    assert_ne!(store_file_name(7, 1), store_file_name(7, 2));
}

#[test]
fn round_trip_and_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let c = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    c.update(|s| {
        s.namespaces.insert("im".into());
        s.next_file_id = 7;
        Ok(())
    })
    .unwrap();
    let failed: Result<()> = c.update(|s| {
        s.next_file_id = 99;
        Err(Error::bad_argument("no"))
    });
    assert!(failed.is_err());
    drop(c);
    let c = Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    ))
    .unwrap();
    let s = c.snapshot();
    assert!(s.namespaces.contains("im"));
    assert_eq!(s.next_file_id, 7);
    let path = dir.path().join("catalog");
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    fs::write(&path, &bytes).unwrap();
    match Catalog::open(&crate::objects::local(
        crate::fs::StdFs::shared(),
        dir.path(),
    )) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
        other => panic!("expected corruption, got {other:?}"),
    }
}

/// Every single-bit flip, every cut and any appended bytes are reported, or (a version
/// field naming an older format whose payload reads the same) give the same state.
#[test]
fn any_damage_to_the_catalog_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let objects = crate::objects::local(crate::fs::StdFs::shared(), dir.path());
    let c = Catalog::open(&objects).unwrap();
    c.update(|s| {
        s.namespaces.insert("im".into());
        s.next_file_id = 7;
        Ok(())
    })
    .unwrap();
    let want = c.snapshot();
    let path = dir.path().join("catalog");
    let good = fs::read(&path).unwrap();
    let check = |bytes: &[u8], what: &str| match decode(&path, bytes) {
        Err(Error::Corruption { .. }) => {}
        Ok(state) => assert_eq!(state, want, "{what}: damage read as another state"),
        Err(other) => panic!("{what}: {other:?}"),
    };
    for at in 0..good.len() {
        for bit in 0..8 {
            let mut bytes = good.clone();
            bytes[at] ^= 1 << bit;
            check(&bytes, &format!("bit {bit} of byte {at}"));
            if !(8..12).contains(&at) {
                assert!(decode(&path, &bytes).is_err(), "flip at {at} not reported");
            }
        }
    }
    for cut in 0..good.len() {
        assert!(decode(&path, &good[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = good.clone();
    longer.extend_from_slice(b"garbage");
    assert!(
        matches!(decode(&path, &longer), Err(Error::Corruption { offset, .. }) if offset == good.len() as u64)
    );
}
