//! The sum endpoint as a plugin: the sum and count of a column's 8-byte big-endian values
//! (what `incr` writes; other lengths are skipped, as HBase's `AggregationClient` does),
//! per region, merged on the client.
//!
//! Request: `family:qualifier` as text. Answer: 16 bytes, the sum (i64, big-endian, wrapping)
//! then the count of values (u64, big-endian).

use basalt_plugin_sdk::endpoint::export_endpoint;
use basalt_plugin_sdk::endpoint::{column_rows, region, Endpoint, RegionInfo};

/// Rows per page of the column scanner (the host caps a page at 16 Ki rows and ~1 MiB).
const PAGE_ROWS: u32 = 16 * 1024;

fn answer(sum: i64, count: u64) -> Vec<u8> {
    let mut out = sum.to_be_bytes().to_vec();
    out.extend_from_slice(&count.to_be_bytes());
    out
}

fn parse(a: &[u8]) -> Result<(i64, u64), String> {
    let (s, c) = (a.get(..8), a.get(8..16));
    match (s, c, a.len()) {
        (Some(s), Some(c), 16) => Ok((
            i64::from_be_bytes(s.try_into().map_err(|_| "bad sum")?),
            u64::from_be_bytes(c.try_into().map_err(|_| "bad count")?),
        )),
        _ => Err(format!("an answer is 16 bytes, not {}", a.len())),
    }
}

struct Sum;

impl Endpoint for Sum {
    fn call(_: RegionInfo, request: Vec<u8>) -> Result<Vec<u8>, String> {
        let text = String::from_utf8(request).map_err(|_| "the request is not text")?;
        let (family, qualifier) = text
            .split_once(':')
            .ok_or_else(|| format!("column {text:?} is not family:qualifier"))?;
        // The one column, projected by the host: pages of (row, newest value), read in place.
        let columns = [(family.as_bytes().to_vec(), qualifier.as_bytes().to_vec())];
        let scan = region::ColumnScanner::new(&[], &[], &columns);
        let (mut sum, mut count) = (0i64, 0u64);
        loop {
            let page = scan.next(PAGE_ROWS)?;
            if page.is_empty() {
                break;
            }
            for row in column_rows(&page, columns.len()) {
                if let Some(Ok(v)) = row.value(0).map(<[u8; 8]>::try_from) {
                    sum = sum.wrapping_add(i64::from_be_bytes(v));
                    count += 1;
                }
            }
        }
        Ok(answer(sum, count))
    }

    fn merge(a: Vec<u8>, b: Vec<u8>) -> Result<Vec<u8>, String> {
        let (sa, ca) = parse(&a)?;
        let (sb, cb) = parse(&b)?;
        Ok(answer(sa.wrapping_add(sb), ca + cb))
    }
}

export_endpoint!(Sum);
