//! Write Basalt coprocessor plugins: WebAssembly components of the WIT package
//! `basalt:coprocessor@0.2.0` (`plugins/wit/coprocessor.wit` in the Basalt repository).
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

    pub use super::batch::{mutations, CellRef, Cells, Malformed, MutationRef, Mutations};
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
        /// The mutation as a record, e.g. to return it changed in `Decision::Replace`. A
        /// delete's cells come back as the host reads any delete cell: every version of the
        /// column (of the family, qualifier empty) at or below the cell's timestamp, so a
        /// delete of only the newest version returned this way deletes all versions.
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
/// one byte buffer (see the WIT for the encoding), which [`batch::mutations`] checks and
/// then walks without copying a row or a value.
pub mod batch {
    use super::observer::MutationKind;

    /// A buffer that is not `types.packed-mutations`: the host and the plugin disagree on
    /// the encoding. A hook should fail (trap, e.g. `std::process::abort()`, which the host
    /// handles under the attachment's failure policy) rather than guess.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Malformed {
        /// What was wrong, and where.
        pub reason: String,
    }

    impl std::fmt::Display for Malformed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "malformed packed mutations: {}", self.reason)
        }
    }

    /// The mutations of a checked packed buffer, in order ([`mutations`]).
    #[derive(Clone, Debug)]
    pub struct Mutations<'a> {
        left: u32,
        rest: &'a [u8],
    }

    /// One mutation of a packed buffer: its kind, row and cells, borrowed from the buffer.
    #[derive(Clone, Copy, Debug)]
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

    /// The cells of a [`MutationRef`], in order. A cell that does not fit its mutation's
    /// cells ends them.
    #[derive(Clone, Debug)]
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

    /// Reads one mutation's header and cells block off `b`.
    fn mutation<'a>(b: &mut &'a [u8]) -> Result<MutationRef<'a>, &'static str> {
        let kind = match take(b, 1).and_then(|k| k.first()) {
            Some(0) => MutationKind::Put,
            Some(1) => MutationKind::Delete,
            Some(_) => return Err("a kind other than put (0) or delete (1)"),
            None => return Err("cut short before a kind"),
        };
        let row = bytes(b).ok_or("a row past the end")?;
        let cell_count = u32_le(b).ok_or("cut short before a cell count")?;
        let cells = bytes(b).ok_or("cells past the end")?;
        Ok(MutationRef {
            kind,
            row,
            cell_count,
            cells,
        })
    }

    /// The mutations of `packed`, a hook's `mutations` argument, once every mutation's
    /// header and cells block are checked to lie within it with nothing left over (one pass
    /// over the headers, none over the cells).
    pub fn mutations(packed: &[u8]) -> Result<Mutations<'_>, Malformed> {
        let mut rest = packed;
        let malformed = |i: u32, reason: &str| Malformed {
            reason: format!("mutation {i}: {reason}"),
        };
        let count = u32_le(&mut rest).ok_or_else(|| Malformed {
            reason: "no count".into(),
        })?;
        let body = rest;
        for i in 0..count {
            mutation(&mut rest).map_err(|r| malformed(i, r))?;
        }
        if !rest.is_empty() {
            return Err(malformed(count, "bytes past the last mutation"));
        }
        Ok(Mutations {
            left: count,
            rest: body,
        })
    }

    impl Mutations<'_> {
        /// How many mutations are left.
        pub fn len(&self) -> usize {
            self.left as usize
        }

        /// True when no mutation is left.
        pub fn is_empty(&self) -> bool {
            self.left == 0
        }
    }

    impl<'a> Iterator for Mutations<'a> {
        type Item = MutationRef<'a>;

        fn next(&mut self) -> Option<MutationRef<'a>> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            // Checked by `mutations`: this cannot fail, and ends the walk if it did.
            let m = mutation(&mut self.rest).ok();
            if m.is_none() {
                self.left = 0;
            }
            m
        }

        fn size_hint(&self) -> (usize, Option<usize>) {
            (self.len(), Some(self.len()))
        }
    }

    impl ExactSizeIterator for Mutations<'_> {}
    impl std::iter::FusedIterator for Mutations<'_> {}

    impl<'a> MutationRef<'a> {
        /// Its cells, in order.
        pub fn cells(&self) -> Cells<'a> {
            Cells {
                left: self.cell_count,
                rest: self.cells,
            }
        }

        /// How many cells it has (as its header says).
        pub fn cell_count(&self) -> usize {
            self.cell_count as usize
        }
    }

    impl<'a> Iterator for Cells<'a> {
        type Item = CellRef<'a>;

        fn next(&mut self) -> Option<CellRef<'a>> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let c = cell(&mut self.rest);
            if c.is_none() {
                self.left = 0;
            }
            c
        }
    }

    impl std::iter::FusedIterator for Cells<'_> {}
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

    // ---- reading a column scanner's pages in place -------------------------------------

    /// The rows of `page`, a page of a [`region::ColumnScanner`] opened with `columns`
    /// columns (what its `next` returned; see the WIT for the encoding), in key order,
    /// borrowed from the page: no row or value is copied. A buffer the host did not write
    /// (cut short, a length past its end) ends the iteration where it stops making sense.
    ///
    /// ```ignore
    /// let columns = [(b"f".to_vec(), b"v".to_vec())];
    /// let scan = region::ColumnScanner::new(&[], &[], &columns);
    /// loop {
    ///     let page = scan.next(16 * 1024)?;
    ///     if page.is_empty() {
    ///         break;
    ///     }
    ///     for row in column_rows(&page, columns.len()) {
    ///         if let Some(v) = row.value(0) {
    ///             // row.row: the key; v: the newest value of f:v.
    ///         }
    ///     }
    /// }
    /// ```
    pub fn column_rows(page: &[u8], columns: usize) -> ColumnRows<'_> {
        ColumnRows {
            rest: page,
            columns,
        }
    }

    /// The rows of a column scanner's page ([`column_rows`]).
    #[derive(Clone, Debug)]
    pub struct ColumnRows<'a> {
        rest: &'a [u8],
        columns: usize,
    }

    /// One row of a column scanner's page: its key and its columns' values, borrowed.
    #[derive(Clone, Copy, Debug)]
    pub struct ColumnRow<'a> {
        /// The row key.
        pub row: &'a [u8],
        /// The encoded values (`columns` of them).
        values: &'a [u8],
        columns: usize,
    }

    /// The values of a [`ColumnRow`], in the order the columns were asked for: `None` for a
    /// column the row lacks.
    #[derive(Clone, Debug)]
    pub struct ColumnValues<'a> {
        rest: &'a [u8],
        left: usize,
    }

    /// The length that marks a column the row lacks.
    const ABSENT: u32 = u32::MAX;

    /// Reads one length-prefixed field off the front of `b`: `Some(None)` for [`ABSENT`],
    /// `None` when `b` is cut short.
    fn field<'a>(b: &mut &'a [u8]) -> Option<Option<&'a [u8]>> {
        let (len, rest) = b.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len);
        if len == ABSENT {
            *b = rest;
            return Some(None);
        }
        let (value, rest) = rest.split_at_checked(len as usize)?;
        *b = rest;
        Some(Some(value))
    }

    impl<'a> ColumnRows<'a> {
        fn read(&mut self) -> Option<ColumnRow<'a>> {
            let b = &mut self.rest;
            let row = field(b)??;
            let start = *b;
            for _ in 0..self.columns {
                field(b)?;
            }
            let values = start.get(..start.len() - b.len())?;
            Some(ColumnRow {
                row,
                values,
                columns: self.columns,
            })
        }
    }

    impl<'a> Iterator for ColumnRows<'a> {
        type Item = ColumnRow<'a>;

        fn next(&mut self) -> Option<ColumnRow<'a>> {
            if self.rest.is_empty() {
                return None;
            }
            let r = self.read();
            if r.is_none() {
                self.rest = &[];
            }
            r
        }
    }

    impl<'a> ColumnRow<'a> {
        /// Every column's value, in the order asked for.
        pub fn values(&self) -> ColumnValues<'a> {
            ColumnValues {
                rest: self.values,
                left: self.columns,
            }
        }

        /// The value of the `i`th column asked for; `None` when the row lacks it.
        pub fn value(&self, i: usize) -> Option<&'a [u8]> {
            self.values().nth(i).flatten()
        }
    }

    impl<'a> Iterator for ColumnValues<'a> {
        type Item = Option<&'a [u8]>;

        fn next(&mut self) -> Option<Option<&'a [u8]>> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            field(&mut self.rest)
        }
    }
}

/// The value of argument `key` in a `configure` call's arguments.
pub fn arg<'a>(args: &'a [(String, String)], key: &str) -> Option<&'a str> {
    args.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
