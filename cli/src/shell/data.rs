//! Data commands: `put`, `get`, `scan`, `count`, `delete`, `deleteall`, `incr`,
//! `get_counter`, `append`, printed as HBase's shell prints them (`COLUMN  CELL`,
//! `ROW  COLUMN+CELL`, bytes outside printable ASCII as `\xNN`, `N row(s)`).

use super::args::{as_bool, as_int, as_string, column, columns, key_name, Args};
use super::binary::{to_bytes_binary, to_string_binary};
use super::ddl::table_arg;
use super::parse::Value;
use super::target::Target;
use super::ShellError;
use crate::progress;
use basalt_core::client::{Append, Delete, Get, Increment, Put, Scan, TimeRange};
use basalt_core::{Cell, CellType, Connection, Filter};
use futures::TryStreamExt;
use std::sync::atomic::{AtomicBool, Ordering};

fn ts_arg(a: &Args<'_>, i: usize) -> Result<Option<u64>, ShellError> {
    match a.opt_int(i, "the timestamp")? {
        None => Ok(None),
        Some(t) if t >= 0 => Ok(Some(t as u64)),
        Some(t) => Err(a.usage(format!("timestamp {t} is negative"))),
    }
}

fn col_arg(a: &Args<'_>, i: usize) -> Result<(Vec<u8>, Vec<u8>), ShellError> {
    let spec = a.string(i, "the column ('family:qualifier')")?;
    let (f, q) = column(&spec);
    Ok((f, q.unwrap_or_default()))
}

pub(super) async fn put(conn: &Connection, a: &Args<'_>) -> Result<(), ShellError> {
    a.count(4, 5)?;
    let name = table_arg(a, 0)?;
    let row = a.bytes(1, "the row key")?;
    let (f, q) = col_arg(a, 2)?;
    let value = a.bytes(3, "the value")?;
    let p = match ts_arg(a, 4)? {
        Some(ts) => Put::new(&row).add_column_ts(f, q, ts, value),
        None => Put::new(&row).add_column(f, q, value),
    };
    Target::open(conn, name).await?.put(p).await?;
    Ok(())
}

/// Read options common to `get` and `scan`.
#[derive(Default)]
struct ReadOpts {
    columns: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    range: Option<TimeRange>,
    versions: Option<u32>,
    filter: Option<Filter>,
}

