//! Built-in endpoints: aggregation over one column (HBase's `AggregateImplementation` and
//! `AggregationClient`) and a fast row count. Nothing but the per-region partial results
//! leaves a region.
//!
//! A column's value is read as a big-endian 8-byte number ([`Interpreter`]: i64 as HBase's
//! `LongColumnInterpreter`, u64, or an IEEE f64). As in HBase, a cell that cannot be read
//! that way (its value is not exactly 8 bytes; for f64 also a NaN) is *skipped*: it counts
//! toward [`AggregationClient::row_count`] (the row has the column) but toward no other
//! aggregate. Only the newest visible version of the column counts.
//!
//! Semantics (every answer reads one snapshot, `None` when no value was read):
//! - `row_count`: rows of the range with a visible cell in the column (the whole row when
//!   no column is given), as HBase's `rowCount`.
//! - `sum`: exact; integer sums that overflow the column's type are an error.
//! - `min`, `max`: as the column's type; `avg`: the mean as f64; `std`: the population
//!   standard deviation (divides by n), as HBase's `std`, merged across regions with Chan's
//!   pairwise update, so it does not lose precision the way `sqrt(E[x^2] - E[x]^2)` does.
//! - `median`: the lower median of the values (the value at 0-based rank `(n - 1) / 2` of
//!   the sorted values), always one of the column's values. HBase's client finds it by a
//!   second pass over the region where half of the *sum* is reached in key order, which is a
//!   weighted median and wrong for plain values; here the client narrows the value range
//!   with per-region histograms at the same snapshot (each pass divides the range by 1024)
//!   until each region's values in the range are few enough to ship, then picks the rank.
//! - `fast_row_count`: every row with at least one visible cell, counted region-locally
//!   without building rows (as FirstKeyOnlyFilter would, cheaper), one number per region.

mod client;

pub use client::AggregationClient;
pub(crate) use client::{median_with, stats_with};

use crate::endpoint::{Endpoint, EndpointRegistry};
use basalt_core::endpoint::RegionView;
use basalt_core::{Error, Result};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The registered name of the aggregation endpoint.
pub const AGGREGATE: &str = "aggregate";
/// The registered name of the fast row count endpoint.
pub const ROW_COUNT: &str = "row_count";

/// Buckets of one median narrowing pass.
const MEDIAN_BUCKETS: u32 = 1024;
/// A region ships its values inside the narrowed range once there are at most this many.
const MEDIAN_SHIP_LIMIT: u32 = 4096;

impl EndpointRegistry {
    /// A registry holding the built-in endpoints ([`AGGREGATE`], [`ROW_COUNT`])
    /// system-wide. (Defined here, with the endpoints, so that the registry's module does
    /// not depend on them.)
    pub fn with_builtins() -> Self {
        let r = Self::new();
        register_builtins(&r);
        r
    }
}

/// Registers [`AGGREGATE`] and [`ROW_COUNT`] system-wide.
pub fn register_builtins(r: &EndpointRegistry) {
    // A fresh registry has neither name: registering cannot fail there.
    let _ = r.register_system(AGGREGATE, Aggregate);
    let _ = r.register_system(ROW_COUNT, RowCount);
}

/// How a column's 8-byte values are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Interpreter {
    /// Big-endian two's complement (HBase's `LongColumnInterpreter`, `Bytes.toBytes(long)`).
    I64,
    /// Big-endian unsigned.
    U64,
    /// Big-endian IEEE 754 double (`Bytes.toBytes(double)`); NaN cells are skipped.
    F64,
}

/// A value of a column, as its interpreter reads it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Number {
    /// A signed value.
    I64(i64),
    /// An unsigned value.
    U64(u64),
    /// A floating-point value.
    F64(f64),
}

impl Number {
    /// The value as f64 (may round large integers).
    pub fn as_f64(self) -> f64 {
        match self {
            Number::I64(v) => v as f64,
            Number::U64(v) => v as f64,
            Number::F64(v) => v,
        }
    }
}

