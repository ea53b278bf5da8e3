//! The ycsb suite's output: its settings, a line per finished phase, the table of every
//! engine's throughput and latency percentiles, and the `RESULT` lines
//! (`RESULT ycsb/<phase> basalt=<ops/s> fjall=<ops/s> ratio=<basalt/fjall> unit=ops/s`, and
//! `RESULT ycsb/<phase>_vs_rocksdb basalt=.. rocksdb=.. ratio=.. unit=ops/s` when RocksDB
//! ran).
//!
//! Invariant: a `RESULT` line is printed only for a phase both of its engines measured.

use super::{Measured, Results, Settings, MAX_SCAN_LENGTH, WORKLOADS};
use crate::workload::{FIELDS, FIELD_LEN};
use std::path::Path;

/// The operations of a phase by kind, e.g. `read 950 insert 50`.
pub fn mix(m: &Measured) -> String {
    let names = ["read", "update", "insert", "scan", "rmw"];
    let parts: Vec<String> = names
        .iter()
        .zip(m.by_op)
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    parts.join(" ")
}

/// Prints a finished phase.
pub fn progress(engine: &str, m: &Measured) {
    println!(
        "  {engine:<7} {:<4} {:>10} ops in {:>8.3} s = {:>10.0} ops/s  p50 {:>8.1} µs  p99 {:>9.1} µs  ({})",
        m.phase,
        m.ops,
        m.elapsed.as_secs_f64(),
        m.ops_per_sec(),
        m.latency_us(0.5),
        m.latency_us(0.99),
        mix(m),
    );
}

/// Prints what the run does.
pub fn print_settings(s: &Settings) {
    let cfg = crate::basalt_side::config(Path::new("."), &s.core);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("== suite ycsb: settings ==");
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; use --release for meaningful figures");
    }
    println!(
        "records    : {} records x {FIELDS} fields x {FIELD_LEN} B (YCSB CoreWorkload \
         defaults); keys `user` + FNV-64 of the record number (insertorder=hashed, no \
         padding)",
        s.records
    );
    println!(
        "threads    : {} clients (fjall, RocksDB: OS threads; Basalt: tokio tasks on a \
         {cores}-worker multi-thread runtime, as in the core suite)",
        s.threads
    );
    println!(
        "load       : the records inserted by the threads, each taking the next record number"
    );
    let mixes: Vec<String> = WORKLOADS
        .iter()
        .map(|w| {
            let names = ["read", "update", "insert", "scan", "rmw"];
            let mix: Vec<String> = w
                .proportions
                .iter()
                .zip(names)
                .filter(|(p, _)| **p > 0.0)
                .map(|(p, n)| format!("{n} {p}"))
                .collect();
            format!("{} ({}: {})", w.name, w.title, mix.join("/"))
        })
        .collect();
    println!(
        "workloads  : {} operations each, in this order on the loaded data: {}",
        s.operations,
        mixes.join(", ")
    );
    println!(
        "keys       : scrambled Zipfian (0.99) over the records present plus \
         operations*insertproportion*2 (D: skewed latest over the acknowledged inserts); \
         record numbers not yet acknowledged are redrawn; inserts take new record numbers \
         after the loaded ones from a counter shared by all workloads of an engine"
    );
    println!(
        "operations : read = every field; update = one random field; rmw = read, then update \
         one field; scan = 1..={MAX_SCAN_LENGTH} rows (uniform) from a Zipfian start key; each \
         read and scanned row must have its {FIELDS} fields (a missing row fails the run)"
    );
    println!(
        "basalt     : table `usertable`, family `f`, {} regions pre-split, Put/Get/Scan with \
         Durability::SyncWal; BLOCKSIZE {} KiB, COMPRESSION {:?}, COMPRESSION_COMPACT {:?}; \
         block_cache_size {} MiB",
        s.core.regions,
        s.core.block_size / 1024,
        s.core.compression,
        s.core.compaction_compression,
        cfg.block_cache_size >> 20
    );
    println!(
        "fjall 3    : one keyspace, default options, journal persisted to the OS per insert; \
         cache_size {} MiB; a row is one value; an update is get + insert of the whole value",
        s.core.cache_bytes >> 20
    );
    if cfg!(feature = "rocksdb") {
        println!(
            "rocksdb    : default options, bloom filter 10 bits/key, LRU block cache {} MiB, \
             WAL without fsync per write; rows and updates as fjall's",
            s.core.cache_bytes >> 20
        );
    } else {
        println!("rocksdb    : not built (cargo feature `rocksdb`)");
    }
    println!(
        "between    : nothing (no flush or compaction is forced between phases, as YCSB runs \
         them); engines one after the other, each in its own temp dir under {}, deleted after",
        s.core.dir.display()
    );
    println!();
}

/// Prints the table and the `RESULT` lines.
pub fn print(results: &Results) {
    println!(
        "{:<6} {:<8} {:>10} {:>9} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "phase", "engine", "ops", "secs", "ops/s", "p50 µs", "p99 µs", "p99.9 µs", "scan rows"
    );
    let phases: Vec<&'static str> = results
        .engines
        .first()
        .map(|(_, ms)| ms.iter().map(|m| m.phase).collect())
        .unwrap_or_default();
    for phase in &phases {
        for (engine, ms) in &results.engines {
            if let Some(m) = ms.iter().find(|m| m.phase == *phase) {
                println!(
                    "{:<6} {:<8} {:>10} {:>9.3} {:>12.0} {:>10.1} {:>10.1} {:>10.1} {:>10}",
                    phase,
                    engine,
                    m.ops,
                    m.elapsed.as_secs_f64(),
                    m.ops_per_sec(),
                    m.latency_us(0.5),
                    m.latency_us(0.99),
                    m.latency_us(0.999),
                    m.scan_rows
                );
            }
        }
    }
    println!();
    for line in result_lines(results) {
        println!("{line}");
    }
}

/// The ops/s of `engine` in `phase`, if it ran.
pub fn ops_per_sec(results: &Results, engine: &str, phase: &str) -> Option<f64> {
    results
        .engines
        .iter()
        .find(|(e, _)| *e == engine)
        .and_then(|(_, ms)| ms.iter().find(|m| m.phase == phase))
        .map(Measured::ops_per_sec)
}

/// The `RESULT` lines: Basalt against fjall per phase, then against RocksDB when it ran.
pub fn result_lines(results: &Results) -> Vec<String> {
    let mut out = Vec::new();
    let phases = ["load", "a", "b", "c", "f", "d", "e"];
    for (baseline, suffix) in [("fjall", ""), ("rocksdb", "_vs_rocksdb")] {
        for phase in phases {
            let b = ops_per_sec(results, "basalt", phase);
            let o = ops_per_sec(results, baseline, phase);
            if let (Some(b), Some(o)) = (b, o) {
                out.push(format!(
                    "RESULT ycsb/{phase}{suffix} basalt={b:.0} {baseline}={o:.0} ratio={:.3} \
                     unit=ops/s",
                    b / o
                ));
            }
        }
    }
    out
}
