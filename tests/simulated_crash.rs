//! Simulated crashes over the fault-injecting filesystem ([`basalt::fs::FaultFs`]).
//!
//! For every seed: open an engine on an in-memory `FaultFs`, create a table (two families,
//! tiny MemStore flush size, minor compaction from two files), arm a crash at a random sync
//! point, and run a seeded workload of a few dozen sequential operations: puts (one row, both
//! families, one value: a write that must be all-or-nothing), row deletes, table flushes,
//! minor and major compactions, region splits at a row and merges of two adjacent regions
//! (regions also split by themselves: the flush size is tiny), with `SyncWal` and `FsyncWal`
//! mixed. At the crash point the
//! filesystem stops (that sync and everything after it fail) and the workload stops at the
//! first failed operation; if the point is never reached, the crash happens after the last
//! operation. Then the engine is dropped without closing, the filesystem crashes (a process
//! crash or a machine crash, by seed) and the engine is reopened on it.
//!
//! In 40% of the seeds another fault strikes first, at a random operation: a failed sync, a
//! torn write or a full disk. The workload goes on after the operations it fails (the engine
//! keeps working, e.g. after a failed flush, or refuses writes, after a WAL failure); a
//! failed operation may or may not have applied. No operation may fail before a fault.
//!
//! What is checked: operations run one at a time with explicit, increasing timestamps, so
//! the recovered table must equal the model's table after some prefix `k` of the operations:
//! nothing that was never written appears, no row is torn between its families, and no write
//! is reordered. The prefix must include every operation up to the last one that was
//! acknowledged durable:
//! - machine crash: the last write acknowledged with `FsyncWal` and the last completed flush
//!   (a flushed store file is durable);
//! - process crash: the last acknowledged operation of any durability (`SyncWal` has reached
//!   the OS, which survives).
//!
//! Failed operations inside the prefix are optional (checked row by row: a row holds the
//! value of its last successful write in the prefix or of any failed write after it).
//! The prefix may include the operation that failed at the crash point (it may have reached
//! the WAL before the failed sync) and nothing after it.
//!
//! Crash windows covered (chosen by the sync point): WAL appends and group-commit fsyncs, WAL
//! segment rolls (2 KiB segments), flush (store file sync, directory sync, catalog tmp sync,
//! catalog rename sync), compaction output and catalog commit, WAL purge, split and merge
//! (the parent's flush, the daughters' catalog commit, the compactions that rewrite their
//! references).
//!
//! Knobs: `BASALT_CRASH_SEEDS` (default 1000) runs seeds `0..N`; `BASALT_CRASH_SEED=N` runs
//! only seed N. A failure names its seed and how to rerun it. The workload is a pure function
//! of the seed, but background flushes and compactions run on their own tasks, so which
//! sync a crash point lands on can differ slightly between runs of one seed.

use basalt::client::{Delete, Put, Scan};
use basalt::fs::{CrashKind, FaultFs};
use basalt::{ColumnFamilyDescriptor, Config, Connection, Durability, TableDescriptor, TableName};
use futures::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::time::Instant;

const DIR: &str = "/db";
const TABLE: &str = "t";
const FAMILIES: [&str; 2] = ["a", "b"];
const QUALIFIER: &str = "q";
const ROWS: usize = 6;
const OPS: usize = 60;

/// One operation of the workload.
#[derive(Debug, Clone)]
enum Op {
    Put {
        row: usize,
        ts: u64,
        durability: Durability,
    },
    Delete {
        row: usize,
        ts: u64,
        durability: Durability,
    },
    Flush,
    Compact,
    MajorCompact,
    /// Split the region holding `row` at that row (nothing when the row starts its region).
    Split {
        row: usize,
    },
    /// Merge the `pick % (regions - 1)`th region with the next (nothing with one region).
    Merge {
        pick: usize,
    },
}

/// The visible table: row -> value.
type State = BTreeMap<String, String>;

fn row_name(row: usize) -> String {
    format!("r{row}")
}

fn value(ts: u64) -> String {
    format!("v{ts}")
}

fn random_op(rng: &mut StdRng, ts: u64) -> Op {
    let durability = if rng.random_bool(0.5) {
        Durability::FsyncWal
    } else {
        Durability::SyncWal
    };
    let row = rng.random_range(0..ROWS);
    match rng.random_range(0..100) {
        0..55 => Op::Put {
            row,
            ts,
            durability,
        },
        55..70 => Op::Delete {
            row,
            ts,
            durability,
        },
        70..80 => Op::Flush,
        80..87 => Op::Compact,
        87..91 => Op::MajorCompact,
        91..96 => Op::Split {
            row: rng.random_range(1..ROWS),
        },
        _ => Op::Merge {
            pick: rng.random_range(0..ROWS),
        },
    }
}

