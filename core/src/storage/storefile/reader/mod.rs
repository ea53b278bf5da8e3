//! Opens a store file and serves its data blocks to scanners.
//!
//! Invariants: after [`StoreFileReader::open`] the trailer, index and file info have been
//! checked and agree with each other and with the file size, so every index entry names a
//! byte range inside the data section, and the bloom filter (if any) is checked and in
//! memory. Blocks are read with positioned reads (`read_at`),
//! so a reader holds no seek position and is shared freely between threads. Each data block
//! is verified and decoded once per cache residency.

use super::block::{unframe, unframe_shared, FRAME_OVERHEAD};
use super::bloom::{self, Bloom};
use super::cache::{BlockCache, CacheMode};
use super::codec::Dec;
use super::data::DataBlock;
use super::meta::{decode_index, decode_info, IndexEntry, Trailer, TRAILER_LEN};
use super::search::{head_after, partition, shared_prefix};
use super::{FileInfo, MAX_BLOCK_LEN};
use crate::cell::{CellType, StoreKey};
use crate::error::{Error, Result};
use crate::fs::ReadFile;
use crate::objects::Objects;
use crate::schema::BloomType;
use bytes::{Bytes, BytesMut};
use std::cmp::Ordering;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

/// One entry of a store file as [`StoreFileReader::walk_range`] passes it: slices of its
/// decoded block.
#[derive(Debug, Clone, Copy)]
pub struct RawEntry<'a> {
    /// The row.
    pub row: &'a [u8],
    /// The qualifier.
    pub qualifier: &'a [u8],
    /// The cell type (a put or a kind of delete marker).
    pub kind: CellType,
    /// The sequence id.
    pub seq: u64,
    /// The value.
    pub value: &'a [u8],
}

/// An open, checked store file. `Send + Sync`; share it behind the `Arc` that
/// [`open`](Self::open) returns.
pub struct StoreFileReader {
    objects: Arc<dyn Objects>,
    /// The file's object name.
    name: String,
    /// Where the file lives, for messages.
    path: PathBuf,
    file: Arc<dyn ReadFile>,
    file_id: u64,
    info: FileInfo,
    index: Vec<IndexEntry>,
    /// The row prefix shared by every block's first key, and each one's head after it.
    index_prefix: Bytes,
    index_heads: Vec<u64>,
    /// The file's bloom filter, loaded at open.
    bloom: Option<Bloom>,
    cache: Option<Arc<BlockCache>>,
    /// Whether data blocks end with their entries' offsets (format version 3).
    offsets_stored: bool,
    /// Set when a compaction replaced this file: the last holder to drop it deletes it.
    compacted_away: AtomicBool,
}

