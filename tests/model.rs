//! Model-based property test of the data path: random sequences of puts, every kind of
//! delete, check-and-puts, increments and appends (with time ranges and cell TTLs), gets,
//! scans, flushes, minor and major compactions, region splits and merges and
//! reopens run against the engine and against the reference model of
//! `tests/common/model.rs`, and every read must match the model exactly, except raw scans:
//! they show masked puts until a flush or compaction drops them, at times the model cannot
//! know, and must be one of the answers the model allows for that (`Model::check_raw_scan`).
//!
//! Splits and merges: `Split` splits the region holding a row at that row (rows sit on the
//! new boundary) or a region at its computed split point; `Merge` merges two adjacent
//! regions. Neither may change an answer, and the model ignores both. The daughters'
//! references are compacted in the background while later operations run; after a reopen
//! with a tiny flush size, regions also split by themselves (the default split policy grows
//! from twice the flush size).
//!
//! Compactions: the table's policy takes as few as two files, so the background minor
//! compaction that follows each flush runs often, concurrently with the reads; `Compact`
//! asks for a minor compaction and waits for it. Neither may change an answer (raw scans
//! aside: see above), and the model ignores both. `MajorCompact` flushes the table, then
//! major-compacts it, and the model forgets what a major compaction removes at that moment,
//! so later deletes and puts see the reference guide's "major compactions change query
//! results".
//!
//! The table is pre-split into two or three regions and has three families that exercise
//! different rules: `a` keeps one version; `b` keeps three, keeps deleted cells and writes
//! 1 KiB blocks; `c` keeps four, has a one-hour TTL with two min-versions and compresses
//! blocks with LZ4; `d` keeps two, one of them past its one-hour TTL, and keeps deleted
//! cells while their markers are younger than the TTL (`KEEP_DELETED_CELLS => TTL`: markers
//! at small timestamps have expired, server-time ones have not). Rows, qualifiers (the empty one included) and timestamps (0..=20, rarely
//! `u64::MAX - 1`) come from small alphabets so that writes collide: same-timestamp
//! overwrites, masks written before and after the puts they hide, version caps; some puts
//! carry a cell TTL that ran out long ago or never does. Every
//! timestamp is explicit except those of "delete the latest version" and of a few
//! server-time deletes, whose outcomes do not depend on the exact clock (see the model's
//! module doc). Increments and appends are written at the server's time: the model checks
//! the timestamp each returns (between the wall clock before and after the call, or the
//! version read plus one when later, or up to the largest timestamp the server stamped
//! before: server timestamps never go backwards) and records it. The TTL has long expired the small timestamps and never expires the huge one,
//! so family `c` is deterministic too.
//!
//! A reopen closes the engine (or drops it without closing, so the WAL is replayed) and opens
//! it again, sometimes with a tiny MemStore flush size so later writes also flush in the
//! background while reads run. After a reopen and at the end, the whole table is compared.
//!
//! `PROPTEST_CASES` overrides the number of cases (default 128). Minimised failures are kept
//! as `regression_*` tests; `model_*` tests check the model itself against hand-computed
//! answers.

use crate::common;

use basalt::client::{
    Append, CheckAndMutate, CompareOp, Condition, DeleteKind, Increment, RowResult, TimeRange,
};
use basalt::objects::{Objects, StoreObjects};
use basalt::{
    CellType, ColumnFamilyDescriptor, Compression, Config, Connection, KeepDeletedCells, PreSplit,
    Table, TableDescriptor, TableName,
};
use bytes::Bytes;
use common::model::{b, CellFilter, DeleteSpec, GetSpec, Model, PutSpec, ScanSpec};
use futures::TryStreamExt;
use proptest::prelude::*;
use proptest::sample::select;
use std::path::Path;
use std::sync::Arc;

const TABLE: &str = "t";
const FAMILIES: [&str; 4] = ["a", "b", "c", "d"];
/// Rows: prefixes of one another, one with a 0xFF byte (prefix successors carry over it).
const ROWS: [&[u8]; 6] = [b"a", b"ab", b"b", b"b\xff", b"ba", b"c"];
/// Qualifiers: the empty one (which sorts with the family markers), prefixes of one another,
/// and "bq": an ambiguous key encoding would confuse row "a" + "bq" with row "ab" + "q".
const QUALIFIERS: [&str; 4] = ["", "q", "qq", "bq"];
/// Candidate split keys: some are rows, so rows sit on region boundaries.
const SPLIT_KEYS: [&str; 4] = ["ab", "b", "bb", "c"];
/// Scan bounds: rows, keys between rows, and keys outside every row.
const SCAN_KEYS: [&[u8]; 11] = [
    b"", b"a", b"aa", b"ab", b"b", b"b\xff", b"ba", b"bz", b"c", b"d", b"\xff",
];
const PREFIXES: [&[u8]; 7] = [b"", b"a", b"ab", b"b", b"b\xff", b"c", b"z"];
/// Explicit timestamps are 0..=MAX_TS, and rarely HUGE_TS, just below the "server time"
/// sentinel `u64::MAX`.
const MAX_TS: u64 = 20;
const HUGE_TS: u64 = u64::MAX - 1;

/// One step of a test case.
#[derive(Debug, Clone)]
enum Op {
    Put(PutSpec),
    Delete(DeleteSpec),
    Get(GetSpec),
    Scan(ScanSpec),
    /// A check-and-mutate of one column whose action is a put: with explicit timestamps,
    /// or with none when the checked column's newest version is dated in the future (the
    /// put is then written at that version's timestamp).
    CheckAndPut {
        family: &'static str,
        qualifier: &'static str,
        condition: Condition,
        put: PutSpec,
    },
    /// An increment by `amount` (or, with `append`, an append of `suffix`) of one row's
    /// columns, each reading its newest version inside `range`, written at the server's
    /// time but no older than the version it read (plus one); some carry a cell TTL that
    /// never runs out. An increment of a value that is not 8 bytes long must fail whole.
    ReadModifyWrite {
        row: &'static [u8],
        columns: Vec<(&'static str, &'static str)>,
        append: bool,
        amount: i64,
        suffix: &'static str,
        range: TimeRange,
        ttl: Option<u64>,
    },
    /// `admin.flush` of the table.
    Flush,
    /// `admin.compact` of the table (minor; the model is unchanged).
    Compact,
    /// `admin.flush`, then `admin.major_compact` of the table; the model forgets what it
    /// removes.
    MajorCompact,
    /// `admin.split_region`: with `row`, of the region holding it, at it (nothing when the
    /// row already starts a region); without, of region `index` (modulo the count) at its
    /// computed split point (nothing when it has none).
    Split {
        row: Option<&'static [u8]>,
        index: usize,
    },
    /// `admin.merge_regions` of region `index` (modulo the count less one) and the next one
    /// (nothing when the table has one region).
    Merge {
        index: usize,
    },
    /// Close (or, with `crash`, just drop) the connection and open the directory again with
    /// the given MemStore flush size (the default when `None`).
    Reopen {
        crash: bool,
        flush_size: Option<u64>,
    },
}

fn descriptor() -> TableDescriptor {
    TableDescriptor::new(TableName::parse(TABLE).expect("table name"))
        .family(ColumnFamilyDescriptor::new("a").max_versions(1))
        .family(
            ColumnFamilyDescriptor::new("b")
                .max_versions(3)
                .keep_deleted_cells(true)
                .block_size(1024),
        )
        .family(
            ColumnFamilyDescriptor::new("c")
                .max_versions(4)
                .min_versions(2)
                .ttl_secs(3600)
                .compression(Compression::Lz4),
        )
        .family(
            ColumnFamilyDescriptor::new("d")
                .max_versions(2)
                .min_versions(1)
                .ttl_secs(3600)
                .keep_deleted_cells(KeepDeletedCells::Ttl),
        )
        .compaction_files(2, 10)
}

