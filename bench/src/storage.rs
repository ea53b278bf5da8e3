//! The `storage` suite: bloom filters on absent keys, random reads through a small block
//! cache, and on-disk size and load/scan speed per compression codec, on Basalt and fjall.
//!
//! Every data set is the core suite's YCSB rows, loaded by 8 writers in [`FLUSHES`] rounds
//! with a flush after each round, so each Basalt region (and fjall's L0, until it compacts)
//! holds several files and a point read has several files to consult or skip. Both engines
//! get the same small block cache (16 MiB), far below the data set. Per data set: the load
//! (writes and flushes), a full scan, the bytes of store files (Basalt) or tables (fjall),
//! and, for the data sets that are read, N random reads of absent keys and N of present
//! keys. Absent keys are YCSB keys of insert indexes `rows..2*rows`, so they fall all over
//! the key range, inside every file's key range. The engines run one after the other, each
//! data set in its own temporary directory, deleted before the next one starts. Basalt's
//! data sets read by key use fjall's block size ([`READ_BLOCK_SIZE`]); its codec data sets
//! (loads, scans, sizes) use `--block-size`. Scans and reads run `--rounds` times; the
//! median round is the figure.

use crate::measure::Settings;
use crate::storage_dataset::{
    Codec, Dataset, Keys, Lookups, Variant, CACHE_BYTES, FLUSHES, READ_BLOCK_SIZE,
};
use crate::workload::{key_of, split_keys, Workload, FIELDS, FIELD_LEN};
use crate::{storage_basalt, storage_fjall, BenchResult, Figure};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

fn print_settings(s: &Settings) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let splits = split_keys(s.regions);
    println!("== suite storage: settings ==");
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; use --release for meaningful figures");
    }
    println!(
        "workload   : {} rows x {FIELDS} fields x {FIELD_LEN} B (YCSB default record), keys as \
         in core; loaded by {} writers in {FLUSHES} rounds, each followed by a flush \
         (Basalt Admin::flush, fjall rotate_memtable_and_wait); load time includes the flushes",
        s.rows, s.writers
    );
    println!(
        "reads      : {} random gets of ABSENT keys (YCSB keys of insert indexes {}..{}) and {} \
         of present keys (checked byte for byte), {} concurrent readers; block cache {} MiB \
         for both engines (the data set is about {} MiB)",
        s.rows,
        s.rows,
        2 * s.rows,
        s.rows,
        s.readers,
        CACHE_BYTES >> 20,
        (s.rows * 1100) >> 20
    );
    println!(
        "basalt     : Durability::SyncWal; {} regions pre-split at {}..{}; family `f`; \
         128 MiB flush size (so only the {FLUSHES} explicit flushes write files: {FLUSHES} \
         store files per region); read data sets: BLOCKSIZE {} KiB (fjall's block size), \
         compression none, bloom ROW (blooms on) or NONE (off); codec data sets: BLOCKSIZE \
         {} KiB (--block-size), bloom ROW",
        s.regions,
        String::from_utf8_lossy(&splits[0]),
        String::from_utf8_lossy(&splits[splits.len() - 1]),
        READ_BLOCK_SIZE / 1024,
        s.block_size / 1024,
    );
    println!(
        "fjall 3    : journal persisted with PersistMode::Buffer per insert; keyspace defaults \
         (bloom filters: 0.01% FP on L0, 10 bits/key below; LZ4 on the last level) for the \
         read data sets, FilterPolicy::disabled() for blooms off; codec data sets use \
         CompressionPolicy::all(None | Lz4) for data blocks (fjall 3 has no Zstd or Snappy; \
         Basalt's Zstd and Snappy are compared with fjall's LZ4); metrics feature on for \
         block-load counts; after the load, waits until compactions stay idle 1 s (not timed)"
    );
    println!(
        "measures   : blocks/lookup = data blocks read per lookup (Basalt: block cache \
         hits+misses; fjall: data block loads, cached or not); files/lookup (Basalt only) = \
         store files of the row's region minus those its bloom filter skipped; disk = store \
         files (Basalt) or tables (fjall), WAL/journal excluded"
    );
    println!(
        "rounds     : each data set's scan and each kind of reads run {} times per engine; \
         the figure is the median round (one round lasts about a second and varies 10-20%)",
        s.rounds
    );
    println!("machine    : {cores} CPUs; data under {}", s.dir.display());
    println!();
}

/// Runs one engine's data set in a fresh temporary directory.
fn dataset<T>(
    s: &Settings,
    prefix: &str,
    label: &str,
    run: impl FnOnce(&Path) -> BenchResult<T>,
) -> BenchResult<T> {
    let tmp = tempfile::Builder::new().prefix(prefix).tempdir_in(&s.dir)?;
    println!("  {label}: {}", tmp.path().display());
    run(tmp.path())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn lookups<'a>(d: &'a Dataset, which: &str) -> BenchResult<&'a Lookups> {
    let l = if which == "absent" {
        &d.absent
    } else {
        &d.present
    };
    l.as_ref()
        .ok_or_else(|| format!("{which} reads were not measured").into())
}

