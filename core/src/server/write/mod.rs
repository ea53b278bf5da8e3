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

use super::hooks::{under_row_locks, LockPlan, PostApply};
use super::{now_ms, Engine, TableState};
use crate::cell::{CellType, StoreCell, StoreKey, Timestamp, LATEST_TIMESTAMP, MAX_ROW_LENGTH};
use crate::error::{Error, Result};
use crate::mvcc::Mvcc;
use crate::ops::{Delete, DeleteKind, Get, Increment, Mutation, Put, RowMutations};
use crate::region::{Region, Store};
use crate::wal::{Durability, EditRef, UnsealedFrame, WalEdit, WalRecord};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) use crate::region::PreparedCell;

mod atomic;
mod batch;

pub(super) use batch::cell_hint;
use batch::runs_by_region;

pub(crate) use atomic::{validate_ttl, Delta, DeltaOptions};

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
        let region = t.online_region(m.row())?;
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
        let region = t.online_region(&inc.row)?;
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
        let region = t.online_region(&row)?;
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
                    let region = t.online_region(&c.cell.key.row)?;
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
        under_row_locks!(self, t, muts.iter().map(|m| m.row()), |plan| self
            .mutate_locked(t, muts, plan)
            .await)
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