// ---------------------------------------------------------------------------------------
// Running a case
// ---------------------------------------------------------------------------------------

/// Where a case's engine keeps its catalog and store files.
#[derive(Debug, Clone, Copy)]
enum Storage {
    /// The data directory (the default `LocalObjects`).
    Directory,
    /// The `object_store` crate's `InMemory`, kept across reopens.
    ObjectStoreMemory,
    /// The `object_store` crate's `LocalFileSystem`, in `<dir>/objects`.
    ObjectStoreFiles,
}

impl Storage {
    /// The objects to configure, made once per case and kept across reopens.
    fn objects(self, dir: &Path) -> Result<Option<Arc<dyn Objects>>, String> {
        Ok(match self {
            Storage::Directory => None,
            Storage::ObjectStoreMemory => Some(Arc::new(StoreObjects::in_memory())),
            Storage::ObjectStoreFiles => {
                let at = dir.join("objects");
                std::fs::create_dir_all(&at).map_err(|e| e.to_string())?;
                Some(Arc::new(
                    StoreObjects::local_directory(&at).map_err(|e| e.to_string())?,
                ))
            }
        })
    }
}

fn storage() -> impl Strategy<Value = Storage> {
    select(vec![
        Storage::Directory,
        Storage::ObjectStoreMemory,
        Storage::ObjectStoreFiles,
    ])
}

async fn open(
    dir: &Path,
    objects: &Option<Arc<dyn Objects>>,
    flush_size: Option<u64>,
) -> Result<Connection, String> {
    let mut config = Config::new(dir);
    if let Some(o) = objects {
        config = config.objects(Arc::clone(o));
    }
    if let Some(n) = flush_size {
        config = config.memstore_flush_size(n);
    }
    Connection::open_with(config)
        .await
        .map_err(|e| format!("open: {e}"))
}

fn show(results: &[RowResult]) -> String {
    let mut s = String::new();
    for r in results {
        s.push_str(&format!("\n    row {:?}:", String::from_utf8_lossy(&r.row)));
        for c in &r.cells {
            s.push_str(&format!(
                " {}:{}@{}={}",
                String::from_utf8_lossy(&c.family),
                String::from_utf8_lossy(&c.qualifier),
                c.timestamp,
                String::from_utf8_lossy(&c.value)
            ));
        }
    }
    if s.is_empty() {
        s.push_str(" (nothing)");
    }
    s
}

fn compare(step: &str, got: &[RowResult], want: &[RowResult]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    Err(format!(
        "{step}\n  engine:{}\n  model:{}",
        show(got),
        show(want)
    ))
}

/// Timestamps the server's clock gave markers: the model cannot know them to the
/// millisecond, so raw scans leave those markers out of the comparison.
fn server_time(ts: u64) -> bool {
    ts > MAX_TS && ts < HUGE_TS
}

/// Compares one scan: a raw one by [`Model::check_raw_scan`] (whose answer depends on what
/// flushes and compactions dropped), any other exactly.
fn check_scan(step: &str, s: &ScanSpec, got: &[RowResult], model: &Model) -> Result<(), String> {
    if s.raw {
        return model
            .check_raw_scan(s, got, server_time)
            .map_err(|e| format!("{step}: {e}\n  engine:{}", show(got)));
    }
    compare(step, got, &model.scan(s))
}

async fn scan(table: &Table, s: &ScanSpec) -> Result<Vec<RowResult>, String> {
    table
        .scan(s.to_scan())
        .map_err(|e| format!("scan: {e}"))?
        .try_collect()
        .await
        .map_err(|e| format!("scan stream: {e}"))
}

/// Compares the whole table, every version, forward and reverse, and raw.
async fn check_all(step: &str, table: &Table, model: &Model) -> Result<(), String> {
    for (reverse, raw) in [(false, false), (true, false), (false, true)] {
        let s = ScanSpec {
            reverse,
            raw,
            max_versions: 10,
            ..ScanSpec::default()
        };
        let got = scan(table, &s).await?;
        check_scan(
            &format!("{step}: full scan (reverse {reverse}, raw {raw})"),
            &s,
            &got,
            model,
        )?;
    }
    Ok(())
}

/// Runs `ops` on a fresh table split at `splits`; the first disagreement is the error.
/// The engine's catalog and store files are kept in `storage`.
fn run_on(storage: Storage, splits: &[&str], ops: &[Op]) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(run_async(storage, splits, ops))
}

async fn run_async(storage: Storage, splits: &[&str], ops: &[Op]) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let objects = storage.objects(dir.path())?;
    let mut conn = open(dir.path(), &objects, None).await?;
    let name = TableName::parse(TABLE).map_err(|e| e.to_string())?;
    let split = PreSplit::Keys(splits.iter().map(|k| k.as_bytes().to_vec()).collect());
    conn.admin()
        .create_table_with_splits(descriptor(), split)
        .await
        .map_err(|e| format!("create table: {e}"))?;
    let mut table = conn.table(TABLE).map_err(|e| e.to_string())?;
    let mut model = Model::new(&descriptor());
    let mut server_clock = 0u64;

    for (i, op) in ops.iter().enumerate() {
        let step = format!("op #{i} {op:?}");
        match op {
            Op::Put(p) => {
                table
                    .put(p.to_put())
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                model.put(p);
            }
            Op::Delete(d) => {
                let before = common::model::wall_clock_ms();
                table
                    .delete(d.to_delete())
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                let after = common::model::wall_clock_ms();
                match d.ts {
                    Some(dts) => model.delete_at(d, dts),
                    None => {
                        let dts = server_delete_ts(&table, d, before, after.max(server_clock))
                            .await
                            .map_err(|e| format!("{step}: {e}"))?;
                        if dts <= after.saturating_add(basalt::MAX_CLOCK_LEAD_MS) {
                            server_clock = server_clock.max(dts);
                        }
                        model.delete_at(d, dts);
                    }
                }
            }
            Op::CheckAndPut {
                family,
                qualifier,
                condition,
                put,
            } => {
                let cam = CheckAndMutate::new(&put.row, family, qualifier);
                let cam = match condition {
                    Condition::Value(op, v) => cam.if_value(*op, v),
                    _ => cam.if_absent(),
                };
                // When the checked column's newest version is dated in the future (HUGE_TS),
                // the put goes without timestamps: a passing check writes it at the checked
                // cell's timestamp (HBASE-14054), which the model knows.
                let future = model
                    .latest(&put.row, family.as_bytes(), qualifier.as_bytes())
                    .is_some_and(|(ts, _)| ts == HUGE_TS);
                let (request, put) = if future {
                    let mut at = put.clone();
                    for cell in &mut at.cells {
                        cell.2 = HUGE_TS;
                    }
                    (put.to_put_at_server_time(), at)
                } else {
                    (put.to_put(), put.clone())
                };
                let got = table
                    .check_and_mutate(cam.then_put(request))
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                let want = model.condition_holds(
                    &put.row,
                    family.as_bytes(),
                    qualifier.as_bytes(),
                    condition,
                );
                if got != want {
                    return Err(format!(
                        "{step}: the condition held: engine {got}, model {want}"
                    ));
                }
                if want {
                    model.put(&put);
                }
            }
            Op::ReadModifyWrite {
                row,
                columns,
                append,
                amount,
                suffix,
                range,
                ttl,
            } => {
                let rmw = Rmw {
                    columns,
                    append: *append,
                    amount: *amount,
                    suffix,
                    range: *range,
                    ttl: *ttl,
                };
                read_modify_write(&table, &mut model, &mut server_clock, row, rmw)
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
            }
            Op::Get(g) => {
                let got = table
                    .get(g.to_get())
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                compare(&step, &[got], &[model.get(g)])?;
            }
            Op::Scan(s) => {
                let got = scan(&table, s).await.map_err(|e| format!("{step}: {e}"))?;
                check_scan(&step, s, &got, &model)?;
            }
            Op::Flush => {
                conn.admin()
                    .flush(&name)
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
            }
            Op::Compact => {
                conn.admin()
                    .compact(&name)
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
            }
            Op::MajorCompact => {
                let admin = conn.admin();
                admin
                    .flush(&name)
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                admin
                    .major_compact(&name)
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                model.major_compact(common::model::wall_clock_ms());
            }
            Op::Split { row, index } => {
                let admin = conn.admin();
                let regions = admin
                    .regions(&name)
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                let target = match row {
                    Some(r) => regions
                        .iter()
                        .rev()
                        .find(|x| x.start_key.as_ref() <= *r)
                        .filter(|x| x.start_key.as_ref() != *r)
                        .map(|x| (x.id, Some(*r))),
                    None => regions.get(index % regions.len()).map(|x| (x.id, None)),
                };
                if let Some((id, at)) = target {
                    match admin.split_region(&name, id, at).await {
                        // A split by itself replaced the region meanwhile.
                        Ok(_) | Err(basalt::Error::RegionNotFound { .. }) => {}
                        Err(e) => return Err(format!("{step}: {e}")),
                    }
                }
            }
            Op::Merge { index } => {
                let admin = conn.admin();
                let regions = admin
                    .regions(&name)
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                if regions.len() >= 2 {
                    let i = index % (regions.len() - 1);
                    match admin
                        .merge_regions(&name, regions[i].id, regions[i + 1].id)
                        .await
                    {
                        Ok(_) | Err(basalt::Error::RegionNotFound { .. }) => {}
                        Err(e) => return Err(format!("{step}: {e}")),
                    }
                }
            }
            Op::Reopen { crash, flush_size } => {
                if !crash {
                    conn.close().await.map_err(|e| format!("{step}: {e}"))?;
                }
                drop(table);
                drop(conn);
                conn = reopen(dir.path(), &objects, *flush_size)
                    .await
                    .map_err(|e| format!("{step}: {e}"))?;
                table = conn.table(TABLE).map_err(|e| e.to_string())?;
                check_all(&step, &table, &model).await?;
            }
        }
    }
    check_all("end of case", &table, &model).await?;
    conn.close().await.map_err(|e| format!("final close: {e}"))
}

