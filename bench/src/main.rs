//! `basalt-bench`: Basalt's benchmark suites, each run against fjall in the same process.
//!
//! Usage: `basalt-bench <suite> [--rows N] [--dir PATH]`, suite one of core, storage,
//! filters, coprocessors, salting, index, gateway, ycsb, opcost, snapshots, plugins, cluster,
//! all (`all` runs all but gateway, ycsb, opcost, snapshots, plugins and cluster). The
//! `plugins` suite measures sandboxed plugins against native coprocessors (see its module
//! doc). The `cluster` suite runs YCSB A and C through the cluster client (one, then three
//! region servers in this process, a local etcd) against the embedded engine (`[--records N]
//! [--operations N] [--threads N]`; see its module doc). The `snapshots` suite measures table
//! snapshots, clones and backups against a flush, a file copy and `cp -r` (see its module
//! doc). The
//! `ycsb` suite runs YCSB's core workloads (load, then A, B, C, F, D, E) on Basalt, fjall and,
//! with the `rocksdb` feature, RocksDB (`[--records N] [--operations N] [--threads N]
//! [--chart FILE]`). The `opcost` suite runs put, cached get, missed get and scan phases
//! on Basalt and fjall, each ended by a marker function, for `bench/callgrind.py`, which
//! runs it under callgrind and prints instructions and mallocs per operation
//! (`RESULT opcost/<phase> ... unit=instructions`). The `index` suite compares
//! puts with 1 and 3 secondary indexes against none and an index lookup against a filtered
//! full scan. The `gateway` suite compares happybase batch puts and scans through
//! `basalt serve` with the same work through the Rust API (`rust_api`). The
//! `filters` suite compares Basalt with itself: a filtered scan against a client-side-filtered
//! one (`client_filter`); the `coprocessors` suite compares puts with 5 no-op observers against
//! none (`none`) and the built-in endpoints against client-side scans (`client_scan`); the
//! `salting` suite a salted table against an unsalted one (`unsalted`). Each suite prints its
//! settings, a readable table, then one line per
//! figure for scripts:
//!
//! `RESULT <suite>/<figure> basalt=<x> fjall=<y> ratio=<x/y> unit=<unit>[ better=lower]`
#![forbid(unsafe_code)]

mod basalt_side;
mod cluster;
mod coprocessors;
mod core;
mod figures;
mod filters;
mod fjall_side;
mod gateway;
mod index;
mod measure;
mod opcost;
mod plugins;
mod put_rounds;
mod salting;
mod snapshots;
mod storage;
mod storage_basalt;
mod storage_dataset;
mod storage_fjall;
mod workload;
mod ycsb;

use std::path::PathBuf;
use std::process::ExitCode;

/// The error type of a run: anything that stops it, with a readable message.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Every suite the CLI knows, implemented or not.
const SUITES: [&str; 13] = [
    "core",
    "storage",
    "filters",
    "coprocessors",
    "salting",
    "index",
    "gateway",
    "ycsb",
    "opcost",
    "snapshots",
    "plugins",
    "cluster",
    "all",
];

/// One compared figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// `suite/figure`.
    pub name: &'static str,
    /// The unit of `basalt` and `fjall`.
    pub unit: &'static str,
    /// True when a lower figure is better.
    pub lower_is_better: bool,
    /// Basalt's figure.
    pub basalt: f64,
    /// fjall's figure.
    pub fjall: f64,
    /// Basalt's operations and seconds, for the table (`None` for a figure that is not a
    /// rate).
    pub basalt_phase: Option<measure::Phase>,
    /// fjall's operations and seconds, for the table.
    pub fjall_phase: Option<measure::Phase>,
}

impl Figure {
    /// A throughput figure in ops/s (higher is better).
    pub fn ops(name: &'static str, basalt: measure::Phase, fjall: measure::Phase) -> Self {
        Figure {
            name,
            unit: "ops/s",
            lower_is_better: false,
            basalt: basalt.ops_per_sec(),
            fjall: fjall.ops_per_sec(),
            basalt_phase: Some(basalt),
            fjall_phase: Some(fjall),
        }
    }

    /// A figure that is not a rate (a size, a count per operation, a ratio).
    pub fn value(
        name: &'static str,
        unit: &'static str,
        lower_is_better: bool,
        basalt: f64,
        fjall: f64,
    ) -> Self {
        Figure {
            name,
            unit,
            lower_is_better,
            basalt,
            fjall,
            basalt_phase: None,
            fjall_phase: None,
        }
    }

    /// Basalt / fjall.
    pub fn ratio(&self) -> f64 {
        self.basalt / self.fjall
    }
}

