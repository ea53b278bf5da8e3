//! A Store: one column family of one region - its MemStores and store files.
//!
//! Invariants: `files` are newest first; a flush moves the snapshot MemStore into a new file
//! in one step under the state lock, so a reader sees every cell exactly once (in the
//! snapshot or in the file, possibly both for an instant, which the merge deduplicates).

use crate::cell::{Cell, CellType, StoreCell, StoreKey};
use crate::schema::{BloomType, ColumnFamilyDescriptor};
use crate::storage::matcher::{FamilyRules, PlainRow, ReadSpec, Verdict};
use crate::storage::memstore::{MemRow, MemStore};
use crate::storage::merge::{CellSource, MergeIter};
use crate::storage::storefile::{CacheMode, StoreFileReader};
use bytes::Bytes;
use parking_lot::RwLock;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

/// The mutable part of a store.
#[derive(Debug)]
pub struct StoreState {
    /// The MemStore taking writes.
    pub active: Arc<MemStore>,
    /// A MemStore being flushed, still readable.
    pub snapshot: Option<Arc<MemStore>>,
    /// Store files, newest first.
    pub files: Vec<Arc<StoreFileReader>>,
}

/// One column family of one region.
#[derive(Debug)]
pub struct Store {
    /// The family name.
    pub family: Bytes,
    descriptor: RwLock<ColumnFamilyDescriptor>,
    /// MemStores and files.
    pub state: RwLock<StoreState>,
    /// Store files a point read skipped because their bloom filter ruled the row out.
    pub bloom_skips: AtomicU64,
    /// Held for the whole of a compaction of this store: one at a time.
    pub compaction_lock: Arc<tokio::sync::Mutex<()>>,
}

/// False when `f`'s bloom filter proves that `row` (with any of `columns`, for a ROWCOL
/// filter) is not in the file. A ROWCOL filter holds a row's family delete markers under
/// the empty qualifier (their column), and they mask every column: a file that may hold one
/// for the row is read whatever columns are asked for (HBase keeps a separate delete-family
/// filter for this).
fn may_contain(f: &StoreFileReader, row: &[u8], columns: Option<&BTreeSet<Bytes>>) -> bool {
    may_contain_hashed(f, row, columns, &mut None)
}

/// [`may_contain`], hashing `row` for ROW filters at most once across calls sharing `hash`.
fn may_contain_hashed(
    f: &StoreFileReader,
    row: &[u8],
    columns: Option<&BTreeSet<Bytes>>,
    hash: &mut Option<u64>,
) -> bool {
    match f.bloom_kind() {
        BloomType::None => true,
        BloomType::Row => {
            f.may_contain_row_hash(*hash.get_or_insert_with(|| StoreFileReader::row_hash(row)))
        }
        BloomType::RowCol => match columns {
            Some(cols) if !cols.is_empty() => {
                f.may_contain_row_col(row, b"")
                    || cols.iter().any(|q| f.may_contain_row_col(row, q))
            }
            _ => true,
        },
    }
}

/// The matcher's view of a family's settings.
fn rules_of(d: &ColumnFamilyDescriptor) -> FamilyRules {
    FamilyRules {
        max_versions: d.max_versions,
        min_versions: d.min_versions,
        ttl_ms: d.ttl_secs.map(|s| s.saturating_mul(1000)),
        keep_deleted_cells: d.keep_deleted_cells,
    }
}

/// How a read uses the block cache: the family's BLOCKCACHE and IN_MEMORY settings, and
/// whether the reader wants its blocks cached at all.
fn cache_mode_of(d: &ColumnFamilyDescriptor, cache_blocks: bool) -> CacheMode {
    match (cache_blocks && d.block_cache, d.in_memory) {
        (false, _) => CacheMode::Bypass,
        (true, true) => CacheMode::InMemory,
        (true, false) => CacheMode::Normal,
    }
}

/// The most cells a plain point read gathers from several sources before it leaves the row
/// to the general path (a hot row's versions: see `PLAIN_ROW_MAX_SKIPPED`).
const MERGED_ROW_MAX_CELLS: usize = 64;

