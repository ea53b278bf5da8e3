//! How one batch changes the links of its rows in one relation family: the refusals, and
//! the links of each row before and after the batch, derived with HBase's rules.
//!
//! Invariant: [`plan`] reports for every row the links a reader will see once the batch
//! commits. All operations of a batch get one timestamp, and a delete marker hides puts at
//! or below its own timestamp, so inside one batch a deleted link stays deleted even when a
//! later operation puts it again; a put of a link not deleted in the batch wins, the last
//! put's value being the one kept. Writes whose effect cannot be derived this way are
//! refused ([`Refusal`]) and vetoed, one operation at a time.

use crate::observer::ObserverContext;
use basalt_core::cell::LATEST_TIMESTAMP;
use basalt_core::client::{DeleteKind, Get, Mutation};
use basalt_core::coprocessor::MiniBatch;
use basalt_core::{Error, Result};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// Why a relation observer refuses a write. A write of a batch (put, delete, row
/// mutations, check-and-mutate, batch) is vetoed and its caller gets [`Error::BadArgument`]
/// with this text ([`Refusal::into_error`]); an increment or append is refused in its
/// pre-hook, which the coprocessor host reports as [`Error::Coprocessor`] carrying the same
/// text. [`Refusal::is`] recognises both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A cell or marker of a relation family with an explicit timestamp: it may sit under
    /// an existing version or delete marker, so its effect on the other side is unknown.
    ExplicitTimestamp {
        /// The relation family.
        family: String,
    },
    /// A delete of one version, or of a family's versions at one timestamp: it may uncover
    /// an older version of the link.
    VersionDelete {
        /// The relation family.
        family: String,
    },
    /// A write to a family that only the relation's observer writes.
    DerivedFamily {
        /// The derived family.
        family: String,
    },
    /// A link whose qualifier (the linked row) is empty.
    EmptyLink {
        /// The relation family.
        family: String,
    },
    /// An increment or append of a relation family (they run no batch hooks).
    ReadModifyWrite {
        /// The family.
        family: String,
    },
    /// One batch gives a row two parents.
    TwoParents {
        /// The row, lossily decoded.
        row: String,
    },
    /// The parent would make the row its own ancestor.
    Cycle {
        /// The row, lossily decoded.
        row: String,
        /// The refused parent, lossily decoded.
        parent: String,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::ExplicitTimestamp { family } => write!(
                f,
                "relation family {family}: explicit timestamps cannot be mirrored"
            ),
            Refusal::VersionDelete { family } => write!(
                f,
                "relation family {family}: single-version deletes cannot be mirrored"
            ),
            Refusal::DerivedFamily { family } => write!(
                f,
                "family {family} is derived by a relation observer: write the other side"
            ),
            Refusal::EmptyLink { family } => {
                write!(
                    f,
                    "relation family {family}: a link needs a non-empty qualifier"
                )
            }
            Refusal::ReadModifyWrite { family } => write!(
                f,
                "relation family {family}: increments and appends cannot be mirrored"
            ),
            Refusal::TwoParents { row } => write!(f, "tree: row {row} given two parents"),
            Refusal::Cycle { row, parent } => {
                write!(f, "tree: parent {parent} of row {row} would close a cycle")
            }
        }
    }
}

impl Refusal {
    /// The error the caller gets: [`Error::BadArgument`] with this refusal's text.
    ///
    /// ```
    /// use basalt_coprocessors::relations::Refusal;
    /// let e = Refusal::DerivedFamily { family: "shop".into() }.into_error();
    /// assert!(matches!(e, basalt_core::Error::BadArgument(m) if m.contains("derived")));
    /// ```
    pub fn into_error(self) -> Error {
        Error::BadArgument(self.to_string())
    }

    /// True when `e` is this refusal, as a veto or as a coprocessor failure's message.
    pub fn is(&self, e: &Error) -> bool {
        let text = self.to_string();
        match e {
            Error::BadArgument(m) => *m == text,
            Error::Coprocessor { msg, .. } => msg.contains(&text),
            _ => false,
        }
    }
}

pub(crate) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What one mutation does to one family.
#[derive(Debug, Default)]
pub(crate) struct Touch {
    /// Links put, in order: (qualifier, value).
    pub puts: Vec<(Bytes, Bytes)>,
    /// Links deleted (all versions, at the batch's timestamp).
    pub deletes: Vec<Bytes>,
    /// The whole family deleted (a family or row delete).
    pub clear: bool,
}

