//! Compiling a [`Filter`] into the [`Node`] tree [`FilterExec`](super::FilterExec) runs:
//! comparators and regular expressions compiled once, sets sorted and deduplicated, row
//! ranges sorted, and every node's per-row and per-scan state starting empty.
//!
//! Invariants kept: the tree mirrors the filter node for node; a malformed filter (a fuzzy
//! key whose mask has another length, a comparator that does not compile) is refused with an
//! error here, before any row is read.

use super::{ColumnValue, Dependent, List, Node};
use crate::error::{Error, Result};
use crate::filter::compare::Compiled;
use crate::filter::rows::{sort_ranges, FuzzyRule};
use crate::filter::{Filter, ListOp};

pub(super) fn compile(f: &Filter, reverse: bool) -> Result<Node> {
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
