//! `basalt report DIR`: every table's regions in key order with their start and end keys
//! (as HBase's `Bytes.toStringBinary` prints them), size, store files, cells, requests and
//! share of the table's data, as a text table like the region table of HBase's master page;
//! with `--plot FILE`, a bar chart of each region's share ([`plot`]).
//!
//! The share is the region's share of the table's **stored cells**, not of its write
//! requests: request counters live in memory since the engine opened, so on a directory just
//! opened they are all 0 (they are shown too, as requests since open). A cell is one write
//! of one column (a delete marker counts too), so the cells a region stores are the writes it
//! took, less what compactions dropped. The report first flushes every table whose
//! MemStores hold cells (those WAL replay put back after a crash; closing would flush them
//! anyway), so every cell is counted from the store files' exact counts. Bytes were the other
//! choice; they weigh rows by value size and, on small tables, by the fixed overhead of each
//! store file (index, bloom filter, trailer), which hides the spread the report is for.
//!
//! Invariants: regions are listed and plotted in key order; shares are in 0..=1 and sum to
//! 1 over a table holding data (all 0 for an empty table).

pub mod plot;

use crate::datadir::DataDir;
use crate::error::{require_data_dir, ToolError};
use crate::offline::{human_bytes, plural};
use basalt_core::client::report::key_to_string;
use basalt_core::{RegionInfo, SnapshotDescription, TableName};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One region's line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRow {
    /// The region's id.
    pub id: u64,
    /// Inclusive start key (empty = the table's start).
    pub start_key: Bytes,
    /// Exclusive end key (empty = the table's end).
    pub end_key: Bytes,
    /// Bytes in store files.
    pub store_file_bytes: u64,
    /// Bytes in the MemStore (after WAL replay, on a directory that was not closed cleanly).
    pub memstore_bytes: u64,
    /// Store files.
    pub store_files: usize,
    /// Cells (puts and delete markers) in store files.
    pub cells: u64,
    /// Reads served since the engine opened.
    pub read_requests: u64,
    /// Writes served since the engine opened.
    pub write_requests: u64,
}

impl RegionRow {
    /// The row of one region's facts.
    pub fn from_info(r: &RegionInfo) -> Self {
        RegionRow {
            id: r.id,
            start_key: r.start_key.clone(),
            end_key: r.end_key.clone(),
            store_file_bytes: r.store_file_size,
            memstore_bytes: r.memstore_size,
            store_files: r.store_files,
            cells: r.store_file_cells,
            read_requests: r.read_requests,
            write_requests: r.write_requests,
        }
    }

    /// Stored bytes: store files plus MemStore.
    pub fn size(&self) -> u64 {
        self.store_file_bytes + self.memstore_bytes
    }
}

/// One table's regions, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableReport {
    /// The table.
    pub table: TableName,
    /// The number of salt buckets, when the table is salted.
    pub salt_buckets: Option<u32>,
    /// Its regions in key order.
    pub regions: Vec<RegionRow>,
}

/// Each value's share of their sum (all 0 when the sum is 0).
fn shares(values: impl Iterator<Item = u64> + Clone) -> Vec<f64> {
    let total: u64 = values.clone().sum();
    values
        .map(|v| {
            if total == 0 {
                0.0
            } else {
                v as f64 / total as f64
            }
        })
        .collect()
}

impl TableReport {
    /// Each region's share of the table's stored cells (0..=1), in key order.
    pub fn data_shares(&self) -> Vec<f64> {
        shares(self.regions.iter().map(|r| r.cells))
    }

    /// Each region's share of the write requests since open, in key order (all 0 when no
    /// write was served since open).
    pub fn write_shares(&self) -> Vec<f64> {
        shares(self.regions.iter().map(|r| r.write_requests))
    }

    /// The share every region would hold if data were spread evenly (1 / regions).
    pub fn even_share(&self) -> f64 {
        if self.regions.is_empty() {
            0.0
        } else {
            1.0 / self.regions.len() as f64
        }
    }

    /// The largest data share and the index of its region (`None` without regions).
    pub fn max_data_share(&self) -> Option<(usize, f64)> {
        self.data_shares()
            .into_iter()
            .enumerate()
            .fold(None, |best, (i, s)| match best {
                Some((_, b)) if b >= s => best,
                _ => Some((i, s)),
            })
    }

