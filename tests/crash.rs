//! Crash recovery with real process kills: every write acknowledged with the default
//! durability (`SyncWal`) survives a `SIGKILL` at any moment, reads after recovery return the
//! last acknowledged value of every row, and a full scan is sorted, duplicate-free and holds
//! no row that was never written (or was deleted and acknowledged as such). Writes through
//! hooks (secondary indexes and an observer-kept counter) commit atomically with their data
//! row at every durability: after any kill each index equals its data table and each counter
//! counts its rows; with `AsyncWal` and `SkipWal`, which may lose acknowledged writes, what
//! survives is a prefix of the writes.
//!
//! How it works (after sled's `test_crash_recovery.rs`): the test re-executes its own test
//! binary as a child (`BASALT_CRASH_CHILD=<dir> <exe> --exact child_writer --nocapture`). The
//! child opens the engine in `<dir>`, creates the table if missing (pre-split into 4 regions,
//! 256 KiB flush size, 1 MiB WAL segments, so flushes, WAL rolls and WAL purges happen during
//! every run), then writes from several tokio tasks. Before each operation it prints
//! `BEGIN <op>` and after the operation returns `Ok` it prints `ACK <op>`, flushing stdout
//! each time. The parent reads those lines on a thread, kills the child with `SIGKILL` after
//! a random delay, then (in most cycles) opens the engine itself and checks its model: a
//! row's state must be its last acknowledged state, or the state of an operation that began
//! after it but was never acknowledged (it may or may not have reached the WAL). The next
//! cycle's child continues in the same directory, inserting new rows, overwriting old ones and
//! deleting some.
//!
//! Indexed tables: before the first cycle the parent creates three data tables, each with a
//! covered index (`f:b`, shared by many rows, covering `f:c`), the same as a region-local
//! index (its rows in the data table's regions, moved by every split and merge), a unique
//! index (`f:u`, derived from the row key, so distinct rows never collide) and the same as a
//! unique region-local index led by the row's 8-byte hex key (the tables' split restriction
//! keeps those 8 bytes in one region), and listing an observer of this
//! file (`RowCounter`) whose `pre_batch_mutate` adds, for every put of the batch, an increment
//! of the table's counter cell in table `ix_counts` (`MiniBatch::add_increment_to`): the index
//! rows, the counter and the data row are one engine batch. Every put writes a new row, never
//! overwritten or deleted, so a table's counter must equal the number of its rows present.
//! The tables differ in the durability set on their puts (`Put::durability`):
//! * `ix_sync` (`SyncWal`, two writer tasks, pre-split into 3 regions): every acknowledged put
//!   is present, and every row present is one whose put began;
//! * `ix_async` (`AsyncWal`, pre-split into 3 regions) and `ix_skip` (`SkipWal`, one region:
//!   no pre-split, no split by the test, and a row cap that keeps it far below the automatic
//!   split size, with a 4 KiB flush size so it flushes often) each have ONE sequential
//!   writer, whose put `n + 1` begins after put `n` was acknowledged; so in each child run,
//!   with `b` puts begun (the acknowledged ones and at most one more, unacknowledged, last),
//!   the run's rows present must be exactly its puts `1..=k` for some `0 <= k <= b`:
//!   acknowledged puts after `k` may be lost, a hole may not (nor may a row lost once come
//!   back). For `AsyncWal` the WAL is one log in sequence order and a flush syncs it before
//!   writing, so this holds over the several regions of the data, index and counter tables.
//!   A `SkipWal` write whose hooks add writes is raised to `AsyncWal` (one WAL record keeps
//!   data, index rows and counter together), so `ix_skip` must behave like `ix_async`; its
//!   single data region would keep the prefix check meaningful even for a pure memstore
//!   write, whose region flushes on its own.
//!
//! The parent's check then verifies every index (`IndexAdmin::verify` reports no difference)
//! and compares each counter with its table's rows; a row's cells must be exactly the ones
//! its put wrote.
//!
//! Crash windows covered (the kill lands wherever the child happens to be):
//! * between the WAL write of a batch and its acknowledgement, and mid-write (a torn WAL tail,
//!   which recovery must cut without losing any earlier acknowledged record);
//! * during a background flush: before the store file is renamed into place (orphan `.tmp`),
//!   after the rename but before the catalog update (orphan `.sf`), after the catalog update
//!   but before the WAL purge; with hooked writes, while the data, index and counter regions
//!   of one batch flush at different times;
//! * during a WAL roll (a new segment with a torn or empty header) and during a WAL purge;
//! * during open and WAL replay (some cycles kill the child within a few milliseconds of its
//!   start), and right after a previous crash (some cycles skip the parent's check, so the
//!   next child recovers directly from a crashed child's files);
//! * after a parent check that closed the engine cleanly, or dropped it without closing (so
//!   replayed edits must survive a second replay);
//! * during region splits and merges (the child's admin task splits regions at their
//!   computed split points and merges adjacent ones while the writers run, in table `crash`,
//!   in `ix_sync` and `ix_async` and in their index tables, and regions also split by
//!   themselves past 1 MiB): before and after the catalog update that commits one, and during
//!   the compaction of a daughter's references (recovery must skip WAL records of retired
//!   regions, whose edits are in the files their successors list, and keep a parent's file
//!   while any daughter lists it).
//!
//! `crash_recovery_cycles_on_an_object_store` runs the same cycles with the catalog and the
//! store files in an object store (`<dir>/objects`, the `object_store` crate's
//! `LocalFileSystem`), the WAL still in the data directory.
//!
//! Knobs: `BASALT_CRASH_CYCLES` (default 32, 12 on the object store) and `BASALT_CRASH_SEED` (default: random, and
//! printed so a failure can be replayed).
#![cfg(unix)]

