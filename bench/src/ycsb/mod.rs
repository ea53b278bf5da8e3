//! The `ycsb` suite: YCSB's CoreWorkload (load, then workloads A, B, C, F, D, E) on Basalt,
//! fjall and, with the `rocksdb` feature, RocksDB, one engine after the other.
//!
//! The workload is YCSB's, with its defaults: records `user` + FNV-64 of the record number
//! (`insertorder=hashed`), 10 fields `field0..field9` of 100 bytes; reads read every field,
//! updates write one random field, inserts take new record numbers from a counter shared by
//! the threads and shared across the workloads of one engine (after the loaded ones); the
//! request distribution is scrambled Zipfian (D: latest). The generators are in
//! [`generators`], each client's choices in [`client`]; fjall and RocksDB implement the
//! blocking [`Store`] and run on OS threads through [`run_engine`]; Basalt, being async, runs
//! its clients as tokio tasks through [`run_phases`] (see [`basalt`]).
//!
//! Invariants: every engine gets the same seeded operation streams (per workload and thread);
//! a read or read-modify-write that finds no row, or a row without its 10 fields, stops the
//! run with an error; every row a scan returns is counted and checked the same way. Latency is
//! measured around the engine calls of one operation only (key and value generation excluded,
//! as YCSB's measurements are), into an HDR histogram per client.

pub mod basalt;
pub mod chart;
pub mod client;
pub mod fjall;
pub mod generators;
pub mod report;
#[cfg(feature = "rocksdb")]
pub mod rocks;

use crate::workload::{FIELDS, FIELD_LEN};
use crate::BenchResult;
use client::{PhasePlan, Planned, ThreadStats};
use generators::{InsertCounter, KeyChooser, Op, ScrambledZipfian, SkewedLatest};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default `--records`.
pub const DEFAULT_RECORDS: u64 = 1_000_000;
/// Default `--operations` (per workload).
pub const DEFAULT_OPERATIONS: u64 = 1_000_000;
/// Default `--threads`.
pub const DEFAULT_THREADS: usize = 2;
/// YCSB's `maxscanlength` in workload E.
pub const MAX_SCAN_LENGTH: usize = 100;
/// Size of the pool field values are cut from.
const POOL_LEN: usize = 1 << 20;
/// Seed of the field value pool.
const SEED: u64 = 0x0059_C5B0;

/// The knobs of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Records loaded.
    pub records: u64,
    /// Operations per workload (A..F each run this many).
    pub operations: u64,
    /// Client threads, for the load and for every workload.
    pub threads: usize,
    /// Basalt's table settings (block size, compression), the block cache size of every
    /// engine, the region count and the data directory, as the core suite has them.
    pub core: crate::measure::Settings,
    /// Where `--chart` writes the SVG chart, if asked.
    pub chart: Option<PathBuf>,
    /// The engines to run, each one of [`ENGINES`], in that order.
    pub engines: Vec<String>,
    /// The workloads to run after the load, by name (each one of [`WORKLOADS`]); they run
    /// in [`WORKLOADS`] order whatever the order given.
    pub workloads: Vec<String>,
}

/// The engines this build can run.
#[cfg(feature = "rocksdb")]
pub const ENGINES: &[&str] = &["basalt", "fjall", "rocksdb"];
/// The engines this build can run.
#[cfg(not(feature = "rocksdb"))]
pub const ENGINES: &[&str] = &["basalt", "fjall"];

/// How a workload chooses records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Scrambled Zipfian over the records plus the expected new ones.
    Zipfian,
    /// Skewed towards the latest acknowledged insert.
    Latest,
}

/// One YCSB core workload.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// `a`..`f`.
    pub name: &'static str,
    /// What YCSB calls it.
    pub title: &'static str,
    /// Proportions in [`Op::ALL`] order: read, update, insert, scan, read-modify-write.
    pub proportions: [f64; 5],
    /// The request distribution.
    pub distribution: Distribution,
}

impl Spec {
    /// The insert proportion.
    pub fn insert_proportion(&self) -> f64 {
        self.proportions[Op::Insert.index()]
    }
}

