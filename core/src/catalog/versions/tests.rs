//! Tests of engines sharing one versioned catalog: claims of the whole store and of some
//! regions, updates applied again to the newest version, refusals of changes to regions
//! another engine claimed, and stale engines whose versions were deleted.

use super::super::{Catalog, CatalogState, RegionEntry, TableEntry};
use crate::error::Error;
use crate::objects::{Objects, StoreObjects};
use crate::schema::{ColumnFamilyDescriptor, TableDescriptor, TableName};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

fn store() -> Arc<dyn Objects> {
    Arc::new(StoreObjects::in_memory())
}

/// A table `t` of regions 1 (`[, m)`) and 2 (`[m, )`), created by `c`.
fn create_table(c: &Catalog) {
    let name = TableName::parse("t").unwrap();
    let writer = c.writer();
    c.update(|s| {
        let region = |id: u64, start: &'static [u8], end: &'static [u8]| RegionEntry {
            id,
            start: Bytes::from_static(start),
            end: Bytes::from_static(end),
            flushed_seq: 0,
            files: BTreeMap::new(),
            generation: 1,
            writers: vec![writer],
        };
        s.tables.insert(
            name.to_string(),
            TableEntry {
                descriptor: TableDescriptor::new(name.clone())
                    .family(ColumnFamilyDescriptor::new("f")),
                enabled: true,
                regions: vec![region(1, b"", b"m"), region(2, b"m", b"")],
            },
        );
        s.next_region_id = 3;
        Ok(())
    })
    .unwrap();
}

/// Region `id` of the newest version of `objects`.
fn region(objects: &Arc<dyn Objects>, id: u64) -> RegionEntry {
    let s = Catalog::open(objects).unwrap().snapshot();
    s.tables["default:t"]
        .regions
        .iter()
        .find(|r| r.id == id)
        .cloned()
        .unwrap()
}

/// A flush-like change of region `id`: its flushed seq moves to `seq`.
fn flush(c: &Catalog, id: u64, seq: u64) -> crate::error::Result<()> {
    c.update(|s: &mut CatalogState| {
        let t = s.table_mut("default:t")?;
        let r = t.regions.iter_mut().find(|r| r.id == id).unwrap();
        r.flushed_seq = seq;
        Ok(())
    })
}

#[test]
fn engines_serving_disjoint_regions_update_one_catalog_in_turn() {
    let objects = store();
    let a = Catalog::open(&objects).unwrap();
    let wa = a.claim(1).unwrap().writer;
    create_table(&a);
    assert_eq!(region(&objects, 1).writers, vec![wa]);
    // B claims region 2: its generation rises, B's writer joins its writers.
    let b = Catalog::open(&objects).unwrap();
    let wb = b.claim_regions(&BTreeSet::from([2]), 1).unwrap().writer;
    assert!(wb > wa, "each claim takes the next writer number");
    let r2 = region(&objects, 2);
    assert_eq!((r2.generation, r2.writers.clone()), (2, vec![wa, wb]));
    assert_eq!(region(&objects, 1).generation, 1);
    // A changes region 1 on top of B's version; it may no longer change region 2.
    flush(&a, 1, 10).unwrap();
    assert!(matches!(flush(&a, 2, 11), Err(Error::Fenced { .. })));
    // B changes region 2 on top of A's version, and A's change stays.
    flush(&b, 2, 12).unwrap();
    assert!(matches!(flush(&b, 1, 13), Err(Error::Fenced { .. })));
    assert_eq!(region(&objects, 1).flushed_seq, 10);
    assert_eq!(region(&objects, 2).flushed_seq, 12);
    // Neither may change the table's schema: the other serves some of it.
    let disable = |c: &Catalog| {
        c.update(|s| {
            s.table_mut("default:t")?.enabled = false;
            Ok(())
        })
    };
    assert!(matches!(disable(&b), Err(Error::Fenced { .. })));
    assert!(matches!(disable(&a), Err(Error::Fenced { .. })));
    assert!(region(&objects, 1).generation == 1);
    // A lost a region since its claim; B lost none.
    assert!(matches!(a.check_claim(), Err(Error::Fenced { .. })));
    b.check_claim().unwrap();
    // A claim of the whole store fences both for everything, region-free changes included.
    let c = Catalog::open(&objects).unwrap();
    c.claim(1).unwrap();
    assert!(matches!(flush(&a, 1, 20), Err(Error::Fenced { .. })));
    assert!(matches!(
        a.update(|s| {
            s.namespaces.insert("late".into());
            Ok(())
        }),
        Err(Error::Fenced { .. })
    ));
    assert!(matches!(b.check_claim(), Err(Error::Fenced { .. })));
    flush(&c, 1, 30).unwrap();
    flush(&c, 2, 31).unwrap();
    let s = Catalog::open(&objects).unwrap().snapshot();
    assert!(!s.namespaces.contains("late"));
}