impl StoreFileReader {
    /// Opens the file at `path` of the local filesystem `fs` (tests).
    #[cfg(test)]
    pub fn open_file(
        fs: &Arc<dyn crate::fs::FileSystem>,
        path: &std::path::Path,
        file_id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Arc<Self>> {
        let (objects, name) = crate::objects::LocalObjects::of_file(fs, path)?;
        Self::open(&objects, &name, file_id, cache)
    }

    /// Opens object `name` of `objects`, reading and checking trailer, index and file info.
    /// `file_id` must be unique engine-wide: it keys this file's blocks in `cache`.
    pub fn open(
        objects: &Arc<dyn Objects>,
        name: &str,
        file_id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Arc<Self>> {
        let located = objects.locate(name);
        let path = located.as_path();
        let file = objects.open(name)?;
        let file_size = file.size()?;
        let bad = |offset: u64| move |reason| Error::corruption(path, offset, reason);
        if file_size < TRAILER_LEN as u64 {
            let reason = format!("file of {file_size} bytes is too short for a trailer");
            return Err(Error::corruption(path, 0, reason));
        }
        let trailer_offset = file_size - TRAILER_LEN as u64;
        let mut raw = [0u8; TRAILER_LEN];
        read_exact(&*file, path, &mut raw, trailer_offset)?;
        let trailer = Trailer::decode(&raw).map_err(bad(trailer_offset))?;
        check_layout(&trailer, trailer_offset).map_err(bad(trailer_offset))?;

        let at = trailer.index_offset;
        let index_buf = read_block(&*file, path, at, trailer.index_len)?;
        let index = decode_index(&index_buf, trailer.index_flags()).map_err(bad(at))?;
        check_index(&index, at).map_err(bad(at))?;

        let at = trailer.info_offset;
        let info_buf = read_block(&*file, path, at, trailer.info_len)?;
        let mut info = decode_info(&info_buf).map_err(bad(at))?;
        info.file_size = file_size;
        check_info(&info, &trailer, &index).map_err(bad(at))?;

        let bloom = if trailer.bloom_len == 0 {
            None
        } else {
            let at = trailer.bloom_offset;
            if info.entry_count == 0 {
                return Err(Error::corruption(path, at, "bloom block in an empty file"));
            }
            let bloom_buf = read_block(&*file, path, at, trailer.bloom_len)?;
            Some(Bloom::decode(&bloom_buf).map_err(bad(at))?)
        };

        let (index_prefix, index_heads) = index_heads(&index);
        Ok(Arc::new(StoreFileReader {
            objects: Arc::clone(objects),
            name: name.to_string(),
            path: located.clone(),
            file,
            file_id,
            info,
            index,
            index_prefix,
            index_heads,
            bloom,
            cache,
            offsets_stored: trailer.offsets_stored(),
            compacted_away: AtomicBool::new(false),
        }))
    }

    /// Marks the file as replaced by a compaction and no longer listed anywhere: it is
    /// deleted from disk when the last reader (a scan still reading it) drops it.
    pub fn mark_compacted_away(&self) {
        self.compacted_away.store(true, AtomicOrdering::Release);
    }

    /// True once [`mark_compacted_away`](Self::mark_compacted_away) was called.
    pub fn is_compacted_away(&self) -> bool {
        self.compacted_away.load(AtomicOrdering::Acquire)
    }

    /// What the file holds.
    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The engine-wide id this reader was opened with.
    pub fn file_id(&self) -> u64 {
        self.file_id
    }

    /// The file's bloom filter type ([`BloomType::None`] if it has none).
    pub fn bloom_kind(&self) -> BloomType {
        self.bloom.as_ref().map_or(BloomType::None, Bloom::kind)
    }

    /// False only if the file certainly holds no cell of `row`. Always true unless the file
    /// has a ROW bloom filter (a ROWCOL filter does not answer row-only queries).
    pub fn may_contain_row(&self, row: &[u8]) -> bool {
        self.may_contain_row_hash(Self::row_hash(row))
    }

    /// The hash of `row` that ROW bloom filters use, for
    /// [`may_contain_row_hash`](Self::may_contain_row_hash) (one hash serves every file).
    pub fn row_hash(row: &[u8]) -> u64 {
        bloom::row_hash(row)
    }

    /// [`may_contain_row`](Self::may_contain_row) for a row given by its
    /// [`row_hash`](Self::row_hash).
    pub fn may_contain_row_hash(&self, hash: u64) -> bool {
        match &self.bloom {
            Some(b) if b.kind() == BloomType::Row => b.may_contain(hash),
            _ => true,
        }
    }

    /// False only if the file certainly holds no cell of column `qualifier` in `row`. Always
    /// true unless the file has a ROWCOL bloom filter.
    pub fn may_contain_row_col(&self, row: &[u8], qualifier: &[u8]) -> bool {
        match &self.bloom {
            Some(b) if b.kind() == BloomType::RowCol => {
                b.may_contain(bloom::row_col_hash(row, qualifier))
            }
            _ => true,
        }
    }

    /// The number of data blocks.
    pub fn block_count(&self) -> usize {
        self.index.len()
    }

    /// The first key of data block `i` (`None` past the last block).
    pub fn block_first_key(&self, i: usize) -> Option<StoreKey> {
        self.index.get(i).map(|e| e.first_key.clone())
    }

    /// The block a forward seek to `key` starts in: the last block starting at or before
    /// `key` ([`Self::block_at_or_before`], or 0), unless the next block starts `key`'s row
    /// (its index entry says so, version 4): then that block holds no cell of the row and
    /// every earlier cell sorts before `key`, so the seek starts in the next block (a point
    /// read of a row that begins a block reads that block alone).
    pub(crate) fn seek_block(&self, key: &StoreKey) -> usize {
        let idx = self.block_at_or_before(key).unwrap_or(0);
        match self.index.get(idx + 1) {
            Some(next) if next.starts_row && next.first_key.row == key.row => idx + 1,
            _ => idx,
        }
    }

    /// True when data block `i` exists and its first key's row sorts after `row`.
    pub(crate) fn block_starts_past_row(&self, i: usize, row: &[u8]) -> bool {
        self.index
            .get(i)
            .is_some_and(|e| e.first_key.row.as_ref() > row)
    }

    /// The first key of the middle data block (the split point HBase picks); `None` for an
    /// empty file. The caller decides whether a key equal to the file's first key is usable.
    pub fn middle_key(&self) -> Option<StoreKey> {
        self.index
            .get(self.index.len() / 2)
            .map(|e| e.first_key.clone())
    }

    /// The index of the last block whose first key is `<= key` (`None` if `key` sorts before
    /// every block, or the file is empty).
    pub(crate) fn block_at_or_before(&self, key: &StoreKey) -> Option<usize> {
        let full = |i: usize| Ok::<_, Infallible>(self.index[i].first_key.cmp(key));
        let Ok(n) = partition(&self.index_prefix, &self.index_heads, key, full, |o| {
            o != Ordering::Greater
        });
        n.checked_sub(1)
    }

    /// Data block `i`, from the cache or read, checked and decoded from the file; a block read
    /// from the file is cached as `mode` says.
    pub(crate) fn block(&self, i: usize, mode: CacheMode) -> Result<Arc<DataBlock>> {
        let entry = self
            .index
            .get(i)
            .ok_or_else(|| Error::corruption(&self.path, 0, "block number out of range"))?;
        match &self.cache {
            Some(cache) => cache.get_or_load(self.file_id, entry.offset, mode, || {
                self.load(entry).map(Arc::new)
            }),
            None => self.load(entry).map(Arc::new),
        }
    }

    /// Data block `i` for a scanner moving forward block by block: from the cache, or else
    /// cut from `ahead`, which reads runs of consecutive blocks with one positioned read each
    /// (fewer system calls than one read per block; the run grows while the scan goes on).
    pub(crate) fn next_block(
        &self,
        i: usize,
        mode: CacheMode,
        ahead: &mut ReadAhead,
    ) -> Result<Arc<DataBlock>> {
        let entry = self
            .index
            .get(i)
            .ok_or_else(|| Error::corruption(&self.path, 0, "block number out of range"))?;
        let mut load = || {
            let framed = ahead.framed(self, i)?;
            let corrupt = |r| Error::corruption(&self.path, entry.offset, r);
            // Copied out of the run (see `unframe_shared`), cached or not.
            let payload = unframe_shared(framed, true).map_err(corrupt)?;
            self.check_decode(entry, payload).map(Arc::new)
        };
        match &self.cache {
            Some(cache) => cache.get_or_load(self.file_id, entry.offset, mode, load),
            None => load(),
        }
    }

    fn load(&self, entry: &IndexEntry) -> Result<DataBlock> {
        let payload = read_block(&*self.file, &self.path, entry.offset, entry.len)?;
        self.check_decode(entry, payload)
    }

    /// Decodes a checked payload of the block `entry` names and checks its first key.
    fn check_decode(&self, entry: &IndexEntry, payload: Bytes) -> Result<DataBlock> {
        let corrupt = |r| Error::corruption(&self.path, entry.offset, r);
        let block =
            DataBlock::decode(payload, entry.len as usize, self.offsets_stored).map_err(corrupt)?;
        if block.cmp_at(0, &entry.first_key).map_err(corrupt)? != Ordering::Equal {
            return Err(corrupt("first key differs from the index".into()));
        }
        Ok(block)
    }

    /// A corruption error for data block `i`.
    pub(crate) fn block_corruption(
        &self,
        i: usize,
        reason: std::borrow::Cow<'static, str>,
    ) -> Error {
        let offset = self.index.get(i).map_or(0, |e| e.offset);
        Error::corruption(&self.path, offset, reason)
    }
}

/// The first read-ahead run, in bytes (at least one block is always read).
const READ_AHEAD_FIRST: u64 = 64 * 1024;
/// The largest read-ahead run, in bytes.
const READ_AHEAD_MAX: u64 = 512 * 1024;

/// A forward scanner's read-ahead: the framed bytes of a run of consecutive data blocks,
/// read with one positioned read. The first move reads one block; runs then start at
/// [`READ_AHEAD_FIRST`] bytes and double up to [`READ_AHEAD_MAX`], so a point read or a short
/// scan reads no more than before and a long scan makes few system calls.
/// Each block cut from a run is checked (CRC, framing, first key) like a block read alone,
/// and copied or decompressed out of the run (see [`unframe_shared`]).
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    /// File offset of `buf`'s first byte.
    offset: u64,
    buf: Bytes,
    /// The size of the next run.
    budget: u64,
}

impl ReadAhead {
    /// The framed bytes of block `i` of `r`, from the current run or a new one.
    fn framed(&mut self, r: &StoreFileReader, i: usize) -> Result<Bytes> {
        let entry = r
            .index
            .get(i)
            .ok_or_else(|| Error::corruption(&r.path, 0, "block number out of range"))?;
        let end = entry.offset + u64::from(entry.len);
        if entry.offset < self.offset || end > self.offset + self.buf.len() as u64 {
            // The first move reads block `i` alone (a point read whose row straddles two
            // blocks must not pay for a run); later moves read growing runs.
            let budget = self.budget;
            self.budget = match budget {
                0 => READ_AHEAD_FIRST,
                b => (b * 2).min(READ_AHEAD_MAX),
            };
            // Whole blocks from `i` while they fit the budget (the index tiles the data
            // section, so they are contiguous); always block `i` itself.
            let mut run_end = end;
            for e in r.index.iter().skip(i + 1) {
                let e_end = e.offset + u64::from(e.len);
                if e_end - entry.offset > budget {
                    break;
                }
                run_end = e_end;
            }
            let len = usize::try_from(run_end - entry.offset)
                .map_err(|_| Error::corruption(&r.path, entry.offset, "read-ahead run too long"))?;
            if !(FRAME_OVERHEAD..=MAX_BLOCK_LEN + FRAME_OVERHEAD).contains(&(entry.len as usize)) {
                return Err(Error::corruption(
                    &r.path,
                    entry.offset,
                    format!("absurd block length {}", entry.len),
                ));
            }
            // The last run's buffer is reused when no block cut from it is still alive (the
            // usual case: blocks are copied or decompressed out of it): no fresh allocation,
            // no zeroing.
            let mut raw = match std::mem::take(&mut self.buf).try_into_mut() {
                Ok(mut old) => {
                    old.truncate(len);
                    old.resize(len, 0);
                    old
                }
                Err(_) => BytesMut::zeroed(len),
            };
            read_exact(&*r.file, &r.path, &mut raw[..], entry.offset)?;
            self.offset = entry.offset;
            self.buf = raw.freeze();
        }
        let from = (entry.offset - self.offset) as usize;
        Ok(self.buf.slice(from..from + entry.len as usize))
    }
}

/// The search heads of the index's first keys (see `search`).
fn index_heads(index: &[IndexEntry]) -> (Bytes, Vec<u64>) {
    let (Some(first), Some(last)) = (index.first(), index.last()) else {
        return (Bytes::new(), Vec::new());
    };
    let (first, last) = (&first.first_key.row, &last.first_key.row);
    let shared = shared_prefix(first, last);
    let heads = index
        .iter()
        .map(|e| head_after(&e.first_key.row, shared))
        .collect();
    (first.slice(..shared), heads)
}

/// Reads exactly `buf.len()` bytes at `offset`; a short file is corruption.
fn read_exact(file: &dyn ReadFile, path: &Path, buf: &mut [u8], offset: u64) -> Result<()> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corruption(path, offset, "file ends inside a block")
        } else {
            Error::Io(e)
        }
    })
}

