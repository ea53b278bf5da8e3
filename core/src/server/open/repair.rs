//! Offline check and repair of a closed data directory: no engine is opened, so a
//! directory whose engine will not open can still be diagnosed and mended (HBase's hbck2,
//! RocksDB's repair tool).
//!
//! [`check_dir`] reads the catalog (its checksum covers every byte, so any damage to it is
//! reported), checks every store file it lists as `Engine::check_table` does (presence,
//! checksums, key order, block index, file info, bloom filters, and what the catalog
//! recorded), and reads the WAL without changing it, listing every piece of damage. It
//! reports file by file and changes nothing.
//!
//! [`repair_dir`] runs the check, then sets every store file with a finding aside: the file
//! is copied to the object `damaged/<name>` (`<dir>/damaged/<name>` in a local directory),
//! then removed from `data/` (never lost; `data/` would treat it as an orphan)
//! and dropped from every region that lists it, in one atomic catalog update. The report
//! names, for each, the table, the regions, the row range and the largest sequence id it
//! held and the cells it had: what may have been lost (a lost file may also have held delete
//! markers, so cells they hid can show again), and the tables whose derived data (indexes)
//! must be verified, which it records in the directory before it moves anything, for the
//! next `Connection` open to verify and repair. The regions then open again. The WAL is left to the next open, whose recovery
//! mode decides. A missing catalog while `data/` holds store files is reported (and the
//! engine refuses to open rather than delete them as orphans).
//!
//! Both take the directory's lock, so they refuse a directory an engine has open.

use super::check::{check_table_offline, IntegrityReport};
use super::directory::{lock_data_dir, missing_catalog};
use super::pending::with_coprocessors;
use crate::catalog::{Catalog, CatalogState};
use crate::error::{Error, Result};
use crate::objects::{Objects, PutMode};
use crate::schema::TableName;
use crate::server::config::Config;
use crate::wal::{Wal, WalDamage, WalRecoveryMode};
use bytes::Bytes;
use std::fmt;
use std::path::PathBuf;

/// What [`check_dir`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryCheck {
    /// The data directory.
    pub dir: PathBuf,
    /// Why the catalog could not be read, if it could not (then no table was checked).
    pub catalog_problem: Option<String>,
    /// Every table's store files, table by table.
    pub tables: Vec<IntegrityReport>,
    /// WAL segments read.
    pub wal_segments: usize,
    /// Every piece of damage in the WAL (the actions say what a salvage would do; the check
    /// did nothing).
    pub wal_damage: Vec<WalDamage>,
}

impl DirectoryCheck {
    /// True when the catalog, every store file and the WAL are sound.
    pub fn is_healthy(&self) -> bool {
        self.catalog_problem.is_none()
            && self.wal_damage.is_empty()
            && self.tables.iter().all(IntegrityReport::is_healthy)
    }

    /// Store files with at least one finding, over all tables.
    pub fn damaged_files(&self) -> usize {
        self.tables.iter().map(|t| t.files_damaged).sum()
    }
}

impl fmt::Display for DirectoryCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "data directory {}", self.dir.display())?;
        match &self.catalog_problem {
            Some(p) => writeln!(f, "catalog: DAMAGED: {p}")?,
            None => writeln!(f, "catalog: ok")?,
        }
        for t in &self.tables {
            write!(f, "{t}")?;
        }
        writeln!(
            f,
            "WAL: {} segments, {} damaged spots",
            self.wal_segments,
            self.wal_damage.len()
        )?;
        for d in &self.wal_damage {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

/// One store file [`repair_dir`] set aside, and what it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAsideFile {
    /// The table.
    pub table: TableName,
    /// The regions that listed it (several after a split).
    pub regions: Vec<u64>,
    /// The column family.
    pub family: Bytes,
    /// The file's id.
    pub file_id: u64,
    /// Where it was moved; `None` when it was missing.
    pub moved_to: Option<PathBuf>,
    /// The first row it may have held (inclusive; empty = the table's start).
    pub start_row: Bytes,
    /// The row it held rows before (exclusive; empty = the table's end).
    pub end_row: Bytes,
    /// The largest sequence id of its cells.
    pub max_seq: u64,
    /// How many cells it held, as the catalog recorded.
    pub cells: u64,
    /// The check's first finding.
    pub reason: String,
}