/// A figure's value: whole numbers when large, three decimals when small.
fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn print_report(figures: &[Figure]) {
    let width = figures
        .iter()
        .map(|f| f.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "{:<width$} {:>10} {:>10} {:>14} {:>10} {:>14} {:>13}",
        "figure", "ops", "basalt s", "basalt", "fjall s", "fjall", "basalt/fjall"
    );
    let secs = |p: Option<measure::Phase>| {
        p.map_or("-".into(), |p| format!("{:.3}", p.elapsed.as_secs_f64()))
    };
    for f in figures {
        println!(
            "{:<width$} {:>10} {:>10} {:>14} {:>10} {:>14} {:>13.3}   {}",
            f.name,
            f.basalt_phase.map_or("-".into(), |p| p.ops.to_string()),
            secs(f.basalt_phase),
            num(f.basalt),
            secs(f.fjall_phase),
            num(f.fjall),
            f.ratio(),
            f.unit
        );
    }
    println!();
    for f in figures {
        println!(
            "RESULT {} basalt={} fjall={} ratio={:.3} unit={}{}",
            f.name,
            num(f.basalt),
            num(f.fjall),
            f.ratio(),
            f.unit,
            if f.lower_is_better {
                " better=lower"
            } else {
                ""
            }
        );
    }
}

