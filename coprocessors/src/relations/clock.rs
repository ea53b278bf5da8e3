//! [`RowClock`]: keeps a row's writes after a delete marker in a later millisecond.
//!
//! A delete marker hides every put at or below its timestamp, and the engine stamps a batch
//! with the millisecond it reads once it holds the row locks (`MiniBatch::now`). A link
//! deleted and put again within one millisecond would stay hidden on the source row while
//! the reverse side (written with the engine's strictly increasing timestamps for added
//! writes) shows it. So when a batch writes a marker into a relation family of a row, the
//! observer records the batch's timestamp for the row ([`RowClock::record_at`], in
//! `pre_batch_mutate`) and waits in `post_batch`, row lock still held, until the clock has
//! passed it ([`RowClock::wait_past`]). Invariant: the next batch of the row, which reads
//! its timestamp after it gets the lock, is stamped above every marker of the previous one.
//! Rows share slots by hash: a shared slot can cost a wait, never a miss. The relation
//! observers use one process-wide clock ([`RowClock::shared`]).

use basalt_core::server::now_ms;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Per row (hashed into a fixed number of slots), an upper bound of the timestamps of its
/// last write.
#[derive(Debug)]
pub struct RowClock {
    slots: Box<[AtomicU64]>,
}

impl Default for RowClock {
    fn default() -> Self {
        Self::new(4096)
    }
}

impl RowClock {
    /// A clock with `slots` slots (at least one).
    pub fn new(slots: usize) -> Self {
        RowClock {
            slots: (0..slots.max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The process-wide clock of the relation observers (65,536 slots).
    pub fn shared() -> &'static RowClock {
        static SHARED: OnceLock<RowClock> = OnceLock::new();
        SHARED.get_or_init(|| RowClock::new(1 << 16))
    }

    fn slot(&self, row: &[u8]) -> &AtomicU64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        row.hash(&mut h);
        let i = (h.finish() % self.slots.len() as u64) as usize;
        &self.slots[i]
    }

    /// The latest timestamp recorded for any of `rows` (0 when none).
    pub fn last<'a>(&self, rows: impl IntoIterator<Item = &'a [u8]>) -> u64 {
        rows.into_iter()
            .map(|r| self.slot(r).load(Ordering::Acquire))
            .max()
            .unwrap_or(0)
    }

    /// Returns once the engine's clock has passed the last marker recorded for `rows`.
    pub async fn wait_past<'a>(&self, rows: impl IntoIterator<Item = &'a [u8]>) {
        let last = self.last(rows);
        while now_ms() <= last {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// Records that `rows` got a delete marker at `ts`.
    pub fn record_at<'a>(&self, rows: impl IntoIterator<Item = &'a [u8]>, ts: u64) {
        for r in rows {
            self.slot(r).fetch_max(ts, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_recorded_row_waits_for_the_next_millisecond() {
        let clock = RowClock::new(8);
        clock.record_at([b"a".as_slice()], now_ms());
        let recorded = clock.last([b"a".as_slice()]);
        assert!(recorded > 0);
        clock.wait_past([b"a".as_slice()]).await;
        assert!(now_ms() > recorded);
        assert_eq!(RowClock::new(8).last([b"b".as_slice()]), 0);
        assert!(std::ptr::eq(RowClock::shared(), RowClock::shared()));
    }
}
