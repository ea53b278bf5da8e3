//! Store files: Basalt's immutable, sorted, block-based file format (its HFile).
//!
//! A store file holds the cells of one store (one column family of one region) in
//! [`StoreKey`] order, is written once by [`StoreFileWriter`] (flush or compaction) and is
//! then only read, by any number of threads at once, through [`StoreFileReader`]. Decoded
//! data blocks are shared between readers through one [`BlockCache`].
//!
//! This comment is the specification of the on-disk format. It is stable: a change needs a
//! new version number in the trailer.
//!
//! # Conventions
//!
//! * Integers are big-endian ("BE") unless they are a *varint*: unsigned LEB128, 7 bits per
//!   byte, least significant group first, high bit set on every byte but the last, at most
//!   10 bytes, and the value must fit in 64 bits.
//! * A *key* is encoded as
//!
//!   | size        | field                                                   |
//!   |-------------|---------------------------------------------------------|
//!   | varint      | row length `R`                                          |
//!   | `R`         | row                                                     |
//!   | varint      | qualifier length `Q`                                    |
//!   | `Q`         | qualifier (may be empty)                                |
//!   | 8           | timestamp, u64 BE                                       |
//!   | 1           | type: a [`CellType`] code (4, 5, 8, 10, 12, 14); any other byte is corruption. 5 (ExpiringPut: a put with a cell TTL, whose value begins with the TTL in milliseconds, 8 bytes big-endian) sorts as 4 does, ties broken after the sequence id by the code, descending; builds before it read 5 as corruption |
//!   | varint      | sequence id                                             |
//!
//! # File layout
//!
//! ```text
//! offset 0
//! | data block 0 | ... | data block n-1 | index block | file-info block | [bloom block] | trailer |
//!                                                                                     60 bytes
//! ```
//!
//! Blocks are contiguous: data block 0 starts at offset 0, each block starts where the
//! previous one ends, the index block directly follows the last data block, the file-info
//! block directly follows the index block, the bloom block (if any) directly follows the
//! file-info block and the trailer occupies the last 60 bytes. A file with no cells has no
//! data block (the index is then empty) and no bloom block; a file written with
//! [`BloomType::None`] has no bloom block.
//!
//! # Block framing
//!
//! Every block (data, index, file info, bloom) is framed the same way on disk:
//!
//! | offset  | size | field                                                          |
//! |---------|------|----------------------------------------------------------------|
//! | 0       | 1    | compression code: 0 none, 1 LZ4, 2 Zstandard, 3 Snappy        |
//! | 1       | 4    | stored length `L`, u32 BE                                      |
//! | 5       | `L`  | stored bytes                                                   |
//! | 5 + `L` | 4    | CRC-32 (IEEE, as computed by `crc32fast`) of bytes `0 .. 5+L`, u32 BE |
//!
//! The *payload* is the stored bytes after decompression:
//!
//! * code 0: the stored bytes themselves;
//! * code 1: `lz4_flex` block format with the size prepended: the payload length as u32
//!   **little-endian**, then one LZ4 block;
//! * code 2: one Zstandard frame whose header carries the content size;
//! * code 3: raw Snappy (no framing format), which starts with the payload length as a
//!   varint.
//!
//! The writer falls back to code 0 for a block that does not shrink when compressed. A
//! payload or a stored length above [`MAX_BLOCK_LEN`] is corruption. The framed block
//! is 9 bytes longer than `L`.
//!
//! # Data block payload
//!
//! One or more entries, back to back, in strictly ascending key order, then (format
//! versions 3 and 4) the offsets table:
//!
//! | size   | field                  |
//! |--------|------------------------|
//! | ...    | key (see above)        |
//! | varint | value length `V`       |
//! | `V`    | value                  |
//!
//! Offsets table (versions 3 and 4), where `E` is the entries' total length in bytes and `n` the
//! number of entries:
//!
//! | size    | field                                                              |
//! |---------|--------------------------------------------------------------------|
//! | `n * w` | each entry's offset from the payload's start, in entry order: u16 BE when `E <= 65,536`, else u32 BE |
//! | 4       | `n`, u32 BE, at least 1                                            |
//! | 1       | `w`, the width of an offset: 2 when `E <= 65,536`, else 4; any other value is corruption |
//!
//! The first offset is 0, offsets ascend strictly, and each entry ends exactly where the
//! next one starts (the last one at `E`); a reader finds the entries without parsing them
//! all (a point read parses only what its binary search visits) and treats any mismatch as
//! corruption. A version-2 payload has no table: entries run to the payload's end, and a
//! reader walks them to find each one.
//!
//! A block whose entries reached the configured block size `B` closes at the next row's
//! first cell, or, inside a row, once its entries reach `B + B / 2` ([`ROW_SLACK`]): a row
//! that fits in that slack never straddles two blocks, so a point read of it reads one
//! block. A block exceeds `B + B / 2` by at most one entry and its offsets table (a single
//! large cell makes a large block). Readers do not rely on this rule (files cut anywhere
//! read the same). The first key of every data block equals its index entry's key.
//!
//! # Index block payload
//!
//! | size   | field                                   |
//! |--------|-----------------------------------------|
//! | varint | number of data blocks `n`               |
//! | ...    | `n` index entries                       |
//!
//! Each index entry: the data block's first key (encoded as a key, no value), then its offset
//! in the file (u64 BE), then its framed on-disk length (u32 BE, including the 9 framing
//! bytes), then (version 4) one flags byte: bit 0 (`STARTS_ROW`) set when the block's first
//! cell is the first cell of its row, so the block before holds no cell of that row; every
//! other bit is 0, and a set one is corruption. Entries are in file order; their keys are
//! strictly ascending. The writer compresses the index block with the file's compression.
//!
//! A forward seek to a key of row `R` starts in the last block whose first key is at or
//! below the key, except when the next block's entry has `STARTS_ROW` and its first key's
//! row is `R`: every cell before that block then sorts below the key, and the seek starts
//! there. With the writer's row-aligned blocks (above), a point read of a row that begins a
//! block reads that block alone. `Admin::check_table` reports a flag that a block before
//! contradicts.
//!
//! # File-info block payload
//!
//! | size | field                                                         |
//! |------|---------------------------------------------------------------|
//! | 1    | 1 if a first key follows, 0 if the file is empty              |
//! | ...  | first key (only if present)                                   |
//! | 1    | 1 if a last key follows, 0 if the file is empty               |
//! | ...  | last key (only if present)                                    |
//! | 8    | largest sequence id, u64 BE (0 for an empty file)             |
//! | 8    | smallest timestamp, u64 BE (`u64::MAX` for an empty file)     |
//! | 8    | largest timestamp, u64 BE (0 for an empty file)               |
//! | 8    | number of cells, u64 BE                                       |
//!
//! Nothing follows. The writer stores the file-info block uncompressed (code 0). The file
//! size is not stored: the reader takes it from the file system.
//!
//! # Bloom block payload
//!
//! A bloom filter over the file's distinct rows (kind 1, ROW) or distinct (row, qualifier)
//! pairs (kind 2, ROWCOL), for every cell type (delete markers included). The writer stores
//! the bloom block uncompressed (code 0); a reader accepts any compression code.
//!
//! | offset | size    | field                                                        |
//! |--------|---------|--------------------------------------------------------------|
//! | 0      | 1       | kind: 1 ROW, 2 ROWCOL (0, "none", is never written: a file without a filter has no bloom block; any other value is corruption) |
//! | 1      | 1       | number of probes `k`, 1 ..= 30                               |
//! | 2      | 4       | hash id, u32 BE: 1 (the only one defined, below)             |
//! | 6      | 8       | number of bits `m`, u64 BE: a multiple of 8, at least 64, at most `(MAX_BLOCK_LEN - 14) * 8` |
//! | 14     | `m / 8` | the bit array: bit `i` is bit `i % 8` (mask `1 << (i % 8)`) of byte `i / 8` |
//!
//! Nothing follows the bit array. Hash id 1:
//!
//! * The key hash `h` is XXH3-64 with seed 0 (the fixed XXH3 specification, as computed
//!   by the `xxhash-rust` crate's `xxh3_64`) of: for ROW, the row bytes; for ROWCOL, the
//!   row length as u64 BE, then the row bytes, then the qualifier bytes (so that
//!   (`ab`, `c`) and (`a`, `bc`) differ).
//! * The probe stride is `s = fmix64(h) | 1`, where `fmix64` is MurmurHash3's 64-bit
//!   finalizer: `x ^= x >> 33; x *= 0xff51afd7ed558ccd; x ^= x >> 33;
//!   x *= 0xc4ceb9fe1a85ec53; x ^= x >> 33` (multiplications modulo 2^64).
//! * The key sets (and a query tests) the `k` bits `((h + i * s) mod 2^64) mod m` for
//!   `i = 0 .. k-1` (Kirsch-Mitzenmacher double hashing). A key may be in the file only if
//!   all `k` bits are set.
//!
//! Sizing (writer's choice, not checked by a reader): for `n` distinct keys and target
//! false-positive rate `p`, `m = ceil(-n ln p / (ln 2)^2)` rounded up to a multiple of 8,
//! at least 64 (and at most the maximum above), and `k = round(m / n * ln 2)` clamped to
//! 1 ..= 30. A ROWCOL filter answers only row + column queries, never row-only ones.
//!
//! # Trailer (the last 60 bytes)
//!
//! | offset | size | field                                              |
//! |--------|------|----------------------------------------------------|
//! | 0      | 8    | magic `BSLTSF01` (ASCII)                           |
//! | 8      | 4    | format version, u32 BE: 4 (3 and 2 are read too)   |
//! | 12     | 8    | index block offset, u64 BE                         |
//! | 20     | 4    | index block framed length, u32 BE                  |
//! | 24     | 8    | file-info block offset, u64 BE                     |
//! | 32     | 4    | file-info block framed length, u32 BE              |
//! | 36     | 8    | bloom block offset, u64 BE (0 if there is no bloom block) |
//! | 44     | 4    | bloom block framed length, u32 BE (0 if there is no bloom block) |
//! | 48     | 8    | number of cells, u64 BE                            |
//! | 56     | 4    | CRC-32 of trailer bytes `0 .. 56`, u32 BE          |
//!
//! Version 4 (written since 2026-11-26) differs from version 3 only in the index
//! entries' flags byte; version 3 differs from version 2 only in the data blocks' offsets
//! table; a reader reads all three (older files as if no block started a row) and
//! compaction rewrites them as version 4. Version 1 (no bloom block, 48-byte trailer) was
//! never released and is not readable.
//!
//! # Validation
//!
//! On open the reader checks the trailer (length, magic, version, CRC), that the index,
//! file-info and bloom blocks are contiguous and end at the trailer (bloom offset and
//! length both 0 when absent), the blocks' framing and CRC, that the index entries tile
//! `0 .. index offset` exactly with strictly ascending keys, that the file info agrees with
//! the trailer and the index, that a bloom block appears only in a non-empty file, and the
//! bloom payload (kind, `k`, hash id, `m`, and that exactly `m / 8` bytes of bits follow). A data block is checked (framing,
//! CRC, the offsets table, first key) when it is read, and each entry when it is parsed
//! (a version-2 block: every entry when it is read). Any failure is an [`Error::Corruption`]
//! naming the file and the offset of the block (or trailer) at fault; no length read from
//! the file is used to allocate before it is checked against the file size or
//! [`MAX_BLOCK_LEN`].
//!
//! # Reading
//!
//! A reader keeps the index and the bloom bits in memory. It binary-searches the index
//! (mostly over compact `u64` row "heads", see `search.rs`) to find the block of a key; the block comes from the shared
//! [`BlockCache`] or is read with one positioned read, verified, decompressed and decoded
//! once, then searched the same way. Scanners hold one decoded block at a time and return
//! cells whose `Bytes` are zero-copy slices of it. `may_contain_row` and
//! `may_contain_row_col` answer from the bloom bits alone (no I/O).
//!
//! [`Error::Corruption`]: crate::error::Error::Corruption

