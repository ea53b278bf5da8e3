//! Running a filter: the compiled filter tree with its per-row and per-scan state, HBase's
//! hooks on each node, and [`FilterExec`], which drives them for one get or scan and turns
//! return codes and hints into "skip cells up to here" and "seek to this row".
//!
//! Invariants: `reset` clears exactly the per-row state (PageFilter's count, PrefixFilter's
//! "passed" and WhileMatchFilter's "done" live for the whole scan); a row hint is always above
//! the row it was computed for and below or at the next row the node's `row_key` can accept;
//! a cell hint is above the cell it was given for.

mod cell_hooks;
mod compile;
mod row_hooks;

use cell_hooks::target;
use compile::compile;

use super::compare::CompareOp;
use super::compare::Compiled;
use super::rows::{FuzzyRule, Range};
use super::Filter;
#[cfg(test)]
use crate::cell::CellType;
use crate::cell::{Cell, Timestamp};
use crate::error::Result;
use crate::keys::row_successor;
use bytes::Bytes;

/// What a filter says about one cell (HBase's `Filter.ReturnCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReturnCode {
    /// Include the cell.
    Include,
    /// Include the cell and skip the other versions of its column.
    IncludeAndNextCol,
    /// Include the cell and skip the rest of the row in this family.
    IncludeAndSeekNextRow,
    /// Leave the cell out.
    Skip,
    /// Leave the cell out and skip the other versions of its column.
    NextCol,
    /// Leave the cell out and skip the rest of the row in this family.
    NextRow,
    /// Leave the cell out and skip to the filter's hint.
    SeekNextUsingHint,
}

impl ReturnCode {
    /// True for the three `Include*` codes.
    pub fn includes(self) -> bool {
        matches!(
            self,
            ReturnCode::Include | ReturnCode::IncludeAndNextCol | ReturnCode::IncludeAndSeekNextRow
        )
    }
}

/// A position to skip to: the first cell at or after `(row, family, qualifier)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CellHint {
    row: Bytes,
    family: Bytes,
    qualifier: Bytes,
}

impl CellHint {
    fn at(c: &Cell, qualifier: Bytes) -> Self {
        CellHint {
            row: c.row.clone(),
            family: c.family.clone(),
            qualifier,
        }
    }
    fn next_col(c: &Cell) -> Self {
        CellHint::at(c, row_successor(&c.qualifier))
    }
    fn next_family(c: &Cell) -> Self {
        CellHint {
            row: c.row.clone(),
            family: row_successor(&c.family),
            qualifier: Bytes::new(),
        }
    }
    fn next_row(c: &Cell) -> Self {
        CellHint {
            row: row_successor(&c.row),
            family: Bytes::new(),
            qualifier: Bytes::new(),
        }
    }
}

/// The compiled filter tree.
#[derive(Debug, Clone)]
enum Node {
    Prefix {
        prefix: Bytes,
        reverse: bool,
        passed: bool,
    },
    Row(CompareOp, Compiled),
    Family(CompareOp, Compiled),
    Qualifier(CompareOp, Compiled),
    Value(CompareOp, Compiled),
    ColumnPrefix(Bytes),
    MultiColumnPrefix(Vec<Bytes>),
    ColumnRange {
        min: Option<Bytes>,
        min_inclusive: bool,
        max: Option<Bytes>,
        max_inclusive: bool,
    },
    ColumnCountGet {
        limit: u32,
        count: u32,
    },
    ColumnPagination {
        limit: u32,
        offset: u32,
        column_offset: Option<Bytes>,
        count: u32,
    },
    ColumnValue(Box<ColumnValue>),
    Dependent(Box<Dependent>),
    KeyOnly(bool),
    FirstKeyOnly {
        found: bool,
    },
    InclusiveStop {
        stop: Bytes,
        reverse: bool,
        done: bool,
    },
    Page {
        size: u64,
        accepted: u64,
    },
    Timestamps(Vec<Timestamp>),
    RandomRow {
        chance: f32,
        seed: u64,
    },
    WhileMatch {
        inner: Box<Node>,
        done: bool,
    },
    Skip {
        inner: Box<Node>,
        out: bool,
    },
    Fuzzy(Vec<FuzzyRule>),
    MultiRange {
        ranges: Vec<Range>,
        reverse: bool,
        done: bool,
    },
    List(Box<List>),
}

