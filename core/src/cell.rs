//! Cells: the unit of data, and the internal key order every sorted structure keeps.
//!
//! A store holds one column family, so its internal key is
//! `(row, qualifier, timestamp, type, sequence id)` ordered as HBase orders a KeyValue:
//! row ascending, qualifier ascending, timestamp descending, type code descending (delete
//! markers before puts at the same timestamp), sequence id descending (the newest write of
//! the same coordinates first). MemStores, store files, the merge and the matcher all rely on
//! this single order, defined here by [`StoreKey`]'s `Ord`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// A cell timestamp, in milliseconds since the Unix epoch unless the caller chooses otherwise.
pub type Timestamp = u64;

/// The timestamp meaning "let the server assign the current time" on writes, and
/// "no upper bound" on reads.
pub const LATEST_TIMESTAMP: Timestamp = u64::MAX;

/// The longest row key HBase accepts (`Short.MAX_VALUE`).
pub const MAX_ROW_LENGTH: usize = 32_767;

/// The kind of a cell: a value or one of HBase's four delete markers.
///
/// The discriminants are HBase's `KeyValue.Type` codes and are part of the on-disk formats;
/// serde writes a cell type as its code too (not as the variant's index), and refuses an
/// unknown code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
#[repr(u8)]
pub enum CellType {
    /// A value.
    Put = 4,
    /// A value with its own time to live (HBase's cell TTL tag, `Mutation.setTTL`): the
    /// stored value begins with the TTL in milliseconds, 8 bytes big-endian, and the cell
    /// expires once its timestamp plus the TTL is below the clock. Basalt's own code: it
    /// sorts as [`CellType::Put`] does, and reads return it as a `Put` without the prefix.
    ExpiringPut = 5,
    /// Masks exactly one version (the put at the marker's timestamp) of one column.
    Delete = 8,
    /// Masks every column of the family at exactly the marker's timestamp.
    DeleteFamilyVersion = 10,
    /// Masks all versions of one column with timestamps <= the marker's.
    DeleteColumn = 12,
    /// Masks all columns of the family with timestamps <= the marker's.
    DeleteFamily = 14,
}

impl CellType {
    /// The on-disk code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Decodes an on-disk code; `None` for an unknown code.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            4 => Some(CellType::Put),
            5 => Some(CellType::ExpiringPut),
            8 => Some(CellType::Delete),
            10 => Some(CellType::DeleteFamilyVersion),
            12 => Some(CellType::DeleteColumn),
            14 => Some(CellType::DeleteFamily),
            _ => None,
        }
    }

    /// True for the four delete markers.
    pub fn is_delete(self) -> bool {
        !self.is_put()
    }

    /// True for a value ([`CellType::Put`] or [`CellType::ExpiringPut`]).
    pub fn is_put(self) -> bool {
        matches!(self, CellType::Put | CellType::ExpiringPut)
    }

    /// True for the markers that apply to a whole family (they carry an empty qualifier).
    pub fn is_family_delete(self) -> bool {
        matches!(self, CellType::DeleteFamily | CellType::DeleteFamilyVersion)
    }

    /// The code keys sort by (descending): HBase's, with an expiring put ranked as a put,
    /// so that of the puts at one timestamp the newest write comes first whatever its kind.
    #[inline]
    pub fn rank(self) -> u8 {
        match self {
            CellType::ExpiringPut => CellType::Put.code(),
            other => other.code(),
        }
    }
}

impl From<CellType> for u8 {
    fn from(t: CellType) -> u8 {
        t.code()
    }
}

impl TryFrom<u8> for CellType {
    type Error = crate::error::Error;

    /// [`CellType::from_code`], failing with [`crate::Error::BadArgument`] on an unknown code.
    fn try_from(code: u8) -> crate::error::Result<Self> {
        CellType::from_code(code)
            .ok_or_else(|| crate::error::Error::bad_argument(format!("unknown cell type {code}")))
    }
}

/// The stored value of an [`CellType::ExpiringPut`]: the TTL in milliseconds, 8 bytes
/// big-endian, then the value.
pub fn expiring_value(ttl_ms: u64, value: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(8 + value.len());
    v.extend_from_slice(&ttl_ms.to_be_bytes());
    v.extend_from_slice(value);
    Bytes::from(v)
}

/// Byte-string equality, inlined: the read path compares short rows and qualifiers once per
/// cell, where a call to `memcmp` costs more than the comparison itself; two views of the
/// same bytes are equal at once.
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if a.as_ptr() == b.as_ptr() {
        return true; // two views of the same bytes (cells of one MemStore row share the row)
    }
    let word = |s: &[u8], at: usize| {
        s.get(at..at + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
            .map(u64::from_ne_bytes)
    };
    if n < 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    // Whole words, then the last word (which may overlap the one before).
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

/// A cell as returned to callers: one version of one column of one row.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cell {
    /// The row key.
    pub row: Bytes,
    /// The column family.
    pub family: Bytes,
    /// The column qualifier.
    pub qualifier: Bytes,
    /// The version's timestamp.
    pub timestamp: Timestamp,
    /// [`CellType::Put`] for every cell a read returns, except a raw scan's delete markers
    /// (`Scan::raw`), whose value is empty.
    pub kind: CellType,
    /// The value.
    pub value: Bytes,
}

