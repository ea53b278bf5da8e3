//! Engine-wide multi-version concurrency control.
//!
//! Every write batch takes the next sequence id from [`Mvcc::begin`]; its cells carry that id.
//! The read point is the largest id such that every id at or below it has completed, so a
//! reader that filters cells by `seq <= read_point` sees whole batches or nothing, across
//! every region and table at once. [`Mvcc::advance_to`] skips ids (a region opened at run
//! time holds cells numbered by the engine that wrote them, which must be visible and below
//! every later write). Invariants: ids are handed out strictly increasing; the read point
//! never moves backwards and never passes an id that has not completed (a skipped id was
//! never handed out and counts as completed).

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use tokio::sync::watch;

/// Sequence ids and the read point.
#[derive(Debug)]
pub struct Mvcc {
    state: Mutex<State>,
    read_point: watch::Sender<u64>,
}

#[derive(Debug)]
struct State {
    next: u64,
    read_point: u64,
    completed: BTreeSet<u64>,
    /// Runs of ids skipped by [`Mvcc::advance_to`] above the read point: first -> last.
    skipped: BTreeMap<u64, u64>,
}

impl State {
    /// Moves the read point over every contiguous completed or skipped id; true if it moved.
    fn settle(&mut self) -> bool {
        let start = self.read_point;
        let mut rp = start;
        loop {
            if self.completed.remove(&(rp + 1)) {
                rp += 1;
            } else if let Some(last) = self.skipped.remove(&(rp + 1)) {
                rp = last;
            } else {
                break;
            }
        }
        self.read_point = rp;
        rp != start
    }
}

impl Mvcc {
    /// Starts with every id up to `last_seq` complete (as recovered from disk).
    pub fn new(last_seq: u64) -> Self {
        let (tx, _rx) = watch::channel(last_seq);
        Mvcc {
            state: Mutex::new(State {
                next: last_seq + 1,
                read_point: last_seq,
                completed: BTreeSet::new(),
                skipped: BTreeMap::new(),
            }),
            read_point: tx,
        }
    }

    /// Takes the next sequence id. The caller must call [`Mvcc::complete`] with it exactly once,
    /// whether or not its write succeeded, or the read point stalls.
    pub fn begin(&self) -> u64 {
        let mut s = self.state.lock();
        let seq = s.next;
        s.next += 1;
        seq
    }

    /// Marks `seq` complete and advances the read point over every contiguous completed id.
    pub fn complete(&self, seq: u64) {
        let mut s = self.state.lock();
        if seq <= s.read_point {
            return;
        }
        s.completed.insert(seq);
        if s.settle() {
            self.read_point.send_replace(s.read_point);
        }
    }

    /// Makes `seq` the last id handed out when it is past it: the ids between are never
    /// handed out and count as completed, so the read point reaches `seq` once every id
    /// handed out before has completed. Nothing when `seq` was handed out already.
    pub fn advance_to(&self, seq: u64) {
        let mut s = self.state.lock();
        if seq < s.next {
            return;
        }
        let first = s.next;
        s.next = seq + 1;
        s.skipped.insert(first, seq);
        if s.settle() {
            self.read_point.send_replace(s.read_point);
        }
    }

    /// The current read point: every write with a sequence id at or below it is visible.
    pub fn read_point(&self) -> u64 {
        self.state.lock().read_point
    }

    /// The last id handed out (0 when none).
    pub fn last_assigned(&self) -> u64 {
        self.state.lock().next - 1
    }

    /// Waits until the read point reaches `seq`, so that a write is visible before it is
    /// acknowledged.
    pub async fn wait_for(&self, seq: u64) {
        let mut rx = self.read_point.subscribe();
        // The sender lives as long as `self`, so this only errors if `self` is gone.
        let _ = rx.wait_for(|rp| *rp >= seq).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_point_waits_for_gaps() {
        let m = Mvcc::new(10);
        let a = m.begin();
        let b = m.begin();
        let c = m.begin();
        assert_eq!((a, b, c), (11, 12, 13));
        m.complete(b);
        assert_eq!(m.read_point(), 10);
        m.complete(a);
        assert_eq!(m.read_point(), 12);
        m.complete(c);
        assert_eq!(m.read_point(), 13);
        m.complete(c);
        assert_eq!(m.read_point(), 13);
    }

    #[test]
    fn advancing_skips_ids_but_waits_for_those_in_flight() {
        let m = Mvcc::new(10);
        let a = m.begin();
        m.advance_to(100);
        assert_eq!(m.read_point(), 10, "11 is still in flight");
        assert_eq!(m.begin(), 101);
        m.complete(a);
        assert_eq!(m.read_point(), 100);
        m.complete(101);
        assert_eq!(m.read_point(), 101);
        m.advance_to(50);
        assert_eq!((m.read_point(), m.last_assigned()), (101, 101));
        m.advance_to(101);
        assert_eq!(m.begin(), 102);
    }

    proptest::proptest! {
        /// Against a model: the read point is the largest id at or below which every id
        /// handed out has completed, ids handed out only grow, skipped ids never show.
        #[test]
        fn read_point_matches_a_model(ops in proptest::collection::vec((0u8..3, 0u64..40), 0..80)) {
            let m = Mvcc::new(5);
            let mut handed: Vec<u64> = Vec::new();
            let mut done: BTreeSet<u64> = BTreeSet::new();
            let mut last = 5u64;
            for (kind, n) in ops {
                match kind {
                    0 => {
                        let id = m.begin();
                        proptest::prop_assert!(id > last);
                        last = id;
                        handed.push(id);
                    }
                    1 if !handed.is_empty() => {
                        let id = handed[(n as usize) % handed.len()];
                        m.complete(id);
                        done.insert(id);
                    }
                    _ => {
                        let to = last + n;
                        m.advance_to(to);
                        last = last.max(to);
                    }
                }
                let pending = handed.iter().filter(|id| !done.contains(id)).min().copied();
                let want = pending.map_or(last, |p| p - 1);
                proptest::prop_assert_eq!(m.read_point(), want);
                proptest::prop_assert_eq!(m.last_assigned(), last);
            }
        }
    }

    #[tokio::test]
    async fn wait_for_returns_after_complete() {
        let m = std::sync::Arc::new(Mvcc::new(0));
        let s = m.begin();
        let m2 = m.clone();
        let h = tokio::spawn(async move { m2.wait_for(s).await });
        m.complete(s);
        h.await.unwrap();
        assert_eq!(m.read_point(), 1);
    }
}
