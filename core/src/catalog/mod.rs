//! The catalog: the crash-safe record of namespaces, tables, regions and their store files.
//!
//! It plays the role of HBase's `hbase:meta` plus each store's file list. The whole state is
//! one small object, `catalog`, replaced atomically on every change (an overwriting put of
//! `crate::objects`: on a local directory the new state is written to a temporary file,
//! fsynced, renamed over `catalog`, and the directory fsynced). A crash at any point leaves
//! either the old or the new state, never a mix.
//!
//! File layout (all integers big-endian):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `BSLTCAT1` |
//! | 8 | 4 | format version: 14 (1 to 13 are still read, see below) |
//! | 12 | 4 | payload length N |
//! | 16 | 4 | crc32 (IEEE, crc32fast) of bytes 0..16 followed by the payload (versions 1 to 5: of the payload alone) |
//! | 20 | N | payload: [`CatalogState`] in postcard encoding |
//!
//! Nothing may follow the payload: trailing bytes are reported as corruption, so every byte
//! of the file is checked.
//!
//! Postcard's wire format is stable and documented (varint integers, length-prefixed byte
//! strings, fields in declaration order). It is not self-describing, so a struct that gains a
//! field needs a new format version, and the previous version's structs are kept to read old
//! catalogs. Version 2 appended [`crate::schema::CompactionSettings`] to every table
//! descriptor; a version-1 catalog is read with the defaults and rewritten in the current
//! version on its next update. Version 3 appended the coprocessor list
//! ([`crate::schema::CoprocessorDescriptor`]: name, priority, arguments, failure policy,
//! timeout) to every table descriptor; a version-2 catalog is read with no coprocessors.
//! Version 4 appended the salt ([`crate::schema::salt::SaltSpec`]); a version-3 catalog is
//! read as unsalted. Version 5 appended the compaction compression (HBase's
//! `COMPRESSION_COMPACT`) to every column-family descriptor; older catalogs are read with
//! none (compactions use the family's compression). Version 6 extended the checksum over the
//! header's first 16 bytes; its payload is version 5's. Version 7 widened a family's
//! keep-deleted-cells from a `bool` to [`crate::schema::KeepDeletedCells`] (adding the `Ttl`
//! mode); postcard writes the enum's discriminant as one varint byte, 0 or 1 for the old
//! values, so a version-5 or -6 payload reads unchanged. Version 8 added the generation of
//! every region ([`RegionEntry::generation`], raised each time an engine opens the store) and
//! of every store file (its region's when written, part of its name, see
//! [`store_file_name`]); older catalogs are read with generation 0 everywhere, the files
//! keeping their names without one. Version 9 added, for every region, the WAL writers that
//! may hold its edits above its flushed sequence id ([`RegionEntry::writers`]), and to the
//! state the next writer number ([`CatalogState::next_writer`]) and the version of the
//! newest whole-store claim ([`CatalogState::store_claim`]); a version-8 catalog is read
//! with no writers known (an engine opening some regions of it then reads every writer).
//! Version 10 added the lineage ([`CatalogState::lineage`]): on an object store every
//! version records the nonces of the versions it descends from; a version-9 catalog is
//! read with none. Version 11 appended the split restriction
//! ([`crate::schema::SplitRestriction`]) to every table descriptor; a version-10 catalog
//! is read with none. Version 12 added the table snapshots ([`CatalogState::snapshots`],
//! [`SnapshotEntry`]); a version-11 catalog is read with none. Version 13 added the
//! uploaded plugins ([`CatalogState::plugins`]); a version-12 catalog is read with none.
//! Version 14 added the blocks of store file ids each WAL writer reserved on a shared
//! store ([`CatalogState::file_blocks`]); a version-13 catalog is read with none (its
//! unlisted files are never collected).
//! On an object store that is not local, the catalog is versioned instead (see
//! `versions.rs`): `catalog/{n:020}`, each version created create-if-absent, so an engine
//! that claimed the whole store after this one makes this one's later updates fail with
//! [`Error::Fenced`]; engines serving disjoint regions of one store update it in turn, each
//! update re-applied to the newest version when another engine stored one first, and
//! refused ([`Error::Fenced`]) when it would change a region another engine claimed since.
//!
//! Invariants: a region's `flushed_seq` only grows (a split's daughters start at their
//! parent's); every file a region lists exists on disk; a file may be listed by several
//! regions (a split's daughters share the parent's files; tables cloned from one snapshot
//! share its files) and by snapshots, and is deleted only when no region of any table and
//! no snapshot lists it any more ([`CatalogState::lists_file`]): every such decision is
//! taken inside a catalog update, which sees every snapshot. A snapshot is part of the
//! catalog, so taking or deleting one is one atomic update: a crash leaves it whole or
//! absent, never half listed.

