//! The serde forms of what crosses the `Backend` seam: operations built through the public
//! builders round-trip through postcard; arbitrary and damaged bytes decode to a usable
//! value or fail, never panic; a put whose column lengths do not tile its buffer is refused.

mod strategies;

use super::{ColumnWire, PutWire};
use crate::cell::{CellType, Timestamp};
use crate::filter::{Filter, MAX_FILTER_DEPTH};
use crate::ops::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Delete, Get, Increment, Mutation, Put,
    RowMutations, Scan,
};
use crate::wal::Durability;
use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use strategies::*;

// ---- Helpers ---------------------------------------------------------------------------

/// `x` through postcard's bytes, checked equal to `x` (by its Debug form, which shows every
/// field: the operations have no `PartialEq`).
fn round_trip<T: Serialize + DeserializeOwned + Debug>(x: &T) -> T {
    let bytes = postcard::to_allocvec(x).expect("encodes");
    let back: T = postcard::from_bytes(&bytes).expect("decodes");
    assert_eq!(format!("{back:?}"), format!("{x:?}"));
    back
}

type OwnedCell = (Vec<u8>, Vec<u8>, Timestamp, Vec<u8>);

fn cells_of(p: &Put) -> Vec<OwnedCell> {
    p.cells()
        .map(|(f, q, ts, v)| (f.to_vec(), q.to_vec(), ts, v.to_vec()))
        .collect()
}

/// Uses every accessor of a decoded put; its cells add up to no more than `budget` bytes
/// (the message it came from).
fn use_put(p: &Put, budget: usize) {
    let cells = cells_of(p);
    let shared: Vec<OwnedCell> = p
        .shared_cells()
        .map(|(f, q, ts, v)| (f.to_vec(), q.to_vec(), ts, v.to_vec()))
        .collect();
    assert_eq!(cells, shared);
    let total: usize = cells
        .iter()
        .map(|(f, q, _, v)| f.len() + q.len() + v.len())
        .sum();
    assert!(total <= budget, "{total} bytes of cells from {budget}");
    let _ = (
        p.row(),
        p.is_empty(),
        p.is_touch(),
        p.get_ttl_ms(),
        p.get_timestamp(),
    );
    let _ = p.clone().add_column("f", "q", "v").cells().count();
}

fn use_mutation(m: &Mutation, budget: usize) {
    let _ = (m.row(), m.durability());
    match m {
        Mutation::Put(p) => use_put(p, budget),
        Mutation::Delete(d) => {
            let _ = d.kinds().iter().map(|k| k.family().len()).sum::<usize>();
        }
    }
}

fn use_row_mutations(rm: &RowMutations, budget: usize) {
    for m in rm.mutations() {
        use_mutation(m, budget);
    }
}

fn use_batch_op(op: &BatchOp, budget: usize) {
    match op {
        BatchOp::Put(p) => use_put(p, budget),
        BatchOp::RowMutations(rm) => use_row_mutations(rm, budget),
        BatchOp::CheckAndMutate(cam) => {
            if let Some(rm) = cam.action() {
                use_row_mutations(rm, budget);
            }
        }
        _ => {}
    }
}

/// Decodes `bytes` as a `T`; what decodes is used, and re-encodes to bytes that decode to
/// the same value (what the decoder accepts, the encoder writes faithfully).
fn decode_as<T: Serialize + DeserializeOwned + Debug>(bytes: &[u8], use_it: impl Fn(&T)) {
    if let Ok(v) = postcard::from_bytes::<T>(bytes) {
        use_it(&v);
        round_trip(&v);
    }
}

/// Every type of the seam's requests, decoded from the same bytes.
fn decode_as_everything(bytes: &[u8]) {
    let n = bytes.len();
    decode_as::<Put>(bytes, |p| use_put(p, n));
    decode_as::<Delete>(bytes, |_| {});
    decode_as::<Get>(bytes, |_| {});
    decode_as::<Scan>(bytes, |s| {
        let _ = s.row_range();
    });
    decode_as::<Increment>(bytes, |_| {});
    decode_as::<Append>(bytes, |_| {});
    decode_as::<RowMutations>(bytes, |rm| use_row_mutations(rm, n));
    decode_as::<CheckAndMutate>(bytes, |cam| {
        let _ = cam.condition().holds(Some(b"x"));
        if let Some(rm) = cam.action() {
            use_row_mutations(rm, n);
        }
    });
    decode_as::<BatchOp>(bytes, |op| use_batch_op(op, n));
    decode_as::<Vec<BatchOp>>(bytes, |ops| ops.iter().for_each(|op| use_batch_op(op, n)));
    decode_as::<BatchOutcome>(bytes, |_| {});
}

/// `bytes` damaged: each `(at, byte)` overwrites a byte, then the tail past `keep` is cut.
fn damage(mut bytes: Vec<u8>, edits: &[(usize, u8)], keep: usize) -> Vec<u8> {
    if !bytes.is_empty() {
        for &(at, byte) in edits {
            let i = at % bytes.len();
            bytes[i] = byte;
        }
    }
    bytes.truncate(keep);
    bytes
}

