//! A decoded data block: its entries plus the offset of every entry, ready for binary search.
//!
//! Since store-file format version 3 a data block's payload ends with its entries' offsets
//! ([`put_offsets`]), so [`DataBlock::decode`] reads them instead of walking the entries:
//! a point read of a block parses only the entries its binary search visits. It checks the
//! offsets (the first is 0, they ascend strictly, all lie inside the entries), and every
//! access checks the entry it parses (lengths in bounds, a known type code, and that the
//! entry ends exactly where the next one starts, or at the end of the entries), so a
//! malformed block is a corruption error at the first access that touches the bad bytes,
//! never a panic. Reading a block from its first entry on (a scan, `Admin::check_table`)
//! proves every offset it passes a true entry boundary: entry 0 starts at 0 and each entry
//! ends where the next begins. A binary search may land on an entry directly, so a table
//! that points inside an entry could, if what follows parses, give a point read a misplaced
//! cell: the table sits under the block's CRC with the entries, so only a writer bug, not
//! disk damage, could produce one, and the integrity check reports it. A version-2 block
//! (entries only) is walked once at decode and checked entry by entry, as before. Cells handed out are zero-copy: their `Bytes`
//! fields are slices of the block's one payload buffer. This is the value kept in the
//! [`BlockCache`].
//!
//! Search is cache friendly: the block keeps each entry's row head (see [`search`]), so a
//! binary search mostly touches a compact `u64` array and parses an entry only on a tie. The
//! heads are built on the block's second search (the first is a plain binary search over
//! the entries: a block read for one point lookup never pays for them), so a scan that only
//! walks a block never builds them.
//!
//! [`search`]: super::search
//!
//! [`BlockCache`]: super::BlockCache

use super::codec::{parse_entry, row_at, Cursor, Dec, RawKey};
use super::search::{head_after, partition, shared_prefix};
use crate::cell::{StoreCell, StoreKey};
use bytes::Bytes;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::OnceLock;

/// Fixed per-block bookkeeping counted in the cache weight, in bytes.
const BLOCK_OVERHEAD: u64 = 128;

/// The longest row prefix kept inline in the block's header.
const INLINE_PREFIX: usize = 32;

/// The most bytes [`put_offsets`] adds to a block of one entry.
pub(crate) const OFFSETS_OVERHEAD: usize = 4 + TABLE_TAIL;

/// The entry count (u32 BE) and the offset width (u8) that end a version-3 block.
const TABLE_TAIL: usize = 5;

/// The width in bytes of each offset of a block whose entries take `entries_len` bytes.
fn offset_width(entries_len: usize) -> usize {
    if entries_len <= 1 << 16 {
        2
    } else {
        4
    }
}

/// The bytes [`put_offsets`] appends for `count` entries taking `entries_len` bytes.
pub(crate) fn offsets_len(count: usize, entries_len: usize) -> usize {
    count * offset_width(entries_len) + TABLE_TAIL
}

/// Appends the offsets table of a version-3 data block to `block`, which holds the block's
/// entries back to back, `offsets` being where each starts: every offset as u16 BE when
/// the entries take at most 65,536 bytes, else as u32 BE; then the entry count, u32 BE;
/// then the width of an offset in bytes (2 or 4), u8.
pub(crate) fn put_offsets(block: &mut Vec<u8>, offsets: &[u32]) {
    let width = offset_width(block.len());
    block.reserve(offsets_len(offsets.len(), block.len()));
    for &o in offsets {
        if width == 2 {
            // Offsets lie inside the entries, which take at most 65,536 bytes here.
            block.extend_from_slice(&u16::try_from(o).unwrap_or(u16::MAX).to_be_bytes());
        } else {
            block.extend_from_slice(&o.to_be_bytes());
        }
    }
    let count = u32::try_from(offsets.len()).unwrap_or(u32::MAX);
    block.extend_from_slice(&count.to_be_bytes());
    block.push(width as u8);
}

/// A decoded, checked data block.
#[derive(Debug)]
pub(crate) struct DataBlock {
    buf: Bytes,
    offsets: Vec<u32>,
    /// The search heads, built on the first search: a scan that enters a block at its first
    /// entry never searches it, so it never pays for them.
    search: OnceLock<SearchHeads>,
    /// Set by the first search: a block read for one point lookup is searched once, and a
    /// plain binary search costs fewer entry parses than building the heads for it.
    searched: AtomicBool,
    weight: u64,
}

