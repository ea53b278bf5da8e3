//! The file's metadata: the block index, the file-info block and the fixed 60-byte trailer.
//!
//! Encoders are used by the writer, decoders by the reader at open. Decoders only check that
//! each structure is well formed on its own; cross-checks between them (contiguity, entry
//! counts, key range) are the reader's job.

use super::codec::{put_key, Cursor, Dec};
use super::FileInfo;
use crate::cell::StoreKey;
use bytes::Bytes;

/// The trailer's magic bytes.
pub(crate) const MAGIC: &[u8; 8] = b"BSLTSF01";
/// The format version this code writes: index entries end with a flags byte.
pub(crate) const VERSION: u32 = 4;
/// Data blocks end with their entries' offsets; index entries have no flags.
pub(crate) const VERSION_3: u32 = 3;
/// The oldest format version this code reads (data blocks are entries only).
pub(crate) const VERSION_2: u32 = 2;
/// Index entry flag: the block's first cell is the first cell of its row (the block before
/// holds no cell of that row).
pub(crate) const STARTS_ROW: u8 = 1;
/// The trailer's size in bytes.
pub(crate) const TRAILER_LEN: usize = 60;

/// The smallest possible encoded index entry: empty row and qualifier, one-byte varints.
const MIN_INDEX_ENTRY: usize = 1 + 1 + 8 + 1 + 1 + 8 + 4;

/// Where one data block is and what key it starts with.
#[derive(Debug, Clone)]
pub(crate) struct IndexEntry {
    /// The block's first key.
    pub first_key: StoreKey,
    /// The block's offset in the file.
    pub offset: u64,
    /// The block's framed on-disk length.
    pub len: u32,
    /// The block's first cell is the first cell of its row ([`STARTS_ROW`]; always false
    /// in files before version 4).
    pub starts_row: bool,
}

/// Encodes the index-block payload; `flags` (version 4) adds each entry's flags byte.
pub(crate) fn encode_index(entries: &[IndexEntry], flags: bool, out: &mut Vec<u8>) {
    super::codec::put_varint(out, entries.len() as u64);
    for e in entries {
        put_key(out, &e.first_key);
        out.extend_from_slice(&e.offset.to_be_bytes());
        out.extend_from_slice(&e.len.to_be_bytes());
        if flags {
            out.push(if e.starts_row { STARTS_ROW } else { 0 });
        }
    }
}

/// Decodes the index-block payload (with each entry's flags byte when `flags`, version 4);
/// keys are zero-copy slices of `buf`.
pub(crate) fn decode_index(buf: &Bytes, flags: bool) -> Dec<Vec<IndexEntry>> {
    let mut c = Cursor::at(buf, 0);
    let count = c.varint()?;
    if count > (c.remaining() / MIN_INDEX_ENTRY) as u64 {
        return Err(format!("index claims {count} entries in {} bytes", buf.len()).into());
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let key = c.key()?.to_key(buf);
        let offset = c.u64()?;
        let len = c.u32()?;
        let bits = if flags { c.u8()? } else { 0 };
        if bits & !STARTS_ROW != 0 {
            return Err(format!("index entry with unknown flags {bits:#04x}").into());
        }
        entries.push(IndexEntry {
            first_key: key,
            offset,
            len,
            starts_row: bits & STARTS_ROW != 0,
        });
    }
    if c.remaining() != 0 {
        return Err("trailing bytes after the index entries".into());
    }
    Ok(entries)
}