use async_trait::async_trait;
use basalt::client::{Delete, Get, Increment, Mutation, Put, RowResult, Scan};
use basalt::coprocessors::{MiniBatch, ObserverContext, RegionObserver, Registry};
use basalt::index::{IndexAdmin, IndexDef, Runtime};
use basalt::objects::StoreObjects;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Durability, Filter,
    PreSplit, SplitAlgorithm, SplitRestriction, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "BASALT_CRASH_CHILD";
/// The folder of the object-store run's objects, in the data directory.
const OBJECTS: &str = "objects";
const RUN_ENV: &str = "BASALT_CRASH_RUN";
const SEED_ENV: &str = "BASALT_CRASH_SEED";
const CYCLES_ENV: &str = "BASALT_CRASH_CYCLES";
const TABLE: &str = "crash";
const FAMILY: &str = "f";
const QUALIFIER: &str = "v";
/// Writer tasks in the child.
const WRITERS: u64 = 6;
/// SIGKILL.
const SIGKILL: i32 = 9;
/// The table of the counters `RowCounter` keeps: one row per indexed table (named like it),
/// counter cell `f:n`.
const COUNTS: &str = "ix_counts";
const COUNT_QUALIFIER: &str = "n";
/// The name `RowCounter` is registered under.
const COUNTER_CP: &str = "crash_row_counter";
/// The covered index of every indexed table (`f:b`, covering `f:c`), its unique one (`f:u`)
/// and a region-local copy of the covered one (its rows in the table's own regions).
const BY_B: &str = "by_b";
const BY_U: &str = "by_u";
const BY_B_LOCAL: &str = "by_b_local";
/// A unique region-local index: `f:u` led by the row's first 8 bytes (its hex key), on
/// tables whose split restriction keeps those 8 bytes in one region.
const BY_U_LOCAL: &str = "by_u_local";
const INDEXES: [&str; 4] = [BY_B, BY_U, BY_B_LOCAL, BY_U_LOCAL];
/// The rows sharing their first bytes that stay in one region (the hex key of
/// [`ix_writer`]'s rows, as long as a hex-string pre-split key).
const GROUP: u32 = 8;
/// The indexes with a table of their own.
const GLOBAL_INDEXES: [&str; 2] = [BY_B, BY_U];

/// One indexed table: every put writes a new row with the durability given.
#[derive(Debug, Clone, Copy)]
struct IxSpec {
    name: &'static str,
    /// Its mark in the child's lines (`BEGIN I <tag> <row>`).
    tag: &'static str,
    durability: Durability,
    /// Writer tasks; one makes the order of the puts known (the prefix check needs it).
    writers: u64,
    /// Regions at creation (1: no pre-split).
    regions: usize,
    /// The table's MemStore flush size.
    flush_size: u64,
    /// A writer pauses `pause_ms` after every `pause_every` puts, bounding the data.
    pause_every: u64,
    pause_ms: u64,
    /// Writers stop once the table holds this many rows (`None`: never), so that a table
    /// that must keep one region stays far below the automatic split size.
    max_rows: Option<usize>,
    /// The child's admin task splits and merges its regions (and its index tables').
    split_by_test: bool,
}

const IX_TABLES: [IxSpec; 3] = [
    IxSpec {
        name: "ix_sync",
        tag: "S",
        durability: Durability::SyncWal,
        writers: 2,
        regions: 3,
        flush_size: 64 << 10,
        pause_every: 8,
        pause_ms: 1,
        max_rows: None,
        split_by_test: true,
    },
    IxSpec {
        name: "ix_async",
        tag: "A",
        durability: Durability::AsyncWal,
        writers: 1,
        regions: 3,
        flush_size: 64 << 10,
        pause_every: 8,
        pause_ms: 1,
        max_rows: None,
        split_by_test: true,
    },
    IxSpec {
        name: "ix_skip",
        tag: "K",
        durability: Durability::SkipWal,
        writers: 1,
        regions: 1,
        flush_size: 4 << 10,
        pause_every: 1,
        pause_ms: 1,
        // About 150 bytes a row in store files: far under 1 MiB, even with replayed cells
        // flushed twice.
        max_rows: Some(2500),
        split_by_test: false,
    },
];

/// Where the engine of `dir` keeps its catalog and store files: `<dir>/objects` through the
/// `object_store` crate's `LocalFileSystem` when that folder exists (the object-store run
/// creates it before the first cycle), else the data directory.
fn config(dir: &Path) -> Config {
    let objects = dir.join(OBJECTS);
    let config = if objects.is_dir() {
        let store = StoreObjects::local_directory(&objects)
            .unwrap_or_else(|e| panic!("object store at {}: {e}", objects.display()));
        Config::new(dir).objects(Arc::new(store))
    } else {
        Config::new(dir)
    };
    config
        .memstore_flush_size(256 << 10)
        .wal_segment_size(1 << 20)
        .split_policy(basalt::SplitPolicy::ConstantSize)
        .max_region_size(1 << 20)
}