/// Opens the directory again. A background flush or compaction spawned by the old engine may
/// still hold it after the last handle is gone (for as long as that work takes, which on a
/// slow, loaded machine is more than a moment), so "already open" is retried for a while.
async fn reopen(
    dir: &Path,
    objects: &Option<Arc<dyn Objects>>,
    flush_size: Option<u64>,
) -> Result<Connection, String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match open(dir, objects, flush_size).await {
            Ok(c) => return Ok(c),
            Err(e) if e.contains("already open") && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Generating cases
// ---------------------------------------------------------------------------------------

fn family() -> impl Strategy<Value = &'static str> {
    select(&FAMILIES[..])
}

fn qualifier() -> impl Strategy<Value = &'static str> {
    select(&QUALIFIERS[..])
}

/// The timestamp the engine gave a delete without one: the server's clock, which the
/// model cannot read to the millisecond (a write in the same millisecond as the model's own
/// reading would be masked there and not in the engine). It is read back from the markers
/// the delete wrote (a raw read of the row: its family and column markers without their
/// own timestamp all take it) and must lie between the wall clock before the call and
/// `upper` (the wall clock after it, or the region's clock when that ran ahead). A delete
/// that writes no such marker (only "latest version" ones) needs none: `before` then.
/// The newest marker in that window is this delete's: generated timestamps are small
/// (at most `MAX_TS`) or huge (`HUGE_TS`), never in the wall clock's range, and the
/// region's clock never goes back, so an earlier delete's server-time markers are older.
async fn server_delete_ts(
    table: &Table,
    d: &DeleteSpec,
    before: u64,
    upper: u64,
) -> Result<u64, String> {
    // A family marker replaces the markers of its family listed before it.
    let replaced = |i: usize, family: &Bytes| {
        d.kinds[i + 1..]
            .iter()
            .any(|later| matches!(later, DeleteKind::Family { family: f, .. } if f == family))
    };
    let stamped = d.kinds.is_empty()
        || d.kinds.iter().enumerate().any(|(i, k)| match k {
            DeleteKind::Family { family, ts: None }
            | DeleteKind::Column {
                family, ts: None, ..
            } => !replaced(i, family),
            _ => false,
        });
    if !stamped {
        return Ok(before);
    }
    let mut stop = d.row.to_vec();
    stop.push(0);
    let raw = basalt::client::Scan::new()
        .start_row(&d.row)
        .stop_row(stop)
        .raw(true)
        .max_versions(u32::MAX);
    let rows: Vec<RowResult> = table
        .scan(raw)
        .map_err(|e| format!("raw read of the delete's row: {e}"))?
        .try_collect()
        .await
        .map_err(|e| format!("raw read of the delete's row: {e}"))?;
    rows.iter()
        .flat_map(|r| &r.cells)
        .filter(|c| matches!(c.kind, CellType::DeleteFamily | CellType::DeleteColumn))
        .map(|c| c.timestamp)
        .filter(|ts| (before..=upper).contains(ts))
        .max()
        .ok_or_else(|| format!("the delete wrote no marker stamped between {before} and {upper}"))
}

