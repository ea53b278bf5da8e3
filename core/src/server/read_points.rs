//! The registry of open readers' read points, which flushes and compactions consult so that
//! they keep every cell version a reader may still need.
//!
//! Invariant: [`ReadPoints::smallest`] is never above the read point of a reader that
//! registered before it returned. A reader registers by locking one shard, taking the
//! current read point from [`Mvcc`] under that lock, and counting it in the shard;
//! `smallest` locks every shard, then reads the current read point, and returns the
//! minimum. So a reader either is counted, or takes its read point after `smallest` read
//! the current one (read points only grow), at or above the answer.
//!
//! Readers spread over [`SHARDS`] shards by thread (each thread keeps one shard for life),
//! so concurrent gets on different threads rarely touch the same lock or cache line;
//! `smallest` (one per flush or compaction) pays for locking them all.

use crate::mvcc::Mvcc;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Shards of the registry.
pub(crate) const SHARDS: usize = 16;

/// One shard: read point and count pairs, few at a time (the readers of one thread).
#[derive(Default)]
#[repr(align(128))]
struct Shard(Mutex<Vec<(u64, usize)>>);

/// Read points of open readers (gets and scans), counted per point.
pub(crate) struct ReadPoints {
    shards: [Shard; SHARDS],
}

/// One registration: the shard it is counted in and the read point.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Registration {
    shard: usize,
    /// The registered read point.
    pub(crate) point: u64,
}

fn my_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

impl Default for ReadPoints {
    fn default() -> Self {
        ReadPoints {
            shards: std::array::from_fn(|_| Shard::default()),
        }
    }
}

impl ReadPoints {
    /// Registers the current read point of `mvcc`; pair with [`ReadPoints::release`].
    pub(crate) fn register(&self, mvcc: &Mvcc) -> Registration {
        let shard = my_shard();
        let mut points = self.shards[shard].0.lock();
        let point = mvcc.read_point();
        match points.iter_mut().find(|(p, _)| *p == point) {
            Some((_, n)) => *n += 1,
            None => points.push((point, 1)),
        }
        Registration { shard, point }
    }

    /// Releases a registration made by [`ReadPoints::register`] (on any thread).
    pub(crate) fn release(&self, r: Registration) {
        let mut points = self.shards[r.shard].0.lock();
        if let Some(i) = points.iter().position(|(p, _)| *p == r.point) {
            points[i].1 -= 1;
            if points[i].1 == 0 {
                points.swap_remove(i);
            }
        }
    }

    /// The smallest registered read point, or `mvcc`'s current one when smaller (or when
    /// none is registered).
    pub(crate) fn smallest(&self, mvcc: &Mvcc) -> u64 {
        let guards: Vec<_> = self.shards.iter().map(|s| s.0.lock()).collect();
        let current = mvcc.read_point();
        guards
            .iter()
            .flat_map(|g| g.iter().map(|(p, _)| *p))
            .fold(current, u64::min)
    }

    /// Registered readers (for tests).
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.lock().iter().map(|(_, n)| n).sum::<usize>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Against a model (a map of point -> count): registrations and releases in any
        /// order, from several threads' shards, leave `smallest` equal to the model's.
        #[test]
        fn smallest_matches_a_counted_map(ops in prop::collection::vec((0u8..3, 0usize..8), 1..200)) {
            let mvcc = Mvcc::new(0);
            let points = ReadPoints::default();
            let mut held: Vec<Registration> = Vec::new();
            let mut model: BTreeMap<u64, usize> = BTreeMap::new();
            for (op, which) in ops {
                match op {
                    0 => {
                        let r = points.register(&mvcc);
                        *model.entry(r.point).or_default() += 1;
                        held.push(r);
                    }
                    1 if !held.is_empty() => {
                        let r = held.swap_remove(which % held.len());
                        points.release(r);
                        let n = model.get_mut(&r.point).map(|n| { *n -= 1; *n });
                        if n == Some(0) {
                            model.remove(&r.point);
                        }
                    }
                    _ => {
                        let w = mvcc.begin();
                        mvcc.complete(w);
                    }
                }
                let current = mvcc.read_point();
                let expected = model.keys().next().map_or(current, |p| (*p).min(current));
                prop_assert_eq!(points.smallest(&mvcc), expected);
                prop_assert_eq!(points.count(), held.len());
            }
        }
    }

    #[test]
    fn registrations_from_many_threads_are_all_released() {
        let mvcc = Mvcc::new(7);
        let points = ReadPoints::default();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        let r = points.register(&mvcc);
                        assert_eq!(points.smallest(&mvcc), 7);
                        points.release(r);
                    }
                });
            }
        });
        assert_eq!(points.count(), 0);
    }
}
