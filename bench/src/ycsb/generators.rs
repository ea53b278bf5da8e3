//! YCSB's generators, ported from its Java `CoreWorkload` (`site.ycsb.generator`): key names,
//! `ZipfianGenerator`, `ScrambledZipfianGenerator`, `SkewedLatestGenerator` over an
//! `AcknowledgedCounterGenerator`, and the `DiscreteGenerator` that picks operations.
//!
//! Invariants: [`Zipfian::next_long`] with `itemcount` n returns a value in `[base, base + n)`
//! (YCSB's own formula; the `base + 1` shortcut needs n >= 2), [`ScrambledZipfian::next`] a
//! value in `[min, max]`, [`SkewedLatest::next`] a record number at most
//! [`InsertCounter::last_value`], i.e. always one whose insert was acknowledged. The Zipfian
//! arithmetic (zeta, eta, alpha, the Gray et al. formula, and the incremental zeta when the
//! item count grows, with YCSB's use of the constructor's `items` in eta) follows YCSB line by
//! line, so the distributions are YCSB's; only the random source differs (a seeded `StdRng`
//! per thread instead of Java's `ThreadLocalRandom`).

use crate::workload::fnv_hash64;
use rand::Rng;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// YCSB's `ZipfianGenerator.ZIPFIAN_CONSTANT`.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// `ScrambledZipfianGenerator.ITEM_COUNT`: the scrambled generator draws over 10^10 items.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// `ScrambledZipfianGenerator.ZETAN`: zeta(10^10 + 1, 0.99), precomputed by YCSB.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// YCSB's `Utils.fnvhash64` (see [`fnv_hash64`]; for the one input in 2^64 whose hash is
/// `i64::MIN`, Java's `Math.abs` would stay negative, ours gives 2^63).
pub fn fnvhash64(v: u64) -> u64 {
    fnv_hash64(v)
}

/// YCSB's `buildKeyName` with `insertorder=hashed` and `zeropadding=1`: `user` followed by
/// the decimal FNV-64 hash of the record number, not padded.
pub fn key_name(keynum: u64) -> String {
    format!("user{}", fnvhash64(keynum))
}