/// Runs one operation; `Ok(true)` when it made everything before it durable even on a
/// machine crash.
async fn run(conn: &Connection, op: &Op) -> basalt::Result<bool> {
    let table = conn.table(TABLE)?;
    let name = TableName::parse(TABLE)?;
    match op {
        Op::Put {
            row,
            ts,
            durability,
        } => {
            let mut p = Put::new(row_name(*row)).durability(*durability);
            for f in FAMILIES {
                p = p.add_column_ts(f, QUALIFIER, *ts, value(*ts));
            }
            table.put(p).await?;
            Ok(*durability == Durability::FsyncWal)
        }
        Op::Delete {
            row,
            ts,
            durability,
        } => {
            let d = Delete::new(row_name(*row))
                .timestamp(*ts)
                .durability(*durability);
            table.delete(d).await?;
            Ok(*durability == Durability::FsyncWal)
        }
        Op::Flush => {
            conn.admin().flush(&name).await?;
            Ok(true)
        }
        Op::Compact => conn.admin().compact(&name).await.map(|()| false),
        Op::MajorCompact => conn.admin().major_compact(&name).await.map(|()| false),
        Op::Split { row } => {
            let at = row_name(*row);
            let regions = conn.admin().regions(&name).await?;
            let holder = regions.iter().find(|r| {
                r.start_key.as_ref() < at.as_bytes()
                    && (r.end_key.is_empty() || at.as_bytes() < r.end_key.as_ref())
            });
            if let Some(r) = holder {
                conn.admin()
                    .split_region(&name, r.id, Some(at.as_bytes()))
                    .await?;
            }
            Ok(false)
        }
        Op::Merge { pick } => {
            let regions = conn.admin().regions(&name).await?;
            if regions.len() > 1 {
                let i = pick % (regions.len() - 1);
                conn.admin()
                    .merge_regions(&name, regions[i].id, regions[i + 1].id)
                    .await?;
            }
            Ok(false)
        }
    }
}

fn config(fs: &FaultFs) -> Config {
    Config::new(DIR)
        .filesystem(fs.as_dyn())
        .memstore_flush_size(1024)
        .wal_segment_size(2048)
        .blocking_wait_ms(0)
}

/// Reads the whole table; a row whose families disagree is torn.
async fn read_all(conn: &Connection) -> Result<State, String> {
    let table = conn.table(TABLE).map_err(|e| e.to_string())?;
    let rows: Vec<_> = table
        .scan(Scan::new())
        .map_err(|e| format!("scan: {e}"))?
        .try_collect()
        .await
        .map_err(|e| format!("scan: {e}"))?;
    let mut state = State::new();
    for r in rows {
        let row = String::from_utf8_lossy(&r.row).to_string();
        let values: Vec<String> = r
            .cells
            .iter()
            .map(|c| String::from_utf8_lossy(&c.value).to_string())
            .collect();
        if values.len() != FAMILIES.len() || values.iter().any(|v| *v != values[0]) {
            return Err(format!(
                "row {row} is torn between its families: {values:?}"
            ));
        }
        state.insert(row, values[0].clone());
    }
    Ok(state)
}

/// A fault injected before the crash.
#[derive(Debug)]
enum Fault {
    FailSync(u64),
    TearWrite(u64),
    DiskFull(u64),
}

impl Fault {
    fn arm(&self, fs: &FaultFs) {
        match self {
            Fault::FailSync(n) => fs.fail_sync(*n),
            Fault::TearWrite(n) => fs.tear_write(*n),
            Fault::DiskFull(n) => fs.disk_full_after(Some(*n)),
        }
    }
}

/// The values `row` may hold after `ops` when the failed ones may or may not have applied:
/// the last successful write's, or that of any failed write after it.
fn allowed(ops: &[Op], failed: &BTreeMap<usize, String>, row: usize) -> Vec<Option<String>> {
    let mut values = vec![None];
    for (i, op) in ops.iter().enumerate() {
        let v = match op {
            Op::Put { row: r, ts, .. } if *r == row => Some(value(*ts)),
            Op::Delete { row: r, .. } if *r == row => None,
            _ => continue,
        };
        if !failed.contains_key(&i) {
            values.clear();
        }
        values.push(v);
    }
    values
}

/// What one seed did, for the summary line.
#[derive(Default)]
struct Outcome {
    stopped: bool,
    ops_run: usize,
    must: usize,
    syncs: u64,
    /// Operations failed by an injected fault other than the crash.
    faulted: usize,
}

