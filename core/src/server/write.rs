//! The write path: validate, lock rows, resolve timestamps, commit.
//!
//! Order of a commit (`docs/ARCHITECTURE.md`): row locks in sorted order -> sequence id from MVCC
//! and WAL append of the whole batch as one record (both under the commit lock, so WAL order
//! is sequence order) -> wait for the WAL as the durability asks -> MemStore inserts -> MVCC
//! completes and the read point passes the batch -> unlock -> acknowledge. Invariants: every
//! validation happens before the sequence id is taken, so a bad operation writes nothing; a
//! sequence id is always completed (a guard completes it if the caller's future is dropped),
//! so the read point never stalls.
//!
//! A table with coprocessors adds hook calls around this path (see [`super::hooks`]):
//! pre-hooks before validation and locks, `pre_batch_mutate` under the row locks before the
//! sequence id (its added mutations are prepared and committed with the batch), post-hooks
//! after unlock. A table without them only pays one `Option` check.

use super::hooks::{LockPlan, PostApply};
use super::{now_ms, Engine, TableState};
use crate::cell::{CellType, StoreCell, StoreKey, Timestamp, LATEST_TIMESTAMP, MAX_ROW_LENGTH};
use crate::error::{Error, Result};
use crate::mvcc::Mvcc;
use crate::ops::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Condition, Delete, DeleteKind, Get, Increment,
    Mutation, Put, RowMutations, RowResult, TimeRange,
};
use crate::region::{Region, Store};
use crate::wal::{Durability, EditRef, UnsealedFrame, WalEdit, WalRecord};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) use crate::region::PreparedCell;

/// How a batch goes to the WAL.
enum Log {
    /// Not at all (`SkipWal`).
    Skip,
    /// Encoded ahead, sealed under the commit lock.
    Frame(UnsealedFrame),
    /// As a record, for an engine observer of the WAL.
    Record(WalRecord),
}

/// Completes a sequence id when dropped, so a cancelled writer cannot stall the read point.
struct SeqGuard<'a> {
    mvcc: &'a Mvcc,
    seq: u64,
}

impl Drop for SeqGuard<'_> {
    fn drop(&mut self) {
        self.mvcc.complete(self.seq);
    }
}

fn rank(d: Durability) -> u8 {
    match d {
        Durability::SkipWal => 0,
        Durability::AsyncWal => 1,
        Durability::SyncWal => 2,
        Durability::FsyncWal => 3,
    }
}

/// The strongest of several durabilities.
pub(crate) fn strongest(ds: impl IntoIterator<Item = Durability>) -> Durability {
    ds.into_iter()
        .max_by_key(|d| rank(*d))
        .unwrap_or(Durability::SyncWal)
}

/// Checks a row key's length.
pub fn validate_row(row: &[u8]) -> Result<()> {
    if row.is_empty() {
        return Err(Error::InvalidRow("row key is empty".into()));
    }
    if row.len() > MAX_ROW_LENGTH {
        return Err(Error::InvalidRow(format!(
            "row key of {} bytes exceeds {MAX_ROW_LENGTH}",
            row.len()
        )));
    }
    Ok(())
}

impl Engine {
    fn store_of(&self, t: &TableState, region: &Region, family: &[u8]) -> Result<Arc<Store>> {
        region.store(family).ok_or_else(|| Error::FamilyNotFound {
            table: t.name.to_string(),
            family: String::from_utf8_lossy(family).into_owned(),
        })
    }

    fn region_of(&self, t: &TableState, row: &[u8]) -> Result<Arc<Region>> {
        let region = t
            .locate(row)
            .ok_or_else(|| Error::TableNotFound(t.name.to_string()))?;
        region.check_online()?;
        Ok(region)
    }

    fn check_value(&self, v: &[u8]) -> Result<()> {
        if v.len() > self.config.max_value_size {
            return Err(Error::ValueTooLarge {
                size: v.len(),
                limit: self.config.max_value_size,
            });
        }
        Ok(())
    }