/// Runs an increment or append on the engine and checks it against the model: the values
/// it returns, the timestamps it wrote them at (the wall clock during the call, or the
/// version it read plus one when that is later), or its failure when a column it increments
/// holds a value that is not 8 bytes long; then applies it to the model.
///
/// Server timestamps never go backwards within a region (issue 44): a burst of increments
/// runs the region's clock ahead of the wall clock, and later server-time writes (the
/// call's own later columns among them) are stamped no earlier. `server_clock` is the largest timestamp the engine stamped a write
/// with so far (of any region: an upper bound of each region's clock), never more than
/// `MAX_CLOCK_LEAD_MS` past the wall clock.
async fn read_modify_write(
    table: &Table,
    model: &mut Model,
    server_clock: &mut u64,
    row: &[u8],
    rmw: Rmw<'_>,
) -> Result<(), String> {
    let Rmw {
        columns,
        append,
        amount,
        suffix,
        range,
        ttl,
    } = rmw;
    // What the model expects per column: the new value and the oldest timestamp allowed.
    let mut expected = Vec::new();
    let mut not_a_counter = false;
    for (f, q) in columns {
        let old = model.latest_in(row, f.as_bytes(), q.as_bytes(), range);
        // The version read plus one, but never the "server time" sentinel.
        let floor = old
            .as_ref()
            .map_or(0, |(ts, _)| ts.saturating_add(1).min(HUGE_TS));
        let value = if append {
            let mut v = old.map(|(_, v)| v.to_vec()).unwrap_or_default();
            v.extend_from_slice(suffix.as_bytes());
            b(v)
        } else {
            let base = match old {
                None => Some(0i64),
                Some((_, v)) => <[u8; 8]>::try_from(v.as_ref()).ok().map(i64::from_be_bytes),
            };
            match base {
                Some(base) => b(base.wrapping_add(amount).to_be_bytes()),
                None => {
                    not_a_counter = true;
                    Bytes::new()
                }
            }
        };
        expected.push((b(f), b(q), value, floor));
    }
    expected.sort();

    let before = common::model::wall_clock_ms();
    let got = if append {
        let a = columns
            .iter()
            .fold(Append::new(row), |a, (f, q)| a.add_column(f, q, suffix))
            .time_range(range);
        table.append(ttl.map_or(a.clone(), |t| a.ttl_ms(t))).await
    } else {
        let i = columns
            .iter()
            .fold(Increment::new(row), |i, (f, q)| i.add_column(f, q, amount))
            .time_range(range);
        table
            .increment(ttl.map_or(i.clone(), |t| i.ttl_ms(t)))
            .await
    };
    let after = common::model::wall_clock_ms();
    // The region's clock follows the stamps of this call's other columns too: a column
    // stamped after one whose version read was later takes that later time. A call that
    // fails on a column that is not a counter may have stamped the others first.
    let lead = after.saturating_add(basalt::MAX_CLOCK_LEAD_MS);
    let call_clock = expected
        .iter()
        .map(|(_, _, _, floor)| *floor)
        .filter(|floor| *floor <= lead)
        .fold(*server_clock, u64::max);
    let result = match got {
        Err(basalt::Error::NotACounter { .. }) if not_a_counter => {
            *server_clock = call_clock;
            return Ok(());
        }
        Err(e) => return Err(format!("engine failed: {e}")),
        Ok(_) if not_a_counter => {
            return Err("an increment of a value that is not 8 bytes long succeeded".into())
        }
        Ok(result) => result,
    };
    let written: Vec<_> = result
        .cells
        .iter()
        .map(|c| {
            (
                c.family.clone(),
                c.qualifier.clone(),
                c.value.clone(),
                c.timestamp,
            )
        })
        .collect();
    if written.len() != expected.len() {
        return Err(format!(
            "engine returned {written:?}, model expects {expected:?}"
        ));
    }
    let mut put = PutSpec::new(row);
    put.ttl = ttl;
    for ((f, q, value, ts), (wf, wq, want, floor)) in written.into_iter().zip(&expected) {
        let (lo, hi) = (before.max(*floor), after.max(*floor).max(call_clock));
        if (&f, &q, &value) != (wf, wq, want) || ts < lo || ts > hi {
            return Err(format!(
                "engine wrote {f:?}:{q:?} = {value:?} at {ts}, model expects {want:?} at \
                 {lo}..={hi} for {wf:?}:{wq:?}"
            ));
        }
        if ts <= after.saturating_add(basalt::MAX_CLOCK_LEAD_MS) {
            *server_clock = (*server_clock).max(ts);
        }
        put = put.cell(f, q, ts, value);
    }
    model.put(&put);
    Ok(())
}

/// One read-modify-write: the columns, whether it appends (else increments), the amount or
/// suffix, the time range it reads in and the cells' TTL.
struct Rmw<'a> {
    columns: &'a [(&'a str, &'a str)],
    append: bool,
    amount: i64,
    suffix: &'a str,
    range: TimeRange,
    ttl: Option<u64>,
}

fn row() -> impl Strategy<Value = &'static [u8]> {
    select(&ROWS[..])
}

fn ts() -> impl Strategy<Value = u64> {
    prop_oneof![40 => 0..=MAX_TS, 1 => Just(HUGE_TS)]
}

fn put() -> impl Strategy<Value = Op> {
    (
        row(),
        prop::collection::vec((family(), qualifier(), ts()), 1..=4),
        // A cell TTL, sometimes: one that ran out long ago (for small timestamps) or never.
        prop::option::weighted(0.15, select(&[1u64, u64::MAX / 2][..])),
    )
        .prop_map(|(r, cells, ttl)| {
            let mut p = cells
                .into_iter()
                .fold(PutSpec::new(r), |p, (f, q, t)| p.cell(f, q, t, ""));
            p.ttl = ttl;
            Op::Put(p)
        })
}

/// A marker whose own timestamp is `None` with probability `p_none`.
fn marker(p_none: f64) -> impl Strategy<Value = DeleteKind> {
    let opt_ts = move || prop::option::weighted(1.0 - p_none, ts());
    prop_oneof![
        (family(), qualifier(), opt_ts()).prop_map(|(f, q, ts)| DeleteKind::Version {
            family: b(f),
            qualifier: b(q),
            ts,
        }),
        (family(), qualifier(), opt_ts()).prop_map(|(f, q, ts)| DeleteKind::Column {
            family: b(f),
            qualifier: b(q),
            ts,
        }),
        (family(), opt_ts()).prop_map(|(f, ts)| DeleteKind::Family { family: b(f), ts }),
        (family(), ts()).prop_map(|(f, ts)| DeleteKind::FamilyVersion { family: b(f), ts }),
    ]
}

fn delete() -> impl Strategy<Value = Op> {
    let explicit = (
        row(),
        ts(),
        prop_oneof![
            1 => Just(Vec::new()),
            6 => prop::collection::vec(marker(0.3), 1..=3),
        ],
    )
        .prop_map(|(r, t, kinds)| DeleteSpec {
            row: b(r),
            ts: Some(t),
            kinds,
        });
    // At server time: mostly "latest version" markers, sometimes markers at the clock
    // (which mask every explicit timestamp), rarely the whole row.
    let server = (
        row(),
        prop_oneof![
            1 => Just(Vec::new()),
            30 => prop::collection::vec(
                prop_oneof![
                    4 => (family(), qualifier()).prop_map(|(f, q)| DeleteKind::Version {
                        family: b(f),
                        qualifier: b(q),
                        ts: None,
                    }),
                    2 => marker(0.05),
                ],
                1..=3,
            ),
        ],
    )
        .prop_map(|(r, kinds)| DeleteSpec {
            row: b(r),
            ts: None,
            kinds,
        });
    prop_oneof![3 => explicit, 2 => server].prop_map(Op::Delete)
}

fn columns() -> impl Strategy<Value = Vec<(bytes::Bytes, Option<bytes::Bytes>)>> {
    prop_oneof![
        2 => Just(Vec::new()),
        3 => prop::collection::vec(
            (family(), prop::option::weighted(0.7, qualifier()))
                .prop_map(|(f, q)| (b(f), q.map(b))),
            1..=3,
        ),
    ]
}

fn time_range() -> impl Strategy<Value = TimeRange> {
    prop_oneof![
        4 => Just(TimeRange::ALL),
        1 => ts().prop_map(TimeRange::at),
        2 => (0..=MAX_TS + 1, 1..=MAX_TS).prop_map(|(min, width)| TimeRange {
            min,
            max: min + width,
        }),
        1 => prop_oneof![0..=MAX_TS, Just(HUGE_TS)].prop_map(|min| TimeRange { min, max: u64::MAX }),
    ]
}

fn versions() -> impl Strategy<Value = u32> {
    prop_oneof![3 => Just(1u32), 1 => Just(2), 1 => Just(3), 2 => Just(10)]
}

/// A filter on cells, sometimes: one that matches older versions (values of the second
/// cell of a put, padded values, given timestamps), so its order with the version cap shows.
fn cell_filter() -> impl Strategy<Value = Option<CellFilter>> {
    prop::option::weighted(
        0.25,
        prop_oneof![
            select(&[".1", "-", "v1", "."][..])
                .prop_map(|t| CellFilter::ValueContains(t.to_string())),
            prop::collection::vec(ts(), 1..=3).prop_map(CellFilter::Timestamps),
        ],
    )
}

fn get() -> impl Strategy<Value = Op> {
    (row(), columns(), time_range(), versions(), cell_filter()).prop_map(
        |(r, columns, time_range, v, filter)| {
            Op::Get(GetSpec {
                row: b(r),
                columns,
                time_range,
                max_versions: v,
                filter,
            })
        },
    )
}

