//! Read-modify-writes on the write path: increments and appends (each column read at the
//! current read point inside the operation's time range, under the row lock, and written
//! no older than the version read plus one) and check-and-mutate (the condition read and
//! the mutations applied under the row's lock; a passing check writes no older than the
//! checked cell, HBASE-14054).

use super::*;
use crate::cell::{CellType, StoreCell, StoreKey, Timestamp, LATEST_TIMESTAMP};
use crate::error::{Error, Result};
use crate::ops::{
    Append, CheckAndMutate, Condition, Get, Increment, Mutation, RowMutations, RowResult, TimeRange,
};
use crate::region::{Region, Store};
use crate::server::hooks::{under_row_locks, LockPlan};
use crate::server::{now_ms, Engine, TableState};
use crate::wal::Durability;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Engine {
    /// The newest visible `(timestamp, value)` of a column, read at the current read point.
    fn latest_cell(
        &self,
        region: &Region,
        store: &Arc<Store>,
        row: &Bytes,
        qualifier: &Bytes,
        range: TimeRange,
    ) -> Result<Option<(Timestamp, Bytes)>> {
        let get = Get::new(row)
            .add_column(&store.family, qualifier)
            .time_range(range);
        let res = self.read_row_in(region, &get, self.mvcc.read_point())?;
        Ok(res.cells.into_iter().next().map(|c| (c.timestamp, c.value)))
    }

    /// Atomically adds to 8-byte big-endian counters; returns the new values.
    pub(crate) async fn increment(
        self: &Arc<Self>,
        t: &TableState,
        inc: Increment,
    ) -> Result<RowResult> {
        if let Some(hooks) = t.hooks() {
            return self.increment_hooked(t, &hooks, inc).await;
        }
        self.increment_unhooked(t, &inc).await
    }

    /// [`Engine::increment`] without hooks.
    pub(in crate::server) async fn increment_unhooked(
        self: &Arc<Self>,
        t: &TableState,
        inc: &Increment,
    ) -> Result<RowResult> {
        self.read_modify_write(
            t,
            &inc.row,
            inc.durability,
            DeltaOptions {
                range: inc.time_range,
                ttl_ms: inc.ttl_ms,
            },
            inc.columns
                .iter()
                .map(|(f, q, a)| (f, q, Delta::Add(*a)))
                .collect(),
        )
        .await
    }

    /// Atomically appends to cells; returns the new values.
    pub(crate) async fn append(self: &Arc<Self>, t: &TableState, app: Append) -> Result<RowResult> {
        if let Some(hooks) = t.hooks() {
            return self.append_hooked(t, &hooks, app).await;
        }
        self.append_unhooked(t, &app).await
    }

    /// [`Engine::append`] without hooks.
    pub(in crate::server) async fn append_unhooked(
        self: &Arc<Self>,
        t: &TableState,
        app: &Append,
    ) -> Result<RowResult> {
        self.read_modify_write(
            t,
            &app.row,
            app.durability,
            DeltaOptions {
                range: app.time_range,
                ttl_ms: app.ttl_ms,
            },
            app.columns
                .iter()
                .map(|(f, q, v)| (f, q, Delta::Append(v.clone())))
                .collect(),
        )
        .await
    }

    async fn read_modify_write(
        self: &Arc<Self>,
        t: &TableState,
        row: &Bytes,
        durability: Durability,
        opts: DeltaOptions,
        deltas: Vec<(&Bytes, &Bytes, Delta)>,
    ) -> Result<RowResult> {
        self.validate_read_modify_write(t, row, &deltas)?;
        validate_ttl(opts.ttl_ms)?;
        let name = t.name.to_string();
        let lock = self.locks.lock([(name.as_str(), row.clone())]).await;
        if t.hooks().is_some() {
            // Coprocessors arrived since the caller looked (an index being created): their
            // batch hooks must see this write.
            drop(lock);
            return self
                .read_modify_write_hooked(t, row, durability, opts, deltas)
                .await;
        }
        let mut cells = Vec::new();
        let result = self.resolve_deltas(t, row, deltas, opts, now_ms(), &mut cells)?;
        self.commit(t, cells, durability).await?;
        Ok(RowResult {
            row: row.clone(),
            cells: result,
        })
    }

    /// Checks an increment's or append's columns without writing anything.
    pub(in crate::server) fn validate_read_modify_write(
        &self,
        t: &TableState,
        row: &Bytes,
        deltas: &[(&Bytes, &Bytes, Delta)],
    ) -> Result<()> {
        t.check_enabled()?;
        validate_row(row)?;
        if deltas.is_empty() {
            return Err(Error::bad_argument("no column given"));
        }
        let region = t.online_region(row)?;
        for (f, _, d) in deltas {
            self.store_of(t, &region, f)?;
            if let Delta::Append(v) = d {
                self.check_value(v)?;
            }
        }
        Ok(())
    }

    pub(in crate::server) fn row_slot(
        &self,
        t: &TableState,
        row: &[u8],
    ) -> Option<&std::sync::atomic::AtomicU64> {
        // XXH3 of the row seeded with the table's: slots only need spreading, and SipHash
        // was 3% of an indexed put.
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(row, t.key_hash);
        let n = self.row_clock.len().max(1) as u64;
        self.row_clock.get((h % n) as usize)
    }

    /// The timestamp of a hooked write of `rows` (the caller holds their locks): the wall
    /// clock, once it has passed the timestamp of the rows' previous hooked write (waiting
    /// for the next millisecond when needed). A hooked write's cells are stamped before its
    /// `pre_batch_mutate` hooks run (they read the row as the batch leaves it), so a row
    /// deleted and written again in one millisecond would otherwise have its put hidden by
    /// the delete marker. The clock is never run ahead of the wall clock: a later write
    /// stamped by the wall clock (a delete) still covers this one. Rows sharing a slot
    /// only wait more.
    pub(in crate::server) async fn hooked_now<'r>(
        &self,
        t: &TableState,
        rows: impl Iterator<Item = &'r Bytes>,
        min: Timestamp,
    ) -> Timestamp {
        let last = rows
            .filter_map(|r| self.row_slot(t, r))
            .map(|s| s.load(Ordering::Acquire))
            .max()
            .unwrap_or(0)
            .max(min);
        loop {
            let now = now_ms();
            if now > last {
                return now;
            }
            tokio::time::sleep(std::time::Duration::from_micros(200)).await;
        }
    }

    /// Records that a hooked write of `rows` (still under their locks) took `now`.
    pub(in crate::server) fn record_hooked<'r>(
        &self,
        t: &TableState,
        rows: impl Iterator<Item = &'r Bytes>,
        now: Timestamp,
    ) {
        for r in rows {
            if let Some(s) = self.row_slot(t, r) {
                s.fetch_max(now, Ordering::AcqRel);
            }
        }
    }

    /// Reads the latest value of each column inside `range` under the row lock (the caller
    /// holds it) and prepares the cells of the new values; returns the new cells, sorted by
    /// column.
    pub(crate) fn resolve_deltas(
        &self,
        t: &TableState,
        row: &Bytes,
        deltas: Vec<(&Bytes, &Bytes, Delta)>,
        opts: DeltaOptions,
        now: Timestamp,
        cells: &mut Vec<PreparedCell>,
    ) -> Result<Vec<crate::cell::Cell>> {
        // Located under the row lock: a split may have moved the row meanwhile.
        let region = t.online_region(row)?;
        let mut result = Vec::new();
        for (f, q, delta) in deltas {
            let store = self.store_of(t, &region, f)?;
            let old = self.latest_cell(&region, &store, row, q, opts.range)?;
            // No older than the version read plus one (HBase's reckonDeltas), but never
            // the "server time" sentinel: over a version at the largest timestamp the new
            // value replaces it there.
            let ts = old.as_ref().map_or(now, |(ts, _)| {
                now.max(ts.saturating_add(1).min(crate::cell::LATEST_TIMESTAMP - 1))
            });
            let value = match delta {
                Delta::Add(amount) => {
                    let base = match &old {
                        None => 0i64,
                        Some((_, v)) => {
                            let arr: [u8; 8] =
                                v.as_ref().try_into().map_err(|_| Error::NotACounter {
                                    column: format!(
                                        "{}:{}",
                                        String::from_utf8_lossy(f),
                                        String::from_utf8_lossy(q)
                                    ),
                                    len: v.len(),
                                })?;
                            i64::from_be_bytes(arr)
                        }
                    };
                    Bytes::copy_from_slice(&base.wrapping_add(amount).to_be_bytes())
                }
                Delta::Append(v) => {
                    let mut buf = old.map(|(_, o)| o.to_vec()).unwrap_or_default();
                    buf.extend_from_slice(&v);
                    self.check_value(&buf)?;
                    Bytes::from(buf)
                }
            };
            result.push(crate::cell::Cell {
                row: row.clone(),
                family: f.clone(),
                qualifier: q.clone(),
                timestamp: ts,
                kind: crate::cell::CellType::Put,
                value: value.clone(),
            });
            let (kind, value) = match opts.ttl_ms {
                Some(ttl) => (
                    CellType::ExpiringPut,
                    crate::cell::expiring_value(ttl, &value),
                ),
                None => (CellType::Put, value),
            };
            cells.push(PreparedCell {
                region: region.clone(),
                store,
                cell: StoreCell {
                    key: StoreKey {
                        row: row.clone(),
                        qualifier: q.clone(),
                        ts,
                        kind,
                        seq: 0,
                    },
                    value,
                },
            });
        }
        result.sort_by(|a, b| (&a.family, &a.qualifier).cmp(&(&b.family, &b.qualifier)));
        Ok(result)
    }

    /// Applies the mutations only if the condition holds; returns whether it held.
    pub(crate) async fn check_and_mutate(
        self: &Arc<Self>,
        t: &TableState,
        cam: CheckAndMutate,
    ) -> Result<bool> {
        if let Some(hooks) = t.hooks() {
            return self.check_and_mutate_hooked(t, &hooks, cam).await;
        }
        self.check_and_mutate_unhooked(t, cam).await
    }

    /// [`Engine::check_and_mutate`] without the check-and-mutate hooks (the batch hooks of
    /// its mutations still run).
    pub(in crate::server) async fn check_and_mutate_unhooked(
        self: &Arc<Self>,
        t: &TableState,
        cam: CheckAndMutate,
    ) -> Result<bool> {
        t.check_enabled()?;
        validate_row(&cam.row)?;
        let action = cam.action.as_ref().ok_or_else(|| {
            Error::bad_argument("check-and-mutate needs a put, delete or row mutations")
        })?;
        if action.row != cam.row {
            return Err(Error::bad_argument(
                "check-and-mutate must mutate the row it checks",
            ));
        }
        check_same_row(action)?;
        let region = t.online_region(&cam.row)?;
        let by_filter = matches!(cam.condition, Condition::Filter(_));
        if !by_filter {
            self.store_of(t, &region, &cam.family)?;
        }
        for m in &action.mutations {
            self.validate_mutation(t, m)?;
        }
        under_row_locks!(self, t, std::iter::once(&cam.row), |plan| self
            .check_and_mutate_locked(t, &cam, action, plan)
            .await)
    }

    /// The locked part of a check-and-mutate: reads the condition, applies `action` if it
    /// holds.
    async fn check_and_mutate_locked(
        self: &Arc<Self>,
        t: &TableState,
        cam: &CheckAndMutate,
        action: &RowMutations,
        plan: &mut LockPlan,
    ) -> Result<bool> {
        // Located under the row lock: a split may have moved the row meanwhile.
        let region = t.online_region(&cam.row)?;
        // Whether the condition holds, and the timestamp of the cell it was judged on.
        let (pass, checked_ts) = if let Condition::Filter(f) = &cam.condition {
            let get = Get::new(&cam.row).filter(f.clone());
            let found = self.read_row_in(&region, &get, self.mvcc.read_point())?;
            (!found.is_empty(), found.cells.first().map(|c| c.timestamp))
        } else {
            let store = self.store_of(t, &region, &cam.family)?;
            let current =
                self.latest_cell(&region, &store, &cam.row, &cam.qualifier, TimeRange::ALL)?;
            (
                cam.condition
                    .holds(current.as_ref().map(|(_, v)| v.as_ref())),
                current.map(|(ts, _)| ts),
            )
        };
        if !pass {
            return Ok(false);
        }
        // As HBase (HBASE-14054): puts without a timestamp are written no older than the
        // checked cell, so a cell dated in the future cannot hide the write the check let
        // through.
        match checked_ts.filter(|ts| *ts > now_ms() && *ts != LATEST_TIMESTAMP) {
            Some(floor) => {
                let stamped: Vec<Mutation> = action
                    .mutations
                    .iter()
                    .map(|m| match m {
                        Mutation::Put(p) if p.ts == LATEST_TIMESTAMP => {
                            Mutation::Put(p.clone().timestamp(floor))
                        }
                        other => other.clone(),
                    })
                    .collect();
                self.mutate_locked(t, &stamped, plan).await?;
            }
            None => self.mutate_locked(t, &action.mutations, plan).await?,
        }
        Ok(true)
    }
}

/// A read-modify-write change of one column.
#[derive(Clone)]
pub(crate) enum Delta {
    /// Add to an 8-byte big-endian counter.
    Add(i64),
    /// Append bytes.
    Append(Bytes),
}

/// How an increment or append reads and writes: the time range its current values are
/// read in, and its new values' own TTL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeltaOptions {
    pub(crate) range: TimeRange,
    pub(crate) ttl_ms: Option<u64>,
}

impl Default for DeltaOptions {
    fn default() -> Self {
        DeltaOptions {
            range: TimeRange::ALL,
            ttl_ms: None,
        }
    }
}

/// A cell TTL must be positive (HBase refuses a negative one; zero would expire at once).
pub(crate) fn validate_ttl(ttl_ms: Option<u64>) -> Result<()> {
    match ttl_ms {
        Some(0) => Err(Error::bad_argument("a cell TTL must be positive")),
        _ => Ok(()),
    }
}
