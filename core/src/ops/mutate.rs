//! Mutations: Put, Delete (HBase's five marker kinds) and RowMutations.

use super::b;
use crate::cell::{Timestamp, LATEST_TIMESTAMP};
use crate::wal::Durability;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Where one column of a [`Put`] lies in its buffer: family, qualifier, timestamp, value.
pub(super) type ColumnSpans = (Range<usize>, Range<usize>, Timestamp, Range<usize>);

/// Appends `x` to `data` and returns where it lies.
fn push_span(data: &mut Vec<u8>, x: &[u8]) -> Range<usize> {
    let start = data.len();
    data.extend_from_slice(x);
    start..data.len()
}

/// Writes cells to one row.
///
/// ```
/// use basalt_core::client::Put;
/// let p = Put::new("row1").add_column("f", "q", "v").add_column_ts("f", "q2", 42, "w");
/// assert_eq!(p.cells().len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct Put {
    pub(crate) row: Bytes,
    pub(crate) ts: Timestamp,
    /// Every family, qualifier and value, back to back: one buffer instead of three
    /// allocations per column, shared by all cells once the put is committed.
    pub(super) data: Vec<u8>,
    /// (family, qualifier, timestamp, value) as spans of `data`. Invariant: they tile
    /// `data` in order (each span starts where the one before it ends, the last ends at
    /// `data`'s end). The builders keep it, and decoding a put (`ops::wire`) refuses any
    /// other layout.
    pub(super) spans: Vec<ColumnSpans>,
    pub(crate) durability: Durability,
    /// The cells' own time to live in milliseconds, if any.
    pub(crate) ttl_ms: Option<u64>,
    /// A touch: writes nothing, only runs the table's batch hooks for its row.
    pub(super) touch: bool,
}

impl Put {
    /// A touch of `row`: a put that writes no cell of its own and only runs the table's
    /// batch hooks for the row under its lock (an index rewrites its entries for the row
    /// from the row's current values; see [`crate::client::Table::touch`]). On a table
    /// without batch hooks it does nothing.
    ///
    /// ```
    /// use basalt_core::client::Put;
    /// let t = Put::touch("row1");
    /// assert!(t.is_touch() && t.is_empty());
    /// ```
    pub fn touch(row: impl AsRef<[u8]>) -> Self {
        let mut p = Put::new(row);
        p.touch = true;
        p
    }

    /// True for a touch ([`Put::touch`]).
    pub fn is_touch(&self) -> bool {
        self.touch
    }