fn tn(name: &str) -> TableName {
    TableName::parse(name).unwrap()
}

/// The engine's coprocessors: the index maintainers and `RowCounter`. Returns the registry
/// (for `Config::coprocessor_loader`) and the index runtime (for `IndexAdmin`).
fn registry() -> (Arc<Registry>, Arc<Runtime>) {
    let reg = Registry::new();
    let rt = basalt::index::register(&reg).unwrap();
    reg.register(COUNTER_CP, |_| {
        Ok(Arc::new(RowCounter) as Arc<dyn RegionObserver>)
    })
    .unwrap();
    (Arc::new(reg), rt)
}

/// The engine config with the registry as its coprocessor loader.
fn hooked_config(dir: &Path) -> (Config, Arc<Runtime>) {
    let (reg, rt) = registry();
    (config(dir).coprocessor_loader(reg), rt)
}

/// On each indexed table: every put of a batch (an index build's touch excepted) adds an
/// increment of the table's counter in `COUNTS` to the batch, so the counter commits
/// atomically with the rows it counts.
struct RowCounter;

#[async_trait]
impl RegionObserver for RowCounter {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let puts = batch
            .operations()
            .enumerate()
            .filter(|(k, m)| match m {
                Mutation::Put(p) => !p.is_touch() && !batch.is_vetoed(*k),
                Mutation::Delete(_) => false,
            })
            .count();
        let counter = ctx.table().qualifier().to_string();
        for _ in 0..puts {
            batch.add_increment_to(
                tn(COUNTS),
                Increment::new(&counter).add_column(FAMILY, COUNT_QUALIFIER, 1),
            );
        }
        Ok(())
    }
}