/// What a binary search over a block's rows needs (see [`search`](super::search)).
#[derive(Debug)]
struct SearchHeads {
    /// Per entry: 8 row bytes after the shared prefix, big-endian, zero padded.
    heads: Vec<u64>,
    /// The rows' shared prefix (a range of `buf`).
    prefix: std::ops::Range<usize>,
    /// A copy of `prefix` when it is short, so a search need not touch `buf` to check it.
    prefix_inline: Option<([u8; INLINE_PREFIX], u8)>,
}

impl DataBlock {
    /// Decodes a data-block payload: `offsets_stored` for a version-3 block (entries, then
    /// their offsets), else a version-2 one (entries only, checked here one by one).
    /// `framed_len` is its on-disk size, counted in the cache weight when the payload is a
    /// slice of the raw block.
    pub(crate) fn decode(buf: Bytes, framed_len: usize, offsets_stored: bool) -> Dec<Self> {
        let (buf, offsets) = if offsets_stored {
            Self::read_offsets(buf)?
        } else {
            let offsets = Self::walk(&buf)?;
            (buf, offsets)
        };
        if offsets.is_empty() {
            return Err("data block holds no entry".into());
        }
        // The heads are counted up front, so the weight never changes while cached.
        let weight = BLOCK_OVERHEAD + buf.len().max(framed_len) as u64 + 12 * offsets.len() as u64;
        Ok(DataBlock {
            buf,
            offsets,
            search: OnceLock::new(),
            searched: AtomicBool::new(false),
            weight,
        })
    }

    /// The offsets of a version-2 block's entries, checking each entry.
    fn walk(buf: &[u8]) -> Dec<Vec<u32>> {
        let mut offsets = Vec::with_capacity(buf.len() / 32 + 1);
        let mut at = 0;
        while at < buf.len() {
            offsets.push(u32::try_from(at).map_err(|_| "block too large")?);
            match parse_entry(buf, at) {
                Some((_, _, end)) => at = end,
                // Parse the bad entry again with the checking cursor, which says what is wrong.
                None => {
                    let mut c = Cursor::at(buf, at);
                    c.key()?;
                    c.len_prefixed()?;
                    return Err(format!("malformed entry at {at}").into());
                }
            }
        }
        offsets.shrink_to_fit();
        Ok(offsets)
    }

    /// Splits a version-3 payload into its entries and their checked offsets.
    fn read_offsets(buf: Bytes) -> Dec<(Bytes, Vec<u32>)> {
        let n = buf.len();
        let tail = n
            .checked_sub(TABLE_TAIL)
            .and_then(|at| buf.get(at..))
            .ok_or("data block is shorter than its offsets table")?;
        let width = usize::from(tail[4]);
        let count = u32::from_be_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize;
        if width != 2 && width != 4 {
            return Err(format!("data block offsets have width {width}").into());
        }
        let entries_len = count
            .checked_mul(width)
            .and_then(|t| n.checked_sub(TABLE_TAIL + t))
            .ok_or_else(|| format!("data block of {n} bytes cannot list {count} entries"))?;
        if offset_width(entries_len) != width {
            return Err(
                format!("offsets of width {width} for {entries_len} bytes of entries").into(),
            );
        }
        let table = buf
            .get(entries_len..n - TABLE_TAIL)
            .ok_or("data block offsets out of bounds")?;
        let mut offsets = Vec::with_capacity(count);
        for raw in table.chunks_exact(width) {
            let o = match *raw {
                [a, b] => u32::from(u16::from_be_bytes([a, b])),
                [a, b, c, d] => u32::from_be_bytes([a, b, c, d]),
                _ => return Err("data block offsets out of bounds".into()),
            };
            let ok = match offsets.last() {
                None => o == 0,
                Some(&prev) => o > prev,
            };
            if !ok || o as usize >= entries_len {
                return Err(format!("entry offset {o} out of order or out of bounds").into());
            }
            offsets.push(o);
        }
        Ok((buf.slice(..entries_len), offsets))
    }

