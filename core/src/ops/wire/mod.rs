//! The serde forms of what crosses the client's `Backend` seam, for a network protocol
//! (`basalt-cluster` encodes them with postcard): how an operation decoded from a peer's
//! bytes is kept as safe to use as one built in process.
//!
//! Most types derive serde where they are declared (the operations of `ops`, cells and
//! rows, descriptors, reports): their fields are free values, and what the engine requires
//! of them (row length, families, value size, versions, time ranges, a check-and-mutate
//! mutating its own row) it checks when the operation runs, as it does for an operation
//! built in process. Filters bound their own nesting while they decode
//! ([`crate::filter::MAX_FILTER_DEPTH`]), and a cell type travels as its on-disk code,
//! refused when unknown.
//!
//! This module holds the form of the one type that keeps a structural invariant of its own,
//! [`Put`]: its columns lie back to back in one buffer, each as spans of it. On the wire a
//! put is that buffer and, per column, the lengths of its family, qualifier and value with
//! its timestamp ([`PutWire`]). Decoding refuses lengths that do not tile the buffer
//! exactly, so a decoded put keeps the builders' invariant: every span lies inside the
//! buffer, no two overlap, and the buffer holds nothing else - its cells add up to no more
//! bytes than the message carried, and no accessor can slice out of range.
//!
//! Bounds on decoding untrusted bytes: a byte string or string is checked against the
//! remaining input before it is copied (postcard); a sequence reserves room ahead of the
//! elements it has read only for a length no greater than the input left (postcard's
//! `from_bytes`) and for at most 1 MiB (serde's cautious preallocation); and every
//! recursive type bounds its depth (filters, and [`crate::Error`]'s wire form,
//! `ErrorWire`). So a decode allocates at most a small multiple of the message's size, and
//! fails on anything inconsistent instead of building a value that would panic later.
//!
//! postcard names an enum's variant by its index and a struct's fields by their order: a
//! new variant of a type that crosses the seam goes at its end, and any other change to
//! one (a field added, moved or retyped) changes the protocol, and its version.

use super::mutate::{ColumnSpans, Put};
use crate::cell::Timestamp;
use crate::error::{Error, Result};
use crate::wal::Durability;
use bytes::Bytes;
use serde::de::{Deserializer, Error as _};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// A [`Put`] as it travels: its columns' bytes back to back, and each column's lengths.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct PutWire {
    /// The row.
    row: Bytes,
    /// The timestamp of columns added without one.
    ts: Timestamp,
    /// Every column's family, qualifier and value, back to back, in column order.
    data: Bytes,
    /// One entry per column, in order: where its bytes lie in `data`.
    columns: Vec<ColumnWire>,
    /// The durability asked for.
    durability: Durability,
    /// The cells' own time to live.
    ttl_ms: Option<u64>,
    /// Whether the put is a touch.
    touch: bool,
}

/// One column of a [`PutWire`]: the lengths of its family, qualifier and value, which follow
/// one another in the put's buffer right after the previous column's, and its timestamp.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct ColumnWire {
    /// The family's length.
    family: u64,
    /// The qualifier's length.
    qualifier: u64,
    /// The column's timestamp.
    ts: Timestamp,
    /// The value's length.
    value: u64,
}

/// A [`Put`] borrowed as a [`PutWire`] is encoded (same fields, same order), so that sending
/// a put copies its buffer only into the message.
#[derive(Serialize)]
#[serde(rename = "PutWire")]
struct PutView<'a> {
    row: &'a Bytes,
    ts: Timestamp,
    data: RawBytes<'a>,
    columns: Columns<'a>,
    durability: Durability,
    ttl_ms: Option<u64>,
    touch: bool,
}

/// Bytes encoded as a byte string (as `Bytes` is), not as a sequence of numbers.
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// A put's spans encoded as the [`ColumnWire`]s they tile the buffer with.
struct Columns<'a>(&'a [ColumnSpans]);

impl Serialize for Columns<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let len = |r: &Range<usize>| r.len() as u64;
        s.collect_seq(self.0.iter().map(|(f, q, ts, v)| ColumnWire {
            family: len(f),
            qualifier: len(q),
            ts: *ts,
            value: len(v),
        }))
    }
}

impl Serialize for Put {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        PutView {
            row: &self.row,
            ts: self.ts,
            data: RawBytes(&self.data),
            columns: Columns(&self.spans),
            durability: self.durability,
            ttl_ms: self.ttl_ms,
            touch: self.touch,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Put {
    /// Decodes a `PutWire` and checks it (`Put::try_from`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Put::try_from(PutWire::deserialize(d)?).map_err(D::Error::custom)
    }
}

impl TryFrom<PutWire> for Put {
    type Error = Error;

    /// The put the wire form describes, or [`Error::BadArgument`] when its column lengths
    /// do not tile its buffer exactly (a length past its end, or bytes left over).
    fn try_from(w: PutWire) -> Result<Put> {
        let data = Vec::from(w.data);
        let mut at = 0usize;
        let mut next = |len: u64| -> Result<Range<usize>> {
            let end = usize::try_from(len)
                .ok()
                .and_then(|len| at.checked_add(len))
                .filter(|&end| end <= data.len())
                .ok_or_else(|| {
                    Error::bad_argument(format!(
                        "put of {} bytes: a column of {len} bytes at byte {at} runs past its end",
                        data.len()
                    ))
                })?;
            let span = at..end;
            at = end;
            Ok(span)
        };
        let mut spans = Vec::with_capacity(w.columns.len());
        for c in &w.columns {
            spans.push((next(c.family)?, next(c.qualifier)?, c.ts, next(c.value)?));
        }
        if at != data.len() {
            return Err(Error::bad_argument(format!(
                "put of {} bytes: its columns cover only {at}",
                data.len()
            )));
        }
        Ok(Put {
            row: w.row,
            ts: w.ts,
            data,
            spans,
            durability: w.durability,
            ttl_ms: w.ttl_ms,
            touch: w.touch,
        })
    }
}

#[cfg(test)]
mod tests;