/// The cells of an indexed row, all derived from its key: `b` (the covered index's value,
/// shared by about one row in 64), `c` (covered), `u` (the unique index's value).
fn ix_cells(row: &str) -> [(&'static str, String); 3] {
    let h = row.bytes().fold(0u64, |a, b| mix(a ^ u64::from(b)));
    [
        ("b", format!("b{:02}", h % 64)),
        ("c", format!("c|{row}|{:x}", h >> 40)),
        ("u", format!("u|{row}")),
    ]
}

/// Creates the indexed tables, their indexes and the counter table (the parent, once, before
/// the first child).
async fn create_indexed_tables(dir: &Path) {
    let (config, rt) = hooked_config(dir);
    let conn = Connection::open_with(config).await.unwrap();
    let admin = conn.admin();
    admin
        .create_table(TableDescriptor::new(tn(COUNTS)).family(ColumnFamilyDescriptor::new(FAMILY)))
        .await
        .unwrap();
    let indexes = IndexAdmin::new(&conn, rt);
    for spec in IX_TABLES {
        let desc = TableDescriptor::new(tn(spec.name))
            .family(ColumnFamilyDescriptor::new(FAMILY))
            .memstore_flush_size(spec.flush_size)
            .coprocessor(CoprocessorDescriptor::new(COUNTER_CP))
            .split_restriction(SplitRestriction::KeyPrefix(GROUP));
        let split = if spec.regions > 1 {
            PreSplit::Algorithm(SplitAlgorithm::HexString, spec.regions)
        } else {
            PreSplit::None
        };
        admin.create_table_with_splits(desc, split).await.unwrap();
        indexes
            .create(
                IndexDef::new(BY_B, spec.name)
                    .column(FAMILY, "b")
                    .cover(FAMILY, "c"),
            )
            .await
            .unwrap();
        indexes
            .create(IndexDef::new(BY_U, spec.name).column(FAMILY, "u").unique())
            .await
            .unwrap();
        indexes
            .create(
                IndexDef::new(BY_B_LOCAL, spec.name)
                    .column(FAMILY, "b")
                    .cover(FAMILY, "c")
                    .local(),
            )
            .await
            .unwrap();
        indexes
            .create(
                IndexDef::new(BY_U_LOCAL, spec.name)
                    .local()
                    .row_prefix(GROUP)
                    .column(FAMILY, "u")
                    .unique(),
            )
            .await
            .unwrap();
    }
    conn.close().await.unwrap();
}

/// splitmix64: spreads row keys over the hex key space (and so over the regions).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The stored value for a token: the token, `|`, and filler whose length depends on it, so
/// values are 100-300 bytes and a value cut or mixed up with another one is detected.
fn value_for(token: &str) -> Vec<u8> {
    let h = token
        .bytes()
        .fold(0u64, |a, b| mix(a ^ u64::from(b)))
        .wrapping_add(1);
    let pad = 100 + (h % 200) as usize;
    let mut v = Vec::with_capacity(token.len() + 1 + pad);
    v.extend_from_slice(token.as_bytes());
    v.push(b'|');
    v.extend((0..pad).map(|i| b'a' + ((h as usize + i) % 26) as u8));
    v
}

/// The token of a stored value, checking that the whole value is the one `value_for` makes.
fn token_of(row: &str, value: &[u8]) -> String {
    let sep = value
        .iter()
        .position(|&b| b == b'|')
        .unwrap_or_else(|| panic!("row {row}: value without separator: {value:?}"));
    let token = String::from_utf8(value[..sep].to_vec()).expect("token is UTF-8");
    assert_eq!(
        value,
        value_for(&token).as_slice(),
        "row {row}: value for token {token} is damaged"
    );
    token
}

// ---------------------------------------------------------------------------------------
// The child: writes until killed.
// ---------------------------------------------------------------------------------------

/// Writes one line to the real stdout (bypassing libtest's capture) and flushes it, so the
/// parent has it before the next operation starts.
fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    let ok = out
        .write_all(line.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if ok.is_err() {
        std::process::abort();
    }
}

/// Reports an unexpected error and dies in a way the parent tells apart from its SIGKILL.
fn child_fail(what: &str) -> ! {
    eprintln!("crash child: {what}");
    std::process::exit(3);
}

/// The child process body. A no-op (so it passes instantly) unless the parent set
/// `BASALT_CRASH_CHILD`.
#[test]
fn child_writer() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let run: u64 = std::env::var(RUN_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let seed: u64 = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(child_main(PathBuf::from(dir), run, seed));
}

async fn child_main(dir: PathBuf, run: u64, seed: u64) {
    let conn = Connection::open_with(hooked_config(&dir).0)
        .await
        .unwrap_or_else(|e| child_fail(&format!("open failed: {e}")));
    let admin = conn.admin();
    let name = TableName::parse(TABLE).unwrap();
    if !admin.table_exists(&name).await.unwrap() {
        let desc = TableDescriptor::new(name.clone()).family(ColumnFamilyDescriptor::new(FAMILY));
        admin
            .create_table_with_splits(desc, PreSplit::Algorithm(SplitAlgorithm::HexString, 4))
            .await
            .unwrap_or_else(|e| child_fail(&format!("create table failed: {e}")));
    }
    let table = conn.table(TABLE).unwrap();
    // The rows that exist now (as recovered): writers may overwrite or delete them.
    let existing: Vec<String> = table
        .scan(Scan::new())
        .unwrap()
        .map_ok(|r| String::from_utf8(r.row.to_vec()).unwrap())
        .try_collect()
        .await
        .unwrap_or_else(|e| child_fail(&format!("startup scan failed: {e}")));
    // The rows of the indexed tables with a row cap (the others' are not needed: their
    // writers only add rows).
    let mut ix_rows = Vec::new();
    for spec in IX_TABLES {
        let n = match spec.max_rows {
            Some(_) => conn
                .table(spec.name)
                .unwrap()
                .scan(Scan::new().filter(Filter::FirstKeyOnly))
                .unwrap()
                .try_fold(0usize, |n, _| async move { Ok(n + 1) })
                .await
                .unwrap_or_else(|e| child_fail(&format!("startup count failed: {e}"))),
            None => 0,
        };
        ix_rows.push(n);
    }
    emit("READY");

    let mut tasks = Vec::new();
    for task in 0..WRITERS {
        // Each row is owned by exactly one task, so a row's operations are sequential and
        // its last acknowledged operation is well defined.
        let mut owned: Vec<String> = existing
            .iter()
            .skip(task as usize)
            .step_by(WRITERS as usize)
            .cloned()
            .collect();
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(mix(seed ^ mix(run) ^ mix(1000 + task)));
            for n in 0u64.. {
                // A pause every few operations bounds the data a run writes on any machine
                // (there is no compaction yet: every flush adds a store file).
                if n % 16 == 15 {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                let token = format!("r{run}t{task}n{n}");
                let dice = rng.random_range(0..100);
                if owned.is_empty() || dice < 55 {
                    let key = mix(seed ^ mix(run << 40 | task << 32 | n)) as u32;
                    let row = format!("{key:08x}-{run}-{task}-{n}");
                    put(&table, &row, &token).await;
                    owned.push(row);
                } else if dice < 88 {
                    let row = owned[rng.random_range(0..owned.len())].clone();
                    put(&table, &row, &token).await;
                } else {
                    let row = owned.swap_remove(rng.random_range(0..owned.len()));
                    emit(&format!("BEGIN D {row}"));
                    table
                        .delete(Delete::new(&row))
                        .await
                        .unwrap_or_else(|e| child_fail(&format!("delete {row}: {e}")));
                    emit(&format!("ACK D {row}"));
                }
            }
        }));
    }
    for (spec, existing) in IX_TABLES.into_iter().zip(ix_rows) {
        let table = conn.table(spec.name).unwrap();
        for writer in 0..spec.writers {
            let budget = spec.max_rows.map(|m| m.saturating_sub(existing));
            tasks.push(tokio::spawn(ix_writer(
                table.clone(),
                spec,
                run,
                seed,
                writer,
                budget,
            )));
        }
    }
    // Splits and merges while the writers run, so kills land in them too: half of them in
    // table `crash`, the others in the indexed tables the test splits and their index tables.
    let mut split_tables = Vec::new();
    for spec in IX_TABLES.iter().filter(|s| s.split_by_test) {
        split_tables.push(tn(spec.name));
        for index in GLOBAL_INDEXES {
            split_tables.push(IndexDef::new(index, spec.name).index_table().unwrap());
        }
    }
    let admin = conn.admin();
    tasks.push(tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(mix(seed ^ mix(run) ^ 77));
        loop {
            let pause = rng.random_range(5..40);
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            let name = if rng.random_bool(0.5) {
                &name
            } else {
                &split_tables[rng.random_range(0..split_tables.len())]
            };
            let Ok(rs) = admin.regions(name).await else {
                continue;
            };
            let outcome = if rs.len() > 8 || (rs.len() > 2 && rng.random_bool(0.3)) {
                let i = rng.random_range(0..rs.len() - 1);
                admin
                    .merge_regions(name, rs[i].id, rs[i + 1].id)
                    .await
                    .map(|_| ())
            } else {
                let r = &rs[rng.random_range(0..rs.len())];
                admin.split_region(name, r.id, None).await.map(|_| ())
            };
            // A region a split by itself replaced meanwhile is not a failure.
            if let Err(e @ (basalt::Error::Io(_) | basalt::Error::Corruption { .. })) = outcome {
                child_fail(&format!("split or merge failed: {e}"));
            }
        }
    }));
    for t in tasks {
        if t.await.is_err() {
            child_fail("writer task panicked");
        }
    }
}

