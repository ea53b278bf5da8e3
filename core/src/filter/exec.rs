//! Running a filter: the compiled filter tree with its per-row and per-scan state, HBase's
//! hooks on each node, and [`FilterExec`], which drives them for one get or scan and turns
//! return codes and hints into "skip cells up to here" and "seek to this row".
//!
//! Invariants: `reset` clears exactly the per-row state (PageFilter's count, PrefixFilter's
//! "passed" and WhileMatchFilter's "done" live for the whole scan); a row hint is always above
//! the row it was computed for and below or at the next row the node's `row_key` can accept;
//! a cell hint is above the cell it was given for.

use super::compare::CompareOp;
use super::compare::Compiled;
use super::rows::{next_range_start, past_all, sort_ranges, FuzzyRule, Range};
use super::{Filter, ListOp};
#[cfg(test)]
use crate::cell::CellType;
use crate::cell::{Cell, Timestamp};
use crate::error::{Error, Result};
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

fn compile(f: &Filter, reverse: bool) -> Result<Node> {
    Ok(match f {
        Filter::Prefix(p) => Node::Prefix {
            prefix: p.clone(),
            reverse,
            passed: false,
        },
        Filter::Row(op, c) => Node::Row(*op, Compiled::new(c)?),
        Filter::Family(op, c) => Node::Family(*op, Compiled::new(c)?),
        Filter::Qualifier(op, c) => Node::Qualifier(*op, Compiled::new(c)?),
        Filter::Value(op, c) => Node::Value(*op, Compiled::new(c)?),
        Filter::ColumnPrefix(p) => Node::ColumnPrefix(p.clone()),
        Filter::MultipleColumnPrefix(ps) => {
            let mut ps = ps.clone();
            ps.sort();
            ps.dedup();
            Node::MultiColumnPrefix(ps)
        }
        Filter::ColumnRange {
            min,
            min_inclusive,
            max,
            max_inclusive,
        } => Node::ColumnRange {
            min: min.clone().filter(|m| !m.is_empty() || !*min_inclusive),
            min_inclusive: *min_inclusive,
            max: max.clone(),
            max_inclusive: *max_inclusive,
        },
        Filter::ColumnCountGet(n) => Node::ColumnCountGet {
            limit: *n,
            count: 0,
        },
        Filter::ColumnPagination {
            limit,
            offset,
            column_offset,
        } => Node::ColumnPagination {
            limit: *limit,
            offset: *offset,
            column_offset: column_offset.clone(),
            count: 0,
        },
        Filter::SingleColumnValue(c) | Filter::SingleColumnValueExclude(c) => {
            Node::ColumnValue(Box::new(ColumnValue {
                family: c.family.clone(),
                qualifier: c.qualifier.clone(),
                op: c.op,
                cmp: Compiled::new(&c.comparator)?,
                filter_if_missing: c.filter_if_missing,
                latest_only: c.latest_version_only,
                exclude: matches!(f, Filter::SingleColumnValueExclude(_)),
                found: false,
                matched: false,
            }))
        }
        Filter::DependentColumn {
            family,
            qualifier,
            drop_dependent_column,
            condition,
        } => Node::Dependent(Box::new(Dependent {
            family: family.clone(),
            qualifier: qualifier.clone(),
            drop: *drop_dependent_column,
            cond: match condition {
                Some((op, c)) => Some((*op, Compiled::new(c)?)),
                None => None,
            },
            stamps: Vec::new(),
        })),
        Filter::KeyOnly { len_as_value } => Node::KeyOnly(*len_as_value),
        Filter::FirstKeyOnly => Node::FirstKeyOnly { found: false },
        Filter::InclusiveStop(s) => Node::InclusiveStop {
            stop: s.clone(),
            reverse,
            done: false,
        },
        Filter::Page(n) => Node::Page {
            size: *n,
            accepted: 0,
        },
        Filter::Timestamps(ts) => {
            let mut ts = ts.clone();
            ts.sort_unstable();
            ts.dedup();
            Node::Timestamps(ts)
        }
        Filter::RandomRow { chance, seed } => Node::RandomRow {
            chance: *chance,
            seed: *seed,
        },
        Filter::WhileMatch(inner) => Node::WhileMatch {
            inner: Box::new(compile(inner, reverse)?),
            done: false,
        },
        Filter::Skip(inner) => Node::Skip {
            inner: Box::new(compile(inner, reverse)?),
            out: false,
        },
        Filter::FuzzyRow(pairs) => {
            let mut rules = Vec::with_capacity(pairs.len());
            for (key, mask) in pairs {
                if key.len() != mask.len() {
                    return Err(Error::bad_argument(format!(
                        "fuzzy row key of {} bytes has a mask of {} bytes",
                        key.len(),
                        mask.len()
                    )));
                }
                rules.push(FuzzyRule {
                    key: key.to_vec(),
                    fixed: mask.iter().map(|m| *m == 0).collect(),
                });
            }
            Node::Fuzzy(rules)
        }
        Filter::MultiRowRange(specs) => Node::MultiRange {
            ranges: sort_ranges(specs),
            reverse,
            done: false,
        },
        Filter::List(op, fs) => {
            let kids = fs
                .iter()
                .map(|f| compile(f, reverse))
                .collect::<Result<Vec<_>>>()?;
            Node::List(Box::new(List {
                all: *op == ListOp::MustPassAll,
                row_out: vec![false; kids.len()],
                included: vec![false; kids.len()],
                kids,
                hint: None,
            }))
        }
    })
}

