//! The integrity check of one store file, in the manner of redb's `check_integrity`.
//!
//! [`verify_file`] reads a store file from disk with positioned reads and no block cache,
//! and checks everything the format (see the `storefile` module doc) promises:
//!
//! * the trailer: length, magic, version, CRC, and that the index, file-info and bloom
//!   blocks sit back to back right before it;
//! * every block's framing (length, compression code, decompression) and CRC;
//! * that every data block decodes, entry by entry;
//! * that keys are strictly ascending in [`StoreKey`] order, within and across blocks;
//! * that the index entries tile the data section exactly (contiguous offsets, framed
//!   lengths that match each block's own header), their keys ascend, and each one's key
//!   equals its block's first key;
//! * that the file info (entry count, first and last key, largest sequence id, time range)
//!   agrees with the trailer and with what the blocks hold;
//! * that the bloom filter, if any, is well formed and answers "maybe" for every row (ROW)
//!   or row + qualifier (ROWCOL) the file holds.
//!
//! Unlike [`StoreFileReader::open`](super::StoreFileReader::open), which stops at the first
//! problem, the check goes on after one: it collects every [`Finding`] it can, each naming
//! the file, the offset of the block (or trailer) at fault and the reason. When the index is
//! unreadable it still walks the data blocks by their own framing. Aggregates (entry count,
//! key range, time range) are compared only when every data block was readable, so one
//! damaged block yields one finding rather than a cascade. The check never panics and never
//! allocates a length read from the file before checking it against the file size and
//! [`MAX_BLOCK_LEN`].

use super::block::{unframe, FRAME_OVERHEAD};
use super::bloom::{self, Bloom};
use super::data::DataBlock;
use super::meta::{decode_index, decode_info, IndexEntry, Trailer, TRAILER_LEN};
use super::MAX_BLOCK_LEN;
use crate::cell::StoreKey;
use crate::fs::{FileSystem, ReadFile};
use crate::schema::BloomType;
use bytes::Bytes;
use std::fmt;
use std::path::{Path, PathBuf};

/// What kind of problem a [`Finding`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FindingKind {
    /// The file does not exist (the catalog lists it).
    Missing,
    /// The file could not be read (an I/O error other than its end).
    Unreadable,
    /// The trailer is short, has a bad magic, version or CRC, or places the metadata blocks
    /// where they cannot be; nothing else can be checked.
    Trailer,
    /// A block's CRC does not match its bytes.
    Checksum,
    /// A block's framing is bad: an absurd length, a block running past its section or the
    /// file, an unknown compression code, or stored bytes that do not decompress.
    Framing,
    /// A data block's payload does not decode into entries.
    DataBlock,
    /// Keys are not strictly ascending, within a block or across blocks.
    KeyOrder,
    /// The block index disagrees with itself or with the data blocks.
    Index,
    /// The file-info block is malformed or disagrees with the trailer or the blocks.
    FileInfo,
    /// The bloom block is malformed, or its filter rules out a key the file holds.
    Bloom,
    /// The catalog's record of the file (size, cell count, largest sequence id) disagrees
    /// with the file.
    Catalog,
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            FindingKind::Missing => "missing",
            FindingKind::Unreadable => "unreadable",
            FindingKind::Trailer => "trailer",
            FindingKind::Checksum => "checksum",
            FindingKind::Framing => "framing",
            FindingKind::DataBlock => "data block",
            FindingKind::KeyOrder => "key order",
            FindingKind::Index => "index",
            FindingKind::FileInfo => "file info",
            FindingKind::Bloom => "bloom",
            FindingKind::Catalog => "catalog",
        };
        f.write_str(name)
    }
}

/// One problem found in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file.
    pub file: PathBuf,
    /// The offset of the block (or trailer) at fault; 0 for a problem of the whole file.
    pub offset: u64,
    /// What kind of problem it is.
    pub kind: FindingKind,
    /// What is wrong, in words.
    pub reason: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at offset {}: {}: {}",
            self.file.display(),
            self.offset,
            self.kind,
            self.reason
        )
    }
}

/// The result of checking one store file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCheck {
    /// The file checked.
    pub path: PathBuf,
    /// Its size in bytes (0 if it could not be opened).
    pub file_size: u64,
    /// Data blocks read and checked.
    pub data_blocks: u64,
    /// Cells found in the data blocks that decoded.
    pub cells: u64,
    /// Every problem found, in file order as far as possible; empty for a healthy file.
    pub findings: Vec<Finding>,
}

impl FileCheck {
    /// True when nothing is wrong.
    pub fn is_healthy(&self) -> bool {
        self.findings.is_empty()
    }

    /// Adds a finding about this file.
    pub fn add(&mut self, offset: u64, kind: FindingKind, reason: impl Into<String>) {
        self.findings.push(Finding {
            file: self.path.clone(),
            offset,
            kind,
            reason: reason.into(),
        });
    }
}

