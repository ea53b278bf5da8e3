//! Mutations between the engine's types and the interface's: packed into bytes on their
//! way to a hook (`types.packed-mutations`, [`pack`]), as `types.mutation` records on their
//! way back (a replacement, an added write: [`from_wit`]).
//!
//! A put's cells cross as they are. A delete crosses as one cell per marker: a column
//! marker (one version or all) as its family and qualifier, a family marker with an empty
//! qualifier; no cell means the whole row. Coming back, a delete cell deletes every version
//! of its column (of its family when the qualifier is empty) at or below its timestamp
//! (`u64::MAX`: the write's time).

use crate::bindings::wit;
use basalt_core::client::{Delete, DeleteKind, Mutation, Put};
use basalt_core::LATEST_TIMESTAMP;

/// Appends `muts` to `out` in the encoding of `types.packed-mutations` (see the WIT): a
/// count, then each mutation's kind, row and cells, integers little-endian. A count or
/// length past `u32::MAX` cannot occur: the engine bounds rows, cells and batches far
/// below it (saturated all the same).
pub(crate) fn pack<'m>(muts: impl ExactSizeIterator<Item = &'m Mutation>, out: &mut Vec<u8>) {
    fn len(out: &mut Vec<u8>, n: usize) {
        out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
    }
    fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        len(out, b.len());
        out.extend_from_slice(b);
    }
    fn cell(out: &mut Vec<u8>, family: &[u8], qualifier: &[u8], ts: u64, value: &[u8]) {
        bytes(out, family);
        bytes(out, qualifier);
        out.extend_from_slice(&ts.to_le_bytes());
        bytes(out, value);
    }
    len(out, muts.len());
    for m in muts {
        match m {
            Mutation::Put(p) => {
                out.push(0);
                bytes(out, p.row());
                len(out, p.cells().len());
                for (f, q, ts, v) in p.cells() {
                    cell(out, f, q, ts, v);
                }
            }
            Mutation::Delete(d) => {
                out.push(1);
                bytes(out, d.row());
                len(out, d.kinds().len());
                for k in d.kinds() {
                    let (family, qualifier, ts): (&[u8], &[u8], _) = match k {
                        DeleteKind::Version {
                            family,
                            qualifier,
                            ts,
                        }
                        | DeleteKind::Column {
                            family,
                            qualifier,
                            ts,
                        } => (family, qualifier, *ts),
                        DeleteKind::Family { family, ts } => (family, &[], *ts),
                        DeleteKind::FamilyVersion { family, ts } => (family, &[], Some(*ts)),
                    };
                    cell(out, family, qualifier, ts.unwrap_or(LATEST_TIMESTAMP), &[]);
                }
            }
        }
    }
}

/// `m` as the interface's mutation (the model [`pack`] is tested against).
#[cfg(test)]
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
    use proptest::prelude::*;

    /// Reads `types.packed-mutations` back into records (the guest SDK's reading, written
    /// again from the WIT's grammar).
    fn unpack(mut b: &[u8]) -> Vec<wit::Mutation> {
        fn take<'a>(b: &mut &'a [u8], n: usize) -> &'a [u8] {
            let (head, rest) = b.split_at(n);
            *b = rest;
            head
        }
        fn u32_(b: &mut &[u8]) -> usize {
            u32::from_le_bytes(take(b, 4).try_into().unwrap()) as usize
        }
        fn bytes(b: &mut &[u8]) -> Vec<u8> {
            let n = u32_(b);
            take(b, n).to_vec()
        }
        let count = u32_(&mut b);
        let out = (0..count)
            .map(|_| {
                let kind = match take(&mut b, 1)[0] {
                    0 => wit::MutationKind::Put,
                    _ => wit::MutationKind::Delete,
                };
                let row = bytes(&mut b);
                let cells = (0..u32_(&mut b))
                    .map(|_| wit::Cell {
                        family: bytes(&mut b),
                        qualifier: bytes(&mut b),
                        timestamp: u64::from_le_bytes(take(&mut b, 8).try_into().unwrap()),
                        value: bytes(&mut b),
                    })
                    .collect();
                wit::Mutation { kind, row, cells }
            })
            .collect();
        assert!(b.is_empty(), "{} bytes left over", b.len());
        out
    }

    fn arb_mutation() -> impl Strategy<Value = Mutation> {
        let name = || prop::collection::vec(any::<u8>(), 0..6);
        let ts = || prop::option::of(0u64..1_000);
        let put = (
            prop::collection::vec(any::<u8>(), 1..8),
            prop::collection::vec((name(), name(), ts(), name()), 0..4),
        )
            .prop_map(|(row, cells)| {
                let put = cells.into_iter().fold(Put::new(row), |p, (f, q, ts, v)| match ts {
                    Some(ts) => p.add_column_ts(f, q, ts, v),
                    None => p.add_column(f, q, v),
                });
                Mutation::Put(put)
            });
        let delete = (
            prop::collection::vec(any::<u8>(), 1..8),
            prop::collection::vec((0u8..4, name(), name(), 0u64..1_000), 0..4),
        )
            .prop_map(|(row, kinds)| {
                let d = kinds.into_iter().fold(Delete::new(row), |d, (k, f, q, ts)| match k {
                    0 => d.add_columns(f, q),
                    1 => d.add_column_ts(f, q, ts),
                    2 => d.add_family(f),
                    _ => d.add_family_ts(f, ts),
                });
                Mutation::Delete(d)
            });
        prop_oneof![put, delete]
    }

    proptest! {
        /// Packed mutations read back as the records they stand for, whatever their bytes.
        #[test]
        fn packed_mutations_read_back_as_their_records(
            muts in prop::collection::vec(arb_mutation(), 0..6),
        ) {
            let mut out = vec![9u8];
            pack(muts.iter(), &mut out);
            let model: Vec<wit::Mutation> = muts.iter().map(to_wit).collect();
            prop_assert_eq!(unpack(&out[1..]), model);
        }
    }

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
