//! What a plugin instance's store holds (its memory limits, its resources, the region of
//! the current call) and the host side of the `region` interface (but its column scanner,
//! in `columns`).
//!
//! Invariants: reads reach only the region of the current call (`reader` is set for the
//! call and cleared after it); a call with no region (configure, merge) reads nothing;
//! every host function returns the guest a `result`, never traps the host.

use crate::bindings::{region, wit, Scanner};
use basalt_core::client::RowResult;
use basalt_core::client::{Get, Scan};
use basalt_core::coprocessor::RegionReader;
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};

/// The most rows one `next-rows` call returns.
const MAX_ROWS_PER_CALL: u32 = 4096;

/// Where a call's region reads come from.
pub(crate) enum Reads {
    /// No region: configure, merge.
    None,
    /// A hook's region, as committed.
    Hook(RegionReader),
    /// An endpoint call's region at its pinned read point.
    Endpoint(basalt_core::endpoint::OwnedRegionView),
}

/// An instance's resource limits: its linear memory (every memory together) may not grow
/// past `cap` bytes; growing past it traps the call with an out-of-memory message.
pub(crate) struct Limits {
    cap: usize,
    /// The size its memories reached, in bytes.
    pub(crate) memory: usize,
}

impl wasmtime::ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.memory.saturating_sub(current).saturating_add(desired);
        if total > self.cap {
            return Err(wasmtime::Error::msg(format!(
                "out of memory: its memory would grow to {} KiB, past its cap of {} KiB",
                total >> 10,
                self.cap >> 10
            )));
        }
        self.memory = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        16
    }

    fn tables(&self) -> usize {
        16
    }

    fn memories(&self) -> usize {
        4
    }
}

/// The most elements a plugin's tables may hold.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// One plugin instance's store data.
pub(crate) struct HostState {
    pub(crate) limits: Limits,
    pub(crate) table: ResourceTable,
    pub(crate) reads: Reads,
    pub(crate) plugin: Arc<str>,
}

impl HostState {
    pub(crate) fn new(plugin: Arc<str>, memory_bytes: usize) -> Self {
        HostState {
            limits: Limits {
                cap: memory_bytes,
                memory: 0,
            },
            table: ResourceTable::new(),
            reads: Reads::None,
            plugin,
        }
    }
}

fn to_cells(r: RowResult) -> Vec<wit::Cell> {
    r.cells
        .into_iter()
        .map(|c| wit::Cell {
            family: c.family.to_vec(),
            qualifier: c.qualifier.to_vec(),
            timestamp: c.timestamp,
            value: c.value.to_vec(),
        })
        .collect()
}

impl region::Host for HostState {
    fn get(
        &mut self,
        row: Vec<u8>,
        family: Option<Vec<u8>>,
        qualifier: Option<Vec<u8>>,
    ) -> wasmtime::Result<Result<Vec<wit::Cell>, String>> {
        let mut g = Get::new(&row);
        match (family, qualifier) {
            (Some(f), Some(q)) => g = g.add_column(f, q),
            (Some(f), None) => g = g.add_family(f),
            _ => {}
        }
        let found = match &self.reads {
            Reads::Hook(r) => r.get(&g),
            Reads::Endpoint(v) => v.get(&g),
            Reads::None => return Ok(Err("no region to read in this call".into())),
        };
        Ok(found.map(to_cells).map_err(|e| e.to_string()))
    }

    fn log(&mut self, message: String) -> wasmtime::Result<()> {
        let message: String = message.chars().take(1024).collect();
        tracing::info!(plugin = %self.plugin, "{message}");
        Ok(())
    }
}

impl region::HostScanner for HostState {
    fn new(
        &mut self,
        start: Vec<u8>,
        stop: Vec<u8>,
        family: Option<Vec<u8>>,
    ) -> wasmtime::Result<Resource<Scanner>> {
        let mut scan = Scan::new();
        if !start.is_empty() {
            scan = scan.start_row(start);
        }
        if !stop.is_empty() {
            scan = scan.stop_row(stop);
        }
        if let Some(f) = family {
            scan = scan.add_family(f);
        }
        let rows = match &self.reads {
            Reads::Endpoint(v) => v.scan(&scan),
            Reads::Hook(_) | Reads::None => Err(basalt_core::Error::bad_argument(
                "scanners are open to endpoint calls only",
            )),
        };
        match rows {
            Ok(rows) => Ok(self.table.push(Scanner { rows })?),
            // A scanner that could not open yields the error at its first read.
            Err(e) => Err(wasmtime::Error::msg(e.to_string())),
        }
    }

    fn next_rows(
        &mut self,
        scanner: Resource<Scanner>,
        max: u32,
    ) -> wasmtime::Result<Result<Vec<wit::Row>, String>> {
        let s = self.table.get_mut(&scanner)?;
        let mut out = Vec::new();
        for _ in 0..max.clamp(1, MAX_ROWS_PER_CALL) {
            match s.rows.next() {
                None => break,
                Some(Ok(r)) => out.push(wit::Row {
                    row: r.row.to_vec(),
                    cells: to_cells(r),
                }),
                Some(Err(e)) => return Ok(Err(e.to_string())),
            }
        }
        Ok(Ok(out))
    }

    fn drop(&mut self, scanner: Resource<Scanner>) -> wasmtime::Result<()> {
        self.table.delete(scanner)?;
        Ok(())
    }
}

impl wit::Host for HostState {}