#[test]
fn a_stale_engine_never_stores_a_version_no_reader_sees() {
    let objects = store();
    let a = Catalog::open(&objects).unwrap();
    a.claim(1).unwrap();
    create_table(&a);
    let b = Catalog::open(&objects).unwrap();
    b.claim_regions(&BTreeSet::from([2]), 1).unwrap();
    // B stores several versions: the ones A last saw are deleted.
    for seq in 1..6 {
        flush(&b, 2, seq).unwrap();
    }
    // A's change lands in the newest version, not in a re-created old one.
    flush(&a, 1, 77).unwrap();
    assert_eq!(region(&objects, 1).flushed_seq, 77);
    assert_eq!(region(&objects, 2).flushed_seq, 5);
    let versions = objects.list("catalog").unwrap();
    assert!(versions.len() <= 2, "old versions deleted: {versions:?}");
}

#[test]
fn a_claim_of_an_unknown_region_or_of_a_directory_is_refused() {
    let objects = store();
    let a = Catalog::open(&objects).unwrap();
    a.claim(1).unwrap();
    create_table(&a);
    let b = Catalog::open(&objects).unwrap();
    let unknown = b.claim_regions(&BTreeSet::from([2, 9]), 1);
    assert!(
        matches!(unknown, Err(Error::RegionNotFound { id: 9, .. })),
        "{unknown:?}"
    );
    assert_eq!(region(&objects, 2).generation, 1, "nothing claimed");
    let dir = tempfile::tempdir().unwrap();
    let local = crate::objects::local(crate::fs::StdFs::shared(), dir.path());
    let d = Catalog::open(&local).unwrap();
    let refused = d.claim_regions(&BTreeSet::from([1]), 1);
    assert!(matches!(refused, Err(Error::BadArgument(_))), "{refused:?}");
}

#[test]
fn merged_writers_stay_unknown_when_either_side_is() {
    let entry = |writers: Vec<u64>| RegionEntry {
        id: 1,
        start: Bytes::new(),
        end: Bytes::new(),
        flushed_seq: 0,
        files: BTreeMap::new(),
        generation: 1,
        writers,
    };
    assert_eq!(
        entry(vec![1, 2]).writers_and(&entry(vec![2, 3])),
        vec![1, 2, 3]
    );
    assert!(entry(vec![]).writers_and(&entry(vec![2])).is_empty());
    assert!(entry(vec![4]).writers_and(&entry(vec![])).is_empty());
}

#[test]
fn a_version_another_engine_stored_on_top_counts_as_stored() {
    let objects = store();
    let a = Catalog::open(&objects).unwrap();
    a.claim(1).unwrap();
    create_table(&a);
    let n = a.version().unwrap() + 1;
    let mut mine = a.snapshot();
    super::create(&*objects, n, &mut mine).unwrap();
    let nonce = mine.lineage.last().unwrap().1;
    // Another engine stores n + 1 on top of it before this one looks.
    let mut on_top = mine.clone();
    super::create(&*objects, n + 1, &mut on_top).unwrap();
    assert!(super::descends(&*objects, n, nonce).unwrap());
    assert!(!super::descends(&*objects, n, nonce ^ 1).unwrap());
    let lineage: Vec<u64> = on_top.lineage.iter().map(|(v, _)| *v).collect();
    assert_eq!(lineage.last(), Some(&(n + 1)));
    assert!(lineage.windows(2).all(|w| w[1] == w[0] + 1), "{lineage:?}");
}