    /// The search heads, built on first use.
    fn search_heads(&self) -> Dec<&SearchHeads> {
        if let Some(s) = self.search.get() {
            return Ok(s);
        }
        let rows = (0..self.len())
            .map(|i| self.row_range(i))
            .collect::<Dec<Vec<_>>>()?;
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Err("data block holds no entry".into());
        };
        let row = |r: &std::ops::Range<usize>| self.buf.get(r.clone()).unwrap_or_default();
        let shared = shared_prefix(row(first), row(last));
        let prefix = first.start..first.start + shared;
        let prefix_inline = (shared <= INLINE_PREFIX).then(|| {
            let mut inline = [0u8; INLINE_PREFIX];
            inline[..shared].copy_from_slice(row(&prefix));
            (inline, shared as u8)
        });
        let heads = rows.iter().map(|r| head_after(row(r), shared)).collect();
        // Two threads may build them at once; both build the same thing.
        Ok(self.search.get_or_init(|| SearchHeads {
            heads,
            prefix,
            prefix_inline,
        }))
    }

    /// The block's entries back to back (without a version-3 block's offsets table).
    pub(crate) fn payload(&self) -> &Bytes {
        &self.buf
    }

    /// The number of entries (at least 1).
    pub(crate) fn len(&self) -> usize {
        self.offsets.len()
    }

    /// The bytes this block holds in memory, for the cache's weigher.
    pub(crate) fn weight(&self) -> u64 {
        self.weight
    }

    /// Parses entry `i`: its key, its value's range. The entry must end exactly where the
    /// next one starts (or where the entries end).
    #[inline(always)]
    fn entry(&self, i: usize) -> Dec<(RawKey, std::ops::Range<usize>)> {
        let at = *self.offsets.get(i).ok_or("entry index out of range")? as usize;
        let next = match self.offsets.get(i + 1) {
            Some(&o) => o as usize,
            None => self.buf.len(),
        };
        match parse_entry(&self.buf, at) {
            Some((key, value, end)) if end == next => Ok((key, value)),
            _ => Err(malformed_entry(at)),
        }
    }

    /// The key of entry `i`, in place.
    #[inline]
    fn raw_key(&self, i: usize) -> Dec<RawKey> {
        Ok(self.entry(i)?.0)
    }

    /// The byte range of entry `i`'s row (its first field).
    fn row_range(&self, i: usize) -> Dec<std::ops::Range<usize>> {
        let at = *self.offsets.get(i).ok_or("entry index out of range")? as usize;
        Ok(row_at(&self.buf, at).ok_or("malformed entry")?)
    }

    /// Compares entry `i`'s key with `key`.
    #[inline]
    pub(crate) fn cmp_at(&self, i: usize, key: &StoreKey) -> Dec<Ordering> {
        Ok(self.raw_key(i)?.cmp_key(&self.buf, key))
    }

    /// The number of leading entries for which `pred(entry key vs key)` holds; `pred` must
    /// hold for a prefix of the block only.
    fn partition(&self, key: &StoreKey, pred: impl Fn(Ordering) -> bool) -> Dec<usize> {
        if self.search.get().is_none() && !self.searched.swap(true, AtomicOrdering::Relaxed) {
            // The first search: a binary search that parses log2(len) entries.
            let (mut lo, mut hi) = (0, self.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if pred(self.cmp_at(mid, key)?) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            return Ok(lo);
        }
        let s = self.search_heads()?;
        let prefix = match &s.prefix_inline {
            Some((bytes, len)) => &bytes[..*len as usize],
            None => self.buf.get(s.prefix.clone()).unwrap_or_default(),
        };
        partition(prefix, &s.heads, key, |i| self.cmp_at(i, key), pred)
    }

    /// The index of the first entry whose key is `>= key` (`len()` if none).
    pub(crate) fn lower_bound(&self, key: &StoreKey) -> Dec<usize> {
        self.partition(key, |o| o == Ordering::Less)
    }

    /// The index of the first entry whose key is `> key` (`len()` if none).
    pub(crate) fn upper_bound(&self, key: &StoreKey) -> Dec<usize> {
        self.partition(key, |o| o != Ordering::Greater)
    }

    /// Entry `i` in place: its key and its value's range in [`DataBlock::payload`].
    #[inline(always)]
    pub(crate) fn raw_entry(&self, i: usize) -> Dec<(RawKey, std::ops::Range<usize>)> {
        self.entry(i)
    }

    /// The entry whose key `k` and value range `value` [`DataBlock::raw_entry`] gave, as a
    /// plain put a read returns in `family` (zero-copy views of the block).
    #[inline(always)]
    pub(crate) fn put_cell(
        &self,
        k: &RawKey,
        value: std::ops::Range<usize>,
        family: &Bytes,
    ) -> crate::cell::Cell {
        crate::cell::Cell {
            row: self.buf.slice(k.row.clone()),
            family: family.clone(),
            qualifier: self.buf.slice(k.qualifier.clone()),
            timestamp: k.ts,
            kind: crate::cell::CellType::Put,
            value: self.buf.slice(value),
        }
    }

    /// Entry `i` as a cell (zero-copy).
    #[inline(always)]
    pub(crate) fn cell(&self, i: usize) -> Dec<StoreCell> {
        let (key, value) = self.entry(i)?;
        Ok(StoreCell {
            key: key.to_key(&self.buf),
            value: self.buf.slice(value),
        })
    }
}

