//! Mutations between the engine's types and the interface's (`types.mutation`).
//!
//! A put's cells cross as they are. A delete crosses as one cell per marker: a column
//! marker (one version or all) as its family and qualifier, a family marker with an empty
//! qualifier; no cell means the whole row. Coming back, a delete cell deletes every version
//! of its column (of its family when the qualifier is empty) at or below its timestamp
//! (`u64::MAX`: the write's time).

use crate::bindings::wit;
use basalt_core::client::{Delete, DeleteKind, Mutation, Put};
use basalt_core::LATEST_TIMESTAMP;

/// `m` as the interface's mutation.
pub(crate) fn to_wit(m: &Mutation) -> wit::Mutation {
    match m {
        Mutation::Put(p) => wit::Mutation {
            kind: wit::MutationKind::Put,
            row: p.row().to_vec(),
            cells: p
                .cells()
                .map(|(f, q, ts, v)| wit::Cell {
                    family: f.to_vec(),
                    qualifier: q.to_vec(),
                    timestamp: ts,
                    value: v.to_vec(),
                })
                .collect(),
        },
        Mutation::Delete(d) => wit::Mutation {
            kind: wit::MutationKind::Delete,
            row: d.row().to_vec(),
            cells: d
                .kinds()
                .iter()
                .map(|k| {
                    let (family, qualifier, ts) = match k {
                        DeleteKind::Version {
                            family,
                            qualifier,
                            ts,
                        }
                        | DeleteKind::Column {
                            family,
                            qualifier,
                            ts,
                        } => (family, qualifier.to_vec(), *ts),
                        DeleteKind::Family { family, ts } => (family, Vec::new(), *ts),
                        DeleteKind::FamilyVersion { family, ts } => (family, Vec::new(), Some(*ts)),
                    };
                    wit::Cell {
                        family: family.to_vec(),
                        qualifier,
                        timestamp: ts.unwrap_or(LATEST_TIMESTAMP),
                        value: Vec::new(),
                    }
                })
                .collect(),
        },
    }
}

/// The interface's mutation as the engine's.
pub(crate) fn from_wit(m: wit::Mutation) -> Mutation {
    match m.kind {
        wit::MutationKind::Put => Mutation::Put(m.cells.into_iter().fold(
            Put::new(&m.row),
            |p, c| match c.timestamp {
                LATEST_TIMESTAMP => p.add_column(c.family, c.qualifier, c.value),
                ts => p.add_column_ts(c.family, c.qualifier, ts, c.value),
            },
        )),
        wit::MutationKind::Delete => {
            Mutation::Delete(m.cells.into_iter().fold(Delete::new(&m.row), |d, c| {
                match (c.qualifier.is_empty(), c.timestamp) {
                    (true, LATEST_TIMESTAMP) => d.add_family(c.family),
                    (true, ts) => d.add_family_ts(c.family, ts),
                    (false, LATEST_TIMESTAMP) => d.add_columns(c.family, c.qualifier),
                    (false, ts) => d.add_columns_ts(c.family, c.qualifier, ts),
                }
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_and_column_deletes_cross_both_ways_unchanged() {
        let put: Mutation = Put::new("r")
            .add_column("f", "a", "1")
            .add_column_ts("f", "b", 7, "2")
            .into();
        assert_eq!(to_wit(&from_wit(to_wit(&put))), to_wit(&put));
        let del: Mutation = Delete::new("r")
            .add_columns("f", "a")
            .add_family_ts("g", 9)
            .into();
        assert_eq!(to_wit(&from_wit(to_wit(&del))), to_wit(&del));
        let row: Mutation = Delete::new("r").into();
        assert_eq!(to_wit(&from_wit(to_wit(&row))), to_wit(&row));
        assert_eq!(to_wit(&row).cells.len(), 0);
        assert_eq!(to_wit(&del).cells.len(), 2);
    }
}