    /// Checks a mutation without writing anything.
    pub(crate) fn validate_mutation(&self, t: &TableState, m: &Mutation) -> Result<()> {
        validate_row(m.row())?;
        let region = self.region_of(t, m.row())?;
        match m {
            Mutation::Put(p) => {
                if p.is_empty() && !p.is_touch() {
                    return Err(Error::bad_argument("a put needs at least one column"));
                }
                validate_ttl(p.ttl_ms)?;
                for (f, _, _, v) in p.cells() {
                    self.store_of(t, &region, f)?;
                    self.check_value(v)?;
                }
            }
            Mutation::Delete(d) => {
                for k in &d.kinds {
                    let f = match k {
                        DeleteKind::Version { family, .. }
                        | DeleteKind::Column { family, .. }
                        | DeleteKind::Family { family, .. }
                        | DeleteKind::FamilyVersion { family, .. } => family,
                    };
                    self.store_of(t, &region, f)?;
                }
            }
        }
        Ok(())
    }

    /// Checks an increment without writing anything.
    pub(crate) fn validate_increment(&self, t: &TableState, inc: &Increment) -> Result<()> {
        validate_row(&inc.row)?;
        if inc.columns.is_empty() {
            return Err(Error::bad_argument("no column given"));
        }
        let region = self.region_of(t, &inc.row)?;
        for (f, _, _) in &inc.columns {
            self.store_of(t, &region, f)?;
        }
        Ok(())
    }