/// A check-and-put: an empty expected value means "no value" (absent or zero-length).
fn check_and_put() -> impl Strategy<Value = Op> {
    let op = select(
        &[
            CompareOp::Less,
            CompareOp::LessOrEqual,
            CompareOp::Equal,
            CompareOp::NotEqual,
            CompareOp::GreaterOrEqual,
            CompareOp::Greater,
        ][..],
    );
    let condition = prop_oneof![
        1 => Just(Condition::Absent),
        3 => (op, select(&["", "", "v1", "v3.0", "w"][..]))
            .prop_map(|(op, v)| Condition::Value(op, b(v))),
    ];
    (family(), qualifier(), condition, put()).prop_map(|(family, qualifier, condition, put)| {
        let Op::Put(put) = put else {
            unreachable!("put() makes puts")
        };
        Op::CheckAndPut {
            family,
            qualifier,
            condition,
            put,
        }
    })
}

fn read_modify_write_op() -> impl Strategy<Value = Op> {
    (
        row(),
        prop::collection::btree_set((family(), qualifier()), 1..=3),
        prop::bool::weighted(0.4),
        -3i64..=5,
        select(&["+", "++x"][..]),
        time_range(),
        prop::option::weighted(0.15, Just(u64::MAX / 2)),
    )
        .prop_map(
            |(row, columns, append, amount, suffix, range, ttl)| Op::ReadModifyWrite {
                row,
                columns: columns.into_iter().collect(),
                append,
                amount,
                suffix,
                range,
                ttl,
            },
        )
}

fn scan_op() -> impl Strategy<Value = Op> {
    let bound = || prop::option::weighted(0.5, select(&SCAN_KEYS[..]).prop_map(b));
    (
        bound(),
        bound(),
        prop::option::weighted(0.2, select(&PREFIXES[..]).prop_map(b)),
        any::<bool>(),
        columns(),
        time_range(),
        versions(),
        prop::option::weighted(0.3, 1..=4usize),
        prop::option::weighted(0.2, 1..=4usize),
        prop_oneof![
            4 => cell_filter().prop_map(|f| (f, false)),
            1 => Just((None, true)),
        ],
    )
        .prop_map(
            |(
                start,
                stop,
                prefix,
                reverse,
                columns,
                time_range,
                max_versions,
                limit,
                batch,
                (filter, raw),
            )| {
                Op::Scan(ScanSpec {
                    start,
                    stop,
                    prefix,
                    reverse,
                    columns,
                    time_range,
                    max_versions,
                    limit,
                    // Raw results are checked row by row, without batches (and leave
                    // server-time markers out, whose count could split a batch differently).
                    batch: batch.filter(|_| !raw),
                    filter,
                    raw,
                })
            },
        )
}

fn reopen_op() -> impl Strategy<Value = Op> {
    (
        prop::bool::weighted(0.3),
        prop_oneof![
            2 => Just(None),
            1 => Just(Some(1024u64)),
            1 => Just(Some(4096u64)),
        ],
    )
        .prop_map(|(crash, flush_size)| Op::Reopen { crash, flush_size })
}

/// Split rows: rows of `ROWS` (one of them the first row of the key space) and rows between.
const SPLIT_ROWS: [&[u8]; 7] = [b"a", b"aa", b"ab", b"b", b"b\xff", b"ba", b"c"];

fn split_op() -> impl Strategy<Value = Op> {
    (
        prop::option::weighted(0.7, select(&SPLIT_ROWS[..])),
        0usize..8,
    )
        .prop_map(|(row, index)| Op::Split { row, index })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => put(),
        6 => delete(),
        2 => check_and_put(),
        2 => read_modify_write_op(),
        5 => get(),
        4 => scan_op(),
        2 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::MajorCompact),
        1 => reopen_op(),
        2 => split_op(),
        1 => (0usize..8).prop_map(|index| Op::Merge { index }),
    ]
}

/// Gives every put cell a distinct value, so a wrong write winning shows. Every third put
/// pads its values to a few hundred bytes, so store files span several blocks and small
/// flush sizes are reached.
fn number_values(mut ops: Vec<Op>) -> Vec<Op> {
    for (i, op) in ops.iter_mut().enumerate() {
        if let Op::Put(p) | Op::CheckAndPut { put: p, .. } = op {
            for (j, cell) in p.cells.iter_mut().enumerate() {
                let pad = if i % 3 == 0 {
                    100 + (i * 37 + j * 11) % 300
                } else {
                    0
                };
                cell.3 = if i % 11 == 5 && j == 0 {
                    // Some zero-length values, which an empty expected value matches.
                    b("")
                } else {
                    b(format!("v{i}.{j}{}", "-".repeat(pad)))
                };
            }
        }
    }
    ops
}

fn case() -> impl Strategy<Value = (Vec<&'static str>, Vec<Op>)> {
    (
        prop::sample::subsequence(&SPLIT_KEYS[..], 1..=2),
        prop::collection::vec(op(), 1..=60).prop_map(number_values),
    )
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(128)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 2048,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_model(storage in storage(), (splits, ops) in case()) {
        run_on(storage, &splits, &ops).map_err(TestCaseError::fail)?;
    }
}

// ---------------------------------------------------------------------------------------
// Regression tests: minimised failures, kept as named cases
// ---------------------------------------------------------------------------------------

/// Runs a named case on every storage.
fn check(splits: &[&str], ops: Vec<Op>) {
    for storage in [
        Storage::Directory,
        Storage::ObjectStoreMemory,
        Storage::ObjectStoreFiles,
    ] {
        if let Err(e) = run_on(storage, splits, &ops) {
            panic!("{storage:?}: {e}");
        }
    }
}

fn full_get(row: &str) -> Op {
    Op::Get(GetSpec {
        max_versions: 10,
        ..GetSpec::new(row)
    })
}

/// A fixed sequence through a mask written before its put, a latest-version delete, a flush
/// and a reopen (the model's answers to such sequences are checked by hand below).
#[test]
fn smoke_fixed_sequence() {
    check(
        &["b"],
        vec![
            Op::Put(
                PutSpec::new("a")
                    .cell("a", "q", 5, "x")
                    .cell("b", "q", 5, "x"),
            ),
            Op::Delete(DeleteSpec::new("a").at(4).column("b", "q", Some(7))),
            Op::Put(PutSpec::new("a").cell("b", "q", 6, "masked")),
            Op::Put(PutSpec::new("a").cell("b", "q", 8, "y")),
            Op::Delete(DeleteSpec::new("a").latest("b", "q")),
            full_get("a"),
            Op::Flush,
            full_get("a"),
            Op::Reopen {
                crash: false,
                flush_size: None,
            },
            full_get("a"),
        ],
    );
}

/// A fixed sequence of increments and appends: over a counter dated in the future (the new
/// value may not hide under it), over a column that is not a counter (the whole increment
/// fails), with time ranges that miss or find the newest version, with a cell TTL, then a
/// flush and a crash.
#[test]
fn read_modify_write_fixed_sequence() {
    let rmw = |columns: Vec<(&'static str, &'static str)>, append: bool, range: TimeRange| {
        Op::ReadModifyWrite {
            row: b"a",
            columns,
            append,
            amount: 2,
            suffix: "++x",
            range,
            ttl: None,
        }
    };
    check(
        &["b"],
        vec![
            Op::Put(
                PutSpec::new("a")
                    .cell("b", "q", HUGE_TS, 7i64.to_be_bytes())
                    .cell("b", "qq", 3, "x")
                    .cell("c", "", 5, 1i64.to_be_bytes()),
            ),
            rmw(vec![("b", "q")], false, TimeRange::ALL),
            full_get("a"),
            rmw(vec![("b", "q"), ("b", "qq")], false, TimeRange::ALL),
            rmw(vec![("b", "qq")], true, TimeRange { min: 0, max: 3 }),
            rmw(vec![("c", "")], false, TimeRange::at(5)),
            rmw(vec![("c", ""), ("d", "q")], true, TimeRange::ALL),
            Op::ReadModifyWrite {
                row: b"b",
                columns: vec![("a", "q")],
                append: false,
                amount: -3,
                suffix: "",
                range: TimeRange::ALL,
                ttl: Some(u64::MAX / 2),
            },
            full_get("a"),
            Op::Flush,
            rmw(vec![("b", "q")], false, TimeRange::ALL),
            Op::Reopen {
                crash: true,
                flush_size: None,
            },
            full_get("a"),
            full_get("b"),
        ],
    );
}

