//! What each loaded plugin has done: calls, faults, a latency histogram (for the mean and
//! the 99th percentile) and the largest linear memory one of its instances reached.
//!
//! Invariants: counters only grow and are updated with relaxed atomics (no lock on the
//! call path); a percentile is the upper bound of the histogram bucket it falls in, so it
//! is at most 1/8 (12.5%) above the true value; the host lists only the stats of
//! attachments still loaded (it holds them weakly).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two of nanoseconds.
const SUB: usize = 8;
/// Buckets: powers of two up to 2^40 ns (18 minutes), each split in [`SUB`].
const BUCKETS: usize = 41 * SUB;

/// One attachment's counters (a table's plugin, or an endpoint plugin).
#[derive(Debug)]
pub(crate) struct Stats {
    pub(crate) name: String,
    pub(crate) table: String,
    pub(crate) kind: &'static str,
    calls: AtomicU64,
    faults: AtomicU64,
    total_ns: AtomicU64,
    buckets: Vec<AtomicU64>,
    memory: AtomicU64,
}

/// What [`crate::PluginHost::plugin_stats`] reports of one loaded plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginStats {
    /// The coprocessor name (`plugin:{sha256}`).
    pub name: String,
    /// The table it is attached to (empty for an endpoint).
    pub table: String,
    /// `observer` or `endpoint`.
    pub kind: &'static str,
    /// Calls made (hooks or endpoint calls).
    pub calls: u64,
    /// Calls that trapped, ran past their deadline or out of memory.
    pub faults: u64,
    /// Mean time of a call (`None` before the first).
    pub mean: Option<Duration>,
    /// 99th percentile of a call's time (`None` before the first).
    pub p99: Option<Duration>,
    /// The largest linear memory one of its instances grew to, in bytes.
    pub memory_bytes: u64,
}

fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros() as usize; // ns in [2^exp, 2^(exp+1))
    let shift = exp.saturating_sub(SUB.trailing_zeros() as usize);
    let sub = ((ns >> shift) as usize) & (SUB - 1);
    (exp * SUB + sub).min(BUCKETS - 1)
}

/// The largest value of bucket `b`.
fn bucket_top(b: usize) -> u64 {
    let (exp, sub) = (b / SUB, b % SUB);
    if exp < SUB.trailing_zeros() as usize + 1 && b < SUB {
        return b as u64;
    }
    let shift = exp.saturating_sub(SUB.trailing_zeros() as usize);
    let base = 1u64 << exp;
    base + (((sub as u64) + 1) << shift) - 1
}

impl Stats {
    pub(crate) fn new(name: String, table: String, kind: &'static str) -> Self {
        Stats {
            name,
            table,
            kind,
            calls: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            total_ns: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            memory: AtomicU64::new(0),
        }
    }

