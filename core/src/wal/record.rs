//! The WAL record codec: how one [`WalRecord`] (one atomic batch) is framed and encoded.
//!
//! This comment is the specification of the record format; it is stable, and a change to it
//! needs a new segment version (see `segment.rs`).
//!
//! # Frame
//!
//! Records follow the 24-byte segment header back to back, with no padding:
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 4    | payload length `n`, u32 big-endian, at most 1 GiB            |
//! | 4      | 4    | CRC-32 (IEEE, as `crc32fast`) of the `n` payload bytes, u32 BE |
//! | 8      | n    | payload                                                      |
//!
//! # Payload
//!
//! `varint` is unsigned LEB128 (7 bits per byte, least significant group first, high bit set
//! on every byte but the last, at most 10 bytes for a u64). In order:
//!
//! 1. `seq`: varint, the record's sequence id.
//! 2. `count`: varint, the number of edits.
//! 3. `count` edits, each:
//!    - `region_id`: varint
//!    - `family`: varint length, then that many bytes
//!    - `row`: varint length, then that many bytes
//!    - `qualifier`: varint length, then that many bytes
//!    - `timestamp`: u64 big-endian (8 bytes)
//!    - `type`: u8, a [`CellType`] code (4 Put, 5 ExpiringPut, 8 Delete,
//!      10 DeleteFamilyVersion, 12 DeleteColumn, 14 DeleteFamily; 5 is Basalt's, a put with
//!      a cell TTL, whose value begins with the TTL in milliseconds as 8 big-endian bytes;
//!      a build older than it reads the code as corruption)
//!    - `value`: varint length, then that many bytes
//!
//! An edit does not store its own sequence id: every cell of a record carries the record's
//! `seq` (`cell.key.seq == record.seq`), and decoding restores it from there.
//!
//! # What counts as broken
//!
//! A frame is *torn* when the bytes left in the file are fewer than its 8-byte header or than
//! the header's payload length. It is *corrupt* when the length exceeds 1 GiB, the CRC does
//! not match, or the payload does not decode exactly: a truncated or over-long varint, a
//! length past the payload's end, an unknown type code, or bytes left over after the last
//! edit. Decoding never panics and never allocates more than the input's size.

use super::{WalEdit, WalRecord};
use crate::cell::{CellType, StoreCell, StoreKey};
use crate::error::Error;
use bytes::Bytes;

/// Size of a frame's header: payload length and CRC.
pub(crate) const FRAME_HEADER_LEN: usize = 8;
/// The largest payload a frame may carry; a longer length field is corruption.
pub(crate) const MAX_PAYLOAD_LEN: usize = 1 << 30;
/// The smallest encoded edit: five one-byte varints, a timestamp and a type code.
const MIN_EDIT_LEN: usize = 5 + 8 + 1;

/// The outcome of reading one frame from the start of a byte slice.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A good record, and the number of bytes its frame took.
    Record {
        /// The decoded record.
        record: WalRecord,
        /// Header plus payload length.
        len: usize,
    },
    /// The slice is empty: a clean end of the segment.
    End,
    /// The frame is incomplete (the reason says how).
    Torn(String),
    /// The frame is complete but fails its checksum or its decoding.
    Corrupt(String),
}

/// The frame of a marker: a record with no edits carrying `seq`.
pub(crate) fn marker_frame(seq: u64) -> crate::error::Result<Vec<u8>> {
    let mut frame = UnsealedFrame::encode(std::iter::empty())?;
    Ok(frame.seal(seq).to_vec())
}

/// The payload length `record` encodes to, computed without encoding it.
#[cfg(test)]
pub(crate) fn payload_len(record: &WalRecord) -> usize {
    let bytes_len = |b: &Bytes| varint_len(b.len() as u64) + b.len();
    let mut n = varint_len(record.seq) + varint_len(record.edits.len() as u64);
    for e in &record.edits {
        n += varint_len(e.region_id)
            + bytes_len(&e.family)
            + bytes_len(&e.cell.key.row)
            + bytes_len(&e.cell.key.qualifier)
            + 8
            + 1
            + bytes_len(&e.cell.value);
    }
    n
}

