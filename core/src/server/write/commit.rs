//! Step 5 of the write pipeline, the commit: one WAL record and one sequence id for a batch
//! and every write its hooks added (across tables), MemStore inserts, `post_batch_mutate`,
//! publication; and the hooked-write clock that stamps hooked writes.
//!
//! Order of a commit: row locks held by the caller -> the MemStore budget and store-file
//! throttling (before anything is logged) -> the regions' write gates (a split or merge
//! waits for them) -> sequence id from MVCC and WAL append of the whole batch as one record,
//! both under the commit lock, so WAL order is sequence order -> wait for the WAL as the
//! durability asks -> MemStore inserts -> `post_batch_mutate` -> MVCC completes and the read
//! point passes the batch -> acknowledge. Invariant: a sequence id is always completed (a
//! guard completes it if the caller's future is dropped), so the read point never stalls.

use super::prepare::{self, Delta, DeltaOptions};
use super::strongest;
use crate::cell::now_ms;
use crate::cell::Timestamp;
use crate::coprocessor::AddedOp;
use crate::error::{Error, Result};
use crate::mvcc::Mvcc;
use crate::ops::{Get, Mutation};
use crate::region::PreparedCell;
use crate::region::Region;
use crate::server::hooks::lifecycle::observed_wal_append;
use crate::server::hooks::{
    invalid_added, target_of, HookCalls, LockPlan, PostApply, PreBatch, RowIncrements,
    RELOCK_ATTEMPTS,
};
use crate::server::shared::TableState;
use crate::server::validate;
use crate::server::write::WritePipeline;
use crate::wal::{Durability, EditRef, UnsealedFrame, WalEdit, WalRecord};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

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