    /// A put to `row`; cells without a timestamp get the server's time.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Put {
            row: b(row),
            ts: LATEST_TIMESTAMP,
            data: Vec::new(),
            spans: Vec::new(),
            durability: Durability::default(),
            ttl_ms: None,
            touch: false,
        }
    }
    /// Gives the put's cells their own time to live, in milliseconds (HBase's
    /// `Mutation.setTTL`): a cell expires once its timestamp plus the TTL is below the
    /// server's clock, whatever the family's min versions; the family's TTL still applies.
    /// An expired cell still counts among the column's max versions, so an older version
    /// does not come back. Zero is refused when the put is written.
    ///
    /// ```
    /// use basalt_core::client::Put;
    /// let session = Put::new("s1").add_column("f", "token", "abc").ttl_ms(30 * 60 * 1000);
    /// assert_eq!(session.get_ttl_ms(), Some(1_800_000));
    /// ```
    pub fn ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }
    /// The cells' own time to live, if set ([`Put::ttl_ms`]).
    pub fn get_ttl_ms(&self) -> Option<u64> {
        self.ttl_ms
    }
    /// Sets the timestamp used by cells added without one.
    pub fn timestamp(mut self, ts: Timestamp) -> Self {
        self.ts = ts;
        self
    }
    /// The timestamp cells added without one get ([`LATEST_TIMESTAMP`]: the server's time).
    ///
    /// ```
    /// use basalt_core::client::Put;
    /// use basalt_core::cell::LATEST_TIMESTAMP;
    /// assert_eq!(Put::new("r").get_timestamp(), LATEST_TIMESTAMP);
    /// assert_eq!(Put::new("r").timestamp(7).get_timestamp(), 7);
    /// ```
    pub fn get_timestamp(&self) -> Timestamp {
        self.ts
    }
    /// Adds a cell with the put's timestamp.
    pub fn add_column(
        self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Self {
        self.add(
            family.as_ref(),
            qualifier.as_ref(),
            LATEST_TIMESTAMP,
            value.as_ref(),
        )
    }

    fn add(mut self, family: &[u8], qualifier: &[u8], ts: Timestamp, value: &[u8]) -> Self {
        if self.data.capacity() - self.data.len() < family.len() + qualifier.len() + value.len() {
            // Grow for about eight more columns like this one, so a typical put reallocates
            // once or twice.
            self.data
                .reserve(8 * (family.len() + qualifier.len() + value.len()));
        }
        let f = push_span(&mut self.data, family);
        let q = push_span(&mut self.data, qualifier);
        let v = push_span(&mut self.data, value);
        self.spans.push((f, q, ts, v));
        self
    }
    /// Adds a cell at an explicit timestamp.
    pub fn add_column_ts(
        self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        ts: Timestamp,
        value: impl AsRef<[u8]>,
    ) -> Self {
        self.add(family.as_ref(), qualifier.as_ref(), ts, value.as_ref())
    }
    /// Sets the durability.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    /// The row.
    pub fn row(&self) -> &Bytes {
        &self.row
    }
    /// The cells: (family, qualifier, timestamp, value).
    pub fn cells(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8], Timestamp, &[u8])> {
        let d = &self.data[..];
        let get = move |r: &Range<usize>| d.get(r.clone()).unwrap_or_default();
        self.spans
            .iter()
            .map(move |(f, q, ts, v)| (get(f), get(q), *ts, get(v)))
    }

    /// The cells sharing one copy of the put's data: (family, qualifier, timestamp,
    /// value), the family borrowed (a writer compares it with the last one), qualifier and
    /// value as `Bytes` views of the copy.
    pub(crate) fn shared_cells(&self) -> impl Iterator<Item = (&[u8], Bytes, Timestamp, Bytes)> {
        let d = Bytes::copy_from_slice(&self.data);
        let data = &self.data[..];
        self.spans.iter().map(move |(f, q, ts, v)| {
            let get = |r: &Range<usize>| {
                if r.end <= d.len() && r.start < r.end {
                    d.slice(r.clone())
                } else {
                    Bytes::new()
                }
            };
            (data.get(f.clone()).unwrap_or_default(), get(q), *ts, get(v))
        })
    }

    /// True when no column was added.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// One delete marker requested by a [`Delete`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeleteKind {
    /// One version of a column: at `ts`, or the latest version when `ts` is `None`.
    Version {
        /// Family.
        family: Bytes,
        /// Qualifier.
        qualifier: Bytes,
        /// Exact timestamp.
        ts: Option<Timestamp>,
    },
    /// All versions of a column with ts <= the given one (or the delete's timestamp).
    Column {
        /// Family.
        family: Bytes,
        /// Qualifier.
        qualifier: Bytes,
        /// Upper bound, inclusive.
        ts: Option<Timestamp>,
    },
    /// All columns of a family with ts <= the given one (or the delete's timestamp).
    Family {
        /// Family.
        family: Bytes,
        /// Upper bound, inclusive.
        ts: Option<Timestamp>,
    },
    /// All columns of a family at exactly `ts`.
    FamilyVersion {
        /// Family.
        family: Bytes,
        /// Exact timestamp.
        ts: Timestamp,
    },
}

impl DeleteKind {
    /// The family the marker is in.
    pub fn family(&self) -> &Bytes {
        match self {
            DeleteKind::Version { family, .. }
            | DeleteKind::Column { family, .. }
            | DeleteKind::Family { family, .. }
            | DeleteKind::FamilyVersion { family, .. } => family,
        }
    }
}

/// Deletes from one row with HBase's five marker kinds. With no marker added it deletes the
/// whole row (every family, versions <= the delete's timestamp).
///
/// ```
/// use basalt_core::client::Delete;
/// let whole_row = Delete::new("r");
/// let one_column = Delete::new("r").add_columns("f", "q");
/// assert!(whole_row.kinds().is_empty());
/// assert_eq!(one_column.kinds().len(), 1);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delete {
    pub(crate) row: Bytes,
    pub(crate) ts: Timestamp,
    pub(crate) kinds: Vec<DeleteKind>,
    pub(crate) durability: Durability,
}