/// Where the return code `rc` of `node` for cell `c` lets the scanner skip to (`None`: the
/// next cell).
fn target(node: &Node, rc: ReturnCode, c: &Cell) -> Option<CellHint> {
    match rc {
        ReturnCode::Include | ReturnCode::Skip => None,
        ReturnCode::IncludeAndNextCol | ReturnCode::NextCol => Some(CellHint::next_col(c)),
        ReturnCode::IncludeAndSeekNextRow | ReturnCode::NextRow => Some(CellHint::next_family(c)),
        ReturnCode::SeekNextUsingHint => node.hint(c),
    }
}

/// The return code that includes (or not) the cell and skips at most to `t`.
fn code_for(
    include: bool,
    t: Option<CellHint>,
    c: &Cell,
    hint: &mut Option<CellHint>,
) -> ReturnCode {
    let Some(t) = t else {
        return if include {
            ReturnCode::Include
        } else {
            ReturnCode::Skip
        };
    };
    if include {
        if t >= CellHint::next_family(c) {
            ReturnCode::IncludeAndSeekNextRow
        } else if t >= CellHint::next_col(c) {
            ReturnCode::IncludeAndNextCol
        } else {
            ReturnCode::Include
        }
    } else {
        *hint = Some(t);
        ReturnCode::SeekNextUsingHint
    }
}

fn random_accepts(seed: u64, row: &[u8], chance: f32) -> bool {
    let h = xxhash_rust::xxh3::xxh3_64_with_seed(row, seed);
    ((h >> 11) as f64 / (1u64 << 53) as f64) < f64::from(chance)
}

impl Node {
    fn reset(&mut self) {
        match self {
            Node::ColumnCountGet { count, .. } | Node::ColumnPagination { count, .. } => *count = 0,
            Node::ColumnValue(v) => {
                v.found = false;
                v.matched = false;
            }
            Node::Dependent(d) => d.stamps.clear(),
            Node::FirstKeyOnly { found } => *found = false,
            Node::WhileMatch { inner, .. } => inner.reset(),
            Node::Skip { inner, out } => {
                inner.reset();
                *out = false;
            }
            Node::List(l) => {
                l.kids.iter_mut().for_each(Node::reset);
                l.row_out.iter_mut().for_each(|b| *b = false);
                l.included.iter_mut().for_each(|b| *b = false);
                l.hint = None;
            }
            _ => {}
        }
    }

    fn all_remaining(&self) -> bool {
        match self {
            Node::Prefix { passed, .. } => *passed,
            Node::InclusiveStop { done, .. } | Node::MultiRange { done, .. } => *done,
            Node::Page { size, accepted } => accepted >= size,
            Node::ColumnCountGet { limit, count } => count > limit,
            Node::WhileMatch { inner, done } => *done || inner.all_remaining(),
            // SkipFilter passes only per-cell calls and transforms to the filter it wraps.
            Node::Skip { .. } => false,
            Node::List(l) if l.all => l.kids.iter().any(Node::all_remaining),
            Node::List(l) => !l.kids.is_empty() && l.kids.iter().all(Node::all_remaining),
            _ => false,
        }
    }

