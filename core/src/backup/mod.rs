//! Backups: a data directory's tables at one read point, copied with checksums to another
//! object store ([`crate::objects`]: a directory, or any `object_store` backend), and
//! rebuilt from there into a new data directory.
//!
//! Layout of a backup target:
//!
//! - `files/{id:016}-g{generation}-{crc32:08x}-{size}.sf`: a store file, named by its
//!   identity, checksum and size. Stored whole (create-if-absent) before any manifest names
//!   it, never changed, and shared by every backup that holds it: a later backup copies only
//!   the files the target lacks (incremental), and a file shared by several backups is
//!   stored once.
//! - `backups/{n:020}.manifest`: backup `n`, created (create-if-absent) after every file it
//!   names is stored. A backup interrupted before its manifest is no backup: nothing lists
//!   it, and its files are reused by the next one.
//!
//! Manifest format (integers big-endian): magic `BSLTBAK1` (8 bytes), format version 1
//! (4), payload length N (4), CRC32 (IEEE) of the first 16 bytes and the payload (4), then
//! the payload: [`BackupManifest`] in postcard encoding. Nothing may follow. The manifest
//! carries the catalog as its file bytes (`crate::catalog`'s format, with its own checksum).
//!
//! Invariants: every file a manifest names was stored, checked against its checksum while
//! it was copied, before the manifest; a file the target holds already is taken only when
//! its size matches (a damaged one is stored again); a restore verifies every file's size
//! and checksum, and that the catalog lists exactly the manifest's files, before it writes
//! anything, writes into an empty directory only, under the directory's lock, and moves the
//! restored directory's next store file id far on (a random step of 2^24 to 2^44), so the
//! files it writes later do not take names its source's later files may have.

mod copy;
mod manifest;

use crate::catalog::{self, CatalogState, FileEntry};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::objects::{LocalObjects, Objects, PutMode};
use copy::{checksum, copy, Existing, Pace};
pub(crate) use manifest::{decode, encode};
pub use manifest::{BackupFile, BackupManifest};
use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The folder of the stored files.
const FILES: &str = "files";
/// The folder of the manifests.
const MANIFESTS: &str = "backups";

/// A callback told of a backup's progress after every file.
pub type ProgressFn = Arc<dyn Fn(&BackupProgress) + Send + Sync>;

/// How a backup runs.
#[derive(Clone, Default)]
pub struct BackupOptions {
    /// At most this many bytes copied a second (`None`: as fast as the stores go).
    pub max_bytes_per_sec: Option<u64>,
    /// Called after every file with the work done so far.
    pub progress: Option<ProgressFn>,
}

impl std::fmt::Debug for BackupOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupOptions")
            .field("max_bytes_per_sec", &self.max_bytes_per_sec)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// Work done by a backup, a verification or a restore.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupProgress {
    /// Files handled.
    pub files_done: usize,
    /// Files in all.
    pub files_total: usize,
    /// Bytes of the files handled.
    pub bytes_done: u64,
    /// Bytes of every file.
    pub bytes_total: u64,
    /// Bytes actually copied (a file the target holds already is not).
    pub bytes_copied: u64,
}

/// What a backup or a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSummary {
    /// The backup's number in its target.
    pub id: u64,
    /// Its read point.
    pub read_point: u64,
    /// Its tables.
    pub tables: Vec<String>,
    /// The files it names, and their bytes.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// The files copied (the others were in the target already).
    pub copied_files: usize,
    /// Their bytes.
    pub copied_bytes: u64,
}

/// What a verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupCheck {
    /// The backup checked.
    pub id: u64,
    /// The files it names.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Each damaged file (its stored name) and what is wrong; empty when the backup is
    /// whole.
    pub damaged: Vec<(String, String)>,
}

impl BackupCheck {
    /// True when every file is present with its size and checksum.
    pub fn is_whole(&self) -> bool {
        self.damaged.is_empty()
    }
}

