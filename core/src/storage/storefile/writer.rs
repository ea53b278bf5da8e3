//! Writes one store file, cells in ascending key order, atomically.
//!
//! Invariants: bytes go to an unfinished object (see `crate::objects`); nothing exists under
//! the file's name until [`StoreFileWriter::finish`] has written everything and stored the
//! object durably, create-if-absent: a store file is never overwritten. A writer that is
//! dropped unfinished leaves nothing. After any error (out-of-order cell, I/O failure) the
//! writer is unusable: every later call fails and nothing is ever stored.

use super::block::{write_plain, Framer};
use super::bloom;
use super::codec::{entry_len, put_entry};
use super::data::{offsets_len, put_offsets, OFFSETS_OVERHEAD};
use super::meta::{encode_index, encode_info, IndexEntry, Trailer, VERSION};
use super::{FileInfo, WriterOptions, MAX_BLOCK_LEN, ROW_SLACK};
use crate::cell::{same_bytes, CellRef, CellType, StoreCell, StoreKey};
use crate::error::{Error, Result};
use crate::objects::{ObjectWriter, Objects, PutMode};
use crate::schema::{BloomType, Compression};
use std::cmp::Ordering;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// Adapts an [`ObjectWriter`] to [`std::io::Write`] for a `BufWriter`.
#[derive(Debug)]
struct ObjectIo(Box<dyn ObjectWriter>);

impl Write for ObjectIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes a store file; see the `storefile` module doc for the format.
pub struct StoreFileWriter {
    /// Where the file goes, for messages.
    path: PathBuf,
    /// `None` once finished.
    out: Option<BufWriter<ObjectIo>>,
    opts: WriterOptions,
    framer: Framer,
    /// Bytes written so far (the offset of the next block).
    offset: u64,
    /// The payload of the data block being filled.
    block: Vec<u8>,
    /// The offset of each entry of the open data block (written after its entries).
    block_offsets: Vec<u32>,
    block_first: Option<StoreKey>,
    /// Whether the open block's first cell is its row's first cell.
    block_starts_row: bool,
    /// Reused buffer for framed blocks.
    framed: Vec<u8>,
    index: Vec<IndexEntry>,
    info: FileInfo,
    /// One bloom hash per distinct row (or row + qualifier) so far; empty without a bloom.
    bloom_hashes: Vec<u64>,
    /// The key of the last cell appended, its bytes copied into reused buffers (the file
    /// info's last key is built from it at the end).
    last: Option<LastKey>,
    failed: bool,
}

/// The last key a writer appended.
#[derive(Debug)]
struct LastKey {
    row: Vec<u8>,
    qualifier: Vec<u8>,
    ts: u64,
    kind: CellType,
    seq: u64,
}

impl Default for LastKey {
    fn default() -> Self {
        LastKey {
            row: Vec::new(),
            qualifier: Vec::new(),
            ts: 0,
            kind: CellType::Put,
            seq: 0,
        }
    }
}

impl LastKey {
    fn as_ref(&self) -> CellRef<'_> {
        CellRef {
            row: &self.row,
            qualifier: &self.qualifier,
            ts: self.ts,
            kind: self.kind,
            seq: self.seq,
            value: &[],
        }
    }
}

impl StoreFileWriter {
    /// A writer of the file at `path` of the local filesystem `fs`, replacing any file
    /// there (tests write one path again and again).
    #[cfg(test)]
    pub fn create_file(
        fs: &Arc<dyn crate::fs::FileSystem>,
        path: &std::path::Path,
        opts: WriterOptions,
    ) -> Result<Self> {
        let (objects, name) = crate::objects::LocalObjects::of_file(fs, path)?;
        objects.delete(&name)?;
        Self::create(&objects, &name, opts)
    }