/// What [`repair_dir`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// The check the repair acted on.
    pub check: DirectoryCheck,
    /// The store files set aside.
    pub set_aside: Vec<SetAsideFile>,
    /// When files were set aside, the tables with coprocessors: a lost file may have held
    /// a table's rows or its index's (or delete markers, so deleted cells may show again),
    /// so what derives from each must be verified and repaired. The directory records
    /// them; the next `Connection` open runs its loader's recovery repairs on them
    /// (`RecoveryReport::repairs`).
    pub tables_to_verify: Vec<TableName>,
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.check)?;
        writeln!(f, "repair: {} store files set aside", self.set_aside.len())?;
        if !self.tables_to_verify.is_empty() {
            let names: Vec<String> = self
                .tables_to_verify
                .iter()
                .map(|t| t.to_string())
                .collect();
            writeln!(
                f,
                "  verified and repaired by the next open: {}",
                names.join(", ")
            )?;
        }
        for s in &self.set_aside {
            writeln!(
                f,
                "  table {} regions {:?} family {} file {}: rows [{}, {}), cells {}, seq <= {}, \
                 moved to {}: {}",
                s.table,
                s.regions,
                String::from_utf8_lossy(&s.family),
                s.file_id,
                String::from_utf8_lossy(&s.start_row),
                String::from_utf8_lossy(&s.end_row),
                s.cells,
                s.max_seq,
                s.moved_to
                    .as_ref()
                    .map_or("(missing)".to_string(), |p| p.display().to_string()),
                s.reason
            )?;
        }
        Ok(())
    }
}

/// Checks the closed data directory `config.dir` (see the module doc). Fails only when the
/// directory is open in an engine or cannot be listed; damage is reported, not returned.
pub fn check_dir(config: &Config) -> Result<DirectoryCheck> {
    let _lock = lock_dir(config)?;
    Ok(check_locked(config)?.0)
}

/// Checks, then sets aside every damaged or missing store file (see the module doc). Fails
/// when the directory is open in an engine, or when the catalog itself is damaged (nothing
/// is changed then).
pub fn repair_dir(config: &Config) -> Result<RepairReport> {
    let _lock = lock_dir(config)?;
    let (check, catalog) = check_locked(config)?;
    let Some(catalog) = catalog else {
        return Err(Error::corruption(
            config.dir.join("catalog"),
            0,
            format!(
                "the catalog is damaged ({}); restore it from a backup",
                check.catalog_problem.as_deref().unwrap_or("unreadable")
            ),
        ));
    };
    catalog.claim(0)?;
    let state = catalog.snapshot();
    let fs = &config.fs;
    let objects = config.resolved_objects();
    let damaged_any = check
        .tables
        .iter()
        .any(|t| t.files.iter().any(|f| !f.check.is_healthy()));
    // Setting a file aside may separate a table from what derives from it (its index table
    // may lose rows the data kept, or the reverse): recorded first, so that the next
    // `Connection` open verifies and repairs them even if this repair is interrupted.
    let tables_to_verify = if damaged_any {
        with_coprocessors(&state)
    } else {
        Vec::new()
    };
    super::pending::add(&**fs, &config.dir, &tables_to_verify)?;
    let mut set_aside: Vec<SetAsideFile> = Vec::new();
    for report in &check.tables {
        let key = report.table.to_string();
        for file in report.files.iter().filter(|f| !f.check.is_healthy()) {
            if set_aside.iter().any(|s| s.file_id == file.file_id) {
                continue; // listed by several regions (split daughters)
            }
            let (regions, start_row, end_row, max_seq, cells, name) =
                holders(&state, &key, file.file_id);
            let moved_to = if objects.exists(&name)? {
                let to = format!("damaged/{}", name.trim_start_matches("data/"));
                copy_object(&*objects, &name, &to)?;
                objects.delete(&name)?;
                Some(objects.locate(&to))
            } else {
                None
            };
            set_aside.push(SetAsideFile {
                table: report.table.clone(),
                regions,
                family: file.family.clone(),
                file_id: file.file_id,
                moved_to,
                start_row,
                end_row,
                max_seq,
                cells,
                reason: file
                    .check
                    .findings
                    .first()
                    .map(|f| f.to_string())
                    .unwrap_or_default(),
            });
        }
    }
    if !set_aside.is_empty() {
        catalog.update(|s| {
            // A snapshot listing a file set aside stops listing it too: the file is no
            // longer in `data/`.
            let snapshots = s.snapshots.values_mut().flat_map(|x| x.tables.values_mut());
            for t in s.tables.values_mut().chain(snapshots) {
                for r in &mut t.regions {
                    for files in r.files.values_mut() {
                        files.retain(|f| !set_aside.iter().any(|a| a.file_id == f.id));
                    }
                }
            }
            Ok(())
        })?;
        tracing::warn!(
            files = set_aside.len(),
            "offline repair set damaged store files aside"
        );
    }
    Ok(RepairReport {
        check,
        set_aside,
        tables_to_verify,
    })
}

