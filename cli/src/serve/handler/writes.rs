//! The write methods of the Thrift1 service: `mutateRow*`, `mutateRows*`, `deleteAll*`,
//! `atomicIncrement`, `increment`, `incrementRows`, `append` and `checkAndPut`.
//!
//! Invariants, as the reference server's: a row's mutations become one Put and one
//! Delete; `mutateRow` applies the delete first, `mutateRows` every put first; a mutation
//! with `writeToWAL` false skips the WAL; counters are 8-byte big-endian values.

use super::Handler;
use crate::serve::convert::*;
use basalt_core::client::Backend;
use basalt_core::client::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Delete, Increment, Put, RowResult,
};
use basalt_core::filter::CompareOp;
use basalt_core::Durability;
use basalt_thrift::hbase::{BatchMutation, Mutation, TAppend, TCell, TIncrement};

fn durability(m: &Mutation) -> Durability {
    if m.write_to_w_a_l == Some(false) {
        Durability::SkipWal
    } else {
        Durability::default()
    }
}

/// A row's mutations split as HBase's `mutateRowsTs` does: one Put and one Delete.
/// `strict`: a put without a qualifier is an error (`mutateRows`), else it is skipped
/// (`mutateRow`, which only logs it).
fn split_mutations(
    row: &[u8],
    mutations: &[Mutation],
    ts: i64,
    strict: bool,
) -> thrift::Result<(Option<Put>, Option<Delete>)> {
    let ts = write_ts(ts)?;
    let mut put = Put::new(row).timestamp(ts);
    let mut del = Delete::new(row).timestamp(ts);
    let (mut any_put, mut any_del) = (false, false);
    for m in mutations {
        let col = m.column.as_deref().unwrap_or_default();
        let (fam, q) = parse_column(col);
        if m.is_delete == Some(true) {
            del = match q {
                None => del.add_family(fam),
                Some(q) => del.add_columns(fam, q),
            }
            .durability(durability(m));
            any_del = true;
        } else {
            let Some(q) = q else {
                if strict {
                    return Err(illegal("Invalid famAndQf provided."));
                }
                tracing::warn!("mutateRow: put without a qualifier skipped");
                continue;
            };
            put = put
                .add_column(fam, q, m.value.as_deref().unwrap_or_default())
                .durability(durability(m));
            any_put = true;
        }
    }
    Ok((any_put.then_some(put), any_del.then_some(del)))
}

fn check_batch(outcomes: Vec<basalt_core::Result<BatchOutcome>>) -> thrift::Result<()> {
    for o in outcomes {
        o.map_err(engine_or_illegal)?;
    }
    Ok(())
}

/// `mutateRow`/`mutateRowTs`.
pub(super) fn mutate_row<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    row: &[u8],
    ms: &[Mutation],
    ts: i64,
) -> thrift::Result<()> {
    let (_, t) = h.table(table)?;
    let (put, del) = split_mutations(row, ms, ts, false)?;
    // HBase's mutateRowTs applies the delete first, then the put.
    if let Some(d) = del {
        h.run(t.delete(d)).map_err(engine_or_illegal)?;
    }
    if let Some(p) = put {
        h.run(t.put(p)).map_err(engine_or_illegal)?;
    }
    Ok(())
}

/// `mutateRows`/`mutateRowsTs`.
pub(super) fn mutate_rows<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    batches: &[BatchMutation],
    ts: i64,
) -> thrift::Result<()> {
    let (_, t) = h.table(table)?;
    let (mut puts, mut dels) = (Vec::new(), Vec::new());
    for b in batches {
        let row = b.row.as_deref().unwrap_or_default();
        let ms = b.mutations.as_deref().unwrap_or_default();
        let (put, del) = split_mutations(row, ms, ts, true)?;
        puts.extend(put.map(BatchOp::Put));
        dels.extend(del.map(BatchOp::Delete));
    }
    // HBase's mutateRowsTs applies every put first, then every delete.
    if !puts.is_empty() {
        check_batch(h.run(t.batch(puts)).map_err(engine_or_illegal)?)?;
    }
    if !dels.is_empty() {
        check_batch(h.run(t.batch(dels)).map_err(engine_or_illegal)?)?;
    }
    Ok(())
}

