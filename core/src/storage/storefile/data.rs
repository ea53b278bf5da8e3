//! A decoded data block: its payload plus the offset of every entry, ready for binary search.
//!
//! [`DataBlock::decode`] walks the payload once and checks every entry (lengths in bounds,
//! known type codes, nothing trailing), so later accesses only re-parse bytes that are known
//! to be well formed. Cells handed out are zero-copy: their `Bytes` fields are slices of the
//! block's one payload buffer. This is the value kept in the [`BlockCache`].
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
    /// Decodes and checks a data-block payload. `framed_len` is its on-disk size, counted in
    /// the cache weight when the payload is a slice of the raw block.
    pub(crate) fn decode(buf: Bytes, framed_len: usize) -> Dec<Self> {
        let mut offsets = Vec::with_capacity(buf.len() / 32 + 1);
        let mut at = 0;
        while at < buf.len() {
            offsets.push(u32::try_from(at).map_err(|_| "block too large")?);
            match parse_entry(&buf, at) {
                Some((_, _, end)) => at = end,
                // Parse the bad entry again with the checking cursor, which says what is wrong.
                None => {
                    let mut c = Cursor::at(&buf, at);
                    c.key()?;
                    c.len_prefixed()?;
                    return Err(format!("malformed entry at {at}").into());
                }
            }
        }
        if offsets.is_empty() {
            return Err("data block holds no entry".into());
        }
        offsets.shrink_to_fit();
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

    /// The decoded payload: entries back to back, every one checked by `decode`.
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

    /// The key of entry `i`, in place.
    #[inline]
    fn raw_key(&self, i: usize) -> Dec<RawKey> {
        // `decode` parsed every entry, so the one-pass parser cannot fail on a listed offset.
        let at = *self.offsets.get(i).ok_or("entry index out of range")? as usize;
        let (key, _, _) = parse_entry(&self.buf, at).ok_or("malformed entry")?;
        Ok(key)
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

    /// Entry `i` as a cell (zero-copy).
    #[inline]
    pub(crate) fn cell(&self, i: usize) -> Dec<StoreCell> {
        let at = *self.offsets.get(i).ok_or("entry index out of range")? as usize;
        let (key, value, _) = parse_entry(&self.buf, at).ok_or("malformed entry")?;
        Ok(StoreCell {
            key: key.to_key(&self.buf),
            value: self.buf.slice(value),
        })
    }
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
        let mut buf = Vec::new();
        for c in &cells {
            put_entry(&mut buf, c);
        }
        let b = DataBlock::decode(Bytes::from(buf), 0).unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(b.cell(1).unwrap(), cells[1]);
        assert_eq!(b.lower_bound(&cells[1].key).unwrap(), 1);
        assert_eq!(b.upper_bound(&cells[1].key).unwrap(), 2);
        assert_eq!(b.lower_bound(&cell("b", 0).key).unwrap(), 2);
        assert_eq!(b.upper_bound(&cell("d", 0).key).unwrap(), 3);
        assert_eq!(b.lower_bound(&cell("0", 0).key).unwrap(), 0);
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
        ) {
            let keys: Vec<_> = keys.into_iter().collect();
            let mut buf = Vec::new();
            for k in &keys {
                put_entry(&mut buf, &StoreCell { key: k.clone(), value: Bytes::new() });
            }
            let buf = Bytes::from(buf);
            let b = DataBlock::decode(buf.clone(), 0).unwrap();
            // The block's first search is a plain binary search, later ones use the heads.
            for p in probes.iter().chain(&keys) {
                prop_assert_eq!(b.lower_bound(p).unwrap(), keys.iter().filter(|k| *k < p).count());
                prop_assert_eq!(b.upper_bound(p).unwrap(), keys.iter().filter(|k| *k <= p).count());
                let fresh = DataBlock::decode(buf.clone(), 0).unwrap();
                prop_assert_eq!(fresh.upper_bound(p).unwrap(), keys.iter().filter(|k| *k <= p).count());
            }
        }
    }

    #[test]
    fn malformed_payloads_are_rejected() {
        let mut buf = Vec::new();
        put_entry(&mut buf, &cell("a", 5));
        assert!(DataBlock::decode(Bytes::new(), 0).is_err());
        for cut in 1..buf.len() {
            assert!(DataBlock::decode(Bytes::copy_from_slice(&buf[..cut]), 0).is_err());
        }
        let type_at = buf.len() - 4; // type, seq(1), value len(1), value(1)
        buf[type_at] = 5;
        assert!(DataBlock::decode(Bytes::from(buf), 0).is_err());
    }
}