/// The backups `target` holds, oldest first.
pub fn list_backups(target: &dyn Objects) -> Result<Vec<u64>> {
    let mut ids: Vec<u64> = target
        .list(MANIFESTS)?
        .iter()
        .filter_map(|n| n.strip_prefix("backups/")?.strip_suffix(".manifest"))
        .filter(|n| n.len() == 20)
        .filter_map(|n| n.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Backup `id` of `target` (the newest when `None`), its manifest checked.
pub fn read_manifest(target: &dyn Objects, id: Option<u64>) -> Result<BackupManifest> {
    let id = match id {
        Some(id) => id,
        None => *list_backups(target)?.last().ok_or_else(|| {
            Error::bad_argument(format!(
                "{} holds no complete backup (a backup interrupted before its manifest was \
                 written is not one)",
                target.locate("").display()
            ))
        })?,
    };
    let name = manifest_name(id);
    let bytes = match target.read(&name) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::bad_argument(format!(
                "{} holds no backup {id}",
                target.locate("").display()
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let manifest = decode(&target.locate(&name), &bytes)?;
    if manifest.id != id {
        return Err(Error::corruption(
            target.locate(&name),
            0,
            format!(
                "the manifest of backup {id} says it is backup {}",
                manifest.id
            ),
        ));
    }
    Ok(manifest)
}

/// Copies the store files `state`'s tables list from `source` to `target` (those it lacks)
/// and then stores the manifest of a backup of them at `read_point`; see the module doc.
pub(crate) fn write_backup(
    source: &dyn Objects,
    target: &dyn Objects,
    state: &CatalogState,
    read_point: u64,
    options: &BackupOptions,
) -> Result<BackupSummary> {
    let entries: BTreeMap<u64, FileEntry> = state
        .tables
        .values()
        .flat_map(|t| &t.regions)
        .flat_map(|r| r.files.values().flatten())
        .map(|f| (f.id, f.clone()))
        .collect();
    let stored: HashSet<String> = target.list(FILES)?.into_iter().collect();
    let mut progress = BackupProgress {
        files_total: entries.len(),
        bytes_total: entries.values().fold(0, |n, f| n.saturating_add(f.size)),
        ..BackupProgress::default()
    };
    let mut pace = Pace::new(options.max_bytes_per_sec);
    let mut files = Vec::with_capacity(entries.len());
    let mut copied_files = 0;
    for f in entries.values() {
        let name = f.name();
        let (size, crc32) = checksum(source, &name)?;
        if size != f.size {
            return Err(Error::corruption(
                source.locate(&name),
                0,
                format!(
                    "{size} bytes, the catalog records {}: not backed up",
                    f.size
                ),
            ));
        }
        let file = BackupFile {
            stored: stored_name(f, crc32, size),
            name,
            size,
            crc32,
        };
        // A stored file of the name is this one (same id, generation, checksum and size)
        // unless it was damaged since: its size at least is checked (`--verify` reads it).
        let whole = stored.contains(&file.stored)
            && target.open(&file.stored).and_then(|o| o.size()).ok() == Some(size);
        if !whole {
            copy(
                source,
                &file.name,
                target,
                &file.stored,
                crc32,
                Existing::Replace,
                &mut pace,
            )?;
            copied_files += 1;
            progress.bytes_copied = progress.bytes_copied.saturating_add(size);
        }
        progress.files_done += 1;
        progress.bytes_done = progress.bytes_done.saturating_add(size);
        if let Some(p) = &options.progress {
            p(&progress);
        }
        files.push(file);
    }
    let catalog = catalog::encode(state)?;
    let tables: Vec<String> = state.tables.keys().cloned().collect();
    // The manifest last: the next number free, taken create-if-absent.
    let mut id = list_backups(target)?
        .last()
        .map_or(Some(1), |n| n.checked_add(1))
        .ok_or_else(|| Error::bad_argument("the target's backup numbers are used up"))?;
    loop {
        let manifest = BackupManifest {
            id,
            created_ms: crate::cell::now_ms(),
            read_point,
            tables: tables.clone(),
            catalog: catalog.clone(),
            files: files.clone(),
        };
        match target.put(&manifest_name(id), &encode(&manifest)?, PutMode::Create) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                id = id
                    .checked_add(1)
                    .ok_or_else(|| Error::bad_argument("the target's backup numbers are used up"))?
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(BackupSummary {
        id,
        read_point,
        tables,
        files: files.len(),
        bytes: progress.bytes_total,
        copied_files,
        copied_bytes: progress.bytes_copied,
    })
}

/// Re-reads backup `id` of `target` (the newest when `None`): every file present, of its
/// size and checksum, and the catalog readable.
pub fn verify_backup(
    target: &dyn Objects,
    id: Option<u64>,
    progress: Option<&(dyn Fn(&BackupProgress) + Sync)>,
) -> Result<BackupCheck> {
    let manifest = read_manifest(target, id)?;
    Ok(verify_manifest(target, &manifest, progress))
}

/// Checks every file `manifest` names in `target`, and its catalog.
fn verify_manifest(
    target: &dyn Objects,
    manifest: &BackupManifest,
    progress: Option<&(dyn Fn(&BackupProgress) + Sync)>,
) -> BackupCheck {
    let mut check = BackupCheck {
        id: manifest.id,
        files: manifest.files.len(),
        bytes: manifest
            .files
            .iter()
            .fold(0, |n: u64, f| n.saturating_add(f.size)),
        damaged: Vec::new(),
    };
    match catalog::decode(Path::new("catalog"), &manifest.catalog) {
        Err(e) => check.damaged.push(("catalog".into(), e.to_string())),
        Ok(state) => {
            // The catalog's files and the manifest's are the same set.
            let named: HashSet<&str> = manifest.files.iter().map(|f| f.name.as_str()).collect();
            let listed = state.listed_file_names();
            if listed.len() != named.len() || !listed.iter().all(|n| named.contains(n.as_str())) {
                check.damaged.push((
                    "catalog".into(),
                    "the catalog's store files are not the manifest's".into(),
                ));
            }
        }
    }
    let mut done = BackupProgress {
        files_total: check.files,
        bytes_total: check.bytes,
        ..BackupProgress::default()
    };
    for f in &manifest.files {
        match checksum(target, &f.stored) {
            Ok((size, _)) if size != f.size => check.damaged.push((
                f.stored.clone(),
                format!("{size} bytes, the manifest records {}", f.size),
            )),
            Ok((_, crc)) if crc != f.crc32 => check.damaged.push((
                f.stored.clone(),
                format!("checksum {crc:08x}, the manifest records {:08x}", f.crc32),
            )),
            Ok(_) => {}
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                check.damaged.push((f.stored.clone(), "missing".into()))
            }
            Err(e) => check.damaged.push((f.stored.clone(), e.to_string())),
        }
        done.files_done += 1;
        done.bytes_done = done.bytes_done.saturating_add(f.size);
        if let Some(p) = progress {
            p(&done);
        }
    }
    check
}

/// Rebuilds a data directory at `dir` (missing or empty) on `fs` from backup `id` of
/// `target` (the newest when `None`): verifies every file first (a damaged backup fails
/// with [`Error::Corruption`] before anything is written), then copies the files, checked
/// again as they are copied, and writes the catalog last.
pub fn restore_backup(
    target: &dyn Objects,
    id: Option<u64>,
    fs: Arc<dyn FileSystem>,
    dir: &Path,
    progress: Option<&(dyn Fn(&BackupProgress) + Sync)>,
) -> Result<BackupSummary> {
    let manifest = read_manifest(target, id)?;
    let check = verify_manifest(target, &manifest, None);
    if let Some((file, why)) = check.damaged.first() {
        return Err(Error::corruption(
            target.locate(file),
            0,
            format!(
                "backup {} is damaged ({} of {} files): {why}; nothing was restored",
                manifest.id,
                check.damaged.len(),
                check.files
            ),
        ));
    }
    if fs.exists(dir)? && !fs.list_dir(dir)?.is_empty() {
        return Err(Error::bad_argument(format!(
            "{} is not empty: a backup is restored into a new directory",
            dir.display()
        )));
    }
    fs.create_dir_all(dir)?;
    // One restore (or engine) at a time in the directory: the engine's lock.
    let _lock = fs.lock(&dir.join("LOCK"))?;
    let objects = LocalObjects::new(fs, dir.to_path_buf());
    let mut pace = Pace::new(None);
    let mut done = BackupProgress {
        files_total: check.files,
        bytes_total: check.bytes,
        ..BackupProgress::default()
    };
    for f in &manifest.files {
        copy(
            target,
            &f.stored,
            &objects,
            &f.name,
            f.crc32,
            Existing::Exclusive,
            &mut pace,
        )?;
        done.files_done += 1;
        done.bytes_done = done.bytes_done.saturating_add(f.size);
        done.bytes_copied = done.bytes_copied.saturating_add(f.size);
        if let Some(p) = progress {
            p(&done);
        }
    }
    // The restored directory hands out store file ids far from the source's: files it
    // writes later never take a name (id, generation) the source's later files may have
    // in a target they both back up to.
    let mut state = catalog::decode(&target.locate("catalog"), &manifest.catalog)?;
    state.next_file_id = state
        .next_file_id
        .saturating_add(random_up_to(1 << 20) << 24);
    objects.put("catalog", &catalog::encode(&state)?, PutMode::Create)?;
    Ok(BackupSummary {
        id: manifest.id,
        read_point: manifest.read_point,
        tables: manifest.tables.clone(),
        files: check.files,
        bytes: check.bytes,
        copied_files: check.files,
        copied_bytes: check.bytes,
    })
}

/// A random number in `1..=bound` (the standard library's randomly keyed hasher over the
/// time).
pub(crate) fn random_up_to(bound: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish() % bound.max(1) + 1
}

/// The target name of store file `f` with checksum `crc32` and `size` bytes.
fn stored_name(f: &FileEntry, crc32: u32, size: u64) -> String {
    format!(
        "{FILES}/{:016}-g{}-{crc32:08x}-{size}.sf",
        f.id, f.generation
    )
}

fn manifest_name(id: u64) -> String {
    format!("{MANIFESTS}/{id:020}.manifest")
}

#[cfg(test)]
mod tests;