/// One writer of an indexed table: puts new rows (`<hash>-<run>-<writer>-<n>`, so every row
/// is written once) with the table's durability, in order, until killed, or until it wrote
/// `budget` rows.
async fn ix_writer(
    table: basalt::Table,
    spec: IxSpec,
    run: u64,
    seed: u64,
    writer: u64,
    budget: Option<usize>,
) {
    let salt = spec.name.bytes().fold(0u64, |a, b| mix(a ^ u64::from(b)));
    for n in 0u64.. {
        if budget.is_some_and(|b| n as usize >= b) {
            return;
        }
        let key = mix(seed ^ salt ^ mix(run << 40 | writer << 32 | n)) as u32;
        let row = format!("{key:08x}-{run}-{writer}-{n}");
        let mut put = Put::new(&row).durability(spec.durability);
        for (q, v) in ix_cells(&row) {
            put = put.add_column(FAMILY, q, v);
        }
        emit(&format!("BEGIN I {} {row}", spec.tag));
        table
            .put(put)
            .await
            .unwrap_or_else(|e| child_fail(&format!("put {row} to {}: {e}", spec.name)));
        emit(&format!("ACK I {} {row}", spec.tag));
        if n % spec.pause_every == spec.pause_every - 1 {
            tokio::time::sleep(std::time::Duration::from_millis(spec.pause_ms)).await;
        }
    }
}

async fn put(table: &basalt::Table, row: &str, token: &str) {
    emit(&format!("BEGIN P {row} {token}"));
    table
        .put(Put::new(row).add_column(FAMILY, QUALIFIER, value_for(token)))
        .await
        .unwrap_or_else(|e| child_fail(&format!("put {row}: {e}")));
    emit(&format!("ACK P {row} {token}"));
}

// ---------------------------------------------------------------------------------------
// The parent: kills, recovers, checks.
// ---------------------------------------------------------------------------------------

/// A row's state: absent (never written or deleted) or holding the value of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Absent,
    Value(String),
}

/// What the parent knows: for every row ever named by the child, the states it may be in.
/// The first entry is the last acknowledged state (or `Absent` for a new row); later entries
/// are operations that began after it and were not acknowledged before the kill.
#[derive(Default)]
struct Model {
    rows: BTreeMap<String, Vec<State>>,
    /// Rows named since the last check.
    touched: BTreeSet<String>,
    acks: u64,
    unacked: u64,
}

impl Model {
    fn apply(&mut self, line: &str) {
        let mut parts = line.split(' ');
        let (Some(phase), Some(op), Some(row)) = (parts.next(), parts.next(), parts.next()) else {
            return; // libtest's own output
        };
        let state = match (op, parts.next()) {
            ("P", Some(token)) => State::Value(token.to_string()),
            ("D", None) => State::Absent,
            _ => return,
        };
        let possible = self
            .rows
            .entry(row.to_string())
            .or_insert_with(|| vec![State::Absent]);
        match phase {
            "BEGIN" => possible.push(state),
            "ACK" => {
                assert_eq!(
                    possible.last(),
                    Some(&state),
                    "row {row}: ACK without a matching BEGIN"
                );
                *possible = vec![state];
                self.acks += 1;
            }
            _ => return,
        }
        self.touched.insert(row.to_string());
    }
}

/// What the parent knows of one indexed table (every put writes a new row, never overwritten
/// or deleted, so a row is present or not).
struct IxModel {
    spec: IxSpec,
    /// Rows that must be present: found by the last check and, with `SyncWal`, acknowledged
    /// since.
    present: BTreeSet<String>,
    /// `SyncWal`: rows whose put began since the last check and was not acknowledged.
    maybe: BTreeSet<String>,
    /// `AsyncWal` and `SkipWal` (one writer): for each child run since the last check, its
    /// rows in the order their puts began, and how many of them were acknowledged.
    runs: Vec<(Vec<String>, usize)>,
    acks: u64,
    /// Acknowledged puts found missing (allowed with `AsyncWal` and `SkipWal` only).
    lost: u64,
}

impl IxModel {
    fn new(spec: IxSpec) -> Self {
        IxModel {
            spec,
            present: BTreeSet::new(),
            maybe: BTreeSet::new(),
            runs: Vec::new(),
            acks: 0,
            lost: 0,
        }
    }

    /// Whether the table's check is the prefix check (one sequential writer, acknowledged
    /// writes may be lost).
    fn prefix(&self) -> bool {
        self.spec.durability != Durability::SyncWal
    }

