//! Conversions between HBase's Thrift1 types and Basalt's: column strings (`fam`, `fam:`,
//! `fam:qual`, as HBase's `CellUtil.parseColumn`), timestamps (Thrift's signed i64, with
//! `i64::MAX` meaning "the server's time"), rows (`TRowResult`, `TCell`), family
//! descriptors, and errors (the declared `IOError`, `IllegalArgument`, `AlreadyExists`).
//!
//! Invariant: nothing here panics on any input a client can send; a value Basalt cannot
//! represent is an `IllegalArgument` (or an `IOError` where the method declares only that).

use basalt_core::client::{Get, RowResult, Scan, TimeRange};
use basalt_core::{BloomType, ColumnFamilyDescriptor, Compression};
use basalt_core::{Error, TableName, Timestamp, LATEST_TIMESTAMP};
use basalt_thrift::hbase::{
    AlreadyExists, ColumnDescriptor, IOError, IllegalArgument, TCell, TColumn, TRowResult,
};
use std::collections::BTreeMap;

/// A column string split as HBase does: `fam` is the whole family (no qualifier),
/// `fam:` the empty qualifier, `fam:q` one column.
pub(crate) fn parse_column(col: &[u8]) -> (&[u8], Option<&[u8]>) {
    match col.iter().position(|&c| c == b':') {
        Some(at) => (&col[..at], Some(&col[at + 1..])),
        None => (col, None),
    }
}

/// The error a call answers with, as one of the IDL's declared exceptions.
pub(crate) fn io_error(message: impl Into<String>) -> thrift::Error {
    super::calls::note_failure();
    thrift::Error::User(Box::new(IOError {
        message: Some(message.into()),
    }))
}

/// An `IllegalArgument` (only for methods that declare it).
pub(crate) fn illegal(message: impl Into<String>) -> thrift::Error {
    super::calls::note_failure();
    thrift::Error::User(Box::new(IllegalArgument {
        message: Some(message.into()),
    }))
}

/// An `AlreadyExists` (createTable).
pub(crate) fn already_exists(message: impl Into<String>) -> thrift::Error {
    super::calls::note_failure();
    thrift::Error::User(Box::new(AlreadyExists {
        message: Some(message.into()),
    }))
}

/// An engine error as an `IOError`.
pub(crate) fn engine(e: Error) -> thrift::Error {
    io_error(e.to_string())
}

/// An engine error as an `IllegalArgument` when it is the caller's fault, else an `IOError`
/// (for the methods that declare both).
pub(crate) fn engine_or_illegal(e: Error) -> thrift::Error {
    match e {
        Error::BadArgument(_)
        | Error::InvalidRow(_)
        | Error::ValueTooLarge { .. }
        | Error::FilterParse { .. }
        | Error::NotACounter { .. } => illegal(e.to_string()),
        e => engine(e),
    }
}

/// A table name from the wire (UTF-8, `ns:table` or `table`).
pub(crate) fn table_name(name: &[u8]) -> thrift::Result<TableName> {
    let s = std::str::from_utf8(name).map_err(|_| io_error("table name is not UTF-8"))?;
    let t = TableName::parse(s).map_err(engine)?;
    super::calls::note_table(&display_name(&t));
    Ok(t)
}

/// A table's name as HBase prints it: the qualifier alone in the default namespace.
pub(crate) fn display_name(t: &TableName) -> String {
    if t.namespace() == "default" {
        t.qualifier().to_string()
    } else {
        format!("{}:{}", t.namespace(), t.qualifier())
    }
}

/// A timestamp a client sent for a write: `i64::MAX` (HBase's `LATEST_TIMESTAMP`) is the
/// server's time; a negative one is refused.
pub(crate) fn write_ts(ts: i64) -> thrift::Result<Timestamp> {
    if ts == i64::MAX {
        Ok(LATEST_TIMESTAMP)
    } else {
        u64::try_from(ts).map_err(|_| illegal(format!("negative timestamp {ts}")))
    }
}

/// The read time range of a `...Ts` read: `[0, ts)`, HBase's exclusive upper bound; `None`
/// when no timestamp can match (`ts <= 0`: the read finds nothing, as in HBase).
pub(crate) fn read_range(ts: i64) -> Option<TimeRange> {
    let max = u64::try_from(ts).ok()?;
    TimeRange::new(0, max).ok()
}

/// A Get of `row` restricted to `columns` (all columns when empty).
pub(crate) fn get_with_columns(row: &[u8], columns: &[Vec<u8>]) -> Get {
    let mut g = Get::new(row);
    for col in columns {
        g = match parse_column(col) {
            (fam, None) => g.add_family(fam),
            (fam, Some(q)) => g.add_column(fam, q),
        };
    }
    g
}

/// A Scan restricted to `columns` (all columns when empty).
pub(crate) fn scan_with_columns(mut s: Scan, columns: &[Vec<u8>]) -> Scan {
    for col in columns {
        s = match parse_column(col) {
            (fam, None) => s.add_family(fam),
            (fam, Some(q)) => s.add_column(fam, q),
        };
    }
    s
}

/// A thrift timestamp from Basalt's (which never exceeds `i64::MAX` for stored cells).
pub(crate) fn ts_out(ts: Timestamp) -> i64 {
    i64::try_from(ts).unwrap_or(i64::MAX)
}

/// `family:qualifier`.
fn column_name(family: &[u8], qualifier: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(family.len() + 1 + qualifier.len());
    name.extend_from_slice(family);
    name.push(b':');
    name.extend_from_slice(qualifier);
    name
}