    /// Records one call of `took`, faulted or not, its instance's memory at `memory` bytes.
    pub(crate) fn record(&self, took: Duration, faulted: bool, memory: u64) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.calls.fetch_add(1, Ordering::Relaxed);
        if faulted {
            self.faults.fetch_add(1, Ordering::Relaxed);
        }
        self.total_ns.fetch_add(ns, Ordering::Relaxed);
        if let Some(b) = self.buckets.get(bucket(ns)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        self.memory.fetch_max(memory, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> PluginStats {
        let calls = self.calls.load(Ordering::Relaxed);
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let seen: u64 = counts.iter().sum();
        let rank = seen - seen / 100; // the 99th percentile's rank, 1-based
        let mut acc = 0;
        let mut p99 = None;
        for (b, n) in counts.iter().enumerate() {
            acc += n;
            if seen > 0 && acc >= rank.max(1) {
                p99 = Some(Duration::from_nanos(bucket_top(b)));
                break;
            }
        }
        PluginStats {
            name: self.name.clone(),
            table: self.table.clone(),
            kind: self.kind,
            calls,
            faults: self.faults.load(Ordering::Relaxed),
            mean: (calls > 0)
                .then(|| Duration::from_nanos(self.total_ns.load(Ordering::Relaxed) / calls)),
            p99,
            memory_bytes: self.memory.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_whose_top_bounds_it_within_an_eighth() {
        let mut v = 1u64;
        while v < (1 << 40) {
            for x in [v, v + 1, v * 3 / 2, v * 2 - 1] {
                let top = bucket_top(bucket(x));
                assert!(top >= x, "{x}: top {top}");
                assert!(top - x <= x / 8 + 1, "{x}: top {top}");
            }
            v = v * 2 + 1;
        }
    }

    #[test]
    fn the_p99_of_a_hundred_calls_is_the_slowest_ones_bucket() {
        let s = Stats::new("plugin:x".into(), "t".into(), "observer");
        for i in 1..=100u64 {
            s.record(Duration::from_micros(i), i == 100, 4096 * i);
        }
        let snap = s.snapshot();
        assert_eq!(snap.calls, 100);
        assert_eq!(snap.faults, 1);
        assert_eq!(snap.memory_bytes, 409_600);
        let p99 = snap.p99.unwrap();
        assert!(
            p99 >= Duration::from_micros(99) && p99 <= Duration::from_micros(113),
            "{p99:?}"
        );
        let mean = snap.mean.unwrap();
        assert_eq!(mean, Duration::from_nanos(50_500));
    }
}

/// The back-off of an attachment after faults (as Envoy recreates a crashed VM with
/// back-off): after `k` faults in a row, calls fail at once for `first * 2^(k-1)` (at most
/// [`MAX_BACKOFF`]); a call that succeeds ends it. So a plugin that runs to its deadline on
/// every call burns at most one deadline per back-off period, however hard it is called.
#[derive(Debug)]
pub(crate) struct Backoff {
    first: Duration,
    state: parking_lot::Mutex<BackoffState>,
}

#[derive(Debug, Default)]
struct BackoffState {
    faults_in_a_row: u32,
    until: Option<std::time::Instant>,
    last: String,
}

/// The longest back-off.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl Backoff {
    pub(crate) fn new(first: Duration) -> Self {
        Backoff {
            first,
            state: parking_lot::Mutex::new(BackoffState::default()),
        }
    }

    /// `Some(why)` while backing off: the call must not run.
    pub(crate) fn check(&self, now: std::time::Instant) -> Option<String> {
        let s = self.state.lock();
        match s.until {
            Some(until) if now < until => Some(format!(
                "backing off for {} ms after {} fault(s) in a row; the last: {}",
                until.duration_since(now).as_millis(),
                s.faults_in_a_row,
                s.last
            )),
            _ => None,
        }
    }

    /// Records a call's outcome: a fault (its message) or a success (`None`).
    pub(crate) fn record(&self, now: std::time::Instant, fault: Option<&str>) {
        if self.first.is_zero() {
            return;
        }
        let mut s = self.state.lock();
        match fault {
            None => {
                s.faults_in_a_row = 0;
                s.until = None;
            }
            Some(msg) => {
                s.faults_in_a_row = s.faults_in_a_row.saturating_add(1);
                let shift = s.faults_in_a_row.saturating_sub(1).min(20);
                let wait = self.first.saturating_mul(1 << shift).min(MAX_BACKOFF);
                s.until = Some(now + wait);
                s.last = msg.to_string();
            }
        }
    }
}

#[cfg(test)]
mod backoff_tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn faults_in_a_row_double_the_back_off_and_a_success_ends_it() {
        let b = Backoff::new(Duration::from_millis(50));
        let t0 = Instant::now();
        assert!(b.check(t0).is_none());
        b.record(t0, Some("trap"));
        assert!(b.check(t0 + Duration::from_millis(49)).is_some());
        assert!(b.check(t0 + Duration::from_millis(50)).is_none());
        let t1 = t0 + Duration::from_millis(60);
        b.record(t1, Some("trap"));
        let why = b.check(t1 + Duration::from_millis(99)).unwrap();
        assert!(why.contains("2 fault(s)") && why.contains("trap"), "{why}");
        assert!(b.check(t1 + Duration::from_millis(100)).is_none());
        for _ in 0..40 {
            b.record(t1, Some("trap"));
        }
        assert!(b
            .check(t1 + MAX_BACKOFF - Duration::from_millis(1))
            .is_some());
        assert!(b.check(t1 + MAX_BACKOFF).is_none());
        b.record(t1, None);
        assert!(b.check(t1).is_none());
        // A zero first back-off turns it off.
        let off = Backoff::new(Duration::ZERO);
        off.record(t0, Some("trap"));
        assert!(off.check(t0).is_none());
    }
}
