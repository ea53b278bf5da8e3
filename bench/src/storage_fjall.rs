//! The storage suite on fjall 3: one keyspace per data set, loaded in rounds with a memtable
//! rotation after each, left to settle, scanned, then read by key through a small cache.
//!
//! Block counts come from the keyspace's metrics (`metrics` feature): data blocks loaded,
//! from the cache or from disk.

use crate::measure::{Phase, Settings};
use crate::storage_dataset::{self, Codec, Dataset, Keys, Lookups, Variant, FLUSHES};
use crate::workload::{decode_row, touch, Key};
use crate::BenchResult;
use fjall::config::{CompressionPolicy, FilterPolicy};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions};
use std::path::Path;
use std::time::{Duration, Instant};

const KEYSPACE: &str = "usertable";

fn options(v: Variant) -> KeyspaceCreateOptions {
    let mut o = KeyspaceCreateOptions::default().manual_journal_persist(false);
    if !v.bloom {
        o = o.filter_policy(FilterPolicy::disabled());
    }
    match v.codec {
        Some(Codec::Lz4) => {
            o = o.data_block_compression_policy(CompressionPolicy::all(CompressionType::Lz4))
        }
        Some(_) => {
            o = o.data_block_compression_policy(CompressionPolicy::all(CompressionType::None))
        }
        None => {}
    }
    o
}

/// Loads, scans and reads one data set in `dir`.
pub fn run(k: &Keys, dir: &Path, s: &Settings, v: Variant) -> BenchResult<Dataset> {
    if matches!(v.codec, Some(Codec::Zstd | Codec::Snappy)) {
        return Err("fjall 3 has no Zstd or Snappy compression".into());
    }
    let db = Database::builder(dir).cache_size(s.cache_bytes).open()?;
    let ks = db.keyspace(KEYSPACE, || options(v))?;
    let w = &*k.w;

    let start = Instant::now();
    for round in 0..FLUSHES {
        let (lo, hi) = (w.rows * round / FLUSHES, w.rows * (round + 1) / FLUSHES);
        let n = s.writers as u64;
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let share = lo + (hi - lo) * i / n..lo + (hi - lo) * (i + 1) / n;
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
        ks.rotate_memtable_and_wait()?;
    }
    let load = Phase::new(w.rows, start.elapsed());
    storage_dataset::progress("fjall", "load+flushes", &load);
    storage_dataset::settle(
        || db.active_compactions() > 0 || db.outstanding_flushes() > 0,
        Duration::from_secs(1),
        Duration::from_secs(300),
    )?;
    let disk_bytes = ks.disk_space();
    let state = format!(
        "{} tables ({} in L0), {:.1} MiB",
        ks.table_count(),
        ks.l0_table_count(),
        disk_bytes as f64 / (1 << 20) as f64
    );
    println!("    fjall after load and settle: {state}");

    let mut scans = Vec::new();
    for _ in 0..s.rounds.max(1) {
        let start = Instant::now();
        let (mut rows, mut value_bytes, mut acc) = (0u64, 0u64, 0u64);
        for guard in ks.iter() {
            let (_key, value) = guard.into_inner()?;
            rows += 1;
            for (_name, v) in decode_row(&value).ok_or("fjall: malformed row in scan")? {
                value_bytes += v.len() as u64;
                acc = touch(acc, v);
            }
        }
        let scan = Phase::new(rows, start.elapsed());
        storage_dataset::progress("fjall", "scan", &scan);
        storage_dataset::check_scan("fjall", w, rows, value_bytes)?;
        std::hint::black_box(acc);
        scans.push(scan);
    }
    let scan = crate::measure::median(scans).ok_or("no scan round")?;

    let rounds = |what: &str, keys: &[Key], present: Option<&Keys>| {
        let mut rounds = Vec::new();
        for _ in 0..s.rounds.max(1) {
            let l = lookups(&ks, s.readers, keys, present)?;
            storage_dataset::progress("fjall", what, &l.phase);
            rounds.push(l);
        }
        storage_dataset::median(rounds)
    };
    let absent = if v.absent_reads {
        Some(rounds("absent reads", &k.absent, None)?)
    } else {
        None
    };
    let present = if v.present_reads {
        let keys: Vec<Key> = w.read_order.iter().map(|&i| w.keys[i as usize]).collect();
        Some(rounds("present reads", &keys, Some(k))?)
    } else {
        None
    };
    drop(ks);
    drop(db);
    Ok(Dataset {
        load,
        scan,
        disk_bytes,
        absent,
        present,
    })
}

/// Reads `keys` with `readers` threads; see the Basalt side for what is checked.
fn lookups(
    ks: &Keyspace,
    readers: usize,
    keys: &[Key],
    present: Option<&Keys>,
) -> BenchResult<Lookups> {
    let blocks_before = ks.metrics().data_block_load_count();
    let n = keys.len();
    let start = Instant::now();
    let counts = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..readers)
            .map(|part| {
                let ks = ks.clone();
                scope.spawn(move || {
                    let (mut found, mut wrong) = (0u64, 0u64);
                    let lo = n * part / readers;
                    let mine = &keys[lo..n * (part + 1) / readers];
                    for (idx, key) in (lo..).zip(mine) {
                        let Some(value) = ks.get(key)? else {
                            continue;
                        };
                        found += 1;
                        if let Some(k) = present {
                            let i = k.w.read_order[idx] as u64;
                            let ok = decode_row(&value).is_some_and(|f| k.w.check_row(i, f));
                            wrong += u64::from(!ok);
                        }
                    }
                    Ok::<_, fjall::Error>((found, wrong))
                })
            })
            .collect();
        join_all(handles)
    })?;
    let phase = Phase::new(n as u64, start.elapsed());
    let blocks = ks.metrics().data_block_load_count() - blocks_before;
    let found = counts.iter().map(|c| c.0).sum();
    let wrong: u64 = counts.iter().map(|c| c.1).sum();
    let (what, expected) = if present.is_some() {
        ("present", n as u64)
    } else {
        ("absent", 0)
    };
    storage_dataset::check_lookups("fjall", what, found, expected)?;
    if wrong > 0 {
        return Err(format!("fjall: {wrong} present reads returned wrong contents").into());
    }
    Ok(Lookups {
        phase,
        blocks_per_lookup: blocks as f64 / n.max(1) as f64,
        files_per_lookup: f64::NAN,
    })
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