    /// Starts writing object `name` of `objects`; nothing appears under the name until
    /// [`finish`](Self::finish).
    pub fn create(objects: &Arc<dyn Objects>, name: &str, opts: WriterOptions) -> Result<Self> {
        if opts.block_size == 0 {
            return Err(Error::bad_argument(
                "store file block size must be at least 1",
            ));
        }
        let p = opts.bloom_fp_rate;
        if opts.bloom != BloomType::None && !(p > 0.0 && p < 1.0) {
            return Err(Error::bad_argument(format!(
                "bloom false-positive rate must be in (0, 1), got {p}"
            )));
        }
        let framer = Framer::new(opts.compression)?;
        let file = ObjectIo(objects.writer(name)?);
        Ok(StoreFileWriter {
            path: objects.locate(name),
            out: Some(BufWriter::with_capacity(256 * 1024, file)),
            opts,
            framer,
            offset: 0,
            block: Vec::with_capacity(opts.block_size.min(MAX_BLOCK_LEN) + 1024),
            block_offsets: Vec::new(),
            block_first: None,
            block_starts_row: false,
            framed: Vec::new(),
            index: Vec::new(),
            info: FileInfo {
                first_key: None,
                last_key: None,
                max_seq: 0,
                min_ts: u64::MAX,
                max_ts: 0,
                entry_count: 0,
                file_size: 0,
            },
            bloom_hashes: Vec::new(),
            last: None,
            failed: false,
        })
    }

    /// Appends one cell. Cells must come in strictly ascending [`StoreKey`] order; otherwise
    /// this returns [`Error::BadArgument`] and the writer is unusable.
    pub fn append(&mut self, cell: &StoreCell) -> Result<()> {
        self.append_ref(&CellRef::of(cell))
    }

    /// [`StoreFileWriter::append`] of a borrowed cell: a flush writes a MemStore's cells
    /// straight from its rows, building no [`StoreCell`].
    pub fn append_ref(&mut self, cell: &CellRef<'_>) -> Result<()> {
        self.check_usable()?;
        let new_row = match &self.last {
            Some(last) => {
                if cell.cmp_key(&last.as_ref()) != Ordering::Greater {
                    self.failed = true;
                    return Err(Error::bad_argument(format!(
                        "store file cells out of order: {:?} after {:?}",
                        cell.to_key(),
                        last.as_ref().to_key()
                    )));
                }
                !same_bytes(&last.row, cell.row)
            }
            None => true,
        };
        let len = entry_len(cell);
        if len + OFFSETS_OVERHEAD > MAX_BLOCK_LEN {
            // Nothing was written: the writer stays usable.
            return Err(Error::bad_argument(format!(
                "cell of {len} encoded bytes exceeds the block limit of {MAX_BLOCK_LEN}"
            )));
        }
        let listed = offsets_len(self.block_offsets.len() + 1, self.block.len() + len);
        let size = self.opts.block_size;
        // A full block closes at a row boundary, or inside a row past the slack.
        let full = self.block.len() >= size
            && (new_row || self.block.len() >= size.saturating_add(size / ROW_SLACK));
        if !self.block.is_empty() && (full || self.block.len() + len + listed > MAX_BLOCK_LEN) {
            self.guard(Self::flush_block)?;
        }
        if self.block.is_empty() {
            self.block_first = Some(cell.to_key());
            self.block_starts_row = new_row;
        }
        // Blocks stay under MAX_BLOCK_LEN (checked above), so offsets fit in a u32.
        self.block_offsets
            .push(u32::try_from(self.block.len()).unwrap_or(u32::MAX));
        put_entry(&mut self.block, cell);
        // Keys are sorted, so a row (`new_row`, above) or a row + qualifier is new iff it
        // differs from the last.
        match self.opts.bloom {
            BloomType::None => {}
            BloomType::Row => {
                if new_row {
                    self.bloom_hashes.push(bloom::row_hash(cell.row));
                }
            }
            BloomType::RowCol => {
                let new_column = self
                    .last
                    .as_ref()
                    .is_none_or(|l| !same_bytes(&l.qualifier, cell.qualifier));
                if new_row || new_column {
                    let h = bloom::row_col_hash(cell.row, cell.qualifier);
                    self.bloom_hashes.push(h);
                }
            }
        }
        let info = &mut self.info;
        if info.first_key.is_none() {
            info.first_key = Some(cell.to_key());
        }
        info.max_seq = info.max_seq.max(cell.seq);
        info.min_ts = info.min_ts.min(cell.ts);
        info.max_ts = info.max_ts.max(cell.ts);
        info.entry_count += 1;
        let last = self.last.get_or_insert_with(LastKey::default);
        if new_row {
            last.row.clear();
            last.row.extend_from_slice(cell.row);
        }
        last.qualifier.clear();
        last.qualifier.extend_from_slice(cell.qualifier);
        (last.ts, last.kind, last.seq) = (cell.ts, cell.kind, cell.seq);
        Ok(())
    }