async fn run_seed(seed: u64) -> Result<Outcome, String> {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xba5a17);
    let kind = if rng.random_bool(0.5) {
        CrashKind::Process
    } else {
        CrashKind::Machine
    };
    let fs = FaultFs::new();
    let conn = Connection::open_with(config(&fs))
        .await
        .map_err(|e| format!("first open: {e}"))?;
    let name = TableName::parse(TABLE).map_err(|e| e.to_string())?;
    let mut desc = TableDescriptor::new(name).compaction_files(2, 10);
    for f in FAMILIES {
        desc = desc.family(ColumnFamilyDescriptor::new(f));
    }
    conn.admin()
        .create_table(desc)
        .await
        .map_err(|e| format!("create table: {e}"))?;
    let crash_at = rng.random_range(1..=150);
    fs.crash_at_sync(crash_at);

    let ops: Vec<Op> = (0..OPS)
        .map(|i| random_op(&mut rng, i as u64 + 1))
        .collect();
    // In some seeds a fault strikes before the crash (at op `at`); the workload goes on.
    let fault = rng.random_bool(0.4).then(|| {
        let at = rng.random_range(0..OPS);
        let fault = match rng.random_range(0..3) {
            0 => Fault::FailSync(rng.random_range(1..=4)),
            1 => Fault::TearWrite(rng.random_range(1..=4)),
            _ => Fault::DiskFull(rng.random_range(0..8192)),
        };
        (at, fault)
    });
    // Ops [0, must) must survive (failed ones aside); ops from `may` on cannot.
    let mut must = 0;
    let mut may = ops.len();
    let mut failed = BTreeMap::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some((at, f)) = &fault {
            if *at == i {
                f.arm(&fs);
            }
        }
        match run(&conn, op).await {
            Ok(durable) => {
                if durable || kind == CrashKind::Process {
                    must = i + 1;
                }
            }
            Err(e) => {
                failed.insert(i, format!("op {i} {op:?} failed: {e}"));
                if fs.is_stopped() {
                    may = i + 1;
                    break;
                }
                if fault.as_ref().is_none_or(|(at, _)| i < *at) {
                    return Err(format!(
                        "an operation failed before any fault: op {i} {op:?}: {e}"
                    ));
                }
            }
        }
    }
    let stopped = fs.is_stopped();
    let syncs = fs.syncs();
    drop(conn);
    let fs = fs.crash(kind);
    let conn = Connection::open_with(config(&fs))
        .await
        .map_err(|e| format!("reopen after {kind:?} crash ({fault:?}): {e}"))?;
    let got = read_all(&conn).await?;
    let _ = conn.close().await;
    let fits = (must..=may).any(|k| {
        (0..ROWS)
            .all(|row| allowed(&ops[..k], &failed, row).contains(&got.get(&row_name(row)).cloned()))
    });
    if !fits {
        return Err(format!(
            "{kind:?} crash at sync {crash_at}, fault {fault:?}, failures {failed:?}: \
             recovered table {got:?} is not the state after any prefix of {must}..={may} \
             operations (failed ones optional) of {ops:#?}",
        ));
    }
    Ok(Outcome {
        stopped,
        ops_run: may,
        must,
        syncs,
        faulted: failed.len().saturating_sub(usize::from(stopped)),
    })
}

#[test]
fn simulated_crashes() {
    let seeds: Vec<u64> = match std::env::var("BASALT_CRASH_SEED") {
        Ok(s) => vec![s.parse().expect("BASALT_CRASH_SEED is a number")],
        Err(_) => {
            let n = std::env::var("BASALT_CRASH_SEEDS")
                .ok()
                .map(|s| s.parse().expect("BASALT_CRASH_SEEDS is a number"))
                .unwrap_or(1000u64);
            (0..n).collect()
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let start = Instant::now();
    let mut failures = Vec::new();
    let mut total = Outcome::default();
    let mut crashed = 0;
    for &seed in &seeds {
        match rt.block_on(run_seed(seed)) {
            Ok(o) => {
                crashed += usize::from(o.stopped);
                total.ops_run += o.ops_run;
                total.must += o.must;
                total.syncs += o.syncs;
                total.faulted += o.faulted;
            }
            Err(e) => {
                eprintln!(
                    "seed {seed} failed: {e}; rerun with BASALT_CRASH_SEED={seed} cargo test \
                 --release --test simulated_crash"
                );
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{} seeds in {:.1} s, {} failed; {crashed} stopped at their sync point, the rest \
         after the last operation; {} operations run, {} required to survive, {} failed by an injected fault, {} syncs",
        seeds.len(),
        start.elapsed().as_secs_f64(),
        failures.len(),
        total.ops_run,
        total.must,
        total.faulted,
        total.syncs,
    );
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}
