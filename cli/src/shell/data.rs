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
use basalt_core::client::Backend;
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

/// The table (argument 0, opened) and the row key (argument 1) of a row command.
async fn table_and_row<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
) -> Result<(Target<B>, Vec<u8>), ShellError> {
    let t = Target::open(conn, table_arg(a, 0)?).await?;
    Ok((t, a.bytes(1, "the row key")?))
}

fn col_arg(a: &Args<'_>, i: usize) -> Result<(Vec<u8>, Vec<u8>), ShellError> {
    let spec = a.string(i, "the column ('family:qualifier')")?;
    let (f, q) = column(&spec);
    Ok((f, q.unwrap_or_default()))
}

pub(super) async fn put<B: Backend>(conn: &Connection<B>, a: &Args<'_>) -> Result<(), ShellError> {
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

/// The setters a [`ReadOpts`] applies, which core's `Get` and `Scan` both have (under the
/// same names, without a common trait).
trait ReadSpec: Sized {
    fn family(self, f: &[u8]) -> Self;
    fn column(self, f: &[u8], q: &[u8]) -> Self;
    fn range(self, r: TimeRange) -> Self;
    fn versions(self, n: u32) -> Self;
    fn filtered(self, f: Filter) -> Self;
}

macro_rules! read_spec {
    ($($t:ty),*) => {$(
        impl ReadSpec for $t {
            fn family(self, f: &[u8]) -> Self {
                self.add_family(f)
            }
            fn column(self, f: &[u8], q: &[u8]) -> Self {
                self.add_column(f, q)
            }
            fn range(self, r: TimeRange) -> Self {
                self.time_range(r)
            }
            fn versions(self, n: u32) -> Self {
                self.max_versions(n)
            }
            fn filtered(self, f: Filter) -> Self {
                self.filter(f)
            }
        }
    )*};
}
read_spec!(Get, Scan);

impl ReadOpts {
    /// The options of a hash: the read options here, every other key handed to `other`,
    /// which returns false for a key it does not know (then the command fails).
    fn from_hash(
        a: &Args<'_>,
        pairs: &[(Value, Value)],
        mut other: impl FnMut(&str, &Value) -> Result<bool, ShellError>,
    ) -> Result<ReadOpts, ShellError> {
        let mut o = ReadOpts::default();
        for (k, v) in pairs {
            let key = key_name(k).unwrap_or_default();
            if !o.take(a, &key, v)? && !other(&key, v)? {
                return Err(a.usage(format!("unknown option {k}")));
            }
        }
        Ok(o)
    }

    /// Takes `key => v` when it is a read option; false when it is not one.
    fn take(&mut self, a: &Args<'_>, key: &str, v: &Value) -> Result<bool, ShellError> {
        match key {
            "COLUMN" | "COLUMNS" => {
                let cols = columns(v).ok_or_else(|| {
                    a.usage(format!("{key} must be a string or an array of strings"))
                })?;
                self.columns.extend(cols.iter().map(|c| column(c)));
            }
            "TIMESTAMP" => match as_int(v) {
                Some(ts) if ts >= 0 => self.range = Some(TimeRange::at(ts as u64)),
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
                        self.range = Some(TimeRange::new(lo as u64, hi as u64)?)
                    }
                    _ => return Err(bad()),
                }
            }
            "VERSIONS" => match as_int(v) {
                Some(n) if n >= 1 && n <= u32::MAX as i64 => self.versions = Some(n as u32),
                _ => return Err(a.usage("VERSIONS must be a positive integer")),
            },
            "FILTER" => {
                let text = as_string(v).ok_or_else(|| {
                    a.usage("FILTER must be a filter-language string, e.g. \"PrefixFilter('r')\"")
                })?;
                self.filter = Some(Filter::parse(&text)?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `read` with these options.
    fn apply<R: ReadSpec>(self, mut read: R) -> R {
        for (f, q) in &self.columns {
            read = match q {
                Some(q) => read.column(f, q),
                None => read.family(f),
            };
        }
        if let Some(r) = self.range {
            read = read.range(r);
        }
        if let Some(n) = self.versions {
            read = read.versions(n);
        }
        if let Some(f) = self.filter {
            read = read.filtered(f);
        }
        read
    }
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

pub(super) async fn get<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(2, 3)?;
    let (t, row) = table_and_row(conn, a).await?;
    let o = match a.vals.get(2) {
        None => ReadOpts::default(),
        Some(Value::Hash(pairs)) => ReadOpts::from_hash(a, pairs, |_, _| Ok(false))?,
        Some(v) => {
            let cols = columns(v).ok_or_else(|| {
                a.usage("the third argument is a column, an array of columns or a hash of options")
            })?;
            ReadOpts {
                columns: cols.iter().map(|c| column(c)).collect(),
                ..ReadOpts::default()
            }
        }
    };
    let r = t.get(o.apply(Get::new(&row))).await?;
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
    let o = match a.vals.get(1) {
        None => ReadOpts::default(),
        Some(Value::Hash(pairs)) => ReadOpts::from_hash(a, pairs, |key, v| {
            let text = || {
                as_string(v)
                    .map(|s| to_bytes_binary(&s))
                    .ok_or_else(|| a.usage(format!("{key} must be a string")))
            };
            let flag = || as_bool(v).ok_or_else(|| a.usage(format!("{key} must be true or false")));
            // Taken out to be rebuilt; lost only when the option fails the command.
            let scan = std::mem::take(&mut s);
            s = match key {
                "STARTROW" => scan.start_row(text()?),
                "STOPROW" | "ENDROW" => scan.stop_row(text()?),
                "ROWPREFIXFILTER" => scan.with_prefix(text()?),
                "REVERSED" => scan.reversed(flag()?),
                "RAW" => scan.raw(flag()?),
                "LIMIT" => match as_int(v) {
                    Some(n) if n >= 1 => scan.limit(n as usize),
                    _ => return Err(a.usage("LIMIT must be a positive integer")),
                },
                "CACHE" | "CACHE_BLOCKS" => scan,
                _ => return Ok(false),
            };
            Ok(true)
        })?,
        Some(v) => return Err(a.usage(format!("the options are a hash, not {}", v.kind()))),
    };
    Ok(o.apply(s))
}

pub(super) async fn scan<B: Backend>(
    conn: &Connection<B>,
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

pub(super) async fn count<B: Backend>(
    conn: &Connection<B>,
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

pub(super) async fn delete<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
) -> Result<(), ShellError> {
    if a.cmd == "delete" {
        a.count(3, 4)?;
    } else {
        a.count(2, 4)?;
    }
    let (t, row) = table_and_row(conn, a).await?;
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

pub(super) async fn counter<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let (t, row) = table_and_row(conn, a).await?;
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

pub(super) async fn append<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(4, 4)?;
    let (t, row) = table_and_row(conn, a).await?;
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