/// The regions of table `key` listing file `id`, their row range, and the file's largest
/// seq and cell count as the catalog recorded them.
/// The regions listing file `id` of table `key`, their first start and last end, and the
/// file's largest sequence id, cell count and object name.
fn holders(state: &CatalogState, key: &str, id: u64) -> (Vec<u64>, Bytes, Bytes, u64, u64, String) {
    let mut regions = Vec::new();
    let (mut start, mut end): (Option<Bytes>, Option<Bytes>) = (None, None);
    let (mut max_seq, mut cells) = (0, 0);
    let mut name = crate::catalog::store_file_name(id, 0);
    for r in state.tables.get(key).into_iter().flat_map(|t| &t.regions) {
        let Some(f) = r.files.values().flatten().find(|f| f.id == id) else {
            continue;
        };
        regions.push(r.id);
        max_seq = f.max_seq;
        cells = f.entries;
        name = f.name();
        // Regions come in key order: the first one's start, the last one's end.
        start.get_or_insert_with(|| r.start.clone());
        end = Some(r.end.clone());
    }
    (
        regions,
        start.unwrap_or_default(),
        end.unwrap_or_default(),
        max_seq,
        cells,
        name,
    )
}

fn lock_dir(config: &Config) -> Result<Box<dyn crate::fs::FileLock>> {
    if !config.fs.exists(&config.dir)? {
        return Err(Error::bad_argument(format!(
            "{} is not a data directory",
            config.dir.display()
        )));
    }
    lock_data_dir(config)
}

/// The check, and the catalog when it could be read.
fn check_locked(config: &Config) -> Result<(DirectoryCheck, Option<Catalog>)> {
    let fs = &config.fs;
    let mut check = DirectoryCheck {
        dir: config.dir.clone(),
        catalog_problem: None,
        tables: Vec::new(),
        wal_segments: 0,
        wal_damage: Vec::new(),
    };
    let objects = config.resolved_objects();
    let catalog = match missing_catalog(&*objects)? {
        Some(problem) => {
            check.catalog_problem = Some(problem);
            None
        }
        None => match Catalog::open(&objects) {
            Ok(c) => Some(c),
            Err(e) => {
                check.catalog_problem = Some(e.to_string());
                None
            }
        },
    };
    if let Some(catalog) = &catalog {
        let state = catalog.snapshot();
        for (key, entry) in &state.tables {
            check.tables.push(check_table_offline(
                &*objects,
                &state,
                key,
                &entry.descriptor.name,
            )?);
        }
    }
    let wal_dir = config.dir.join("wal");
    if fs.exists(&wal_dir)? {
        // Salvage reads every segment to its end and lists every bad spot; scanning
        // changes nothing.
        let scanned = Wal::scan_dir(fs, &wal_dir, WalRecoveryMode::Salvage)?;
        check.wal_segments = scanned.segments_read;
        check.wal_damage = scanned.damage;
    }
    Ok((check, catalog))
}

/// Copies object `from` to `to` (overwriting a copy an interrupted repair left), a mebibyte
/// at a time; `to` is durable when this returns.
fn copy_object(objects: &dyn Objects, from: &str, to: &str) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let source = objects.open(from)?;
    let size = source.size()?;
    let mut out = objects.writer(to)?;
    let mut buf = Vec::new();
    let mut at = 0;
    while at < size {
        let len = (size - at).min(CHUNK);
        buf.resize(len as usize, 0);
        source.read_exact_at(&mut buf, at)?;
        out.write_all(&buf)?;
        at += len;
    }
    out.finish(PutMode::Overwrite)?;
    Ok(())
}
