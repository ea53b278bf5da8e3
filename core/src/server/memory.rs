//! The global MemStore budget: all MemStores of the engine together stay near
//! [`Config::global_memstore_size`](super::Config::global_memstore_size).
//!
//! Each region flushes by itself at its flush size, but many regions each below it can still
//! hold more than the process can afford. As HBase's `MemStoreFlusher` does, a write that
//! finds the total over the budget forces flushes of the largest MemStores (until the total
//! would be under the lower limit) and waits until the total is back under the budget.
//!
//! Invariants: the total is never tracked, only summed from the regions (a flush, a failed
//! flush that puts cells back, WAL replay and a dropped table all change it, and a derived
//! sum cannot drift); summing costs one pass over the regions, so a write sums only after
//! about a sixteenth of the budget has been written since the last sum, or while the budget
//! is known to be exceeded (then every writer waits and sums until it is not). Hence the
//! total may pass the budget by that step plus the writes in flight when the flag is set.
//! A writer waits at most [`Config::memstore_wait_ms`](super::Config::memstore_wait_ms): if
//! flushes keep failing (a full disk) the write fails with [`Error::Busy`] before it touches
//! the WAL, instead of hanging; closing the engine ends every wait.

use super::Engine;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a waiting writer looks at the total again.
const WAIT_STEP: Duration = Duration::from_millis(5);

impl Engine {
    /// Bytes held by every MemStore of the engine (active and being flushed).
    pub fn global_memstore_size(&self) -> u64 {
        self.tables
            .read()
            .values()
            .flat_map(|t| t.regions.read().clone())
            .map(|r| r.memstore_size() as u64)
            .sum()
    }

    /// Writes that waited for the global MemStore budget since the engine opened.
    pub fn memstore_blocked_writes(&self) -> u64 {
        self.memstore_blocked_writes.load(Ordering::Relaxed)
    }

    /// Called by a write about to add `incoming` bytes to MemStores: when the total is over
    /// the budget, forces flushes of the largest MemStores and waits until it is under, or
    /// fails with [`Error::Busy`] after `memstore_wait_ms`.
    pub(crate) async fn reserve_memstore(self: &Arc<Self>, incoming: u64) -> Result<()> {
        let budget = self.config.global_memstore_size.max(1);
        let step = (budget / 16).max(1);
        let unchecked = self
            .memstore_unchecked
            .fetch_add(incoming, Ordering::Relaxed)
            .saturating_add(incoming);
        if unchecked < step && !self.memstore_over.load(Ordering::Acquire) {
            return Ok(());
        }
        self.memstore_unchecked.store(0, Ordering::Relaxed);
        let mut waited = false;
        let deadline = Instant::now() + Duration::from_millis(self.config.memstore_wait_ms);
        loop {
            let total = self.global_memstore_size();
            if total < budget {
                self.memstore_over.store(false, Ordering::Release);
                return Ok(());
            }
            self.check_open()?;
            if Instant::now() >= deadline {
                return Err(Error::Busy(format!(
                    "MemStores hold {total} bytes, over the global budget of {budget}, after \
                     waiting {} ms for flushes",
                    self.config.memstore_wait_ms
                )));
            }
            // Every writer now waits here, not only the one that summed.
            self.memstore_over.store(true, Ordering::Release);
            if !waited {
                waited = true;
                self.memstore_blocked_writes.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(total, budget, "global MemStore budget reached; writes wait");
            }
            let lower = (budget as f64 * self.config.global_memstore_lower_limit) as u64;
            self.flush_largest(total.saturating_sub(lower));
            tokio::time::sleep(WAIT_STEP).await;
        }
    }

    /// Starts flushes of the regions with the largest MemStores (those not flushing already)
    /// until they hold at least `bytes`.
    fn flush_largest(self: &Arc<Self>, bytes: u64) {
        let mut regions: Vec<_> = self
            .tables
            .read()
            .values()
            .flat_map(|t| t.regions.read().clone())
            .map(|r| (r.memstore_size() as u64, r))
            .filter(|(size, _)| *size > 0)
            .collect();
        regions.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
        let mut freed = 0u64;
        for (size, region) in regions {
            if freed >= bytes {
                break;
            }
            // A region already flushing counts: its snapshot is about to be freed.
            freed = freed.saturating_add(size);
            self.maybe_flush(&region, 0);
        }
    }
}
