//! Region-local rows: rows that live in the region of another row, their *owner*, whatever
//! their own order (the rows of region-local indexes, Phoenix's local-index layout).
//!
//! A local row of a region starting at `start` has the key
//! `start ‖ 0x00 ‖ payload ‖ owner length ‖ start length` (two u16, big-endian), where the
//! owner is the last `owner length` bytes of the payload. The trailer makes every part of a
//! key readable from the key alone, so a write whose region split or merged while its
//! hooks ran is re-keyed at commit ([`rekey_to`]). Local rows are stored in one reserved
//! family, [`LOCAL_FAMILY`], which user reads and whole-row deletes never see and user
//! writes cannot name.
//!
//! Invariants:
//! - Every local row of a region `[start, end)` sorts inside it, so it is routed, logged,
//!   flushed and read like any row of the region. That holds while the region
//!   [`holds_local_rows`]: `end` is empty or does not begin with `start ‖ 0x00`. Splits of
//!   a table with local rows keep it (a split row that would break it is refused); a merge
//!   keeps it by construction.
//! - A local row's owner lies in its region. A split or merge rewrites the local rows of
//!   the regions it replaces: each goes to the region holding its owner, re-keyed with that
//!   region's start ([`rekey`]); the payload, and so the order among one region's local
//!   rows, is unchanged.

use bytes::{BufMut, Bytes, BytesMut};

/// The reserved family holding a table's local rows. Its leading `.` makes it a name no
/// user can declare.
pub const LOCAL_FAMILY: &[u8] = b".local";

/// The byte between a region's start and a local row's payload.
const SEPARATOR: u8 = 0x00;

/// Bytes of the trailer: the owner's length and the start's.
const TRAILER: usize = 4;

/// The key of a local row of the region starting at `start`, whose owner is the last
/// `owner_len` bytes of `payload`; `None` when the owner is longer than the payload, or the
/// owner or the start longer than 65,535 bytes.
pub fn local_row(start: &[u8], payload: &[u8], owner_len: usize) -> Option<Bytes> {
    local_row_of(start, &[payload], owner_len)
}

/// [`local_row`] of a payload given in pieces, concatenated (built with one allocation).
pub fn local_row_of(start: &[u8], payload: &[&[u8]], owner_len: usize) -> Option<Bytes> {
    let payload_len: usize = payload.iter().map(|p| p.len()).sum();
    if owner_len > payload_len {
        return None;
    }
    let owner_len = u16::try_from(owner_len).ok()?;
    let start_len = u16::try_from(start.len()).ok()?;
    let mut k = BytesMut::with_capacity(start.len() + 1 + payload_len + TRAILER);
    k.put_slice(start);
    k.put_u8(SEPARATOR);
    for p in payload {
        k.put_slice(p);
    }
    k.put_u16(owner_len);
    k.put_u16(start_len);
    Some(k.freeze())
}

/// A local row key's parts: (start, payload, owner); `None` when `row` is not one.
pub fn parts(row: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let body_len = row.len().checked_sub(TRAILER)?;
    let (body, trailer) = row.split_at(body_len);
    let word = |at: usize| -> Option<usize> {
        Some(u16::from_be_bytes([*trailer.get(at)?, *trailer.get(at + 1)?]) as usize)
    };
    let (owner_len, start_len) = (word(0)?, word(2)?);
    let start = body.get(..start_len)?;
    let payload = body.get(start_len..)?.strip_prefix(&[SEPARATOR])?;
    let owner = payload.get(payload.len().checked_sub(owner_len)?..)?;
    Some((start, payload, owner))
}

/// The owner row of a local row key (`None` when the key is not one).
pub fn owner(row: &[u8]) -> Option<&[u8]> {
    parts(row).map(|(_, _, o)| o)
}

/// The payload of a local row of the region starting at `start` (`None` when the key is
/// not one of that region's local rows).
pub fn payload<'a>(row: &'a [u8], start: &[u8]) -> Option<&'a [u8]> {
    parts(row)
        .filter(|(s, _, _)| *s == start)
        .map(|(_, p, _)| p)
}

/// The key of local row `row` moved to the region starting at `new_start` (`None` when
/// `row` is not a local row, or `new_start` is longer than 65,535 bytes).
pub fn rekey_to(row: &[u8], new_start: &[u8]) -> Option<Bytes> {
    let (_, payload, owner) = parts(row)?;
    local_row(new_start, payload, owner.len())
}

