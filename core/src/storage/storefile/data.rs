//! A decoded data block: its payload plus the offset of every entry, ready for binary search.
//!
//! [`DataBlock::decode`] walks the payload once and checks every entry (lengths in bounds,
//! known type codes, nothing trailing), so later accesses only re-parse bytes that are known
//! to be well formed. Cells handed out are zero-copy: their `Bytes` fields are slices of the
//! block's one payload buffer. This is the value kept in the [`BlockCache`].
//!
//! [`BlockCache`]: super::BlockCache

use super::codec::{Cursor, Dec, RawKey};
use crate::cell::{StoreCell, StoreKey};
use bytes::Bytes;
use std::cmp::Ordering;

/// Fixed per-block bookkeeping counted in the cache weight, in bytes.
const BLOCK_OVERHEAD: u64 = 96;

/// A decoded, checked data block.
#[derive(Debug)]
pub(crate) struct DataBlock {
    buf: Bytes,
    offsets: Vec<u32>,
    weight: u64,
}

impl DataBlock {
    /// Decodes and checks a data-block payload. `framed_len` is its on-disk size, counted in
    /// the cache weight when the payload is a slice of the raw block.
    pub(crate) fn decode(buf: Bytes, framed_len: usize) -> Dec<Self> {
        let mut offsets = Vec::with_capacity(buf.len() / 32 + 1);
        let mut c = Cursor::at(&buf, 0);
        while c.remaining() > 0 {
            let at = u32::try_from(c.pos()).map_err(|_| "block too large")?;
            offsets.push(at);
            c.key()?;
            c.len_prefixed()?;
        }
        if offsets.is_empty() {
            return Err("data block holds no entry".into());
        }
        offsets.shrink_to_fit();
        let weight = BLOCK_OVERHEAD + buf.len().max(framed_len) as u64 + 4 * offsets.len() as u64;
        Ok(DataBlock {
            buf,
            offsets,
            weight,
        })
    }

    /// The number of entries (at least 1).
    pub(crate) fn len(&self) -> usize {
        self.offsets.len()
    }

    /// The bytes this block holds in memory, for the cache's weigher.
    pub(crate) fn weight(&self) -> u64 {
        self.weight
    }

    fn cursor(&self, i: usize) -> Dec<Cursor<'_>> {
        let at = *self.offsets.get(i).ok_or("entry index out of range")?;
        Ok(Cursor::at(&self.buf, at as usize))
    }

    /// The key of entry `i`, in place.
    #[inline]
    fn raw_key(&self, i: usize) -> Dec<RawKey> {
        self.cursor(i)?.key()
    }

    /// Compares entry `i`'s key with `key`.
    #[inline]
    pub(crate) fn cmp_at(&self, i: usize, key: &StoreKey) -> Dec<Ordering> {
        Ok(self.raw_key(i)?.cmp_key(&self.buf, key))
    }

    /// The number of leading entries for which `pred(entry key vs key)` holds; `pred` must
    /// hold for a prefix of the block only.
    fn partition(&self, key: &StoreKey, pred: impl Fn(Ordering) -> bool) -> Dec<usize> {
        let (mut lo, mut hi) = (0usize, self.offsets.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.cmp_at(mid, key)?) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
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
        let mut c = self.cursor(i)?;
        let key = c.key()?;
        let value = c.len_prefixed()?;
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