impl Interpreter {
    /// The value of a cell, or `None` when it is not 8 bytes (or a NaN f64).
    pub fn read(self, value: &[u8]) -> Option<Number> {
        let bytes: [u8; 8] = value.try_into().ok()?;
        Some(match self {
            Interpreter::I64 => Number::I64(i64::from_be_bytes(bytes)),
            Interpreter::U64 => Number::U64(u64::from_be_bytes(bytes)),
            Interpreter::F64 => {
                let v = f64::from_be_bytes(bytes);
                if v.is_nan() {
                    return None;
                }
                Number::F64(v)
            }
        })
    }

    /// The 8 bytes of `n` (for writing test and example data).
    pub fn encode(n: Number) -> [u8; 8] {
        match n {
            Number::I64(v) => v.to_be_bytes(),
            Number::U64(v) => v.to_be_bytes(),
            Number::F64(v) => v.to_be_bytes(),
        }
    }

    /// An order-preserving u64 of a value: `a < b` exactly when `key(a) < key(b)`.
    fn key(self, n: Number) -> u64 {
        match n {
            Number::I64(v) => (v as u64) ^ (1 << 63),
            Number::U64(v) => v,
            Number::F64(v) => {
                let bits = v.to_bits();
                if bits >> 63 == 1 {
                    !bits
                } else {
                    bits | (1 << 63)
                }
            }
        }
    }

    /// The value of an order key made by [`Interpreter::key`].
    fn unkey(self, k: u64) -> Number {
        match self {
            Interpreter::I64 => Number::I64((k ^ (1 << 63)) as i64),
            Interpreter::U64 => Number::U64(k),
            Interpreter::F64 => Number::F64(f64::from_bits(if k >> 63 == 1 {
                k & !(1 << 63)
            } else {
                !k
            })),
        }
    }
}

/// The column an aggregation reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// Family.
    pub family: Bytes,
    /// Qualifier.
    pub qualifier: Bytes,
    /// How its values are read.
    pub interpreter: Interpreter,
}

impl Column {
    /// `family:qualifier` read with `interpreter`.
    pub fn new(
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        interpreter: Interpreter,
    ) -> Self {
        Column {
            family: Bytes::copy_from_slice(family.as_ref()),
            qualifier: Bytes::copy_from_slice(qualifier.as_ref()),
            interpreter,
        }
    }
}

/// What the aggregation endpoint computes in a region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AggregateOp {
    /// Every statistic at once ([`RegionStats`]).
    Stats,
    /// Counts of the values' order keys below `lo` and in `buckets` equal buckets of
    /// `[lo, hi]`, and the keys in `[lo, hi]` themselves when at most `ship_limit`
    /// ([`RegionHistogram`]).
    Histogram {
        /// Lowest key of the window.
        lo: u64,
        /// Highest key of the window.
        hi: u64,
        /// Buckets (at least 1).
        buckets: u32,
        /// Ship the window's keys when there are at most this many.
        ship_limit: u32,
    },
}

/// A request of the aggregation endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregateRequest {
    /// The column.
    pub column: Column,
    /// What to compute.
    pub op: AggregateOp,
}

/// One region's statistics of a column.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RegionStats {
    /// Rows with a visible cell in the column.
    pub rows: u64,
    /// Values read (cells of the right width).
    pub values: u64,
    /// Exact sum of integer values.
    pub int_sum: i128,
    /// Sum of f64 values.
    pub float_sum: f64,
    /// Smallest value's order key.
    pub min_key: Option<u64>,
    /// Largest value's order key.
    pub max_key: Option<u64>,
    /// Mean of the values (as f64).
    pub mean: f64,
    /// Sum of squared differences from the mean (Welford).
    pub m2: f64,
}

/// Values whose mean and squared deviations are computed together, in two passes over the
/// chunk (one division per chunk instead of one per value), then merged into the running
/// statistics with Chan's pairwise update.
const STATS_CHUNK: usize = 256;

/// Builds one region's [`RegionStats`] value by value.
struct StatsBuilder {
    stats: RegionStats,
    /// Values already merged into `stats.mean` and `stats.m2`.
    merged: u64,
    chunk: Vec<f64>,
}

impl StatsBuilder {
    fn new() -> Self {
        StatsBuilder {
            stats: RegionStats::default(),
            merged: 0,
            chunk: Vec::with_capacity(STATS_CHUNK),
        }
    }