/// Runs the suite and returns its figures.
pub fn run(s: &Settings) -> BenchResult<Vec<Figure>> {
    if s.rows == 0 || s.rows > (u32::MAX / 2) as u64 {
        return Err(format!("--rows must be between 1 and {}", u32::MAX / 2).into());
    }
    let mut s = s.clone();
    s.cache_bytes = CACHE_BYTES;
    let s = &s;
    print_settings(s);
    std::fs::create_dir_all(&s.dir)?;
    let start = Instant::now();
    let keys = Keys {
        w: Arc::new(Workload::new(s.rows, s.rows)),
        absent: (s.rows..2 * s.rows).map(key_of).collect(),
    };
    println!("generated keys in {:.2} s", start.elapsed().as_secs_f64());

    let reads = |bloom| Variant {
        bloom,
        codec: Some(Codec::None),
        absent_reads: true,
        present_reads: bloom,
        block_size: READ_BLOCK_SIZE,
    };
    let codec = |c| Variant {
        bloom: true,
        codec: Some(c),
        absent_reads: false,
        present_reads: false,
        block_size: s.block_size,
    };
    let b = |label: &str, v: Variant| {
        dataset(s, "basalt-bench-storage-", label, |dir| {
            storage_basalt::run(&keys, dir, s, v)
        })
    };
    println!("basalt:");
    let b_on = b("blooms on (ROW), codec none", reads(true))?;
    let b_off = b("blooms off (NONE), codec none", reads(false))?;
    let b_none = b("codec none", codec(Codec::None))?;
    let b_lz4 = b("codec lz4", codec(Codec::Lz4))?;
    let b_zstd = b("codec zstd", codec(Codec::Zstd))?;
    let b_snappy = b("codec snappy", codec(Codec::Snappy))?;

    let f = |label: &str, v: Variant| {
        dataset(s, "basalt-bench-storage-fjall-", label, |dir| {
            storage_fjall::run(&keys, dir, s, v)
        })
    };
    println!("fjall:");
    let f_on = f(
        "default filters and compression",
        Variant {
            bloom: true,
            codec: None,
            absent_reads: true,
            present_reads: true,
            block_size: READ_BLOCK_SIZE,
        },
    )?;
    let f_off = f(
        "filters disabled",
        Variant {
            bloom: false,
            codec: None,
            absent_reads: true,
            present_reads: false,
            block_size: READ_BLOCK_SIZE,
        },
    )?;
    let f_none = f("codec none", codec(Codec::None))?;
    let f_lz4 = f("codec lz4", codec(Codec::Lz4))?;
    println!();

    let (ba_on, ba_off) = (lookups(&b_on, "absent")?, lookups(&b_off, "absent")?);
    let (fa_on, fa_off) = (lookups(&f_on, "absent")?, lookups(&f_off, "absent")?);
    println!(
        "basalt absent-key files/lookup: {:.3} with blooms, {:.3} without",
        ba_on.files_per_lookup, ba_off.files_per_lookup
    );
    println!();
    let ops = |name, b: &Lookups, f: &Lookups| Figure::ops(name, b.phase, f.phase);
    let blocks = |name, b: &Lookups, f: &Lookups| {
        Figure::value(
            name,
            "blocks/lookup",
            true,
            b.blocks_per_lookup,
            f.blocks_per_lookup,
        )
    };
    let speedup = |on: &Lookups, off: &Lookups| on.phase.ops_per_sec() / off.phase.ops_per_sec();
    let size = |name, b: &Dataset, f: &Dataset| {
        Figure::value(name, "MiB", true, mib(b.disk_bytes), mib(f.disk_bytes))
    };
    let load = |name, b: &Dataset, f: &Dataset| Figure::ops(name, b.load, f.load);
    let scan = |name, b: &Dataset, f: &Dataset| {
        let mut fig = Figure::ops(name, b.scan, f.scan);
        fig.unit = "rows/s";
        fig
    };
    let (bp, fp) = (lookups(&b_on, "present")?, lookups(&f_on, "present")?);
    let figures = vec![
        ops("storage/absent-bloom-on", ba_on, fa_on),
        ops("storage/absent-bloom-off", ba_off, fa_off),
        Figure::value(
            "storage/absent-bloom-speedup",
            "x",
            false,
            speedup(ba_on, ba_off),
            speedup(fa_on, fa_off),
        ),
        blocks("storage/absent-bloom-on-blocks", ba_on, fa_on),
        blocks("storage/absent-bloom-off-blocks", ba_off, fa_off),
        ops("storage/present-read-small-cache", bp, fp),
        blocks("storage/present-read-blocks", bp, fp),
        size("storage/size-none", &b_none, &f_none),
        size("storage/size-lz4", &b_lz4, &f_lz4),
        size("storage/size-zstd-vs-lz4", &b_zstd, &f_lz4),
        size("storage/size-snappy-vs-lz4", &b_snappy, &f_lz4),
        load("storage/load-none", &b_none, &f_none),
        load("storage/load-lz4", &b_lz4, &f_lz4),
        load("storage/load-zstd-vs-lz4", &b_zstd, &f_lz4),
        load("storage/load-snappy-vs-lz4", &b_snappy, &f_lz4),
        scan("storage/scan-none", &b_none, &f_none),
        scan("storage/scan-lz4", &b_lz4, &f_lz4),
        scan("storage/scan-zstd-vs-lz4", &b_zstd, &f_lz4),
        scan("storage/scan-snappy-vs-lz4", &b_snappy, &f_lz4),
    ];
    let on_off = speedup(ba_on, ba_off);
    if on_off < 3.0 {
        println!("WARNING: Basalt's blooms-on / blooms-off ratio is {on_off:.2}, below 3");
    }
    Ok(figures)
}