/// Reads, checks and unframes the block of framed length `len` at `offset`.
fn read_block(file: &dyn ReadFile, path: &Path, offset: u64, len: u32) -> Result<Bytes> {
    let len = len as usize;
    if !(FRAME_OVERHEAD..=MAX_BLOCK_LEN + FRAME_OVERHEAD).contains(&len) {
        return Err(Error::corruption(
            path,
            offset,
            format!("absurd block length {len}"),
        ));
    }
    let raw = file.read_vec_at(len, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corruption(path, offset, "file ends inside a block")
        } else {
            Error::Io(e)
        }
    })?;
    unframe(raw).map_err(|r| Error::corruption(path, offset, r))
}

/// Index, file-info and (if present) bloom blocks must sit back to back right before the
/// trailer; an absent bloom block has offset and length 0.
pub(super) fn check_layout(t: &Trailer, trailer_offset: u64) -> Dec<()> {
    let info_end = t.info_offset.checked_add(u64::from(t.info_len));
    let index_end = t.index_offset.checked_add(u64::from(t.index_len));
    let bloom_ok = if t.bloom_len == 0 {
        t.bloom_offset == 0 && info_end == Some(trailer_offset)
    } else {
        info_end == Some(t.bloom_offset)
            && t.bloom_offset.checked_add(u64::from(t.bloom_len)) == Some(trailer_offset)
    };
    if !bloom_ok || index_end != Some(t.info_offset) {
        return Err(format!(
            "index ({}+{}), file info ({}+{}) and bloom ({}+{}) do not end at the trailer \
             ({trailer_offset})",
            t.index_offset, t.index_len, t.info_offset, t.info_len, t.bloom_offset, t.bloom_len
        )
        .into());
    }
    Ok(())
}