/// Both engines run in this process, so both get the same allocator: mimalloc, as is usual
/// for storage benchmarks (glibc's malloc costs either engine more than its own code does).
/// Built with its `no_thp` feature: mimalloc 3 otherwise asks for transparent huge pages on
/// its arenas, and every page it purges and takes back faults in a zeroed 2 MiB page (a
/// fifth of Basalt's YCSB load time went to the kernel zeroing them).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: basalt-bench <suite> [--rows N] [--dir PATH] [--block-size BYTES]
  suite     core | storage | filters | coprocessors | salting | index | gateway | ycsb |
            opcost | snapshots | plugins | cluster | all
            (`all` runs all but gateway, which needs the `basalt` binary
            (cargo build --release -p basalt-cli) and python3 with happybase, ycsb, opcost,
            snapshots, plugins and cluster)
  --rows N  rows loaded and random reads made (default: core 1000000, storage 200000,
            filters 1000000, coprocessors 1000000, salting 1000000, index 1000000,
            gateway 200000, snapshots 1000000, plugins 1000000)
  --dir P   where the temporary data directories go (default: the system temp dir)
  --block-size B  Basalt's data block size for the bench family (default 8192)
  --compression C Basalt's block compression of flushed files in the core suite:
                  none | lz4 | zstd | snappy (default none, as fjall's level 0)
  --compaction-compression C  the same for compacted files (default lz4, as fjall's
                  levels below 0)
  --rounds N      core and storage suites: rounds of reads and of the scan per engine, median reported
                  (default 3)
ycsb suite (YCSB's core workloads: load, then A, B, C, F, D, E; RocksDB too when built
with `--features rocksdb`):
  --records N     records loaded (default 1000000; --rows is taken when --records is not given)
  --operations N  operations per workload (default 1000000)
  --threads N     client threads for the load and every workload (default 2)
  --chart FILE    also write an SVG bar chart of ops/s per workload and engine
  --engines LIST  comma-separated engines to run (default basalt,fjall and rocksdb when built)
  --workloads LIST  comma-separated workloads to run after the load (default a,b,c,f,d,e)
cluster suite (YCSB A and C through the cluster client, with one and with three region
servers in this process and a local etcd (Debian's etcd-server, or $BASALT_ETCD), against the
embedded engine in the same run):
  --records N     records loaded (default 20000)
  --operations N  operations per workload (default 50000)
  --threads N     clients (default 8)
opcost suite (instructions and mallocs per operation on Basalt and fjall; phases open, put
with its flush, warm, get_cached, scan_row, reopen with an 8 MiB block cache, warm2,
get_missed, each ended by opcost::phase_end, which prints `OPCOST <engine> <phase> <ops>`).
Run alone it prints ops/s and block cache counters; for the figures run it under callgrind
(after cargo build --release -p basalt-bench):
    python3 bench/callgrind.py [--out DIR] --records 100000 --operations 50000
  --records N     records loaded (default 100000; they must fit the 256 MiB block cache)
  --operations N  gets per get phase, a tenth as many 100-row scans (default 50000)
  --threads N     clients for the load, gets and scans (default 2)
  --engines LIST  basalt,fjall (default both)
profiling aids (core suite; no figures are published with them):
  BASALT_BENCH_ONLY_BASALT=1      run the Basalt side only (no fjall, no ratios)
  BASALT_BENCH_FLUSH_BYTES=N      Basalt's memstore flush size (small runs get the files of big ones)
profiling aid (opcost suite):
  BASALT_BENCH_MISS_CACHE_BYTES=N the block cache of the reopened engines (default 8 MiB)
profiling aid (coprocessors and index suites):
  BASALT_BENCH_PUT_ONLY=NAME      run the put rounds of one table alone (a figure's name, or
                                  none), nothing else, no figures: for callgrind's
                                  --toggle-collect='basalt_bench::put_rounds::round::*'";

struct Args {
    suite: String,
    rows: Option<u64>,
    dir: PathBuf,
    block_size: u32,
    compression: basalt_core::Compression,
    compaction_compression: basalt_core::Compression,
    rounds: usize,
    records: Option<u64>,
    operations: Option<u64>,
    threads: Option<usize>,
    chart: Option<PathBuf>,
    engines: Vec<String>,
    workloads: Vec<String>,
}

/// A count given on the command line (`_` separators allowed).
fn count(flag: &str, v: Option<String>) -> Result<u64, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.replace('_', "")
        .parse()
        .map_err(|_| format!("{flag}: not a number: {v}"))
}

/// A codec named on the command line.
fn codec(flag: &str, v: Option<String>) -> Result<basalt_core::Compression, String> {
    match v.ok_or_else(|| format!("{flag} needs a value"))?.as_str() {
        "none" => Ok(basalt_core::Compression::None),
        "lz4" => Ok(basalt_core::Compression::Lz4),
        "zstd" => Ok(basalt_core::Compression::Zstd),
        "snappy" => Ok(basalt_core::Compression::Snappy),
        other => Err(format!("{flag}: unknown codec {other}")),
    }
}

/// A comma-separated list of names, each one of `known`.
fn list(flag: &str, v: Option<String>, known: &[&str]) -> Result<Vec<String>, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.split(',')
        .map(|n| {
            if known.contains(&n) {
                Ok(n.to_string())
            } else {
                Err(format!(
                    "{flag}: unknown name {n} (known: {})",
                    known.join(",")
                ))
            }
        })
        .collect()
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut suite = None;
    let mut rows = None;
    let mut dir = std::env::temp_dir();
    let mut block_size = 8 * 1024;
    let mut compression = basalt_core::Compression::None;
    let mut compaction_compression = basalt_core::Compression::Lz4;
    let mut rounds = 3;
    let mut records = None;
    let mut operations = None;
    let mut threads = None;
    let mut chart = None;
    let mut engines = ycsb::ENGINES.iter().map(|e| e.to_string()).collect();
    let mut workloads = ycsb::WORKLOADS.iter().map(|w| w.name.to_string()).collect();
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => return Err(String::new()),
            "--rows" => {
                let v = args.next().ok_or("--rows needs a value")?;
                rows = Some(
                    v.replace('_', "")
                        .parse()
                        .map_err(|_| format!("--rows: not a number: {v}"))?,
                );
            }
            "--dir" => dir = args.next().ok_or("--dir needs a value")?.into(),
            "--block-size" => {
                let v = args.next().ok_or("--block-size needs a value")?;
                block_size = v
                    .parse()
                    .map_err(|_| format!("--block-size: not a number: {v}"))?;
            }
            "--rounds" => {
                let v = args.next().ok_or("--rounds needs a value")?;
                rounds = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--rounds: not a positive number: {v}"))?;
            }
            "--records" => records = Some(count("--records", args.next())?),
            "--operations" => operations = Some(count("--operations", args.next())?),
            "--threads" => {
                threads = Some(
                    usize::try_from(count("--threads", args.next())?)
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or("--threads: not a positive number")?,
                );
            }
            "--chart" => chart = Some(args.next().ok_or("--chart needs a value")?.into()),
            "--engines" => {
                engines = list("--engines", args.next(), ycsb::ENGINES)?;
            }
            "--workloads" => {
                let names: Vec<&str> = ycsb::WORKLOADS.iter().map(|w| w.name).collect();
                workloads = list("--workloads", args.next(), &names)?;
            }
            "--compression" => {
                compression = codec("--compression", args.next())?;
            }
            "--compaction-compression" => {
                compaction_compression = codec("--compaction-compression", args.next())?;
            }
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if suite.is_none() => suite = Some(s.to_string()),
            s => return Err(format!("unexpected argument {s}")),
        }
    }
    let suite = suite.ok_or("missing suite")?;
    if !SUITES.contains(&suite.as_str()) {
        return Err(format!("unknown suite {suite}"));
    }
    Ok(Args {
        suite,
        rows,
        dir,
        block_size,
        compression,
        compaction_compression,
        rounds,
        records,
        operations,
        threads,
        chart,
        engines,
        workloads,
    })
}