    /// Turns a validated mutation into cells. Must run under the row lock: a delete of the
    /// latest version reads the row to find that version's timestamp.
    pub(crate) fn prepare(
        &self,
        t: &TableState,
        m: &Mutation,
        now: Timestamp,
        out: &mut Vec<PreparedCell>,
    ) -> Result<()> {
        let row = m.row().clone();
        let region = self.region_of(t, &row)?;
        let cell = |store: Arc<Store>, q: Bytes, ts: Timestamp, kind: CellType, value: Bytes| {
            PreparedCell {
                region: region.clone(),
                store,
                cell: StoreCell {
                    key: StoreKey {
                        row: row.clone(),
                        qualifier: q,
                        ts,
                        kind,
                        seq: 0,
                    },
                    value,
                },
            }
        };
        match m {
            Mutation::Put(p) => {
                let default_ts = if p.ts == LATEST_TIMESTAMP { now } else { p.ts };
                let (kind, ttl) = match p.ttl_ms {
                    Some(ttl) => (CellType::ExpiringPut, ttl),
                    None => (CellType::Put, 0),
                };
                // Columns of one family usually come together: look the store up once per run.
                let mut last: Option<(Bytes, Arc<Store>)> = None;
                for (f, q, ts, v) in p.shared_cells() {
                    let ts = if ts == LATEST_TIMESTAMP {
                        default_ts
                    } else {
                        ts
                    };
                    let store = match &last {
                        Some((lf, s)) if *lf == f => s.clone(),
                        _ => {
                            let s = self.store_of(t, &region, &f)?;
                            last = Some((f, s.clone()));
                            s
                        }
                    };
                    let v = if kind == CellType::ExpiringPut {
                        crate::cell::expiring_value(ttl, &v)
                    } else {
                        v
                    };
                    out.push(cell(store, q, ts, kind, v));
                }
            }
            Mutation::Delete(d) => {
                let dts = if d.ts == LATEST_TIMESTAMP { now } else { d.ts };
                // As in HBase's prepareDeleteTimestamps, the n-th "latest version" marker of
                // one column in one delete takes the n-th newest visible version.
                let mut latest_seen: BTreeMap<(&Bytes, &Bytes), usize> = BTreeMap::new();
                if d.kinds.is_empty() {
                    for store in region.all_stores() {
                        out.push(cell(
                            store,
                            Bytes::new(),
                            dts,
                            CellType::DeleteFamily,
                            Bytes::new(),
                        ));
                    }
                }
                for k in &d.kinds {
                    match k {
                        DeleteKind::Version {
                            family,
                            qualifier,
                            ts,
                        } => {
                            let store = self.store_of(t, &region, family)?;
                            let ts = match ts {
                                Some(ts) => Some(*ts),
                                None if d.ts != LATEST_TIMESTAMP => Some(d.ts),
                                None => {
                                    let n = latest_seen.entry((family, qualifier)).or_default();
                                    *n += 1;
                                    self.nth_latest_ts(&region, &store, &row, qualifier, *n)?
                                }
                            };
                            // A column showing no such version: a no-op.
                            if let Some(ts) = ts {
                                out.push(cell(
                                    store,
                                    qualifier.clone(),
                                    ts,
                                    CellType::Delete,
                                    Bytes::new(),
                                ));
                            }
                        }
                        DeleteKind::Column {
                            family,
                            qualifier,
                            ts,
                        } => {
                            let store = self.store_of(t, &region, family)?;
                            let ts = ts.unwrap_or(dts);
                            out.push(cell(
                                store,
                                qualifier.clone(),
                                ts,
                                CellType::DeleteColumn,
                                Bytes::new(),
                            ));
                        }
                        DeleteKind::Family { family, ts } => {
                            let store = self.store_of(t, &region, family)?;
                            let ts = ts.unwrap_or(dts);
                            out.push(cell(
                                store,
                                Bytes::new(),
                                ts,
                                CellType::DeleteFamily,
                                Bytes::new(),
                            ));
                        }
                        DeleteKind::FamilyVersion { family, ts } => {
                            let store = self.store_of(t, &region, family)?;
                            out.push(cell(
                                store,
                                Bytes::new(),
                                *ts,
                                CellType::DeleteFamilyVersion,
                                Bytes::new(),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Commits prepared cells as one atomic batch. The caller holds the rows' locks.
    pub(crate) async fn commit(
        self: &Arc<Self>,
        t: &TableState,
        cells: Vec<PreparedCell>,
        durability: Durability,
    ) -> Result<()> {
        self.commit_tables(&[t], cells, durability, None)
            .await
            .map(|_| ())
    }

    /// Commits prepared cells of regions of any of `tables` as one atomic batch: one WAL
    /// record, one sequence id. The caller holds the rows' locks. With `post`, runs the
    /// `post_batch_mutate` hooks after the MemStore inserts and before the batch is visible;
    /// returns their error, if any, as `Ok(Some(e))` (the batch is committed then).
    pub(crate) async fn commit_tables(
        self: &Arc<Self>,
        tables: &[&TableState],
        mut cells: Vec<PreparedCell>,
        durability: Durability,
        post: Option<PostApply<'_>>,
    ) -> Result<Option<Error>> {
        self.check_open()?;
        if cells.is_empty() {
            return Ok(None);
        }
        let incoming = cells.iter().map(|c| c.cell.heap_size() as u64).sum();
        self.reserve_memstore(incoming).await?;
        self.throttle_writes(cells.iter().map(|c| (&c.region, &c.store)))
            .await;
        let gates = self.enter_regions(tables, &mut cells).await?;
        // Encoded outside the commit lock; under it only the sequence id is written. An
        // engine observer of the WAL gets the batch as a record.
        let observes_wal = self
            .config
            .observer
            .as_ref()
            .is_some_and(|o| o.observes_wal());
        let log = match durability {
            Durability::SkipWal => Log::Skip,
            _ if observes_wal => Log::Record(WalRecord {
                seq: 0,
                edits: cells
                    .iter()
                    .map(|c| WalEdit {
                        region_id: c.region.id,
                        family: c.store.family.clone(),
                        cell: c.cell.clone(),
                    })
                    .collect(),
            }),
            _ => Log::Frame(UnsealedFrame::encode(cells.iter().map(|c| EditRef {
                region_id: c.region.id,
                family: &c.store.family,
                cell: &c.cell,
            }))?),
        };
        let (guard, ticket) = {
            let _g = self.commit_lock.lock();
            let seq = self.mvcc.begin();
            let guard = SeqGuard {
                mvcc: &self.mvcc,
                seq,
            };
            let ticket = match log {
                Log::Skip => None,
                Log::Frame(mut frame) => {
                    Some(self.wal.append_unsealed(&mut frame, seq, durability)?)
                }
                Log::Record(mut rec) => {
                    rec.seq = seq;
                    for e in &mut rec.edits {
                        e.cell.key.seq = seq;
                    }
                    Some(self.observed_wal_append(rec, |rec| self.wal.append(rec, durability))?)
                }
            };
            (guard, ticket)
        };
        let seq = guard.seq;
        if let Some(ticket) = ticket {
            if durability != Durability::AsyncWal {
                ticket.wait().await?;
            }
        }
        for c in cells.iter_mut() {
            c.cell.key.seq = seq;
        }
        // The regions of the batch in order of first appearance (usually one).
        let mut regions: Vec<Arc<Region>> = Vec::new();
        for c in &cells {
            if !regions.iter().any(|r| Arc::ptr_eq(r, &c.region)) {
                regions.push(c.region.clone());
            }
        }
        if let [region] = regions.as_slice() {
            region.apply(&cells);
            region.write_requests.fetch_add(1, Ordering::Relaxed);
        } else if runs_by_region(&cells) == regions.len() {
            // Each region's cells form one run (a batch's own cells, then each hook's added
            // rows, as usual): the runs are applied as they lie.
            for run in cells.chunk_by(|a, b| Arc::ptr_eq(&a.region, &b.region)) {
                if let Some(first) = run.first() {
                    first.region.apply(run);
                    first.region.write_requests.fetch_add(1, Ordering::Relaxed);
                }
            }
        } else {
            for region in &regions {
                let mine: Vec<&PreparedCell> = cells
                    .iter()
                    .filter(|c| Arc::ptr_eq(&c.region, region))
                    .collect();
                region.apply(&mine);
                region.write_requests.fetch_add(1, Ordering::Relaxed);
            }
        }
        // In the MemStore, not yet visible: the read point waits for `guard`.
        let hook_err = match post {
            Some(p) => self.post_apply(&p).await.err(),
            None => None,
        };
        drop(guard);
        drop(gates);
        self.mvcc.wait_for(seq).await;
        for region in &regions {
            let t = tables
                .iter()
                .find(|t| t.name == region.table)
                .or(tables.first());
            let flush_size = t
                .and_then(|t| t.descriptor.read().memstore_flush_size)
                .unwrap_or(self.config.memstore_flush_size);
            self.maybe_flush(region, flush_size);
        }
        if self.commits.fetch_add(1, Ordering::Relaxed) % 1024 == 1023 {
            self.flush_if_wal_too_long();
        }
        Ok(hook_err)
    }

    /// Takes the write gates of the regions `cells` go to, in region-id order, and returns
    /// them held. A cell whose region a split or merge retired is re-routed to the region
    /// that now holds its row (the caller holds the row locks, so what it read from the old
    /// region is still current), and the gates are taken again.
    async fn enter_regions(
        &self,
        tables: &[&TableState],
        cells: &mut [PreparedCell],
    ) -> Result<Vec<tokio::sync::OwnedRwLockReadGuard<()>>> {
        loop {
            let mut regions: Vec<&Arc<Region>> = Vec::new();
            for c in cells.iter() {
                if !regions.iter().any(|r| Arc::ptr_eq(r, &c.region)) {
                    regions.push(&c.region);
                }
            }
            regions.sort_by_key(|r| r.id);
            let mut gates = Vec::with_capacity(regions.len());
            for r in &regions {
                gates.push(r.write_gate.clone().read_owned().await);
            }
            if regions.iter().all(|r| !r.is_retired()) {
                return Ok(gates);
            }
            drop(gates);
            for c in cells.iter_mut() {
                if c.region.is_retired() {
                    let t = tables
                        .iter()
                        .find(|t| t.name == c.region.table)
                        .ok_or_else(|| Error::TableNotFound(c.region.table.to_string()))?;
                    let region = self.region_of(t, &c.cell.key.row)?;
                    c.store = self.store_of(t, &region, &c.store.family)?;
                    c.region = region;
                }
            }
        }
    }

    /// Applies mutations of any rows atomically: validates all, locks all rows, commits once.
    pub(crate) async fn mutate(self: &Arc<Self>, t: &TableState, muts: &[Mutation]) -> Result<()> {
        t.check_enabled()?;
        if let Some(hooks) = t.hooks() {
            if !skips_hooks(&*hooks, muts) {
                return self.mutate_hooked(t, &hooks, muts.to_vec()).await;
            }
        }
        self.mutate_unhooked(t, muts).await
    }

    /// [`Engine::mutate`] of one mutation the caller gives away: a hooked table's hooks get
    /// it without a copy.
    async fn mutate_one(self: &Arc<Self>, t: &TableState, m: Mutation) -> Result<()> {
        t.check_enabled()?;
        let one = std::slice::from_ref(&m);
        if let Some(hooks) = t.hooks() {
            if !skips_hooks(&*hooks, one) {
                return self.mutate_hooked(t, &hooks, vec![m]).await;
            }
        }
        self.mutate_unhooked(t, one).await
    }

    /// [`Engine::mutate`] once the table's write hooks are known to have nothing to run.
    async fn mutate_unhooked(self: &Arc<Self>, t: &TableState, muts: &[Mutation]) -> Result<()> {
        for m in muts {
            self.validate_mutation(t, m)?;
        }
        let mut plan = LockPlan::default();
        loop {
            let locks = self
                .lock_planned(t, muts.iter().map(|m| m.row()), &plan)
                .await;
            let r = self.mutate_locked(t, muts, &mut plan).await;
            drop(locks);
            if !plan.take_relock() {
                return r;
            }
        }
    }

    /// Commits `muts` under their row locks (and `plan`'s extra rows), after the table's
    /// `pre_batch_mutate` hooks (a veto fails the whole call; added mutations commit with
    /// it). When `plan` says to relock, nothing was written: the caller relocks and retries.
    pub(super) async fn mutate_locked(
        self: &Arc<Self>,
        t: &TableState,
        muts: &[Mutation],
        plan: &mut LockPlan,
    ) -> Result<()> {
        if let Some(hooks) = t.hooks() {
            if !skips_hooks(&*hooks, muts) {
                return self.mutate_locked_hooked(t, &hooks, muts, plan).await;
            }
        }
        let now = now_ms();
        let mut cells = Vec::with_capacity(muts.iter().map(cell_hint).sum());
        for m in muts {
            self.prepare(t, m, now, &mut cells)?;
        }
        let durability = strongest(muts.iter().map(Mutation::durability));
        self.commit(t, cells, durability).await
    }

    /// Puts one row.
    pub(crate) async fn put(self: &Arc<Self>, t: &TableState, p: Put) -> Result<()> {
        self.mutate_one(t, Mutation::Put(p)).await
    }

    /// Deletes from one row.
    pub(crate) async fn delete(self: &Arc<Self>, t: &TableState, d: Delete) -> Result<()> {
        self.mutate_one(t, Mutation::Delete(d)).await
    }

    /// Applies a row's mutations atomically.
    pub(crate) async fn mutate_row(
        self: &Arc<Self>,
        t: &TableState,
        rm: RowMutations,
    ) -> Result<()> {
        check_same_row(&rm)?;
        self.mutate(t, &rm.mutations).await
    }

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

    /// The timestamp of the `n`-th newest (from 1) visible version of a column.
    fn nth_latest_ts(
        &self,
        region: &Region,
        store: &Arc<Store>,
        row: &Bytes,
        qualifier: &Bytes,
        n: usize,
    ) -> Result<Option<Timestamp>> {
        let versions = u32::try_from(n).unwrap_or(u32::MAX);
        let get = Get::new(row)
            .add_column(&store.family, qualifier)
            .max_versions(versions);
        let res = self.read_row_in(region, &get, self.mvcc.read_point())?;
        Ok(res.cells.get(n.saturating_sub(1)).map(|c| c.timestamp))
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
    pub(super) async fn increment_unhooked(
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
    pub(super) async fn append_unhooked(
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
    pub(super) fn validate_read_modify_write(
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
        let region = self.region_of(t, row)?;
        for (f, _, d) in deltas {
            self.store_of(t, &region, f)?;
            if let Delta::Append(v) = d {
                self.check_value(v)?;
            }
        }
        Ok(())
    }

    pub(super) fn row_slot(
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
    pub(super) async fn hooked_now<'r>(
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
    pub(super) fn record_hooked<'r>(
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
        let region = self.region_of(t, row)?;
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
    pub(super) async fn check_and_mutate_unhooked(
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
        let region = self.region_of(t, &cam.row)?;
        let by_filter = matches!(cam.condition, Condition::Filter(_));
        if !by_filter {
            self.store_of(t, &region, &cam.family)?;
        }
        for m in &action.mutations {
            self.validate_mutation(t, m)?;
        }
        let mut plan = LockPlan::default();
        loop {
            let locks = self.lock_planned(t, std::iter::once(&cam.row), &plan).await;
            let r = self
                .check_and_mutate_locked(t, &cam, action, &mut plan)
                .await;
            drop(locks);
            if !plan.take_relock() {
                return r;
            }
        }
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
        let region = self.region_of(t, &cam.row)?;
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

    /// Runs many operations; one result per operation, in order. Puts and deletes that pass
    /// validation commit together as one atomic batch; the other operations run after it.
    pub(crate) async fn batch(
        self: &Arc<Self>,
        t: &TableState,
        ops: Vec<BatchOp>,
    ) -> Result<Vec<Result<BatchOutcome>>> {
        t.check_enabled()?;
        let hooks = t.hooks();
        let mut results: Vec<Option<Result<BatchOutcome>>> = (0..ops.len()).map(|_| None).collect();
        let mut group: Vec<(usize, Mutation)> = Vec::new();
        let mut rest = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                BatchOp::Put(p) => group.push((i, Mutation::Put(p))),
                BatchOp::Delete(d) => group.push((i, Mutation::Delete(d))),
                other => rest.push((i, other)),
            }
        }
        if let Some(h) = &hooks {
            group = self.batch_pre_hooks(t, h, group, &mut results).await;
        }
        group.retain(|(i, m)| match self.validate_mutation(t, m) {
            Ok(()) => true,
            Err(e) => {
                if let Some(slot) = results.get_mut(*i) {
                    *slot = Some(Err(e));
                }
                false
            }
        });
        let mut plan = LockPlan::default();
        while !group.is_empty() {
            let locks = self
                .lock_planned(t, group.iter().map(|(_, m)| m.row()), &plan)
                .await;
            // Under the locks, the table's current hooks: batch hooks that arrived since the
            // pre-hooks ran (an index being created) must see this write.
            let locked_hooks = t.hooks();
            let (ok, outcome) = match &locked_hooks {
                None => {
                    let (cells, ok, durability) = self.prepare_group(t, &group, &mut results);
                    (ok, self.commit(t, cells, durability).await)
                }
                Some(h) => {
                    self.batch_locked_hooked(t, h, &mut group, &mut results, &mut plan)
                        .await
                }
            };
            if plan.take_relock() {
                drop(locks);
                continue;
            }
            for i in &ok {
                // A slot already answered holds a later hook's error.
                if let Some(slot @ None) = results.get_mut(*i) {
                    *slot = Some(match &outcome {
                        Ok(()) => Ok(BatchOutcome::Done),
                        Err(e) => Err(super::hooks::copy_error(e)),
                    });
                }
            }
            drop(locks);
            if let (Some(h), Ok(())) = (&hooks, &outcome) {
                self.batch_post_hooks(t, h, &group, &ok, &mut results).await;
            }
            break;
        }
        for (i, op) in rest {
            let r = match op {
                BatchOp::Get(g) => self.get_hooked(t, g).await.map(BatchOutcome::Row),
                BatchOp::Increment(inc) => self.increment(t, inc).await.map(BatchOutcome::Row),
                BatchOp::Append(a) => self.append(t, a).await.map(BatchOutcome::Row),
                BatchOp::RowMutations(rm) => {
                    self.mutate_row(t, rm).await.map(|_| BatchOutcome::Done)
                }
                BatchOp::CheckAndMutate(c) => {
                    self.check_and_mutate(t, c).await.map(BatchOutcome::Checked)
                }
                BatchOp::Put(_) | BatchOp::Delete(_) => Ok(BatchOutcome::Done),
            };
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(r);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::bad_argument("operation not run"))))
            .collect())
    }
}

impl Engine {
    /// Prepares a batch's mutations (the caller holds their row locks): the cells, the
    /// indexes of the operations prepared (a failed one is answered with its error) and the
    /// strongest durability among them.
    pub(super) fn prepare_group(
        &self,
        t: &TableState,
        group: &[(usize, Mutation)],
        results: &mut [Option<Result<BatchOutcome>>],
    ) -> (Vec<PreparedCell>, Vec<usize>, Durability) {
        let now = now_ms();
        let mut cells = Vec::new();
        let mut ok = Vec::new();
        for (i, m) in group {
            let mark = cells.len();
            match self.prepare(t, m, now, &mut cells) {
                Ok(()) => ok.push(*i),
                Err(e) => {
                    cells.truncate(mark);
                    if let Some(slot) = results.get_mut(*i) {
                        *slot = Some(Err(e));
                    }
                }
            }
        }
        let durability = strongest(
            group
                .iter()
                .filter(|(i, _)| ok.binary_search(i).is_ok())
                .map(|(_, m)| m.durability()),
        );
        (cells, ok, durability)
    }
}

/// The number of runs of consecutive cells of one region.
fn runs_by_region(cells: &[PreparedCell]) -> usize {
    1 + cells
        .windows(2)
        .filter(|w| matches!(w, [a, b] if !Arc::ptr_eq(&a.region, &b.region)))
        .count()
}

/// About how many cells a mutation writes.
pub(super) fn cell_hint(m: &Mutation) -> usize {
    match m {
        Mutation::Put(p) => p.cells().len(),
        Mutation::Delete(d) => d.kinds.len().max(1),
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

fn check_same_row(rm: &RowMutations) -> Result<()> {
    if rm.mutations.is_empty() {
        return Err(Error::bad_argument(
            "row mutations need at least one mutation",
        ));
    }
    if rm.mutations.iter().any(|m| m.row() != &rm.row) {
        return Err(Error::bad_argument(
            "every mutation of a RowMutations must name its row",
        ));
    }
    Ok(())
}

/// True when `hooks` are known to do nothing for a write of `muts` (see
/// [`RegionHooks::skips_mutation_hooks`]): the write then takes the unhooked path.
///
/// [`RegionHooks::skips_mutation_hooks`]: crate::coprocessor::RegionHooks::skips_mutation_hooks
fn skips_hooks(hooks: &dyn crate::coprocessor::RegionHooks, muts: &[Mutation]) -> bool {
    let puts = muts.iter().any(|m| matches!(m, Mutation::Put(_)));
    let deletes = muts.iter().any(|m| matches!(m, Mutation::Delete(_)));
    hooks.skips_mutation_hooks(puts, deletes)
}