/// Appends the frame of `record` to `out` in one pass: the reference encoder the tests hold
/// [`UnsealedFrame`] to. The caller has checked that the payload fits [`MAX_PAYLOAD_LEN`].
#[cfg(test)]
pub(crate) fn encode_frame(record: &WalRecord, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    put_varint(out, record.seq);
    put_varint(out, record.edits.len() as u64);
    for e in &record.edits {
        put_varint(out, e.region_id);
        put_bytes(out, &e.family);
        put_bytes(out, &e.cell.key.row);
        put_bytes(out, &e.cell.key.qualifier);
        out.extend_from_slice(&e.cell.key.ts.to_be_bytes());
        out.push(e.cell.key.kind.code());
        put_bytes(out, &e.cell.value);
    }
    let payload = &out[start + FRAME_HEADER_LEN..];
    let len = u32::try_from(payload.len())
        .unwrap_or(u32::MAX)
        .to_be_bytes();
    let crc = crc32fast::hash(payload).to_be_bytes();
    out[start..start + 4].copy_from_slice(&len);
    out[start + 4..start + 8].copy_from_slice(&crc);
}

/// The bytes reserved at the start of an [`UnsealedFrame`]'s payload for its sequence id
/// (the longest varint of a u64).
const SEQ_SLOT: usize = 10;

/// One edit to encode, borrowed from wherever the batch keeps it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EditRef<'a> {
    /// The region the cell belongs to.
    pub region_id: u64,
    /// The column family.
    pub family: &'a [u8],
    /// The cell (its `key.seq` is ignored: the frame's sequence id is written at sealing).
    pub cell: &'a StoreCell,
}

impl<'a> EditRef<'a> {
    /// The edit of a [`WalEdit`].
    pub fn of(e: &'a WalEdit) -> Self {
        EditRef {
            region_id: e.region_id,
            family: &e.family,
            cell: &e.cell,
        }
    }
}

/// A frame encoded before its sequence id is known: the engine encodes a batch outside its
/// commit lock and, under the lock, only writes the sequence id, the length and the CRC
/// ([`UnsealedFrame::seal`]). The sealed frame is byte for byte what `encode_frame` writes
/// (the format above is unchanged).
///
/// Layout of the buffer: 8 bytes for the frame header, [`SEQ_SLOT`] bytes for the sequence
/// id, then the rest of the payload (edit count and edits). Sealing writes the sequence id's
/// varint right-aligned in its slot and the header just before it; the frame is the buffer
/// from the header on.
#[derive(Debug)]
pub(crate) struct UnsealedFrame {
    buf: Vec<u8>,
}

impl UnsealedFrame {
    /// Encodes `edits`; fails when the payload would pass [`MAX_PAYLOAD_LEN`].
    pub fn encode<'a>(
        edits: impl ExactSizeIterator<Item = EditRef<'a>> + Clone,
    ) -> crate::error::Result<Self> {
        let bytes_len = |b: &[u8]| varint_len(b.len() as u64) + b.len();
        let mut n = SEQ_SLOT + varint_len(edits.len() as u64);
        for e in edits.clone() {
            n += varint_len(e.region_id)
                + bytes_len(e.family)
                + bytes_len(&e.cell.key.row)
                + bytes_len(&e.cell.key.qualifier)
                + 8
                + 1
                + bytes_len(&e.cell.value);
        }
        if n > MAX_PAYLOAD_LEN {
            return Err(Error::bad_argument(format!(
                "WAL record of {n} bytes exceeds the {MAX_PAYLOAD_LEN}-byte limit"
            )));
        }
        let mut buf = Vec::with_capacity(FRAME_HEADER_LEN + n);
        buf.resize(FRAME_HEADER_LEN + SEQ_SLOT, 0);
        put_varint(&mut buf, edits.len() as u64);
        for e in edits {
            put_varint(&mut buf, e.region_id);
            put_bytes(&mut buf, e.family);
            put_bytes(&mut buf, &e.cell.key.row);
            put_bytes(&mut buf, &e.cell.key.qualifier);
            buf.extend_from_slice(&e.cell.key.ts.to_be_bytes());
            buf.push(e.cell.key.kind.code());
            put_bytes(&mut buf, &e.cell.value);
        }
        Ok(UnsealedFrame { buf })
    }

    /// Writes `seq`, the length and the checksum; returns the finished frame.
    pub fn seal(&mut self, seq: u64) -> &[u8] {
        let mut id = Vec::with_capacity(SEQ_SLOT);
        put_varint(&mut id, seq);
        let payload_start = FRAME_HEADER_LEN + SEQ_SLOT - id.len();
        let start = payload_start - FRAME_HEADER_LEN;
        if let Some(slot) = self.buf.get_mut(payload_start..FRAME_HEADER_LEN + SEQ_SLOT) {
            slot.copy_from_slice(&id);
        }
        let payload = self.buf.get(payload_start..).unwrap_or_default();
        let len = u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes();
        let crc = crc32fast::hash(payload).to_be_bytes();
        if let Some(h) = self.buf.get_mut(start..payload_start) {
            let (l, c) = h.split_at_mut(4);
            l.copy_from_slice(&len);
            c.copy_from_slice(&crc);
        }
        self.buf.get(start..).unwrap_or_default()
    }
}

