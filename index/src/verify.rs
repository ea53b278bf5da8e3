//! Verifying an index against its data and repairing what differs
//! ([`IndexAdmin::verify`], [`IndexAdmin::repair`]).
//!
//! Verify reads the data table and derives every index row it gives, reads the index rows
//! (the index table, or each region's local rows), and reports the rows missing, extra and
//! stale; rows whose values expired are left out on both sides. Repair touches the data
//! rows that own a difference, which rewrites their index rows under their row locks, and
//! has the maintainers delete the extra rows at those touches.
//!
//! Invariant: verify changes nothing; repair writes only through touches of data rows, so
//! a repair racing writes leaves the index as consistent as the writes do.

use crate::admin::{IndexAdmin, BUILD_BATCH};
use crate::layout::{Entry, FAMILY};
use crate::query::Index;
use basalt_core::client::{Backend, BatchOp, Put, RowResult, Scan};
use basalt_core::now_ms;
use basalt_core::{IntoTableName, Result};
use bytes::Bytes;
use futures::TryStreamExt;
use std::collections::{BTreeMap, HashMap};

/// What [`IndexAdmin::verify`] found: index rows (physical keys) missing, extra (no data row
/// gives them) or stale (present with other cells than the data row gives).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Data rows read.
    pub data_rows: u64,
    /// Index rows read.
    pub index_rows: u64,
    /// Index rows the data needs and the index lacks.
    pub missing: Vec<Bytes>,
    /// Index rows no data row gives.
    pub extra: Vec<Bytes>,
    /// Index rows whose cells differ from what the data row gives.
    pub stale: Vec<Bytes>,
}

impl VerifyReport {
    /// True when data and index agree.
    pub fn is_consistent(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.stale.is_empty()
    }
    /// How many differences were found.
    pub fn differences(&self) -> usize {
        self.missing.len() + self.extra.len() + self.stale.len()
    }
}

impl<B: Backend> IndexAdmin<B> {
    /// Compares index `name` of `table` with its data table (meant for a quiet table: rows
    /// written during the two scans may show as differences). Index rows whose values
    /// expired are left out on both sides.
    pub async fn verify(&self, table: impl IntoTableName, name: &str) -> Result<VerifyReport> {
        self.verify_with_progress(table, name, |_| {}).await
    }

    /// [`IndexAdmin::verify`], reporting the rows read so far (data rows, then index rows)
    /// to `progress` every [`BUILD_BATCH`](crate::BUILD_BATCH) rows and once at the end.
    pub async fn verify_with_progress(
        &self,
        table: impl IntoTableName,
        name: &str,
        mut progress: impl FnMut(u64) + Send,
    ) -> Result<VerifyReport> {
        let table = &table.into_table_name()?;
        let def = self.describe(table, name).await?;
        let h = self.handle(def).await?;
        Ok(self.compare(&h, &mut progress).await?.0)
    }

