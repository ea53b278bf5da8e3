//! Row locks: an engine-wide table of striped async mutexes.
//!
//! A writer locks every row it touches before it takes a sequence id and releases them only
//! after its write is visible. Invariant: a holder of many rows locks their stripes in
//! ascending stripe order, each stripe once, so two writers can never deadlock. Unrelated rows
//! that share a stripe merely wait for each other.
//!
//! A holder may take more rows later ([`RowLocks::lock_more`], for the rows a coprocessor's
//! batch hook adds mutations to): stripes above every stripe it holds are still waited for in
//! order, without a limit; a stripe below one it holds breaks the order. Such a stripe is
//! only taken if it is free at once; otherwise the caller is told (it then releases
//! everything and locks the union of its rows in ascending order, see
//! `server::hooks::LockPlan`), or, when it asks for a bound, waited for at most that long.
//! Every cycle of waiters needs at least one out-of-order wait, and none lasts forever, so
//! no deadlock forms.

use std::time::Duration;
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
        // XXH3 of the row seeded with the table's: stripes only need spreading, and an
        // indexed put computes three (SipHash over both was 1.5% of it).
        let seed = xxhash_rust::xxh3::xxh3_64(table.as_bytes());
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(row, seed);
        (h % self.stripes.len().max(1) as u64) as usize
    }

    /// Locks every `(table, row)` given, in a deadlock-free order.
    pub async fn lock<'a, 'n, I, R>(&'a self, rows: I) -> RowLockGuard<'a>
    where
        I: IntoIterator<Item = (&'n str, R)>,
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

    /// Locks the rows `more` while the caller already holds the rows `held` (locked by
    /// [`RowLocks::lock`]); stripes it already holds are skipped. A stripe above all held ones
    /// is waited for without a limit; one below is taken only when free at once with `wait`
    /// `None`, else waited for at most `wait` (see the module doc). When it cannot be had,
    /// returns the index in `more` of that row, having released what this call took.
    pub async fn lock_more<'a>(
        &'a self,
        held: impl IntoIterator<Item = (&str, &[u8])>,
        more: &[(&str, &[u8])],
        wait: Option<Duration>,
    ) -> Result<RowLockGuard<'a>, usize> {
        let mut held: Vec<usize> = held.into_iter().map(|(t, r)| self.stripe(t, r)).collect();
        held.sort_unstable();
        held.dedup();
        let mut top = held.last().copied();
        let mut idx: Vec<(usize, usize)> = more
            .iter()
            .enumerate()
            .map(|(i, (t, r))| (self.stripe(t, r), i))
            .filter(|(s, _)| held.binary_search(s).is_err())
            .collect();
        idx.sort_unstable();
        idx.dedup_by_key(|(s, _)| *s);
        let mut guards = Vec::with_capacity(idx.len());
        for (s, i) in idx {
            let Some(m) = self.stripes.get(s) else {
                continue;
            };
            let g = match m.try_lock() {
                Ok(g) => g,
                Err(_) if top.is_none_or(|t| s > t) => m.lock().await,
                Err(_) => match wait {
                    None => return Err(i),
                    Some(wait) => match tokio::time::timeout(wait, m.lock()).await {
                        Ok(g) => g,
                        Err(_) => return Err(i),
                    },
                },
            };
            top = Some(top.map_or(s, |t| t.max(s)));
            guards.push(g);
        }
        Ok(RowLockGuard { _guards: guards })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn lock_more_skips_held_stripes_and_bounds_out_of_order_waits() {
        let locks = RowLocks::new(1);
        let held = locks.lock([("t", b"a".as_slice())]).await;
        // One stripe: the added row shares the held stripe, which is skipped (no self-wait).
        let more = locks
            .lock_more(
                [("t", b"a".as_slice())],
                &[("u", b"b")],
                Some(Duration::from_millis(10)),
            )
            .await;
        assert!(more.is_ok());
        drop(more);
        drop(held);
        // Two stripes, both held elsewhere: an out-of-order wait gives up after the bound.
        let locks = RowLocks::new(64);
        let rows: Vec<Vec<u8>> = (0u8..=255).map(|i| vec![i]).collect();
        let mut pair = None;
        'find: for a in &rows {
            for b in &rows {
                if locks.stripe("t", b) < locks.stripe("t", a) {
                    pair = Some((a.clone(), b.clone()));
                    break 'find;
                }
            }
        }
        let (hi, lo) = pair.expect("two rows on different stripes");
        let mine = locks.lock([("t", hi.as_slice())]).await;
        let other = locks.lock([("t", lo.as_slice())]).await;
        let out = locks
            .lock_more(
                [("t", hi.as_slice())],
                &[("t", lo.as_slice())],
                Some(Duration::from_millis(20)),
            )
            .await;
        assert_eq!(out.err(), Some(0));
        // Without a bound, an out-of-order stripe held elsewhere is refused at once.
        let out = locks
            .lock_more([("t", hi.as_slice())], &[("t", lo.as_slice())], None)
            .await;
        assert_eq!(out.err(), Some(0));
        drop(other);
        let out = locks
            .lock_more(
                [("t", hi.as_slice())],
                &[("t", lo.as_slice())],
                Some(Duration::from_millis(20)),
            )
            .await;
        assert!(out.is_ok());
        drop(mine);
    }
}