#[derive(Debug, Clone)]
struct ColumnValue {
    family: Bytes,
    qualifier: Bytes,
    op: CompareOp,
    cmp: Compiled,
    filter_if_missing: bool,
    latest_only: bool,
    exclude: bool,
    found: bool,
    matched: bool,
}

#[derive(Debug, Clone)]
struct Dependent {
    family: Bytes,
    qualifier: Bytes,
    drop: bool,
    cond: Option<(CompareOp, Compiled)>,
    stamps: Vec<Timestamp>,
}

#[derive(Debug, Clone)]
struct List {
    all: bool,
    kids: Vec<Node>,
    /// MUST_PASS_ONE: the kids that refused this row's key.
    row_out: Vec<bool>,
    /// MUST_PASS_ONE: the kids that included the last cell.
    included: Vec<bool>,
    /// The hint of the last `SeekNextUsingHint`.
    hint: Option<CellHint>,
}

/// How a row starts, as [`FilterExec::begin_row`] decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowStart {
    /// Read the row's cells and offer them.
    Read,
    /// Drop the row without reading it, and skip to the given row: in a forward scan no row
    /// before it can pass, in a reverse scan no row from it up to this one (the scan goes on
    /// below it).
    Skip(Option<Bytes>),
    /// No later row can pass: end the scan.
    Done,
}

/// A filter compiled for one get or scan, with its state. Feed it rows in scan order:
/// [`begin_row`](Self::begin_row), then [`offer`](Self::offer) each visible cell, then
/// [`end_row`](Self::end_row).
#[derive(Debug, Clone)]
pub struct FilterExec {
    root: Node,
    reverse: bool,
    /// Cells of the current row before `(family, qualifier)` are skipped.
    skip_to: Option<(Bytes, Bytes)>,
    /// The rest of the current row is skipped.
    skip_row: bool,
    /// After the current row, seek to this row (forward scans).
    seek_row: Option<Bytes>,
    /// A later column of the current family the scanner may seek to (a hint's target).
    column_seek: Option<Bytes>,
    /// Whether `begin_row` may run before the row's cells are read (see
    /// [`row_key_first`](Self::row_key_first)).
    row_key_first: bool,
    /// The read's max versions: included cells kept per column, after the filter.
    versions: u32,
    /// The column whose included cells `included` counts, in the current row.
    counting: Option<(Bytes, Bytes)>,
    /// Cells of `counting` the filter included so far.
    included: u32,
}

/// True when `f` holds a WhileMatchFilter, whose verdict on a row key ends the scan: such a
/// filter must see only rows that have visible cells.
fn has_while(f: &Filter) -> bool {
    match f {
        Filter::WhileMatch(_) => true,
        Filter::Skip(inner) => has_while(inner),
        Filter::List(_, fs) => fs.iter().any(has_while),
        _ => false,
    }
}

impl FilterExec {
    /// Compiles `filter` for a scan in the given direction.
    pub fn new(filter: &Filter, reverse: bool) -> Result<Self> {
        Ok(FilterExec {
            root: compile(filter, reverse)?,
            reverse,
            skip_to: None,
            skip_row: false,
            seek_row: None,
            column_seek: None,
            row_key_first: !has_while(filter),
            versions: u32::MAX,
            counting: None,
            included: 0,
        })
    }

    /// Caps the cells kept per column at the read's max versions, counting only the cells
    /// the filter includes (HBase's `versionsAfterFilter`, HBASE-17125): the scanner then
    /// offers every version the family keeps, so a filter can match an older version.
    pub fn set_max_versions(&mut self, versions: u32) {
        self.versions = versions;
    }

