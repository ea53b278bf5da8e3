//! The plain point read of a store ([`Store::read_row_plain`]) against the general path (the
//! store's merge and the matcher), over random rows spread across a MemStore and files.

use super::*;
use crate::schema::{Compression, KeepDeletedCells};
use crate::storage::matcher::match_row_into;
use crate::storage::storefile::{StoreFileWriter, WriterOptions};

const ROWS: [&str; 6] = ["r0", "r1", "r2", "r3", "r4", "r5"];
const QUALS: [&str; 3] = ["", "a", "b"];
const KINDS: [CellType; 6] = [
    CellType::Put,
    CellType::ExpiringPut,
    CellType::Delete,
    CellType::DeleteColumn,
    CellType::DeleteFamily,
    CellType::DeleteFamilyVersion,
];

/// A cell from a generated tuple: (row, qualifier, ts, kind, seq); a kind index past the
/// table is a put, so most rows are plain.
fn cell(row: usize, q: usize, ts: u64, kind: usize, seq: u64) -> StoreCell {
    let kind = KINDS.get(kind).copied().unwrap_or(CellType::Put);
    let q = if kind.is_family_delete() {
        ""
    } else {
        QUALS[q]
    };
    let value = if kind == CellType::ExpiringPut {
        crate::cell::expiring_value(3_600_000, format!("v{seq}").as_bytes())
    } else if kind.is_delete() {
        Bytes::new()
    } else {
        Bytes::from(format!("v{seq}-{row}{q}{ts}"))
    };
    StoreCell {
        key: StoreKey {
            row: Bytes::from_static(ROWS[row].as_bytes()),
            qualifier: Bytes::from_static(q.as_bytes()),
            ts,
            kind,
            seq,
        },
        value,
    }
}

/// A file of `cells` (sorted, one cell per key) with `bloom` and tiny blocks, so rows
/// straddle blocks.
fn file(
    dir: &std::path::Path,
    id: u64,
    mut cells: Vec<StoreCell>,
    bloom: bool,
) -> Arc<StoreFileReader> {
    cells.sort_by(|a, b| a.key.cmp(&b.key));
    cells.dedup_by(|a, b| a.key == b.key);
    let path = dir.join(format!("{id}.sf"));
    let opts = WriterOptions {
        block_size: 48,
        compression: Compression::None,
        bloom: if bloom {
            BloomType::Row
        } else {
            BloomType::None
        },
        ..WriterOptions::default()
    };
    let fs = crate::fs::StdFs::shared();
    let mut w = StoreFileWriter::create_file(&fs, &path, opts).unwrap();
    for c in &cells {
        w.append(c).unwrap();
    }
    w.finish().unwrap();
    let cache = Arc::new(crate::storage::storefile::BlockCache::new(1 << 20));
    StoreFileReader::open_file(&fs, &path, id, Some(cache)).unwrap()
}

/// What the general path returns for `row`: the store's merge of every source, matched.
fn general(
    store: &Store,
    row: &Bytes,
    columns: Option<&BTreeSet<Bytes>>,
    spec: &ReadSpec,
) -> Vec<Cell> {
    let start = StoreKey::first_on_row(row.clone());
    let mut cells = Vec::new();
    for c in store.merged(Some(&start), false, Some((row, columns)), true) {
        let c = c.unwrap();
        if c.key.row != *row {
            break;
        }
        cells.push(c);
    }
    let mut out = Vec::new();
    match_row_into(cells, &store.rules(), spec, columns, |c| {
        out.push(Cell {
            row: c.key.row,
            family: store.family.clone(),
            qualifier: c.key.qualifier,
            timestamp: c.key.ts,
            kind: c.key.kind,
            value: c.value,
        })
    });
    out
}

/// A generated store: cells spread over the MemStore and up to two files (with or without
/// bloom filters), the family's versions and TTL; the parts as generated, for the checks.
struct Case {
    store: Store,
    parts: [Vec<StoreCell>; 3],
    ttl: bool,
    _dir: tempfile::TempDir,
}

