//! The server's open scanners (`scannerOpen*` to `scannerClose`): ids from a server-wide
//! counter as HBase's handler hands them out, a bound on how many are open at once, and a
//! lease: a scanner unused for longer than the lease (HBase: 60 s) is dropped, releasing its
//! read point, and its id then answers `IllegalArgument("scanner ID is invalid")`.
//!
//! Invariant: a scanner in use (its lock held by a `scannerGetList`) is never expired under
//! it; the table's lock is never held while a scanner reads rows.

use super::convert::{engine, illegal, row_result};
use basalt_core::client::RowResult;
use basalt_thrift::hbase::TRowResult;
use futures::{Stream, StreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One open scanner over the rows `R` of a backend's scan.
struct Open<R> {
    rows: R,
    sorted: bool,
    /// The table it reads, as HBase prints it (for the metrics of its calls).
    table: String,
    last_used: Instant,
    done: bool,
}

/// The open scanners of the server, each reading a stream of rows `R` (a backend's
/// `Backend::Rows`).
pub(crate) struct Scanners<R> {
    open: Mutex<HashMap<i32, Arc<Mutex<Open<R>>>>>,
    next: Mutex<i32>,
    max: usize,
    lease: Duration,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<R> Scanners<R>
where
    R: Stream<Item = basalt_core::Result<RowResult>> + Send + Unpin,
{
    /// At most `max` open at once, each dropped after `lease` unused.
    pub(crate) fn new(max: usize, lease: Duration) -> Self {
        Scanners {
            open: Mutex::new(HashMap::new()),
            next: Mutex::new(0),
            max,
            lease,
        }
    }

    /// Registers a scanner over `rows`; an error when `max` are open.
    pub(crate) fn open(&self, rows: R, sorted: bool, table: String) -> thrift::Result<i32> {
        self.expire();
        let mut open = lock(&self.open);
        if open.len() >= self.max {
            return Err(super::convert::io_error(format!(
                "too many open scanners ({}): close some or wait for their lease ({} s) to expire",
                self.max,
                self.lease.as_secs()
            )));
        }
        let mut next = lock(&self.next);
        let id = loop {
            *next = next.checked_add(1).unwrap_or(1);
            if !open.contains_key(&*next) {
                break *next;
            }
        };
        let scanner = Open {
            rows,
            sorted,
            table,
            last_used: Instant::now(),
            done: false,
        };
        open.insert(id, Arc::new(Mutex::new(scanner)));
        Ok(id)
    }

    /// Up to `n` more rows of scanner `id` (an empty list at the end, as HBase).
    pub(crate) fn next_rows(
        &self,
        id: i32,
        n: i32,
        rt: &tokio::runtime::Handle,
    ) -> thrift::Result<Vec<TRowResult>> {
        let entry = lock(&self.open).get(&id).cloned();
        let entry = entry.ok_or_else(|| illegal("scanner ID is invalid"))?;
        let mut s = lock(&entry);
        super::calls::note_table(&s.table);
        if s.last_used.elapsed() > self.lease {
            drop(s);
            lock(&self.open).remove(&id);
            return Err(illegal("scanner ID is invalid (its lease expired)"));
        }
        let n = usize::try_from(n).unwrap_or(0).clamp(1, 100_000);
        let mut out = Vec::new();
        if !s.done {
            let sorted = s.sorted;
            let result = rt.block_on(async {
                while out.len() < n {
                    match s.rows.next().await {
                        Some(Ok(r)) => out.push(row_result(r, sorted)),
                        Some(Err(e)) => return Err(e),
                        None => {
                            s.done = true;
                            break;
                        }
                    }
                }
                Ok(())
            });
            result.map_err(engine)?;
        }
        s.last_used = Instant::now();
        Ok(out)
    }

    /// Closes scanner `id`; false when there is none.
    pub(crate) fn close(&self, id: i32) -> bool {
        lock(&self.open).remove(&id).is_some()
    }

    /// Drops every scanner whose lease has expired (and that no call is using).
    pub(crate) fn expire(&self) {
        let lease = self.lease;
        lock(&self.open).retain(|_, s| match s.try_lock() {
            Ok(s) => s.last_used.elapsed() <= lease,
            Err(_) => true, // in use
        });
    }

    /// How many scanners are open.
    pub(crate) fn len(&self) -> usize {
        lock(&self.open).len()
    }

    /// Drops every scanner (server shutdown).
    pub(crate) fn clear(&self) {
        lock(&self.open).clear();
    }
}