    fn apply(&mut self, phase: &str, row: &str) {
        let name = self.spec.name;
        if !self.prefix() {
            match phase {
                "BEGIN" => {
                    assert!(
                        self.maybe.insert(row.to_string()),
                        "{name}: row {row} put twice"
                    );
                }
                _ => {
                    assert!(
                        self.maybe.remove(row),
                        "{name}: ACK of {row} without a BEGIN"
                    );
                    self.present.insert(row.to_string());
                    self.acks += 1;
                }
            }
            return;
        }
        let (rows, acked) = self.runs.last_mut().expect("a run was started");
        match phase {
            "BEGIN" => {
                assert_eq!(
                    *acked,
                    rows.len(),
                    "{name}: put {row} began before the last ended"
                );
                rows.push(row.to_string());
            }
            _ => {
                assert_eq!(
                    rows.get(*acked).map(String::as_str),
                    Some(row),
                    "{name}: ACK of {row} out of order"
                );
                *acked += 1;
                self.acks += 1;
            }
        }
    }

    /// Checks the rows found against the model, then collapses it to them.
    fn check(&mut self, found: &BTreeSet<String>, cycle: usize) {
        let name = self.spec.name;
        for row in &self.present {
            assert!(
                found.contains(row),
                "cycle {cycle}: {name}: row {row} is lost (acknowledged with SyncWal, or found \
                 by an earlier check)"
            );
        }
        let mut known = self.present.clone();
        if self.prefix() {
            for (run, (rows, acked)) in self.runs.iter().enumerate() {
                let k = rows.iter().take_while(|r| found.contains(*r)).count();
                if let Some(later) = rows[k..].iter().position(|r| found.contains(r)) {
                    panic!(
                        "cycle {cycle}: {name}: not a prefix: in child run {} of those since \
                         the last check (puts begun: {}, acknowledged: {acked}), put {} ({}) \
                         is present but put {} ({}) is not",
                        run + 1,
                        rows.len(),
                        k + later + 1,
                        rows[k + later],
                        k + 1,
                        rows[k]
                    );
                }
                known.extend(rows[..k].iter().cloned());
                self.lost += acked.saturating_sub(k) as u64;
            }
        } else {
            known.extend(self.maybe.iter().filter(|r| found.contains(*r)).cloned());
        }
        let unknown: Vec<&String> = found.difference(&known).take(5).collect();
        assert!(
            unknown.is_empty(),
            "cycle {cycle}: {name}: rows present that no put of the model can have written \
             (never begun, or lost at an earlier check): {unknown:?}"
        );
        self.present = found.clone();
        self.maybe.clear();
        self.runs.clear();
    }
}

/// The models of the indexed tables.
struct Ix {
    tables: Vec<IxModel>,
}

impl Ix {
    fn new() -> Self {
        Ix {
            tables: IX_TABLES.into_iter().map(IxModel::new).collect(),
        }
    }

    /// Before the lines of a child run.
    fn start_run(&mut self) {
        for t in self.tables.iter_mut().filter(|t| t.prefix()) {
            t.runs.push((Vec::new(), 0));
        }
    }

    /// Applies a line `BEGIN I <tag> <row>` or `ACK I <tag> <row>`; false for other lines.
    fn apply(&mut self, line: &str) -> bool {
        let parts: Vec<&str> = line.split(' ').collect();
        let [phase @ ("BEGIN" | "ACK"), "I", tag, row] = parts[..] else {
            return false;
        };
        let t = self
            .tables
            .iter_mut()
            .find(|t| t.spec.tag == tag)
            .unwrap_or_else(|| panic!("unknown table tag in {line:?}"));
        t.apply(phase, row);
        true
    }

    /// Checks every indexed table on `conn`: its rows against its model, its cells, its
    /// counter and its indexes.
    async fn check(&mut self, conn: &Connection, indexes: &IndexAdmin, cycle: usize) {
        let counts = conn.table(COUNTS).unwrap();
        for t in &mut self.tables {
            let name = t.spec.name;
            let infos = conn.admin().regions(&tn(name)).await.unwrap();
            let (regions, bytes) = (
                infos.len(),
                infos.iter().map(|r| r.store_file_size).sum::<u64>(),
            );
            if t.spec.max_rows.is_some() {
                assert_eq!(
                    regions, 1,
                    "cycle {cycle}: {name} must keep one region (its prefix check is global)"
                );
            }
            let rows: Vec<RowResult> = conn
                .table(name)
                .unwrap()
                .scan(Scan::new())
                .unwrap()
                .try_collect()
                .await
                .unwrap_or_else(|e| panic!("cycle {cycle}: scan of {name} failed: {e}"));
            let mut found = BTreeSet::new();
            for r in &rows {
                let row = String::from_utf8(r.row.to_vec()).unwrap();
                let want = ix_cells(&row);
                assert!(
                    r.cells.len() == want.len()
                        && want
                            .iter()
                            .all(|(q, v)| r.value(FAMILY, q).map(|x| x.as_ref())
                                == Some(v.as_bytes())),
                    "cycle {cycle}: {name}: row {row} holds {r:?}, its put wrote {want:?}"
                );
                found.insert(row);
            }
            t.check(&found, cycle);
            let counter = counts
                .get(Get::new(name))
                .await
                .unwrap_or_else(|e| panic!("cycle {cycle}: get of {name}'s counter failed: {e}"))
                .value(FAMILY, COUNT_QUALIFIER)
                .map_or(0, |v| i64::from_be_bytes(v.as_ref().try_into().unwrap()));
            assert_eq!(
                counter,
                found.len() as i64,
                "cycle {cycle}: {name}: the counter kept by its observer is not the number of \
                 its rows"
            );
            for index in INDEXES {
                let report = indexes
                    .verify(name, index)
                    .await
                    .unwrap_or_else(|e| panic!("cycle {cycle}: verify {name}/{index}: {e}"));
                assert!(
                    report.differences() == 0,
                    "cycle {cycle}: index {name}/{index} differs from its data: {} rows, {} \
                     index rows, {} missing, {} extra, {} stale; first: {:?} {:?} {:?}",
                    report.data_rows,
                    report.index_rows,
                    report.missing.len(),
                    report.extra.len(),
                    report.stale.len(),
                    report.missing.first(),
                    report.extra.first(),
                    report.stale.first()
                );
            }
            eprintln!(
                "cycle {cycle}: {name}: {} rows, {regions} regions, {bytes} bytes in store \
                 files",
                found.len()
            );
        }
    }
}