/// The cells of one row (or of part of a row, for a scan with a batch size).
///
/// Serde reads back any list of cells, in any order: nothing of the client relies on the
/// order to be safe (only [`RowResult::value`] on it to be right).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RowResult {
    /// The row key (empty when a get found nothing).
    pub row: Bytes,
    /// Cells sorted by family, qualifier, then timestamp descending.
    pub cells: Vec<Cell>,
}

impl RowResult {
    /// True when no cell was found.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The newest value of a column.
    pub fn value(&self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Option<&Bytes> {
        let (f, q) = (family.as_ref(), qualifier.as_ref());
        self.cells
            .iter()
            .find(|c| c.family.as_ref() == f && c.qualifier.as_ref() == q)
            .map(|c| &c.value)
    }

    /// Every version of a column, newest first.
    pub fn versions(&self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Vec<&Cell> {
        let (f, q) = (family.as_ref(), qualifier.as_ref());
        self.cells
            .iter()
            .filter(|c| c.family.as_ref() == f && c.qualifier.as_ref() == q)
            .collect()
    }
}

/// The internal key of a cell inside one store (one column family).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreKey {
    /// The row key.
    pub row: Bytes,
    /// The column qualifier (empty for family delete markers).
    pub qualifier: Bytes,
    /// The timestamp.
    pub ts: Timestamp,
    /// The cell type.
    pub kind: CellType,
    /// The engine-wide sequence id of the write that produced the cell.
    pub seq: u64,
}

impl StoreKey {
    /// The smallest key of `row`: every cell of `row` sorts at or after it.
    pub fn first_on_row(row: Bytes) -> Self {
        StoreKey {
            row,
            qualifier: Bytes::new(),
            ts: u64::MAX,
            kind: CellType::DeleteFamily,
            seq: u64::MAX,
        }
    }

    /// The smallest key of column `(row, qualifier)`.
    pub fn first_on_column(row: Bytes, qualifier: Bytes) -> Self {
        StoreKey {
            row,
            qualifier,
            ts: u64::MAX,
            kind: CellType::DeleteFamily,
            seq: u64::MAX,
        }
    }
}

/// Orders two byte strings, deciding at once when both are views of the same bytes: the
/// cells of one MemStore row share their row key, so a flush, a merge or a writer comparing
/// neighbours skips most byte comparisons.
#[inline]
pub(crate) fn cmp_bytes(a: &Bytes, b: &Bytes) -> Ordering {
    if a.as_ptr() == b.as_ptr() && a.len() == b.len() {
        Ordering::Equal
    } else {
        a.as_ref().cmp(b.as_ref())
    }
}

impl Ord for StoreKey {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_bytes(&self.row, &other.row)
            .then_with(|| cmp_bytes(&self.qualifier, &other.qualifier))
            .then_with(|| other.ts.cmp(&self.ts))
            .then_with(|| other.kind.rank().cmp(&self.kind.rank()))
            .then_with(|| other.seq.cmp(&self.seq))
            .then_with(|| other.kind.code().cmp(&self.kind.code()))
    }
}

impl PartialOrd for StoreKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A cell of one store borrowed from wherever it lives (a MemStore row, a decoded block):
/// what a store-file writer appends without building a [`StoreCell`] and its reference
/// counts. Ordered as [`StoreKey`] is ([`CellRef::cmp_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellRef<'a> {
    /// The row key.
    pub row: &'a [u8],
    /// The column qualifier.
    pub qualifier: &'a [u8],
    /// The timestamp.
    pub ts: Timestamp,
    /// The cell type.
    pub kind: CellType,
    /// The sequence id.
    pub seq: u64,
    /// The value.
    pub value: &'a [u8],
}

impl<'a> CellRef<'a> {
    /// A view of `c`.
    pub fn of(c: &'a StoreCell) -> Self {
        CellRef {
            row: &c.key.row,
            qualifier: &c.key.qualifier,
            ts: c.key.ts,
            kind: c.key.kind,
            seq: c.key.seq,
            value: &c.value,
        }
    }

    /// Compares the keys of two cells in [`StoreKey`] order.
    #[inline]
    pub fn cmp_key(&self, other: &CellRef<'_>) -> Ordering {
        self.row
            .cmp(other.row)
            .then_with(|| self.qualifier.cmp(other.qualifier))
            .then_with(|| other.ts.cmp(&self.ts))
            .then_with(|| other.kind.rank().cmp(&self.kind.rank()))
            .then_with(|| other.seq.cmp(&self.seq))
            .then_with(|| other.kind.code().cmp(&self.kind.code()))
    }