    /// True when the scanner may call [`begin_row`](Self::begin_row) before reading the
    /// row's cells, and so skip a refused row unread. False when a row key's verdict changes
    /// the filter's state for good (WhileMatchFilter): then `begin_row` must wait until the
    /// row is known to have a visible cell, as the rows a filter is defined over are the rows
    /// a reader sees (a row holding only deleted cells is not one).
    pub fn row_key_first(&self) -> bool {
        self.row_key_first
    }

    /// Starts a row: `filter_all_remaining`, `reset`, `filter_row_key` and the row hint.
    pub fn begin_row(&mut self, row: &[u8]) -> RowStart {
        self.root.reset();
        self.skip_to = None;
        self.skip_row = false;
        self.seek_row = None;
        self.column_seek = None;
        self.counting = None;
        self.included = 0;
        if self.root.all_remaining() {
            return RowStart::Done;
        }
        if self.root.row_key(row) {
            if self.root.all_remaining() {
                return RowStart::Done;
            }
            // A WhileMatchFilter must see every row with visible cells (the first it refuses
            // ends the scan), so no row is skipped unread past it.
            let hint = if !self.row_key_first {
                None
            } else if self.reverse {
                self.root.row_hint_rev(row).filter(|h| h.as_ref() <= row)
            } else {
                self.root.row_hint(row).filter(|h| h.as_ref() > row)
            };
            return RowStart::Skip(hint);
        }
        RowStart::Read
    }

    /// Offers the row's next visible cell (rows' cells in key order); pushes it, transformed,
    /// onto `out` when the filter includes it.
    pub fn offer(&mut self, c: Cell, out: &mut Vec<Cell>) {
        if self.skip_row {
            return;
        }
        if let Some((f, q)) = &self.skip_to {
            if (c.family.as_ref(), c.qualifier.as_ref()) < (f.as_ref(), q.as_ref()) {
                return;
            }
            self.skip_to = None;
        }
        let rc = self.root.cell(&c);
        if let Some(t) = target(&self.root, rc, &c) {
            if t.row > c.row {
                self.skip_row = true;
                if !self.reverse && self.row_key_first {
                    self.seek_row = Some(t.row);
                }
            } else if t.row == c.row {
                // A hint to a later column of the family is worth a seek of the family's
                // merge; shorter skips (the other versions of a column) are cheaper stepped.
                // Never from the empty qualifier: the family's delete markers share it and
                // sort after its newer puts, and the matcher must still see them.
                if rc == ReturnCode::SeekNextUsingHint
                    && t.family == c.family
                    && !c.qualifier.is_empty()
                {
                    self.column_seek = Some(t.qualifier.clone());
                }
                self.skip_to = Some((t.family, t.qualifier));
            }
        }
        if rc.includes() {
            let same = self
                .counting
                .as_ref()
                .is_some_and(|(f, q)| *f == c.family && *q == c.qualifier);
            if !same {
                self.counting = Some((c.family.clone(), c.qualifier.clone()));
                self.included = 0;
            }
            self.included += 1;
            if self.included > self.versions {
                // The column has its versions: skip the rest of it.
                if !self.skip_row {
                    let t = CellHint::next_col(&c);
                    self.skip_to = Some((t.family, t.qualifier));
                }
                return;
            }
            out.push(self.root.transform(c));
        }
    }

    /// Ends the row: `filter_row_cells` and `filter_row` on a non-empty row. True keeps it.
    pub fn end_row(&mut self, cells: &mut Vec<Cell>) -> bool {
        if cells.is_empty() {
            return false;
        }
        self.root.row_cells(cells);
        if cells.is_empty() {
            return false;
        }
        !self.root.row()
    }

    /// The later column of the current cell's family that the scanner may seek the family's
    /// merge to: every cell before it in the family is skipped anyway.
    pub fn take_column_seek(&mut self) -> Option<Bytes> {
        self.column_seek.take()
    }

    /// The row the scanner should seek to after the current one, if a cell hint pointed
    /// past the row.
    pub fn take_seek(&mut self) -> Option<Bytes> {
        self.seek_row.take()
    }
}

#[cfg(test)]
mod tests;