fn state_of(row: &str, r: &RowResult) -> State {
    if r.is_empty() {
        return State::Absent;
    }
    assert_eq!(r.cells.len(), 1, "row {row}: expected one cell, got {r:?}");
    let v = r
        .value(FAMILY, QUALIFIER)
        .unwrap_or_else(|| panic!("row {row}: cell in an unknown column: {r:?}"));
    State::Value(token_of(row, v))
}

/// Opens the engine as the parent and checks it against the models; collapses every row's
/// possibilities to the state found. Returns the number of rows present in table `crash`.
async fn check(
    dir: &Path,
    model: &mut Model,
    ix: &mut Ix,
    rng: &mut StdRng,
    cycle: usize,
) -> usize {
    let (config, rt) = hooked_config(dir);
    let conn = Connection::open_with(config)
        .await
        .unwrap_or_else(|e| panic!("cycle {cycle}: recovery failed: {e}"));
    ix.check(&conn, &IndexAdmin::new(&conn, rt), cycle).await;
    let name = TableName::parse(TABLE).unwrap();
    let mut found: BTreeMap<String, State> = BTreeMap::new();
    if conn.admin().table_exists(&name).await.unwrap() {
        let regions = conn.admin().regions(&name).await.unwrap();
        eprintln!("cycle {cycle}: {} regions", regions.len());
        let table = conn.table(TABLE).unwrap();
        let rows: Vec<_> = table
            .scan(Scan::new())
            .unwrap()
            .try_collect()
            .await
            .unwrap_or_else(|e| panic!("cycle {cycle}: scan failed: {e}"));
        for pair in rows.windows(2) {
            assert!(
                pair[0].row < pair[1].row,
                "cycle {cycle}: scan out of order or duplicated: {:?} then {:?}",
                pair[0].row,
                pair[1].row
            );
        }
        let mut reversed: Vec<_> = table
            .scan(Scan::new().reversed(true))
            .unwrap()
            .try_collect()
            .await
            .unwrap_or_else(|e| panic!("cycle {cycle}: reverse scan failed: {e}"));
        reversed.reverse();
        assert!(
            reversed == rows,
            "cycle {cycle}: reverse scan differs from the forward scan"
        );
        for r in &rows {
            let row = String::from_utf8(r.row.to_vec()).unwrap();
            let state = state_of(&row, r);
            found.insert(row, state);
        }
        // Point reads agree with the scan: every row named since the last check, and a
        // sample of the older ones.
        let mut to_get: Vec<String> = model.touched.iter().cloned().collect();
        let older: Vec<&String> = model
            .rows
            .keys()
            .filter(|r| !model.touched.contains(*r))
            .collect();
        for _ in 0..older.len().min(300) {
            to_get.push(older[rng.random_range(0..older.len())].clone());
        }
        for row in &to_get {
            let r = table
                .get(Get::new(row))
                .await
                .unwrap_or_else(|e| panic!("cycle {cycle}: get {row} failed: {e}"));
            let state = state_of(row, &r);
            let from_scan = found.get(row).cloned().unwrap_or(State::Absent);
            assert_eq!(
                state, from_scan,
                "cycle {cycle}: get and scan disagree on row {row}"
            );
        }
    }
    for row in found.keys() {
        assert!(
            model.rows.contains_key(row),
            "cycle {cycle}: scan returned row {row}, which the child never wrote"
        );
    }
    for (row, possible) in model.rows.iter_mut() {
        let actual = found.get(row).cloned().unwrap_or(State::Absent);
        assert!(
            possible.contains(&actual),
            "cycle {cycle}: row {row} is {actual:?}; last acknowledged state {:?}, \
             unacknowledged operations after it {:?}",
            possible[0],
            &possible[1..]
        );
        *possible = vec![actual];
    }
    model.touched.clear();
    // Close cleanly (flushing what was replayed) or just drop the engine, leaving the
    // replayed edits to be replayed once more by the next child.
    if rng.random_bool(0.5) {
        conn.close()
            .await
            .unwrap_or_else(|e| panic!("cycle {cycle}: close failed: {e}"));
    } else {
        drop(conn);
    }
    let corrupt: Vec<_> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".corrupt"))
        .collect();
    assert!(
        corrupt.is_empty(),
        "cycle {cycle}: a kill only tears the newest WAL segment's tail, yet recovery moved \
         segments aside: {corrupt:?}"
    );
    found.len()
}