/// The error of an entry at `at` that does not parse (off the hot path).
#[cold]
#[inline(never)]
fn malformed_entry(at: usize) -> std::borrow::Cow<'static, str> {
    format!("malformed entry at {at}").into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::CellType;
    use crate::storage::storefile::codec::put_entry;
    use proptest::prelude::*;

    fn cell(row: &str, ts: u64) -> StoreCell {
        StoreCell {
            key: StoreKey {
                row: Bytes::copy_from_slice(row.as_bytes()),
                qualifier: Bytes::from_static(b"q"),
                ts,
                kind: CellType::Put,
                seq: 1,
            },
            value: Bytes::from_static(b"v"),
        }
    }

    #[test]
    fn bounds_and_cells() {
        let cells = [cell("a", 5), cell("a", 3), cell("c", 1)];
        for stored in [false, true] {
            let b = DataBlock::decode(encode(&cells, stored), 0, stored).unwrap();
            assert_eq!(b.len(), 3);
            assert_eq!(b.cell(1).unwrap(), cells[1]);
            assert_eq!(b.lower_bound(&cells[1].key).unwrap(), 1);
            assert_eq!(b.upper_bound(&cells[1].key).unwrap(), 2);
            assert_eq!(b.lower_bound(&cell("b", 0).key).unwrap(), 2);
            assert_eq!(b.upper_bound(&cell("d", 0).key).unwrap(), 3);
            assert_eq!(b.lower_bound(&cell("0", 0).key).unwrap(), 0);
            assert_eq!(b.payload().len(), encode(&cells, false).len());
        }
    }

    /// The payload of a block of `cells`: version 3 (`stored`, with the offsets table) or 2.
    fn encode(cells: &[StoreCell], stored: bool) -> Bytes {
        let mut buf = Vec::new();
        let mut offsets = Vec::new();
        for c in cells {
            offsets.push(buf.len() as u32);
            put_entry(&mut buf, &crate::cell::CellRef::of(c));
        }
        if stored {
            put_offsets(&mut buf, &offsets);
        }
        Bytes::from(buf)
    }

    #[test]
    fn wide_blocks_use_four_byte_offsets() {
        // Two entries of 40,000-byte values: past 65,536 bytes of entries.
        let big = |row: &str| StoreCell {
            value: Bytes::from(vec![7u8; 40_000]),
            ..cell(row, 1)
        };
        let cells = [big("a"), big("b")];
        let buf = encode(&cells, true);
        assert_eq!(buf.last(), Some(&4));
        let b = DataBlock::decode(buf, 0, true).unwrap();
        assert_eq!(b.cell(1).unwrap(), cells[1]);
        assert_eq!(b.lower_bound(&cells[1].key).unwrap(), 1);
    }

    fn arb_row() -> impl Strategy<Value = Vec<u8>> {
        // Long shared prefixes, zero bytes and rows that are prefixes of others.
        (
            0usize..3,
            proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(255u8)], 0..14),
        )
            .prop_map(|(p, tail)| {
                let mut row = b"prefix-of-rows"[..p * 5].to_vec();
                row.extend(tail);
                row
            })
    }

    fn arb_key() -> impl Strategy<Value = StoreKey> {
        (arb_row(), 0u64..3, 0u64..3).prop_map(|(row, ts, seq)| StoreKey {
            row: Bytes::from(row),
            qualifier: Bytes::new(),
            ts,
            kind: CellType::Put,
            seq,
        })
    }

    proptest! {
        #[test]
        fn search_matches_linear_scan(
            keys in proptest::collection::btree_set(arb_key(), 1..60),
            probes in proptest::collection::vec(arb_key(), 1..20),
            stored in any::<bool>(),
        ) {
            let keys: Vec<_> = keys.into_iter().collect();
            let cells: Vec<_> = keys
                .iter()
                .map(|k| StoreCell { key: k.clone(), value: Bytes::new() })
                .collect();
            let buf = encode(&cells, stored);
            let b = DataBlock::decode(buf.clone(), 0, stored).unwrap();
            for (i, c) in cells.iter().enumerate() {
                prop_assert_eq!(&b.cell(i).unwrap(), c);
            }
            // The block's first search is a plain binary search, later ones use the heads.
            for p in probes.iter().chain(&keys) {
                prop_assert_eq!(b.lower_bound(p).unwrap(), keys.iter().filter(|k| *k < p).count());
                prop_assert_eq!(b.upper_bound(p).unwrap(), keys.iter().filter(|k| *k <= p).count());
                let fresh = DataBlock::decode(buf.clone(), 0, stored).unwrap();
                prop_assert_eq!(fresh.upper_bound(p).unwrap(), keys.iter().filter(|k| *k <= p).count());
            }
        }

        /// A version-3 block whose offsets table is damaged (a byte changed, the end cut):
        /// decoding and reading never panic, and a block whose every entry reads without
        /// an error gives back exactly the original cells (entry 0 starts at 0 and each
        /// entry must end where the next starts, so every offset is a true boundary).
        #[test]
        fn damaged_offsets_tables_never_give_wrong_cells(
            keys in proptest::collection::btree_set(arb_key(), 1..12),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in 0usize..3,
        ) {
            let cells: Vec<_> = keys
                .into_iter()
                .map(|key| StoreCell { key, value: Bytes::from_static(b"v") })
                .collect();
            let entries_len = encode(&cells, false).len();
            let mut bad = encode(&cells, true).to_vec();
            let i = entries_len + at.index(bad.len() - entries_len);
            bad[i] = byte;
            bad.truncate(bad.len() - cut);
            if let Ok(b) = DataBlock::decode(Bytes::from(bad), 0, true) {
                let read: Vec<_> = (0..b.len()).map(|i| b.cell(i)).collect();
                if read.iter().all(|c| c.is_ok()) {
                    let read: Vec<_> = read.into_iter().flatten().collect();
                    prop_assert_eq!(read, cells);
                }
                prop_assert!(b.cell(b.len()).is_err());
            }
        }
    }

    #[test]
    fn malformed_payloads_are_rejected() {
        let mut buf = Vec::new();
        put_entry(&mut buf, &crate::cell::CellRef::of(&cell("a", 5)));
        assert!(DataBlock::decode(Bytes::new(), 0, false).is_err());
        for cut in 1..buf.len() {
            assert!(DataBlock::decode(Bytes::copy_from_slice(&buf[..cut]), 0, false).is_err());
        }
        let type_at = buf.len() - 4; // type, seq(1), value len(1), value(1)
        buf[type_at] = 6;
        assert!(DataBlock::decode(Bytes::from(buf), 0, false).is_err());
    }

    #[test]
    fn malformed_version_3_blocks_are_rejected_when_read() {
        let cells = [cell("a", 5), cell("b", 3)];
        let good = encode(&cells, true).to_vec();
        let decode = |b: &[u8]| DataBlock::decode(Bytes::copy_from_slice(b), 0, true);
        assert!(decode(&[]).is_err());
        // Cut anywhere: the table no longer matches the entries.
        for cut in 1..good.len() {
            let r = decode(&good[..cut]);
            assert!(
                r.is_err() || (0..2).any(|i| r.as_ref().unwrap().cell(i).is_err()),
                "cut {cut}"
            );
        }
        let n = good.len();
        let (width_at, count_at) = (n - 1, n - 5);
        let mut bad = good.clone();
        bad[width_at] = 3;
        assert!(decode(&bad).is_err(), "width 3");
        let mut bad = good.clone();
        bad[width_at] = 4;
        assert!(decode(&bad).is_err(), "width 4 for a small block");
        let mut bad = good.clone();
        bad[count_at + 3] = 0;
        assert!(decode(&bad).is_err(), "no entries");
        let mut bad = good.clone();
        bad[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode(&bad).is_err(), "absurd count");
        // The second offset points into the first entry: decoding succeeds, reading fails.
        let mut bad = good.clone();
        let second = count_at - 2;
        bad[second..second + 2].copy_from_slice(&3u16.to_be_bytes());
        let b = decode(&bad).unwrap();
        assert!(b.cell(0).is_err() && b.cell(1).is_err());
        // Offsets out of order or past the entries.
        let mut bad = good.clone();
        bad[second..second + 2].copy_from_slice(&0u16.to_be_bytes());
        assert!(decode(&bad).is_err(), "repeated offset");
        let mut bad = good;
        bad[second..second + 2].copy_from_slice(&u16::MAX.to_be_bytes());
        assert!(decode(&bad).is_err(), "offset past the entries");
        // A damaged type code: found when the entry is read.
        let mut buf = encode(&cells[..1], true).to_vec();
        let type_at = buf.len() - 7 - 4; // offsets table (2 + 5), then seq, value len, value
        buf[type_at] = 6;
        let b = decode(&buf).unwrap();
        assert!(b.cell(0).is_err());
    }
}