    /// True drops the row.
    fn row_key(&mut self, row: &[u8]) -> bool {
        match self {
            Node::Prefix {
                prefix,
                reverse,
                passed,
            } => {
                if row.starts_with(prefix) {
                    return false;
                }
                if (!*reverse && row > prefix.as_ref()) || (*reverse && row < prefix.as_ref()) {
                    *passed = true;
                }
                true
            }
            Node::Row(op, c) => !c.test(*op, row),
            Node::InclusiveStop {
                stop,
                reverse,
                done,
            } => {
                let past = if *reverse {
                    row < stop.as_ref()
                } else {
                    row > stop.as_ref()
                };
                if past {
                    *done = true;
                }
                past
            }
            Node::RandomRow { chance, seed } => !random_accepts(*seed, row, *chance),
            Node::Fuzzy(rules) => !rules.iter().any(|r| r.matches(row)),
            Node::MultiRange {
                ranges,
                reverse,
                done,
            } => {
                if ranges.iter().any(|r| r.contains(row)) {
                    return false;
                }
                if past_all(ranges, row, *reverse) {
                    *done = true;
                }
                true
            }
            Node::WhileMatch { inner, done } => {
                let r = inner.row_key(row);
                if r {
                    *done = true;
                }
                r
            }
            Node::Skip { .. } => false,
            Node::List(l) if l.all => {
                // Every member sees the row key, as HBase's MUST_PASS_ALL asks them all:
                // PrefixFilter, InclusiveStopFilter, MultiRowRangeFilter and WhileMatchFilter
                // learn there that the scan passed them.
                let mut refused = false;
                for k in l.kids.iter_mut() {
                    if k.all_remaining() || k.row_key(row) {
                        refused = true;
                    }
                }
                refused
            }
            Node::List(l) => {
                for (k, out) in l.kids.iter_mut().zip(l.row_out.iter_mut()) {
                    *out = k.all_remaining() || k.row_key(row);
                }
                !l.row_out.is_empty() && l.row_out.iter().all(|o| *o)
            }
            _ => false,
        }
    }

    /// A row above `row` below which `row_key` accepts no row (forward scans).
    fn row_hint(&self, row: &[u8]) -> Option<Bytes> {
        match self {
            Node::Prefix {
                prefix,
                reverse: false,
                ..
            } if row < prefix.as_ref() => Some(prefix.clone()),
            Node::Fuzzy(rules) if !rules.iter().any(|r| r.matches(row)) => rules
                .iter()
                .filter_map(|r| r.next_after(row))
                .min()
                .map(Bytes::from),
            Node::MultiRange {
                ranges,
                reverse: false,
                ..
            } if !ranges.iter().any(|r| r.contains(row)) => next_range_start(ranges, row),

            Node::List(l) if l.all => l.kids.iter().filter_map(|k| k.row_hint(row)).max(),
            Node::List(l) => {
                let mut best: Option<Bytes> = None;
                for k in l.kids.iter().filter(|k| !k.all_remaining()) {
                    let h = k.row_hint(row)?;
                    best = Some(best.map_or(h.clone(), |b| b.min(h)));
                }
                best
            }
            _ => None,
        }
    }

    /// Reverse scans: a row at or below `row` such that `row_key` accepts no row from it up
    /// to `row`; the scanner seeks below it.
    fn row_hint_rev(&self, row: &[u8]) -> Option<Bytes> {
        match self {
            Node::Prefix {
                prefix,
                reverse: true,
                ..
            } if row > prefix.as_ref() && !row.starts_with(prefix) => {
                crate::keys::prefix_successor(prefix)
            }

            Node::List(l) if l.all => l.kids.iter().filter_map(|k| k.row_hint_rev(row)).min(),
            Node::List(l) => {
                let mut best: Option<Bytes> = None;
                for k in l.kids.iter().filter(|k| !k.all_remaining()) {
                    let h = k.row_hint_rev(row)?;
                    best = Some(best.map_or(h.clone(), |b| b.max(h)));
                }
                best
            }
            _ => None,
        }
    }