impl WritePipeline {
    /// Commits prepared cells of regions of any of `tables` as one atomic batch: one WAL
    /// record, one sequence id. The caller holds the rows' locks. With `post`, runs the
    /// `post_batch_mutate` hooks after the MemStore inserts and before the batch is visible;
    /// returns their error, if any, as `Ok(Some(e))` (the batch is committed then).
    pub(crate) async fn commit(
        &self,
        tables: &[&TableState],
        mut cells: Vec<PreparedCell>,
        durability: Durability,
        post: Option<PostApply<'_>>,
    ) -> Result<Option<Error>> {
        self.shared.check_open()?;
        if cells.is_empty() {
            return Ok(None);
        }
        let incoming = cells.iter().map(|c| c.cell.heap_size() as u64).sum();
        self.upkeep.reserve_memstore(incoming).await?;
        self.upkeep
            .throttle_writes(cells.iter().map(|c| (&c.region, &c.store)))
            .await;
        let gates = self.enter_regions(tables, &mut cells).await?;
        // Encoded outside the commit lock; under it only the sequence id is written. An
        // engine observer of the WAL gets the batch as a record.
        let observes_wal = self
            .shared
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
            let _g = self.shared.commit_lock.lock();
            let seq = self.shared.mvcc.begin();
            let guard = SeqGuard {
                mvcc: &self.shared.mvcc,
                seq,
            };
            let ticket = match log {
                Log::Skip => None,
                Log::Frame(mut frame) => Some(
                    self.shared
                        .wal
                        .append_unsealed(&mut frame, seq, durability)?,
                ),
                Log::Record(mut rec) => {
                    rec.seq = seq;
                    for e in &mut rec.edits {
                        e.cell.key.seq = seq;
                    }
                    Some(observed_wal_append(&self.shared.config, rec, |rec| {
                        self.shared.wal.append(rec, durability)
                    })?)
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
            region
                .write_requests
                .fetch_add(mutations(cells.iter()), Ordering::Relaxed);
        } else if runs_by_region(&cells) == regions.len() {
            // Each region's cells form one run (a batch's own cells, then each hook's added
            // rows, as usual): the runs are applied as they lie.
            for run in cells.chunk_by(|a, b| Arc::ptr_eq(&a.region, &b.region)) {
                if let Some(first) = run.first() {
                    first.region.apply(run);
                    first
                        .region
                        .write_requests
                        .fetch_add(mutations(run.iter()), Ordering::Relaxed);
                }
            }
        } else {
            for region in &regions {
                let mine: Vec<&PreparedCell> = cells
                    .iter()
                    .filter(|c| Arc::ptr_eq(&c.region, region))
                    .collect();
                region.apply(&mine);
                region
                    .write_requests
                    .fetch_add(mutations(mine.iter().copied()), Ordering::Relaxed);
            }
        }
        // In the MemStore, not yet visible: the read point waits for `guard`.
        let hook_err = match post {
            Some(p) => p.run().await.err(),
            None => None,
        };
        drop(guard);
        drop(gates);
        self.shared.mvcc.wait_for(seq).await;
        for region in &regions {
            let t = tables
                .iter()
                .find(|t| t.name == region.table)
                .or(tables.first());
            let flush_size = t
                .and_then(|t| t.descriptor.read().memstore_flush_size)
                .unwrap_or(self.shared.config.memstore_flush_size);
            self.upkeep.maybe_flush(region, flush_size);
        }
        if self.commits.fetch_add(1, Ordering::Relaxed) % 1024 == 1023 {
            self.upkeep.flush_if_wal_too_long();
        }
        Ok(hook_err)
    }

    /// Takes the write gates of the regions `cells` go to, in region-id order, and returns
    /// them held. A cell whose region a split or merge retired is re-routed to the region
    /// that now holds its row (the caller holds the row locks, so what it read from the old
    /// region is still current), and the gates are taken again. A local row
    /// ([`crate::keys::local`]) must be in the region of its owner, keyed with that region's
    /// start: its hooks keyed it with the start of the region they ran in, which a split or
    /// merge may have replaced since, so under the gates every local row is checked and, if
    /// misplaced, re-keyed for its owner's region.
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
            let settled = regions.iter().all(|r| !r.is_retired())
                && cells.iter().all(|c| !is_local(c) || placed(c));
            if settled {
                return Ok(gates);
            }
            drop(gates);
            for c in cells.iter_mut() {
                let local = is_local(c);
                if (!local && !c.region.is_retired()) || (local && placed(c)) {
                    continue;
                }
                let t = tables
                    .iter()
                    .find(|t| t.name == c.region.table)
                    .ok_or_else(|| Error::TableNotFound(c.region.table.to_string()))?;
                let region = if local {
                    let row = &c.cell.key.row;
                    let owner = crate::keys::local::owner(row).ok_or_else(lost_owner)?;
                    let region = t.online_region(owner)?;
                    c.cell.key.row =
                        crate::keys::local::rekey_to(row, &region.start).ok_or_else(lost_owner)?;
                    region
                } else {
                    t.online_region(&c.cell.key.row)?
                };
                c.store = validate::store_of(t, &region, &c.store.family)?;
                c.region = region;
            }
        }
    }

    /// Commits a batch's prepared `cells` (of the operations `written`; the caller holds the
    /// row locks of `held`, rows of `t`, and the plan's extra rows) with the writes its hooks
    /// `added`: locks the rows those write and the rows required `absent`, checks the latter,
    /// prepares the added writes (increments read their counters under the lock) and commits
    /// everything as one WAL record and one sequence id, running `post_batch_mutate` before
    /// visibility. Returns that hook's error as `Ok(Some(e))`: the batch committed. When a
    /// row to lock is held by another writer out of lock order, sets `plan` to relock and
    /// returns an error having written nothing (see [`LockPlan`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn commit_with_added(
        &self,
        calls: &HookCalls<'_>,
        held: &[Bytes],
        written: &[&Mutation],
        mut cells: Vec<PreparedCell>,
        durability: Durability,
        pre: PreBatch,
        plan: &mut LockPlan,
        now: crate::cell::Timestamp,
    ) -> Result<Option<Error>> {
        let t = calls.table();
        let post = calls.post_apply(written);
        let PreBatch {
            added,
            absent,
            local_absent,
            ..
        } = pre;
        if added.is_empty() && absent.is_empty() && local_absent.is_empty() {
            return self.commit(&[t], cells, durability, Some(post)).await;
        }
        // A local row's lock is taken on its key without a region start: writers racing for
        // it lock one key whichever region their hooks ran in.
        let unplaced = local_absent
            .iter()
            .map(|(r, _)| crate::keys::local::rekey_to(r, b"").ok_or_else(lost_owner))
            .collect::<Result<Vec<Bytes>>>()?;
        let names: Vec<&str> = added
            .iter()
            .map(|(target, _)| target_of(t, target).key.as_str())
            .collect();
        // The keys whose locks and clock turns order the added writes.
        let orders: Vec<Bytes> = added.iter().map(|(_, op)| order_key(op)).collect();
        // Owned rows take no lock of their own: their owner's lock is held.
        let more: Vec<(&str, &[u8])> = names
            .iter()
            .zip(&added)
            .zip(&orders)
            .filter(|((_, (_, op)), _)| !matches!(op, AddedOp::Owned(_)))
            .map(|((n, _), key)| (*n, key.as_ref()))
            .chain(
                absent
                    .iter()
                    .map(|(target, row, _)| (target_of(t, target).key.as_str(), row.as_ref())),
            )
            .chain(unplaced.iter().map(|r| (t.key.as_str(), r.as_ref())))
            .collect();
        let bounded = plan.attempts >= RELOCK_ATTEMPTS;
        let wait = Duration::from_millis(self.shared.config.row_lock_wait_ms);
        let locked = if more.is_empty() {
            // Only owned rows were added: every lock they need is held.
            Ok(None)
        } else {
            self.locks
                .lock_more(
                    held.iter()
                        .map(|r| (t.key.as_str(), r.as_ref()))
                        .chain(plan.extra.iter().map(|(n, r)| (n.as_str(), r.as_ref()))),
                    &more,
                    bounded.then_some(wait),
                )
                .await
                .map(Some)
        };
        let _extra = match locked {
            Ok(g) => g,
            Err(_) if !bounded => {
                plan.attempts += 1;
                plan.request_relock();
                for (n, r) in &more {
                    if !plan
                        .extra
                        .iter()
                        .any(|(pn, pr)| pn == n && pr.as_ref() == *r)
                    {
                        plan.extra.push((n.to_string(), Bytes::copy_from_slice(r)));
                    }
                }
                return Err(Error::Busy("relocking in lock order".into()));
            }
            Err(i) => {
                return Err(Error::RowLockTimeout {
                    table: more.get(i).map(|(n, _)| n.to_string()).unwrap_or_default(),
                    row: more
                        .get(i)
                        .map(|(_, r)| String::from_utf8_lossy(r).into_owned())
                        .unwrap_or_default(),
                    waited_ms: self.shared.config.row_lock_wait_ms,
                })
            }
        };
        for (row, may_hold) in &local_absent {
            // Read where the row is now: in the region holding its owner, with its start.
            let owner = crate::keys::local::owner(row).ok_or_else(lost_owner)?;
            let region = t.online_region(owner)?;
            let key = crate::keys::local::rekey_to(row, &region.start).ok_or_else(lost_owner)?;
            let get = Get::new(&key).add_family(crate::keys::local::LOCAL_FAMILY);
            let read_point = self.shared.mvcc.read_point();
            let found = self.reads.read_row_in(&region, &get, read_point)?;
            if !found.is_empty() && !may_hold.as_ref().is_some_and(|o| o.owns(&found)) {
                return Err(Error::UniqueViolation {
                    table: t.name.to_string(),
                    row: String::from_utf8_lossy(&key).into_owned(),
                });
            }
        }
        for (target, row, may_hold) in &absent {
            let target: &TableState = target.as_deref().unwrap_or(t);
            let region = target.online_region(row)?;
            let found =
                self.reads
                    .read_row_in(&region, &Get::new(row), self.shared.mvcc.read_point())?;
            if !found.is_empty() && !may_hold.as_ref().is_some_and(|o| o.owns(&found)) {
                return Err(Error::UniqueViolation {
                    table: target.name.to_string(),
                    row: String::from_utf8_lossy(row).into_owned(),
                });
            }
        }
        // One timestamp for the whole batch: the added writes take the batch's own. A row
        // an added put or delete writes must not have been written at or after it (a delete
        // marker of the same millisecond would hide a put): if it was, nothing is written
        // and the caller runs the batch again past that time.
        let added_rows: Vec<(&TableState, &Bytes)> = added
            .iter()
            .zip(&orders)
            .filter_map(|((target, op), key)| match op {
                AddedOp::Mutation(_) => Some((target.as_deref().unwrap_or(t), key)),
                // An owned row's writes are ordered by its owner's clock turn.
                AddedOp::Increment(_) | AddedOp::Owned(_) => None,
            })
            .collect();
        let last = added_rows
            .iter()
            .map(|(target, row)| self.row_clock.bound(self.row_hash(target, row)))
            .max()
            .unwrap_or(0);
        if last >= now && plan.attempts < RELOCK_ATTEMPTS {
            plan.attempts += 1;
            plan.min_ts = plan.min_ts.max(last);
            plan.request_relock();
            return Err(Error::Busy(
                "retrying past an added row's last write".into(),
            ));
        }
        let mut durability = durability;
        // Increments of one row are resolved together, amounts of one counter summed, so
        // that two increments of a counter in one batch do not read the same old value.
        let mut incs: BTreeMap<(&str, &Bytes), RowIncrements<'_>> = BTreeMap::new();
        let mut tables: Vec<&TableState> = vec![t];
        for ((target, op), name) in added.iter().zip(&names) {
            let target: &TableState = target.as_deref().unwrap_or(t);
            if !tables.iter().any(|x| x.name == target.name) {
                tables.push(target);
            }
            match op {
                AddedOp::Mutation(m) | AddedOp::Owned(m) => {
                    durability = strongest([durability, m.durability()]);
                    prepare::prepare(&self.reads, target, m, now, &mut cells)
                        .map_err(|e| invalid_added(&target.name, e))?;
                }
                AddedOp::Increment(inc) => {
                    durability = strongest([durability, inc.durability]);
                    let slot = incs
                        .entry((*name, &inc.row))
                        .or_insert_with(|| (target, BTreeMap::new()));
                    for (f, q, amount) in &inc.columns {
                        let sum = slot.1.entry((f, q)).or_insert(0);
                        *sum = sum.wrapping_add(*amount);
                    }
                }
            }
        }
        // Added writes go to other rows, often other regions that flush apart: only a WAL
        // record keeps them atomic with the batch across a crash, so a SKIP_WAL batch with
        // added writes is logged as ASYNC_WAL (see `Durability::SkipWal`).
        if !added.is_empty() && durability == crate::wal::Durability::SkipWal {
            durability = crate::wal::Durability::AsyncWal;
        }
        for ((_, row), (target, columns)) in incs {
            let deltas = columns
                .into_iter()
                .map(|((f, q), a)| (f, q, Delta::Add(a)))
                .collect();
            prepare::resolve_deltas(
                &self.reads,
                target,
                row,
                deltas,
                DeltaOptions::default(),
                now,
                &mut cells,
            )
            .map_err(|e| invalid_added(&target.name, e))?;
        }
        // The added cells are stamped against their regions' clocks, which other writers
        // may have moved past `now` while the hooks ran: the rows record the latest stamp
        // the batch wrote, or their next hooked write could take a delete marker's
        // millisecond and be hidden by it.
        let stamped = super::stamped_at(now, true, &cells);
        let out = self.commit(&tables, cells, durability, Some(post)).await;
        for (target, row) in added_rows.into_iter().filter(|_| out.is_ok()) {
            self.row_clock.record(self.row_hash(target, row), stamped);
        }
        out
    }

    /// Where `row` of `t` is in the hooked-write clock.
    pub(in crate::server) fn row_hash(&self, t: &TableState, row: &[u8]) -> u64 {
        // XXH3 of the row seeded with the table's: slots only need spreading, and SipHash
        // was 3% of an indexed put.
        xxhash_rust::xxh3::xxh3_64_with_seed(row, t.key_hash)
    }

    /// The timestamp of a hooked write of `rows` (the caller holds their locks): the wall
    /// clock, once it has passed the timestamp of the rows' previous hooked write (waiting
    /// for the next millisecond when needed). A hooked write's cells are stamped before its
    /// `pre_batch_mutate` hooks run (they read the row as the batch leaves it), so a row
    /// deleted and written again in one millisecond would otherwise have its put hidden by
    /// the delete marker. The clock is never run ahead of the wall clock: a later write
    /// stamped by the wall clock (a delete) still covers this one. The clock keeps a bound
    /// per row ([`super::row_clock`]): at most the newest write of the row's slot, a
    /// millisecond below it for a row that did not make it, so a row waits for another's
    /// millisecond only when two others shared its slot in it.
    pub(in crate::server) async fn hooked_now<'r>(
        &self,
        t: &TableState,
        rows: impl Iterator<Item = &'r Bytes>,
        min: Timestamp,
    ) -> Timestamp {
        let last = rows
            .map(|r| self.row_clock.bound(self.row_hash(t, r)))
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
            self.row_clock.record(self.row_hash(t, r), now);
        }
    }
}

