//! Read-modify-write operations under the row lock: Increment, Append and CheckAndMutate.

pub use crate::filter::CompareOp;

use super::{b, Delete, Put, RowMutations, TimeRange};
use crate::wal::Durability;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The fields and methods Increment and Append share: the row, the columns with their
/// deltas, the durability, the time range the current values are read in, and the new
/// values' own TTL.
macro_rules! read_modify_write {
    ($(#[$doc:meta])* $name:ident, $delta:ty, $new_doc:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Serialize, Deserialize)]
        pub struct $name {
            pub(crate) row: Bytes,
            pub(crate) columns: Vec<(Bytes, Bytes, $delta)>,
            pub(crate) durability: Durability,
            pub(crate) time_range: TimeRange,
            pub(crate) ttl_ms: Option<u64>,
        }

        impl $name {
            #[doc = $new_doc]
            pub fn new(row: impl AsRef<[u8]>) -> Self {
                $name {
                    row: b(row),
                    columns: Vec::new(),
                    durability: Durability::default(),
                    time_range: TimeRange::ALL,
                    ttl_ms: None,
                }
            }
            /// Sets the durability.
            pub fn durability(mut self, d: Durability) -> Self {
                self.durability = d;
                self
            }
            /// The durability.
            pub fn get_durability(&self) -> Durability {
                self.durability
            }
            /// Reads the current values inside `range` only (HBase's `setTimeRange`): a
            /// column with no version inside it counts as absent. The new value's timestamp
            /// is the server's time (or just above the value read), wherever the range lies.
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
            /// The `(family, qualifier, delta)` of every column, in the order given.
            pub fn columns(&self) -> &[(Bytes, Bytes, $delta)] {
                &self.columns
            }
            /// The columns, for a coprocessor that changes the operation (e.g. an amount).
            pub fn columns_mut(&mut self) -> &mut Vec<(Bytes, Bytes, $delta)> {
                &mut self.columns
            }
        }
    };
}

read_modify_write!(
    /// Adds to 8-byte big-endian counters.
    Increment,
    i64,
    "An increment of `row`."
);

impl Increment {
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
}

read_modify_write!(
    /// Appends bytes to cells.
    Append,
    Bytes,
    "An append to `row`."
);

impl Append {
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
}

/// The condition of a check-and-mutate: on the latest visible value of one column, or a
/// filter over the whole row.
///
/// An empty expected value means "no value", as in HBase (`HRegion#checkAndMutate`,
/// `TestHRegion#testCheckAndMutate_WithEmptyRowValue`): it matches an absent column or a
/// zero-length value, for every operator but `NotEqual`, which matches a column holding a
/// non-empty value. [`Condition::Absent`] is HBase's `ifNotExists`: an absent column or a
/// zero-length value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
