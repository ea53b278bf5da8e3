//! The per-cell hooks of the compiled filter tree, HBase's: `filter_cell` (a [`ReturnCode`]
//! per visible cell), the cell hint behind `SeekNextUsingHint`, and `transform_cell`; and how
//! a list combines its members' codes and hints.
//!
//! Invariants kept: a cell hint is above the cell it was given for; a list never skips past
//! a cell it would include (MUST_PASS_ALL takes the farthest skip of its members, since a
//! cell any member refuses is refused; MUST_PASS_ONE the nearest).

use super::{CellHint, List, Node, ReturnCode};
use crate::cell::Cell;
use bytes::Bytes;

/// Where the return code `rc` of `node` for cell `c` lets the scanner skip to (`None`: the
/// next cell).
pub(super) fn target(node: &Node, rc: ReturnCode, c: &Cell) -> Option<CellHint> {
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

impl Node {
    pub(super) fn cell(&mut self, c: &Cell) -> ReturnCode {
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

    pub(super) fn transform(&self, c: Cell) -> Cell {
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