    fn cell(&mut self, c: &Cell) -> ReturnCode {
        use ReturnCode::*;
        match self {
            Node::Family(op, cmp) => {
                if cmp.test(*op, &c.family) {
                    Include
                } else {
                    NextRow
                }
            }
            Node::Qualifier(op, cmp) => {
                if cmp.test(*op, &c.qualifier) {
                    Include
                } else {
                    NextCol
                }
            }
            Node::Value(op, cmp) => {
                if cmp.test(*op, &c.value) {
                    Include
                } else {
                    Skip
                }
            }
            Node::ColumnPrefix(p) => {
                if c.qualifier.starts_with(p) {
                    Include
                } else if c.qualifier.as_ref() < p.as_ref() {
                    SeekNextUsingHint
                } else {
                    NextRow
                }
            }
            Node::MultiColumnPrefix(ps) => {
                if ps.iter().any(|p| c.qualifier.starts_with(p)) {
                    Include
                } else if ps.iter().any(|p| p.as_ref() > c.qualifier.as_ref()) {
                    SeekNextUsingHint
                } else {
                    NextRow
                }
            }
            Node::ColumnRange {
                min,
                min_inclusive,
                max,
                max_inclusive,
            } => {
                let q = c.qualifier.as_ref();
                if let Some(m) = min {
                    if q < m.as_ref() {
                        return SeekNextUsingHint;
                    }
                    if q == m.as_ref() && !*min_inclusive {
                        return NextCol;
                    }
                }
                if let Some(m) = max {
                    if q > m.as_ref() || (q == m.as_ref() && !*max_inclusive) {
                        return NextRow;
                    }
                }
                Include
            }
            Node::ColumnCountGet { limit, count } => {
                *count += 1;
                if *count > *limit {
                    NextCol
                } else {
                    IncludeAndNextCol
                }
            }
            Node::ColumnPagination {
                limit,
                offset,
                column_offset,
                count,
            } => {
                if let Some(co) = column_offset {
                    if *count >= *limit {
                        return NextRow;
                    }
                    if *count == 0 && c.qualifier.as_ref() < co.as_ref() {
                        return SeekNextUsingHint;
                    }
                    *count += 1;
                    return IncludeAndNextCol;
                }
                if u64::from(*count) >= u64::from(*offset) + u64::from(*limit) {
                    return NextRow;
                }
                let rc = if *count < *offset {
                    NextCol
                } else {
                    IncludeAndNextCol
                };
                *count += 1;
                rc
            }
            Node::ColumnValue(v) => {
                if v.matched {
                    return Include;
                }
                if v.latest_only && v.found {
                    return NextRow;
                }
                if c.family != v.family || c.qualifier != v.qualifier {
                    return Include;
                }
                v.found = true;
                if !v.cmp.test(v.op, &c.value) {
                    return if v.latest_only { NextRow } else { Include };
                }
                v.matched = true;
                Include
            }
            Node::Dependent(d) => {
                if c.family != d.family || c.qualifier != d.qualifier {
                    return Include;
                }
                if let Some((op, cmp)) = &d.cond {
                    if !cmp.test(*op, &c.value) {
                        return Skip;
                    }
                }
                d.stamps.push(c.timestamp);
                if d.drop {
                    Skip
                } else {
                    Include
                }
            }
            Node::FirstKeyOnly { found } => {
                if *found {
                    return NextRow;
                }
                *found = true;
                Include
            }
            Node::Timestamps(ts) => {
                if ts.binary_search(&c.timestamp).is_ok() {
                    Include
                } else if ts.first().is_none_or(|m| c.timestamp < *m) {
                    NextCol
                } else {
                    Skip
                }
            }
            Node::WhileMatch { inner, done } => {
                let rc = inner.cell(c);
                if rc != Include {
                    *done = true;
                }
                rc
            }
            Node::Skip { inner, out } => {
                let rc = inner.cell(c);
                if rc != Include {
                    *out = true;
                }
                rc
            }
            Node::List(l) => l.cell(c),
            _ => Include,
        }
    }

    fn hint(&self, c: &Cell) -> Option<CellHint> {
        match self {
            Node::ColumnPrefix(p) => Some(CellHint::at(c, p.clone())),
            Node::MultiColumnPrefix(ps) => ps
                .iter()
                .find(|p| p.as_ref() > c.qualifier.as_ref())
                .map(|p| CellHint::at(c, p.clone())),
            Node::ColumnRange { min, .. } => min.clone().map(|m| CellHint::at(c, m)),
            Node::ColumnPagination { column_offset, .. } => {
                column_offset.clone().map(|m| CellHint::at(c, m))
            }
            Node::WhileMatch { inner, .. } | Node::Skip { inner, .. } => inner.hint(c),
            Node::List(l) => l.hint.clone(),
            _ => None,
        }
        .filter(|h| *h > CellHint::at(c, c.qualifier.clone()))
    }

