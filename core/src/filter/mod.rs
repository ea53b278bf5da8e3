//! Filters: HBase's filter set, evaluated inside the region scanner, and its filter language.
//!
//! A [`Filter`] is data: a tree of plain values that derives serde, so it can be stored or
//! sent (postcard round-trips it) and built from text by [`Filter::parse`] (HBase's
//! ParseFilter language, see [`parse`]). To run, a filter is compiled into a [`FilterExec`]
//! (regular expressions compiled, per-row and per-scan state added); one `FilterExec` serves
//! one get or one whole scan, across all the regions it visits.
//!
//! Evaluation follows HBase's hooks and order. The region scanner's matcher decides which
//! versions are visible (deletes, versions, TTL, time range, read point) and the filter sees
//! only those, one row at a time:
//!
//! 1. `filter_all_remaining`: true ends the scan (PageFilter's page is full, PrefixFilter or
//!    InclusiveStopFilter passed their last row, WhileMatchFilter saw a mismatch).
//! 2. `reset`, then `filter_row_key`: true drops the row before its cells are read. A filter
//!    that can say where the next row it accepts starts gives a row hint, and the scanner
//!    seeks every family there instead of reading the rows in between (forward scans:
//!    PrefixFilter, FuzzyRowFilter, MultiRowRangeFilter and lists of them; reverse scans:
//!    PrefixFilter and lists of it).
//! 3. `filter_cell` per visible cell in key order (family, qualifier, newest version first)
//!    returns a [`ReturnCode`]; the `*_NEXT_COL`, `*_NEXT_ROW` and `SEEK_NEXT_USING_HINT`
//!    codes make the scanner skip cells the filter would refuse anyway (a hint to a later
//!    column seeks the family's merge within the row, forward). As in HBase, where
//!    each family has its own store scanner, `NEXT_ROW` skips the rest of the row *in the
//!    current family*; later families of the row are still offered.
//! 4. `transform_cell` on each included cell (KeyOnlyFilter drops values).
//! 5. Once the row is assembled and non-empty: `filter_row_cells` (may remove cells), then
//!    `filter_row` (true drops the row; PageFilter counts rows here).
//!
//! Invariant: a hint never skips a cell or row the filter would accept, so a filtered scan
//! with seeks returns exactly what [`Filter::apply`] (the same filter run over the unfiltered
//! rows, with no seeks) returns; the `filters` proptest checks this against the model.
//!
//! Filters nest (`WhileMatch`, `Skip`, `List`) at most [`MAX_FILTER_DEPTH`] levels in what
//! [`Filter::from_bytes`] decodes, [`Filter::to_bytes`] encodes and [`Filter::parse`]
//! parses, so untrusted bytes or text cannot exhaust the stack.

mod codec;
mod compare;
mod exec;
pub mod parse;
mod rows;

pub use compare::{BitOp, Comparator, CompareOp};
pub use exec::{FilterExec, ReturnCode, RowStart};

use crate::cell::{RowResult, Timestamp};
use crate::error::Result;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The deepest nesting of filters (`WhileMatch`, `Skip` and `List` inside one another) that
/// [`Filter::from_bytes`] decodes, [`Filter::to_bytes`] encodes and [`Filter::parse`]
/// parses; a filter without inner filters is 1 level deep ([`Filter::depth`]). Deeper input
/// is refused with a typed error: far beyond any real filter, it keeps hostile input from
/// exhausting the stack.
pub const MAX_FILTER_DEPTH: usize = 64;

/// How a [`Filter::List`] combines its filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListOp {
    /// HBase's MUST_PASS_ALL (`AND`): a cell or row passes when every filter passes it.
    MustPassAll,
    /// HBase's MUST_PASS_ONE (`OR`): a cell or row passes when any filter passes it.
    MustPassOne,
}

/// The condition of a [`Filter::SingleColumnValue`] or [`Filter::SingleColumnValueExclude`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnValueCondition {
    /// The family of the tested column.
    pub family: Bytes,
    /// The qualifier of the tested column.
    pub qualifier: Bytes,
    /// The operator: the row passes when `value op comparator` holds.
    pub op: CompareOp,
    /// What the value is compared with.
    pub comparator: Comparator,
    /// Drop rows that lack the column (default false: such rows pass).
    pub filter_if_missing: bool,
    /// Test only the newest visible version (default true); false passes the row when any
    /// visible version passes.
    pub latest_version_only: bool,
}

impl ColumnValueCondition {
    /// A condition with HBase's defaults: rows without the column pass, only the newest
    /// version is tested.
    pub fn new(
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        op: CompareOp,
        comparator: Comparator,
    ) -> Self {
        ColumnValueCondition {
            family: b(family),
            qualifier: b(qualifier),
            op,
            comparator,
            filter_if_missing: false,
            latest_version_only: true,
        }
    }

    /// Sets filter-if-missing.
    pub fn filter_if_missing(mut self, on: bool) -> Self {
        self.filter_if_missing = on;
        self
    }

    /// Sets latest-version-only.
    pub fn latest_version_only(mut self, on: bool) -> Self {
        self.latest_version_only = on;
        self
    }
}