type RawCells = Vec<(usize, usize, u64, usize, u64, usize)>;

fn build(cells: RawCells, blooms: (bool, bool), max_versions: u32, ttl: bool) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let mut family = ColumnFamilyDescriptor::new("f")
        .max_versions(max_versions)
        .keep_deleted_cells(KeepDeletedCells::False);
    if ttl {
        family = family.ttl_secs(1_000_000_000);
    }
    // Sequence ids are unique per key, as the engine makes them.
    let mut seen = BTreeSet::new();
    let mut parts: [Vec<StoreCell>; 3] = Default::default();
    for (r, q, ts, kind, seq, place) in cells {
        let c = cell(r, q, ts, kind, seq);
        let key = (
            c.key.row.clone(),
            c.key.qualifier.clone(),
            c.key.ts,
            c.key.kind.rank(),
            seq,
        );
        if seen.insert(key) {
            parts[place].push(c);
        }
    }
    let mut files = Vec::new();
    if !parts[2].is_empty() {
        files.push(file(dir.path(), 2, parts[2].clone(), blooms.1));
    }
    if !parts[1].is_empty() {
        files.push(file(dir.path(), 1, parts[1].clone(), blooms.0));
    }
    let store = Store::new(family, files);
    for c in parts[0].iter().cloned() {
        store.insert(c);
    }
    Case {
        store,
        parts,
        ttl,
        _dir: dir,
    }
}

fn spec_of(read_point: u64, min_ts: u64, span: u64, versions: u32) -> ReadSpec {
    ReadSpec {
        read_point,
        min_ts,
        max_ts: if span == 9 { u64::MAX } else { min_ts + span },
        max_versions: versions,
        now_ms: crate::cell::now_ms(),
        raw: false,
    }
}

fn columns_of(columns: Option<BTreeSet<usize>>) -> Option<BTreeSet<Bytes>> {
    columns.map(|cs| {
        cs.into_iter()
            .map(|q| Bytes::from_static(QUALS[q].as_bytes()))
            .collect()
    })
}