    fn transform(&self, c: Cell) -> Cell {
        match self {
            Node::KeyOnly(len_as_value) => {
                let value = if *len_as_value {
                    let n = u32::try_from(c.value.len()).unwrap_or(u32::MAX);
                    Bytes::copy_from_slice(&n.to_be_bytes())
                } else {
                    Bytes::new()
                };
                Cell { value, ..c }
            }
            Node::WhileMatch { inner, .. } | Node::Skip { inner, .. } => inner.transform(c),
            Node::List(l) => l
                .kids
                .iter()
                .zip(&l.included)
                .filter(|(_, inc)| l.all || **inc)
                .fold(c, |c, (k, _)| k.transform(c)),
            _ => c,
        }
    }

    fn row_cells(&mut self, cells: &mut Vec<Cell>) {
        match self {
            Node::ColumnValue(v) if v.exclude => {
                cells.retain(|c| c.family != v.family || c.qualifier != v.qualifier)
            }
            Node::Dependent(d) => {
                // Sorted once per row, so a wide row costs cells x log(versions).
                d.stamps.sort_unstable();
                cells.retain(|c| d.stamps.binary_search(&c.timestamp).is_ok())
            }
            Node::WhileMatch { inner, .. } => inner.row_cells(cells),
            Node::List(l) => {
                for (k, out) in l.kids.iter_mut().zip(&l.row_out) {
                    if l.all || !*out {
                        k.row_cells(cells);
                    }
                }
            }
            _ => {}
        }
    }

    /// True drops the assembled row.
    fn row(&mut self) -> bool {
        match self {
            Node::ColumnValue(v) => {
                if v.found {
                    !v.matched
                } else {
                    v.filter_if_missing
                }
            }
            Node::Page { size, accepted } => {
                *accepted += 1;
                *accepted > *size
            }
            Node::Skip { out, .. } => *out,
            Node::WhileMatch { inner, done } => {
                if inner.row() {
                    *done = true;
                }
                *done
            }
            Node::List(l) if l.all => l.kids.iter_mut().any(Node::row),
            Node::List(l) => {
                let mut drop = true;
                for (k, out) in l.kids.iter_mut().zip(&l.row_out) {
                    if !*out && !k.row() {
                        drop = false;
                    }
                }
                drop && !l.kids.is_empty()
            }
            _ => false,
        }
    }
}

impl List {
    fn cell(&mut self, c: &Cell) -> ReturnCode {
        if self.kids.is_empty() {
            return ReturnCode::Include;
        }
        self.hint = None;
        if self.all {
            let mut include = true;
            let mut t: Option<CellHint> = None;
            for k in &mut self.kids {
                if k.all_remaining() {
                    return ReturnCode::NextRow;
                }
                let rc = k.cell(c);
                include &= rc.includes();
                t = t.max(target(k, rc, c));
            }
            let mut hint = None;
            let rc = code_for(include, t, c, &mut hint);
            self.hint = hint;
            rc
        } else {
            let mut include = false;
            // `None` inside: some kid wants the very next cell.
            let mut t: Option<Option<CellHint>> = None;
            for i in 0..self.kids.len() {
                let (k, inc) = (&mut self.kids[i], &mut self.included[i]);
                let kt = if self.row_out[i] || k.all_remaining() {
                    *inc = false;
                    Some(CellHint::next_row(c))
                } else {
                    let rc = k.cell(c);
                    *inc = rc.includes();
                    include |= *inc;
                    target(k, rc, c)
                };
                t = Some(match t {
                    None => kt,
                    Some(prev) => match (prev, kt) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        _ => None,
                    },
                });
            }
            let mut hint = None;
            let rc = code_for(include, t.flatten(), c, &mut hint);
            self.hint = hint;
            rc
        }
    }
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
mod tests {
    use super::*;
    use crate::filter::Comparator;

