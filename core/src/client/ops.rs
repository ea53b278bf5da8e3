//! The operations a client sends: Put, Delete, Get, Scan, Increment, Append, CheckAndMutate,
//! RowMutations, and what they return.
//!
//! These are plain builders; validation (row length, families, value size) happens in the
//! engine before anything is written, so a bad operation never leaves partial state.

use crate::cell::{Cell, Timestamp, LATEST_TIMESTAMP};
use crate::error::{Error, Result};
use crate::wal::Durability;
use bytes::Bytes;
use std::ops::Range;

fn b(x: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(x.as_ref())
}

/// Where one column of a [`Put`] lies in its buffer: family, qualifier, timestamp, value.
type ColumnSpans = (Range<usize>, Range<usize>, Timestamp, Range<usize>);

/// Appends `x` to `data` and returns where it lies.
fn push_span(data: &mut Vec<u8>, x: &[u8]) -> Range<usize> {
    let start = data.len();
    data.extend_from_slice(x);
    start..data.len()
}

/// A time range `[min, max)` of cell timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// Inclusive lower bound.
    pub min: Timestamp,
    /// Exclusive upper bound.
    pub max: Timestamp,
}

impl TimeRange {
    /// Every timestamp.
    pub const ALL: TimeRange = TimeRange {
        min: 0,
        max: u64::MAX,
    };

    /// `[min, max)`; an empty or inverted range is a bad argument.
    pub fn new(min: Timestamp, max: Timestamp) -> Result<Self> {
        if min >= max {
            return Err(Error::bad_argument(format!(
                "time range [{min}, {max}) is empty"
            )));
        }
        Ok(TimeRange { min, max })
    }

    /// Exactly one timestamp.
    pub fn at(ts: Timestamp) -> Self {
        TimeRange {
            min: ts,
            max: ts.saturating_add(1),
        }
    }
}

impl Default for TimeRange {
    fn default() -> Self {
        TimeRange::ALL
    }
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
    data: Vec<u8>,
    /// (family, qualifier, timestamp, value) as spans of `data`.
    spans: Vec<ColumnSpans>,
    pub(crate) durability: Durability,
}

impl Put {
    /// A put to `row`; cells without a timestamp get the server's time.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Put {
            row: b(row),
            ts: LATEST_TIMESTAMP,
            data: Vec::new(),
            spans: Vec::new(),
            durability: Durability::default(),
        }
    }
    /// Sets the timestamp used by cells added without one.
    pub fn timestamp(mut self, ts: Timestamp) -> Self {
        self.ts = ts;
        self
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

    /// The cells as `Bytes` sharing one copy of the put's data.
    pub(crate) fn shared_cells(&self) -> Vec<(Bytes, Bytes, Timestamp, Bytes)> {
        let d = Bytes::copy_from_slice(&self.data);
        let get = |r: &Range<usize>| {
            if r.end <= d.len() && r.start <= r.end {
                d.slice(r.clone())
            } else {
                Bytes::new()
            }
        };
        self.spans
            .iter()
            .map(|(f, q, ts, v)| (get(f), get(q), *ts, get(v)))
            .collect()
    }

    /// True when no column was added.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// One delete marker requested by a [`Delete`].
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone)]
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
    /// Deletes a whole family.
    pub fn add_family(mut self, family: impl AsRef<[u8]>) -> Self {
        self.kinds.push(DeleteKind::Family {
            family: b(family),
            ts: None,
        });
        self
    }
    /// Deletes a family's cells with ts <= `ts`.
    pub fn add_family_ts(mut self, family: impl AsRef<[u8]>, ts: Timestamp) -> Self {
        self.kinds.push(DeleteKind::Family {
            family: b(family),
            ts: Some(ts),
        });
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

/// Which columns a read returns: whole families or single columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnSelection {
    /// (family, qualifier or None for the whole family).
    pub(crate) items: Vec<(Bytes, Option<Bytes>)>,
}

impl ColumnSelection {
    fn add_family(&mut self, family: Bytes) {
        self.items.push((family, None));
    }
    fn add_column(&mut self, family: Bytes, qualifier: Bytes) {
        self.items.push((family, Some(qualifier)));
    }
}

/// Reads one row.
///
/// ```
/// use basalt_core::client::Get;
/// let g = Get::new("r").add_family("f").max_versions(3);
/// ```
#[derive(Debug, Clone)]
pub struct Get {
    pub(crate) row: Bytes,
    pub(crate) columns: ColumnSelection,
    pub(crate) time_range: TimeRange,
    pub(crate) max_versions: u32,
}

