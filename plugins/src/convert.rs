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
use basalt_core::{Error, Result, LATEST_TIMESTAMP};

/// Appends `muts` to `out` in the encoding of `types.packed-mutations` (see the WIT): a
/// count, then each mutation's kind, row, cell count, the cells' length in bytes and the
/// cells, integers little-endian. A count or length past `u32::MAX` (a value of 4 GiB)
/// fails the call with [`Error::BadArgument`]: the encoding cannot carry it.
pub(crate) fn pack<'m>(
    muts: impl ExactSizeIterator<Item = &'m Mutation>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let mut p = Packer {
        out,
        too_large: false,
    };
    p.len(muts.len());
    for m in muts {
        match m {
            Mutation::Put(put) => {
                p.out.push(0);
                p.bytes(put.row());
                p.len(put.cells().len());
                let at = p.cells_len();
                for (f, q, ts, v) in put.cells() {
                    p.cell(f, q, ts, v);
                }
                p.patch_len(at);
            }
            Mutation::Delete(d) => {
                p.out.push(1);
                p.bytes(d.row());
                p.len(d.kinds().len());
                let at = p.cells_len();
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
                    p.cell(family, qualifier, ts.unwrap_or(LATEST_TIMESTAMP), &[]);
                }
                p.patch_len(at);
            }
        }
    }
    if p.too_large {
        return Err(Error::bad_argument(
            "a mutation too large for a plugin hook (a count or length past 4 GiB)",
        ));
    }
    Ok(())
}

/// The writer of [`pack`]: remembers a length that did not fit in a `u32`.
struct Packer<'o> {
    out: &'o mut Vec<u8>,
    too_large: bool,
}

impl Packer<'_> {
    fn u32_of(&mut self, n: usize) -> [u8; 4] {
        u32::try_from(n)
            .unwrap_or_else(|_| {
                self.too_large = true;
                u32::MAX
            })
            .to_le_bytes()
    }

    fn len(&mut self, n: usize) {
        let b = self.u32_of(n);
        self.out.extend_from_slice(&b);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.out.extend_from_slice(b);
    }

    /// Room for a `cells-len`; the offset just past it.
    fn cells_len(&mut self) -> usize {
        self.out.extend_from_slice(&[0; 4]);
        self.out.len()
    }

    /// Writes the length of what follows the `cells-len` ending at `at`.
    fn patch_len(&mut self, at: usize) {
        let n = self.u32_of(self.out.len().saturating_sub(at));
        if let Some(slot) = self.out.get_mut(at.saturating_sub(4)..at) {
            slot.copy_from_slice(&n);
        }
    }

    fn cell(&mut self, family: &[u8], qualifier: &[u8], ts: u64, value: &[u8]) {
        self.bytes(family);
        self.bytes(qualifier);
        self.out.extend_from_slice(&ts.to_le_bytes());
        self.bytes(value);
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
                    1 => wit::MutationKind::Delete,
                    k => panic!("kind {k}"),
                };
                let row = bytes(&mut b);
                let count = u32_(&mut b);
                let cells_len = u32_(&mut b);
                let before = b.len();
                let cells: Vec<wit::Cell> = (0..count)
                    .map(|_| wit::Cell {
                        family: bytes(&mut b),
                        qualifier: bytes(&mut b),
                        timestamp: u64::from_le_bytes(take(&mut b, 8).try_into().unwrap()),
                        value: bytes(&mut b),
                    })
                    .collect();
                assert_eq!(before - b.len(), cells_len, "cells-len");
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
                let put = cells
                    .into_iter()
                    .fold(Put::new(row), |p, (f, q, ts, v)| match ts {
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
                let d = kinds
                    .into_iter()
                    .fold(Delete::new(row), |d, (k, f, q, ts)| match k {
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
            pack(muts.iter(), &mut out).unwrap();
            let model: Vec<wit::Mutation> = muts.iter().map(to_wit).collect();
            prop_assert_eq!(unpack(&out[1..]), model);
        }
    }

    /// The encoding's bytes, pinned: the guest SDK reads exactly these.
    #[test]
    fn packed_bytes_are_the_wits_grammar() {
        let muts: Vec<Mutation> = vec![
            Put::new("r").add_column_ts("f", "q", 7, "v").into(),
            Delete::new("s").add_family("g").into(),
        ];
        let mut out = Vec::new();
        pack(muts.iter(), &mut out).unwrap();
        let mut want: Vec<u8> = vec![2, 0, 0, 0];
        // A put: kind, row, one cell of 1+1+8+1 bytes and their four lengths.
        want.extend([0, 1, 0, 0, 0, b'r', 1, 0, 0, 0, 23, 0, 0, 0]);
        want.extend([1, 0, 0, 0, b'f', 1, 0, 0, 0, b'q', 7, 0, 0, 0, 0, 0, 0, 0]);
        want.extend([1, 0, 0, 0, b'v']);
        // A delete of a family: its cell with an empty qualifier and value, at the write's time.
        want.extend([1, 1, 0, 0, 0, b's', 1, 0, 0, 0, 21, 0, 0, 0]);
        want.extend([1, 0, 0, 0, b'g', 0, 0, 0, 0]);
        want.extend([255; 8]);
        want.extend([0, 0, 0, 0]);
        assert_eq!(out, want);
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