/// The engine settings of a YCSB-style suite over `records` rows: the block size and
/// compressions the command line gave.
fn core_settings(args: &Args, records: u64) -> measure::Settings {
    let mut core = measure::Settings::new(records, args.dir.clone());
    core.block_size = args.block_size;
    core.compression = args.compression;
    core.compaction_compression = args.compaction_compression;
    core
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let suites: &[&str] = match args.suite.as_str() {
        "all" => &[
            "core",
            "storage",
            "filters",
            "coprocessors",
            "salting",
            "index",
        ],
        "core" => &["core"],
        "storage" => &["storage"],
        "filters" => &["filters"],
        "coprocessors" => &["coprocessors"],
        "salting" => &["salting"],
        "index" => &["index"],
        "gateway" => &["gateway"],
        "ycsb" => &["ycsb"],
        "opcost" => &["opcost"],
        "snapshots" => &["snapshots"],
        "plugins" => &["plugins"],
        "cluster" => &["cluster"],
        other => {
            eprintln!("unknown suite {other}");
            return ExitCode::from(3);
        }
    };
    for &suite in suites {
        if suite == "ycsb" {
            let records = args.records.or(args.rows).unwrap_or(ycsb::DEFAULT_RECORDS);
            let core = core_settings(&args, records);
            let settings = ycsb::Settings {
                records,
                operations: args.operations.unwrap_or(ycsb::DEFAULT_OPERATIONS),
                threads: args.threads.unwrap_or(ycsb::DEFAULT_THREADS),
                core,
                chart: args.chart.clone(),
                engines: args.engines.clone(),
                workloads: args.workloads.clone(),
            };
            if let Err(e) = ycsb::run(&settings) {
                eprintln!("error: suite ycsb failed: {e}");
                return ExitCode::FAILURE;
            }
            println!();
            continue;
        }
        if suite == "cluster" {
            let records = args
                .records
                .or(args.rows)
                .unwrap_or(cluster::DEFAULT_RECORDS);
            let core = core_settings(&args, records);
            let settings = ycsb::Settings {
                records,
                operations: args.operations.unwrap_or(cluster::DEFAULT_OPERATIONS),
                threads: args.threads.unwrap_or(cluster::DEFAULT_THREADS),
                core,
                chart: None,
                engines: vec!["basalt".into()],
                workloads: cluster::WORKLOADS.iter().map(|w| w.to_string()).collect(),
            };
            if let Err(e) = cluster::run(&settings) {
                eprintln!("error: suite cluster failed: {e}");
                return ExitCode::FAILURE;
            }
            println!();
            continue;
        }
        if suite == "opcost" {
            let records = args
                .records
                .or(args.rows)
                .unwrap_or(opcost::DEFAULT_RECORDS);
            let core = core_settings(&args, records);
            let settings = opcost::Settings {
                records,
                operations: args.operations.unwrap_or(opcost::DEFAULT_OPERATIONS),
                threads: args.threads.unwrap_or(ycsb::DEFAULT_THREADS),
                core,
                engines: args.engines.clone(),
            };
            if let Err(e) = opcost::run(&settings) {
                eprintln!("error: suite opcost failed: {e}");
                return ExitCode::FAILURE;
            }
            println!();
            continue;
        }
        let default_rows = match suite {
            "core" => 1_000_000,
            "filters" => filters::DEFAULT_ROWS,
            "coprocessors" => coprocessors::DEFAULT_ROWS,
            "salting" => salting::DEFAULT_ROWS,
            "index" => index::DEFAULT_ROWS,
            "gateway" => gateway::DEFAULT_ROWS,
            "snapshots" => snapshots::DEFAULT_ROWS,
            "plugins" => plugins::DEFAULT_ROWS,
            _ => storage_dataset::DEFAULT_ROWS,
        };
        let mut settings =
            measure::Settings::new(args.rows.unwrap_or(default_rows), args.dir.clone());
        settings.block_size = args.block_size;
        settings.compression = args.compression;
        settings.compaction_compression = args.compaction_compression;
        settings.rounds = args.rounds;
        if [
            "filters",
            "coprocessors",
            "salting",
            "index",
            "gateway",
            "snapshots",
            "plugins",
        ]
        .contains(&suite)
        {
            let r = match suite {
                "snapshots" => snapshots::run(&settings),
                "plugins" => plugins::run(&settings),
                "filters" => filters::run(&settings),
                "gateway" => gateway::run(&settings),
                "coprocessors" => coprocessors::run(&settings),
                "index" => index::run(&settings),
                _ => salting::run(&settings),
            };
            if let Err(e) = r {
                eprintln!("error: suite {suite} failed: {e}");
                return ExitCode::FAILURE;
            }
            println!();
            continue;
        }
        let figures = match suite {
            "core" => core::run(&settings),
            _ => storage::run(&settings),
        };
        match figures {
            Ok(figures) => print_report(&figures),
            Err(e) => {
                eprintln!("error: suite {suite} failed: {e}");
                return ExitCode::FAILURE;
            }
        }
        println!();
    }
    ExitCode::SUCCESS
}