/// A delete without a timestamp then an append in the same millisecond, many times: the
/// engine stamps the delete's marker with its own clock, and the append may come a
/// millisecond later, shown; the model takes the marker's timestamp from the engine (CI
/// flake: the model read its own clock after the delete, in the append's millisecond, and
/// masked what the engine showed).
#[test]
fn server_time_delete_then_append() {
    let mut ops = Vec::new();
    for _ in 0..200 {
        ops.push(Op::Delete(DeleteSpec::new("a").family("a", None)));
        ops.push(Op::ReadModifyWrite {
            row: b"a",
            columns: vec![("a", ""), ("c", "")],
            append: true,
            amount: 0,
            suffix: "++x",
            range: TimeRange::ALL,
            ttl: None,
        });
        ops.push(full_get("a"));
    }
    check(&["b"], ops);
}

/// A fixed sequence through splits and merges: a mask and its put on opposite sides of a
/// flush, a split between the rows (daughters on references), a delete and a put on each
/// side, a computed split, merges back to one region (references compacted first), a major
/// compaction and a crash: every read answers as if the table had never changed shape.
#[test]
fn smoke_splits_and_merges() {
    let mut ops = vec![
        Op::Put(
            PutSpec::new("a")
                .cell("a", "q", 5, "a5")
                .cell("b", "q", 5, "b5"),
        ),
        Op::Put(PutSpec::new("ba").cell("c", "", 7, "c7")),
        Op::Delete(DeleteSpec::new("a").at(4).column("b", "q", Some(7))),
        Op::Flush,
        Op::Split {
            row: Some(b"ab"),
            index: 0,
        },
        Op::Put(PutSpec::new("a").cell("b", "q", 6, "masked")),
        Op::Put(PutSpec::new("c").cell("a", "qq", 2, "c2")),
        Op::Delete(DeleteSpec::new("ba").latest("c", "")),
        full_get("a"),
        full_get("ba"),
        Op::Scan(ScanSpec {
            max_versions: 10,
            ..ScanSpec::default()
        }),
    ];
    for i in 0..40u64 {
        let r = ["a", "ab", "b", "ba", "c"][i as usize % 5];
        ops.push(Op::Put(PutSpec::new(r).cell(
            "b",
            "q",
            i % 20,
            "padding-".repeat(20),
        )));
    }
    ops.extend([
        Op::Flush,
        Op::Split {
            row: None,
            index: 1,
        },
        Op::Merge { index: 0 },
        Op::Merge { index: 0 },
        Op::Merge { index: 0 },
        Op::Merge { index: 0 },
        full_get("a"),
        Op::MajorCompact,
        Op::Split {
            row: Some(b"b"),
            index: 0,
        },
        Op::Put(PutSpec::new("b").cell("a", "q", 9, "after")),
        Op::Reopen {
            crash: true,
            flush_size: Some(1024),
        },
        full_get("b"),
    ]);
    check(&["b"], ops);
}