/// Encodes the file-info payload (everything but `file_size`, which is not stored).
pub(crate) fn encode_info(info: &FileInfo, out: &mut Vec<u8>) {
    for key in [&info.first_key, &info.last_key] {
        match key {
            Some(k) => {
                out.push(1);
                put_key(out, k);
            }
            None => out.push(0),
        }
    }
    for v in [info.max_seq, info.min_ts, info.max_ts, info.entry_count] {
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Decodes the file-info payload; `file_size` is set to 0 for the caller to fill in.
pub(crate) fn decode_info(buf: &Bytes) -> Dec<FileInfo> {
    let mut c = Cursor::at(buf, 0);
    let mut keys = [None, None];
    for slot in &mut keys {
        *slot = match c.u8()? {
            0 => None,
            1 => Some(c.key()?.to_key(buf)),
            other => return Err(format!("bad key presence byte {other}").into()),
        };
    }
    let [first_key, last_key] = keys;
    let info = FileInfo {
        first_key,
        last_key,
        max_seq: c.u64()?,
        min_ts: c.u64()?,
        max_ts: c.u64()?,
        entry_count: c.u64()?,
        file_size: 0,
    };
    if c.remaining() != 0 {
        return Err("trailing bytes after the file info".into());
    }
    Ok(info)
}

/// The fixed trailer at the end of every store file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trailer {
    pub index_offset: u64,
    pub index_len: u32,
    pub info_offset: u64,
    pub info_len: u32,
    /// 0 (with `bloom_len` 0) when the file has no bloom block.
    pub bloom_offset: u64,
    pub bloom_len: u32,
    pub entry_count: u64,
    /// The format version: [`VERSION`], [`VERSION_3`] or [`VERSION_2`].
    pub version: u32,
}

impl Trailer {
    /// Whether the file's data blocks end with their entries' offsets (version 3 on).
    pub(crate) fn offsets_stored(&self) -> bool {
        self.version >= VERSION_3
    }

    /// Whether the file's index entries end with a flags byte (version 4 on).
    pub(crate) fn index_flags(&self) -> bool {
        self.version >= VERSION
    }

    /// The trailer's 60 bytes.
    pub(crate) fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut out = Vec::with_capacity(TRAILER_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.index_offset.to_be_bytes());
        out.extend_from_slice(&self.index_len.to_be_bytes());
        out.extend_from_slice(&self.info_offset.to_be_bytes());
        out.extend_from_slice(&self.info_len.to_be_bytes());
        out.extend_from_slice(&self.bloom_offset.to_be_bytes());
        out.extend_from_slice(&self.bloom_len.to_be_bytes());
        out.extend_from_slice(&self.entry_count.to_be_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        let mut fixed = [0u8; TRAILER_LEN];
        fixed.copy_from_slice(&out);
        fixed
    }

    /// Checks magic, CRC and version, and decodes the fields.
    pub(crate) fn decode(bytes: &[u8; TRAILER_LEN]) -> Dec<Self> {
        let body = &bytes[..TRAILER_LEN - 4];
        let mut c = Cursor::at(bytes, TRAILER_LEN - 4);
        let stored_crc = c.u32()?;
        if &bytes[..8] != MAGIC {
            return Err("bad magic: not a Basalt store file, or truncated".into());
        }
        let crc = crc32fast::hash(body);
        if crc != stored_crc {
            return Err(format!(
                "trailer checksum mismatch: stored {stored_crc:#010x}, computed {crc:#010x}"
            )
            .into());
        }
        let mut c = Cursor::at(bytes, 8);
        let version = c.u32()?;
        if ![VERSION, VERSION_3, VERSION_2].contains(&version) {
            return Err(format!("unsupported format version {version}").into());
        }
        Ok(Trailer {
            index_offset: c.u64()?,
            index_len: c.u32()?,
            info_offset: c.u64()?,
            info_len: c.u32()?,
            bloom_offset: c.u64()?,
            bloom_len: c.u32()?,
            entry_count: c.u64()?,
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_round_trips_and_is_60_bytes() {
        let t = Trailer {
            index_offset: 1,
            index_len: 2,
            info_offset: 3,
            info_len: 4,
            bloom_offset: 6,
            bloom_len: 7,
            entry_count: 5,
            version: VERSION,
        };
        let bytes = t.encode();
        assert_eq!(Trailer::decode(&bytes).unwrap(), t);
        for i in 0..TRAILER_LEN {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert!(Trailer::decode(&bad).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn absurd_index_count_is_rejected() {
        let mut buf = Vec::new();
        super::super::codec::put_varint(&mut buf, u64::MAX);
        assert!(decode_index(&Bytes::from(buf.clone()), false).is_err());
        assert!(decode_index(&Bytes::from(buf), true).is_err());
    }

    fn entry(row: &str, starts_row: bool) -> IndexEntry {
        IndexEntry {
            first_key: StoreKey::first_on_row(Bytes::from(row.to_owned())),
            offset: 7,
            len: 30,
            starts_row,
        }
    }

    #[test]
    fn index_flags_round_trip_in_version_4_only() {
        let entries = vec![entry("a", true), entry("b", false), entry("c", true)];
        let mut with = Vec::new();
        encode_index(&entries, true, &mut with);
        let back = decode_index(&Bytes::from(with.clone()), true).unwrap();
        let flags: Vec<bool> = back.iter().map(|e| e.starts_row).collect();
        assert_eq!(flags, [true, false, true]);
        let mut without = Vec::new();
        encode_index(&entries, false, &mut without);
        assert_eq!(with.len(), without.len() + 3, "one flags byte per entry");
        let back = decode_index(&Bytes::from(without), false).unwrap();
        assert!(back.iter().all(|e| !e.starts_row), "version 3 has no flags");
        // Unknown flag bits are corruption, not ignored.
        let last = with.len() - 1;
        with[last] = 0x81;
        let err = decode_index(&Bytes::from(with), true).unwrap_err();
        assert!(format!("{err:?}").contains("unknown flags"), "{err:?}");
    }
}