// ---- (1) Round trips -------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn puts_round_trip(p in put()) {
        let back = round_trip(&p);
        prop_assert_eq!(cells_of(&back), cells_of(&p));
        prop_assert_eq!(back.is_touch(), p.is_touch());
        prop_assert_eq!(back.get_ttl_ms(), p.get_ttl_ms());
    }

    #[test]
    fn operations_round_trip(
        d in delete(),
        g in get(),
        s in scan(),
        inc in increment(),
        app in append(),
        rm in row_mutations(),
        cam in check_and_mutate(),
    ) {
        round_trip(&d);
        round_trip(&g);
        round_trip(&s);
        round_trip(&inc);
        round_trip(&app);
        round_trip(&rm);
        round_trip(&cam);
    }

    #[test]
    fn batches_and_outcomes_round_trip(
        ops in vec(batch_op(), 0..4),
        outcomes in vec(batch_outcome(), 0..4),
    ) {
        round_trip(&ops);
        let bytes = postcard::to_allocvec(&outcomes).unwrap();
        prop_assert_eq!(postcard::from_bytes::<Vec<BatchOutcome>>(&bytes).unwrap(), outcomes);
    }

    // ---- (2) Hostile bytes: a usable value or an error, never a panic ------------------

    #[test]
    fn arbitrary_bytes_never_panic(bytes in bytes(300)) {
        decode_as_everything(&bytes);
    }

    #[test]
    fn damaged_operations_never_panic(
        ops in vec(batch_op(), 1..3),
        edits in vec((any::<usize>(), any::<u8>()), 0..4),
        keep in any::<usize>(),
    ) {
        let whole = postcard::to_allocvec(&ops).unwrap();
        decode_as_everything(&damage(whole, &edits, keep));
        let one = postcard::to_allocvec(&ops[0]).unwrap();
        decode_as_everything(&damage(one, &edits, keep));
    }

    #[test]
    fn damaged_reads_never_panic(
        s in scan(),
        g in get(),
        edits in vec((any::<usize>(), any::<u8>()), 1..4),
        keep in any::<usize>(),
    ) {
        decode_as_everything(&damage(postcard::to_allocvec(&s).unwrap(), &edits, keep));
        decode_as_everything(&damage(postcard::to_allocvec(&g).unwrap(), &edits, keep));
    }

    #[test]
    fn damaged_puts_never_panic(
        p in put(),
        edits in vec((any::<usize>(), any::<u8>()), 1..4),
        keep in any::<usize>(),
    ) {
        let bytes = damage(postcard::to_allocvec(&p).unwrap(), &edits, keep);
        decode_as::<Put>(&bytes, |p| use_put(p, bytes.len()));
    }
}

// ---- (3) A put's column lengths must tile its buffer -----------------------------------

fn put_wire(data: &[u8], columns: &[(u64, u64, u64)]) -> PutWire {
    PutWire {
        row: Bytes::from_static(b"r"),
        ts: 5,
        data: Bytes::copy_from_slice(data),
        columns: columns
            .iter()
            .map(|&(family, qualifier, value)| ColumnWire {
                family,
                qualifier,
                ts: 9,
                value,
            })
            .collect(),
        durability: Durability::FsyncWal,
        ttl_ms: Some(60_000),
        touch: false,
    }
}

#[test]
fn a_put_is_encoded_as_its_wire_form() {
    let p = Put::new("r")
        .timestamp(5)
        .add_column_ts("f", "q", 9, "v")
        .add_column_ts("fam", "", 9, "value")
        .durability(Durability::FsyncWal)
        .ttl_ms(60_000);
    let wire = put_wire(b"fqvfamvalue", &[(1, 1, 1), (3, 0, 5)]);
    assert_eq!(
        postcard::to_allocvec(&p).unwrap(),
        postcard::to_allocvec(&wire).unwrap()
    );
    let back = Put::try_from(wire).unwrap();
    assert_eq!(cells_of(&back), cells_of(&p));
}

/// A put's buffer and its columns' (family, qualifier, value) lengths.
type WireCase = (&'static [u8], &'static [(u64, u64, u64)]);

#[test]
fn a_put_wire_with_a_span_out_of_range_is_refused() {
    let refused: [WireCase; 7] = [
        (b"fqv", &[(1, 1, 2)]),            // the value runs past the buffer
        (b"fqv", &[(1, 1, 1), (0, 0, 1)]), // a second column past it
        (b"fqv", &[(4, 0, 0)]),            // the family alone
        (b"fqv", &[(u64::MAX, 1, 1)]),     // a length no buffer has
        (b"fqv", &[(1, u64::MAX, 1)]),     // an end that would overflow
        (b"fqvx", &[(1, 1, 1)]),           // a byte no column covers
        (b"fqv", &[]),                     // bytes and no column
    ];
    for (data, columns) in refused {
        let wire = put_wire(data, columns);
        let bytes = postcard::to_allocvec(&wire).unwrap();
        assert!(Put::try_from(wire).is_err(), "{data:?} {columns:?}");
        assert!(postcard::from_bytes::<Put>(&bytes).is_err());
        assert!(postcard::from_bytes::<BatchOp>(&[&[0u8][..], &bytes].concat()).is_err());
    }
    // Empty columns tile an empty buffer; lengths that tile it exactly are taken.
    let taken: [WireCase; 2] = [(b"", &[(0, 0, 0)]), (b"fqv", &[(1, 1, 1)])];
    for (data, columns) in taken {
        let p = Put::try_from(put_wire(data, columns)).unwrap();
        use_put(&p, data.len());
    }
}