use crate::error::{Error, Result};
use crate::objects::{Objects, PutMode};
use crate::schema::TableDescriptor;
use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"BSLTCAT1";
/// The catalog's object name.
const NAME: &str = "catalog";
const VERSION: u32 = 14;
const HEADER: usize = 20;

/// The object name of store file `id` written at region generation `generation`:
/// `data/{id:016}-g{generation}.sf`, or `data/{id:016}.sf` for generation 0 (files written
/// before catalog format 8). Two engines that both took a region over never name a file
/// alike: each writes at its own generation.
pub fn store_file_name(id: u64, generation: u64) -> String {
    match generation {
        0 => format!("data/{id:016}.sf"),
        g => format!("data/{id:016}-g{g}.sf"),
    }
}

/// One store file of a region's family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Engine-wide unique file id.
    pub id: u64,
    /// Largest sequence id in the file.
    pub max_seq: u64,
    /// Size in bytes.
    pub size: u64,
    /// Number of cells.
    pub entries: u64,
    /// The generation of the region that wrote it (0: before catalog format 8).
    pub generation: u64,
}

impl FileEntry {
    /// The file's object name ([`store_file_name`]).
    pub fn name(&self) -> String {
        store_file_name(self.id, self.generation)
    }
}

/// One region: a `[start, end)` slice of a table (empty `end` = no upper bound).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionEntry {
    /// Engine-wide unique region id.
    pub id: u64,
    /// Inclusive start key (empty = first region).
    pub start: Bytes,
    /// Exclusive end key (empty = last region).
    pub end: Bytes,
    /// Every write with a sequence id at or below this is in the region's store files.
    pub flushed_seq: u64,
    /// Store files per family, newest first.
    pub files: BTreeMap<Bytes, Vec<FileEntry>>,
    /// Raised for every region each time an engine opens the store (its claim): the files
    /// it writes carry it in their names. A split's daughters and a merge's result start at
    /// the largest generation of the regions they replace.
    pub generation: u64,
    /// The WAL writers (folder numbers on an object store) that may hold edits of this
    /// region above `flushed_seq`: every claim adds the claimer's, a flush leaves only the
    /// flusher's. Whoever opens the region fences and reads these. Empty when unknown (a
    /// local directory, or a catalog older than format 9): then every writer is read.
    /// Writer 0 ([`CLOSED_CLEANLY`]) stands for none: the region was closed after a flush
    /// (a graceful move), and is never read.
    pub writers: Vec<u64>,
}

impl RegionEntry {
    /// The writers of this region and of `other` (a merge's result may hold edits of
    /// both); none (unknown) when either's are unknown.
    pub fn writers_and(&self, other: &RegionEntry) -> Vec<u64> {
        if self.writers.is_empty() || other.writers.is_empty() {
            return Vec::new();
        }
        let mut all = self.writers.clone();
        all.extend(other.writers.iter().filter(|w| !self.writers.contains(w)));
        all
    }
}

/// One table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableEntry {
    /// Its descriptor.
    pub descriptor: TableDescriptor,
    /// False when disabled.
    pub enabled: bool,
    /// Regions sorted by start key, covering the whole key space without gaps.
    pub regions: Vec<RegionEntry>,
}

/// A table snapshot as the catalog records it (HBase's snapshot manifest): the listed
/// tables as they stood at one engine-wide read point, every file they listed then kept
/// alive by this record (see [`CatalogState::lists_file`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotEntry {
    /// The read point it was taken at: its tables hold every commit at or below it and
    /// none above.
    pub read_point: u64,
    /// When it was taken, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The tables by full name (`ns:name`) as they stood: descriptor (coprocessors and
    /// their arguments, so index definitions, included), enabled flag, regions and files.
    pub tables: BTreeMap<String, TableEntry>,
}