/// `ZipfianGenerator.zetastatic(st, n, theta, initialsum)`: `initialsum` plus the terms
/// `1 / (i + 1)^theta` for `i` in `st..n`.
pub fn zeta(st: u64, n: u64, theta: f64, initial_sum: f64) -> f64 {
    let mut sum = initial_sum;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator` (constant 0.99): item `base` is the most popular, `base + 1`
/// the next, and so on.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    count_for_zeta: u64,
    eta: f64,
}

impl Zipfian {
    /// Over `min..=max`, zeta computed from scratch (O(max - min)).
    pub fn new(min: u64, max: u64) -> Self {
        let zetan = zeta(0, max - min + 1, ZIPFIAN_CONSTANT, 0.0);
        Self::with_zetan(min, max, zetan)
    }

    /// Over `0..items` (YCSB's `ZipfianGenerator(long items)`).
    pub fn with_items(items: u64) -> Self {
        Self::new(0, items.saturating_sub(1))
    }

    /// Over `min..=max` with a precomputed zeta of its item count.
    pub fn with_zetan(min: u64, max: u64, zetan: f64) -> Self {
        let theta = ZIPFIAN_CONSTANT;
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            count_for_zeta: items,
            eta: (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan),
        }
    }

    /// The next value over `itemcount` items (`nextLong(itemcount)`): when the count grew,
    /// zeta is extended incrementally first (a smaller count is drawn from as is, as YCSB
    /// does unless `allowitemcountdecrease`).
    pub fn next_long(&mut self, rng: &mut impl Rng, itemcount: u64) -> u64 {
        if itemcount > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, itemcount, self.theta, self.zetan);
            self.count_for_zeta = itemcount;
            // YCSB keeps the constructor's `items` here.
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
                / (1.0 - self.zeta2theta / self.zetan);
        }
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }

    /// The next value over the constructor's items (`nextValue`).
    pub fn next_value(&mut self, rng: &mut impl Rng) -> u64 {
        self.next_long(rng, self.items)
    }
}

/// YCSB's `ScrambledZipfianGenerator(min, max)`: a Zipfian over 10^10 items (precomputed
/// zeta), hashed with FNV-64 onto `min..=max`, so the popular items are spread over the range.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    min: u64,
    itemcount: u64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    /// Over `min..=max`.
    pub fn new(min: u64, max: u64) -> Self {
        ScrambledZipfian {
            min,
            itemcount: max - min + 1,
            gen: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, SCRAMBLED_ZETAN),
        }
    }

    /// The next value: `min + fnvhash64(zipfian) % itemcount`.
    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        self.min + fnvhash64(self.gen.next_value(rng)) % self.itemcount
    }
}

/// YCSB's `AcknowledgedCounterGenerator`: hands out new record numbers for inserts and knows
/// the highest one below which every insert was acknowledged (reads choose only among those).
#[derive(Debug)]
pub struct InsertCounter {
    next: AtomicU64,
    /// Record numbers below this are all acknowledged.
    acknowledged: AtomicU64,
    /// Acknowledged numbers above a gap.
    pending: Mutex<BTreeSet<u64>>,
}

impl InsertCounter {
    /// A counter whose first new record number is `start` (records `0..start` are loaded).
    pub fn new(start: u64) -> Self {
        InsertCounter {
            next: AtomicU64::new(start),
            acknowledged: AtomicU64::new(start),
            pending: Mutex::new(BTreeSet::new()),
        }
    }

    /// A new record number (`nextValue`).
    pub fn next_value(&self) -> u64 {
        self.next.fetch_add(1, Ordering::SeqCst)
    }

    /// Marks the insert of `keynum` done (`acknowledge`).
    pub fn acknowledge(&self, keynum: u64) {
        let mut pending = match self.pending.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        pending.insert(keynum);
        let mut limit = self.acknowledged.load(Ordering::SeqCst);
        while pending.remove(&limit) {
            limit += 1;
        }
        self.acknowledged.store(limit, Ordering::SeqCst);
    }

    /// Record numbers below this are loaded or acknowledged.
    pub fn acknowledged(&self) -> u64 {
        self.acknowledged.load(Ordering::SeqCst)
    }

    /// The highest acknowledged record number (`lastValue`), 0 when none is.
    pub fn last_value(&self) -> u64 {
        self.acknowledged().saturating_sub(1)
    }
}

/// YCSB's `SkewedLatestGenerator`: `latest - zipfian(latest)` over the acknowledged inserts,
/// so the newest records are the most popular.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// Over the records `counter` has acknowledged now.
    pub fn new(counter: &InsertCounter) -> Self {
        SkewedLatest {
            zipfian: Zipfian::with_items(counter.last_value()),
        }
    }

    /// The next record number, at most `counter.last_value()`.
    pub fn next(&mut self, rng: &mut impl Rng, counter: &InsertCounter) -> u64 {
        let max = counter.last_value();
        max.saturating_sub(self.zipfian.next_long(rng, max))
    }
}

/// How a workload picks the record of a read, update, scan or read-modify-write.
#[derive(Debug, Clone)]
pub enum KeyChooser {
    /// `requestdistribution=zipfian`.
    Zipfian(ScrambledZipfian),
    /// `requestdistribution=latest`.
    Latest(SkewedLatest),
}

impl KeyChooser {
    /// YCSB's `nextKeynum`: draws until the record number is acknowledged (the scrambled
    /// range includes the inserts a run expects, which may not have happened yet).
    pub fn next_keynum(&mut self, rng: &mut impl Rng, counter: &InsertCounter) -> u64 {
        loop {
            let k = match self {
                KeyChooser::Zipfian(z) => z.next(rng),
                KeyChooser::Latest(l) => l.next(rng, counter),
            };
            if k <= counter.last_value() {
                return k;
            }
        }
    }
}

/// A YCSB operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read every field of a row.
    Read,
    /// Write one random field of a row.
    Update,
    /// Insert a new row with every field.
    Insert,
    /// Read 1..=100 rows from a start key.
    Scan,
    /// Read every field of a row, then write one.
    ReadModifyWrite,
}

impl Op {
    /// Every operation, in YCSB's order of the operation chooser.
    pub const ALL: [Op; 5] = [
        Op::Read,
        Op::Update,
        Op::Insert,
        Op::Scan,
        Op::ReadModifyWrite,
    ];

    /// Its index in [`Op::ALL`].
    pub fn index(self) -> usize {
        match self {
            Op::Read => 0,
            Op::Update => 1,
            Op::Insert => 2,
            Op::Scan => 3,
            Op::ReadModifyWrite => 4,
        }
    }
}

/// YCSB's `DiscreteGenerator` of operations: the weights in [`Op::ALL`] order (zero
/// weights left out, as `CoreWorkload` adds only the positive ones).
#[derive(Debug, Clone)]
pub struct OpChooser {
    weights: Vec<(f64, Op)>,
}

impl OpChooser {
    /// From proportions in [`Op::ALL`] order.
    pub fn new(proportions: [f64; 5]) -> Self {
        OpChooser {
            weights: Op::ALL
                .iter()
                .zip(proportions)
                .filter(|(_, p)| *p > 0.0)
                .map(|(op, p)| (p, *op))
                .collect(),
        }
    }

    /// The next operation.
    pub fn next(&self, rng: &mut impl Rng) -> Op {
        let sum: f64 = self.weights.iter().map(|w| w.0).sum();
        let mut val: f64 = rng.random();
        for &(w, op) in &self.weights {
            let pw = w / sum;
            if val < pw {
                return op;
            }
            val -= pw;
        }
        // Rounding can leave a sliver past the last weight.
        self.weights.last().map_or(Op::Read, |w| w.1)
    }
}

/// YCSB's scan length with `scanlengthdistribution=uniform`: uniform in `1..=max`.
pub fn scan_length(rng: &mut impl Rng, max: usize) -> usize {
    rng.random_range(1..=max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn fnvhash64_matches_ycsb() {
        // By hand from Utils.fnvhash64: offset 0xCBF29CE484222325, prime 1099511628211, the
        // 8 low-order bytes low first, then Math.abs of the signed result.
        assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnvhash64(1), 8_517_097_267_634_966_620);
        assert_eq!(fnvhash64(2), 1_820_151_046_732_198_393);
        assert_eq!(fnvhash64(1000), 5_952_875_239_596_136_740);
        assert_eq!(key_name(0), "user6284781860667377211");
        for n in 0..1000 {
            let k = key_name(n);
            let digits = k.strip_prefix("user").unwrap();
            assert!(!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
            assert!(digits.len() == 1 || !digits.starts_with('0'), "{k}");
        }
    }

    #[test]
    fn zipfian_stays_in_range_and_is_skewed() {
        let mut rng = StdRng::seed_from_u64(7);
        let n = 1000;
        let mut z = Zipfian::with_items(n);
        let mut counts = vec![0u32; n as usize];
        for _ in 0..100_000 {
            let v = z.next_value(&mut rng);
            assert!(v < n, "{v}");
            counts[v as usize] += 1;
        }
        let max = counts.iter().max().copied().unwrap();
        assert_eq!(counts[0], max);
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
        // With theta 0.99 over 1000 items item 0 gets 1/zeta(1000) of the draws, about 13%.
        let share = counts[0] as f64 / 100_000.0;
        let want = 1.0 / zeta(0, n, ZIPFIAN_CONSTANT, 0.0);
        assert!((share - want).abs() < 0.01, "{share} vs {want}");
    }

    #[test]
    fn zipfian_with_base_and_growing_count() {
        let mut rng = StdRng::seed_from_u64(8);
        let mut z = Zipfian::new(100, 199);
        for _ in 0..10_000 {
            let v = z.next_value(&mut rng);
            assert!((100..200).contains(&v), "{v}");
        }
        let before = z.zetan;
        for _ in 0..10_000 {
            let v = z.next_long(&mut rng, 300);
            assert!((100..400).contains(&v), "{v}");
        }
        let full = zeta(0, 300, ZIPFIAN_CONSTANT, 0.0);
        assert!(z.zetan > before && (z.zetan - full).abs() < 1e-9);
    }

    #[test]
    fn scrambled_zipfian_stays_in_range() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut z = ScrambledZipfian::new(0, 999);
        let mut seen = BTreeSet::new();
        for _ in 0..100_000 {
            let v = z.next(&mut rng);
            assert!(v < 1000, "{v}");
            seen.insert(v);
        }
        assert!(seen.len() > 500, "{}", seen.len());
        let mut z = ScrambledZipfian::new(50, 59);
        assert!((0..1000).all(|_| (50..60).contains(&z.next(&mut rng))));
    }

    #[test]
    fn precomputed_zetan_is_close_to_a_partial_sum() {
        // The tail of zeta(10^10) from 10^6 on is about sum x^-0.99, from 1e6 to 1e10.
        let head = zeta(0, 1_000_000, ZIPFIAN_CONSTANT, 0.0);
        let tail = ((1e10f64).powf(0.01) - (1e6f64).powf(0.01)) / 0.01;
        assert!(
            (head + tail - SCRAMBLED_ZETAN).abs() < 0.01,
            "{}",
            head + tail
        );
    }

    #[test]
    fn latest_never_passes_the_acknowledged_count() {
        let mut rng = StdRng::seed_from_u64(10);
        let counter = InsertCounter::new(100);
        let mut latest = SkewedLatest::new(&counter);
        let mut chooser = KeyChooser::Latest(latest.clone());
        for round in 0..2000u64 {
            let v = latest.next(&mut rng, &counter);
            assert!(v < counter.acknowledged(), "{v}");
            let v = chooser.next_keynum(&mut rng, &counter);
            assert!(v < counter.acknowledged(), "{v}");
            // New numbers are acknowledged out of order: the bound moves past gaps only.
            if round % 3 == 0 {
                let a = counter.next_value();
                let b = counter.next_value();
                counter.acknowledge(b);
                assert_eq!(counter.acknowledged(), a);
                counter.acknowledge(a);
                assert_eq!(counter.acknowledged(), b + 1);
            }
        }
        // The newest records are the most popular.
        let top = counter.last_value();
        let hits = (0..10_000)
            .filter(|_| latest.next(&mut rng, &counter) == top)
            .count();
        assert!(hits > 500, "{hits}");
    }

    #[test]
    fn zipfian_chooser_skips_unacknowledged_records() {
        let mut rng = StdRng::seed_from_u64(11);
        let counter = InsertCounter::new(100);
        let mut c = KeyChooser::Zipfian(ScrambledZipfian::new(0, 199));
        assert!((0..10_000).all(|_| c.next_keynum(&mut rng, &counter) < 100));
    }

    #[test]
    fn scan_lengths_are_1_to_100() {
        let mut rng = StdRng::seed_from_u64(12);
        let mut seen = [false; 101];
        for _ in 0..100_000 {
            let l = scan_length(&mut rng, 100);
            assert!((1..=100).contains(&l));
            seen[l] = true;
        }
        assert!(seen[1..].iter().all(|s| *s));
    }
}