/// A source a plain point read reads a row from.
enum Source {
    Mem(MemRow),
    File(Arc<StoreFileReader>),
}

/// Returns the family name as a `Bytes` over a process-wide interned copy, so that the
/// family of every cell read shares it without reference counting (a static `Bytes` clones
/// for free). The interned set only grows by distinct family names ever opened, a few bytes
/// each.
pub fn intern_family(name: &[u8]) -> Bytes {
    static NAMES: std::sync::OnceLock<
        parking_lot::Mutex<std::collections::HashSet<&'static [u8]>>,
    > = std::sync::OnceLock::new();
    let mut set = NAMES.get_or_init(Default::default).lock();
    let interned: &'static [u8] = match set.get(name) {
        Some(s) => s,
        None => {
            let leaked: &'static [u8] = Box::leak(name.to_vec().into_boxed_slice());
            set.insert(leaked);
            leaked
        }
    };
    Bytes::from_static(interned)
}

impl Store {
    /// A store with the given files and an empty MemStore.
    pub fn new(descriptor: ColumnFamilyDescriptor, files: Vec<Arc<StoreFileReader>>) -> Self {
        Store {
            family: intern_family(&descriptor.name),
            descriptor: RwLock::new(descriptor),
            state: RwLock::new(StoreState {
                active: Arc::new(MemStore::new()),
                snapshot: None,
                files,
            }),
            bloom_skips: AtomicU64::new(0),
            compaction_lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The family's current settings.
    pub fn descriptor(&self) -> ColumnFamilyDescriptor {
        self.descriptor.read().clone()
    }

    /// Replaces the family's settings (Admin modify).
    pub fn set_descriptor(&self, d: ColumnFamilyDescriptor) {
        *self.descriptor.write() = d;
    }

    /// The matcher's view of the settings.
    pub fn rules(&self) -> FamilyRules {
        rules_of(&self.descriptor.read())
    }

    /// Inserts a cell into the active MemStore.
    pub fn insert(&self, cell: StoreCell) {
        self.state.read().active.insert(cell);
    }

    /// Inserts cells of one row into the active MemStore.
    pub fn insert_row<'a, I>(&self, row: &Bytes, cells: I)
    where
        I: IntoIterator<Item = &'a StoreCell>,
        I::IntoIter: Clone,
    {
        self.state.read().active.insert_row(row, cells);
    }

    /// The number of store files.
    pub fn file_count(&self) -> usize {
        self.state.read().files.len()
    }

    /// Bytes held in MemStores (active and snapshot).
    pub fn memstore_size(&self) -> usize {
        let s = self.state.read();
        s.active.size() + s.snapshot.as_ref().map_or(0, |m| m.size())
    }

    /// How a read of this store uses the block cache: the family's BLOCKCACHE and IN_MEMORY
    /// settings, and whether the reader wants its blocks cached at all.
    pub fn cache_mode(&self, cache_blocks: bool) -> CacheMode {
        cache_mode_of(&self.descriptor.read(), cache_blocks)
    }

    /// False when the store holds no cell of `row` for sure: no MemStore has the row and
    /// every file's bloom filter rules it out (for `columns`, with ROWCOL filters). One
    /// look at the store's state, so a flush moving the row from a MemStore to a file
    /// cannot hide it.
    pub fn may_hold_row(&self, row: &Bytes, columns: Option<&BTreeSet<Bytes>>) -> bool {
        let s = self.state.read();
        std::iter::once(&s.active)
            .chain(s.snapshot.iter())
            .any(|m| m.contains_row(row))
            || s.files.iter().any(|f| may_contain(f, row, columns))
    }

    /// Reads the cells of `row` this store shows a point read (`columns` and `spec` as the
    /// get gives them) into `out`, in key order, without a merge or a scanner, when
    /// [`PlainRow`] can match the row (no TTL, no delete marker or cell TTL in the row, few
    /// hidden versions). A row one source holds (a MemStore or a file the bloom filter does
    /// not rule out) is read straight from it; one several hold, from their cells gathered
    /// and sorted ([`Store::read_row_merged`]). Returns false, with `out` as it was, when the row needs the
    /// general path ([`Store::merged`] and the matcher); the answers agree (a property
    /// test checks it). Files the bloom filters rule out are counted as skipped only when
    /// this read answers.
    pub fn read_row_plain(
        &self,
        row: &Bytes,
        columns: Option<&BTreeSet<Bytes>>,
        spec: &ReadSpec,
        cache_blocks: bool,
        out: &mut Vec<Cell>,
    ) -> crate::error::Result<bool> {
        // One look at the settings for both.
        let (rules, mode) = {
            let d = self.descriptor.read();
            (rules_of(&d), cache_mode_of(&d, cache_blocks))
        };
        let Some(mut plain) = PlainRow::new(&rules, spec, columns) else {
            return Ok(false);
        };
        // Every source that may hold the row, newest first; files the bloom filters rule out
        // are counted as skipped once the read is answered here.
        // The first source apart, so that the usual read of one source allocates nothing.
        let (first, more, skipped) = {
            let s = self.state.read();
            let mut first: Option<Source> = None;
            let mut more: Vec<Source> = Vec::new();
            let mut add = |source| match first {
                None => first = Some(source),
                Some(_) => more.push(source),
            };
            for m in std::iter::once(&s.active).chain(s.snapshot.iter()) {
                if let Some(r) = m.find_row(row) {
                    add(Source::Mem(r));
                }
            }
            let (mut skipped, mut hash) = (0, None);
            for f in &s.files {
                if may_contain_hashed(f, row, columns, &mut hash) {
                    add(Source::File(f.clone()));
                } else {
                    skipped += 1;
                }
            }
            (first, more, skipped)
        };
        let source = match (first, more.is_empty()) {
            (first, true) => first,
            (first, false) => {
                let sources = first.into_iter().chain(more).collect();
                let answered = self.read_row_merged(row, sources, &mut plain, mode, out)?;
                if answered && skipped > 0 {
                    self.bloom_skips.fetch_add(skipped, AtomicOrdering::Relaxed);
                }
                return Ok(answered);
            }
        };
        if skipped > 0 {
            self.bloom_skips.fetch_add(skipped, AtomicOrdering::Relaxed);
        }
        let family = &self.family;
        let before = out.len();
        let mut aborted = false;
        match source {
            None => {}
            Some(Source::Mem(r)) => r.for_each_cell_while(|c| {
                match plain.offer(&c.key.qualifier, c.key.ts, c.key.kind, c.key.seq) {
                    Verdict::Skip => {}
                    Verdict::Emit => out.push(c.into_put_cell(family)),
                    Verdict::Abort => aborted = true,
                }
                !aborted
            }),
            Some(Source::File(f)) => f.walk_row(row, mode, |block, k, value| {
                let buf = block.payload();
                let qualifier = buf.get(k.qualifier.clone()).unwrap_or_default();
                match plain.offer(qualifier, k.ts, k.kind, k.seq) {
                    Verdict::Skip => {}
                    Verdict::Emit => out.push(block.put_cell(k, value, family)),
                    Verdict::Abort => aborted = true,
                }
                !aborted
            })?,
        }
        if aborted {
            out.truncate(before);
            return Ok(false);
        }
        Ok(true)
    }

    /// [`Store::read_row_plain`] of a row several sources may hold (a row updated since it
    /// was flushed): every source's cells of the row are gathered (each source holds them
    /// sorted), put in key order with one copy of each key, and matched by `plain`. Returns
    /// false, with `out` as it was, at the first cell `plain` cannot match (a delete marker
    /// or a cell TTL, in any source) or past [`MERGED_ROW_MAX_CELLS`] cells.
    fn read_row_merged(
        &self,
        row: &Bytes,
        sources: Vec<Source>,
        plain: &mut PlainRow<'_>,
        mode: CacheMode,
        out: &mut Vec<Cell>,
    ) -> crate::error::Result<bool> {
        let mut cells: Vec<StoreCell> = Vec::with_capacity(32);
        let mut plain_only = true;
        for source in &sources {
            match source {
                Source::Mem(r) => r.for_each_cell_while(|c| {
                    plain_only = c.key.kind == CellType::Put && cells.len() < MERGED_ROW_MAX_CELLS;
                    if plain_only {
                        cells.push(c);
                    }
                    plain_only
                }),
                Source::File(f) => f.walk_row(row, mode, |block, k, value| {
                    plain_only = k.kind == CellType::Put && cells.len() < MERGED_ROW_MAX_CELLS;
                    if plain_only {
                        let buf = block.payload();
                        cells.push(StoreCell {
                            key: k.to_key(buf),
                            value: buf.slice(value),
                        });
                    }
                    plain_only
                })?,
            }
            if !plain_only {
                return Ok(false);
            }
        }
        // Each source's cells are sorted: a stable sort of their concatenation is a merge,
        // and the copies of one key (a write flushed while still in a MemStore) are equal.
        cells.sort_by(|a, b| a.key.cmp(&b.key));
        cells.dedup_by(|a, b| a.key == b.key);
        let family = &self.family;
        let before = out.len();
        for c in cells {
            match plain.offer(&c.key.qualifier, c.key.ts, c.key.kind, c.key.seq) {
                Verdict::Skip => {}
                Verdict::Emit => out.push(c.into_put_cell(family)),
                // Every cell is a plain put (checked above).
                Verdict::Abort => {
                    out.truncate(before);
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// A merged, sorted view of every cell from `start` on (or down from it when `reverse`).
    /// `start = None` means from the first cell (forward) or the last (reverse). A point
    /// read of one row passes `point`: the row and, optionally, the only qualifiers wanted;
    /// files whose bloom filter rules them out are skipped and counted. `cache_blocks` false
    /// reads blocks without caching them (HBase's `setCacheBlocks(false)`).
    pub fn merged(
        &self,
        start: Option<&StoreKey>,
        reverse: bool,
        point: Option<(&[u8], Option<&BTreeSet<Bytes>>)>,
        cache_blocks: bool,
    ) -> MergeIter {
        let mode = self.cache_mode(cache_blocks);
        let s = self.state.read();
        let mut sources: Vec<CellSource> = Vec::with_capacity(2 + s.files.len());
        let mems = std::iter::once(&s.active).chain(s.snapshot.iter());
        for m in mems {
            if m.is_empty() {
                continue;
            }
            sources.push(CellSource::Mem(match (reverse, point, start) {
                (true, _, _) => m.scan_rev_from(start.cloned()),
                (false, Some((row, _)), Some(k)) if k.row.as_ref() == row => {
                    // A point read asks the MemStore's row filter first: a row it rules out
                    // costs no search of the skiplist.
                    if !m.may_contain_row(&k.row) {
                        continue;
                    }
                    m.scan_row_from(k.clone())
                }
                (false, _, _) => m.scan_from(start.cloned()),
            }));
        }
        let (mut skipped, mut hash) = (0, None);
        for f in &s.files {
            if let Some((row, columns)) = point {
                if !may_contain_hashed(f, row, columns, &mut hash) {
                    skipped += 1;
                    continue;
                }
            }
            if reverse {
                sources.push(CellSource::FileRev(f.scan_rev_from(start).cache_mode(mode)));
            } else {
                let first = StoreKey::first_on_row(Bytes::new());
                let mut scanner = f.scan_from(start.unwrap_or(&first)).cache_mode(mode);
                if let Some((row, _)) = point {
                    let row = match start {
                        Some(k) if k.row.as_ref() == row => k.row.clone(),
                        _ => Bytes::copy_from_slice(row),
                    };
                    scanner = scanner.end_at_row(row);
                }
                sources.push(CellSource::File(scanner));
            }
        }
        if skipped > 0 {
            self.bloom_skips.fetch_add(skipped, AtomicOrdering::Relaxed);
        }
        MergeIter::new(sources, reverse)
    }
}

#[cfg(test)]
mod tests;
