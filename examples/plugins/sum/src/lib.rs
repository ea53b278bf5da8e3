//! The sum endpoint as a plugin: the sum and count of a column's 8-byte big-endian values
//! (what `incr` writes; other lengths are skipped, as HBase's `AggregationClient` does),
//! per region, merged on the client.
//!
//! Request: `family:qualifier` as text. Answer: 16 bytes, the sum (i64, big-endian, wrapping)
//! then the count of values (u64, big-endian).

use basalt_plugin_sdk::endpoint::{region, Endpoint, RegionInfo};
use basalt_plugin_sdk::endpoint::export_endpoint;

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
        let scan = region::Scanner::new(&[], &[], Some(family.as_bytes()));
        let (mut sum, mut count) = (0i64, 0u64);
        loop {
            let rows = scan.next_rows(1024)?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                // Cells come newest first per column: the first of the column is its value.
                if let Some(c) = row.cells.iter().find(|c| c.qualifier == qualifier.as_bytes()) {
                    if let Ok(v) = <[u8; 8]>::try_from(c.value.as_slice()) {
                        sum = sum.wrapping_add(i64::from_be_bytes(v));
                        count += 1;
                    }
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