/// Checks the store file at `path` (see the module doc). I/O failures are findings too
/// ([`FindingKind::Missing`], [`FindingKind::Unreadable`]), so this always returns a report.
/// All file access goes through `fs`.
pub fn verify_file(fs: &dyn FileSystem, path: &Path) -> FileCheck {
    let mut check = FileCheck {
        path: path.to_path_buf(),
        file_size: 0,
        data_blocks: 0,
        cells: 0,
        findings: Vec::new(),
    };
    let opened = fs
        .open_read(path)
        .and_then(|f| f.size().map(|len| (f, len)));
    match opened {
        Ok((file, size)) => {
            check.file_size = size;
            Verifier {
                file,
                size,
                check: &mut check,
            }
            .run();
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            check.add(0, FindingKind::Missing, "file does not exist");
        }
        Err(e) => check.add(0, FindingKind::Unreadable, format!("cannot open: {e}")),
    }
    check
}

/// One data block to check: where it is, and the first key the index gives it (if the index
/// was readable).
struct Extent {
    offset: u64,
    len: u64,
    index_key: Option<StoreKey>,
    /// The index says the block starts a row (no cell of its first row before it).
    starts_row: bool,
}

/// What the data blocks hold, gathered while checking them.
struct Seen {
    /// False once any data block could not be read or decoded.
    complete: bool,
    cells: u64,
    first: Option<StoreKey>,
    last: Option<StoreKey>,
    max_seq: u64,
    min_ts: u64,
    max_ts: u64,
    /// Distinct bloom keys seen and those the filter ruled out (with the first such key).
    bloom_keys: u64,
    bloom_misses: u64,
    bloom_example: Option<StoreKey>,
}

struct Verifier<'a> {
    file: std::sync::Arc<dyn ReadFile>,
    size: u64,
    check: &'a mut FileCheck,
}

