//! Engine-wide multi-version concurrency control.
//!
//! Every write batch takes the next sequence id from [`Mvcc::begin`]; its cells carry that id.
//! The read point is the largest id such that every id at or below it has completed, so a
//! reader that filters cells by `seq <= read_point` sees whole batches or nothing, across
//! every region and table at once. Invariants: ids are handed out strictly increasing; the
//! read point never moves backwards and never passes an id that has not completed.

use parking_lot::Mutex;
use std::collections::BTreeSet;
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
        let mut rp = s.read_point;
        while s.completed.remove(&(rp + 1)) {
            rp += 1;
        }
        if rp != s.read_point {
            s.read_point = rp;
            self.read_point.send_replace(rp);
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
