//! The hooked-write clock's memory: for any row of any table, a bound on the timestamp of
//! its last hooked write, kept in a fixed table of slots (no allocation, no lock, one atomic
//! per row touched).
//!
//! A hooked write's cells are stamped before its batch hooks run, so a row written twice in
//! one millisecond must take two timestamps: the second write waits until the wall clock
//! passes the first's (see `WritePipeline::hooked_now`). Rows are hashed to slots; a slot
//! holds the last timestamp recorded in it and a tag of the row that recorded it (more hash
//! bits), or the tag [`SHARED`] when two rows recorded the same timestamp in it. A row whose
//! tag the slot does not hold was last written at least a millisecond before the slot's
//! timestamp, so it waits only for that millisecond, which has usually passed: before the
//! tag, rows sharing a slot waited for each other, and 100-row batches of distinct rows
//! waited for a millisecond in one batch of four (bench `plugins`).
//!
//! Invariant (checked against a model in the tests, and under concurrent writers):
//! [`RowClock::bound`] of a row is never below the last timestamp [`RowClock::record`]
//! recorded for it, for timestamps within 2^42 ms (139 years) of the clock's origin (the
//! hooked-write clock records the wall clock's, at most a second ahead). A slot never
//! written bounds its rows at 0, so a wall clock stepped back below the engine's start
//! makes no row of it wait.

use crate::cell::Timestamp;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of a slot for the row's tag; the rest hold the timestamp (ms after the clock's
/// origin: 2^42 ms is 139 years).
const TAG_BITS: u32 = 22;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// The largest timestamp offset a slot holds; later ones are recorded as this (with the
/// tag [`SHARED`]: every row of the slot then waits for it, although not for the
/// timestamp itself: the invariant's range ends here).
const MAX_OFFSET: u64 = u64::MAX >> TAG_BITS;
/// The tag of a slot two rows recorded the same timestamp in: it bounds every row.
const SHARED: u64 = 0;

/// The per-row memory of the hooked-write clock (see the module doc).
pub(crate) struct RowClock {
    /// Timestamps are kept as offsets from here (a millisecond before the clock was made);
    /// a recorded offset is at least 1, so a slot of 0 was never written.
    origin: Timestamp,
    slots: Box<[AtomicU64]>,
}

/// A row's place in the clock: its slot and its tag.
#[derive(Clone, Copy)]
struct Place {
    slot: usize,
    tag: u64,
}