/// The workloads in the order they run: the read/update ones first, then D and E, which
/// insert (as YCSB users run them after one load: a, b, c, f, d, e).
pub const WORKLOADS: [Spec; 6] = [
    Spec {
        name: "a",
        title: "update heavy",
        proportions: [0.5, 0.5, 0.0, 0.0, 0.0],
        distribution: Distribution::Zipfian,
    },
    Spec {
        name: "b",
        title: "read mostly",
        proportions: [0.95, 0.05, 0.0, 0.0, 0.0],
        distribution: Distribution::Zipfian,
    },
    Spec {
        name: "c",
        title: "read only",
        proportions: [1.0, 0.0, 0.0, 0.0, 0.0],
        distribution: Distribution::Zipfian,
    },
    Spec {
        name: "f",
        title: "read-modify-write",
        proportions: [0.5, 0.0, 0.0, 0.0, 0.5],
        distribution: Distribution::Zipfian,
    },
    Spec {
        name: "d",
        title: "read latest",
        proportions: [0.95, 0.0, 0.05, 0.0, 0.0],
        distribution: Distribution::Latest,
    },
    Spec {
        name: "e",
        title: "short ranges",
        proportions: [0.0, 0.0, 0.05, 0.95, 0.0],
        distribution: Distribution::Zipfian,
    },
];

/// One engine as the suite drives it: blocking calls, shared by the client threads.
pub trait Store: Sync {
    /// Inserts a new row with every field.
    fn insert(&self, key: &[u8], fields: &[&[u8]; FIELDS]) -> BenchResult<()>;
    /// Reads every field of a row; an error if the row is missing or incomplete.
    fn read(&self, key: &[u8]) -> BenchResult<()>;
    /// Writes one field of an existing row.
    fn update(&self, key: &[u8], field: usize, value: &[u8]) -> BenchResult<()>;
    /// Reads up to `len` rows from `start` on; returns how many it got, each checked.
    fn scan(&self, start: &[u8], len: usize) -> BenchResult<u64>;
}

/// An error unless `value_lens` (the value length of each field) are those of a row's 10
/// fields.
pub fn check_fields(
    what: &str,
    key: &[u8],
    value_lens: impl IntoIterator<Item = usize>,
) -> BenchResult<()> {
    let mut n = 0;
    for value_len in value_lens {
        if value_len != FIELD_LEN {
            return Err(format!(
                "{what}: row {} has a {value_len}-byte field",
                String::from_utf8_lossy(key)
            )
            .into());
        }
        n += 1;
    }
    if n != FIELDS {
        return Err(format!(
            "{what}: row {} has {n} fields, not {FIELDS}{}",
            String::from_utf8_lossy(key),
            if n == 0 { " (missing)" } else { "" }
        )
        .into());
    }
    Ok(())
}

/// Field values: YCSB's `RandomByteIterator` characters (`' ' + (random & 63)`), cut from a
/// pre-generated pool at random offsets.
pub struct Values {
    pool: Vec<u8>,
}

impl Default for Values {
    fn default() -> Self {
        Self::new()
    }
}

impl Values {
    /// A seeded pool.
    pub fn new() -> Self {
        let mut rng = StdRng::seed_from_u64(SEED);
        let mut pool = vec![0u8; POOL_LEN];
        rng.fill_bytes(&mut pool);
        for b in &mut pool {
            *b = b' ' + (*b & 63);
        }
        Values { pool }
    }

    /// A field value.
    pub fn pick(&self, rng: &mut impl Rng) -> &[u8] {
        let off = rng.random_range(0..=POOL_LEN - FIELD_LEN);
        &self.pool[off..off + FIELD_LEN]
    }

    /// Values for every field of a row.
    pub fn row(&self, rng: &mut impl Rng) -> [&[u8]; FIELDS] {
        std::array::from_fn(|_| self.pick(rng))
    }
}

/// What one phase (the load or one workload) measured on one engine.
#[derive(Debug, Clone)]
pub struct Measured {
    /// `load` or `a`..`f`.
    pub phase: &'static str,
    /// Operations done.
    pub ops: u64,
    /// Wall time from the first operation to the last thread's end.
    pub elapsed: Duration,
    /// Latency of every operation, in nanoseconds.
    pub latency: Histogram<u64>,
    /// Operations by kind, in [`Op::ALL`] order.
    pub by_op: [u64; 5],
    /// Rows the scans returned.
    pub scan_rows: u64,
}

impl Measured {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The latency at `q` (0..1) in microseconds.
    pub fn latency_us(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }
}

