//! [`StripedCounter`]: a counter many threads add to without sharing a cache line (Java's
//! `LongAdder`, which HBase's metrics use): what a hook that counts should use, and what
//! the host counts its calls with.
//!
//! Invariants: every add lands in exactly one stripe, so [`StripedCounter::sum`] is exact
//! once the adds it must see have returned; a thread always adds to the same stripe, and
//! threads take stripes in turn, so up to [`STRIPES`] threads never share one.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes of a counter (threads beyond this many share stripes, still exactly).
pub const STRIPES: usize = 16;

/// One stripe, alone on its cache line (two lines, for the adjacent-line prefetcher).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Stripe(AtomicU64);

/// The source of each thread's stripe.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe of every counter.
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
}

/// A `u64` counter striped by thread: an add writes only the calling thread's stripe, so
/// concurrent writers on several cores do not bounce one cache line between them (with 8
/// writers on 2 cores a shared `AtomicU64` add cost as much as the rest of a hook call).
/// Reading the total sums the stripes. Wraps on overflow, as `AtomicU64::fetch_add`.
///
/// ```
/// use basalt_coprocessors::StripedCounter;
/// let puts = StripedCounter::default();
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| (0..1000).for_each(|_| { puts.add(1); }));
///     }
/// });
/// assert_eq!(puts.sum(), 4000);
/// ```
#[derive(Debug, Default)]
pub struct StripedCounter {
    stripes: [Stripe; STRIPES],
}

impl StripedCounter {
    /// Adds `n`; returns what the calling thread's stripe held before (a cheap per-thread
    /// sequence, e.g. to sample one call in so many).
    pub fn add(&self, n: u64) -> u64 {
        let i = STRIPE.with(|s| *s);
        self.stripes
            .get(i)
            .map_or(0, |s| s.0.fetch_add(n, Ordering::Relaxed))
    }

    /// The total of every add that returned before this call (adds running meanwhile may
    /// or may not be in it).
    pub fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .fold(0u64, |t, s| t.wrapping_add(s.0.load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Threads adding arbitrary amounts: the sum is the model's (a plain total).
        #[test]
        fn sum_is_every_add(adds in prop::collection::vec(prop::collection::vec(0u64..1_000_000, 0..200), 1..12)) {
            let c = StripedCounter::default();
            std::thread::scope(|s| {
                for thread in &adds {
                    let c = &c;
                    s.spawn(move || thread.iter().for_each(|n| { c.add(*n); }));
                }
            });
            let want: u64 = adds.iter().flatten().sum();
            prop_assert_eq!(c.sum(), want);
        }
    }

    #[test]
    fn one_thread_sees_its_stripe_grow() {
        let c = StripedCounter::default();
        assert_eq!(c.add(5), 0);
        assert_eq!(c.add(1), 5);
        assert_eq!(c.sum(), 6);
    }
}
