//! Tests of running a filter: how return codes and hints of lists and families become
//! skips within a row, and the row hints of lists.

use super::*;
use crate::filter::Comparator;

fn cell(row: &str, fam: &str, q: &str, ts: u64, v: &str) -> Cell {
    Cell {
        row: Bytes::copy_from_slice(row.as_bytes()),
        family: Bytes::copy_from_slice(fam.as_bytes()),
        qualifier: Bytes::copy_from_slice(q.as_bytes()),
        timestamp: ts,
        kind: CellType::Put,
        value: Bytes::copy_from_slice(v.as_bytes()),
    }
}

/// Runs one row through `f`; the qualifiers (with timestamps) kept.
fn one_row(f: &Filter, cells: &[Cell]) -> Vec<String> {
    let mut exec = FilterExec::new(f, false).unwrap();
    assert_eq!(exec.begin_row(&cells[0].row), RowStart::Read);
    let mut out = Vec::new();
    for c in cells {
        exec.offer(c.clone(), &mut out);
    }
    if !exec.end_row(&mut out) {
        return Vec::new();
    }
    out.iter()
        .map(|c| {
            format!(
                "{}:{}@{}",
                String::from_utf8_lossy(&c.family),
                String::from_utf8_lossy(&c.qualifier),
                c.timestamp
            )
        })
        .collect()
}

fn row() -> Vec<Cell> {
    vec![
        cell("r", "a", "a1", 2, "x"),
        cell("r", "a", "a1", 1, "y"),
        cell("r", "a", "b1", 1, "x"),
        cell("r", "a", "c", 1, "x"),
        cell("r", "b", "a2", 1, "y"),
        cell("r", "b", "b2", 1, "x"),
    ]
}

#[test]
fn next_row_skips_only_the_rest_of_the_family() {
    let got = one_row(&Filter::column_prefix("a"), &row());
    assert_eq!(got, vec!["a:a1@2", "a:a1@1", "b:a2@1"]);
}

#[test]
fn and_takes_the_farther_skip_and_or_the_nearer() {
    let value_x = Filter::Value(CompareOp::Equal, Comparator::binary("x"));
    let and = Filter::all([Filter::column_prefix("b"), value_x.clone()]);
    assert_eq!(one_row(&and, &row()), vec!["a:b1@1", "b:b2@1"]);
    let or = Filter::any([Filter::column_prefix("b"), value_x]);
    assert_eq!(
        one_row(&or, &row()),
        vec!["a:a1@2", "a:b1@1", "a:c@1", "b:b2@1"]
    );
    // As in HBase, every filter of an AND sees the cell: the count includes a:b1, which
    // the prefix refuses, so b:a2 is the third column and out.
    let count = Filter::all([Filter::ColumnCountGet(2), Filter::column_prefix("a")]);
    assert_eq!(one_row(&count, &row()), vec!["a:a1@2"]);
}

#[test]
fn row_hints_of_lists() {
    let f = Filter::all([Filter::prefix("m"), Filter::fuzzy_row([("?z", [1u8, 0])])]);
    let mut exec = FilterExec::new(&f, false).unwrap();
    // AND: the farther of the two hints ("m" from the prefix, "az" from the fuzzy rule).
    assert_eq!(
        exec.begin_row(b"a"),
        RowStart::Skip(Some(Bytes::from_static(b"m")))
    );
    let f = Filter::any([Filter::prefix("m"), Filter::fuzzy_row([("?z", [1u8, 0])])]);
    let mut exec = FilterExec::new(&f, false).unwrap();
    assert_eq!(
        exec.begin_row(b"a"),
        RowStart::Skip(Some(Bytes::from_static(b"az")))
    );
    // A kid without a hint leaves the OR without one.
    let f = Filter::any([
        Filter::prefix("m"),
        Filter::Row(CompareOp::Equal, Comparator::binary("zz")),
    ]);
    let mut exec = FilterExec::new(&f, false).unwrap();
    assert_eq!(exec.begin_row(b"a"), RowStart::Skip(None));
    // Past the prefix: done.
    let mut exec = FilterExec::new(&Filter::prefix("m"), false).unwrap();
    assert_eq!(exec.begin_row(b"n"), RowStart::Done);
    let mut exec = FilterExec::new(&Filter::prefix("m"), true).unwrap();
    assert_eq!(
        exec.begin_row(b"n"),
        RowStart::Skip(Some(Bytes::from_static(b"n")))
    );
    assert_eq!(exec.begin_row(b"mz"), RowStart::Read);
    assert_eq!(exec.begin_row(b"l"), RowStart::Done);
}