/// Two "latest version" markers of one column in one delete take the two newest versions, as
/// HBase's `HRegion.prepareDeleteTimestamps` resolves them; the engine gave both the newest
/// (fixed in `core/src/server/write/prepare.rs`).
/// In a family keeping one version the second marker finds no second version: a no-op.
#[test]
fn regression_repeated_latest_version_deletes() {
    check(
        &["b"],
        vec![
            Op::Put(
                PutSpec::new("a")
                    .cell("b", "q", 3, "b3")
                    .cell("b", "q", 6, "b6")
                    .cell("b", "q", 8, "b8")
                    .cell("a", "q", 3, "a3")
                    .cell("a", "q", 6, "a6"),
            ),
            Op::Delete(
                DeleteSpec::new("a")
                    .latest("b", "q")
                    .latest("a", "q")
                    .latest("b", "q")
                    .latest("a", "q"),
            ),
            full_get("a"),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// The model itself, against hand-computed expectations
// ---------------------------------------------------------------------------------------

/// `(timestamp, value)` of the versions of one column a get returns.
fn versions_of(model: &Model, g: GetSpec, family: &str, qualifier: &str) -> Vec<(u64, String)> {
    model
        .get(&g)
        .cells
        .iter()
        .filter(|c| c.family == b(family) && c.qualifier == b(qualifier))
        .map(|c| (c.timestamp, String::from_utf8_lossy(&c.value).into_owned()))
        .collect()
}

fn all_versions(row: &str) -> GetSpec {
    GetSpec {
        max_versions: 10,
        ..GetSpec::new(row)
    }
}

fn vs(items: &[(u64, &str)]) -> Vec<(u64, String)> {
    items.iter().map(|(t, v)| (*t, v.to_string())).collect()
}

#[test]
fn model_masks_overwrites_and_version_cap() {
    let mut m = Model::new(&descriptor());
    m.put(&PutSpec::new("r").cell("b", "q", 5, "old"));
    m.put(&PutSpec::new("r").cell("b", "q", 5, "new"));
    m.delete(&DeleteSpec::new("r").at(99).column("b", "q", Some(3)));
    m.put(
        &PutSpec::new("r")
            .cell("b", "q", 2, "masked")
            .cell("b", "q", 3, "masked"),
    );
    for t in [7, 8, 9] {
        m.put(&PutSpec::new("r").cell("b", "q", t, format!("v{t}")));
    }
    // Family b keeps three versions: 9, 8, 7; 5 is beyond the cap.
    let want = vs(&[(9, "v9"), (8, "v8"), (7, "v7")]);
    assert_eq!(versions_of(&m, all_versions("r"), "b", "q"), want);
    // Masking 8 lets 5 back in: the cap counts unmasked versions.
    m.delete(&DeleteSpec::new("r").version("b", "q", 8));
    let want = vs(&[(9, "v9"), (7, "v7"), (5, "new")]);
    assert_eq!(versions_of(&m, all_versions("r"), "b", "q"), want);
    // A put written after the marker at its timestamp stays masked.
    m.put(&PutSpec::new("r").cell("b", "q", 8, "again"));
    assert_eq!(versions_of(&m, all_versions("r"), "b", "q"), want);
    // The reader's cap and time range apply after the family's cap.
    let g = GetSpec {
        time_range: TimeRange { min: 0, max: 9 },
        max_versions: 1,
        ..GetSpec::new("r")
    };
    assert_eq!(versions_of(&m, g, "b", "q"), vs(&[(7, "v7")]));
}

/// Raw scans: a put that a marker not keeping deleted cells masks may show or not (a
/// flush may have dropped it), and with it or without it the rest of its column must agree;
/// everything else must show exactly.
#[test]
fn model_raw_scans_allow_masked_puts_to_be_dropped() {
    use basalt::{Cell, CellType};
    let mut m = Model::new(&descriptor());
    // Family a does not keep deleted cells; the reference guide's example.
    for ts in [10, 12, 14] {
        m.put(&PutSpec::new("r").cell("a", "q", ts, format!("v{ts}")));
    }
    m.delete(&DeleteSpec::new("r").column("a", "q", Some(11)));
    // Column qq: a version delete masks 12, which sits between two live versions.
    m.put(&PutSpec::new("r").cell("a", "qq", 12, "old write"));
    for ts in [10, 12, 14] {
        m.put(&PutSpec::new("r").cell("a", "qq", ts, format!("w{ts}")));
    }
    m.delete(&DeleteSpec::new("r").version("a", "qq", 12));
    let cell = |q: &str, ts: u64, kind: CellType, v: &str| Cell {
        row: b("r"),
        family: b("a"),
        qualifier: b(q),
        timestamp: ts,
        kind,
        value: b(v),
    };
    let (put, dc, d) = (CellType::Put, CellType::DeleteColumn, CellType::Delete);
    let check = |m: &Model, versions: u32, qualifier: &str, cells: Vec<Cell>| {
        let s = ScanSpec {
            raw: true,
            max_versions: versions,
            columns: vec![(b("a"), Some(b(qualifier)))],
            ..ScanSpec::default()
        };
        let got = vec![RowResult { row: b("r"), cells }];
        m.check_raw_scan(&s, &got, |_| false)
    };
    let q = |ts, kind, v| cell("q", ts, kind, v);
    // Before a flush, and after it dropped the masked put.
    check(
        &m,
        10,
        "q",
        vec![
            q(14, put, "v14"),
            q(12, put, "v12"),
            q(11, dc, ""),
            q(10, put, "v10"),
        ],
    )
    .unwrap();
    check(
        &m,
        10,
        "q",
        vec![q(14, put, "v14"), q(12, put, "v12"), q(11, dc, "")],
    )
    .unwrap();
    // Markers and unmasked puts always show; a marker is no version.
    check(&m, 10, "q", vec![q(14, put, "v14"), q(12, put, "v12")]).unwrap_err();
    check(
        &m,
        10,
        "q",
        vec![q(14, put, "v14"), q(11, dc, ""), q(10, put, "v10")],
    )
    .unwrap_err();
    check(
        &m,
        2,
        "q",
        vec![q(14, put, "v14"), q(12, put, "v12"), q(11, dc, "")],
    )
    .unwrap();
    check(&m, 1, "q", vec![q(14, put, "v14")]).unwrap();
    check(&m, 1, "q", vec![q(14, put, "v14"), q(12, put, "v12")]).unwrap_err();
    // A shown masked put counts: with two versions it ends the column before w10; dropped,
    // w10 shows instead; an older write of it may show in its place; neither is wrong.
    let qq = |ts, kind, v| cell("qq", ts, kind, v);
    check(
        &m,
        2,
        "qq",
        vec![qq(14, put, "w14"), qq(12, d, ""), qq(12, put, "w12")],
    )
    .unwrap();
    check(
        &m,
        2,
        "qq",
        vec![qq(14, put, "w14"), qq(12, d, ""), qq(10, put, "w10")],
    )
    .unwrap();
    check(
        &m,
        2,
        "qq",
        vec![qq(14, put, "w14"), qq(12, d, ""), qq(12, put, "old write")],
    )
    .unwrap();
    check(&m, 2, "qq", vec![qq(14, put, "w14"), qq(12, d, "")]).unwrap_err();
    check(
        &m,
        3,
        "qq",
        vec![qq(14, put, "w14"), qq(12, d, ""), qq(12, put, "w12")],
    )
    .unwrap_err();
    check(
        &m,
        2,
        "qq",
        vec![qq(14, put, "w14"), qq(12, d, ""), qq(12, put, "never")],
    )
    .unwrap_err();
    // After a major compaction the markers, the masked versions and the versions beyond
    // the family's one are gone for good.
    m.major_compact(common::model::wall_clock_ms());
    check(&m, 10, "q", vec![q(14, put, "v14")]).unwrap();
    check(&m, 10, "q", vec![q(14, put, "v14"), q(12, put, "v12")]).unwrap_err();
    check(&m, 10, "qq", vec![qq(14, put, "w14")]).unwrap();
    check(&m, 10, "qq", vec![qq(14, put, "w14"), qq(12, d, "")]).unwrap_err();
}

#[test]
fn model_family_markers_and_whole_row() {
    let mut m = Model::new(&descriptor());
    m.put(
        &PutSpec::new("r")
            .cell("b", "q", 7, "q7")
            .cell("b", "", 7, "e7")
            .cell("b", "q", 6, "q6")
            .cell("c", "q", 7, "c7"),
    );
    m.delete(&DeleteSpec::new("r").family_version("b", 7));
    assert_eq!(
        versions_of(&m, all_versions("r"), "b", "q"),
        vs(&[(6, "q6")])
    );
    assert_eq!(versions_of(&m, all_versions("r"), "b", ""), vs(&[]));
    assert_eq!(
        versions_of(&m, all_versions("r"), "c", "q"),
        vs(&[(7, "c7")])
    );
    // A whole-row delete at 6 masks every family up to 6.
    m.delete(&DeleteSpec::new("r").at(6));
    m.put(&PutSpec::new("r").cell("a", "q", 1, "late"));
    assert_eq!(
        versions_of(&m, all_versions("r"), "c", "q"),
        vs(&[(7, "c7")])
    );
    assert!(versions_of(&m, all_versions("r"), "b", "q").is_empty());
    assert!(versions_of(&m, all_versions("r"), "a", "q").is_empty());
}

#[test]
fn model_keep_deleted_cells_and_ttl() {
    let mut m = Model::new(&descriptor());
    for f in ["a", "b"] {
        m.put(&PutSpec::new("r").cell(f, "q", 4, "x"));
        m.delete(&DeleteSpec::new("r").at(6).column(f, "q", None));
    }
    let before_delete = GetSpec {
        time_range: TimeRange { min: 0, max: 5 },
        ..GetSpec::new("r")
    };
    // Only family b keeps deleted cells: a read ending before the marker ignores it.
    assert!(versions_of(&m, before_delete.clone(), "a", "q").is_empty());
    assert_eq!(versions_of(&m, before_delete, "b", "q"), vs(&[(4, "x")]));
    assert!(versions_of(&m, all_versions("r"), "b", "q").is_empty());
    // Family c: every tiny timestamp is past the TTL, so only the newest two (min
    // versions) unmasked versions remain, and a time range cannot reach older ones.
    for t in 1..=5 {
        m.put(&PutSpec::new("s").cell("c", "q", t, format!("v{t}")));
    }
    let want = vs(&[(5, "v5"), (4, "v4")]);
    assert_eq!(versions_of(&m, all_versions("s"), "c", "q"), want);
    let old = GetSpec {
        time_range: TimeRange { min: 1, max: 4 },
        max_versions: 10,
        ..GetSpec::new("s")
    };
    assert!(versions_of(&m, old, "c", "q").is_empty());
}

#[test]
fn model_delete_latest_version() {
    let mut m = Model::new(&descriptor());
    m.put(
        &PutSpec::new("r")
            .cell("a", "q", 3, "x3")
            .cell("a", "q", 6, "x6"),
    );
    assert_eq!(
        versions_of(&m, all_versions("r"), "a", "q"),
        vs(&[(6, "x6")])
    );
    // Family a keeps one version; deleting it shows the one below.
    m.delete(&DeleteSpec::new("r").latest("a", "q"));
    assert_eq!(
        versions_of(&m, all_versions("r"), "a", "q"),
        vs(&[(3, "x3")])
    );
    m.delete(&DeleteSpec::new("r").latest("a", "q"));
    assert!(versions_of(&m, all_versions("r"), "a", "q").is_empty());
    // Nothing left: a no-op, so a later put at any timestamp not masked shows.
    m.delete(&DeleteSpec::new("r").latest("a", "q"));
    m.put(
        &PutSpec::new("r")
            .cell("a", "q", 6, "again")
            .cell("a", "q", 9, "x9"),
    );
    assert_eq!(
        versions_of(&m, all_versions("r"), "a", "q"),
        vs(&[(9, "x9")])
    );
    m.delete(&DeleteSpec::new("r").version("a", "q", 9));
    assert!(versions_of(&m, all_versions("r"), "a", "q").is_empty());
    // Repeated in one delete, the n-th marker takes the n-th newest version.
    m.put(
        &PutSpec::new("s")
            .cell("b", "q", 1, "s1")
            .cell("b", "q", 2, "s2"),
    );
    m.put(&PutSpec::new("s").cell("b", "q", 3, "s3"));
    m.delete(&DeleteSpec::new("s").latest("b", "q").latest("b", "q"));
    assert_eq!(
        versions_of(&m, all_versions("s"), "b", "q"),
        vs(&[(1, "s1")])
    );
    // With a delete timestamp, "latest" means the version at that timestamp.
    m.put(
        &PutSpec::new("r")
            .cell("b", "q", 4, "b4")
            .cell("b", "q", 5, "b5"),
    );
    m.delete(&DeleteSpec::new("r").at(4).latest("b", "q"));
    assert_eq!(
        versions_of(&m, all_versions("r"), "b", "q"),
        vs(&[(5, "b5")])
    );
}

#[test]
fn model_scan_conventions() {
    let mut m = Model::new(&descriptor());
    for r in ["a", "ab", "b", "ba", "c"] {
        m.put(&PutSpec::new(r).cell("a", "q", 1, r).cell("b", "q", 1, r));
    }
    let rows = |s: ScanSpec| -> Vec<String> {
        m.scan(&s)
            .iter()
            .map(|r| String::from_utf8_lossy(&r.row).into_owned())
            .collect()
    };
    let fwd = ScanSpec {
        start: Some(b("ab")),
        stop: Some(b("ba")),
        ..ScanSpec::default()
    };
    assert_eq!(rows(fwd), ["ab", "b"]);
    let rev = ScanSpec {
        start: Some(b("ba")),
        stop: Some(b("ab")),
        reverse: true,
        ..ScanSpec::default()
    };
    assert_eq!(rows(rev), ["ba", "b"]);
    let prefix = ScanSpec {
        prefix: Some(b("a")),
        start: Some(b("zz")),
        reverse: true,
        ..ScanSpec::default()
    };
    assert_eq!(rows(prefix), ["ab", "a"]);
    // The limit counts rows; a batch splits each row's two cells into two results.
    let batched = ScanSpec {
        limit: Some(2),
        batch: Some(1),
        ..ScanSpec::default()
    };
    assert_eq!(rows(batched), ["a", "a", "ab", "ab"]);
}

/// The reference guide's examples of what major compaction removes, in the model, then the
/// same sequence against the engine.
#[test]
fn model_major_compaction_changes_later_results() {
    let mut m = Model::new(&descriptor());
    // "Major compactions change query results": family c keeps four versions; at t1..t5,
    // deleting t5 lets t1 reappear - until a major compaction has dropped t1. (Every small
    // timestamp is expired, and c keeps two min versions, so compaction keeps 5 and 4.)
    for t in 1..=5 {
        for row in ["x", "y"] {
            m.put(&PutSpec::new(row).cell("a", "q", t, format!("v{t}")));
            m.put(&PutSpec::new(row).cell("b", "q", t, format!("v{t}")));
        }
    }
    m.delete(&DeleteSpec::new("x").version("b", "q", 5));
    let want = vs(&[(4, "v4"), (3, "v3"), (2, "v2")]);
    assert_eq!(versions_of(&m, all_versions("x"), "b", "q"), want);
    // Family a keeps one version: deleting it before a compaction uncovers the next one.
    m.delete(&DeleteSpec::new("x").version("a", "q", 5));
    assert_eq!(
        versions_of(&m, all_versions("x"), "a", "q"),
        vs(&[(4, "v4")])
    );
    m.major_compact(common::model::wall_clock_ms());
    m.delete(&DeleteSpec::new("y").version("a", "q", 5));
    assert!(versions_of(&m, all_versions("y"), "a", "q").is_empty());
    // Family b keeps deleted cells: the marker and the deleted version stay, so a time
    // range that ends before the marker still counts t5 among the three versions kept.
    let upto5 = GetSpec {
        time_range: TimeRange { min: 0, max: 5 },
        max_versions: 10,
        ..GetSpec::new("x")
    };
    assert_eq!(
        versions_of(&m, upto5, "b", "q"),
        vs(&[(4, "v4"), (3, "v3")])
    );
    m.delete(&DeleteSpec::new("y").version("b", "q", 5));
    let want = vs(&[(4, "v4"), (3, "v3")]);
    assert_eq!(versions_of(&m, all_versions("y"), "b", "q"), want);
    // "Deletes mask puts": a later put below a marker stays masked, unless a major
    // compaction dropped the marker first (family a does not keep deleted cells).
    m.delete(&DeleteSpec::new("z").at(50).column("a", "q", None));
    m.put(&PutSpec::new("z").cell("a", "q", 7, "masked"));
    assert!(versions_of(&m, all_versions("z"), "a", "q").is_empty());
    m.delete(&DeleteSpec::new("w").at(50).column("a", "q", None));
    m.major_compact(common::model::wall_clock_ms());
    m.put(&PutSpec::new("w").cell("a", "q", 7, "visible"));
    assert_eq!(
        versions_of(&m, all_versions("w"), "a", "q"),
        vs(&[(7, "visible")])
    );
}

/// The examples above as an engine case, with compactions and a reopen in between.
#[test]
fn major_compaction_fixed_sequence() {
    let mut ops = Vec::new();
    for t in 1..=5 {
        for row in ["x", "y"] {
            ops.push(Op::Put(
                PutSpec::new(row)
                    .cell("a", "q", t, format!("a{t}"))
                    .cell("b", "q", t, format!("b{t}"))
                    .cell("c", "q", t, format!("c{t}")),
            ));
        }
        ops.push(Op::Flush);
    }
    ops.push(Op::Compact);
    ops.push(Op::Delete(DeleteSpec::new("x").version("b", "q", 5)));
    ops.push(Op::Delete(DeleteSpec::new("x").version("c", "q", 5)));
    ops.push(full_get("x"));
    ops.push(Op::MajorCompact);
    ops.push(Op::Delete(DeleteSpec::new("y").version("a", "q", 5)));
    ops.push(Op::Delete(DeleteSpec::new("y").version("b", "q", 5)));
    ops.push(Op::Delete(
        DeleteSpec::new("w").at(50).column("a", "q", None),
    ));
    ops.push(Op::MajorCompact);
    ops.push(Op::Put(PutSpec::new("w").cell("a", "q", 7, "visible")));
    ops.push(full_get("x"));
    ops.push(full_get("y"));
    ops.push(full_get("w"));
    ops.push(Op::Reopen {
        crash: true,
        flush_size: None,
    });
    check(&["b"], ops);
}

/// Found on the object store: a purge after a takeover removed the WAL segments of an
/// earlier writer by id, and with them from the engine's list the new writer's segment of
/// the same id, which was then never purged while later ones were: a gap in its chain
/// failed the next open.
#[test]
fn a_split_after_a_takeover_then_a_clean_reopen() {
    check(
        &["b"],
        vec![
            Op::Put(PutSpec::new("b").cell("a", "", 0, "v0.0")),
            Op::Reopen {
                crash: true,
                flush_size: None,
            },
            Op::Split {
                row: Some(b"b\xff"),
                index: 0,
            },
            Op::Put(PutSpec::new("a").cell("a", "", 0, "v3.0")),
            Op::Reopen {
                crash: false,
                flush_size: None,
            },
            full_get("a"),
            full_get("b"),
        ],
    );
}