    fn add(&mut self, n: Number, key: u64) -> Result<()> {
        let s = &mut self.stats;
        s.values += 1;
        match n {
            Number::I64(v) => s.int_sum = checked(s.int_sum.checked_add(i128::from(v)))?,
            Number::U64(v) => s.int_sum = checked(s.int_sum.checked_add(i128::from(v)))?,
            Number::F64(v) => s.float_sum += v,
        }
        s.min_key = Some(s.min_key.map_or(key, |m| m.min(key)));
        s.max_key = Some(s.max_key.map_or(key, |m| m.max(key)));
        self.chunk.push(n.as_f64());
        if self.chunk.len() == STATS_CHUNK {
            self.merge_chunk();
        }
        Ok(())
    }

    /// Folds the chunk's mean and squared deviations into the statistics.
    fn merge_chunk(&mut self) {
        if self.chunk.is_empty() {
            return;
        }
        let k = self.chunk.len() as f64;
        let mean = self.chunk.iter().sum::<f64>() / k;
        let m2: f64 = self.chunk.iter().map(|x| (x - mean) * (x - mean)).sum();
        let na = self.merged as f64;
        let n = na + k;
        let delta = mean - self.stats.mean;
        self.stats.mean += delta * k / n;
        self.stats.m2 += m2 + delta * delta * na * k / n;
        self.merged += self.chunk.len() as u64;
        self.chunk.clear();
    }

    fn finish(mut self) -> RegionStats {
        self.merge_chunk();
        self.stats
    }
}

impl RegionStats {
    /// The statistics of both regions' values together.
    pub fn merge(self, o: RegionStats) -> Result<RegionStats> {
        let n = self.values + o.values;
        let (mean, m2) = if n == 0 {
            (0.0, 0.0)
        } else {
            let (na, nb) = (self.values as f64, o.values as f64);
            let delta = o.mean - self.mean;
            (
                self.mean + delta * nb / n as f64,
                self.m2 + o.m2 + delta * delta * na * nb / n as f64,
            )
        };
        let pick = |a: Option<u64>, b: Option<u64>, f: fn(u64, u64) -> u64| match (a, b) {
            (Some(x), Some(y)) => Some(f(x, y)),
            (x, y) => x.or(y),
        };
        Ok(RegionStats {
            rows: self.rows + o.rows,
            values: n,
            int_sum: checked(self.int_sum.checked_add(o.int_sum))?,
            float_sum: self.float_sum + o.float_sum,
            min_key: pick(self.min_key, o.min_key, u64::min),
            max_key: pick(self.max_key, o.max_key, u64::max),
            mean,
            m2,
        })
    }
}

impl RegionStats {
    /// The exact sum as `column`'s type (`None` when no value was read); an error when it
    /// overflows that type.
    pub fn sum(&self, interpreter: Interpreter) -> Result<Option<Number>> {
        if self.values == 0 {
            return Ok(None);
        }
        let overflow = || Error::bad_argument("aggregation sum overflows the column's type");
        Ok(Some(match interpreter {
            Interpreter::I64 => Number::I64(i64::try_from(self.int_sum).map_err(|_| overflow())?),
            Interpreter::U64 => Number::U64(u64::try_from(self.int_sum).map_err(|_| overflow())?),
            Interpreter::F64 => Number::F64(self.float_sum),
        }))
    }

    /// The smallest value.
    pub fn min(&self, interpreter: Interpreter) -> Option<Number> {
        self.min_key.map(|k| interpreter.unkey(k))
    }

    /// The largest value.
    pub fn max(&self, interpreter: Interpreter) -> Option<Number> {
        self.max_key.map(|k| interpreter.unkey(k))
    }

    /// The mean.
    pub fn avg(&self, interpreter: Interpreter) -> Option<f64> {
        (self.values > 0).then(|| match interpreter {
            Interpreter::F64 => self.float_sum / self.values as f64,
            _ => self.int_sum as f64 / self.values as f64,
        })
    }

    /// The population standard deviation.
    pub fn std(&self) -> Option<f64> {
        (self.values > 0).then(|| (self.m2 / self.values as f64).max(0.0).sqrt())
    }
}

fn checked(v: Option<i128>) -> Result<i128> {
    v.ok_or_else(|| Error::bad_argument("aggregation sum overflows"))
}