    /// The report as text: a header line, the region table, and a summary of the spread.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let size: u64 = self.regions.iter().map(RegionRow::size).sum();
        let files: usize = self.regions.iter().map(|r| r.store_files).sum();
        let cells: u64 = self.regions.iter().map(|r| r.cells).sum();
        let salted = match self.salt_buckets {
            Some(n) => format!(", salted into {n} buckets"),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "table {}: {}{salted}; {} in {}, {}",
            self.table,
            plural(self.regions.len() as u64, "region"),
            human_bytes(size),
            plural(files as u64, "store file"),
            plural(cells, "cell")
        );
        let header = [
            "REGION_NAME",
            "START_KEY",
            "END_KEY",
            "SIZE",
            "STOREFILES",
            "CELLS",
            "READ_REQUESTS",
            "WRITE_REQUESTS",
            "WRITE_SHARE",
            "DATA_SHARE",
        ];
        let data = self.data_shares();
        let writes = self.write_shares();
        let any_writes = self.regions.iter().any(|r| r.write_requests > 0);
        let mut rows: Vec<[String; 10]> = Vec::with_capacity(self.regions.len());
        for ((r, d), w) in self.regions.iter().zip(&data).zip(&writes) {
            rows.push([
                format!("{},{},{}", self.table, key_to_string(&r.start_key), r.id),
                key_to_string(&r.start_key),
                key_to_string(&r.end_key),
                human_bytes(r.size()),
                r.store_files.to_string(),
                r.cells.to_string(),
                r.read_requests.to_string(),
                r.write_requests.to_string(),
                if any_writes {
                    format!("{:5.1}%", w * 100.0)
                } else {
                    "-".to_string()
                },
                format!("{:5.1}%", d * 100.0),
            ]);
        }
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            let parts: Vec<String> = cells
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            parts.join(" | ").trim_end().to_string()
        };
        let _ = writeln!(s, "{}", line(&header.map(str::to_string)));
        for (row, d) in rows.iter().zip(&data) {
            // A bar of the data share: 40 characters would be the whole table.
            let bar = "#".repeat((d * 40.0).round() as usize);
            let _ = writeln!(s, "{} {bar}", line(row));
        }
        if cells == 0 {
            let _ = writeln!(s, "data share: the table stores no cells");
        } else if let Some((i, max)) = self.max_data_share() {
            let even = self.even_share();
            let _ = writeln!(
                s,
                "data share: largest {:.1}% (region {}), even share {:.2}% (1/{}): the largest \
                 region holds {:.1}x its even share",
                max * 100.0,
                self.regions.get(i).map_or(0, |r| r.id),
                even * 100.0,
                self.regions.len(),
                if even > 0.0 { max / even } else { 0.0 }
            );
        }
        let reads: u64 = self.regions.iter().map(|r| r.read_requests).sum();
        let writes_total: u64 = self.regions.iter().map(|r| r.write_requests).sum();
        let _ = writeln!(
            s,
            "requests since open: {reads} reads, {writes_total} writes (counted in memory \
             from the engine's open)"
        );
        // Lines of the table end with the bar; trim the space of an empty bar.
        s.lines().map(|l| format!("{}\n", l.trim_end())).collect()
    }
}

/// Each table's report (only `only` when given), in the catalog's table order, after
/// flushing the tables whose MemStores hold cells.
pub async fn gather(data: &DataDir, only: Option<&str>) -> Result<Vec<TableReport>, ToolError> {
    let admin = data.conn.admin();
    let descriptors = match only {
        Some(name) => vec![admin.describe_table(TableName::parse(name)?).await?],
        None => admin.list_tables().await?,
    };
    let mut out = Vec::with_capacity(descriptors.len());
    for d in descriptors {
        let mut regions = admin.regions(d.name.clone()).await?;
        if regions.iter().any(|r| r.memstore_size > 0) {
            // Cells WAL replay put back into MemStores: counted once flushed.
            admin.flush(d.name.clone()).await?;
            regions = admin.regions(d.name.clone()).await?;
        }
        out.push(TableReport {
            salt_buckets: d.salt.as_ref().map(|s| s.buckets),
            table: d.name,
            regions: regions.iter().map(RegionRow::from_info).collect(),
        });
    }
    Ok(out)
}

/// `basalt report DIR [--table T] [--plot FILE]`: opens the existing data directory `dir`,
/// prints every table's report to `out`, writes the chart to `plot_file` when given, and
/// closes the directory. Returns the reports.
pub async fn run_report(
    dir: &Path,
    table: Option<&str>,
    plot_file: Option<&Path>,
    out: &mut dyn std::io::Write,
) -> Result<Vec<TableReport>, ToolError> {
    require_data_dir(dir)?;
    let data = DataDir::open(dir).await?;
    let gathered = gather(&data, table).await;
    let snapshots = data.conn.admin().list_snapshots().await;
    data.close().await?;
    let reports = gathered?;
    let snapshots = snapshots?;
    let mut text = String::new();
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(&r.render());
    }
    if reports.is_empty() {
        text.push_str("no tables\n");
    }
    if table.is_none() {
        text.push_str(&render_snapshots(&snapshots));
    }
    out.write_all(text.as_bytes())
        .map_err(|e| ToolError::io("write", Path::new("standard output"), e))?;
    if let Some(path) = plot_file {
        let svg = plot::render_svg(&reports)?;
        std::fs::write(path, svg).map_err(|e| ToolError::io("write", path, e))?;
        writeln!(out, "chart written to {}", path.display())
            .map_err(|e| ToolError::io("write", Path::new("standard output"), e))?;
    }
    Ok(reports)
}

