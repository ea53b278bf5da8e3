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

mod report;

pub use report::{FileCheck, Finding, FindingKind};

use super::block::{unframe, FRAME_OVERHEAD};
use super::bloom::{self, Bloom};
use super::data::DataBlock;
use super::meta::{decode_index, decode_info, IndexEntry, Trailer, TRAILER_LEN};
use super::MAX_BLOCK_LEN;
use crate::cell::StoreKey;
use crate::fs::ReadFile;
use crate::objects::Objects;
use crate::schema::BloomType;
use bytes::Bytes;

/// Checks the store file at `path` of the local filesystem `fs` (tests).
#[cfg(test)]
pub fn verify_path(
    fs: &std::sync::Arc<dyn crate::fs::FileSystem>,
    path: &std::path::Path,
) -> FileCheck {
    match crate::objects::LocalObjects::of_file(fs, path) {
        Ok((objects, name)) => verify_file(&*objects, &name),
        Err(e) => {
            let mut check = FileCheck {
                path: path.to_path_buf(),
                file_size: 0,
                data_blocks: 0,
                cells: 0,
                findings: Vec::new(),
            };
            check.add(0, FindingKind::Unreadable, format!("cannot open: {e}"));
            check
        }
    }
}

/// Checks store file `name` of `objects` (see the module doc). I/O failures are findings
/// too ([`FindingKind::Missing`], [`FindingKind::Unreadable`]), so this always returns a
/// report.
pub fn verify_file(objects: &dyn Objects, name: &str) -> FileCheck {
    let mut check = FileCheck {
        path: objects.locate(name),
        file_size: 0,
        data_blocks: 0,
        cells: 0,
        findings: Vec::new(),
    };
    let opened = objects
        .open(name)
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
mod tests;