/// The key chooser of `spec` for a run of `operations` operations on the records `counter`
/// has acknowledged (YCSB's `recordcount`), with YCSB's room for the expected new keys.
pub fn key_chooser(spec: &Spec, operations: u64, counter: &InsertCounter) -> KeyChooser {
    match spec.distribution {
        Distribution::Zipfian => {
            let expected_new = (operations as f64 * spec.insert_proportion() * 2.0) as u64;
            KeyChooser::Zipfian(ScrambledZipfian::new(
                0,
                counter.acknowledged() + expected_new,
            ))
        }
        Distribution::Latest => KeyChooser::Latest(SkewedLatest::new(counter)),
    }
}

/// Runs `p` on `store`; returns the rows a scan read (0 for the other operations).
fn execute(store: &dyn Store, p: &Planned<'_>) -> BenchResult<u64> {
    match p {
        Planned::Insert { key, fields, .. } => store.insert(key.as_bytes(), fields).map(|()| 0),
        Planned::Read { key } => store.read(key.as_bytes()).map(|()| 0),
        Planned::Update {
            key,
            field,
            value,
            read_first,
        } => {
            if *read_first {
                store.read(key.as_bytes())?;
            }
            store.update(key.as_bytes(), *field, value).map(|()| 0)
        }
        Planned::Scan { key, len } => store.scan(key.as_bytes(), *len),
    }
}

