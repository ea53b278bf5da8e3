//! [`RowClock`]: keeps successive writes of one row in distinct milliseconds.
//!
//! The engine stamps a batch with the millisecond it reads after `pre_batch_mutate`, and a
//! delete marker hides every put at or below its timestamp. A link deleted and put again
//! within one millisecond would stay hidden. Where a relation observer writes a row, it
//! calls [`RowClock::wait_past`] under the row lock in `pre_batch_mutate` and
//! [`RowClock::record`] in `post_batch` (row lock still held, the batch's timestamps all
//! taken). Invariant: every timestamp of a row's next batch is above every timestamp of
//! its previous one. Rows share slots by hash: a shared slot can cost a wait, never a miss.

use basalt_core::server::now_ms;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
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

    /// Returns once the engine's clock has passed the last write of every row in `rows`.
    pub async fn wait_past<'a>(&self, rows: impl IntoIterator<Item = &'a [u8]>) {
        let last = self.last(rows);
        while now_ms() <= last {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// Records that a write of `rows` is done: its timestamps are at most the clock now.
    pub fn record<'a>(&self, rows: impl IntoIterator<Item = &'a [u8]>) {
        let now = now_ms();
        for r in rows {
            self.slot(r).fetch_max(now, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_recorded_row_waits_for_the_next_millisecond() {
        let clock = RowClock::new(8);
        clock.record([b"a".as_slice()]);
        let recorded = clock.last([b"a".as_slice()]);
        assert!(recorded > 0);
        clock.wait_past([b"a".as_slice()]).await;
        assert!(now_ms() > recorded);
        assert_eq!(RowClock::new(8).last([b"b".as_slice()]), 0);
    }
}
