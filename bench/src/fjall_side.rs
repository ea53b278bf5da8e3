//! The core suite on fjall 3: one keyspace, a row is one key whose value holds the 10 fields
//! (see [`Workload::encode_row`]), loaded and read by OS threads, scanned by one iterator.
//!
//! Durability matches Basalt's `SyncWal`: the keyspace keeps `manual_journal_persist(false)`
//! (fjall's default), so every `insert` persists the journal with `PersistMode::Buffer`
//! (written to the OS) before it returns.

use crate::measure::{Measured, Phase, Settings};
use crate::workload::{decode_row, touch, Workload};
use crate::BenchResult;
use fjall::{Database, Keyspace, KeyspaceCreateOptions};
use std::path::Path;
use std::time::{Duration, Instant};

/// The keyspace's name.
const KEYSPACE: &str = "usertable";
/// How long background work must stay idle before reads start.
const QUIET: Duration = Duration::from_secs(1);
/// Longest wait for background work to go idle.
const QUIET_LIMIT: Duration = Duration::from_secs(300);

/// The keyspace settings the suite uses: fjall's defaults, journal persisted per write.
fn keyspace_options() -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default().manual_journal_persist(false)
}

/// Runs load, flush, random reads and the full scan in `dir`.
pub fn run(w: &Workload, dir: &Path, s: &Settings) -> BenchResult<Measured> {
    let db = Database::builder(dir).cache_size(s.cache_bytes).open()?;
    let ks = db.keyspace(KEYSPACE, keyspace_options)?;

    let start = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = w
            .shares(s.writers)
            .into_iter()
            .map(|share| {
                let ks = ks.clone();
                scope.spawn(move || {
                    for i in share {
                        ks.insert(w.keys[i as usize].as_slice(), w.encode_row(i))?;
                    }
                    Ok::<_, fjall::Error>(())
                })
            })
            .collect();
        join_all(handles)
    })?;
    let load = Phase::new(w.rows, start.elapsed());
    crate::measure::progress("fjall", "load", &load);

    let start = Instant::now();
    ks.rotate_memtable_and_wait()?;
    settle(&db)?;
    let flush = start.elapsed();
    let state = format!(
        "{} tables ({} in L0), {:.1} MiB on disk",
        ks.table_count(),
        ks.l0_table_count(),
        ks.disk_space() as f64 / (1 << 20) as f64
    );

    let mut reads = Vec::new();
    for _ in 0..s.rounds.max(1) {
        let start = Instant::now();
        let counts = std::thread::scope(|scope| {
            let handles: Vec<_> = w
                .read_shares(s.readers)
                .into_iter()
                .map(|part| {
                    let ks = ks.clone();
                    scope.spawn(move || read_part(w, &ks, part))
                })
                .collect();
            join_all(handles)
        })?;
        let read = Phase::new(w.read_order.len() as u64, start.elapsed());
        crate::measure::progress("fjall", "read", &read);
        reads.push(read);
        let misses = counts.iter().map(|c| c.0).sum();
        let wrong = counts.iter().map(|c| c.1).sum();
        crate::measure::check_reads("fjall", misses, wrong)?;
    }
    let read = crate::measure::median(reads).ok_or("no read round")?;

    let mut scans = Vec::new();
    for _ in 0..s.rounds.max(1) {
        let start = Instant::now();
        let (mut rows, mut cells, mut value_bytes, mut acc) = (0u64, 0u64, 0u64, 0u64);
        for guard in ks.iter() {
            let (_key, value) = guard.into_inner()?;
            rows += 1;
            for (_name, v) in decode_row(&value).ok_or("fjall: malformed row in scan")? {
                cells += 1;
                value_bytes += v.len() as u64;
                acc = touch(acc, v);
            }
        }
        let scan = Phase::new(rows, start.elapsed());
        crate::measure::progress("fjall", "scan", &scan);
        scans.push(scan);
        crate::measure::check_scan("fjall", w.rows, rows, cells, value_bytes, acc)?;
    }
    let scan = crate::measure::median(scans).ok_or("no scan round")?;

    drop(ks);
    drop(db);
    Ok(Measured {
        load,
        read,
        scan,
        flush,
        state,
    })
}

/// Reads one reader's keys; returns (misses, wrong contents).
fn read_part(w: &Workload, ks: &Keyspace, part: &[u32]) -> fjall::Result<(u64, u64)> {
    let (mut misses, mut wrong) = (0, 0);
    for &i in part {
        match ks.get(w.keys[i as usize])? {
            None => misses += 1,
            Some(v) => {
                let ok = decode_row(&v).is_some_and(|f| w.check_row(i as u64, f));
                if !ok {
                    wrong += 1;
                }
            }
        }
    }
    Ok((misses, wrong))
}

/// Waits until no flush or compaction has run for [`QUIET`], so reads measure fjall at rest
/// (Basalt settles the same way with `Admin::compact`).
pub(crate) fn settle(db: &Database) -> BenchResult<()> {
    let start = Instant::now();
    let mut idle_since = Instant::now();
    loop {
        if db.active_compactions() > 0 || db.outstanding_flushes() > 0 {
            idle_since = Instant::now();
        } else if idle_since.elapsed() >= QUIET {
            return Ok(());
        }
        if start.elapsed() > QUIET_LIMIT {
            return Err("fjall: background work did not settle within 300 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Joins scoped threads, turning a panic into an error.
fn join_all<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, fjall::Result<T>>>,
) -> BenchResult<Vec<T>> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.join().map_err(|_| "fjall: worker thread panicked")??);
    }
    Ok(out)
}