/// Reads the frame at the start of `buf` (the rest of a segment from some offset).
pub(crate) fn read_frame(buf: &[u8]) -> Frame {
    if buf.is_empty() {
        return Frame::End;
    }
    let mut r = Reader(buf);
    let (Ok(len), Ok(crc)) = (r.u32(), r.u32()) else {
        return Frame::Torn(format!("frame header cut after {} of 8 bytes", buf.len()));
    };
    let len = len as usize;
    if len > MAX_PAYLOAD_LEN {
        return Frame::Corrupt(format!("payload length {len} exceeds the 1 GiB limit"));
    }
    let Ok(payload) = r.take(len) else {
        return Frame::Torn(format!(
            "payload cut after {} of {len} bytes",
            buf.len() - FRAME_HEADER_LEN
        ));
    };
    let actual = crc32fast::hash(payload);
    if actual != crc {
        return Frame::Corrupt(format!(
            "checksum mismatch (stored {crc:08x}, computed {actual:08x})"
        ));
    }
    match decode_payload(payload) {
        Ok(record) => Frame::Record {
            record,
            len: FRAME_HEADER_LEN + len,
        },
        Err(reason) => Frame::Corrupt(reason),
    }
}

/// Decodes a payload whose checksum has been verified; the error says what is malformed.
pub(crate) fn decode_payload(payload: &[u8]) -> Result<WalRecord, String> {
    let mut r = Reader(payload);
    let seq = r.varint()?;
    let count = r.varint()?;
    // Never trust the count for an allocation: each edit takes at least MIN_EDIT_LEN bytes.
    let cap = usize::try_from(count)
        .unwrap_or(usize::MAX)
        .min(r.0.len() / MIN_EDIT_LEN);
    let mut edits = Vec::with_capacity(cap);
    for i in 0..count {
        let region_id = r.varint()?;
        let family = r.len_bytes()?;
        let row = r.len_bytes()?;
        let qualifier = r.len_bytes()?;
        let ts = r.u64()?;
        let code = r.take(1)?.first().copied().unwrap_or(0);
        let kind = CellType::from_code(code)
            .ok_or_else(|| format!("edit {i}: unknown cell type code {code}"))?;
        let value = r.len_bytes()?;
        let key = StoreKey {
            row,
            qualifier,
            ts,
            kind,
            seq,
        };
        edits.push(WalEdit {
            region_id,
            family,
            cell: StoreCell { key, value },
        });
    }
    if !r.0.is_empty() {
        return Err(format!("{} bytes left after the last edit", r.0.len()));
    }
    Ok(WalRecord { seq, edits })
}

use crate::varint::{len as varint_len, put as put_varint};

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A cursor over untrusted bytes; every read checks bounds and reports a reason.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err(format!("needs {n} bytes, {} left", self.0.len()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }

    fn varint(&mut self) -> Result<u64, String> {
        let (v, n) = crate::varint::decode(self.0)?;
        self.0 = self.0.get(n..).unwrap_or_default();
        Ok(v)
    }

    fn len_bytes(&mut self) -> Result<Bytes, String> {
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| format!("length {len} too large"))?;
        Ok(Bytes::copy_from_slice(self.take(len)?))
    }
}