/// The number of runs of consecutive cells of one region.
/// The write requests `cells` count for their region, as HBase counts them: one per
/// mutation, a run of cells of one row (a batch of 100 rows is 100 writes).
fn mutations<'a>(cells: impl Iterator<Item = &'a PreparedCell>) -> u64 {
    let mut n = 0;
    let mut row: Option<&Bytes> = None;
    for c in cells {
        if row != Some(&c.cell.key.row) {
            n += 1;
            row = Some(&c.cell.key.row);
        }
    }
    n
}

fn runs_by_region(cells: &[PreparedCell]) -> usize {
    1 + cells
        .windows(2)
        .filter(|w| matches!(w, [a, b] if !Arc::ptr_eq(&a.region, &b.region)))
        .count()
}

/// The key whose lock and clock turn order the writes of an added op's row: for a write of
/// local rows ([`crate::keys::local`]) the row's key without its region start, since a
/// split or merge re-keys the row under its writers and they must all take one lock and
/// one clock turn; any other row's key as it is.
fn order_key(op: &AddedOp) -> Bytes {
    let local = |f: &[u8]| crate::schema::is_local_family(f);
    let writes_local = match op {
        AddedOp::Mutation(Mutation::Put(p)) => p.cells().len() > 0 && p.cells().all(|c| local(c.0)),
        AddedOp::Mutation(Mutation::Delete(d)) => {
            !d.kinds().is_empty() && d.kinds().iter().all(|k| local(k.family()))
        }
        _ => false,
    };
    writes_local
        .then(|| crate::keys::local::rekey_to(op.row(), b""))
        .flatten()
        .unwrap_or_else(|| op.row().clone())
}

/// The error of a local row whose key does not parse (its owner is lost).
fn lost_owner() -> Error {
    Error::bad_argument("a local row lost its owner")
}

/// True for a cell of the reserved family of local rows.
fn is_local(c: &PreparedCell) -> bool {
    crate::schema::is_local_family(&c.store.family)
}

/// True when local-row cell `c` is where it belongs: in a live region that holds its owner,
/// keyed with that region's start.
fn placed(c: &PreparedCell) -> bool {
    !c.region.is_retired()
        && crate::keys::local::parts(&c.cell.key.row)
            .is_some_and(|(start, _, owner)| start == c.region.start && c.region.contains(owner))
}