fn delete<B: Backend>(h: &Handler<B>, table: &[u8], d: Delete) -> thrift::Result<()> {
    let (_, t) = h.table(table)?;
    h.run(t.delete(d)).map_err(engine)
}

/// `deleteAll`/`deleteAllTs`: one column (or family) of a row, at or before `ts`.
pub(super) fn delete_column<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    row: &[u8],
    col: &[u8],
    ts: i64,
) -> thrift::Result<()> {
    let d = Delete::new(row).timestamp(write_ts(ts).map_err(|_| io_error("bad timestamp"))?);
    let d = match parse_column(col) {
        (fam, None) => d.add_family(fam),
        (fam, Some(q)) => d.add_columns(fam, q),
    };
    delete(h, table, d)
}

/// `deleteAllRow` (`ts` `None`) / `deleteAllRowTs`: a whole row.
pub(super) fn delete_row<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    row: Vec<u8>,
    ts: Option<i64>,
) -> thrift::Result<()> {
    let d = match ts {
        None => Delete::new(row),
        Some(ts) => {
            let ts = write_ts(ts).map_err(|_| io_error("bad timestamp"))?;
            Delete::new(row).timestamp(ts)
        }
    };
    delete(h, table, d)
}

/// `atomicIncrement`: the counter's new value.
pub(super) fn increment<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    row: &[u8],
    col: &[u8],
    by: i64,
) -> thrift::Result<i64> {
    let (_, t) = h.table(table)?;
    let (fam, q) = parse_column(col);
    let q = q.unwrap_or_default();
    let r = h
        .run(t.increment(Increment::new(row).add_column(fam, q, by)))
        .map_err(engine_or_illegal)?;
    let v = r
        .value(fam, q)
        .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
        .ok_or_else(|| io_error("the increment returned no 8-byte counter"))?;
    Ok(i64::from_be_bytes(v))
}

/// `increment`, and each of `incrementRows`: one `TIncrement`.
pub(super) fn increment_one<B: Backend>(h: &Handler<B>, inc: TIncrement) -> thrift::Result<i64> {
    let (t, row, col) = (
        inc.table.unwrap_or_default(),
        inc.row.unwrap_or_default(),
        inc.column.unwrap_or_default(),
    );
    increment(h, &t, &row, &col, inc.ammount.unwrap_or(0))
}

/// `append`: the appended cells.
pub(super) fn append<B: Backend>(h: &Handler<B>, append: TAppend) -> thrift::Result<Vec<TCell>> {
    let (tn, row) = (
        append.table.unwrap_or_default(),
        append.row.unwrap_or_default(),
    );
    let (columns, values) = (
        append.columns.unwrap_or_default(),
        append.values.unwrap_or_default(),
    );
    if columns.len() != values.len() {
        return Err(io_error("append: as many values as columns are needed"));
    }
    let mut a = Append::new(&row);
    for (c, v) in columns.iter().zip(&values) {
        let (fam, q) = parse_column(c);
        a = a.add_column(fam, q.unwrap_or_default(), v);
    }
    let (_, t) = h.table(&tn)?;
    let r: RowResult = h.run(t.append(a)).map_err(engine)?;
    Ok(cells(&r))
}

/// `checkAndPut`: puts `mput` when `column` holds `value`; whether it did.
pub(super) fn check_and_put<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    row: &[u8],
    column: &[u8],
    value: &[u8],
    mput: Mutation,
) -> thrift::Result<bool> {
    let (fam, q) = parse_column(column);
    let check =
        CheckAndMutate::new(row, fam, q.unwrap_or_default()).if_value(CompareOp::Equal, value);
    let (put, _) = split_mutations(row, std::slice::from_ref(&mput), i64::MAX, true)?;
    let Some(put) = put.filter(|_| mput.is_delete != Some(true)) else {
        return Err(illegal("checkAndPut needs a put mutation"));
    };
    let (_, t) = h.table(table)?;
    h.run(t.check_and_mutate(check.then_put(put)))
        .map_err(engine_or_illegal)
}