/// [`rekey_to`] for a row known to be of the region starting at `old_start` (`None` when
/// it is not).
pub fn rekey(row: &[u8], old_start: &[u8], new_start: &[u8]) -> Option<Bytes> {
    payload(row, old_start)?;
    rekey_to(row, new_start)
}

/// The first key of the local rows of the region starting at `start` whose payload is at
/// or after `payload`.
pub fn lower_bound(start: &[u8], payload: &[u8]) -> Bytes {
    let mut k = BytesMut::with_capacity(start.len() + 1 + payload.len());
    k.put_slice(start);
    k.put_u8(SEPARATOR);
    k.put_slice(payload);
    k.freeze()
}

/// The first key after every local row of the region starting at `start`.
pub fn end_of_local_rows(start: &[u8]) -> Bytes {
    let mut k = BytesMut::with_capacity(start.len() + 1);
    k.put_slice(start);
    k.put_u8(SEPARATOR + 1);
    k.freeze()
}

/// True when every local row of the region `[start, end)` sorts inside it: `end` is
/// empty (no upper bound) or does not begin with `start ‖ 0x00`.
pub fn holds_local_rows(start: &[u8], end: &[u8]) -> bool {
    end.is_empty()
        || !(end.len() > start.len()
            && end.starts_with(start)
            && end.get(start.len()) == Some(&SEPARATOR))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(start: &[u8], values: &[u8], owner: &[u8]) -> Bytes {
        let mut p = values.to_vec();
        p.extend_from_slice(owner);
        local_row(start, &p, owner.len()).unwrap_or_default()
    }

    #[test]
    fn a_local_row_names_its_owner_and_payload() {
        let k = key(b"m", b"\x01paris\x00\x00", b"ada");
        assert_eq!(owner(&k), Some(&b"ada"[..]));
        assert_eq!(payload(&k, b"m"), Some(&b"\x01paris\x00\x00ada"[..]));
        assert_eq!(payload(&k, b"n"), None);
        let moved = rekey(&k, b"m", b"mo").unwrap_or_default();
        assert_eq!(owner(&moved), Some(&b"ada"[..]));
        assert_eq!(payload(&moved, b"mo"), payload(&k, b"m"));
        assert_eq!(local_row(b"", b"ab", 3), None);
        assert_eq!(owner(b"x"), None);
        assert_eq!(
            parts(&k),
            Some((&b"m"[..], &b"\x01paris\x00\x00ada"[..], &b"ada"[..]))
        );
        // A key read without knowing its region: its start is in it.
        let moved = rekey_to(&k, b"").unwrap_or_default();
        assert_eq!(payload(&moved, b""), payload(&k, b"m"));
        assert_eq!(
            parts(b"m\x00ab\x00\x09\x00\x01"),
            None,
            "owner longer than payload"
        );
    }

    #[test]
    fn which_regions_hold_their_local_rows() {
        assert!(holds_local_rows(b"", b""));
        assert!(holds_local_rows(b"", b"a"));
        assert!(!holds_local_rows(b"", b"\x00a"));
        assert!(!holds_local_rows(b"a", b"a\x00"));
        assert!(holds_local_rows(b"a", b"a\x01"));
        assert!(holds_local_rows(b"a", b"b"));
    }

    proptest! {
        #[test]
        fn local_rows_sort_inside_their_region_and_by_payload(
            start in proptest::collection::vec(any::<u8>(), 0..4),
            end in proptest::collection::vec(any::<u8>(), 0..5),
            a in proptest::collection::vec(any::<u8>(), 0..6),
            b in proptest::collection::vec(any::<u8>(), 0..6),
            owner_a in proptest::collection::vec(1u8..=255, 1..4),
        ) {
            let ka = key(&start, &a, &owner_a);
            prop_assert_eq!(owner(&ka), Some(&owner_a[..]));
            if (end.is_empty() || start < end) && holds_local_rows(&start, &end) {
                prop_assert!(ka.as_ref() >= start.as_slice());
                prop_assert!(end.is_empty() || ka.as_ref() < end.as_slice());
                prop_assert!(ka < end_of_local_rows(&start));
            }
            // Payloads that differ before either ends keep their order.
            let (pa, pb) = (lower_bound(&start, &a), lower_bound(&start, &b));
            if !a.starts_with(&b) && !b.starts_with(&a) {
                let kb = key(&start, &b, b"o");
                prop_assert_eq!(pa < pb, ka < kb);
            }
        }
    }
}
