//! Row locks: an engine-wide table of striped async mutexes.
//!
//! A writer locks every row it touches before it takes a sequence id and releases them only
//! after its write is visible. Invariant: a holder of many rows locks their stripes in
//! ascending stripe order, each stripe once, so two writers can never deadlock. Unrelated rows
//! that share a stripe merely wait for each other.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use tokio::sync::{Mutex, MutexGuard};

/// Striped row locks.
#[derive(Debug)]
pub struct RowLocks {
    stripes: Vec<Mutex<()>>,
}

/// Held row locks; dropping releases them.
#[derive(Debug)]
pub struct RowLockGuard<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl RowLocks {
    /// A table of `n` stripes (at least 1).
    pub fn new(n: usize) -> Self {
        RowLocks {
            stripes: (0..n.max(1)).map(|_| Mutex::new(())).collect(),
        }
    }

    fn stripe(&self, table: &str, row: &[u8]) -> usize {
        let mut h = DefaultHasher::new();
        table.hash(&mut h);
        row.hash(&mut h);
        (h.finish() % self.stripes.len() as u64) as usize
    }

    /// Locks every `(table, row)` given, in a deadlock-free order.
    pub async fn lock<'a, I, R>(&'a self, rows: I) -> RowLockGuard<'a>
    where
        I: IntoIterator<Item = (&'a str, R)>,
        R: AsRef<[u8]>,
    {
        let mut idx: Vec<usize> = rows
            .into_iter()
            .map(|(t, r)| self.stripe(t, r.as_ref()))
            .collect();
        idx.sort_unstable();
        idx.dedup();
        let mut guards = Vec::with_capacity(idx.len());
        for i in idx {
            if let Some(m) = self.stripes.get(i) {
                guards.push(m.lock().await);
            }
        }
        RowLockGuard { _guards: guards }
    }
}