/// One region's histogram of a column (see [`AggregateOp::Histogram`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RegionHistogram {
    /// Values whose key is below the window.
    pub below: u64,
    /// Values per bucket of the window.
    pub buckets: Vec<u64>,
    /// The window's keys, sorted, when there were at most `ship_limit`.
    pub keys: Option<Vec<u64>>,
}

/// A response of the aggregation endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AggregateResponse {
    /// For [`AggregateOp::Stats`].
    Stats(RegionStats),
    /// For [`AggregateOp::Histogram`].
    Histogram(RegionHistogram),
}

/// The width of each of `buckets` buckets of `[lo, hi]` (the last may be narrower).
fn bucket_width(lo: u64, hi: u64, buckets: u32) -> u128 {
    (u128::from(hi - lo) + 1).div_ceil(u128::from(buckets.max(1)))
}

/// The aggregation endpoint ([`AGGREGATE`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Aggregate;

impl Aggregate {
    /// Calls `f` with the value and order key of every readable cell of the column, and
    /// returns the rows having the column. Reads in place where it can
    /// ([`RegionView::fold_column`]); `f` is an accumulator's step, and `init` makes the
    /// accumulator (again, when the in-place read has to start over).
    fn each_value<A>(
        region: &RegionView<'_>,
        column: &Column,
        init: impl Fn() -> A,
        mut f: impl FnMut(&mut A, Number, u64) -> Result<()>,
    ) -> Result<(u64, A)> {
        let interpreter = column.interpreter;
        region.fold_column(
            &column.family,
            &column.qualifier,
            init,
            |acc, value| match interpreter.read(value) {
                Some(n) => f(acc, n, interpreter.key(n)),
                None => Ok(()),
            },
        )
    }
}

impl Endpoint for Aggregate {
    type Request = AggregateRequest;
    type Response = AggregateResponse;

    fn call(&self, region: &RegionView<'_>, req: &AggregateRequest) -> Result<AggregateResponse> {
        match req.op {
            AggregateOp::Stats => {
                let (rows, builder) =
                    Self::each_value(region, &req.column, StatsBuilder::new, |s, n, k| {
                        s.add(n, k)
                    })?;
                let mut stats = builder.finish();
                stats.rows = rows;
                Ok(AggregateResponse::Stats(stats))
            }
            AggregateOp::Histogram {
                lo,
                hi,
                buckets,
                ship_limit,
            } => {
                if lo > hi || buckets == 0 {
                    return Err(Error::bad_argument("bad histogram window"));
                }
                let width = bucket_width(lo, hi, buckets);
                let init = || {
                    let h = RegionHistogram {
                        below: 0,
                        buckets: vec![0; buckets as usize],
                        keys: None,
                    };
                    // The window's keys while there are at most `ship_limit` of them.
                    (h, Some(Vec::new()))
                };
                let (_, (mut h, keys)) = Self::each_value(
                    region,
                    &req.column,
                    init,
                    |(h, keys): &mut (RegionHistogram, Option<Vec<u64>>), _, k| {
                        if k < lo {
                            h.below += 1;
                        } else if k <= hi {
                            let b = (u128::from(k - lo) / width) as usize;
                            if let Some(slot) = h.buckets.get_mut(b) {
                                *slot += 1;
                            }
                            if let Some(list) = keys {
                                list.push(k);
                                if list.len() > ship_limit as usize {
                                    *keys = None;
                                }
                            }
                        }
                        Ok(())
                    },
                )?;
                if let Some(mut keys) = keys {
                    keys.sort_unstable();
                    h.keys = Some(keys);
                }
                Ok(AggregateResponse::Histogram(h))
            }
        }
    }
}

/// The fast row count endpoint ([`ROW_COUNT`]): rows with at least one visible cell,
/// counted region-locally without building cells or rows: in place from the store file's
/// blocks when the region's data is all in one file with no delete marker in the range,
/// else by a scan that stops matching a row at its first visible cell
/// ([`RegionView::count_rows`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct RowCount;

impl Endpoint for RowCount {
    type Request = ();
    type Response = u64;

    fn call(&self, region: &RegionView<'_>, _req: &()) -> Result<u64> {
        region.count_rows()
    }
}