fn arb_cells() -> impl proptest::strategy::Strategy<Value = RawCells> {
    proptest::collection::vec(
        (
            0usize..6,
            0usize..3,
            0u64..8,
            0usize..16,
            1u64..60,
            0usize..3,
        ),
        0..60,
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 600,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Wherever its cells lie (the MemStore, one or two files, with or without bloom
    /// filters), a row read by `read_row_plain` gives what the general path gives, for any
    /// versions, TTL, read point, time range and column selection; and in a family without
    /// TTL it answers exactly the rows whose cells are all plain puts, in one source or
    /// several.
    #[test]
    fn plain_point_reads_agree_with_the_general_path(
        cells in arb_cells(),
        blooms in (proptest::bool::ANY, proptest::bool::ANY),
        (max_versions, ttl) in (1u32..4, proptest::bool::weighted(0.2)),
        (read_point, min_ts, span, versions) in (0u64..42, 0u64..4, 1u64..10, 1u32..4),
        columns in proptest::option::of(proptest::collection::btree_set(0usize..3, 0..3)),
        row in 0usize..6,
    ) {
        let case = build(cells, blooms, max_versions, ttl);
        let spec = spec_of(read_point, min_ts, span, versions);
        let columns = columns_of(columns);
        let row_key = Bytes::from_static(ROWS[row].as_bytes());
        let want = general(&case.store, &row_key, columns.as_ref(), &spec);
        let mut got = vec![];
        let answered = case
            .store
            .read_row_plain(&row_key, columns.as_ref(), &spec, true, &mut got)
            .unwrap();
        if answered {
            proptest::prop_assert_eq!(&got, &want);
        } else {
            proptest::prop_assert!(got.is_empty());
        }
        let [mem, older, newer] = &case.parts;
        let plain = [mem, older, newer]
            .iter()
            .flat_map(|p| p.iter())
            .filter(|c| c.key.row == row_key)
            .all(|c| c.key.kind == CellType::Put);
        // Wherever they lie, a row of plain puts in a family without TTL is answered here
        // (unless it has more cells than a plain read takes on).
        let row_cells = [mem, older, newer]
            .iter()
            .flat_map(|p| p.iter())
            .filter(|c| c.key.row == row_key)
            .count();
        if !case.ttl && row_cells <= crate::storage::matcher::PLAIN_ROW_MAX_SKIPPED as usize {
            proptest::prop_assert_eq!(answered, plain, "plain row answered?");
        }
    }

    /// A forward scan of the store (whose rows one file holds whole are read straight off
    /// the file's blocks) returns, row by row, what the general path returns for each row,
    /// and what a reverse scan (which always takes the general path) returns reversed.
    #[test]
    fn scans_agree_with_the_general_path(
        cells in arb_cells(),
        blooms in (proptest::bool::ANY, proptest::bool::ANY),
        (max_versions, ttl) in (1u32..4, proptest::bool::weighted(0.2)),
        (read_point, min_ts, span, versions) in (0u64..42, 0u64..4, 1u64..10, 1u32..4),
        columns in proptest::option::of(proptest::collection::btree_set(0usize..3, 0..3)),
    ) {
        let case = build(cells, blooms, max_versions, ttl);
        let spec = spec_of(read_point, min_ts, span, versions);
        let columns = columns_of(columns);
        let store = Arc::new(case.store);
        let mut want = Vec::new();
        for row in ROWS {
            let row = Bytes::from_static(row.as_bytes());
            let cells = general(&store, &row, columns.as_ref(), &spec);
            if !cells.is_empty() {
                want.push(crate::cell::RowResult { row, cells });
            }
        }
        let scan = |reverse: bool| {
            let range = crate::keys::RowRange {
                lo: std::ops::Bound::Unbounded,
                hi: std::ops::Bound::Unbounded,
            };
            let stores = vec![(store.clone(), columns.clone())];
            let mut s = crate::region::scanner::RegionScanner::new(stores, range, reverse, spec.clone(), true)
                .unwrap();
            let mut rows = Vec::new();
            while let Some(r) = s.next_row().unwrap() {
                rows.push(r);
            }
            rows
        };
        proptest::prop_assert_eq!(&scan(false), &want);
        let mut reversed = scan(true);
        reversed.reverse();
        proptest::prop_assert_eq!(&reversed, &want);
    }
}

/// A row that turns out not to be plain after some of its cells were read off the block
/// (a marker below two puts, across tiny blocks) is read again by the general path from
/// where the plain read began: nothing it stepped over is lost.
#[test]
fn a_row_that_aborts_the_plain_read_loses_no_cell() {
    // (row, qualifier, ts, kind, seq, place): row r1 in the older file only.
    let cells = vec![
        (1, 1, 7, 0, 9, 1),
        (1, 1, 6, 0, 8, 1),
        (1, 1, 5, 0, 7, 1),
        (1, 1, 3, 2, 6, 1),
        (1, 2, 4, 0, 5, 1),
        (0, 1, 1, 0, 1, 1),
        (2, 1, 1, 0, 2, 1),
    ];
    let case = build(cells, (true, true), 3, false);
    let spec = spec_of(100, 0, 9, 3);
    let range = crate::keys::RowRange {
        lo: std::ops::Bound::Unbounded,
        hi: std::ops::Bound::Unbounded,
    };
    let store = Arc::new(case.store);
    let mut s =
        crate::region::scanner::RegionScanner::new(vec![(store, None)], range, false, spec, true)
            .unwrap();
    let mut got = Vec::new();
    while let Some(r) = s.next_row().unwrap() {
        for c in r.cells {
            got.push((String::from_utf8_lossy(&c.row).into_owned(), c.timestamp));
        }
    }
    let want: Vec<(String, u64)> = [
        ("r0", 1),
        ("r1", 7),
        ("r1", 6),
        ("r1", 5),
        ("r1", 4),
        ("r2", 1),
    ]
    .iter()
    .map(|(r, ts)| (r.to_string(), *ts))
    .collect();
    assert_eq!(got, want);
}
