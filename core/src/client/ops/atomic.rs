//! Read-modify-write operations under the row lock: Increment, Append and CheckAndMutate.

use super::{b, Delete, Put, RowMutations, TimeRange};
use crate::wal::Durability;
use bytes::Bytes;

/// Adds to 8-byte big-endian counters.
#[derive(Debug, Clone)]
pub struct Increment {
    pub(crate) row: Bytes,
    pub(crate) columns: Vec<(Bytes, Bytes, i64)>,
    pub(crate) durability: Durability,
    pub(crate) time_range: TimeRange,
    pub(crate) ttl_ms: Option<u64>,
}

impl Increment {
    /// An increment of `row`.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Increment {
            row: b(row),
            columns: Vec::new(),
            durability: Durability::default(),
            time_range: TimeRange::ALL,
            ttl_ms: None,
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
    /// Reads the current values inside `range` only (HBase's `setTimeRange`): a column
    /// with no version inside it counts as absent. The new value's timestamp is the
    /// server's time (or just above the value read), wherever the range lies.
    pub fn time_range(mut self, range: TimeRange) -> Self {
        self.time_range = range;
        self
    }
    /// The time range the current values are read in.
    pub fn get_time_range(&self) -> TimeRange {
        self.time_range
    }
    /// Gives the new values their own time to live, in milliseconds (see
    /// [`crate::client::Put::ttl_ms`]).
    pub fn ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }
    /// The new values' own time to live, if set.
    pub fn get_ttl_ms(&self) -> Option<u64> {
        self.ttl_ms
    }
    /// The row.
    pub fn row(&self) -> &Bytes {
        &self.row
    }
    /// The `(family, qualifier, amount)` of every column, in the order given.
    pub fn columns(&self) -> &[(Bytes, Bytes, i64)] {
        &self.columns
    }
    /// The columns, for a coprocessor that changes the increment (e.g. an amount).
    pub fn columns_mut(&mut self) -> &mut Vec<(Bytes, Bytes, i64)> {
        &mut self.columns
    }
    /// The durability.
    pub fn get_durability(&self) -> Durability {
        self.durability
    }
}

/// Appends bytes to cells.
#[derive(Debug, Clone)]
pub struct Append {
    pub(crate) row: Bytes,
    pub(crate) columns: Vec<(Bytes, Bytes, Bytes)>,
    pub(crate) durability: Durability,
    pub(crate) time_range: TimeRange,
    pub(crate) ttl_ms: Option<u64>,
}

impl Append {
    /// An append to `row`.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Append {
            row: b(row),
            columns: Vec::new(),
            durability: Durability::default(),
            time_range: TimeRange::ALL,
            ttl_ms: None,
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
    /// Reads the current values inside `range` only (HBase's `setTimeRange`): a column
    /// with no version inside it counts as absent. The new value's timestamp is the
    /// server's time (or just above the value read), wherever the range lies.
    pub fn time_range(mut self, range: TimeRange) -> Self {
        self.time_range = range;
        self
    }
    /// The time range the current values are read in.
    pub fn get_time_range(&self) -> TimeRange {
        self.time_range
    }
    /// Gives the new values their own time to live, in milliseconds (see
    /// [`crate::client::Put::ttl_ms`]).
    pub fn ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }
    /// The new values' own time to live, if set.
    pub fn get_ttl_ms(&self) -> Option<u64> {
        self.ttl_ms
    }
    /// The row.
    pub fn row(&self) -> &Bytes {
        &self.row
    }
    /// The `(family, qualifier, value)` of every column, in the order given.
    pub fn columns(&self) -> &[(Bytes, Bytes, Bytes)] {
        &self.columns
    }
    /// The columns, for a coprocessor that changes the append.
    pub fn columns_mut(&mut self) -> &mut Vec<(Bytes, Bytes, Bytes)> {
        &mut self.columns
    }
}

/// A comparison of a stored value with a given one. The stored value is the left operand:
/// `Less` passes when the stored value sorts before the given bytes. (HBase's checkAndMutate
/// puts the given value on the left; Basalt reads the way the condition is written.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// The condition of a check-and-mutate: on the latest visible value of one column, or a
/// filter over the whole row.
///
/// An empty expected value means "no value", as in HBase (`HRegion#checkAndMutate`,
/// `TestHRegion#testCheckAndMutate_WithEmptyRowValue`): it matches an absent column or a
/// zero-length value, for every operator but `NotEqual`, which matches a column holding a
/// non-empty value. [`Condition::Absent`] is HBase's `ifNotExists`: an absent column or a
/// zero-length value.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `stored op value` holds (see above for an empty `value`).
    Value(CompareOp, Bytes),
    /// The column has no visible value, or a zero-length one.
    Absent,
    /// The row, read with this filter, is not empty (HBase's `ifMatches(Filter)`).
    Filter(crate::filter::Filter),
}

impl Condition {
    /// Whether a column condition holds for the column's latest visible value (`None`:
    /// absent). A filter condition is judged on the row instead: false here.
    ///
    /// ```
    /// use basalt_core::client::{CompareOp, Condition};
    /// let eq_empty = Condition::Value(CompareOp::Equal, "".into());
    /// assert!(eq_empty.holds(None) && eq_empty.holds(Some(b"")) && !eq_empty.holds(Some(b"x")));
    /// assert!(Condition::Absent.holds(Some(b"")));
    /// assert!(Condition::Value(CompareOp::Less, "b".into()).holds(Some(b"a")));
    /// ```
    pub fn holds(&self, current: Option<&[u8]>) -> bool {
        match self {
            Condition::Absent => current.is_none_or(<[u8]>::is_empty),
            Condition::Value(op, given) if given.is_empty() => {
                let no_value = current.is_none_or(<[u8]>::is_empty);
                no_value == (*op != CompareOp::NotEqual)
            }
            Condition::Value(op, given) => current.is_some_and(|stored| op.test(stored, given)),
            Condition::Filter(_) => false,
        }
    }
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
    /// Passes when `stored op value` (an empty `value` means "no value": see [`Condition`]).
    pub fn if_value(mut self, op: CompareOp, value: impl AsRef<[u8]>) -> Self {
        self.condition = Condition::Value(op, b(value));
        self
    }
    /// A check of `row` by a filter condition ([`if_matches`](Self::if_matches)); the
    /// column given to [`new`](Self::new) is then not used.
    pub fn for_row(row: impl AsRef<[u8]>) -> Self {
        CheckAndMutate::new(row, "", "")
    }
    /// Passes when the row, read with `filter` inside the region under the row lock, has a
    /// cell: e.g. a SingleColumnValueFilter with filter-if-missing, or a FilterList of them.
    pub fn if_matches(mut self, filter: crate::filter::Filter) -> Self {
        self.condition = Condition::Filter(filter);
        self
    }
    /// Passes when the column has no value, or a zero-length one (HBase's `ifNotExists`).
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
    /// The row checked (and mutated).
    pub fn row(&self) -> &Bytes {
        &self.row
    }
    /// The checked column's family (unused by a filter condition).
    pub fn family(&self) -> &Bytes {
        &self.family
    }
    /// The checked column's qualifier (unused by a filter condition).
    pub fn qualifier(&self) -> &Bytes {
        &self.qualifier
    }
    /// The condition.
    pub fn condition(&self) -> &Condition {
        &self.condition
    }
    /// The mutations applied when the condition passes, if set.
    pub fn action(&self) -> Option<&RowMutations> {
        self.action.as_ref()
    }
}