/// Runs one child and kills it; returns every complete line it printed.
fn run_child(dir: &Path, run: u64, seed: u64, early_kill: bool, rng: &mut StdRng) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env(RUN_ENV, run.to_string())
        .env(SEED_ENV, seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child test binary");
    let started = Instant::now();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::with_capacity(1 << 16, stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                // A line cut by the kill has no newline: it was never complete, ignore it.
                Ok(_) if buf.last() != Some(&b'\n') => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned();
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });

    let mut lines = Vec::new();
    let mut ready = false;
    if early_kill {
        // Anywhere in process start, open, WAL replay, table creation or the first writes.
        std::thread::sleep(Duration::from_millis(rng.random_range(0..150)));
    } else {
        let deadline = started + Duration::from_secs(60);
        while !ready {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    // libtest prints `test child_writer ... ` without a newline first.
                    ready = line.ends_with("READY");
                    lines.push(line);
                }
                Err(_) => break, // the child died or hung; the exit status check reports it
            }
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(50..400)));
    }
    child.kill().expect("kill the child");
    let status = child.wait().expect("wait for the child");
    reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    lines.extend(rx.try_iter());
    assert_eq!(
        status.signal(),
        Some(SIGKILL),
        "run {run}: the child did not die by our SIGKILL ({status}); its stderr:\n{stderr}"
    );
    assert!(
        early_kill || ready,
        "run {run}: the child never became ready; its stderr:\n{stderr}"
    );
    lines
}

#[test]
fn crash_recovery_cycles() {
    cycles_on(false, 32);
}

/// The same cycles with the catalog and store files in an object store (the `object_store`
/// crate's `LocalFileSystem`); fewer by default, as the engine above the seam is the same.
#[test]
fn crash_recovery_cycles_on_an_object_store() {
    cycles_on(true, 12);
}

fn cycles_on(object_store: bool, default_cycles: usize) {
    if std::env::var_os(CHILD_ENV).is_some() {
        return; // never recurse from a child
    }
    let cycles: usize = std::env::var(CYCLES_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_cycles);
    let seed: u64 = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("crash test: {cycles} cycles, object store {object_store}, {SEED_ENV}={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    if object_store {
        std::fs::create_dir(dir.join(OBJECTS)).unwrap();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let started = Instant::now();
    rt.block_on(create_indexed_tables(&dir));
    let mut model = Model::default();
    let mut ix = Ix::new();
    let (mut checks, mut early, mut rows) = (0, 0, 0);
    for cycle in 0..cycles {
        // The first and last cycles are ordinary; otherwise one in five kills early.
        let early_kill = cycle > 0 && cycle + 1 < cycles && rng.random_bool(0.2);
        let t0 = Instant::now();
        let lines = run_child(&dir, cycle as u64, seed, early_kill, &mut rng);
        let before = (model.acks, model.rows.len());
        let ix_before: u64 = ix.tables.iter().map(|t| t.acks).sum();
        ix.start_run();
        for line in &lines {
            if !ix.apply(line) {
                model.apply(line);
            }
        }
        let begun = lines.iter().filter(|l| l.starts_with("BEGIN ")).count();
        let acked = lines.iter().filter(|l| l.starts_with("ACK ")).count();
        let pending = begun - acked;
        model.unacked += pending as u64;
        early += usize::from(early_kill);
        // Check after most cycles; sometimes let the next child recover from the crash.
        let do_check = cycle + 1 == cycles || rng.random_bool(0.75);
        let note = if do_check {
            checks += 1;
            rows = rt.block_on(check(&dir, &mut model, &mut ix, &mut rng, cycle));
            "checked"
        } else {
            "not checked"
        };
        println!(
            "cycle {cycle:>2}: {} acks, {} new rows, {} indexed puts acknowledged, early kill \
             {early_kill}, {pending} unacknowledged ops, {note}, {rows} rows, {:?}",
            model.acks - before.0,
            model.rows.len() - before.1,
            ix.tables.iter().map(|t| t.acks).sum::<u64>() - ix_before,
            t0.elapsed()
        );
    }
    let data = match object_store {
        true => dir.join(OBJECTS).join("data"),
        false => dir.join("data"),
    };
    let files = std::fs::read_dir(&data).map_or(0, |d| d.count());
    if object_store {
        let local = std::fs::read_dir(dir.join("data")).unwrap().count();
        assert_eq!(
            local, 0,
            "a store file went to the data directory, not the objects"
        );
        assert!(
            !dir.join("catalog").exists(),
            "the catalog went to the data directory"
        );
    }
    println!(
        "crash test: {cycles} cycles ({early} early kills, {checks} checks), {} acknowledged \
         operations, {} unacknowledged, {} rows named, {rows} rows present, {files} store \
         files, {:?}",
        model.acks,
        model.unacked,
        model.rows.len(),
        started.elapsed()
    );
    for t in &ix.tables {
        println!(
            "crash test: {}: {} puts acknowledged ({} of them lost), {} rows present",
            t.spec.name,
            t.acks,
            t.lost,
            t.present.len()
        );
    }
    assert!(model.acks > 0, "the children acknowledged nothing");
    for t in &ix.tables {
        // The last cycle is always checked, so `present` is what the engine holds.
        assert!(
            t.acks > 0 && !t.present.is_empty(),
            "{}: {} puts acknowledged, {} rows present: the workload did not exercise it",
            t.spec.name,
            t.acks,
            t.present.len()
        );
    }
}
