//! The `opcost` suite's fjall side: the same phases as Basalt's, through fjall's blocking
//! API on OS threads, with fjall's block-read counters printed beside them.

use super::*;

/// Runs `f(t, share)` for each of `threads` clients as OS threads over `0..n`; returns the
/// sum of what they return.
fn fjall_clients<F>(threads: usize, n: usize, f: F) -> BenchResult<u64>
where
    F: Fn(usize, Range<usize>) -> BenchResult<u64> + Sync,
{
    let f = &f;
    let results: Vec<BenchResult<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| scope.spawn(move || f(t, share(n, threads, t))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("opcost: client thread panicked".into()))
            })
            .collect()
    });
    results.into_iter().sum()
}

/// fjall's block reads since the keyspace opened: data blocks (from the cache, from the
/// file), index and filter blocks read from the file, and the index and filter bytes read.
fn fjall_cache(store: &FjallStore) -> [u64; 6] {
    let m = store.ks.metrics();
    let data = m.data_block_load_count() as u64;
    let cached = m.data_block_load_cached_count() as u64;
    let index_io = (m.index_block_load_count() - m.index_block_load_cached_count()) as u64;
    let filter_io = (m.filter_block_load_count() - m.filter_block_load_cached_count()) as u64;
    [
        cached,
        data - cached,
        index_io,
        filter_io,
        m.index_block_io(),
        m.filter_block_io(),
    ]
}

/// Prints fjall's block reads of a phase (counters before and after it).
fn print_fjall_cache(what: &str, before: [u64; 6], after: [u64; 6]) {
    let d: Vec<u64> = after
        .iter()
        .zip(before)
        .map(|(a, b)| a.saturating_sub(b))
        .collect();
    println!(
        "  fjall  {what}: data blocks {} hits, {} misses; index blocks read {} ({} KiB), \
         filter blocks read {} ({} KiB)",
        d[0],
        d[1],
        d[2],
        d[4] >> 10,
        d[3],
        d[5] >> 10
    );
}

/// Gets `records` of `plan` on fjall with `threads` clients, each checked.
fn fjall_gets(
    store: &FjallStore,
    plan: &Plan,
    threads: usize,
    records: &[usize],
) -> BenchResult<u64> {
    fjall_clients(threads, records.len(), |_, range| {
        for &i in &records[range.clone()] {
            store.read(plan.keys[i].as_bytes())?;
        }
        Ok(range.len() as u64)
    })
}

/// Runs every phase on fjall in a fresh temporary directory.
pub(super) fn run_fjall(s: &Settings, plan: &Plan) -> BenchResult<()> {
    const E: &str = "fjall";
    let tmp = temp_dir(s, E)?;
    let threads = s.threads;
    let records = plan.keys.len();
    let (db, store) = crate::ycsb::fjall::open(tmp.path(), s.core.cache_bytes)?;
    phase_end(E, "open", 0)?;

    let start = Instant::now();
    fjall_clients(threads, records, |t, range| {
        let mut rng = StdRng::seed_from_u64(LOAD_SEED ^ t as u64);
        for i in range.clone() {
            let fields: [&[u8]; FIELDS] = plan.values.row(&mut rng);
            store.insert(plan.keys[i].as_bytes(), &fields)?;
        }
        Ok(range.len() as u64)
    })?;
    store.ks.rotate_memtable_and_wait()?;
    crate::fjall_side::settle(&db)?;
    progress(E, "put", s.records, start);
    println!(
        "  fjall  after put: {} tables ({} in L0), {:.1} MiB on disk",
        store.ks.table_count(),
        store.ks.l0_table_count(),
        store.ks.disk_space() as f64 / (1 << 20) as f64
    );
    phase_end(E, "put", s.records)?;

    let start = Instant::now();
    let before = fjall_cache(&store);
    fjall_clients(threads, records, |_, range| {
        for i in range.clone() {
            store.read(plan.keys[i].as_bytes())?;
        }
        Ok(range.len() as u64)
    })?;
    progress(E, "warm", s.records, start);
    print_fjall_cache("warm", before, fjall_cache(&store));
    phase_end(E, "warm", 0)?;

    let start = Instant::now();
    let before = fjall_cache(&store);
    let n = fjall_gets(&store, plan, threads, &plan.gets)?;
    progress(E, "get_cached", n, start);
    print_fjall_cache("get_cached", before, fjall_cache(&store));
    phase_end(E, "get_cached", n)?;

    let start = Instant::now();
    let before = fjall_cache(&store);
    let rows = fjall_clients(threads, plan.scans.len(), |_, range| {
        let mut rows = 0;
        for &i in &plan.scans[range] {
            let n = store.scan(plan.keys[i].as_bytes(), SCAN_ROWS)?;
            if n == 0 {
                return Err(format!("fjall: scan from {} found no row", plan.keys[i]).into());
            }
            rows += n;
        }
        Ok(rows)
    })?;
    progress(E, "scan_row", rows, start);
    print_fjall_cache("scan_row", before, fjall_cache(&store));
    phase_end(E, "scan_row", rows)?;

    let start = Instant::now();
    // Dropping the database joins its background threads.
    drop(store);
    drop(db);
    let (db, store) = crate::ycsb::fjall::open(tmp.path(), miss_cache_bytes())?;
    progress(E, "reopen", 1, start);
    phase_end(E, "reopen", 0)?;

    let start = Instant::now();
    let before = fjall_cache(&store);
    let n = fjall_gets(&store, plan, threads, &plan.warm2)?;
    progress(E, "warm2", n, start);
    print_fjall_cache("warm2", before, fjall_cache(&store));
    phase_end(E, "warm2", 0)?;

    let start = Instant::now();
    let before = fjall_cache(&store);
    let n = fjall_gets(&store, plan, threads, &plan.gets)?;
    progress(E, "get_missed", n, start);
    let after = fjall_cache(&store);
    print_fjall_cache("get_missed", before, after);
    let misses = after[1].saturating_sub(before[1]);
    let index_filter = after[2] + after[3] - before[2] - before[3];
    if index_filter * 100 > n {
        println!(
            "WARNING: fjall's missed gets read {index_filter} index and filter blocks from their \
             files: the block cache is too small for them (see opcost::MISS_CACHE_BYTES)"
        );
    }
    warn_hits(E, n, misses);
    phase_end(E, "get_missed", n)?;

    drop(store);
    drop(db);
    Ok(())
}