impl RowClock {
    /// A clock of `slots` slots (at least one) for timestamps from about `origin` on (the
    /// engine's start; earlier ones are bounded by `origin`).
    pub(crate) fn new(slots: usize, origin: Timestamp) -> Self {
        RowClock {
            origin: origin.saturating_sub(1),
            slots: (0..slots.max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn place(&self, hash: u64) -> Place {
        let n = self.slots.len() as u64;
        // The slot from the low bits, the tag from the high ones (never SHARED).
        let tag = (hash >> (64 - TAG_BITS)).max(1);
        Place {
            slot: (hash % n) as usize,
            tag,
        }
    }

    /// A bound on the timestamp of the last hooked write recorded for the row of `hash`:
    /// at most the slot's latest, a millisecond below it for a row that did not write it
    /// (0 when the slot was never written).
    pub(crate) fn bound(&self, hash: u64) -> Timestamp {
        let p = self.place(hash);
        let Some(slot) = self.slots.get(p.slot) else {
            return 0;
        };
        let v = slot.load(Ordering::Acquire);
        if v == 0 {
            return 0;
        }
        let (offset, tag) = (v >> TAG_BITS, v & TAG_MASK);
        let offset = if tag == p.tag || tag == SHARED {
            offset
        } else {
            // Another row holds the slot: this one was recorded before its timestamp.
            offset.saturating_sub(1)
        };
        self.origin.saturating_add(offset)
    }

    /// Records that a hooked write of the row of `hash` took `ts`.
    pub(crate) fn record(&self, hash: u64, ts: Timestamp) {
        let p = self.place(hash);
        let Some(slot) = self.slots.get(p.slot) else {
            return;
        };
        // At least 1: a slot of 0 is one never written (a timestamp at or before the origin
        // is bounded by the origin's next millisecond).
        let offset = ts.saturating_sub(self.origin).max(1);
        let (offset, tag) = if offset > MAX_OFFSET {
            (MAX_OFFSET, SHARED)
        } else {
            (offset, p.tag)
        };
        // The closure always returns Some: the update cannot fail.
        let _ = slot.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
            let (held, held_tag) = (v >> TAG_BITS, v & TAG_MASK);
            Some(if offset > held {
                // Every row the slot held was written before `offset`.
                (offset << TAG_BITS) | tag
            } else if offset == held && held_tag != tag {
                (held << TAG_BITS) | SHARED
            } else {
                // The slot's rows other than its tag's were written before `held`, and this
                // one at or before it: the slot already bounds it.
                v
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    const ORIGIN: Timestamp = 1_700_000_000_000;

    proptest! {
        /// Against a model of every row's last recorded timestamp, with few slots (rows
        /// share them) and hashes that share tags too: the bound never falls below it.
        #[test]
        fn bound_is_never_below_the_rows_last_write(
            slots in 1usize..6,
            writes in prop::collection::vec((0u64..24, 0u64..48), 1..200),
        ) {
            let clock = RowClock::new(slots, ORIGIN);
            let mut model: HashMap<u64, Timestamp> = HashMap::new();
            let mut slot_newest: HashMap<u64, Timestamp> = HashMap::new();
            // Rows 0..24 hashed so that some share a slot and a few share a tag.
            let hash = |row: u64| (row % 5) << (64 - TAG_BITS) | row.wrapping_mul(7);
            for (row, dt) in writes {
                // Mostly near the origin; a few before it, at it and at the range's end.
                let ts = match dt {
                    40 => 0,
                    41 => ORIGIN - 2,
                    42 => ORIGIN - 1,
                    43 => ORIGIN,
                    44 => ORIGIN - 1 + MAX_OFFSET - 1,
                    _ => ORIGIN + dt,
                };
                clock.record(hash(row), ts);
                let last = model.entry(row).or_insert(0);
                *last = (*last).max(ts);
                let slot = |r: u64| hash(r) % slots as u64;
                let newest = slot_newest.entry(slot(row)).or_insert(0);
                *newest = (*newest).max(ts);
                for (r, t) in &model {
                    let bound = clock.bound(hash(*r));
                    prop_assert!(bound >= *t, "row {r}: bound {bound} below {t}");
                    // Never above the newest write of its slot (one at or before the
                    // origin counts as the origin's next millisecond).
                    let newest = slot_newest.get(&slot(*r)).copied().unwrap_or(0);
                    prop_assert!(bound <= newest.max(ORIGIN), "row {r}: bound {bound} above {newest}");
                }
            }
        }
    }

    #[test]
    fn a_row_sharing_a_slot_waits_only_when_the_slot_is_shared_in_its_millisecond() {
        let clock = RowClock::new(1, ORIGIN);
        let (a, b, c) = (1u64 << 60, 2u64 << 60, 3u64 << 60);
        assert_eq!(clock.bound(a), 0, "a slot never written");
        clock.record(a, ORIGIN + 10);
        assert_eq!(clock.bound(a), ORIGIN + 10);
        // b was never written: it was written (if ever) before a's millisecond.
        assert_eq!(clock.bound(b), ORIGIN + 9);
        clock.record(b, ORIGIN + 10);
        assert_eq!(clock.bound(c), ORIGIN + 10, "two rows in one millisecond");
        clock.record(c, ORIGIN + 11);
        assert_eq!(clock.bound(a), ORIGIN + 10);
        assert_eq!(clock.bound(c), ORIGIN + 11);
        // An older timestamp recorded later leaves the slot's bound.
        clock.record(a, ORIGIN + 5);
        assert_eq!(clock.bound(c), ORIGIN + 11);
        assert_eq!(clock.bound(a), ORIGIN + 10);
    }

    #[test]
    fn timestamps_past_the_range_bound_every_row_at_its_end() {
        let clock = RowClock::new(4, 0);
        clock.record(5, u64::MAX);
        assert_eq!(clock.bound(5 + (1 << 50)), MAX_OFFSET);
    }

    #[test]
    fn timestamps_before_the_origin_are_bounded_and_empty_slots_are_not() {
        let clock = RowClock::new(2, ORIGIN);
        clock.record(0, ORIGIN - 500);
        assert!(clock.bound(0) >= ORIGIN - 500);
        assert!(clock.bound(0) <= ORIGIN);
        assert_eq!(clock.bound(1), 0, "the other slot was never written");
    }

    /// Threads recording rising timestamps of their own rows, all in one slot: after each
    /// record, the row's bound is at least what it recorded (the compare-and-swap keeps
    /// every row's bound while the slot changes under it).
    #[test]
    fn concurrent_records_keep_every_rows_bound() {
        let clock = std::sync::Arc::new(RowClock::new(1, ORIGIN));
        let threads: Vec<_> = (1..=4u64)
            .map(|t| {
                let clock = clock.clone();
                std::thread::spawn(move || {
                    let hash = t << 60;
                    for i in 0..20_000u64 {
                        let ts = ORIGIN + i / 3 + t % 2;
                        clock.record(hash, ts);
                        assert!(clock.bound(hash) >= ts, "thread {t}, write {i}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