impl Get {
    /// A get of the newest version of every column of `row`.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Get {
            row: b(row),
            columns: ColumnSelection::default(),
            time_range: TimeRange::ALL,
            max_versions: 1,
        }
    }
    /// Limits to a family (may be called many times).
    pub fn add_family(mut self, family: impl AsRef<[u8]>) -> Self {
        self.columns.add_family(b(family));
        self
    }
    /// Limits to a column (may be called many times).
    pub fn add_column(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.columns.add_column(b(family), b(qualifier));
        self
    }
    /// Only versions with timestamps in `range`.
    pub fn time_range(mut self, range: TimeRange) -> Self {
        self.time_range = range;
        self
    }
    /// Only the version at exactly `ts`.
    pub fn timestamp(mut self, ts: Timestamp) -> Self {
        self.time_range = TimeRange::at(ts);
        self
    }
    /// Versions per column (default 1; 0 is a bad argument).
    pub fn max_versions(mut self, n: u32) -> Self {
        self.max_versions = n;
        self
    }
}

/// Reads a range of rows, forward or reverse, as a stream.
///
/// For a forward scan `start_row` is inclusive and `stop_row` exclusive. As in HBase, a
/// reverse scan starts at `start_row` (inclusive, the highest row) and stops before
/// `stop_row` (exclusive, the lowest).
///
/// ```
/// use basalt_core::client::Scan;
/// let s = Scan::new().with_prefix("user1").reversed(true).limit(10);
/// ```
#[derive(Debug, Clone)]
pub struct Scan {
    pub(crate) start_row: Option<Bytes>,
    pub(crate) stop_row: Option<Bytes>,
    pub(crate) prefix: Option<Bytes>,
    pub(crate) reverse: bool,
    pub(crate) columns: ColumnSelection,
    pub(crate) time_range: TimeRange,
    pub(crate) max_versions: u32,
    pub(crate) limit: Option<usize>,
    pub(crate) batch: Option<usize>,
}

impl Default for Scan {
    fn default() -> Self {
        Self::new()
    }
}

impl Scan {
    /// A scan of the whole table.
    pub fn new() -> Self {
        Scan {
            start_row: None,
            stop_row: None,
            prefix: None,
            reverse: false,
            columns: ColumnSelection::default(),
            time_range: TimeRange::ALL,
            max_versions: 1,
            limit: None,
            batch: None,
        }
    }
    /// Sets the start row (inclusive).
    pub fn start_row(mut self, row: impl AsRef<[u8]>) -> Self {
        self.start_row = Some(b(row));
        self
    }
    /// Sets the stop row (exclusive).
    pub fn stop_row(mut self, row: impl AsRef<[u8]>) -> Self {
        self.stop_row = Some(b(row));
        self
    }
    /// Only rows starting with `prefix` (replaces start and stop rows).
    pub fn with_prefix(mut self, prefix: impl AsRef<[u8]>) -> Self {
        self.prefix = Some(b(prefix));
        self
    }
    /// Scans from high rows to low rows.
    pub fn reversed(mut self, reverse: bool) -> Self {
        self.reverse = reverse;
        self
    }
    /// Limits to a family.
    pub fn add_family(mut self, family: impl AsRef<[u8]>) -> Self {
        self.columns.add_family(b(family));
        self
    }
    /// Limits to a column.
    pub fn add_column(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.columns.add_column(b(family), b(qualifier));
        self
    }
    /// Only versions with timestamps in `range`.
    pub fn time_range(mut self, range: TimeRange) -> Self {
        self.time_range = range;
        self
    }
    /// Versions per column (default 1).
    pub fn max_versions(mut self, n: u32) -> Self {
        self.max_versions = n;
        self
    }
    /// At most `n` rows (0 means no limit, as in HBase).
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
    /// At most `n` cells per result: a wider row comes back as several results.
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = Some(n);
        self
    }
}

/// Adds to 8-byte big-endian counters.
#[derive(Debug, Clone)]
pub struct Increment {
    pub(crate) row: Bytes,
    pub(crate) columns: Vec<(Bytes, Bytes, i64)>,
    pub(crate) durability: Durability,
}

impl Increment {
    /// An increment of `row`.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Increment {
            row: b(row),
            columns: Vec::new(),
            durability: Durability::default(),
        }
    }
    /// Adds `amount` to a column (an absent column counts as 0).
    pub fn add_column(
        mut self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        amount: i64,
    ) -> Self {
        self.columns.push((b(family), b(qualifier), amount));
        self
    }
    /// Sets the durability.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
}