impl Delete {
    /// A delete of `row`.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Delete {
            row: b(row),
            ts: LATEST_TIMESTAMP,
            kinds: Vec::new(),
            durability: Durability::default(),
        }
    }
    /// The timestamp used by markers added without one (default: the server's time).
    pub fn timestamp(mut self, ts: Timestamp) -> Self {
        self.ts = ts;
        self
    }
    /// The timestamp markers added without one get ([`LATEST_TIMESTAMP`]: the server's time).
    ///
    /// ```
    /// use basalt_core::client::Delete;
    /// use basalt_core::cell::LATEST_TIMESTAMP;
    /// assert_eq!(Delete::new("r").get_timestamp(), LATEST_TIMESTAMP);
    /// ```
    pub fn get_timestamp(&self) -> Timestamp {
        self.ts
    }
    /// Deletes the latest version of a column; added n times for one column, the n newest.
    pub fn add_column(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.kinds.push(DeleteKind::Version {
            family: b(family),
            qualifier: b(qualifier),
            ts: None,
        });
        self
    }
    /// Deletes the version of a column at exactly `ts`.
    pub fn add_column_ts(
        mut self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        ts: Timestamp,
    ) -> Self {
        self.kinds.push(DeleteKind::Version {
            family: b(family),
            qualifier: b(qualifier),
            ts: Some(ts),
        });
        self
    }
    /// Deletes all versions of a column.
    pub fn add_columns(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.kinds.push(DeleteKind::Column {
            family: b(family),
            qualifier: b(qualifier),
            ts: None,
        });
        self
    }
    /// Deletes all versions of a column with ts <= `ts`.
    pub fn add_columns_ts(
        mut self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        ts: Timestamp,
    ) -> Self {
        self.kinds.push(DeleteKind::Column {
            family: b(family),
            qualifier: b(qualifier),
            ts: Some(ts),
        });
        self
    }
    /// Deletes a whole family. As HBase 2's `Delete.addFamily`, it replaces every marker of
    /// this family added before it (column, version and family markers); markers added
    /// after it stay.
    ///
    /// ```
    /// use basalt_core::client::{Delete, DeleteKind};
    /// let d = Delete::new("r").add_columns("f", "a").add_columns("g", "b").add_family("f");
    /// assert_eq!(d.kinds().len(), 2); // g:b and the family f
    /// assert!(matches!(&d.kinds()[1], DeleteKind::Family { family, .. } if family.as_ref() == b"f"));
    /// ```
    pub fn add_family(self, family: impl AsRef<[u8]>) -> Self {
        self.replace_family(b(family), None)
    }
    /// Deletes a family's cells with ts <= `ts`; replaces the family's earlier markers as
    /// [`Delete::add_family`] does.
    pub fn add_family_ts(self, family: impl AsRef<[u8]>, ts: Timestamp) -> Self {
        self.replace_family(b(family), Some(ts))
    }
    fn replace_family(mut self, family: Bytes, ts: Option<Timestamp>) -> Self {
        self.kinds.retain(|k| k.family() != &family);
        self.kinds.push(DeleteKind::Family { family, ts });
        self
    }
    /// Deletes every column of a family at exactly `ts`.
    pub fn add_family_version(mut self, family: impl AsRef<[u8]>, ts: Timestamp) -> Self {
        self.kinds.push(DeleteKind::FamilyVersion {
            family: b(family),
            ts,
        });
        self
    }
    /// Sets the durability.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    /// The row.
    pub fn row(&self) -> &Bytes {
        &self.row
    }
    /// The markers requested.
    pub fn kinds(&self) -> &[DeleteKind] {
        &self.kinds
    }
}

/// A put or a delete, as used by row mutations and check-and-mutate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Mutation {
    /// A put.
    Put(Put),
    /// A delete.
    Delete(Delete),
}

impl Mutation {
    /// The durability the mutation asks for.
    pub fn durability(&self) -> Durability {
        match self {
            Mutation::Put(p) => p.durability,
            Mutation::Delete(d) => d.durability,
        }
    }

    /// The mutation's row.
    pub fn row(&self) -> &Bytes {
        match self {
            Mutation::Put(p) => &p.row,
            Mutation::Delete(d) => &d.row,
        }
    }
}

impl From<Put> for Mutation {
    fn from(p: Put) -> Self {
        Mutation::Put(p)
    }
}

impl From<Delete> for Mutation {
    fn from(d: Delete) -> Self {
        Mutation::Delete(d)
    }
}

/// Puts and deletes applied to one row atomically.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RowMutations {
    pub(crate) row: Bytes,
    pub(crate) mutations: Vec<Mutation>,
}

impl RowMutations {
    /// Mutations of `row`; every added mutation must name the same row.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        RowMutations {
            row: b(row),
            mutations: Vec::new(),
        }
    }
    /// Adds a mutation (named as HBase's `RowMutations.add`).
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, m: impl Into<Mutation>) -> Self {
        self.mutations.push(m.into());
        self
    }
    /// The row.
    pub fn row(&self) -> &Bytes {
        &self.row
    }
    /// The mutations, in order.
    pub fn mutations(&self) -> &[Mutation] {
        &self.mutations
    }
}
