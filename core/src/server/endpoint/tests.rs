//! Unit tests of the endpoint fan-out.
#![allow(clippy::unwrap_used)]
use super::*;

fn inc(s: &str) -> Bound<Bytes> {
    Bound::Included(Bytes::copy_from_slice(s.as_bytes()))
}
fn exc(s: &str) -> Bound<Bytes> {
    Bound::Excluded(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn intersect_takes_the_tighter_bounds() {
    let a = RowRange {
        lo: inc("b"),
        hi: exc("m"),
    };
    let b = RowRange {
        lo: exc("b"),
        hi: Bound::Unbounded,
    };
    let c = a.intersect(&b);
    assert_eq!(c.lo, exc("b"));
    assert_eq!(c.hi, exc("m"));
    let d = a.intersect(&RowRange {
        lo: Bound::Unbounded,
        hi: inc("m"),
    });
    assert_eq!(d.hi, exc("m"));
    assert_eq!(d.lo, inc("b"));
    assert!(!d.is_empty());
    let e = a.intersect(&RowRange {
        lo: inc("m"),
        hi: Bound::Unbounded,
    });
    assert!(e.is_empty());
    assert!(RowRange {
        lo: exc("a"),
        hi: Bound::Excluded(Bytes::from_static(b"a\0")),
    }
    .is_empty());
    assert!(RowRange::all().intersect(&RowRange::all()) == RowRange::all());
}

// ---- column reads (`RegionView::read_columns`) against the scanner ------------------------

use crate::client::{Connection, Delete, Put};
use crate::schema::split::SplitPolicy;
use crate::schema::{ColumnFamilyDescriptor, TableDescriptor};
use crate::{Config, PreSplit};
use proptest::prelude::*;

fn key(i: usize) -> String {
    format!("r{i:04}")
}

/// The columns a test may ask for: two of `f` with data, one of `g`, one nobody writes.
const COLUMNS: [(&str, &str); 4] = [("f", "a"), ("f", "b"), ("g", "d"), ("f", "zz")];

/// A row as a column read gives it.
type ColumnValues = (Vec<u8>, Vec<Option<Vec<u8>>>);

/// What is done to the table before the reads.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Flushed and major-compacted: one file per store, no delete marker.
    Compacted,
    /// Deletes flushed, then compacted keeping the markers: one file holding them.
    MarkersInOneFile,
    /// Flushed, deletes left in the MemStore.
    MemStoreDeletes,
    /// Nothing flushed: every row in the MemStore.
    MemStoreOnly,
    /// Two flushed files (the second re-writes some rows), deletes flushed into a third.
    SeveralFiles,
}

/// How a generated row is deleted (if it is).
#[derive(Debug, Clone, Copy)]
enum Del {
    None,
    NewestA,
    ColumnA,
    FamilyF,
    Row,
    /// Every version of f:b (its marker sorts after f:a's cells).
    ColumnB,
}

/// Every page of a column read of `rows` through `view`, `page` rows at a time.
fn read_pages(
    view: &RegionView<'_>,
    columns: &[(&str, &str)],
    rows: &RowRange,
    page: usize,
) -> Vec<ColumnValues> {
    let mut out = Vec::new();
    let mut range = rows.clone();
    loop {
        let before = out.len();
        let last = view
            .read_columns(columns, &range, page, |r| {
                assert_eq!(r.columns(), columns.len());
                out.push((
                    r.row().to_vec(),
                    r.values().map(|v| v.map(<[u8]>::to_vec)).collect(),
                ));
                true
            })
            .unwrap();
        assert!(
            out.len() - before <= page,
            "a page of {} rows",
            out.len() - before
        );
        match last {
            None => return out,
            Some(last) => {
                assert_eq!(out.last().map(|r| r.0.as_slice()), Some(last.as_ref()));
                range.lo = Bound::Excluded(last);
            }
        }
    }
}

/// The same rows as a scan of the columns gives them.
fn scanned(view: &RegionView<'_>, columns: &[(&str, &str)], rows: &RowRange) -> Vec<ColumnValues> {
    let mut scan = Scan::new();
    for (f, q) in columns {
        scan = scan.add_column(f, q);
    }
    if let Bound::Included(lo) = &rows.lo {
        scan = scan.start_row(lo);
    }
    if let Bound::Excluded(hi) = &rows.hi {
        scan = scan.stop_row(hi);
    }
    let mut out = Vec::new();
    let mut scanner = view.scan(&scan).unwrap();
    while let Some(r) = scanner.next_row().unwrap() {
        let values = columns
            .iter()
            .map(|(f, q)| r.value(f, q).map(|v| v.to_vec()))
            .collect();
        out.push((r.row.to_vec(), values));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A paged column read gives exactly the rows and values of a scan of the columns, for
    /// rows with several versions and columns in two families, delete markers (in the
    /// MemStore, in a flushed file, in the one compacted file), several files, MemStore-only
    /// data, split regions, any page size and range; and it reads in place where that is
    /// exact (one compacted file, the columns of one family).
    #[test]
    fn column_reads_equal_the_scanner(
        rows in proptest::collection::btree_map(
            0usize..200,
            (1u64..4, proptest::collection::vec(any::<bool>(), 3), 0u8..10),
            1..100,
        ),
        splits in proptest::collection::btree_set(0usize..200, 0..3),
        shape in prop_oneof![
            Just(Shape::Compacted),
            Just(Shape::MarkersInOneFile),
            Just(Shape::MemStoreDeletes),
            Just(Shape::MemStoreOnly),
            Just(Shape::SeveralFiles),
        ],
        picks in proptest::collection::vec(0usize..4, 1..4),
        page in 1usize..40,
        lo in proptest::option::of(0usize..200),
        len in proptest::option::of(0usize..200),
    ) {
        let columns: Vec<(&str, &str)> = picks.iter().map(|i| COLUMNS[*i]).collect();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let conn = Connection::open_with(
                Config::new(dir.path()).split_policy(SplitPolicy::Disabled),
            )
            .await
            .unwrap();
            let mut f = ColumnFamilyDescriptor::new("f").block_size(1024).max_versions(3);
            if matches!(shape, Shape::MarkersInOneFile) {
                f = f.keep_deleted_cells(true);
            }
            let desc = TableDescriptor::new(TableName::parse("t").unwrap())
                .family(f)
                .family(ColumnFamilyDescriptor::new("g"));
            let split = if splits.is_empty() {
                PreSplit::None
            } else {
                PreSplit::Keys(splits.iter().map(|i| key(*i).into_bytes()).collect())
            };
            conn.admin().create_table_with_splits(desc, split).await.unwrap();
            let t = conn.table("t").unwrap();
            for (i, (versions, has, _)) in &rows {
                for v in 0..*versions {
                    let ts = 1_000_000 + v;
                    let mut p = Put::new(key(*i)).add_column_ts("f", "o", ts, "other");
                    for (c, on) in has.iter().enumerate() {
                        let (fam, q) = COLUMNS[c];
                        if *on {
                            p = p.add_column_ts(fam, q, ts, format!("{i}.{q}.{v}"));
                        }
                    }
                    t.put(p).await.unwrap();
                }
            }
            if !matches!(shape, Shape::MemStoreOnly) {
                conn.admin().flush(t.name()).await.unwrap();
            }
            if matches!(shape, Shape::SeveralFiles) {
                for i in rows.keys().step_by(3) {
                    t.put(Put::new(key(*i)).add_column("f", "a", "rewritten")).await.unwrap();
                }
                conn.admin().flush(t.name()).await.unwrap();
            }
            if !matches!(shape, Shape::Compacted) {
                for (i, (_, _, del)) in &rows {
                    let d = Delete::new(key(*i));
                    let d = match [Del::None, Del::None, Del::None, Del::None, Del::None,
                        Del::NewestA, Del::ColumnA, Del::FamilyF, Del::Row, Del::ColumnB]
                        [usize::from(*del)]
                    {
                        Del::None => continue,
                        Del::NewestA => d.add_column("f", "a"),
                        Del::ColumnA => d.add_columns("f", "a"),
                        Del::FamilyF => d.add_family("f"),
                        Del::Row => d,
                        Del::ColumnB => d.add_columns("f", "b"),
                    };
                    t.delete(d).await.unwrap();
                }
            }
            match shape {
                Shape::Compacted => conn.admin().major_compact(t.name()).await.unwrap(),
                Shape::MarkersInOneFile => {
                    conn.admin().flush(t.name()).await.unwrap();
                    conn.admin().major_compact(t.name()).await.unwrap();
                }
                Shape::SeveralFiles => conn.admin().flush(t.name()).await.unwrap(),
                Shape::MemStoreDeletes | Shape::MemStoreOnly => {}
            }
            let rows_range = RowRange {
                lo: lo.map_or(Bound::Unbounded, |l| Bound::Included(Bytes::from(key(l)))),
                hi: len.map_or(Bound::Unbounded, |n| {
                    Bound::Excluded(Bytes::from(key(lo.unwrap_or(0) + n)))
                }),
            };
            let call = conn.endpoint_call("t").unwrap();
            let (mut all, mut in_place) = (0, 0);
            for part in call.parts(&RowRange::all()).unwrap() {
                for (_, (want, got, read_in_place)) in call
                    .run(&part, |view| {
                        let before = view.in_place_reads();
                        let got = read_pages(view, &columns, &rows_range, page);
                        let want = scanned(view, &columns, &rows_range);
                        (want, got, view.in_place_reads() - before)
                    })
                    .unwrap()
                {
                    assert_eq!(got, want, "{shape:?}, columns {columns:?}, page {page}");
                    all += want.len();
                    in_place += read_in_place;
                }
            }
            let one_family = columns.iter().all(|(f, _)| *f == "f");
            if matches!(shape, Shape::Compacted) && one_family && all > 0 {
                assert!(in_place > 0, "a compacted table read nothing in place");
            }
            if matches!(shape, Shape::MemStoreOnly) {
                assert_eq!(in_place, 0, "MemStore data must be read through the scanner");
            }
            drop(call);
            conn.close().await.unwrap();
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_read_of_an_unknown_family_fails_as_a_scan_does() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let desc = TableDescriptor::new(TableName::parse("t").unwrap())
        .family(ColumnFamilyDescriptor::new("f"));
    conn.admin().create_table(desc).await.unwrap();
    let call = conn.endpoint_call("t").unwrap();
    let part = call.parts(&RowRange::all()).unwrap().remove(0);
    let out = call
        .run(&part, |view| {
            let scan = view.scan(&Scan::new().add_column("nope", "q")).map(drop);
            let read = view.read_columns(&[("nope", "q")], &RowRange::all(), 10, |_| true);
            (
                scan.is_err(),
                read.is_err(),
                view.read_columns::<&str>(&[], &RowRange::all(), 1, |_| true),
            )
        })
        .unwrap();
    let (scan_failed, read_failed, nothing) = &out[0].1;
    assert!(*scan_failed && *read_failed);
    assert_eq!(nothing.as_ref().unwrap(), &None);
    drop(call);
    conn.close().await.unwrap();
}