/// The snapshot lines of the report: each snapshot's tables, files and size, and the space
/// held only by snapshots (files no table lists, each counted once).
pub fn render_snapshots(snapshots: &[SnapshotDescription]) -> String {
    let mut s = String::new();
    if snapshots.is_empty() {
        return s;
    }
    let _ = writeln!(s, "\nsnapshots:");
    for d in snapshots {
        let _ = writeln!(
            s,
            "  {}  {}  {}  {}  {} held only by snapshots",
            d.name,
            d.tables.join(","),
            plural(d.files as u64, "file"),
            human_bytes(d.size),
            human_bytes(d.own_size)
        );
    }
    let held: BTreeMap<u64, u64> = snapshots
        .iter()
        .flat_map(|d| d.own_files.iter().copied())
        .collect();
    let _ = writeln!(
        s,
        "space held only by snapshots: {} in {}",
        human_bytes(held.values().sum()),
        plural(held.len() as u64, "file")
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(id: u64, start: &'static [u8], size: u64, writes: u64) -> RegionRow {
        RegionRow {
            id,
            start_key: Bytes::from_static(start),
            end_key: Bytes::new(),
            store_file_bytes: size,
            memstore_bytes: 0,
            store_files: 1,
            cells: size / 10,
            read_requests: 0,
            write_requests: writes,
        }
    }

    #[test]
    fn shares_come_from_stored_bytes_and_render_as_a_table() {
        let r = TableReport {
            table: TableName::parse("t").unwrap(),
            salt_buckets: None,
            regions: vec![region(1, b"", 300, 0), region(2, b"\x01k", 100, 0)],
        };
        assert_eq!(r.data_shares(), vec![0.75, 0.25]);
        assert_eq!(r.write_shares(), vec![0.0, 0.0]);
        assert_eq!(r.max_data_share(), Some((0, 0.75)));
        let text = r.render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("REGION_NAME"), "{text}");
        assert!(lines[3].contains("\\x01k"), "{text}");
        assert!(
            lines[2].ends_with(&format!(" 75.0% {}", "#".repeat(30))),
            "{text}"
        );
        assert!(
            lines[3].contains(" | -           | "),
            "no writes since open: {text}"
        );
        assert!(text.contains("largest 75.0% (region 1)"), "{text}");
    }

    #[test]
    fn snapshot_space_counts_each_file_once() {
        let snap = |name: &str, own: Vec<(u64, u64)>| SnapshotDescription {
            name: name.into(),
            read_point: 7,
            created_ms: 0,
            tables: vec!["default:t".into()],
            descriptors: Vec::new(),
            regions: 1,
            files: 3,
            size: 3000,
            shared_size: 3000 - own.iter().map(|f| f.1).sum::<u64>(),
            own_size: own.iter().map(|f| f.1).sum(),
            own_files: own,
        };
        let text = render_snapshots(&[
            snap("a", vec![(1, 1024), (2, 1024)]),
            snap("b", vec![(2, 1024)]),
        ]);
        assert!(
            text.contains("  a  default:t  3 files  2.9 KiB  2.0 KiB held only by snapshots"),
            "{text}"
        );
        assert!(
            text.contains("space held only by snapshots: 2.0 KiB in 2 files"),
            "{text}"
        );
        assert_eq!(render_snapshots(&[]), "");
    }

    #[test]
    fn an_empty_table_has_zero_shares() {
        let r = TableReport {
            table: TableName::parse("t").unwrap(),
            salt_buckets: Some(4),
            regions: vec![region(1, b"", 0, 3), region(2, b"a", 0, 1)],
        };
        assert_eq!(r.data_shares(), vec![0.0, 0.0]);
        assert_eq!(r.write_shares(), vec![0.75, 0.25]);
        let text = r.render();
        assert!(text.contains("2 regions, salted into 4 buckets; 0 B in 2 store files, 0 cells"));
        assert!(
            text.contains("data share: the table stores no cells"),
            "{text}"
        );
        assert!(
            text.contains("| 3              |  75.0%      |   0.0%"),
            "{text}"
        );
    }
}