impl Verifier<'_> {
    fn add(&mut self, offset: u64, kind: FindingKind, reason: impl Into<String>) {
        self.check.add(offset, kind, reason);
    }

    /// Reads `len` bytes at `offset`, which the caller has checked lie inside the file.
    fn read(&mut self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        match self.file.read_exact_at(&mut buf, offset) {
            Ok(()) => Some(buf),
            Err(e) => {
                let kind = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    FindingKind::Framing
                } else {
                    FindingKind::Unreadable
                };
                self.add(offset, kind, format!("cannot read {len} bytes: {e}"));
                None
            }
        }
    }

    /// Reads, checks and unframes the `what` block of framed length `len` at `offset`, which
    /// must end at or before `limit`. Reports and returns `None` on any problem.
    fn block(&mut self, what: &str, offset: u64, len: u64, limit: u64) -> Option<Bytes> {
        let max = (MAX_BLOCK_LEN + FRAME_OVERHEAD) as u64;
        if len < FRAME_OVERHEAD as u64 || len > max {
            let reason = format!("{what} block has an absurd framed length of {len} bytes");
            self.add(offset, FindingKind::Framing, reason);
            return None;
        }
        match offset.checked_add(len) {
            Some(end) if end <= limit && end <= self.size => {}
            _ => {
                let reason = format!(
                    "{what} block of {len} bytes at {offset} runs past {limit} (file size {})",
                    self.size
                );
                self.add(offset, FindingKind::Framing, reason);
                return None;
            }
        }
        let raw = self.read(offset, len as usize)?;
        let body = raw.len() - 4;
        let mut stored = [0u8; 4];
        stored.copy_from_slice(&raw[body..]);
        let stored = u32::from_be_bytes(stored);
        let computed = crc32fast::hash(&raw[..body]);
        if stored != computed {
            let reason = format!(
                "{what} block checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            );
            self.add(offset, FindingKind::Checksum, reason);
            return None;
        }
        match unframe(raw) {
            Ok(payload) => Some(payload),
            Err(r) => {
                self.add(offset, FindingKind::Framing, format!("{what} block: {r}"));
                None
            }
        }
    }

    fn run(mut self) {
        if self.size < TRAILER_LEN as u64 {
            let reason = format!("file of {} bytes is too short for a trailer", self.size);
            self.add(0, FindingKind::Trailer, reason);
            return;
        }
        let trailer_at = self.size - TRAILER_LEN as u64;
        let Some(raw) = self.read(trailer_at, TRAILER_LEN) else {
            return;
        };
        let mut fixed = [0u8; TRAILER_LEN];
        fixed.copy_from_slice(&raw);
        let t = match Trailer::decode(&fixed) {
            Ok(t) => t,
            Err(r) => return self.add(trailer_at, FindingKind::Trailer, r),
        };
        if let Err(r) = super::reader::check_layout(&t, trailer_at) {
            return self.add(trailer_at, FindingKind::Trailer, r);
        }

        let bloom = self.bloom(&t);
        let index = self.index(&t);
        let extents = match &index {
            Some(entries) => self.extents_from_index(entries, t.index_offset),
            None => self.extents_from_framing(t.index_offset),
        };
        let mut seen = Seen {
            complete: extents.is_some(),
            cells: 0,
            first: None,
            last: None,
            max_seq: 0,
            min_ts: u64::MAX,
            max_ts: 0,
            bloom_keys: 0,
            bloom_misses: 0,
            bloom_example: None,
        };
        for e in extents.iter().flatten() {
            self.data_block(e, t.offsets_stored(), bloom.as_ref(), &mut seen);
        }
        self.check.cells = seen.cells;
        if let Some(b) = &bloom {
            self.bloom_misses(&t, b, &seen);
        }
        self.info(&t, &seen);
    }

    /// The bloom filter, if the file has one and it is well formed.
    fn bloom(&mut self, t: &Trailer) -> Option<Bloom> {
        if t.bloom_len == 0 {
            return None;
        }
        let at = t.bloom_offset;
        if t.entry_count == 0 {
            self.add(at, FindingKind::Bloom, "bloom block in an empty file");
        }
        let limit = self.size - TRAILER_LEN as u64;
        let payload = self.block("bloom", at, u64::from(t.bloom_len), limit)?;
        match Bloom::decode(&payload) {
            Ok(b) => Some(b),
            Err(r) => {
                self.add(at, FindingKind::Bloom, r);
                None
            }
        }
    }

    /// The block index, if it is readable.
    fn index(&mut self, t: &Trailer) -> Option<Vec<IndexEntry>> {
        let at = t.index_offset;
        let payload = self.block("index", at, u64::from(t.index_len), t.info_offset)?;
        match decode_index(&payload, t.index_flags()) {
            Ok(entries) => Some(entries),
            Err(r) => {
                self.add(at, FindingKind::Index, r);
                None
            }
        }
    }

    /// The data blocks the index names, after checking that its entries tile
    /// `0 .. index_offset` with ascending keys. `None` if the tiling is broken, in which case
    /// the blocks are found by their framing instead.
    fn extents_from_index(&mut self, entries: &[IndexEntry], index_at: u64) -> Option<Vec<Extent>> {
        let mut expected = 0u64;
        let mut tiled = true;
        for (i, e) in entries.iter().enumerate() {
            if e.offset != expected {
                let reason = format!(
                    "index entry {i} says offset {}, expected {expected}",
                    e.offset
                );
                self.add(index_at, FindingKind::Index, reason);
                tiled = false;
            }
            if (e.len as usize) <= FRAME_OVERHEAD {
                let reason = format!("index entry {i} has a framed length of {} bytes", e.len);
                self.add(index_at, FindingKind::Index, reason);
                tiled = false;
            }
            if i > 0 && entries[i - 1].first_key >= e.first_key {
                let reason = format!("index entry {i}'s key is not above entry {}'s", i - 1);
                self.add(index_at, FindingKind::Index, reason);
            }
            expected = expected.saturating_add(u64::from(e.len));
        }
        if tiled && expected != index_at {
            let reason =
                format!("data blocks end at {expected} but the index starts at {index_at}");
            self.add(index_at, FindingKind::Index, reason);
            tiled = false;
        }
        if !tiled {
            let walked = self.extents_from_framing(index_at)?;
            return Some(walked);
        }
        // Each block's own header must agree with the length the index gives it.
        let mut out = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            if let Some(len) = self.framed_len_at(e.offset, index_at) {
                if len != u64::from(e.len) {
                    let reason = format!(
                        "index entry {i} gives length {} but the block's header says {len}",
                        e.len
                    );
                    self.add(index_at, FindingKind::Index, reason);
                }
            }
            out.push(Extent {
                offset: e.offset,
                len: u64::from(e.len),
                index_key: Some(e.first_key.clone()),
                starts_row: e.starts_row,
            });
        }
        Some(out)
    }

    /// The framed length the block header at `offset` claims, if the header lies before
    /// `limit`.
    fn framed_len_at(&mut self, offset: u64, limit: u64) -> Option<u64> {
        if offset.checked_add(5).is_none_or(|end| end > limit) {
            return None;
        }
        let header = self.read(offset, 5)?;
        let stored = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        Some(u64::from(stored) + FRAME_OVERHEAD as u64)
    }

    /// The data blocks found by walking their framing from offset 0 to `index_at`. `None`
    /// if the walk breaks (reported).
    fn extents_from_framing(&mut self, index_at: u64) -> Option<Vec<Extent>> {
        let mut out = Vec::new();
        let mut at = 0u64;
        while at < index_at {
            let Some(len) = self.framed_len_at(at, index_at) else {
                let reason = format!("data section ends inside the block header at {at}");
                self.add(at, FindingKind::Framing, reason);
                return None;
            };
            if at + len > index_at {
                let reason =
                    format!("data block of {len} bytes at {at} runs past the index at {index_at}");
                self.add(at, FindingKind::Framing, reason);
                return None;
            }
            out.push(Extent {
                offset: at,
                len,
                index_key: None,
                starts_row: false,
            });
            at += len;
        }
        Some(out)
    }

    /// Checks one data block and folds what it holds into `seen`.
    fn data_block(
        &mut self,
        e: &Extent,
        offsets_stored: bool,
        bloom: Option<&Bloom>,
        seen: &mut Seen,
    ) {
        self.check.data_blocks += 1;
        let limit = self.size - TRAILER_LEN as u64;
        let Some(payload) = self.block("data", e.offset, e.len, limit) else {
            seen.complete = false;
            return;
        };
        let block = match DataBlock::decode(payload, e.len as usize, offsets_stored) {
            Ok(b) => b,
            Err(r) => {
                seen.complete = false;
                return self.add(e.offset, FindingKind::DataBlock, r);
            }
        };
        let mut disorder: Option<(usize, u64)> = None;
        for j in 0..block.len() {
            let key = match block.cell(j) {
                Ok(c) => c.key,
                Err(r) => {
                    seen.complete = false;
                    return self.add(e.offset, FindingKind::DataBlock, r);
                }
            };
            if j == 0 {
                if let Some(k) = e.index_key.as_ref().filter(|k| **k != key) {
                    let reason =
                        format!("index key {k:?} differs from the block's first key {key:?}");
                    self.add(e.offset, FindingKind::Index, reason);
                }
                // Seeks trust the flag to skip the block before: it must not hide cells.
                if let Some(last) = seen
                    .last
                    .as_ref()
                    .filter(|l| e.starts_row && l.row == key.row)
                {
                    let reason = format!(
                        "index says the block starts row {:?}, but the block before ends with \
                         {last:?}",
                        key.row
                    );
                    self.add(e.offset, FindingKind::Index, reason);
                }
            }
            if let Some(last) = &seen.last {
                if key <= *last {
                    let d = disorder.get_or_insert((j, 0));
                    d.1 += 1;
                }
                let new_row = key.row != last.row;
                if let Some(b) = bloom {
                    let new_col = new_row || key.qualifier != last.qualifier;
                    if new_row && b.kind() == BloomType::Row
                        || new_col && b.kind() == BloomType::RowCol
                    {
                        bloom_probe(b, &key, seen);
                    }
                }
            } else if let Some(b) = bloom {
                bloom_probe(b, &key, seen);
            }
            seen.cells += 1;
            seen.max_seq = seen.max_seq.max(key.seq);
            seen.min_ts = seen.min_ts.min(key.ts);
            seen.max_ts = seen.max_ts.max(key.ts);
            if seen.first.is_none() {
                seen.first = Some(key.clone());
            }
            seen.last = Some(key);
        }
        if let Some((j, n)) = disorder {
            let reason = format!(
                "{n} key(s) not above the key before them, the first at entry {j} of the block"
            );
            self.add(e.offset, FindingKind::KeyOrder, reason);
        }
    }

    fn bloom_misses(&mut self, t: &Trailer, b: &Bloom, seen: &Seen) {
        if seen.bloom_misses == 0 {
            return;
        }
        let what = if b.kind() == BloomType::Row {
            "rows"
        } else {
            "row-columns"
        };
        let reason = format!(
            "filter rules out {} of the {} {what} the blocks hold, e.g. {:?}",
            seen.bloom_misses, seen.bloom_keys, seen.bloom_example
        );
        self.add(t.bloom_offset, FindingKind::Bloom, reason);
    }

    /// Checks the file-info block against the trailer and, when every data block was read,
    /// against what they hold.
    fn info(&mut self, t: &Trailer, seen: &Seen) {
        let at = t.info_offset;
        let limit = if t.bloom_len == 0 {
            self.size - TRAILER_LEN as u64
        } else {
            t.bloom_offset
        };
        let info = self
            .block("file-info", at, u64::from(t.info_len), limit)
            .map(|p| decode_info(&p));
        let info = match info {
            Some(Ok(info)) => Some(info),
            Some(Err(r)) => {
                self.add(at, FindingKind::FileInfo, r);
                None
            }
            None => None,
        };
        if let Some(info) = &info {
            if info.entry_count != t.entry_count {
                let reason = format!(
                    "entry count {} differs from the trailer's {}",
                    info.entry_count, t.entry_count
                );
                self.add(at, FindingKind::FileInfo, reason);
            }
        }
        if !seen.complete {
            return;
        }
        if t.entry_count != seen.cells {
            let reason = format!(
                "trailer counts {} cells, the blocks hold {}",
                t.entry_count, seen.cells
            );
            self.add(self.size - TRAILER_LEN as u64, FindingKind::Trailer, reason);
        }
        let Some(info) = info else { return };
        let mut differs = |field: &str, recorded: String, actual: String| {
            if recorded != actual {
                let reason = format!("{field} is {recorded} but the blocks hold {actual}");
                self.check.add(at, FindingKind::FileInfo, reason);
            }
        };
        differs(
            "entry count",
            info.entry_count.to_string(),
            seen.cells.to_string(),
        );
        differs(
            "first key",
            format!("{:?}", info.first_key),
            format!("{:?}", seen.first),
        );
        differs(
            "last key",
            format!("{:?}", info.last_key),
            format!("{:?}", seen.last),
        );
        differs(
            "largest sequence id",
            info.max_seq.to_string(),
            seen.max_seq.to_string(),
        );
        differs(
            "smallest timestamp",
            info.min_ts.to_string(),
            seen.min_ts.to_string(),
        );
        differs(
            "largest timestamp",
            info.max_ts.to_string(),
            seen.max_ts.to_string(),
        );
    }
}

