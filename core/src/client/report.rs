//! The region report: the per-region table seed 002 reads off HBase's web page (name, start
//! and end key, read and write requests, size), to see hotspots from the API.
//!
//! Keys print as HBase's `Bytes.toStringBinary` does: printable ASCII as it is, every other
//! byte as `\xNN`, so binary salts stay readable.

use crate::region::RegionInfo;
use bytes::Bytes;
use std::fmt;

/// One region's load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionLoad {
    /// The region's name (`table,start,id`).
    pub name: String,
    /// Inclusive start key (empty = first region).
    pub start_key: Bytes,
    /// Exclusive end key (empty = last region).
    pub end_key: Bytes,
    /// Reads served since the region opened.
    pub read_requests: u64,
    /// Writes served since the region opened.
    pub write_requests: u64,
    /// Bytes in store files plus MemStores.
    pub size_bytes: u64,
}

/// Every region of a table with its load, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionReport {
    /// The table (`ns:name`).
    pub table: String,
    /// Its regions in key order.
    pub regions: Vec<RegionLoad>,
}

impl RegionReport {
    /// A report from region facts ([`crate::Admin::regions`]).
    pub fn from_regions(table: impl Into<String>, infos: &[RegionInfo]) -> Self {
        RegionReport {
            table: table.into(),
            regions: infos
                .iter()
                .map(|r| RegionLoad {
                    name: r.name.clone(),
                    start_key: r.start_key.clone(),
                    end_key: r.end_key.clone(),
                    read_requests: r.read_requests,
                    write_requests: r.write_requests,
                    size_bytes: r.store_file_size + r.memstore_size,
                })
                .collect(),
        }
    }

    /// Each region's share of all writes (0..=1), in key order; all zero without writes.
    pub fn write_shares(&self) -> Vec<f64> {
        let total: u64 = self.regions.iter().map(|r| r.write_requests).sum();
        self.regions
            .iter()
            .map(|r| {
                if total == 0 {
                    0.0
                } else {
                    r.write_requests as f64 / total as f64
                }
            })
            .collect()
    }

    /// The busiest region's writes divided by the idlest's (1.0 = perfectly even;
    /// infinite when some region took none while another took some).
    pub fn write_spread(&self) -> f64 {
        let max = self
            .regions
            .iter()
            .map(|r| r.write_requests)
            .max()
            .unwrap_or(0);
        let min = self
            .regions
            .iter()
            .map(|r| r.write_requests)
            .min()
            .unwrap_or(0);
        match (max, min) {
            (0, _) => 1.0,
            (_, 0) => f64::INFINITY,
            _ => max as f64 / min as f64,
        }
    }
}

/// `key` as HBase's `Bytes.toStringBinary` prints it.
pub fn key_to_string(key: &[u8]) -> String {
    let mut s = String::with_capacity(key.len());
    for &b in key {
        if (0x20..0x7F).contains(&b) && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02X}"));
        }
    }
    s
}

impl fmt::Display for RegionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shares = self.write_shares();
        let name_w = self
            .regions
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(4)
            .clamp(4, 48);
        let key_w = self
            .regions
            .iter()
            .flat_map(|r| {
                [
                    key_to_string(&r.start_key).len(),
                    key_to_string(&r.end_key).len(),
                ]
            })
            .max()
            .unwrap_or(3)
            .clamp(9, 32);
        writeln!(f, "regions of {}", self.table)?;
        writeln!(
            f,
            "{:<name_w$} {:<key_w$} {:<key_w$} {:>12} {:>12} {:>7} {:>12}",
            "name", "start key", "end key", "reads", "writes", "write%", "size"
        )?;
        for (r, share) in self.regions.iter().zip(shares) {
            let mut name = r.name.clone();
            name.truncate(name_w);
            writeln!(
                f,
                "{:<name_w$} {:<key_w$} {:<key_w$} {:>12} {:>12} {:>6.1}% {:>12}",
                name,
                key_to_string(&r.start_key),
                key_to_string(&r.end_key),
                r.read_requests,
                r.write_requests,
                share * 100.0,
                r.size_bytes
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(writes: u64) -> RegionLoad {
        RegionLoad {
            name: "t,,1".into(),
            start_key: Bytes::from_static(b"\x00a"),
            end_key: Bytes::new(),
            read_requests: 0,
            write_requests: writes,
            size_bytes: 10,
        }
    }

    #[test]
    fn shares_spread_and_printing() {
        let r = RegionReport {
            table: "default:t".into(),
            regions: vec![load(30), load(10)],
        };
        assert_eq!(r.write_shares(), vec![0.75, 0.25]);
        assert_eq!(r.write_spread(), 3.0);
        let text = r.to_string();
        assert!(text.contains("\\x00a"), "{text}");
        assert!(text.contains("75.0%"), "{text}");
        let idle = RegionReport {
            table: "t".into(),
            regions: vec![load(0), load(5)],
        };
        assert!(idle.write_spread().is_infinite());
        assert_eq!(key_to_string(b"a\\\xff"), "a\\x5C\\xFF");
    }
}