impl Touch {
    fn is_empty(&self) -> bool {
        self.puts.is_empty() && self.deletes.is_empty() && !self.clear
    }
}

/// True when `m` writes anything into `family` (a row delete writes every family).
pub(crate) fn writes_family(m: &Mutation, family: &[u8]) -> bool {
    match m {
        Mutation::Put(p) => p.cells().any(|(f, ..)| f == family),
        Mutation::Delete(d) => {
            d.kinds().is_empty()
                || d.kinds().iter().any(|k| match k {
                    DeleteKind::Version { family: f, .. }
                    | DeleteKind::Column { family: f, .. }
                    | DeleteKind::Family { family: f, .. }
                    | DeleteKind::FamilyVersion { family: f, .. } => f.as_ref() == family,
                })
        }
    }
}

/// What `m` does to the links in `family`, or why it cannot be mirrored.
pub(crate) fn touch(m: &Mutation, family: &[u8]) -> std::result::Result<Touch, Refusal> {
    let name = || lossy(family);
    let explicit = || Refusal::ExplicitTimestamp { family: name() };
    let mut t = Touch::default();
    match m {
        Mutation::Put(p) => {
            for (f, q, ts, v) in p.cells() {
                if f != family {
                    continue;
                }
                let ts = if ts == LATEST_TIMESTAMP {
                    p.get_timestamp()
                } else {
                    ts
                };
                if ts != LATEST_TIMESTAMP {
                    return Err(explicit());
                }
                if q.is_empty() {
                    return Err(Refusal::EmptyLink { family: name() });
                }
                t.puts
                    .push((Bytes::copy_from_slice(q), Bytes::copy_from_slice(v)));
            }
        }
        Mutation::Delete(d) => {
            let explicit_default = d.get_timestamp() != LATEST_TIMESTAMP;
            if d.kinds().is_empty() {
                if explicit_default {
                    return Err(explicit());
                }
                t.clear = true;
            }
            for k in d.kinds() {
                match k {
                    DeleteKind::Version { family: f, .. }
                    | DeleteKind::FamilyVersion { family: f, .. }
                        if f.as_ref() == family =>
                    {
                        return Err(Refusal::VersionDelete { family: name() });
                    }
                    DeleteKind::Column {
                        family: f,
                        qualifier,
                        ts,
                    } if f.as_ref() == family => {
                        if ts.is_some() || explicit_default {
                            return Err(explicit());
                        }
                        t.deletes.push(qualifier.clone());
                    }
                    DeleteKind::Family { family: f, ts } if f.as_ref() == family => {
                        if ts.is_some() || explicit_default {
                            return Err(explicit());
                        }
                        t.clear = true;
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(t)
}

/// The visible links of `row` in `family` (qualifier -> value), read under the row lock.
pub(crate) fn read_links(
    ctx: &ObserverContext<'_>,
    row: &Bytes,
    family: &[u8],
) -> Result<BTreeMap<Bytes, Bytes>> {
    let r = ctx.get(&Get::new(row).add_family(family))?;
    Ok(r.cells
        .into_iter()
        .filter(|c| c.family.as_ref() == family)
        .map(|c| (c.qualifier, c.value))
        .collect())
}

/// One row's links before and after a batch.
#[derive(Debug)]
pub(crate) struct RowPlan {
    /// The row.
    pub row: Bytes,
    /// The operations of the batch that touch the row's relation family.
    pub ops: Vec<usize>,
    /// Links before the batch.
    pub before: BTreeMap<Bytes, Bytes>,
    /// Links after it.
    pub after: BTreeMap<Bytes, Bytes>,
    /// Links put by the batch that stay visible (their reverse is rewritten).
    pub put: BTreeSet<Bytes>,
}

/// A change to one reverse link: the linked row, and its new value (`None`: deleted).
pub(crate) type Edit = (Bytes, Option<Bytes>);

impl RowPlan {
    /// The reverse links to write: a put for every link the batch put (a rewrite keeps
    /// both sides' versions in step), a delete for every link that disappeared.
    pub fn edits(&self) -> Vec<Edit> {
        let mut out = Vec::new();
        for (q, v) in &self.after {
            if self.put.contains(q) {
                out.push((q.clone(), Some(v.clone())));
            }
        }
        for q in self.before.keys() {
            if !self.after.contains_key(q) {
                out.push((q.clone(), None));
            }
        }
        out
    }

    /// Drops a link from the plan's outcome (the caller deletes it).
    pub fn forget(&mut self, q: &Bytes) {
        self.after.remove(q);
        self.put.remove(q);
    }
}

/// Per row of `batch`, the links of `family` before and after it. Operations that cannot be
/// mirrored are vetoed with their [`Refusal`] and left out, as are operations vetoed before.
pub(crate) fn plan(
    ctx: &ObserverContext<'_>,
    batch: &mut MiniBatch<'_>,
    family: &[u8],
) -> Result<Vec<RowPlan>> {
    struct Acc {
        ops: Vec<usize>,
        clear: bool,
        deleted: BTreeSet<Bytes>,
        puts: BTreeMap<Bytes, Bytes>,
    }
    let mut rows: BTreeMap<Bytes, Acc> = BTreeMap::new();
    let mut refused = Vec::new();
    for (i, m) in batch.operations().enumerate() {
        if batch.is_vetoed(i) {
            continue;
        }
        match touch(m, family) {
            Err(r) => refused.push((i, r)),
            Ok(t) if t.is_empty() => {}
            Ok(t) => {
                let acc = rows.entry(m.row().clone()).or_insert_with(|| Acc {
                    ops: Vec::new(),
                    clear: false,
                    deleted: BTreeSet::new(),
                    puts: BTreeMap::new(),
                });
                acc.ops.push(i);
                acc.clear |= t.clear;
                acc.deleted.extend(t.deletes);
                acc.puts.extend(t.puts);
            }
        }
    }
    for (i, r) in refused {
        batch.veto(i, r.into_error());
    }
    let mut plans = Vec::with_capacity(rows.len());
    for (row, acc) in rows {
        let before = read_links(ctx, &row, family)?;
        let mut after = if acc.clear {
            BTreeMap::new()
        } else {
            before.clone()
        };
        for q in &acc.deleted {
            after.remove(q);
        }
        let mut put = BTreeSet::new();
        if !acc.clear {
            for (q, v) in acc.puts {
                if !acc.deleted.contains(&q) {
                    after.insert(q.clone(), v);
                    put.insert(q);
                }
            }
        }
        plans.push(RowPlan {
            row,
            ops: acc.ops,
            before,
            after,
            put,
        });
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use basalt_core::client::{Delete, Put};

    #[test]
    fn touch_sorts_puts_deletes_and_refusals() {
        let p = Mutation::Put(
            Put::new("r")
                .add_column("l", "a", "1")
                .add_column("i", "n", "x"),
        );
        let t = touch(&p, b"l").unwrap();
        assert_eq!(t.puts.len(), 1);
        assert!(!t.clear);
        let d = Mutation::Delete(Delete::new("r"));
        assert!(touch(&d, b"l").unwrap().clear);
        let d = Mutation::Delete(Delete::new("r").add_family("i"));
        assert!(touch(&d, b"l").unwrap().is_empty());
        assert!(writes_family(&Mutation::Delete(Delete::new("r")), b"l"));
        let refused = [
            Mutation::Put(Put::new("r").add_column_ts("l", "a", 5, "1")),
            Mutation::Put(Put::new("r").timestamp(5).add_column("l", "a", "1")),
            Mutation::Delete(Delete::new("r").add_column("l", "a")),
            Mutation::Delete(Delete::new("r").add_family_version("l", 3)),
            Mutation::Delete(Delete::new("r").add_columns_ts("l", "a", 3)),
            Mutation::Delete(Delete::new("r").timestamp(3)),
            Mutation::Put(Put::new("r").add_column("l", "", "1")),
        ];
        for m in refused {
            assert!(touch(&m, b"l").is_err(), "{m:?}");
        }
        // Explicit timestamps elsewhere are fine.
        let p = Mutation::Put(Put::new("r").add_column_ts("i", "n", 5, "x"));
        assert!(touch(&p, b"l").unwrap().is_empty());
    }

    #[test]
    fn refusals_are_bad_arguments_that_name_themselves() {
        let r = Refusal::Cycle {
            row: "a".into(),
            parent: "b".into(),
        };
        assert!(r.is(&r.clone().into_error()));
        assert!(!r.is(&Refusal::TwoParents { row: "a".into() }.into_error()));
    }
}