fn read_opt(a: &Args<'_>, key: &str, v: &Value, o: &mut ReadOpts) -> Result<bool, ShellError> {
    match key {
        "COLUMN" | "COLUMNS" => {
            let cols = columns(v)
                .ok_or_else(|| a.usage(format!("{key} must be a string or an array of strings")))?;
            o.columns.extend(cols.iter().map(|c| column(c)));
        }
        "TIMESTAMP" => match as_int(v) {
            Some(ts) if ts >= 0 => o.range = Some(TimeRange::at(ts as u64)),
            _ => return Err(a.usage("TIMESTAMP must be a non-negative integer")),
        },
        "TIMERANGE" => {
            let bad = || a.usage("TIMERANGE must be [min, max] with 0 <= min < max");
            let Value::Array(items) = v else {
                return Err(bad());
            };
            let [lo, hi] = items.as_slice() else {
                return Err(bad());
            };
            match (as_int(lo), as_int(hi)) {
                (Some(lo), Some(hi)) if lo >= 0 && hi > lo => {
                    o.range = Some(TimeRange::new(lo as u64, hi as u64)?)
                }
                _ => return Err(bad()),
            }
        }
        "VERSIONS" => match as_int(v) {
            Some(n) if n >= 1 && n <= u32::MAX as i64 => o.versions = Some(n as u32),
            _ => return Err(a.usage("VERSIONS must be a positive integer")),
        },
        "FILTER" => {
            let text = as_string(v).ok_or_else(|| {
                a.usage("FILTER must be a filter-language string, e.g. \"PrefixFilter('r')\"")
            })?;
            o.filter = Some(Filter::parse(&text)?);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn cell_text(c: &Cell) -> String {
    if c.kind == CellType::Put {
        format!(
            "timestamp={}, value={}",
            c.timestamp,
            to_string_binary(&c.value)
        )
    } else {
        format!("timestamp={}, type={:?}", c.timestamp, c.kind)
    }
}

fn col_text(c: &Cell) -> String {
    format!(
        "{}:{}",
        to_string_binary(&c.family),
        to_string_binary(&c.qualifier)
    )
}

pub(super) async fn get(
    conn: &Connection,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(2, 3)?;
    let t = Target::open(conn, table_arg(a, 0)?).await?;
    let row = a.bytes(1, "the row key")?;
    let mut o = ReadOpts::default();
    match a.vals.get(2) {
        None => {}
        Some(Value::Hash(pairs)) => {
            for (k, v) in pairs {
                let key = key_name(k).unwrap_or_default();
                if !read_opt(a, &key, v, &mut o)? {
                    return Err(a.usage(format!("unknown option {k}")));
                }
            }
        }
        Some(v) => {
            let cols = columns(v).ok_or_else(|| {
                a.usage("the third argument is a column, an array of columns or a hash of options")
            })?;
            o.columns.extend(cols.iter().map(|c| column(c)));
        }
    }
    let mut g = Get::new(&row);
    for (f, q) in &o.columns {
        g = match q {
            Some(q) => g.add_column(f, q),
            None => g.add_family(f),
        };
    }
    if let Some(r) = o.range {
        g = g.time_range(r);
    }
    if let Some(n) = o.versions {
        g = g.max_versions(n);
    }
    if let Some(f) = o.filter {
        g = g.filter(f);
    }
    let r = t.get(g).await?;
    out.push_str(&format!("{:<35}{}\n", "COLUMN", "CELL"));
    for c in &r.cells {
        out.push_str(&format!(" {:<34}{}\n", col_text(c), cell_text(c)));
    }
    out.push_str(&format!("{} row(s)\n", r.cells.len()));
    Ok(())
}

/// One row as `scan` prints it: a `ROW  column=f:q, timestamp=..., value=...` line a cell.
pub(super) fn print_row(r: &basalt_core::client::RowResult, out: &mut String) {
    for c in &r.cells {
        out.push_str(&format!(
            " {:<34}column={}, {}\n",
            to_string_binary(&r.row),
            col_text(c),
            cell_text(c)
        ));
    }
}

fn build_scan(a: &Args<'_>) -> Result<Scan, ShellError> {
    let mut s = Scan::new();
    let mut o = ReadOpts::default();
    match a.vals.get(1) {
        None => {}
        Some(Value::Hash(pairs)) => {
            for (k, v) in pairs {
                let key = key_name(k).unwrap_or_default();
                if read_opt(a, &key, v, &mut o)? {
                    continue;
                }
                let text = || {
                    as_string(v)
                        .map(|s| to_bytes_binary(&s))
                        .ok_or_else(|| a.usage(format!("{key} must be a string")))
                };
                let flag =
                    || as_bool(v).ok_or_else(|| a.usage(format!("{key} must be true or false")));
                s = match key.as_str() {
                    "STARTROW" => s.start_row(text()?),
                    "STOPROW" | "ENDROW" => s.stop_row(text()?),
                    "ROWPREFIXFILTER" => s.with_prefix(text()?),
                    "REVERSED" => s.reversed(flag()?),
                    "RAW" => s.raw(flag()?),
                    "LIMIT" => match as_int(v) {
                        Some(n) if n >= 1 => s.limit(n as usize),
                        _ => return Err(a.usage("LIMIT must be a positive integer")),
                    },
                    "CACHE" | "CACHE_BLOCKS" => s,
                    _ => return Err(a.usage(format!("unknown option {k}"))),
                };
            }
        }
        Some(v) => return Err(a.usage(format!("the options are a hash, not {}", v.kind()))),
    }
    for (f, q) in &o.columns {
        s = match q {
            Some(q) => s.add_column(f, q),
            None => s.add_family(f),
        };
    }
    if let Some(r) = o.range {
        s = s.time_range(r);
    }
    if let Some(n) = o.versions {
        s = s.max_versions(n);
    }
    if let Some(f) = o.filter {
        s = s.filter(f);
    }
    Ok(s)
}

pub(super) async fn scan(
    conn: &Connection,
    a: &Args<'_>,
    stop: &AtomicBool,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(1, 2)?;
    let name = table_arg(a, 0)?;
    let scan = build_scan(a)?;
    let t = Target::open(conn, name).await?;
    let mut rows = t.scan(scan)?;
    out.push_str(&format!("{:<35}{}\n", "ROW", "COLUMN+CELL"));
    let mut n = 0;
    while let Some(r) = rows.try_next().await? {
        if stop.load(Ordering::Relaxed) {
            return Err(ShellError::Interrupted(format!("{n} row(s) scanned")));
        }
        n += 1;
        print_row(&r, out);
    }
    out.push_str(&format!("{n} row(s)\n"));
    Ok(())
}

pub(super) async fn count(
    conn: &Connection,
    a: &Args<'_>,
    stop: &AtomicBool,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(1, 2)?;
    // INTERVAL and CACHE are count's own; the rest are scan options (FILTER, STARTROW, ...).
    let mut interval: u64 = 1000;
    let mut scan_opts = Vec::new();
    match a.vals.get(1) {
        None => {}
        Some(Value::Hash(pairs)) => {
            for (k, v) in pairs {
                match key_name(k).as_deref() {
                    Some("INTERVAL") => match as_int(v) {
                        Some(n) if n >= 1 => interval = n as u64,
                        _ => return Err(a.usage("INTERVAL must be a positive integer")),
                    },
                    Some("CACHE") => {}
                    _ => scan_opts.push((k.clone(), v.clone())),
                }
            }
        }
        Some(v) => return Err(a.usage(format!("the options are a hash, not {}", v.kind()))),
    }
    let vals = [a.vals[0].clone(), Value::Hash(scan_opts)];
    let scan = build_scan(&Args {
        cmd: a.cmd,
        vals: &vals,
    })?;
    let t = Target::open(conn, table_arg(a, 0)?).await?;
    let mut rows = t.scan(scan)?;
    let bar = progress::counter("counting rows");
    let mut n: u64 = 0;
    while let Some(r) = rows.try_next().await? {
        if stop.load(Ordering::Relaxed) {
            bar.finish_and_clear();
            return Err(ShellError::Interrupted(format!("{n} row(s) counted")));
        }
        n += 1;
        bar.inc(1);
        if n.is_multiple_of(interval) {
            out.push_str(&format!(
                "Current count: {n}, row: {}\n",
                to_string_binary(&r.row)
            ));
        }
    }
    bar.finish_and_clear();
    out.push_str(&format!("{n} row(s)\n"));
    Ok(())
}

pub(super) async fn delete(conn: &Connection, a: &Args<'_>) -> Result<(), ShellError> {
    if a.cmd == "delete" {
        a.count(3, 4)?;
    } else {
        a.count(2, 4)?;
    }
    let t = Target::open(conn, table_arg(a, 0)?).await?;
    let row = a.bytes(1, "the row key")?;
    let ts = ts_arg(a, 3)?;
    let d = match a.vals.get(2) {
        None => Delete::new(&row),
        Some(_) => {
            let spec = a.string(2, "the column ('family:qualifier')")?;
            match (column(&spec), ts) {
                ((f, Some(q)), Some(ts)) => Delete::new(&row).add_columns_ts(f, q, ts),
                ((f, Some(q)), None) => Delete::new(&row).add_columns(f, q),
                ((f, None), Some(ts)) => Delete::new(&row).add_family_ts(f, ts),
                ((f, None), None) => Delete::new(&row).add_family(f),
            }
        }
    };
    t.delete(d).await?;
    Ok(())
}

fn counter_value(a: &Args<'_>, v: Option<&bytes::Bytes>) -> Result<i64, ShellError> {
    match v {
        None => Ok(0),
        Some(b) => match <[u8; 8]>::try_from(b.as_ref()) {
            Ok(arr) => Ok(i64::from_be_bytes(arr)),
            Err(_) => Err(a.usage(format!(
                "the cell holds {} bytes, not an 8-byte counter",
                b.len()
            ))),
        },
    }
}

pub(super) async fn counter(
    conn: &Connection,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let t = Target::open(conn, table_arg(a, 0)?).await?;
    let row = a.bytes(1, "the row key")?;
    let (f, q) = col_arg(a, 2)?;
    let value = if a.cmd == "incr" {
        a.count(3, 4)?;
        let n = a.opt_int(3, "the increment")?.unwrap_or(1);
        let r = t
            .increment(Increment::new(&row).add_column(&f, &q, n))
            .await?;
        counter_value(a, r.value(&f, &q))?
    } else {
        a.count(3, 3)?;
        let r = t.get(Get::new(&row).add_column(&f, &q)).await?;
        if r.value(&f, &q).is_none() {
            return Err(a.usage("no counter at that row and column"));
        }
        counter_value(a, r.value(&f, &q))?
    };
    out.push_str(&format!("COUNTER VALUE = {value}\n"));
    Ok(())
}

pub(super) async fn append(
    conn: &Connection,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(4, 4)?;
    let t = Target::open(conn, table_arg(a, 0)?).await?;
    let row = a.bytes(1, "the row key")?;
    let (f, q) = col_arg(a, 2)?;
    let v = a.bytes(3, "the value")?;
    let r = t.append(Append::new(&row).add_column(&f, &q, v)).await?;
    let now = r
        .value(&f, &q)
        .map(|b| to_string_binary(b))
        .unwrap_or_default();
    out.push_str(&format!("CURRENT VALUE = {now}\n"));
    Ok(())
}
