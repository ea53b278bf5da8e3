//! Byte-level encoding shared by every block: varints, keys, entries, and a bounds-checked
//! cursor.
//!
//! Decoding never panics and never trusts a length: every length is checked against the
//! bytes that remain before it is used. Failures are reported as a short reason ([`Dec`]);
//! the caller turns it into a corruption error naming the file and the block offset.

use crate::cell::{CellRef, CellType, StoreKey};
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
pub(crate) fn entry_len(cell: &CellRef<'_>) -> usize {
    varint_len(cell.row.len() as u64)
        + cell.row.len()
        + varint_len(cell.qualifier.len() as u64)
        + cell.qualifier.len()
        + 9
        + varint_len(cell.seq)
        + varint_len(cell.value.len() as u64)
        + cell.value.len()
}

/// Appends `cell` as a data-block entry: its key (as [`put_key`] writes one), then the
/// length-prefixed value.
pub(crate) fn put_entry(out: &mut Vec<u8>, cell: &CellRef<'_>) {
    put_varint(out, cell.row.len() as u64);
    out.extend_from_slice(cell.row);
    put_varint(out, cell.qualifier.len() as u64);
    out.extend_from_slice(cell.qualifier);
    out.extend_from_slice(&cell.ts.to_be_bytes());
    out.push(cell.kind.code());
    put_varint(out, cell.seq);
    put_varint(out, cell.value.len() as u64);
    out.extend_from_slice(cell.value);
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
            .then_with(|| key.kind.rank().cmp(&self.kind.rank()))
            .then_with(|| key.seq.cmp(&self.seq))
            .then_with(|| key.kind.code().cmp(&self.kind.code()))
    }

    /// Builds an owned key whose byte fields are zero-copy slices of `buf`.
    #[inline(always)]
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

/// Parses the entry at `at` in one pass: its key, its value's range and where the next entry
/// starts. `None` when the bytes there are not a well-formed entry.
///
/// This is the scan's hot path: blocks are checked entry by entry when they are decoded
/// ([`super::data::DataBlock::decode`] uses the [`Cursor`], which says what is wrong), so here
/// a failure only needs to be detected, not explained. Always inlined: as a call, its
/// result (two ranges, the key's fixed fields, the value's range, the end) went through
/// memory for every cell; inlined into the scanner's step, a full scan's CPU fell 16%.
#[inline(always)]
pub(crate) fn parse_entry(buf: &[u8], at: usize) -> Option<(RawKey, Range<usize>, usize)> {
    let (row, p) = len_prefixed_at(buf, at)?;
    let (qualifier, p) = len_prefixed_at(buf, p)?;
    let ts: [u8; 8] = buf.get(p..p + 8)?.try_into().ok()?;
    let kind = CellType::from_code(*buf.get(p + 8)?)?;
    let (seq, n) = crate::varint::decode(buf.get(p + 9..)?).ok()?;
    let (value, end) = len_prefixed_at(buf, p + 9 + n)?;
    let key = RawKey {
        row,
        qualifier,
        ts: u64::from_be_bytes(ts),
        kind,
        seq,
    };
    Some((key, value, end))
}

/// The range of the row of the entry at `at` (the entry's first field).
#[inline]
pub(crate) fn row_at(buf: &[u8], at: usize) -> Option<Range<usize>> {
    len_prefixed_at(buf, at).map(|(row, _)| row)
}

/// A varint length at `at` and the range of that many following bytes, plus its end.
#[inline(always)]
fn len_prefixed_at(buf: &[u8], at: usize) -> Option<(Range<usize>, usize)> {
    let (len, n) = crate::varint::decode(buf.get(at..)?).ok()?;
    let start = at + n;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    (end <= buf.len()).then_some((start..end, end))
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
    #[cfg(test)]
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
    use crate::cell::StoreCell;
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

        /// The one-pass parser and the checking cursor agree on every input: well-formed
        /// entries (possibly cut or with a byte changed) and random bytes alike.
        #[test]
        fn parse_entry_agrees_with_cursor(
            row in proptest::collection::vec(any::<u8>(), 0..40),
            qualifier in proptest::collection::vec(any::<u8>(), 0..20),
            value in proptest::collection::vec(any::<u8>(), 0..300),
            ts in any::<u64>(),
            seq in any::<u64>(),
            cut in any::<prop::sample::Index>(),
            flip in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
        ) {
            let cell = StoreCell {
                key: StoreKey {
                    row: row.into(),
                    qualifier: qualifier.into(),
                    ts,
                    kind: CellType::DeleteColumn,
                    seq,
                },
                value: value.into(),
            };
            let mut buf = Vec::new();
            put_entry(&mut buf, &CellRef::of(&cell));
            prop_assert_eq!(buf.len(), entry_len(&CellRef::of(&cell)));
            let (key, v, end) = parse_entry(&buf, 0).unwrap();
            prop_assert_eq!(key.to_key(&bytes::Bytes::from(buf.clone())), cell.key.clone());
            prop_assert_eq!(&buf[v], &cell.value[..]);
            prop_assert_eq!(end, buf.len());
            if let Some((at, byte)) = flip {
                let i = at.index(buf.len());
                buf[i] = byte;
            }
            buf.truncate(cut.index(buf.len() + 1));
            let mut c = Cursor::at(&buf, 0);
            let checked = c.key().and_then(|k| Ok((k, c.len_prefixed()?, c.pos())));
            match (parse_entry(&buf, 0), checked) {
                (Some((k1, v1, e1)), Ok((k2, v2, e2))) => {
                    prop_assert_eq!((k1.row, k1.qualifier, k1.ts, k1.kind, k1.seq, v1, e1),
                        (k2.row, k2.qualifier, k2.ts, k2.kind, k2.seq, v2, e2));
                }
                (None, Err(_)) => {}
                (a, b) => prop_assert!(false, "parse_entry {:?} but cursor {:?}", a.is_some(), b.is_ok()),
            }
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