#[test]
fn engines_sharing_a_store_hand_out_disjoint_file_ids() {
    let objects = store();
    let a = Catalog::open(&objects).unwrap();
    let first = a.claim(1).unwrap().file_ids;
    create_table(&a);
    let b = Catalog::open(&objects).unwrap();
    let mut ranges = vec![
        first,
        b.claim_regions(&BTreeSet::from([2]), 1).unwrap().file_ids,
    ];
    let mut owners = vec![a.writer(), b.writer()];
    for i in 0..6 {
        let (c, used) = match i % 2 {
            0 => (&a, ranges[0].end),
            _ => (&b, ranges[1].end),
        };
        ranges.push(c.reserve_file_ids(used).unwrap());
        owners.push(c.writer());
    }
    // Every block is recorded with the writer that reserved it, and each of its ids is
    // found to be that writer's.
    let newest = Catalog::open(&objects).unwrap().snapshot();
    assert_eq!(newest.file_blocks.len(), ranges.len());
    for (range, owner) in ranges.iter().zip(&owners) {
        assert_eq!(newest.file_blocks.get(&range.start), Some(owner));
        for id in [range.start, range.end - 1] {
            assert_eq!(newest.block_writer(id), Some(*owner), "{id} of {range:?}");
        }
        assert_ne!(newest.block_writer(range.end), Some(*owner));
    }
    for (i, x) in ranges.iter().enumerate() {
        assert!(!x.is_empty());
        for y in &ranges[i + 1..] {
            assert!(
                x.end <= y.start || y.end <= x.start,
                "{x:?} and {y:?} overlap"
            );
        }
    }
    // A claim of the whole store ends the others' reservations.
    Catalog::open(&objects).unwrap().claim(1).unwrap();
    assert!(matches!(a.reserve_file_ids(0), Err(Error::Fenced { .. })));
}

#[test]
fn version_9_catalogs_are_read_without_a_lineage() {
    let objects = store();
    let a = Catalog::open(&objects).unwrap();
    a.claim(1).unwrap();
    create_table(&a);
    let current = Catalog::open(&objects).unwrap().snapshot();
    let old = super::super::v9::CatalogState {
        next_region_id: current.next_region_id,
        next_file_id: current.next_file_id,
        namespaces: current.namespaces.clone(),
        tables: (current.tables.clone().into_iter())
            .map(|(k, t)| (k, t.into()))
            .collect(),
        next_writer: current.next_writer,
        store_claim: current.store_claim,
    };
    let payload = postcard::to_stdvec(&old).unwrap();
    let mut bytes = Vec::new();
    bytes.extend_from_slice(super::super::MAGIC);
    bytes.extend_from_slice(&9u32.to_be_bytes());
    bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    let crc = super::super::checksum(9, &bytes, &payload);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes.extend_from_slice(&payload);
    let next = a.version().unwrap() + 1;
    objects
        .put(&super::name(next), &bytes, crate::objects::PutMode::Create)
        .unwrap();
    let read = Catalog::open(&objects).unwrap();
    assert_eq!(read.version(), Some(next));
    let s = read.snapshot();
    assert!(s.lineage.is_empty());
    assert_eq!(
        (s.tables.clone(), s.next_writer, s.store_claim),
        (current.tables, current.next_writer, current.store_claim)
    );
    // An engine that read it stores the next version with a lineage.
    flush(&a, 1, 5).unwrap();
    let after = Catalog::open(&objects).unwrap().snapshot();
    assert_eq!(after.lineage.last().map(|(v, _)| *v), Some(next + 1));
    assert_eq!(region(&objects, 1).flushed_seq, 5);
}