mod block;
mod bloom;
mod cache;
mod codec;
mod data;
mod meta;
mod reader;
mod scanner;
mod search;
pub mod verify;
mod writer;

#[cfg(test)]
mod tests;

pub use cache::{BlockCache, CacheMode};
pub use reader::StoreFileReader;
pub use scanner::{StoreFileRevScanner, StoreFileScanner};
pub use verify::{verify_file, FileCheck, Finding, FindingKind};
pub use writer::StoreFileWriter;

#[cfg(doc)]
use crate::cell::CellType;
use crate::cell::StoreKey;
use crate::schema::{BloomType, Compression};

/// The largest payload or stored length of one block (1 GiB); anything larger is corruption.
pub const MAX_BLOCK_LEN: usize = 1 << 30;

/// How far past the block size a block grows to end at a row boundary: `block_size / ROW_SLACK`
/// (see the module doc).
pub const ROW_SLACK: usize = 2;

/// The default data block size (64 KiB, HBase's default).
pub const DEFAULT_BLOCK_SIZE: usize = 64 * 1024;

/// The default bloom false-positive rate (1 %, HBase's default).
pub const DEFAULT_BLOOM_FP_RATE: f64 = 0.01;

/// How a [`StoreFileWriter`] lays out data blocks and its bloom filter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriterOptions {
    /// Target payload size of a data block, in bytes, before compression (at least 1).
    pub block_size: usize,
    /// Compression of data and index blocks.
    pub compression: Compression,
    /// The bloom filter to build (default [`BloomType::Row`]).
    pub bloom: BloomType,
    /// Target false-positive rate of the bloom filter, in `(0, 1)` (default 0.01).
    pub bloom_fp_rate: f64,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            block_size: DEFAULT_BLOCK_SIZE,
            compression: Compression::None,
            bloom: BloomType::Row,
            bloom_fp_rate: DEFAULT_BLOOM_FP_RATE,
        }
    }
}

/// What a store file holds, as recorded in its file-info block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The smallest key in the file (`None` for an empty file).
    pub first_key: Option<StoreKey>,
    /// The largest key in the file (`None` for an empty file).
    pub last_key: Option<StoreKey>,
    /// The largest sequence id of any cell (0 for an empty file).
    pub max_seq: u64,
    /// The smallest timestamp of any cell, delete markers included (`u64::MAX` if empty).
    pub min_ts: u64,
    /// The largest timestamp of any cell, delete markers included (0 if empty).
    pub max_ts: u64,
    /// The number of cells.
    pub entry_count: u64,
    /// The size of the whole file in bytes.
    pub file_size: u64,
}
