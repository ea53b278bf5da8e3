//! The scanner methods of the Thrift1 service: `scannerOpen*` (a scanner over a row range,
//! a prefix or a `TScan`, registered in the gateway's [`Scanners`](crate::serve::scanners)
//! under an id) and `scannerClose`; `scannerGet`/`scannerGetList` read from the registry.
//!
//! Invariants: an empty start or stop row is no bound; a scan's stream starts on the
//! runtime with prefetch off (a connection thread reads it); a scanner id that is not
//! open is an `IllegalArgument`.

use super::Handler;
use crate::serve::convert::*;
use basalt_core::client::Backend;
use basalt_core::client::Scan;
use basalt_core::Filter;
use basalt_thrift::hbase::{ScannerID, TScan};

/// Opens a scanner of `scan` over `table`; `sorted`: its rows' columns in sorted maps.
fn open<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    scan: Scan,
    sorted: bool,
) -> thrift::Result<ScannerID> {
    let (name, t) = h.table(table)?;
    // A scan's stream starts on the runtime (its prefetch needs one).
    let rows = h.run(async { t.scan(scan.prefetch(false)) });
    h.state
        .scanners
        .open(rows.map_err(engine)?, sorted, display_name(&name))
}

/// `scannerOpen`, `scannerOpenWithStop`, `scannerOpenTs`, `scannerOpenWithStopTs`.
pub(super) fn open_range<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    start: &[u8],
    stop: Option<&[u8]>,
    columns: &[Vec<u8>],
    ts: Option<i64>,
) -> thrift::Result<ScannerID> {
    let mut s = scan_with_columns(Scan::new(), columns);
    if !start.is_empty() {
        s = s.start_row(start);
    }
    if let Some(stop) = stop.filter(|s| !s.is_empty()) {
        s = s.stop_row(stop);
    }
    if let Some(ts) = ts {
        s = s.time_range(read_range(ts).ok_or_else(|| io_error("timestamp must be positive"))?);
    }
    open(h, table, s, false)
}

/// `scannerOpenWithPrefix`.
pub(super) fn open_prefix<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    prefix: Vec<u8>,
    columns: &[Vec<u8>],
) -> thrift::Result<ScannerID> {
    let s = scan_with_columns(Scan::new().with_prefix(prefix), columns);
    open(h, table, s, false)
}

/// `scannerOpenWithScan`.
pub(super) fn open_with_scan<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    scan: TScan,
) -> thrift::Result<ScannerID> {
    let mut s = scan_with_columns(Scan::new(), scan.columns.as_deref().unwrap_or_default());
    if let Some(start) = scan.start_row.filter(|r| !r.is_empty()) {
        s = s.start_row(start);
    }
    if let Some(stop) = scan.stop_row.filter(|r| !r.is_empty()) {
        s = s.stop_row(stop);
    }
    if let Some(ts) = scan.timestamp {
        s = s.time_range(read_range(ts).ok_or_else(|| io_error("timestamp must be positive"))?);
    }
    if let Some(f) = scan.filter_string.filter(|f| !f.is_empty()) {
        let text = String::from_utf8(f).map_err(|_| io_error("filter string is not UTF-8"))?;
        s = s.filter(Filter::parse(&text).map_err(engine)?);
    }
    if let Some(batch) = scan
        .batch_size
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| b > 0)
    {
        s = s.batch(batch);
    }
    if scan.reversed == Some(true) {
        s = s.reversed(true);
    }
    open(h, table, s, scan.sort_columns == Some(true))
}

/// `scannerClose`.
pub(super) fn close<B: Backend>(h: &Handler<B>, id: ScannerID) -> thrift::Result<()> {
    if h.state.scanners.close(id) {
        Ok(())
    } else {
        Err(illegal("scanner ID is invalid"))
    }
}
