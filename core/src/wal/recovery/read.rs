//! Reading one segment's frames for the scan: good frames and bad spots, with the search for
//! the next good frame after a bad one (salvage), and the marker a segment opens with.
//!
//! Invariants kept: reading never panics and never trusts a length from the file beyond the
//! data at hand; the byte-by-byte search checksums a bounded number of bytes
//! ([`SEARCH_BUDGET`]); a frame found after a bad one has a seq not below the last good one
//! and is followed by a good frame or the end of the file.

use super::super::record::{read_frame, Frame, FRAME_HEADER_LEN, MAX_PAYLOAD_LEN};
use super::super::segment::HEADER_LEN;
use super::{Bad, Read};

/// Reads the frames of one segment after its header. Reading stops at the first bad
/// frame, unless `salvage`, which skips to the next good frame each time.
pub(super) fn read_segment(data: &[u8], mut last_seq: u64, salvage: bool) -> Read {
    let mut out = Read {
        good: Vec::new(),
        bad: None,
        more_bad: Vec::new(),
        len: data.len(),
    };
    let mut offset = HEADER_LEN.min(data.len());
    loop {
        let rest = data.get(offset..).unwrap_or_default();
        let reason = match read_frame(rest) {
            Frame::End => return out,
            Frame::Record { record, len } => {
                last_seq = last_seq.max(record.seq);
                out.good.push((offset..offset + len, record));
                offset += len;
                continue;
            }
            Frame::Torn(reason) => format!("torn record: {reason}"),
            Frame::Corrupt(reason) => format!("corrupt record: {reason}"),
        };
        let next = next_good_frame(data, offset, last_seq);
        let bad = Bad { offset, reason };
        if out.bad.is_none() {
            out.bad = Some((bad, next));
        } else {
            out.more_bad
                .push((bad, next.unwrap_or(data.len()).saturating_sub(offset)));
        }
        match next {
            Some(next) if salvage => offset = next,
            _ => return out,
        }
    }
}

/// The most bytes [`next_good_frame`] checksums while searching byte by byte: past it the
/// search gives up (as if no good frame followed), so a long torn tail costs bounded time.
const SEARCH_BUDGET: usize = 64 << 20;

/// Where the next good frame after a bad one at `bad` starts: first where the bad frame's
/// own length says, then at the first later offset holding a frame whose checksum and
/// decoding hold, whose seq is at least `last_seq`, and which ends the file or is followed
/// by another good frame (so a frame-shaped value inside a torn record is not taken for
/// one). The byte-by-byte search checksums at most [`SEARCH_BUDGET`] bytes.
fn next_good_frame(data: &[u8], bad: usize, last_seq: u64) -> Option<usize> {
    let frame_at = |at: usize| match read_frame(data.get(at..).unwrap_or_default()) {
        Frame::Record { record, len } if record.seq >= last_seq => Some((record.seq, len)),
        _ => None,
    };
    let good_at = |at: usize| match frame_at(at) {
        Some((seq, len)) => {
            let next = at + len;
            next == data.len()
                || matches!(read_frame(data.get(next..).unwrap_or_default()),
                    Frame::Record { record, .. } if record.seq >= seq)
        }
        None => false,
    };
    let be32 = |at: usize| -> Option<usize> {
        let b = data.get(at..at + 4)?;
        Some(b.iter().fold(0usize, |a, &x| (a << 8) | usize::from(x)))
    };
    if let Some(len) = be32(bad) {
        let at = bad + FRAME_HEADER_LEN + len;
        if len <= MAX_PAYLOAD_LEN && at < data.len() && good_at(at) {
            return Some(at);
        }
    }
    let end = data.len().checked_sub(FRAME_HEADER_LEN + 2)?;
    let mut budget = SEARCH_BUDGET;
    for at in bad + 1..=end {
        // Cheap tests first: the length fits, the payload's seq varint is plausible.
        let Some(len) = be32(at) else { continue };
        if len < 2 || at + FRAME_HEADER_LEN + len > data.len() {
            continue;
        }
        let payload = data.get(at + FRAME_HEADER_LEN..).unwrap_or_default();
        if leading_varint(payload).is_none_or(|seq| seq < last_seq) {
            continue;
        }
        budget = budget.checked_sub(len)?;
        if good_at(at) {
            return Some(at);
        }
    }
    None
}

/// The varint at the start of `b`, if it is well formed.
fn leading_varint(b: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().take(10).enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The seq of the marker a segment opens with (its first frame, right after the header),
/// if it opens with one: segments written before markers existed do not.
pub(super) fn opening_marker(data: &[u8]) -> Option<u64> {
    match read_frame(data.get(HEADER_LEN..)?) {
        Frame::Record { record, .. } if record.edits.is_empty() => Some(record.seq),
        _ => None,
    }
}