/// Appends bytes to cells.
#[derive(Debug, Clone)]
pub struct Append {
    pub(crate) row: Bytes,
    pub(crate) columns: Vec<(Bytes, Bytes, Bytes)>,
    pub(crate) durability: Durability,
}

impl Append {
    /// An append to `row`.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Append {
            row: b(row),
            columns: Vec::new(),
            durability: Durability::default(),
        }
    }
    /// Appends `value` to a column (an absent column counts as empty).
    pub fn add_column(
        mut self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Self {
        self.columns.push((b(family), b(qualifier), b(value)));
        self
    }
    /// Sets the durability.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
}

/// A put or a delete, as used by row mutations and check-and-mutate.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// A put.
    Put(Put),
    /// A delete.
    Delete(Delete),
}

impl Mutation {
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
#[derive(Debug, Clone)]
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
}

/// A comparison of a stored value with a given one. The stored value is the left operand:
/// `Less` passes when the stored value sorts before the given bytes. (HBase's checkAndMutate
/// puts the given value on the left; Basalt reads the way the condition is written.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// stored < given
    Less,
    /// stored <= given
    LessOrEqual,
    /// stored == given
    Equal,
    /// stored != given
    NotEqual,
    /// stored >= given
    GreaterOrEqual,
    /// stored > given
    Greater,
}

impl CompareOp {
    /// Applies the operator to `stored` and `given` in unsigned lexicographic byte order.
    pub fn test(self, stored: &[u8], given: &[u8]) -> bool {
        let o = stored.cmp(given);
        match self {
            CompareOp::Less => o.is_lt(),
            CompareOp::LessOrEqual => o.is_le(),
            CompareOp::Equal => o.is_eq(),
            CompareOp::NotEqual => o.is_ne(),
            CompareOp::GreaterOrEqual => o.is_ge(),
            CompareOp::Greater => o.is_gt(),
        }
    }
}

/// The condition of a check-and-mutate, on the latest visible value of one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The column exists and `stored op value` holds.
    Value(CompareOp, Bytes),
    /// The column has no visible value.
    Absent,
}

/// Applies a mutation only if a condition on one column holds, atomically.
///
/// ```
/// use basalt_core::client::{CheckAndMutate, CompareOp, Put};
/// let cam = CheckAndMutate::new("r", "f", "q")
///     .if_value(CompareOp::Equal, "old")
///     .then_put(Put::new("r").add_column("f", "q", "new"));
/// ```
#[derive(Debug, Clone)]
pub struct CheckAndMutate {
    pub(crate) row: Bytes,
    pub(crate) family: Bytes,
    pub(crate) qualifier: Bytes,
    pub(crate) condition: Condition,
    pub(crate) action: Option<RowMutations>,
}

impl CheckAndMutate {
    /// A check of column `family:qualifier` of `row`.
    pub fn new(
        row: impl AsRef<[u8]>,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
    ) -> Self {
        CheckAndMutate {
            row: b(row),
            family: b(family),
            qualifier: b(qualifier),
            condition: Condition::Absent,
            action: None,
        }
    }
    /// Passes when `stored op value`.
    pub fn if_value(mut self, op: CompareOp, value: impl AsRef<[u8]>) -> Self {
        self.condition = Condition::Value(op, b(value));
        self
    }
    /// Passes when the column has no value.
    pub fn if_absent(mut self) -> Self {
        self.condition = Condition::Absent;
        self
    }
    /// Applies a put when the condition passes.
    pub fn then_put(mut self, p: Put) -> Self {
        self.action = Some(RowMutations::new(self.row.clone()).add(p));
        self
    }
    /// Applies a delete when the condition passes.
    pub fn then_delete(mut self, d: Delete) -> Self {
        self.action = Some(RowMutations::new(self.row.clone()).add(d));
        self
    }
    /// Applies row mutations when the condition passes.
    pub fn then_mutate(mut self, m: RowMutations) -> Self {
        self.action = Some(m);
        self
    }
}

/// One operation of a batch.
#[derive(Debug, Clone)]
pub enum BatchOp {
    /// A put.
    Put(Put),
    /// A delete.
    Delete(Delete),
    /// A get.
    Get(Get),
    /// An increment.
    Increment(Increment),
    /// An append.
    Append(Append),
    /// Row mutations.
    RowMutations(RowMutations),
    /// A check-and-mutate.
    CheckAndMutate(CheckAndMutate),
}

/// The outcome of one batch operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// A mutation was applied.
    Done,
    /// A read, increment or append result.
    Row(RowResult),
    /// A check-and-mutate: whether the condition held and the mutation applied.
    Checked(bool),
}

/// The cells of one row (or of part of a row, for a scan with a batch size).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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
