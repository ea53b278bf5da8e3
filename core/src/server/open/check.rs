//! Table integrity checks: every store file the catalog lists for a table, read from disk.
//!
//! [`EngineShared::check_table`] takes one catalog snapshot, then checks each listed file with
//! [`verify_file`] (no block cache, off the async workers) and compares the file with what
//! the catalog recorded about it (size, cell count, largest sequence id). A file the catalog
//! lists but the disk lacks is reported as [`FindingKind::Missing`] - unless a second
//! catalog snapshot, taken after the check, no longer lists it (a compaction or a table
//! change retired it meanwhile), so a concurrent change is never mistaken for damage. Files
//! that flushes add after the first snapshot are not checked this time.

use crate::catalog::{CatalogState, FileEntry};
use crate::error::{Error, Result};
use crate::objects::Objects;
use crate::schema::TableName;
use crate::server::shared::EngineShared;
use crate::storage::storefile::{verify_file, FileCheck, Finding, FindingKind};
use bytes::Bytes;
use std::collections::HashSet;
use std::fmt;

/// The check of one store file of one region's family.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoreFileReport {
    /// The region's id.
    pub region_id: u64,
    /// The region's name (`table,start,id`).
    pub region: String,
    /// The column family.
    pub family: Bytes,
    /// The store file's engine-wide id (`data/{id:016}.sf`).
    pub file_id: u64,
    /// What the check found; `check.findings` is empty for a healthy file.
    pub check: FileCheck,
}

impl StoreFileReport {
    /// True when the file is listed in the catalog but absent from disk.
    pub fn is_missing(&self) -> bool {
        self.check
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::Missing)
    }
}

/// What `Engine::check_table` found, file by file, with totals.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IntegrityReport {
    /// The table checked.
    pub table: TableName,
    /// Regions whose files were checked.
    pub regions: usize,
    /// One entry per store file the catalog lists, in region, family, then newest-first file
    /// order.
    pub files: Vec<StoreFileReport>,
    /// Store files checked (missing ones included).
    pub files_checked: usize,
    /// Store files listed in the catalog but absent from disk.
    pub files_missing: usize,
    /// Store files with at least one finding (missing ones included).
    pub files_damaged: usize,
    /// Findings in all files.
    pub problems: usize,
    /// Data blocks read.
    pub data_blocks: u64,
    /// Cells read.
    pub cells: u64,
}

impl IntegrityReport {
    fn new(table: TableName, regions: usize, files: Vec<StoreFileReport>) -> Self {
        IntegrityReport {
            table,
            regions,
            files_checked: files.len(),
            files_missing: files.iter().filter(|f| f.is_missing()).count(),
            files_damaged: files.iter().filter(|f| !f.check.is_healthy()).count(),
            problems: files.iter().map(|f| f.check.findings.len()).sum(),
            data_blocks: files.iter().map(|f| f.check.data_blocks).sum(),
            cells: files.iter().map(|f| f.check.cells).sum(),
            files,
        }
    }

    /// True when no file has a finding.
    pub fn is_healthy(&self) -> bool {
        self.problems == 0
    }

    /// Every finding, file by file.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.files.iter().flat_map(|f| f.check.findings.iter())
    }
}

impl fmt::Display for IntegrityReport {
    /// A summary line, then one line per finding.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "table {}: {} regions, {} store files ({} missing, {} damaged), {} problems, \
             {} data blocks and {} cells read",
            self.table,
            self.regions,
            self.files_checked,
            self.files_missing,
            self.files_damaged,
            self.problems,
            self.data_blocks,
            self.cells
        )?;
        for file in &self.files {
            for finding in &file.check.findings {
                writeln!(
                    f,
                    "  region {} family {}: {finding}",
                    file.region,
                    lossy(&file.family)
                )?;
            }
        }
        Ok(())
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One file to check, as the catalog lists it.
struct Job {
    region_id: u64,
    region: String,
    family: Bytes,
    entry: FileEntry,
}

impl EngineShared {
    /// Checks every store file of every region and family of table `name` (see the module
    /// doc). Fails only if the table does not exist or the engine is closed; damage is
    /// reported in the [`IntegrityReport`], not as an error.
    pub(crate) async fn check_table(&self, name: &TableName) -> Result<IntegrityReport> {
        self.table(name)?;
        let key = name.to_string();
        let (regions, jobs) = self.catalog_jobs(&key)?;
        let objects = self.objects.clone();
        let mut files = tokio::task::spawn_blocking(move || {
            jobs.into_iter()
                .map(|job| check_one(&*objects, job))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| Error::Io(std::io::Error::other(format!("check task failed: {e}"))))?;
        if files.iter().any(StoreFileReport::is_missing) {
            let still: HashSet<u64> = match self.catalog_jobs(&key) {
                Ok((_, jobs)) => jobs.iter().map(|j| j.entry.id).collect(),
                Err(_) => HashSet::new(),
            };
            files.retain(|f| !f.is_missing() || still.contains(&f.file_id));
        }
        Ok(IntegrityReport::new(name.clone(), regions, files))
    }

    /// The region count and the files the catalog lists for table `key`, right now.
    fn catalog_jobs(&self, key: &str) -> Result<(usize, Vec<Job>)> {
        catalog_jobs(&self.catalog.snapshot(), key)
    }
}

/// Checks every store file `state` lists for table `key` in `objects`, with no engine open
/// (the offline check, [`super::repair`]).
pub(crate) fn check_table_offline(
    objects: &dyn Objects,
    state: &CatalogState,
    key: &str,
    name: &TableName,
) -> Result<IntegrityReport> {
    let (regions, jobs) = catalog_jobs(state, key)?;
    let files = jobs
        .into_iter()
        .map(|job| check_one(objects, job))
        .collect();
    Ok(IntegrityReport::new(name.clone(), regions, files))
}

/// The region count and the files `state` lists for table `key`.
fn catalog_jobs(state: &CatalogState, key: &str) -> Result<(usize, Vec<Job>)> {
    {
        let entry = state
            .tables
            .get(key)
            .ok_or_else(|| Error::TableNotFound(key.to_string()))?;
        let mut jobs = Vec::new();
        for r in &entry.regions {
            let region = format!("{key},{},{}", lossy(&r.start), r.id);
            for (family, list) in &r.files {
                for f in list {
                    jobs.push(Job {
                        region_id: r.id,
                        region: region.clone(),
                        family: family.clone(),
                        entry: f.clone(),
                    });
                }
            }
        }
        Ok((entry.regions.len(), jobs))
    }
}

/// Checks one file and compares it with its catalog entry.
fn check_one(objects: &dyn Objects, job: Job) -> StoreFileReport {
    let mut check = verify_file(objects, &job.entry.name());
    let e = &job.entry;
    if check
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::Missing)
    {
        if check.file_size != e.size {
            let reason = format!(
                "catalog records {} bytes, the file has {}",
                e.size, check.file_size
            );
            check.add(0, FindingKind::Catalog, reason);
        }
        if check.is_healthy() && check.cells != e.entries {
            let reason = format!(
                "catalog records {} cells, the file holds {}",
                e.entries, check.cells
            );
            check.add(0, FindingKind::Catalog, reason);
        }
    }
    StoreFileReport {
        region_id: job.region_id,
        region: job.region,
        family: job.family,
        file_id: e.id,
        check,
    }
}
