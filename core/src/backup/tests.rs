//! Tests of backups below the engine: the manifest codec (round trip, every damaged byte
//! found), and a backup of hand-written files: incremental, verified, restored, refused
//! when damaged.

use super::*;
use crate::catalog::{RegionEntry, TableEntry};
use crate::objects::StoreObjects;
use crate::schema::{ColumnFamilyDescriptor, TableDescriptor, TableName};
use bytes::Bytes;
use proptest::prelude::*;
use std::time::{Duration, Instant};

fn manifest(id: u64, files: Vec<(String, u64, u32)>, catalog: Vec<u8>) -> BackupManifest {
    BackupManifest {
        id,
        created_ms: 7,
        read_point: id * 3,
        tables: vec!["default:t".into()],
        catalog,
        files: files
            .into_iter()
            .map(|(name, size, crc32)| BackupFile {
                stored: format!("files/{name}"),
                name: format!("data/{name}"),
                size,
                crc32,
            })
            .collect(),
    }
}

proptest! {
    #[test]
    fn manifests_round_trip_and_every_damaged_byte_is_found(
        id in 0u64..1 << 40,
        files in proptest::collection::vec(("[a-z0-9]{1,12}", any::<u64>(), any::<u32>()), 0..6),
        catalog in proptest::collection::vec(any::<u8>(), 0..64),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let m = manifest(id, files, catalog);
        let bytes = encode(&m).unwrap();
        prop_assert_eq!(decode(Path::new("m"), &bytes).unwrap(), m);
        let mut bad = bytes.clone();
        let at = flip.index(bad.len());
        bad[at] ^= 1 << bit;
        prop_assert!(decode(Path::new("m"), &bad).is_err());
        prop_assert!(decode(Path::new("m"), &bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert!(decode(Path::new("m"), &longer).is_err());
    }
}

/// A source holding files 1 and 2 (listed by table `t`), and its catalog.
fn source() -> (Arc<dyn Objects>, CatalogState) {
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::new(Arc::new(
        object_store::memory::InMemory::new(),
    )));
    let mut files = Vec::new();
    for (id, len) in [(1u64, 3000usize), (2, 10)] {
        let f = FileEntry {
            id,
            max_seq: 1,
            size: len as u64,
            entries: 1,
            generation: 1,
        };
        let bytes: Vec<u8> = (0..len).map(|i| (i * id as usize) as u8).collect();
        objects.put(&f.name(), &bytes, PutMode::Create).unwrap();
        files.push(f);
    }
    let mut state = CatalogState::default();
    let desc = TableDescriptor::new(TableName::parse("t").unwrap())
        .family(ColumnFamilyDescriptor::new("f"));
    let region = RegionEntry {
        id: 1,
        start: Bytes::new(),
        end: Bytes::new(),
        flushed_seq: 1,
        files: [(Bytes::from_static(b"f"), files)].into(),
        generation: 1,
        writers: Vec::new(),
    };
    state.tables.insert(
        "default:t".into(),
        TableEntry {
            descriptor: desc,
            enabled: true,
            regions: vec![region],
        },
    );
    (objects, state)
}

#[test]
fn backups_are_incremental_verified_and_restored_and_damage_is_refused() {
    let (src, state) = source();
    let target: Arc<dyn Objects> = Arc::new(StoreObjects::new(Arc::new(
        object_store::memory::InMemory::new(),
    )));
    let err = read_manifest(&*target, None).unwrap_err();
    assert!(err.to_string().contains("no complete backup"), "{err}");
    let first = write_backup(&*src, &*target, &state, 5, &BackupOptions::default()).unwrap();
    assert_eq!(
        (first.id, first.files, first.copied_files, first.bytes),
        (1, 2, 2, 3010)
    );
    let second = write_backup(&*src, &*target, &state, 6, &BackupOptions::default()).unwrap();
    assert_eq!(
        (second.id, second.copied_files, second.copied_bytes),
        (2, 0, 0)
    );
    assert_eq!(list_backups(&*target).unwrap(), vec![1, 2]);
    assert_eq!(
        target.list("files").unwrap().len(),
        2,
        "shared files stored once"
    );
    assert!(verify_backup(&*target, None, None).unwrap().is_whole());
    // A stored file damaged (truncated) since is stored again by the next backup.
    let stored = target.list("files").unwrap()[0].clone();
    let bytes = target.read(&stored).unwrap();
    target
        .put(&stored, &bytes[..bytes.len() - 1], PutMode::Overwrite)
        .unwrap();
    let third = write_backup(&*src, &*target, &state, 7, &BackupOptions::default()).unwrap();
    assert_eq!((third.id, third.copied_files), (3, 1));
    assert!(verify_backup(&*target, None, None).unwrap().is_whole());
    // The earlier backups share the file stored again: whole again too.
    assert!(verify_backup(&*target, Some(1), None).unwrap().is_whole());

    // Restored into a new directory: the same bytes and catalog.
    let fs = crate::fs::FaultFs::new();
    let dir = Path::new("/restored");
    let done = restore_backup(&*target, Some(1), fs.as_dyn(), dir, None).unwrap();
    assert_eq!((done.id, done.read_point, done.files), (1, 5, 2));
    let restored = LocalObjects::new(fs.as_dyn(), dir.to_path_buf());
    for f in state.tables["default:t"].regions[0]
        .files
        .values()
        .flatten()
    {
        assert_eq!(
            restored.read(&f.name()).unwrap(),
            src.read(&f.name()).unwrap()
        );
    }
    let catalog = catalog::decode(Path::new("c"), &restored.read("catalog").unwrap()).unwrap();
    assert_eq!(catalog.tables, state.tables);
    assert!(
        catalog.next_file_id >= state.next_file_id + (1 << 24),
        "file ids moved on"
    );
    // Not into a directory that holds something.
    let err = restore_backup(&*target, None, fs.as_dyn(), dir, None).unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");

    // A bit flipped in a stored file: found by verify, refused by restore, nothing written.
    let stored = target.list("files").unwrap()[0].clone();
    let mut bytes = target.read(&stored).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    target.put(&stored, &bytes, PutMode::Overwrite).unwrap();
    let check = verify_backup(&*target, None, None).unwrap();
    assert_eq!(check.damaged.len(), 1, "{check:?}");
    assert!(check.damaged[0].1.contains("checksum"), "{check:?}");
    let other = Path::new("/other");
    let err = restore_backup(&*target, None, fs.as_dyn(), other, None).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
    assert!(!fs.as_dyn().exists(other).unwrap(), "nothing written");
    // A missing file too.
    target.delete(&stored).unwrap();
    let check = verify_backup(&*target, Some(2), None).unwrap();
    assert_eq!(check.damaged[0].1, "missing");
    // A manifest stored under another number is refused.
    let m = target.read(&manifest_name(1)).unwrap();
    target.put(&manifest_name(9), &m, PutMode::Create).unwrap();
    let err = read_manifest(&*target, Some(9)).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
}

#[test]
fn a_rate_limit_spreads_the_copy() {
    let (src, state) = source();
    let target: Arc<dyn Objects> = Arc::new(StoreObjects::new(Arc::new(
        object_store::memory::InMemory::new(),
    )));
    let options = BackupOptions {
        max_bytes_per_sec: Some(30_000),
        progress: None,
    };
    let start = Instant::now();
    write_backup(&*src, &*target, &state, 1, &options).unwrap();
    // 3,010 bytes at 30,000 a second: at least a tenth of a second.
    assert!(
        start.elapsed() >= Duration::from_millis(95),
        "{:?}",
        start.elapsed()
    );
}