/// Data blocks must tile `0 .. index_offset` with strictly ascending first keys.
fn check_index(index: &[IndexEntry], index_offset: u64) -> Dec<()> {
    let mut expected = 0u64;
    for (i, e) in index.iter().enumerate() {
        if e.offset != expected || (e.len as usize) <= FRAME_OVERHEAD {
            return Err(format!("index entry {i} has a bad offset or length").into());
        }
        if i > 0 && index[i - 1].first_key >= e.first_key {
            return Err(format!("index entry {i} is out of key order").into());
        }
        expected = expected
            .checked_add(u64::from(e.len))
            .ok_or("index offsets overflow")?;
    }
    if expected != index_offset {
        return Err("data blocks do not end where the index starts".into());
    }
    Ok(())
}

/// The file info must agree with the trailer and the index.
fn check_info(info: &FileInfo, t: &Trailer, index: &[IndexEntry]) -> Dec<()> {
    if info.entry_count != t.entry_count {
        return Err("file info and trailer disagree on the entry count".into());
    }
    let ok = match (&info.first_key, &info.last_key, index.first(), index.last()) {
        (None, None, None, None) => info.entry_count == 0,
        (Some(first), Some(last), Some(b0), Some(bn)) => {
            *first == b0.first_key
                && *last >= bn.first_key
                && info.entry_count >= index.len() as u64
        }
        _ => false,
    };
    if !ok {
        return Err("file info does not match the index".into());
    }
    Ok(())
}

impl Drop for StoreFileReader {
    fn drop(&mut self) {
        if self.is_compacted_away() {
            match self.objects.delete(&self.name) {
                Ok(()) => {}
                // Open removes it, as a file no region lists.
                Err(e) => {
                    tracing::warn!(file = %self.path.display(), error = %e, "could not remove compacted store file")
                }
            }
        }
    }
}

impl std::fmt::Debug for StoreFileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreFileReader")
            .field("path", &self.path)
            .field("file_id", &self.file_id)
            .field("blocks", &self.index.len())
            .field("info", &self.info)
            .field("bloom", &self.bloom_kind())
            .finish()
    }
}

mod walk;