impl SnapshotEntry {
    /// Every store file the snapshot lists, each once.
    pub fn files(&self) -> BTreeMap<u64, FileEntry> {
        self.tables
            .values()
            .flat_map(|t| &t.regions)
            .flat_map(|r| r.files.values().flatten())
            .map(|f| (f.id, f.clone()))
            .collect()
    }
}

/// Everything the catalog records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogState {
    /// Next region id to hand out.
    pub next_region_id: u64,
    /// Next store-file id to hand out.
    pub next_file_id: u64,
    /// Namespaces.
    pub namespaces: BTreeSet<String>,
    /// Tables by their full name (`ns:name`).
    pub tables: BTreeMap<String, TableEntry>,
    /// Next WAL writer number to hand out (object stores: each engine's claim takes one).
    pub next_writer: u64,
    /// The catalog version of the newest claim of the whole store: an engine whose own
    /// claim is older may change nothing any more.
    pub store_claim: u64,
    /// On a versioned store: this version and the ones it descends from, newest last, each
    /// with the random nonce its writer gave it (at most 32). An engine that stored version
    /// `n` and then finds a newer one checks there that it descends from its own `n`.
    pub lineage: Vec<(u64, u64)>,
    /// Table snapshots by name.
    pub snapshots: BTreeMap<String, SnapshotEntry>,
    /// Uploaded plugins by the hex sha256 of their bytes (appended in version 13).
    pub plugins: BTreeMap<String, PluginEntry>,
    /// On a versioned store, every block of store file ids reserved, by its first id, with
    /// the WAL writer that reserved it (appended in version 14; see `file_blocks.rs`).
    pub file_blocks: BTreeMap<u64, u64>,
}

impl Default for CatalogState {
    fn default() -> Self {
        CatalogState {
            next_region_id: 1,
            next_file_id: 1,
            namespaces: [
                crate::schema::DEFAULT_NAMESPACE.to_string(),
                crate::schema::SYSTEM_NAMESPACE.to_string(),
            ]
            .into_iter()
            .collect(),
            tables: BTreeMap::new(),
            next_writer: 1,
            store_claim: 0,
            lineage: Vec::new(),
            snapshots: BTreeMap::new(),
            plugins: BTreeMap::new(),
            file_blocks: BTreeMap::new(),
        }
    }
}

impl CatalogState {
    /// True when a region of any table or of any snapshot lists store file `id`. A file is
    /// deleted only when none does: split daughters share their parent's files until they
    /// compact, tables cloned from a snapshot share its files, and a snapshot keeps the
    /// files its tables listed when it was taken.
    pub fn lists_file(&self, id: u64) -> bool {
        self.tables
            .values()
            .chain(self.snapshots.values().flat_map(|s| s.tables.values()))
            .flat_map(|t| &t.regions)
            .flat_map(|r| r.files.values().flatten())
            .any(|f| f.id == id)
    }

    /// The writer that reserved the block of store file ids holding `id`
    /// ([`CatalogState::file_blocks`]), if a recorded block holds it.
    pub fn block_writer(&self, id: u64) -> Option<u64> {
        file_blocks::block_writer(&self.file_blocks, id)
    }

    /// The object names of every store file a table or a snapshot lists.
    pub fn listed_file_names(&self) -> std::collections::HashSet<String> {
        self.tables
            .values()
            .chain(self.snapshots.values().flat_map(|s| s.tables.values()))
            .flat_map(|t| &t.regions)
            .flat_map(|r| r.files.values().flatten())
            .map(FileEntry::name)
            .collect()
    }

    /// The entry of table `key` (`ns:name`), or [`Error::TableNotFound`].
    pub fn table_mut(&mut self, key: &str) -> Result<&mut TableEntry> {
        self.tables
            .get_mut(key)
            .ok_or_else(|| Error::TableNotFound(key.to_string()))
    }
}