/// Runs `phase` on `store`, one OS thread per client.
pub fn drive(store: &dyn Store, phase: &PhasePlan) -> BenchResult<Measured> {
    let start = Instant::now();
    let results: Vec<BenchResult<ThreadStats>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..phase.clients)
            .map(|t| {
                scope.spawn(move || {
                    let mut stats = ThreadStats::new()?;
                    let mut client = phase.client(t);
                    while let Some(p) = client.plan(phase) {
                        let start = Instant::now();
                        let rows = execute(store, &p);
                        let took = start.elapsed();
                        phase.done(&p);
                        stats.record(&p, took, rows?)?;
                    }
                    Ok(stats)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("ycsb: client thread panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let clients = results.into_iter().collect::<BenchResult<Vec<_>>>()?;
    client::merge(phase.name, elapsed, clients)
}

/// Runs the load and every workload of [`WORKLOADS`] through `drive`, printing each phase.
pub fn run_phases(
    engine: &str,
    s: &Settings,
    mut drive: impl FnMut(Arc<PhasePlan>) -> BenchResult<Measured>,
) -> BenchResult<Vec<Measured>> {
    let values = Arc::new(Values::new());
    let mut out = Vec::with_capacity(WORKLOADS.len() + 1);
    let m = drive(Arc::new(PhasePlan::load(s, values.clone())))?;
    report::progress(engine, &m);
    out.push(m);
    let counter = Arc::new(InsertCounter::new(s.records));
    for (i, spec) in WORKLOADS.iter().enumerate() {
        if !s.workloads.iter().any(|w| w == spec.name) {
            continue;
        }
        let plan = PhasePlan::workload(spec, i as u64 + 1, s, counter.clone(), values.clone());
        let m = drive(Arc::new(plan))?;
        report::progress(engine, &m);
        out.push(m);
    }
    Ok(out)
}

/// Runs every phase on a blocking [`Store`], one OS thread per client.
pub fn run_engine(engine: &str, store: &dyn Store, s: &Settings) -> BenchResult<Vec<Measured>> {
    run_phases(engine, s, |p| drive(store, &p))
}

/// What every engine measured, in the order they ran.
pub struct Results {
    /// (engine, its phases in run order).
    pub engines: Vec<(&'static str, Vec<Measured>)>,
}

/// A fresh temporary directory for `engine` under the run's directory.
pub fn temp_dir(s: &Settings, engine: &str) -> BenchResult<tempfile::TempDir> {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("basalt-bench-ycsb-{engine}-"))
        .tempdir_in(&s.core.dir)?;
    println!("{engine}: {}", tmp.path().display());
    Ok(tmp)
}

/// Runs the suite: every engine, then the table, the `RESULT` lines and the chart.
pub fn run(s: &Settings) -> BenchResult<()> {
    if s.records < 2 || s.threads == 0 {
        return Err("ycsb: --records must be at least 2 and --threads at least 1".into());
    }
    report::print_settings(s);
    std::fs::create_dir_all(&s.core.dir)?;
    let mut results = Results {
        engines: Vec::new(),
    };
    let wanted = |e: &str| s.engines.iter().any(|w| w == e);
    if wanted("basalt") {
        results.engines.push(("basalt", basalt::run(s)?));
    }
    if wanted("fjall") {
        results.engines.push(("fjall", fjall::run(s)?));
    }
    #[cfg(feature = "rocksdb")]
    if wanted("rocksdb") {
        results.engines.push(("rocksdb", rocks::run(s)?));
    }
    println!();
    report::print(&results);
    if let Some(path) = &s.chart {
        std::fs::write(path, chart::render_svg(&results)?)?;
        println!("chart written to {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::generators::OpChooser;
    use super::*;

    #[test]
    fn operation_mix_matches_each_workload() {
        let mut rng = StdRng::seed_from_u64(1);
        for spec in &WORKLOADS {
            let chooser = OpChooser::new(spec.proportions);
            let mut counts = [0u64; 5];
            let n = 100_000;
            for _ in 0..n {
                counts[chooser.next(&mut rng).index()] += 1;
            }
            for (i, p) in spec.proportions.iter().enumerate() {
                let got = counts[i] as f64 / n as f64;
                assert!(
                    (got - p).abs() < 0.01,
                    "{}: op {i}: {got} vs {p}",
                    spec.name
                );
                if *p == 0.0 {
                    assert_eq!(counts[i], 0, "{}", spec.name);
                }
            }
        }
    }

    #[test]
    fn workloads_run_in_ycsb_order_with_their_mixes() {
        let names: Vec<_> = WORKLOADS.iter().map(|w| w.name).collect();
        assert_eq!(names, ["a", "b", "c", "f", "d", "e"]);
        for w in &WORKLOADS {
            assert!((w.proportions.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn zipfian_chooser_leaves_room_for_expected_inserts() {
        let counter = InsertCounter::new(1000);
        let e = &WORKLOADS[5];
        match key_chooser(e, 10_000, &counter) {
            KeyChooser::Zipfian(_) => {}
            KeyChooser::Latest(_) => panic!("e is zipfian"),
        }
        let mut rng = StdRng::seed_from_u64(2);
        let mut c = key_chooser(e, 10_000, &counter);
        assert!((0..10_000).all(|_| c.next_keynum(&mut rng, &counter) < 1000));
    }

    /// A store over a map, for driving the phases without an engine.
    struct MapStore(std::sync::Mutex<std::collections::BTreeMap<Vec<u8>, Vec<Vec<u8>>>>);

    impl Store for MapStore {
        fn insert(&self, key: &[u8], fields: &[&[u8]; FIELDS]) -> BenchResult<()> {
            let row = fields.iter().map(|f| f.to_vec()).collect();
            self.0.lock().unwrap().insert(key.to_vec(), row);
            Ok(())
        }
        fn read(&self, key: &[u8]) -> BenchResult<()> {
            let map = self.0.lock().unwrap();
            let row: Option<Vec<usize>> = map.get(key).map(|r| r.iter().map(Vec::len).collect());
            check_fields("map", key, row.unwrap_or_default())
        }
        fn update(&self, key: &[u8], field: usize, value: &[u8]) -> BenchResult<()> {
            let mut map = self.0.lock().unwrap();
            let row = map.get_mut(key).ok_or("update of a missing row")?;
            row[field] = value.to_vec();
            Ok(())
        }
        fn scan(&self, start: &[u8], len: usize) -> BenchResult<u64> {
            let map = self.0.lock().unwrap();
            Ok(map.range(start.to_vec()..).take(len).count() as u64)
        }
    }

    #[test]
    fn every_phase_runs_on_a_model_store() {
        let mut core = crate::measure::Settings::new(500, std::env::temp_dir());
        core.rounds = 1;
        let s = Settings {
            records: 500,
            operations: 2000,
            threads: 3,
            core,
            chart: None,
            engines: vec!["map".into()],
            workloads: WORKLOADS.iter().map(|w| w.name.to_string()).collect(),
        };
        let store = MapStore(Default::default());
        let phases = run_engine("map", &store, &s).unwrap();
        let names: Vec<_> = phases.iter().map(|m| m.phase).collect();
        assert_eq!(names, ["load", "a", "b", "c", "f", "d", "e"]);
        assert_eq!(phases[0].ops, 500);
        assert!(phases[1..].iter().all(|m| m.ops == 2000));
        let inserted = phases[5].by_op[2] + phases[6].by_op[2];
        assert_eq!(store.0.lock().unwrap().len() as u64, 500 + inserted);
        assert!(phases[6].scan_rows >= phases[6].by_op[3]);
        assert!(store.read(b"user0").is_err());
    }
}