/// One range of a [`Filter::MultiRowRange`]; an empty `stop` means no upper bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowRangeSpec {
    /// First row (empty: from the first row).
    pub start: Bytes,
    /// Whether `start` itself is inside.
    pub start_inclusive: bool,
    /// Last row (empty: to the last row).
    pub stop: Bytes,
    /// Whether `stop` itself is inside.
    pub stop_inclusive: bool,
}

impl RowRangeSpec {
    /// `[start, stop)`, HBase's default inclusiveness.
    pub fn new(start: impl AsRef<[u8]>, stop: impl AsRef<[u8]>) -> Self {
        RowRangeSpec {
            start: b(start),
            start_inclusive: true,
            stop: b(stop),
            stop_inclusive: false,
        }
    }
}

/// A filter: which rows and cells a get or scan returns. See the module doc for how it is
/// evaluated; each variant names the HBase filter it mirrors.
///
/// Every field through which a filter holds other filters decodes through `codec`, which
/// bounds the nesting ([`MAX_FILTER_DEPTH`]); a new such field must too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Filter {
    /// PrefixFilter: rows whose key starts with the prefix.
    Prefix(Bytes),
    /// RowFilter: rows whose key satisfies `row op comparator`.
    Row(CompareOp, Comparator),
    /// FamilyFilter: cells whose family satisfies `family op comparator`.
    Family(CompareOp, Comparator),
    /// QualifierFilter: cells whose qualifier satisfies `qualifier op comparator`.
    Qualifier(CompareOp, Comparator),
    /// ValueFilter: cells whose value satisfies `value op comparator`.
    Value(CompareOp, Comparator),
    /// ColumnPrefixFilter: cells whose qualifier starts with the prefix.
    ColumnPrefix(Bytes),
    /// MultipleColumnPrefixFilter: cells whose qualifier starts with any of the prefixes.
    MultipleColumnPrefix(#[serde(deserialize_with = "codec::capped_vec")] Vec<Bytes>),
    /// ColumnRangeFilter: cells whose qualifier lies in the range (`None`: unbounded).
    ColumnRange {
        /// Lower bound.
        min: Option<Bytes>,
        /// Whether `min` itself is inside.
        min_inclusive: bool,
        /// Upper bound.
        max: Option<Bytes>,
        /// Whether `max` itself is inside.
        max_inclusive: bool,
    },
    /// ColumnCountGetFilter: the first `n` columns of a row (newest version each).
    ColumnCountGet(u32),
    /// ColumnPaginationFilter: `limit` columns per row (newest version each), starting after
    /// `offset` columns, or at the first qualifier `>= column_offset` when that is set.
    ColumnPagination {
        /// Columns returned per row.
        limit: u32,
        /// Columns skipped first (ignored when `column_offset` is set).
        offset: u32,
        /// Start at this qualifier instead of counting an offset.
        column_offset: Option<Bytes>,
    },
    /// SingleColumnValueFilter: whole rows, kept or dropped by one column's value.
    SingleColumnValue(ColumnValueCondition),
    /// SingleColumnValueExcludeFilter: as SingleColumnValue, without the tested column.
    SingleColumnValueExclude(ColumnValueCondition),
    /// DependentColumnFilter: the cells whose timestamp is one of the reference column's
    /// (visible, and passing the optional value condition) timestamps.
    DependentColumn {
        /// The reference column's family.
        family: Bytes,
        /// The reference column's qualifier.
        qualifier: Bytes,
        /// Leave the reference column itself out of the result.
        drop_dependent_column: bool,
        /// Only reference versions whose value satisfies this count.
        condition: Option<(CompareOp, Comparator)>,
    },
    /// KeyOnlyFilter: every cell with its value dropped (or replaced by its length as a
    /// 4-byte big-endian number when `len_as_value`).
    KeyOnly {
        /// Replace values by their length.
        len_as_value: bool,
    },
    /// FirstKeyOnlyFilter: the first cell of each row.
    FirstKeyOnly,
    /// InclusiveStopFilter: rows up to and including this row (forward; down to it in
    /// reverse), then the scan ends.
    InclusiveStop(Bytes),
    /// PageFilter: at most this many rows in the whole scan.
    Page(u64),
    /// TimestampsFilter: the versions with exactly these timestamps.
    Timestamps(#[serde(deserialize_with = "codec::capped_vec")] Vec<Timestamp>),
    /// RandomRowFilter: each row with probability `chance`, decided by a hash of the seed and
    /// the row key, so the same seed picks the same rows every time.
    RandomRow {
        /// Probability in `[0, 1]` (below 0: no row; above 1: every row).
        chance: f32,
        /// The seed.
        seed: u64,
    },
    /// WhileMatchFilter: rows while the inner filter accepts everything; the first row in
    /// which it refuses a row key, a cell or the row ends the scan (that row is dropped).
    WhileMatch(#[serde(deserialize_with = "codec::nested_box")] Box<Filter>),
    /// SkipFilter: rows in which the inner filter accepts every cell; a row with any refused
    /// cell is dropped whole.
    Skip(#[serde(deserialize_with = "codec::nested_box")] Box<Filter>),
    /// FuzzyRowFilter: rows matching any `(key, mask)` pair: the row is at least as long as
    /// the key and equals it at every position whose mask byte is 0 (1: any byte).
    FuzzyRow(#[serde(deserialize_with = "codec::capped_vec")] Vec<(Bytes, Bytes)>),
    /// MultiRowRangeFilter: rows inside any of the ranges.
    MultiRowRange(#[serde(deserialize_with = "codec::capped_vec")] Vec<RowRangeSpec>),
    /// FilterList: the filters combined with AND (MUST_PASS_ALL) or OR (MUST_PASS_ONE).
    List(
        ListOp,
        #[serde(deserialize_with = "codec::nested_list")] Vec<Filter>,
    ),
}

/// Copies caller bytes.
pub(crate) fn b(x: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(x.as_ref())
}

impl Filter {
    /// Parses HBase's filter language, e.g. `"PrefixFilter ('row') AND PageFilter (10)"`; an
    /// error gives the byte position of the problem ([`crate::Error::FilterParse`]).
    pub fn parse(text: &str) -> Result<Filter> {
        parse::parse(text)
    }

    /// PrefixFilter.
    pub fn prefix(p: impl AsRef<[u8]>) -> Self {
        Filter::Prefix(b(p))
    }

    /// ColumnPrefixFilter.
    pub fn column_prefix(p: impl AsRef<[u8]>) -> Self {
        Filter::ColumnPrefix(b(p))
    }

    /// InclusiveStopFilter.
    pub fn inclusive_stop(row: impl AsRef<[u8]>) -> Self {
        Filter::InclusiveStop(b(row))
    }

    /// FuzzyRowFilter from `(key, mask)` pairs (mask byte 0: fixed, 1: any).
    pub fn fuzzy_row<K: AsRef<[u8]>, M: AsRef<[u8]>>(
        pairs: impl IntoIterator<Item = (K, M)>,
    ) -> Self {
        Filter::FuzzyRow(pairs.into_iter().map(|(k, m)| (b(k), b(m))).collect())
    }

    /// MUST_PASS_ALL of the filters.
    pub fn all(filters: impl IntoIterator<Item = Filter>) -> Self {
        Filter::List(ListOp::MustPassAll, filters.into_iter().collect())
    }

    /// MUST_PASS_ONE of the filters.
    pub fn any(filters: impl IntoIterator<Item = Filter>) -> Self {
        Filter::List(ListOp::MustPassOne, filters.into_iter().collect())
    }

    /// Compiles the filter for one get or scan; fails on a bad regular expression or bad
    /// arguments (a fuzzy mask longer than its key, ...).
    pub fn compile(&self, reverse: bool) -> Result<FilterExec> {
        FilterExec::new(self, reverse)
    }

    /// Runs the filter over already-read rows (in scan order), without seeks: what a
    /// filtered scan over the same rows returns. Tests compare engine scans with this; it is
    /// also a client-side filter.
    pub fn apply(
        &self,
        rows: impl IntoIterator<Item = RowResult>,
        reverse: bool,
    ) -> Result<Vec<RowResult>> {
        self.apply_versions(rows, reverse, u32::MAX)
    }

    /// [`Filter::apply`] keeping at most `versions` included cells per column: what a read
    /// with that max versions returns when `rows` hold every version the family keeps (the
    /// filter sees them all, the cap counts what it includes, as in HBase).
    pub fn apply_versions(
        &self,
        rows: impl IntoIterator<Item = RowResult>,
        reverse: bool,
        versions: u32,
    ) -> Result<Vec<RowResult>> {
        let mut exec = self.compile(reverse)?;
        exec.set_max_versions(versions);
        let mut out = Vec::new();
        for r in rows {
            match exec.begin_row(&r.row) {
                RowStart::Done => break,
                RowStart::Skip(_) => continue,
                RowStart::Read => {}
            }
            let mut cells = Vec::with_capacity(r.cells.len());
            for c in r.cells {
                exec.offer(c, &mut cells);
            }
            if exec.end_row(&mut cells) {
                out.push(RowResult { row: r.row, cells });
            }
        }
        Ok(out)
    }

    /// How deeply filters nest in this one: 1 for a filter without inner filters, one more
    /// per `WhileMatch`, `Skip` or `List` around the deepest. Computed without recursion.
    pub fn depth(&self) -> usize {
        codec::depth(self)
    }

    /// The filter as postcard bytes. A filter nested deeper than [`MAX_FILTER_DEPTH`] is
    /// refused with [`crate::Error::BadArgument`] ([`Filter::from_bytes`] would refuse it).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        codec::encode(self)
    }

    /// A filter from postcard bytes, which may come from anywhere: malformed bytes, filters
    /// nested deeper than [`MAX_FILTER_DEPTH`] and lengths longer than the input give
    /// [`crate::Error::BadArgument`], never a panic; a length read from the input reserves
    /// at most a few elements ahead of the bytes that back them. Everything
    /// [`Filter::to_bytes`] encodes decodes back.
    pub fn from_bytes(bytes: &[u8]) -> Result<Filter> {
        codec::decode(bytes)
    }
}