    fn cell(row: &str, fam: &str, q: &str, ts: u64, v: &str) -> Cell {
        Cell {
            row: Bytes::copy_from_slice(row.as_bytes()),
            family: Bytes::copy_from_slice(fam.as_bytes()),
            qualifier: Bytes::copy_from_slice(q.as_bytes()),
            timestamp: ts,
            kind: CellType::Put,
            value: Bytes::copy_from_slice(v.as_bytes()),
        }
    }

    /// Runs one row through `f`; the qualifiers (with timestamps) kept.
    fn one_row(f: &Filter, cells: &[Cell]) -> Vec<String> {
        let mut exec = FilterExec::new(f, false).unwrap();
        assert_eq!(exec.begin_row(&cells[0].row), RowStart::Read);
        let mut out = Vec::new();
        for c in cells {
            exec.offer(c.clone(), &mut out);
        }
        if !exec.end_row(&mut out) {
            return Vec::new();
        }
        out.iter()
            .map(|c| {
                format!(
                    "{}:{}@{}",
                    String::from_utf8_lossy(&c.family),
                    String::from_utf8_lossy(&c.qualifier),
                    c.timestamp
                )
            })
            .collect()
    }

    fn row() -> Vec<Cell> {
        vec![
            cell("r", "a", "a1", 2, "x"),
            cell("r", "a", "a1", 1, "y"),
            cell("r", "a", "b1", 1, "x"),
            cell("r", "a", "c", 1, "x"),
            cell("r", "b", "a2", 1, "y"),
            cell("r", "b", "b2", 1, "x"),
        ]
    }

    #[test]
    fn next_row_skips_only_the_rest_of_the_family() {
        let got = one_row(&Filter::column_prefix("a"), &row());
        assert_eq!(got, vec!["a:a1@2", "a:a1@1", "b:a2@1"]);
    }

    #[test]
    fn and_takes_the_farther_skip_and_or_the_nearer() {
        let value_x = Filter::Value(CompareOp::Equal, Comparator::binary("x"));
        let and = Filter::all([Filter::column_prefix("b"), value_x.clone()]);
        assert_eq!(one_row(&and, &row()), vec!["a:b1@1", "b:b2@1"]);
        let or = Filter::any([Filter::column_prefix("b"), value_x]);
        assert_eq!(
            one_row(&or, &row()),
            vec!["a:a1@2", "a:b1@1", "a:c@1", "b:b2@1"]
        );
        // As in HBase, every filter of an AND sees the cell: the count includes a:b1, which
        // the prefix refuses, so b:a2 is the third column and out.
        let count = Filter::all([Filter::ColumnCountGet(2), Filter::column_prefix("a")]);
        assert_eq!(one_row(&count, &row()), vec!["a:a1@2"]);
    }

    #[test]
    fn row_hints_of_lists() {
        let f = Filter::all([Filter::prefix("m"), Filter::fuzzy_row([("?z", [1u8, 0])])]);
        let mut exec = FilterExec::new(&f, false).unwrap();
        // AND: the farther of the two hints ("m" from the prefix, "az" from the fuzzy rule).
        assert_eq!(
            exec.begin_row(b"a"),
            RowStart::Skip(Some(Bytes::from_static(b"m")))
        );
        let f = Filter::any([Filter::prefix("m"), Filter::fuzzy_row([("?z", [1u8, 0])])]);
        let mut exec = FilterExec::new(&f, false).unwrap();
        assert_eq!(
            exec.begin_row(b"a"),
            RowStart::Skip(Some(Bytes::from_static(b"az")))
        );
        // A kid without a hint leaves the OR without one.
        let f = Filter::any([
            Filter::prefix("m"),
            Filter::Row(CompareOp::Equal, Comparator::binary("zz")),
        ]);
        let mut exec = FilterExec::new(&f, false).unwrap();
        assert_eq!(exec.begin_row(b"a"), RowStart::Skip(None));
        // Past the prefix: done.
        let mut exec = FilterExec::new(&Filter::prefix("m"), false).unwrap();
        assert_eq!(exec.begin_row(b"n"), RowStart::Done);
        let mut exec = FilterExec::new(&Filter::prefix("m"), true).unwrap();
        assert_eq!(
            exec.begin_row(b"n"),
            RowStart::Skip(Some(Bytes::from_static(b"n")))
        );
        assert_eq!(exec.begin_row(b"mz"), RowStart::Read);
        assert_eq!(exec.begin_row(b"l"), RowStart::Done);
    }
}