    /// Writes index, file info, bloom filter and trailer and stores the object durably
    /// (create-if-absent). Returns what the file holds.
    pub fn finish(mut self) -> Result<FileInfo> {
        self.check_usable()?;
        self.guard(Self::finish_inner)
    }

    fn finish_inner(&mut self) -> Result<FileInfo> {
        self.flush_block()?;
        self.info.last_key = self.last.as_ref().map(|l| l.as_ref().to_key());
        let index_offset = self.offset;
        let mut payload = Vec::new();
        encode_index(&self.index, true, &mut payload);
        let index_len = self.write_block(&payload, self.opts.compression)?;
        let info_offset = self.offset;
        payload.clear();
        encode_info(&self.info, &mut payload);
        let info_len = self.write_block(&payload, Compression::None)?;
        let (mut bloom_offset, mut bloom_len) = (0, 0);
        if self.opts.bloom != BloomType::None && !self.bloom_hashes.is_empty() {
            let (kind, p) = (self.opts.bloom, self.opts.bloom_fp_rate);
            bloom::encode(kind, &self.bloom_hashes, p, &mut payload);
            self.bloom_hashes = Vec::new();
            bloom_offset = self.offset;
            bloom_len = self.write_block(&payload, Compression::None)?;
        }
        let trailer = Trailer {
            index_offset,
            index_len,
            info_offset,
            info_len,
            bloom_offset,
            bloom_len,
            entry_count: self.info.entry_count,
            version: VERSION,
        };
        let mut out = self.out.take().ok_or_else(finished)?;
        out.write_all(&trailer.encode())?;
        self.offset += super::meta::TRAILER_LEN as u64;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.0.finish(PutMode::Create)?;
        let mut info = self.info.clone();
        info.file_size = self.offset;
        tracing::debug!(path = %self.path.display(), entries = info.entry_count,
            size = info.file_size, blocks = self.index.len(), "store file written");
        Ok(info)
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::bad_argument(
                "store file writer is unusable after an earlier error",
            ));
        }
        Ok(())
    }

    /// Runs `f`, marking the writer unusable if it fails.
    fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let r = f(self);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    /// Closes the open data block (if any): frames it, writes it and indexes it.
    fn flush_block(&mut self) -> Result<()> {
        let Some(first_key) = self.block_first.take() else {
            return Ok(());
        };
        let offset = self.offset;
        let mut block = std::mem::take(&mut self.block);
        put_offsets(&mut block, &self.block_offsets);
        self.block_offsets.clear();
        let len = self.write_block(&block, self.opts.compression);
        self.block = block;
        self.block.clear();
        let len = len?;
        self.index.push(IndexEntry {
            first_key,
            offset,
            len,
            starts_row: self.block_starts_row,
        });
        Ok(())
    }

    /// Frames and writes one block; returns its framed length.
    fn write_block(&mut self, payload: &[u8], compression: Compression) -> Result<u32> {
        let out = self.out.as_mut().ok_or_else(finished)?;
        let framed = if compression == Compression::None {
            // Written in place: no copy into the framing buffer.
            write_plain(payload, out)?
        } else {
            self.framer.frame(payload, compression, &mut self.framed)?;
            out.write_all(&self.framed)?;
            self.framed.len()
        };
        let len = u32::try_from(framed)
            .map_err(|_| Error::bad_argument("block too large for the format"))?;
        self.offset += u64::from(len);
        Ok(len)
    }
}

impl std::fmt::Debug for StoreFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreFileWriter")
            .field("path", &self.path)
            .field("opts", &self.opts)
            .field("offset", &self.offset)
            .field("entries", &self.info.entry_count)
            .field("failed", &self.failed)
            .finish()
    }
}

/// The error of a writer used after `finish`.
fn finished() -> Error {
    Error::bad_argument("store file writer already finished")
}
