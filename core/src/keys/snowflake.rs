//! Snowflake ids, as seed 000 uses for conversations and messages: 64-bit ids that grow with
//! time, made without coordination by up to 1,024 workers.
//!
//! Layout (most significant first): 1 zero bit, 41 bits of milliseconds since the
//! generator's epoch (about 69 years), 10 bits of worker id, 12 bits of sequence within the
//! millisecond. Ids are positive `i64`s, so `Long.MAX_VALUE - id` (seed 000's reversed
//! message id) is defined.
//!
//! Invariants: the ids one generator hands out strictly increase, across threads, whatever
//! the clock does. The generator keeps the last (millisecond, sequence) pair in one atomic
//! word and moves it with compare-and-swap to `max((now, 0), last + 1)`: when the clock steps
//! back the generator keeps counting from where it was instead of repeating or failing (as
//! Twitter's original does), and when 4,096 ids are taken within one millisecond it borrows
//! the next millisecond instead of spinning. Ids then run ahead of the clock by at most the
//! borrowed time, which the clock catches up.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of sequence per millisecond.
pub const SEQUENCE_BITS: u32 = 12;
/// Bits of worker id.
pub const WORKER_BITS: u32 = 10;
/// Bits of milliseconds.
pub const TIME_BITS: u32 = 41;
/// Twitter's epoch, 2010-11-04T01:42:54.657Z, the default.
pub const TWITTER_EPOCH_MS: u64 = 1_288_834_974_657;

/// A Snowflake id generator for one worker. Share it (`Arc`) between threads.
///
/// ```
/// use basalt_core::keys::Snowflake;
/// let gen = Snowflake::new(7).unwrap();
/// let a = gen.next_id().unwrap();
/// let b = gen.next_id().unwrap();
/// assert!(b > a);
/// assert_eq!(Snowflake::worker_of(a), 7);
/// ```
pub struct Snowflake {
    worker: u64,
    epoch_ms: u64,
    /// `(ms since epoch) << 12 | sequence` of the last id.
    last: AtomicU64,
    clock: Box<dyn Fn() -> u64 + Send + Sync>,
}

impl std::fmt::Debug for Snowflake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snowflake")
            .field("worker", &self.worker)
            .field("epoch_ms", &self.epoch_ms)
            .finish_non_exhaustive()
    }
}

fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Snowflake {
    /// A generator for `worker` (0..1024) with Twitter's epoch and the wall clock.
    pub fn new(worker: u16) -> Result<Self> {
        Self::with_clock(worker, TWITTER_EPOCH_MS, Box::new(wall_clock_ms))
    }

    /// A generator with an explicit epoch and clock (milliseconds since the Unix epoch);
    /// tests use it to step the clock.
    pub fn with_clock(
        worker: u16,
        epoch_ms: u64,
        clock: Box<dyn Fn() -> u64 + Send + Sync>,
    ) -> Result<Self> {
        if u64::from(worker) >= 1 << WORKER_BITS {
            return Err(Error::bad_argument(format!(
                "snowflake worker id {worker} is outside 0..1024"
            )));
        }
        Ok(Snowflake {
            worker: u64::from(worker),
            epoch_ms,
            last: AtomicU64::new(0),
            clock,
        })
    }

    /// The next id; fails only when the 41-bit time runs out (69 years after the epoch).
    pub fn next_id(&self) -> Result<u64> {
        let now = (self.clock)().saturating_sub(self.epoch_ms);
        let floor = now << SEQUENCE_BITS;
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = floor.max(last + 1);
            if next >> SEQUENCE_BITS >= 1 << TIME_BITS {
                return Err(Error::bad_argument(
                    "snowflake time exhausted: 41 bits of milliseconds since the epoch",
                ));
            }
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    let ms = next >> SEQUENCE_BITS;
                    let seq = next & ((1 << SEQUENCE_BITS) - 1);
                    return Ok((ms << (WORKER_BITS + SEQUENCE_BITS))
                        | (self.worker << SEQUENCE_BITS)
                        | seq);
                }
                Err(seen) => last = seen,
            }
        }
    }

    /// The milliseconds since the Unix epoch an id of a generator with `epoch_ms` carries.
    pub fn time_ms_of(id: u64, epoch_ms: u64) -> u64 {
        (id >> (WORKER_BITS + SEQUENCE_BITS)) + epoch_ms
    }

    /// The worker id an id carries.
    pub fn worker_of(id: u64) -> u16 {
        ((id >> SEQUENCE_BITS) & ((1 << WORKER_BITS) - 1)) as u16
    }

    /// The sequence number an id carries.
    pub fn sequence_of(id: u64) -> u16 {
        (id & ((1 << SEQUENCE_BITS) - 1)) as u16
    }

    /// The smallest id any worker makes at or after `time_ms` (Unix milliseconds): the
    /// lower bound of "everything since T" ranges.
    pub fn min_id_at(time_ms: u64, epoch_ms: u64) -> u64 {
        time_ms.saturating_sub(epoch_ms) << (WORKER_BITS + SEQUENCE_BITS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    fn stepped() -> (Arc<AtomicU64>, Snowflake) {
        let t = Arc::new(AtomicU64::new(1_000));
        let c = t.clone();
        let g = Snowflake::with_clock(3, 0, Box::new(move || c.load(Ordering::SeqCst))).unwrap();
        (t, g)
    }

    #[test]
    fn clock_steps_back_and_bursts_keep_ids_increasing() {
        let (t, g) = stepped();
        let a = g.next_id().unwrap();
        assert_eq!(Snowflake::time_ms_of(a, 0), 1_000);
        assert_eq!((Snowflake::worker_of(a), Snowflake::sequence_of(a)), (3, 0));
        t.store(500, Ordering::SeqCst);
        let b = g.next_id().unwrap();
        assert!(b > a);
        assert_eq!(Snowflake::time_ms_of(b, 0), 1_000);
        assert_eq!(Snowflake::sequence_of(b), 1);
        // 4,096 ids in one millisecond: the next borrows millisecond 1,001.
        let mut last = b;
        for _ in 0..5000 {
            let x = g.next_id().unwrap();
            assert!(x > last);
            last = x;
        }
        assert_eq!(Snowflake::time_ms_of(last, 0), 1_001);
        t.store(2_000, Ordering::SeqCst);
        let c = g.next_id().unwrap();
        assert_eq!(
            (Snowflake::time_ms_of(c, 0), Snowflake::sequence_of(c)),
            (2_000, 0)
        );
        assert!(c >= Snowflake::min_id_at(2_000, 0));
    }

    #[test]
    fn threads_never_share_an_id() {
        let g = Arc::new(Snowflake::new(1023).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || {
                    (0..20_000)
                        .map(|_| g.next_id().unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            let ids = h.join().unwrap();
            assert!(ids.windows(2).all(|w| w[0] < w[1]));
            all.extend(ids);
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        assert!(all.iter().all(|id| *id <= i64::MAX as u64));
    }

    #[test]
    fn bad_workers_and_exhausted_time_are_errors() {
        assert!(Snowflake::new(1024).is_err());
        let g = Snowflake::with_clock(0, 0, Box::new(|| 1 << 41)).unwrap();
        assert!(g.next_id().is_err());
    }
}