/// Asks the filter about `key`'s row (ROW) or row and qualifier (ROWCOL).
fn bloom_probe(b: &Bloom, key: &StoreKey, seen: &mut Seen) {
    let h = match b.kind() {
        BloomType::RowCol => bloom::row_col_hash(&key.row, &key.qualifier),
        _ => bloom::row_hash(&key.row),
    };
    seen.bloom_keys += 1;
    if !b.may_contain(h) {
        seen.bloom_misses += 1;
        if seen.bloom_example.is_none() {
            seen.bloom_example = Some(key.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::block::Framer;
    use super::super::codec::put_entry;
    use super::super::meta::{encode_index, encode_info};
    use super::super::{FileInfo, StoreFileReader, StoreFileWriter, WriterOptions};
    use super::*;
    use crate::cell::{CellType, StoreCell};
    use crate::schema::Compression;
    use proptest::prelude::*;

    fn cell(row: &str, q: &str, ts: u64, seq: u64) -> StoreCell {
        StoreCell {
            key: StoreKey {
                row: Bytes::copy_from_slice(row.as_bytes()),
                qualifier: Bytes::copy_from_slice(q.as_bytes()),
                ts,
                kind: CellType::Put,
                seq,
            },
            value: Bytes::from(format!("value of {row}/{q}/{ts}")),
        }
    }

    /// `rows` rows of two columns, written by the real writer with small blocks.
    fn write_real(path: &Path, rows: usize, compression: Compression, bloom: BloomType) {
        let opts = WriterOptions {
            block_size: 200,
            compression,
            bloom,
            ..Default::default()
        };
        let mut w = StoreFileWriter::create(&crate::fs::StdFs::shared(), path, opts).unwrap();
        for r in 0..rows {
            for q in ["a", "b"] {
                w.append(&cell(&format!("row{r:04}"), q, 5, r as u64 + 1))
                    .unwrap();
            }
        }
        w.finish().unwrap();
    }

    /// Writes a file block by block from `blocks`, with correct checksums everywhere, after
    /// letting `tweak` change the index, the file info and the bloom filter's row hashes:
    /// so the file is damaged only in ways a checksum cannot see.
    fn write_crafted(
        path: &Path,
        blocks: &[Vec<StoreCell>],
        tweak: impl FnOnce(&mut Vec<IndexEntry>, &mut FileInfo, &mut Vec<u64>),
    ) {
        write_crafted_as(path, blocks, None, false, tweak)
    }

    /// [`write_crafted`], as format version 3 when `offsets` is given (version 4 with
    /// `flags`: index entries with their true starts-a-row flags, before `tweak`): each data
    /// block ends with the offsets table `offsets` makes of the block's number and its true
    /// offsets.
    #[allow(clippy::type_complexity)]
    fn write_crafted_as(
        path: &Path,
        blocks: &[Vec<StoreCell>],
        offsets: Option<&dyn Fn(usize, Vec<u32>) -> Vec<u32>>,
        flags: bool,
        tweak: impl FnOnce(&mut Vec<IndexEntry>, &mut FileInfo, &mut Vec<u64>),
    ) {
        let mut framer = Framer::new(Compression::None).unwrap();
        let (mut out, mut framed, mut index) = (Vec::new(), Vec::new(), Vec::new());
        let mut info = FileInfo {
            first_key: None,
            last_key: None,
            max_seq: 0,
            min_ts: u64::MAX,
            max_ts: 0,
            entry_count: 0,
            file_size: 0,
        };
        let mut hashes = Vec::new();
        for (n, b) in blocks.iter().enumerate() {
            let mut payload = Vec::new();
            let mut at = Vec::new();
            for c in b {
                at.push(payload.len() as u32);
                put_entry(&mut payload, c);
                info.first_key.get_or_insert(c.key.clone());
                info.last_key = Some(c.key.clone());
                info.max_seq = info.max_seq.max(c.key.seq);
                info.min_ts = info.min_ts.min(c.key.ts);
                info.max_ts = info.max_ts.max(c.key.ts);
                info.entry_count += 1;
                hashes.push(bloom::row_hash(&c.key.row));
            }
            if let Some(f) = offsets {
                super::super::data::put_offsets(&mut payload, &f(n, at));
            }
            framer
                .frame(&payload, Compression::None, &mut framed)
                .unwrap();
            let starts_row =
                n == 0 || blocks[n - 1].last().map(|c| &c.key.row) != Some(&b[0].key.row);
            index.push(IndexEntry {
                first_key: b[0].key.clone(),
                offset: out.len() as u64,
                len: framed.len() as u32,
                starts_row,
            });
            out.extend_from_slice(&framed);
        }
        tweak(&mut index, &mut info, &mut hashes);
        let mut block = |payload: &[u8], out: &mut Vec<u8>| {
            let at = out.len() as u64;
            framer
                .frame(payload, Compression::None, &mut framed)
                .unwrap();
            out.extend_from_slice(&framed);
            (at, framed.len() as u32)
        };
        let mut payload = Vec::new();
        let flags = flags && offsets.is_some();
        encode_index(&index, flags, &mut payload);
        let (index_offset, index_len) = block(&payload, &mut out);
        payload.clear();
        encode_info(&info, &mut payload);
        let (info_offset, info_len) = block(&payload, &mut out);
        bloom::encode(BloomType::Row, &hashes, 0.01, &mut payload);
        let (bloom_offset, bloom_len) = block(&payload, &mut out);
        let trailer = Trailer {
            index_offset,
            index_len,
            info_offset,
            info_len,
            bloom_offset,
            bloom_len,
            entry_count: info.entry_count,
            version: match (offsets, flags) {
                (Some(_), true) => super::super::meta::VERSION,
                (Some(_), false) => super::super::meta::VERSION_3,
                // Blocks of entries only, as version 2 wrote them: old files stay checkable.
                (None, _) => super::super::meta::VERSION_2,
            },
        };
        out.extend_from_slice(&trailer.encode());
        std::fs::write(path, out).unwrap();
    }

    /// The format version in `path`'s trailer (bytes 8..12 of the last 60).
    fn stored_version(path: &Path) -> u32 {
        let raw = std::fs::read(path).unwrap();
        let at = raw.len() - super::super::meta::TRAILER_LEN + 8;
        u32::from_be_bytes(raw[at..at + 4].try_into().unwrap())
    }

    fn three_blocks() -> Vec<Vec<StoreCell>> {
        vec![
            vec![cell("a", "q", 9, 1), cell("b", "q", 9, 2)],
            vec![cell("c", "q", 9, 3), cell("d", "q", 8, 4)],
            vec![cell("e", "q", 7, 5)],
        ]
    }

    fn kinds(c: &FileCheck) -> Vec<FindingKind> {
        c.findings.iter().map(|f| f.kind).collect()
    }

    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.sf");
        (dir, path)
    }

    #[test]
    fn healthy_files_report_nothing() {
        let (_dir, path) = tmp();
        for compression in [
            Compression::None,
            Compression::Lz4,
            Compression::Zstd,
            Compression::Snappy,
        ] {
            for bloom in [BloomType::None, BloomType::Row, BloomType::RowCol] {
                for rows in [0, 1, 40] {
                    write_real(&path, rows, compression, bloom);
                    let c = verify_file(&crate::fs::StdFs, &path);
                    assert!(c.is_healthy(), "{compression:?} {bloom:?} {rows}: {c:?}");
                    assert_eq!(c.cells, rows as u64 * 2);
                    let r =
                        StoreFileReader::open(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
                    assert_eq!(c.data_blocks, r.block_count() as u64);
                    assert_eq!(c.file_size, r.info().file_size);
                }
            }
        }
        write_crafted(&path, &three_blocks(), |_, _, _| {});
        let c = verify_file(&crate::fs::StdFs, &path);
        assert!(c.is_healthy(), "{c:?}");
        assert_eq!((c.data_blocks, c.cells), (3, 5));
    }

    #[test]
    fn version_2_files_are_read_scanned_and_searched() {
        // `write_crafted` writes version-2 files: data blocks of entries only.
        let (_dir, path) = tmp();
        let blocks = three_blocks();
        write_crafted(&path, &blocks, |_, _, _| {});
        assert_eq!(stored_version(&path), super::super::meta::VERSION_2);
        let all: Vec<StoreCell> = blocks.iter().flatten().cloned().collect();
        let r = StoreFileReader::open(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
        let first = StoreKey::first_on_row(Bytes::new());
        let scanned: Vec<StoreCell> = r.scan_from(&first).map(|c| c.unwrap()).collect();
        assert_eq!(scanned, all);
        for (i, want) in all.iter().enumerate() {
            let from: Vec<StoreCell> = r.scan_from(&want.key).map(|c| c.unwrap()).collect();
            assert_eq!(from, all[i..], "seek to {:?}", want.key);
        }
    }

    /// Rows that straddle blocks (`b`, `d`) and a row that starts one (`d` starts block 2).
    fn straddling_blocks() -> Vec<Vec<StoreCell>> {
        vec![
            vec![cell("a", "q", 9, 1), cell("b", "q", 9, 2)],
            vec![cell("b", "r", 9, 3), cell("c", "q", 9, 4)],
            vec![cell("d", "q", 9, 5)],
            vec![cell("d", "r", 9, 6), cell("e", "q", 9, 7)],
        ]
    }

    #[test]
    fn versions_2_3_and_4_read_alike_and_version_4_seeks_skip_the_block_before_a_row() {
        let blocks = straddling_blocks();
        let all: Vec<StoreCell> = blocks.iter().flatten().cloned().collect();
        type Offsets<'a> = Option<&'a dyn Fn(usize, Vec<u32>) -> Vec<u32>>;
        let layouts: [(Offsets, bool, u32); 3] = [
            (None, false, super::super::meta::VERSION_2),
            (Some(&|_, at| at), false, super::super::meta::VERSION_3),
            (Some(&|_, at| at), true, super::super::meta::VERSION),
        ];
        for (offsets, flags, version) in layouts {
            let (_dir, path) = tmp();
            write_crafted_as(&path, &blocks, offsets, flags, |_, _, _| {});
            assert_eq!(stored_version(&path), version);
            assert!(
                verify_file(&crate::fs::StdFs, &path).is_healthy(),
                "v{version}"
            );
            let cache = std::sync::Arc::new(super::super::BlockCache::new(1 << 20));
            let fs = crate::fs::StdFs::shared();
            let r = StoreFileReader::open(&fs, &path, 1, Some(cache.clone())).unwrap();
            for row in ["a", "b", "c", "d", "e", "bb", "z"] {
                let start = StoreKey::first_on_row(Bytes::from(row));
                let want: Vec<&StoreCell> = all.iter().filter(|c| c.key >= start).collect();
                let got: Vec<StoreCell> = r.scan_from(&start).map(|c| c.unwrap()).collect();
                assert_eq!(
                    got.iter().collect::<Vec<_>>(),
                    want,
                    "v{version} from {row}"
                );
            }
            // A point read of `d` (which starts block 2): version 4 reads block 2 alone,
            // older versions read block 1 first (the last block starting before `d`).
            let d = Bytes::from("d");
            let before = cache.hits() + cache.misses();
            let got: Vec<StoreCell> = r
                .scan_from(&StoreKey::first_on_row(d.clone()))
                .end_at_row(d.clone())
                .map(|c| c.unwrap())
                .filter(|c| c.key.row == d)
                .collect();
            assert_eq!(got.len(), 2, "v{version}");
            let blocks_read = cache.hits() + cache.misses() - before;
            let expected = if flags { 2 } else { 3 };
            assert_eq!(blocks_read, expected, "v{version}: blocks read for row d");
        }
    }

    #[test]
    fn a_starts_row_flag_that_hides_cells_is_reported() {
        let (_dir, path) = tmp();
        let mut at = 0;
        // Block 1 starts with row `b`, whose first cell is in block 0.
        write_crafted_as(
            &path,
            &straddling_blocks(),
            Some(&|_, at| at),
            true,
            |index, _, _| {
                index[1].starts_row = true;
                at = index[1].offset;
            },
        );
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::Index], "{c:?}");
        assert_eq!(c.findings[0].offset, at);
        assert!(c.findings[0].reason.contains("starts row"), "{c:?}");
    }

    #[test]
    fn new_files_end_each_data_block_with_its_offsets() {
        let (_dir, path) = tmp();
        write_real(&path, 40, Compression::None, BloomType::Row);
        assert_eq!(stored_version(&path), super::super::meta::VERSION);
        let raw = std::fs::read(&path).unwrap();
        let r = StoreFileReader::open(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
        let cells = r.info().entry_count as usize;
        // The first block, uncompressed: stored length at 1..5, payload from 5.
        let len = u32::from_be_bytes(raw[1..5].try_into().unwrap()) as usize;
        let payload = &raw[5..5 + len];
        let width = payload[len - 1];
        let count = u32::from_be_bytes(payload[len - 5..len - 1].try_into().unwrap()) as usize;
        assert_eq!(width, 2);
        assert!(count >= 1 && count <= cells, "{count} of {cells}");
        assert_eq!(
            &payload[len - 5 - 2 * count..len - 5 - 2 * count + 2],
            &[0, 0]
        );
    }

    #[test]
    fn an_offsets_table_pointing_inside_an_entry_is_reported() {
        let (_dir, path) = tmp();
        let blocks = three_blocks();
        write_crafted_as(&path, &blocks, Some(&|_, at| at), true, |_, _, _| {});
        assert!(verify_file(&crate::fs::StdFs, &path).is_healthy());
        // Block 1's second offset moved 3 bytes into its first entry, under a valid CRC.
        let inside = |n: usize, mut at: Vec<u32>| {
            if n == 1 {
                at[1] -= 3;
            }
            at
        };
        write_crafted_as(&path, &blocks, Some(&inside), true, |_, _, _| {});
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::DataBlock], "{c:?}");
        let block_1 = c.findings[0].offset;
        let r = StoreFileReader::open(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
        let first = StoreKey::first_on_row(Bytes::new());
        let err = r.scan_from(&first).find_map(|c| c.err()).unwrap();
        assert!(
            matches!(&err, crate::Error::Corruption { offset, .. } if *offset == block_1),
            "{err:?}"
        );
    }

    #[test]
    fn keys_out_of_order_within_a_block_are_reported() {
        let (_dir, path) = tmp();
        let mut blocks = three_blocks();
        blocks[1] = vec![cell("d", "q", 9, 3), cell("c", "q", 8, 4)];
        write_crafted(&path, &blocks, |_, _, _| {});
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::KeyOrder], "{c:?}");
        assert!(
            StoreFileReader::open(&crate::fs::StdFs::shared(), &path, 1, None).is_ok(),
            "open does not read data blocks, so only the check sees this"
        );
        assert!(c.findings[0].reason.contains("entry 1"), "{c:?}");
    }

    #[test]
    fn keys_out_of_order_across_blocks_are_reported() {
        let (_dir, path) = tmp();
        let mut blocks = three_blocks();
        // Block 1 starts above block 0's first key but below its last key.
        blocks[1] = vec![cell("a", "r", 9, 3), cell("d", "q", 8, 4)];
        let mut at = 0;
        write_crafted(&path, &blocks, |index, _, _| at = index[1].offset);
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::KeyOrder], "{c:?}");
        assert_eq!(c.findings[0].offset, at);
    }

    #[test]
    fn an_index_key_that_differs_from_its_block_is_reported() {
        let (_dir, path) = tmp();
        let mut at = 0;
        write_crafted(&path, &three_blocks(), |index, _, _| {
            index[2].first_key = cell("dd", "q", 9, 9).key;
            at = index[2].offset;
        });
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::Index], "{c:?}");
        assert_eq!(c.findings[0].offset, at);
    }

    #[test]
    fn an_index_that_does_not_tile_the_data_is_reported_and_the_blocks_still_checked() {
        let (_dir, path) = tmp();
        write_crafted(&path, &three_blocks(), |index, _, _| {
            index[1].offset += 1;
        });
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::Index], "{c:?}");
        assert!(c.findings[0].reason.contains("index entry 1"), "{c:?}");
        assert_eq!((c.data_blocks, c.cells), (3, 5));
    }

    #[test]
    fn file_info_that_disagrees_with_the_blocks_is_reported() {
        let (_dir, path) = tmp();
        write_crafted(&path, &three_blocks(), |_, info, _| {
            info.max_seq = 4;
            info.max_ts = 10;
        });
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::FileInfo; 2], "{c:?}");
        assert!(c.findings[0].reason.contains("largest sequence id is 4"));
        assert!(c.findings[1].reason.contains("largest timestamp is 10"));

        write_crafted(&path, &three_blocks(), |_, info, _| info.entry_count = 6);
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(
            kinds(&c),
            [FindingKind::Trailer, FindingKind::FileInfo],
            "{c:?}"
        );
    }

    #[test]
    fn a_bloom_filter_that_rules_out_a_present_row_is_reported() {
        let (_dir, path) = tmp();
        write_crafted(&path, &three_blocks(), |_, _, hashes| hashes.truncate(1));
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::Bloom], "{c:?}");
        assert!(c.findings[0].reason.contains("of the 5 rows"), "{c:?}");
    }

    #[test]
    fn a_flipped_data_byte_is_one_finding_at_its_block() {
        let (_dir, path) = tmp();
        write_real(&path, 40, Compression::Lz4, BloomType::Row);
        let good = std::fs::read(&path).unwrap();
        let blocks = verify_file(&crate::fs::StdFs, &path).data_blocks;
        let first_len = 9 + u64::from(u32::from_be_bytes(good[1..5].try_into().unwrap()));
        let mut bad = good.clone();
        bad[first_len as usize + 7] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::Checksum], "{c:?}");
        assert_eq!(c.findings[0].offset, first_len);
        assert_eq!(c.findings[0].file, path);
        assert_eq!(c.data_blocks, blocks, "every other block is still checked");
    }

    #[test]
    fn a_damaged_index_is_reported_and_the_blocks_are_walked() {
        let (_dir, path) = tmp();
        write_real(&path, 40, Compression::None, BloomType::Row);
        let r = StoreFileReader::open(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
        let (blocks, cells) = (r.block_count() as u64, r.info().entry_count);
        drop(r);
        let mut bytes = std::fs::read(&path).unwrap();
        let trailer_at = bytes.len() - TRAILER_LEN;
        let index_at =
            u64::from_be_bytes(bytes[trailer_at + 12..trailer_at + 20].try_into().unwrap());
        bytes[index_at as usize + 6] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::Checksum], "{c:?}");
        assert_eq!(c.findings[0].offset, index_at);
        assert_eq!((c.data_blocks, c.cells), (blocks, cells));
    }

    #[test]
    fn short_damaged_and_missing_files_are_reported() {
        let (dir, path) = tmp();
        write_real(&path, 10, Compression::None, BloomType::Row);
        let good = std::fs::read(&path).unwrap();
        std::fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert_eq!(
            kinds(&verify_file(&crate::fs::StdFs, &path)),
            [FindingKind::Trailer]
        );
        std::fs::write(&path, &good[..10]).unwrap();
        assert_eq!(
            kinds(&verify_file(&crate::fs::StdFs, &path)),
            [FindingKind::Trailer]
        );
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 50] ^= 1; // the trailer's version
        std::fs::write(&path, &bad).unwrap();
        let c = verify_file(&crate::fs::StdFs, &path);
        assert_eq!(kinds(&c), [FindingKind::Trailer]);
        assert_eq!(c.findings[0].offset, (n - TRAILER_LEN) as u64);
        let c = verify_file(&crate::fs::StdFs, &dir.path().join("nope.sf"));
        assert_eq!(kinds(&c), [FindingKind::Missing]);
    }

    fn arb_rows() -> impl Strategy<Value = Vec<(String, u64, usize)>> {
        proptest::collection::btree_map("[a-d]{0,3}", (1u64..5, 0usize..300), 0..30)
            .prop_map(|m| m.into_iter().map(|(r, (ts, len))| (r, ts, len)).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A healthy file reports nothing; any single flipped byte is reported, with every
        /// finding naming the file and one at or before the flipped byte; nothing panics.
        #[test]
        fn a_single_flipped_byte_is_always_reported(
            rows in arb_rows(),
            compression in proptest::sample::select(vec![
                Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy,
            ]),
            bloom in proptest::sample::select(vec![BloomType::None, BloomType::Row, BloomType::RowCol]),
            block_size in 16usize..400,
            pos in any::<proptest::sample::Index>(),
            mask in 1u8..=255,
        ) {
            let (_dir, path) = tmp();
            let opts = WriterOptions { block_size, compression, bloom, ..Default::default() };
            let mut w = StoreFileWriter::create(&crate::fs::StdFs::shared(), &path, opts).unwrap();
            for (i, (row, ts, len)) in rows.iter().enumerate() {
                let mut c = cell(row, "q", *ts, i as u64);
                c.value = Bytes::from(vec![b'x'; *len]);
                w.append(&c).unwrap();
            }
            w.finish().unwrap();
            let healthy = verify_file(&crate::fs::StdFs, &path);
            prop_assert!(healthy.is_healthy(), "{:?}", healthy);
            prop_assert_eq!(healthy.cells, rows.len() as u64);

            let mut bytes = std::fs::read(&path).unwrap();
            let at = pos.index(bytes.len());
            bytes[at] ^= mask;
            std::fs::write(&path, &bytes).unwrap();
            let c = verify_file(&crate::fs::StdFs, &path);
            prop_assert!(!c.is_healthy(), "flip at {} of {} not reported", at, bytes.len());
            prop_assert!(c.findings.iter().all(|f| f.file == path));
            prop_assert!(c.findings.iter().any(|f| f.offset <= at as u64), "{:?}", c);
        }
    }
}