    /// The key, its bytes copied.
    pub fn to_key(&self) -> StoreKey {
        StoreKey {
            row: Bytes::copy_from_slice(self.row),
            qualifier: Bytes::copy_from_slice(self.qualifier),
            ts: self.ts,
            kind: self.kind,
            seq: self.seq,
        }
    }
}

/// A cell inside one store: its internal key and its value (empty for delete markers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreCell {
    /// The internal key.
    pub key: StoreKey,
    /// The value.
    pub value: Bytes,
}

impl StoreCell {
    /// The cell's own TTL in milliseconds (an [`CellType::ExpiringPut`]'s), if any. A
    /// stored value too short to hold one has none.
    pub fn cell_ttl(&self) -> Option<u64> {
        if self.key.kind != CellType::ExpiringPut {
            return None;
        }
        let head: [u8; 8] = self.value.get(..8)?.try_into().ok()?;
        Some(u64::from_be_bytes(head))
    }

    /// True when the cell's own TTL has run out at `now_ms` (HBase: timestamp + TTL below
    /// the clock).
    pub fn cell_expired(&self, now_ms: u64) -> bool {
        self.cell_ttl()
            .is_some_and(|ttl| self.key.ts.saturating_add(ttl) < now_ms)
    }

    /// The cell as readers see it: an expiring put becomes a put whose value is without its
    /// TTL prefix.
    pub fn into_user(mut self) -> StoreCell {
        if self.key.kind == CellType::ExpiringPut {
            if self.value.len() >= 8 {
                self.value = self.value.slice(8..);
            }
            self.key.kind = CellType::Put;
        }
        self
    }

    /// The cell as a read returns it, in `family`, as a plain put (a reader's view of a
    /// put the matcher let through: no cell TTL left to strip).
    pub(crate) fn into_put_cell(self, family: &Bytes) -> Cell {
        Cell {
            row: self.key.row,
            family: family.clone(),
            qualifier: self.key.qualifier,
            timestamp: self.key.ts,
            kind: CellType::Put,
            value: self.value,
        }
    }

    /// Approximate heap footprint, used for MemStore accounting.
    pub fn heap_size(&self) -> usize {
        self.key.row.len() + self.key.qualifier.len() + self.value.len() + 64
    }
}

/// The server's clock: milliseconds since the Unix epoch (0 before it), what cells written
/// without a timestamp are stamped with.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(row: &str, q: &str, ts: u64, kind: CellType, seq: u64) -> StoreKey {
        StoreKey {
            row: Bytes::copy_from_slice(row.as_bytes()),
            qualifier: Bytes::copy_from_slice(q.as_bytes()),
            ts,
            kind,
            seq,
        }
    }

    #[test]
    fn order_matches_hbase() {
        let mut keys = [
            key("b", "a", 1, CellType::Put, 1),
            key("a", "b", 5, CellType::Put, 1),
            key("a", "a", 5, CellType::Put, 1),
            key("a", "a", 5, CellType::Put, 9),
            key("a", "a", 5, CellType::DeleteColumn, 2),
            key("a", "a", 9, CellType::Put, 1),
            key("a", "", 3, CellType::DeleteFamily, 1),
        ];
        keys.sort();
        let got: Vec<_> = keys
            .iter()
            .map(|k| (k.row.clone(), k.qualifier.clone(), k.ts, k.kind, k.seq))
            .collect();
        assert_eq!(got[0].1, Bytes::from_static(b""));
        assert_eq!((got[1].2, got[1].3), (9, CellType::Put));
        assert_eq!((got[2].2, got[2].3), (5, CellType::DeleteColumn));
        assert_eq!((got[3].2, got[3].4), (5, 9));
        assert_eq!((got[4].2, got[4].4), (5, 1));
        assert_eq!(got[5].1, Bytes::from_static(b"b"));
        assert_eq!(got[6].0, Bytes::from_static(b"b"));
        assert!(StoreKey::first_on_row(Bytes::from_static(b"a")) < keys[0]);
    }

    proptest::proptest! {
        #[test]
        fn same_bytes_is_equality(
            a in proptest::collection::vec(0u8..3, 0..40),
            b in proptest::collection::vec(0u8..3, 0..40),
        ) {
            proptest::prop_assert_eq!(same_bytes(&a, &b), a == b);
            proptest::prop_assert!(same_bytes(&a, &a.clone()));
        }
    }

    #[test]
    fn type_codes_round_trip() {
        for t in [
            CellType::Put,
            CellType::Delete,
            CellType::DeleteFamilyVersion,
            CellType::DeleteColumn,
            CellType::DeleteFamily,
        ] {
            assert_eq!(CellType::from_code(t.code()), Some(t));
        }
        assert_eq!(CellType::from_code(0), None);
    }
}