/// Every cell of `r` as TCells (newest first per column), for `getVer` and `append`.
pub(crate) fn cells(r: &RowResult) -> Vec<TCell> {
    r.cells
        .iter()
        .map(|c| TCell {
            value: Some(c.value.to_vec()),
            timestamp: Some(ts_out(c.timestamp)),
        })
        .collect()
}

/// A row as HBase's `rowResultFromHBase` builds it: the newest cell of each column, in a
/// sorted map, or (with `sorted`) in `sortedColumns` in cell order with `columns` unset.
pub(crate) fn row_result(r: RowResult, sorted: bool) -> TRowResult {
    let mut map = BTreeMap::new();
    let mut list = Vec::new();
    let mut last: Option<(&[u8], &[u8])> = None;
    for c in &r.cells {
        let key = (c.family.as_ref(), c.qualifier.as_ref());
        if last == Some(key) {
            continue; // an older version of the same column
        }
        last = Some(key);
        let cell = TCell {
            value: Some(c.value.to_vec()),
            timestamp: Some(ts_out(c.timestamp)),
        };
        let name = column_name(&c.family, &c.qualifier);
        if sorted {
            list.push(TColumn {
                column_name: Some(name),
                cell: Some(cell),
            });
        } else {
            map.insert(name, cell);
        }
    }
    TRowResult {
        row: Some(r.row.to_vec()),
        columns: if sorted { None } else { Some(map) },
        sorted_columns: if sorted { Some(list) } else { None },
    }
}

/// A family as `createTable` sends it (HBase's `colDescFromThrift`): `maxVersions` as
/// sent, TTL <= 0 (or `i32::MAX`) forever, compression and bloom type by name; the bloom
/// vector size and hash count are ignored, as HBase does.
pub(crate) fn family_from_thrift(d: &ColumnDescriptor) -> thrift::Result<ColumnFamilyDescriptor> {
    let raw = d.name.as_deref().unwrap_or_default();
    let (name, _) = parse_column(raw);
    if name.is_empty() {
        return Err(illegal("column family name is empty"));
    }
    let mut f = ColumnFamilyDescriptor::new(name);
    if let Some(v) = d.max_versions {
        let v = u32::try_from(v)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| illegal(format!("maxVersions must be positive, got {v}")))?;
        f = f.max_versions(v);
    }
    if let Some(c) = &d.compression {
        f = f.compression(match c.to_ascii_lowercase().as_str() {
            "none" | "" => Compression::None,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            "snappy" => Compression::Snappy,
            other => return Err(illegal(format!("compression {other} not supported"))),
        });
    }
    if let Some(b) = &d.bloom_filter_type {
        f = f.bloom(match b.to_ascii_uppercase().as_str() {
            "NONE" | "" => BloomType::None,
            "ROW" => BloomType::Row,
            "ROWCOL" => BloomType::RowCol,
            other => return Err(illegal(format!("bloom filter type {other} not supported"))),
        });
    }
    if let Some(m) = d.in_memory {
        f = f.in_memory(m);
    }
    if let Some(b) = d.block_cache_enabled {
        f = f.block_cache(b);
    }
    if let Some(ttl) = d.time_to_live {
        if ttl > 0 && ttl != i32::MAX {
            f = f.ttl_secs(u64::from(ttl.unsigned_abs()));
        }
    }
    Ok(f)
}

/// A family as `getColumnDescriptors` answers it (name `fam:`, TTL `i32::MAX` for
/// forever, vector size and hash count 0).
pub(crate) fn family_to_thrift(f: &ColumnFamilyDescriptor) -> ColumnDescriptor {
    let compression = match f.compression {
        Compression::None => "NONE",
        Compression::Lz4 => "LZ4",
        Compression::Zstd => "ZSTD",
        Compression::Snappy => "SNAPPY",
    };
    let bloom = match f.bloom {
        BloomType::None => "NONE",
        BloomType::Row => "ROW",
        BloomType::RowCol => "ROWCOL",
    };
    let ttl = f
        .ttl_secs
        .and_then(|s| i32::try_from(s).ok())
        .unwrap_or(i32::MAX);
    ColumnDescriptor {
        name: Some(column_name(&f.name, b"")),
        max_versions: Some(i32::try_from(f.max_versions).unwrap_or(i32::MAX)),
        compression: Some(compression.to_string()),
        in_memory: Some(f.in_memory),
        bloom_filter_type: Some(bloom.to_string()),
        bloom_filter_vector_size: Some(0),
        bloom_filter_nb_hashes: Some(0),
        block_cache_enabled: Some(f.block_cache),
        time_to_live: Some(ttl),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_parse_as_hbase_does() {
        assert_eq!(parse_column(b"cf"), (&b"cf"[..], None));
        assert_eq!(parse_column(b"cf:"), (&b"cf"[..], Some(&b""[..])));
        assert_eq!(parse_column(b"cf:a:b"), (&b"cf"[..], Some(&b"a:b"[..])));
    }

    #[test]
    fn timestamps_map_latest_and_refuse_negative() {
        assert_eq!(write_ts(i64::MAX).ok(), Some(LATEST_TIMESTAMP));
        assert_eq!(write_ts(5).ok(), Some(5));
        assert!(write_ts(-1).is_err());
        assert_eq!(read_range(0), None, "[0, 0) is empty");
        assert_eq!(read_range(-3), None);
        assert_eq!(read_range(10), TimeRange::new(0, 10).ok());
    }
}
