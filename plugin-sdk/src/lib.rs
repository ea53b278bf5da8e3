//! Write Basalt coprocessor plugins: WebAssembly components of the WIT package
//! `basalt:coprocessor@0.1.0` (`plugins/wit/coprocessor.wit` in the Basalt repository).
//!
//! An observer implements [`observer::Observer`] (the `observer` interface's exports) and
//! exports its type with `observer::export_observer!`; an endpoint implements
//! [`endpoint::Endpoint`] and exports it with `endpoint::export_endpoint!`. Reads go through
//! [`observer::region`] / [`endpoint::region`]: the rows of the region the call is about.
//!
//! Build a plugin crate (`crate-type = ["cdylib"]`) with
//! `cargo build --release --target wasm32-wasip2`; the `.wasm` it writes is the component
//! to upload. A plugin reaches nothing but `region`: every other import (clocks, random
//! numbers, files) traps, so use `BTreeMap` rather than `HashMap` (whose seed is random)
//! and no `std::time`.

/// The `region-observer` world: the [`observer::Observer`] trait and its types.
pub mod observer {
    wit_bindgen::generate!({
        path: "../plugins/wit",
        world: "region-observer",
        pub_export_macro: true,
        export_macro_name: "export_observer",
        default_bindings_module: "basalt_plugin_sdk::observer",
    });

    pub use super::batch::{mutations, CellRef, MutationRef, Mutations};
    pub use basalt::coprocessor::region;
    pub use basalt::coprocessor::types::{
        AddedIncrement, AddedWrite, BatchDecisions, Cell, Decision, Hooks, Mutation,
        MutationKind, PackedMutations, RegionInfo, Row,
    };
    pub use exports::basalt::coprocessor::observer::Guest as Observer;

    /// The value `m` puts in `family:qualifier`, if it puts one.
    pub fn put_value<'m>(m: &MutationRef<'m>, family: &[u8], qualifier: &[u8]) -> Option<&'m [u8]> {
        if m.kind != MutationKind::Put {
            return None;
        }
        m.cells()
            .find(|c| c.family == family && c.qualifier == qualifier)
            .map(|c| c.value)
    }

    impl MutationRef<'_> {
        /// The mutation as a record, e.g. to return it changed in `Decision::Replace`.
        pub fn to_mutation(&self) -> Mutation {
            Mutation {
                kind: self.kind,
                row: self.row.to_vec(),
                cells: self
                    .cells()
                    .map(|c| Cell {
                        family: c.family.to_vec(),
                        qualifier: c.qualifier.to_vec(),
                        timestamp: c.timestamp,
                        value: c.value.to_vec(),
                    })
                    .collect(),
            }
        }
    }
}

/// Reading `types.packed-mutations` in place: the mutations a hook is called with arrive as
/// one byte buffer (see the WIT for the encoding), which [`batch::mutations`] walks without
/// copying a row or a value.
pub mod batch {
    use super::observer::MutationKind;

    /// The mutations of a packed buffer, in order. A buffer the host did not write (cut
    /// short, a length past its end) ends the iteration where it stops making sense.
    #[derive(Clone)]
    pub struct Mutations<'a> {
        left: u32,
        rest: &'a [u8],
    }

    /// One mutation of a packed buffer: its kind, row and cells, borrowed from the buffer.
    #[derive(Clone, Copy)]
    pub struct MutationRef<'a> {
        /// A put or a delete.
        pub kind: MutationKind,
        /// The row.
        pub row: &'a [u8],
        cell_count: u32,
        cells: &'a [u8],
    }

    /// One cell of a mutation, borrowed from the buffer (as `types.cell`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CellRef<'a> {
        /// The family.
        pub family: &'a [u8],
        /// The qualifier (empty in a delete of a whole family).
        pub qualifier: &'a [u8],
        /// Milliseconds since the epoch; `u64::MAX` means the write's time.
        pub timestamp: u64,
        /// The value (empty in a delete).
        pub value: &'a [u8],
    }

    /// The cells of a [`MutationRef`].
    #[derive(Clone)]
    pub struct Cells<'a> {
        left: u32,
        rest: &'a [u8],
    }

    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if b.len() < n {
            return None;
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Some(head)
    }

    fn u32_le(b: &mut &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(take(b, 4)?.try_into().ok()?))
    }

    fn bytes<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
        let n = u32_le(b)? as usize;
        take(b, n)
    }

    fn cell<'a>(b: &mut &'a [u8]) -> Option<CellRef<'a>> {
        let family = bytes(b)?;
        let qualifier = bytes(b)?;
        let timestamp = u64::from_le_bytes(take(b, 8)?.try_into().ok()?);
        let value = bytes(b)?;
        Some(CellRef {
            family,
            qualifier,
            timestamp,
            value,
        })
    }

    /// The mutations of `packed`, a hook's `mutations` argument.
    pub fn mutations(packed: &[u8]) -> Mutations<'_> {
        let mut rest = packed;
        let left = u32_le(&mut rest).unwrap_or(0);
        Mutations { left, rest }
    }

    impl Mutations<'_> {
        /// How many mutations are left (as the buffer says).
        pub fn len(&self) -> usize {
            self.left as usize
        }

        /// True when no mutation is left.
        pub fn is_empty(&self) -> bool {
            self.left == 0
        }
    }

    impl<'a> Mutations<'a> {
        fn read(&mut self) -> Option<MutationRef<'a>> {
            let b = &mut self.rest;
            let kind = match take(b, 1)?.first()? {
                0 => MutationKind::Put,
                _ => MutationKind::Delete,
            };
            let row = bytes(b)?;
            let cell_count = u32_le(b)?;
            let start = *b;
            for _ in 0..cell_count {
                cell(b)?;
            }
            let cells = start.get(..start.len() - b.len())?;
            Some(MutationRef {
                kind,
                row,
                cell_count,
                cells,
            })
        }
    }

    impl<'a> Iterator for Mutations<'a> {
        type Item = MutationRef<'a>;

        fn next(&mut self) -> Option<MutationRef<'a>> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let m = self.read();
            if m.is_none() {
                self.left = 0;
            }
            m
        }
    }

    impl<'a> MutationRef<'a> {
        /// Its cells, in order.
        pub fn cells(&self) -> Cells<'a> {
            Cells {
                left: self.cell_count,
                rest: self.cells,
            }
        }
    }

    impl<'a> Iterator for Cells<'a> {
        type Item = CellRef<'a>;

        fn next(&mut self) -> Option<CellRef<'a>> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            cell(&mut self.rest)
        }
    }
}

/// The `region-endpoint` world: the [`endpoint::Endpoint`] trait and its types.
pub mod endpoint {
    wit_bindgen::generate!({
        path: "../plugins/wit",
        world: "region-endpoint",
        pub_export_macro: true,
        export_macro_name: "export_endpoint",
        default_bindings_module: "basalt_plugin_sdk::endpoint",
    });

    pub use basalt::coprocessor::region;
    pub use basalt::coprocessor::types::{Cell, RegionInfo, Row};
    pub use exports::basalt::coprocessor::endpoint::Guest as Endpoint;
}

/// The value of argument `key` in a `configure` call's arguments.
pub fn arg<'a>(args: &'a [(String, String)], key: &str) -> Option<&'a str> {
    args.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