    async fn compare(
        &self,
        h: &Index<B>,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<(VerifyReport, HashMap<Bytes, Bytes>)> {
        let now = now_ms();
        let ttl = |f: &[u8]| h.ttls.get(f).copied();
        let live =
            |cells: &BTreeMap<Bytes, Bytes>| h.layout.expiry(cells, &ttl).is_none_or(|x| x > now);
        let mut report = VerifyReport::default();
        let mut expected: BTreeMap<Bytes, (Entry, Bytes)> = BTreeMap::new();
        let local = if h.layout.def.local {
            Some(crate::local::stored_rows(&h.layout, &h.data).await?)
        } else {
            None
        };
        let mut data_rows = h.data.scan(Scan::new())?;
        while let Some(r) = data_rows.try_next().await? {
            report.data_rows += 1;
            if report.data_rows.is_multiple_of(BUILD_BATCH as u64) {
                progress(report.data_rows);
            }
            if let Some(mut e) = h.layout.entry(&r.row, &r)? {
                if let Some((starts, _)) = &local {
                    let start = crate::local::region_start_of(starts, &r.row);
                    e.row = h.layout.local_key(start, &e.row, &r.row)?;
                }
                if live(&e.cells) {
                    if let Some((prev, _)) = expected.insert(e.row.clone(), (e, r.row.clone())) {
                        // Two data rows on one unique value: one of them is not indexed.
                        report.stale.push(prev.row);
                    }
                }
            }
        }
        let mut owners = HashMap::new();
        let mut check = |row: Bytes, owner: Result<Bytes>, cells: BTreeMap<Bytes, Bytes>| {
            report.index_rows += 1;
            if report.index_rows.is_multiple_of(BUILD_BATCH as u64) {
                progress(report.data_rows + report.index_rows);
            }
            if !live(&cells) {
                return;
            }
            if let Ok(owner) = owner {
                owners.insert(row.clone(), owner);
            }
            match expected.remove(&row) {
                None => report.extra.push(row),
                Some((e, owner)) if e.cells != cells => {
                    owners.insert(row.clone(), owner);
                    report.stale.push(row);
                }
                Some(_) => {}
            }
        };
        if let Some((_, rows)) = local {
            for (row, logical, cells) in rows {
                let owner = h.layout.data_row_logical(&logical, &cells);
                check(row, owner, cells);
            }
        } else {
            let iname = h.layout.def.index_table()?.to_string();
            let mut index_rows = self.conn.table(&iname)?.scan(Scan::new())?;
            while let Some(r) = index_rows.try_next().await? {
                let cells = cells_of(&r);
                let owner = h.layout.data_row(&r.row, &cells);
                check(r.row.clone(), owner, cells);
            }
        }
        progress(report.data_rows + report.index_rows);
        for (k, (_, owner)) in expected {
            owners.insert(k.clone(), owner);
            report.missing.push(k);
        }
        Ok((report, owners))
    }

    /// Verifies index `name` of `table` and repairs what differs: missing and stale index
    /// rows are rewritten by touching their data rows, extra ones deleted under their data
    /// row's lock. Returns what was found before the repair.
    pub async fn repair(&self, table: impl IntoTableName, name: &str) -> Result<VerifyReport> {
        self.repair_with_progress(table, name, |_| {}).await
    }

    /// [`IndexAdmin::repair`], reporting the rows its verification has read to `progress`
    /// as [`IndexAdmin::verify_with_progress`] does.
    pub async fn repair_with_progress(
        &self,
        table: impl IntoTableName,
        name: &str,
        mut progress: impl FnMut(u64) + Send,
    ) -> Result<VerifyReport> {
        let table = &table.into_table_name()?;
        let def = self.describe(table, name).await?;
        let h = self.handle(def).await?;
        let (report, owners) = self.compare(&h, &mut progress).await?;
        for row in report.extra.iter() {
            if let Some(owner) = owners.get(row).filter(|o| !o.is_empty()) {
                self.runtime("repairing extra index rows")?.schedule_delete(
                    &h.layout.def.table,
                    owner.clone(),
                    name,
                    row.clone(),
                );
            }
        }
        let mut touched: Vec<&Bytes> = report
            .missing
            .iter()
            .chain(&report.stale)
            .chain(&report.extra)
            .filter_map(|r| owners.get(r))
            .filter(|o| !o.is_empty())
            .collect();
        touched.sort();
        touched.dedup();
        for chunk in touched.chunks(BUILD_BATCH) {
            let ops = chunk.iter().map(|r| BatchOp::Put(Put::touch(r))).collect();
            for r in h.data.batch(ops).await? {
                r?;
            }
        }
        Ok(report)
    }
}

fn cells_of(r: &RowResult) -> BTreeMap<Bytes, Bytes> {
    r.cells
        .iter()
        .filter(|c| c.family.as_ref() == FAMILY)
        .map(|c| (c.qualifier.clone(), c.value.clone()))
        .collect()
}