/// The persisted catalog.
#[derive(Debug)]
pub struct Catalog {
    objects: Arc<dyn Objects>,
    state: Mutex<CatalogState>,
    /// The version the state was read from or last written as, on a versioned store
    /// (`None`: the single `catalog` object of a local directory).
    version: Mutex<Option<u64>>,
    /// What this engine claimed of a versioned store (see `versions.rs`).
    claim: Mutex<versions::Claim>,
}

mod versions;
pub use versions::CLOSED_CLEANLY;

impl Catalog {
    /// Opens the catalog of `objects` (its newest version on a versioned store), or starts
    /// an empty one; changes nothing.
    pub fn open(objects: &Arc<dyn Objects>) -> Result<Self> {
        let (name, version) = match objects.is_local() {
            true => (NAME.to_string(), None),
            false => match versions::newest(&**objects)? {
                Some(n) => (versions::name(n), Some(n)),
                None => (versions::name(0), Some(0)),
            },
        };
        let state = match objects.read(&name) {
            Ok(bytes) => decode(&objects.locate(&name), &bytes)?,
            // A version listed a moment ago and gone now was replaced by newer ones (each
            // store deletes the one two below it): read the newest again.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound && version.is_some_and(|n| n > 0) =>
            {
                return versions::open_again(objects);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => CatalogState::default(),
            Err(e) => return Err(e.into()),
        };
        Ok(Catalog {
            objects: Arc::clone(objects),
            state: Mutex::new(state),
            version: Mutex::new(version),
            claim: Mutex::new(versions::Claim::default()),
        })
    }

    /// Whether `objects` holds a catalog.
    pub fn exists(objects: &dyn Objects) -> Result<bool> {
        Ok(match objects.is_local() {
            true => objects.exists(NAME)?,
            false => versions::newest(objects)?.is_some(),
        })
    }

    /// Where the catalog lives, for messages.
    pub fn locate(objects: &dyn Objects) -> std::path::PathBuf {
        match objects.is_local() {
            true => objects.locate(NAME),
            false => objects.locate(versions::FOLDER),
        }
    }

    /// The version of the current state on a versioned store (`None`: a local directory's
    /// single catalog).
    pub fn version(&self) -> Option<u64> {
        *self.version.lock()
    }

    /// True when a region of any table lists store file `id` now
    /// ([`CatalogState::lists_file`], without copying the state).
    pub fn lists_file(&self, id: u64) -> bool {
        self.state.lock().lists_file(id)
    }

    /// A copy of the current state.
    pub fn snapshot(&self) -> CatalogState {
        self.state.lock().clone()
    }

    /// Applies `f` to a copy of the state and persists it; the change takes effect only if
    /// both `f` and the write succeed. Updates are serialized. On a shared versioned store
    /// `f` may run more than once: when another engine stored a version first, `f` is
    /// applied again to the newest one, and the change is refused with [`Error::Fenced`]
    /// if it would change a region this engine no longer holds (see `versions.rs`).
    pub fn update<T>(&self, mut f: impl FnMut(&mut CatalogState) -> Result<T>) -> Result<T> {
        let mut guard = self.state.lock();
        loop {
            let mut next = guard.clone();
            let out = f(&mut next)?;
            self.vet(&guard, &next)?;
            match self.persist(&mut next) {
                Ok(()) => {
                    self.track(&guard, &next);
                    *guard = next;
                    return Ok(out);
                }
                Err(Error::Fenced { .. }) if self.version.lock().is_some() => {
                    let newest = Catalog::open(&self.objects)?;
                    *self.version.lock() = *newest.version.lock();
                    *guard = newest.snapshot();
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn persist(&self, state: &mut CatalogState) -> Result<()> {
        let mut version = self.version.lock();
        match *version {
            None => self
                .objects
                .put(NAME, &encode(state)?, PutMode::Overwrite)?,
            Some(n) => {
                versions::create(&*self.objects, n + 1, state)?;
                *version = Some(n + 1);
            }
        }
        Ok(())
    }
}

/// The catalog file's bytes for `state` (see the module doc).
pub(crate) fn encode(state: &CatalogState) -> Result<Vec<u8>> {
    {
        let payload = postcard::to_stdvec(state)
            .map_err(|e| Error::bad_argument(format!("catalog encoding failed: {e}")))?;
        let len = u32::try_from(payload.len())
            .map_err(|_| Error::bad_argument("catalog larger than 4 GiB"))?;
        let mut buf = Vec::with_capacity(HEADER + payload.len());
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&VERSION.to_be_bytes());
        buf.extend_from_slice(&len.to_be_bytes());
        let crc = checksum(VERSION, &buf, &payload);
        buf.extend_from_slice(&crc.to_be_bytes());
        buf.extend_from_slice(&payload);
        Ok(buf)
    }
}

/// The checksum a catalog of `version` stores: over the first 16 header bytes and the
/// payload from version 6, over the payload alone before.
fn checksum(version: u32, head: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if version >= 6 {
        h.update(head.get(..16).unwrap_or(head));
    }
    h.update(payload);
    h.finalize()
}

/// The state in catalog file bytes (`path` names them in errors), every byte checked.
pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<CatalogState> {
    let corrupt = |offset: u64, why: &str| Error::corruption(path, offset, why);
    if bytes.len() < HEADER {
        return Err(corrupt(0, "catalog shorter than its header"));
    }
    if &bytes[0..8] != MAGIC {
        return Err(corrupt(0, "bad catalog magic"));
    }
    let word = |at: usize| -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&bytes[at..at + 4]);
        u32::from_be_bytes(w)
    };
    let version = word(8);
    if !(1..=VERSION).contains(&version) {
        return Err(corrupt(8, "unsupported catalog version"));
    }
    let len = word(12) as usize;
    let crc = word(16);
    let payload = bytes
        .get(HEADER..HEADER + len)
        .ok_or_else(|| corrupt(HEADER as u64, "catalog payload truncated"))?;
    if bytes.len() > HEADER + len {
        // Every byte of the file is covered: the header by its checks, the payload by its
        // checksum, and nothing may follow.
        return Err(corrupt(
            (HEADER + len) as u64,
            &format!("{} bytes after the payload", bytes.len() - HEADER - len),
        ));
    }
    if checksum(version, &bytes[..16], payload) != crc {
        return Err(corrupt(HEADER as u64, "catalog checksum mismatch"));
    }
    let decoded = match version {
        1 => postcard::from_bytes::<v1::CatalogState>(payload).map(CatalogState::from),
        2 => postcard::from_bytes::<v2::CatalogState>(payload).map(CatalogState::from),
        3 => postcard::from_bytes::<v3::CatalogState>(payload).map(CatalogState::from),
        4 => postcard::from_bytes::<v4::CatalogState>(payload).map(CatalogState::from),
        5..=7 => postcard::from_bytes::<old::CatalogState<v10::TableDescriptor>>(payload)
            .map(CatalogState::from),
        8 => postcard::from_bytes::<v8::CatalogState>(payload).map(CatalogState::from),
        9 => postcard::from_bytes::<v9::CatalogState>(payload).map(CatalogState::from),
        10 => postcard::from_bytes::<v10::CatalogState>(payload).map(CatalogState::from),
        11 => postcard::from_bytes::<v11::CatalogState>(payload).map(CatalogState::from),
        12 => postcard::from_bytes::<v12::CatalogState>(payload).map(CatalogState::from),
        13 => postcard::from_bytes::<v13::CatalogState>(payload).map(v13::upgrade),
        _ => postcard::from_bytes(payload),
    };
    decoded.map_err(|e| corrupt(HEADER as u64, &format!("catalog decode: {e}")))
}

mod file_blocks;
mod formats;
mod plugins;
mod snapshots;
pub use file_blocks::store_file_id;
pub(crate) use file_blocks::{v13, FILE_ID_BLOCK};
pub(crate) use formats::{old, v1, v10, v11, v2, v3, v4, v8, v9};
pub(crate) use plugins::v12;
pub use plugins::{plugin_path, validate_plugin_id, PluginEntry, PluginKind, PLUGIN_DIR};
pub(crate) use snapshots::{all_snapshot_descriptions, snapshot_description};
pub use snapshots::{validate_snapshot_name, SnapshotDescription, MAX_SNAPSHOT_NAME};

#[cfg(test)]
mod tests;