// ---- Filters nested in operations, and the other values of the seam ---------------------

#[test]
fn a_deep_filter_inside_a_get_is_refused_not_a_stack_overflow() {
    let leaf = postcard::to_allocvec(&Filter::FirstKeyOnly).unwrap();
    let wrapped = postcard::to_allocvec(&Filter::WhileMatch(Box::new(Filter::FirstKeyOnly)));
    let wrapped = wrapped.unwrap();
    let header = &wrapped[..wrapped.len() - leaf.len()];
    let get = postcard::to_allocvec(&Get::new("r").filter(Filter::FirstKeyOnly)).unwrap();
    let head = &get[..get.len() - leaf.len()]; // the filter is the get's last field
    for depth in [MAX_FILTER_DEPTH, MAX_FILTER_DEPTH + 1, 200_000] {
        let mut bytes = head.to_vec();
        bytes.extend(header.repeat(depth - 1));
        bytes.extend_from_slice(&leaf);
        let decoded = postcard::from_bytes::<Get>(&bytes);
        assert_eq!(decoded.is_ok(), depth <= MAX_FILTER_DEPTH, "depth {depth}");
    }
}

#[test]
fn reports_and_admin_values_round_trip() {
    fn same<T: Serialize + DeserializeOwned + PartialEq + Debug>(x: T) {
        let bytes = postcard::to_allocvec(&x).unwrap();
        assert_eq!(postcard::from_bytes::<T>(&bytes).unwrap(), x);
    }
    let table = crate::TableName::parse("ns:t").unwrap();
    same(crate::RegionInfo {
        name: "ns:t,a,3".into(),
        id: 3,
        start_key: Bytes::from_static(b"a"),
        end_key: Bytes::new(),
        read_requests: 1,
        write_requests: 2,
        memstore_size: 3,
        store_files: 4,
        store_file_size: 5,
        store_file_cells: 6,
        bloom_skipped_files: 7,
        reference_files: 8,
    });
    let mut desc = crate::TableDescriptor::new(table.clone());
    desc.families.push(crate::ColumnFamilyDescriptor::new("f"));
    same(crate::SnapshotDescription {
        name: "s1".into(),
        read_point: 10,
        created_ms: 11,
        tables: vec![table.to_string()],
        descriptors: vec![desc],
        regions: 2,
        files: 3,
        size: 300,
        shared_size: 100,
        own_size: 200,
        own_files: vec![(1, 200)],
    });
    let mut check = crate::FileCheck {
        path: "data/0000000000000001.sf".into(),
        file_size: 4096,
        data_blocks: 1,
        cells: 10,
        findings: Vec::new(),
    };
    check.add(64, crate::FindingKind::Checksum, "bad CRC");
    same(crate::IntegrityReport {
        table: table.clone(),
        regions: 1,
        files: vec![crate::StoreFileReport {
            region_id: 3,
            region: "ns:t,,3".into(),
            family: Bytes::from_static(b"f"),
            file_id: 1,
            check,
        }],
        files_checked: 1,
        files_missing: 0,
        files_damaged: 1,
        problems: 1,
        data_blocks: 1,
        cells: 10,
    });
    same(crate::OfflineRegion {
        table,
        region_id: 3,
        start: Bytes::new(),
        end: Bytes::from_static(b"m"),
        file: "data/0000000000000002.sf".into(),
        reason: "missing".into(),
    });
    same(crate::PluginInfo {
        id: "ab".repeat(32),
        kind: crate::PluginKind::Endpoint,
        size: 1000,
        uploaded_ms: 12,
        tables: vec!["ns:t".into()],
    });
    same(crate::PreSplit::None);
    same(crate::PreSplit::Keys(vec![b"g".to_vec(), b"p".to_vec()]));
    same(crate::PreSplit::Algorithm(
        crate::SplitAlgorithm::HexString,
        16,
    ));
    same(crate::CompactionKind::Major);
    same(crate::CompactionKind::Minor);
}

#[test]
fn a_cell_type_travels_as_its_code() {
    for kind in [
        CellType::Put,
        CellType::ExpiringPut,
        CellType::Delete,
        CellType::DeleteFamilyVersion,
        CellType::DeleteColumn,
        CellType::DeleteFamily,
    ] {
        assert_eq!(postcard::to_allocvec(&kind).unwrap(), vec![kind.code()]);
        assert_eq!(
            postcard::from_bytes::<CellType>(&[kind.code()]).unwrap(),
            kind
        );
    }
    for code in [0u8, 1, 6, 9, 255] {
        assert!(postcard::from_bytes::<CellType>(&[code]).is_err());
    }
}
