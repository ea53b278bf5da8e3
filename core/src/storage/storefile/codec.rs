//! Byte-level encoding shared by every block: varints, keys, entries, and a bounds-checked
//! cursor.
//!
//! Decoding never panics and never trusts a length: every length is checked against the
//! bytes that remain before it is used. Failures are reported as a short reason ([`Dec`]);
//! the caller turns it into a corruption error naming the file and the block offset.

use crate::cell::{CellType, StoreCell, StoreKey};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::ops::Range;

/// A decoding result: the reason is turned into `Error::Corruption` by the caller.
pub(crate) type Dec<T> = std::result::Result<T, Cow<'static, str>>;

pub(crate) use crate::varint::{len as varint_len, put as put_varint};

/// Appends `key` in the key encoding (see the module doc of `storefile`).
pub(crate) fn put_key(out: &mut Vec<u8>, key: &StoreKey) {
    put_varint(out, key.row.len() as u64);
    out.extend_from_slice(&key.row);
    put_varint(out, key.qualifier.len() as u64);
    out.extend_from_slice(&key.qualifier);
    out.extend_from_slice(&key.ts.to_be_bytes());
    out.push(key.kind.code());
    put_varint(out, key.seq);
}

/// The encoded length of `cell` as a data-block entry.
pub(crate) fn entry_len(cell: &StoreCell) -> usize {
    let k = &cell.key;
    varint_len(k.row.len() as u64)
        + k.row.len()
        + varint_len(k.qualifier.len() as u64)
        + k.qualifier.len()
        + 9
        + varint_len(k.seq)
        + varint_len(cell.value.len() as u64)
        + cell.value.len()
}

/// Appends `cell` as a data-block entry: its key, then the length-prefixed value.
pub(crate) fn put_entry(out: &mut Vec<u8>, cell: &StoreCell) {
    put_key(out, &cell.key);
    put_varint(out, cell.value.len() as u64);
    out.extend_from_slice(&cell.value);
}

/// A key decoded in place: byte ranges into the buffer it was read from.
#[derive(Debug, Clone)]
pub(crate) struct RawKey {
    pub row: Range<usize>,
    pub qualifier: Range<usize>,
    pub ts: u64,
    pub kind: CellType,
    pub seq: u64,
}

impl RawKey {
    /// Compares this key (whose bytes live in `buf`) with `key` in [`StoreKey`] order.
    #[inline]
    pub(crate) fn cmp_key(&self, buf: &[u8], key: &StoreKey) -> Ordering {
        // Mirrors `impl Ord for StoreKey` with `self` on the left.
        buf.get(self.row.clone())
            .cmp(&Some(&key.row[..]))
            .then_with(|| {
                buf.get(self.qualifier.clone())
                    .cmp(&Some(&key.qualifier[..]))
            })
            .then_with(|| key.ts.cmp(&self.ts))
            .then_with(|| key.kind.code().cmp(&self.kind.code()))
            .then_with(|| key.seq.cmp(&self.seq))
    }

    /// Builds an owned key whose byte fields are zero-copy slices of `buf`.
    pub(crate) fn to_key(&self, buf: &bytes::Bytes) -> StoreKey {
        StoreKey {
            row: buf.slice(self.row.clone()),
            qualifier: buf.slice(self.qualifier.clone()),
            ts: self.ts,
            kind: self.kind,
            seq: self.seq,
        }
    }
}

/// A bounds-checked reader over a byte slice.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at `pos` in `buf`.
    pub(crate) fn at(buf: &'a [u8], pos: usize) -> Self {
        Cursor { buf, pos }
    }

    /// The current position.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The number of bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Reads one byte.
    pub(crate) fn u8(&mut self) -> Dec<u8> {
        let b = *self.buf.get(self.pos).ok_or("unexpected end of block")?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads `N` raw bytes.
    fn array<const N: usize>(&mut self) -> Dec<[u8; N]> {
        let end = self.pos.checked_add(N).ok_or("length overflow")?;
        let bytes = self
            .buf
            .get(self.pos..end)
            .ok_or("unexpected end of block")?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        self.pos = end;
        Ok(out)
    }

    /// Reads a u32 BE.
    pub(crate) fn u32(&mut self) -> Dec<u32> {
        self.array::<4>().map(u32::from_be_bytes)
    }

    /// Reads a u64 BE.
    pub(crate) fn u64(&mut self) -> Dec<u64> {
        self.array::<8>().map(u64::from_be_bytes)
    }

    /// Reads an unsigned LEB128 varint of at most 10 bytes that fits in 64 bits.
    #[inline]
    pub(crate) fn varint(&mut self) -> Dec<u64> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let (v, n) = crate::varint::decode(rest)?;
        self.pos += n;
        Ok(v)
    }

    /// Reads a varint length and returns the range of that many following bytes.
    #[inline]
    pub(crate) fn len_prefixed(&mut self) -> Dec<Range<usize>> {
        let len = self.varint()?;
        if len > self.remaining() as u64 {
            return Err(format!("length {len} runs past the end of the block").into());
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(start..self.pos)
    }

    /// Reads a key (see the key encoding).
    #[inline]
    pub(crate) fn key(&mut self) -> Dec<RawKey> {
        let row = self.len_prefixed()?;
        let qualifier = self.len_prefixed()?;
        let ts = self.u64()?;
        let code = self.u8()?;
        let kind = CellType::from_code(code)
            .ok_or_else(|| Cow::Owned(format!("unknown cell type code {code}")))?;
        let seq = self.varint()?;
        Ok(RawKey {
            row,
            qualifier,
            ts,
            kind,
            seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_round_trips(v in any::<u64>()) {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            let mut c = Cursor::at(&out, 0);
            prop_assert_eq!(c.varint().unwrap(), v);
            prop_assert_eq!(c.remaining(), 0);
        }

        #[test]
        fn varint_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = Cursor::at(&bytes, 0).varint();
        }
    }

    #[test]
    fn overlong_varint_is_rejected() {
        let bytes = [0xffu8; 10];
        assert!(Cursor::at(&bytes, 0).varint().is_err());
        let mut ok = vec![0xffu8; 9];
        ok.push(1);
        assert_eq!(Cursor::at(&ok, 0).varint().unwrap(), u64::MAX);
    }
}
