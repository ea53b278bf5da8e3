//! Lifecycle coprocessor hooks: region open and close around create, split, merge, disable,
//! enable, close and reopen; scanner hooks (scan rewrite, batch filtering, close on early
//! drop); flush hooks; compaction selection and a cell-dropping transform checked by reads
//! after a major compaction; split veto; WAL-restore hooks after a crash (drop without
//! close) and reopen; engine-wide table observers (veto of create) and WAL observers (every
//! append, rolls); system-wide observers on a new table; failure policies on lifecycle hooks.
//!
//! Each test opens a fresh engine in its own temporary directory with a `Registry` as the
//! coprocessor loader.

use async_trait::async_trait;
use basalt::client::{Get, Put, RowResult, Scan};
use basalt::coprocessors::{
    CellTransform, CompactionRequest, CompactionSelection, EngineObserverHost, ObserverContext,
    RegionObserver, Registry, TableObserver, WalObserver,
};
use basalt::CompactionKind;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Error, FailurePolicy,
    PreSplit, RegionInfo, TableDescriptor, TableName,
};
use basalt::{WalEdit, WalRecord};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Log = Arc<Mutex<Vec<String>>>;

fn tn(s: &str) -> TableName {
    TableName::parse(s).unwrap()
}

fn desc(name: &str) -> TableDescriptor {
    TableDescriptor::new(tn(name))
        .family(ColumnFamilyDescriptor::new("f"))
        .compaction_files(10, 10)
}

fn with_cp(d: TableDescriptor, name: &str) -> TableDescriptor {
    d.coprocessor(CoprocessorDescriptor::new(name))
}

fn config(dir: &std::path::Path, reg: &Arc<Registry>) -> Config {
    Config::new(dir).coprocessor_loader(reg.clone())
}

async fn open_with(config: Config) -> Connection {
    Connection::open_with(config).await.unwrap()
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn note(log: &Log, s: String) {
    log.lock().unwrap().push(s);
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn put(row: &str, v: &str) -> Put {
    Put::new(row).add_column("f", "q", v)
}

async fn scan_rows(t: &basalt::Table, scan: Scan) -> Vec<String> {
    let rows: Vec<RowResult> = t.scan(scan).unwrap().try_collect().await.unwrap();
    rows.iter().map(|r| s(&r.row)).collect()
}

/// Polls `cond` until it holds, for at most thirty seconds (what it waits for is background
/// work, which a slow, loaded machine may not schedule for a while).
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn register<O: RegionObserver + 'static>(
    reg: &Registry,
    name: &str,
    make: impl Fn() -> O + Send + Sync + 'static,
) {
    reg.register(name, move |_| {
        Ok(Arc::new(make()) as Arc<dyn RegionObserver>)
    })
    .unwrap();
}

/// Records the open, close and split hooks with the region ids.
struct Life {
    log: Log,
    /// Prefixes each entry unless it is `life` (two registrations of one observer).
    tag: String,
}

impl Life {
    fn note(&self, entry: String) {
        match self.tag.as_str() {
            "life" => note(&self.log, entry),
            tag => note(&self.log, format!("{tag}:{entry}")),
        }
    }
}

#[async_trait]
impl RegionObserver for Life {
    async fn post_open(&self, ctx: &mut ObserverContext<'_>) -> basalt::Result<()> {
        // The region is readable when it is announced.
        ctx.get(&Get::new("probe"))?;
        self.note(format!("post_open({})", ctx.region_id()));
        Ok(())
    }
    async fn pre_close(&self, ctx: &mut ObserverContext<'_>) -> basalt::Result<()> {
        self.note(format!("pre_close({})", ctx.region_id()));
        Ok(())
    }
    async fn post_close(&self, ctx: &mut ObserverContext<'_>) -> basalt::Result<()> {
        self.note(format!("post_close({})", ctx.region_id()));
        Ok(())
    }
    async fn pre_split(&self, ctx: &mut ObserverContext<'_>, row: &Bytes) -> basalt::Result<()> {
        self.note(format!("pre_split({},{})", ctx.region_id(), s(row)));
        Ok(())
    }
    async fn post_split(
        &self,
        ctx: &mut ObserverContext<'_>,
        lower: &RegionInfo,
        upper: &RegionInfo,
    ) -> basalt::Result<()> {
        assert_eq!(lower.end_key, upper.start_key);
        self.note(format!(
            "post_split({},{},{})",
            ctx.region_id(),
            lower.id,
            upper.id
        ));
        Ok(())
    }
}

#[tokio::test]
async fn open_and_close_hooks_around_create_split_merge_disable_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let l = log.clone();
    register(&reg, "life", move || Life {
        log: l.clone(),
        tag: "life".into(),
    });
    let conn = open_with(config(dir.path(), &reg)).await;
    let admin = conn.admin();
    admin
        .create_table(with_cp(desc("t"), "life"))
        .await
        .unwrap();
    let r0 = admin.regions(&tn("t")).await.unwrap()[0].id;
    assert_eq!(take(&log), [format!("post_open({r0})")]);

    let t = conn.table("t").unwrap();
    for i in 0..20 {
        t.put(put(&format!("r{i:02}"), "v")).await.unwrap();
    }
    let (lo, hi) = admin
        .split_region(&tn("t"), r0, Some(b"r10"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        take(&log),
        [
            format!("pre_split({r0},r10)"),
            format!("pre_close({r0})"),
            format!("post_close({r0})"),
            format!("post_open({lo})"),
            format!("post_open({hi})"),
            format!("post_split({r0},{lo},{hi})"),
        ]
    );
    let merged = admin.merge_regions(&tn("t"), hi, lo).await.unwrap();
    assert_eq!(
        take(&log),
        [
            format!("pre_close({lo})"),
            format!("pre_close({hi})"),
            format!("post_close({lo})"),
            format!("post_close({hi})"),
            format!("post_open({merged})"),
        ]
    );
    assert_eq!(scan_rows(&t, Scan::new()).await.len(), 20);

    admin.disable_table(&tn("t")).await.unwrap();
    assert_eq!(
        take(&log),
        [
            format!("pre_close({merged})"),
            format!("post_close({merged})")
        ]
    );
    admin.enable_table(&tn("t")).await.unwrap();
    assert_eq!(take(&log), [format!("post_open({merged})")]);
    conn.close().await.unwrap();
    assert_eq!(
        take(&log),
        [
            format!("pre_close({merged})"),
            format!("post_close({merged})")
        ]
    );
    drop(conn);
    let conn = open_with(config(dir.path(), &reg)).await;
    assert_eq!(take(&log), [format!("post_open({merged})")]);
    assert_eq!(
        scan_rows(&conn.table("t").unwrap(), Scan::new())
            .await
            .len(),
        20
    );
}

/// Adding, removing or replacing a table's coprocessors reopens its regions as far as the
/// hooks can tell: the old chain closes every region, the new chain opens every region; a
/// disabled table's list changes without hooks, and its enable opens the new chain.
#[tokio::test]
async fn a_coprocessor_list_change_closes_the_old_chain_and_opens_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    for name in ["life", "life2"] {
        let l = log.clone();
        let tag = name.to_string();
        register(&reg, name, move || Life {
            log: l.clone(),
            tag: tag.clone(),
        });
    }
    let conn = open_with(config(dir.path(), &reg)).await;
    let admin = conn.admin();
    admin
        .create_table_with_splits(desc("t"), PreSplit::Keys(vec![b"m".to_vec()]))
        .await
        .unwrap();
    let ids: Vec<u64> = admin
        .regions(&tn("t"))
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    let each = |what: &str| -> Vec<String> { ids.iter().map(|r| format!("{what}({r})")).collect() };
    assert!(take(&log).is_empty());

    // Added to a table without coprocessors: only the new chain's opens.
    admin
        .add_coprocessor(&tn("t"), CoprocessorDescriptor::new("life"))
        .await
        .unwrap();
    assert_eq!(take(&log), each("post_open"));

    // A second one: the old chain (life) closes, the new one (life, life2) opens.
    admin
        .add_coprocessor(&tn("t"), CoprocessorDescriptor::new("life2"))
        .await
        .unwrap();
    let mut want = each("pre_close");
    want.extend(each("post_close"));
    for r in &ids {
        want.push(format!("post_open({r})"));
        want.push(format!("life2:post_open({r})"));
    }
    assert_eq!(take(&log), want);

    // Removed: the old chain (both) closes, the new one (life2) opens.
    admin.remove_coprocessor(&tn("t"), "life").await.unwrap();
    let mut want = Vec::new();
    for r in &ids {
        want.push(format!("pre_close({r})"));
        want.push(format!("life2:pre_close({r})"));
    }
    for r in &ids {
        want.push(format!("post_close({r})"));
        want.push(format!("life2:post_close({r})"));
    }
    want.extend(ids.iter().map(|r| format!("life2:post_open({r})")));
    assert_eq!(take(&log), want);

    // A list that cannot load changes nothing and runs no hook.
    let err = admin
        .add_coprocessor(&tn("t"), CoprocessorDescriptor::new("unregistered"))
        .await;
    assert!(err.is_err());
    assert!(take(&log).is_empty());

    // Disabled: the change runs no hook (the regions are closed); enable opens the new chain.
    admin.disable_table(&tn("t")).await.unwrap();
    take(&log);
    admin
        .set_coprocessors(&tn("t"), vec![CoprocessorDescriptor::new("life")])
        .await
        .unwrap();
    assert!(take(&log).is_empty());
    admin.enable_table(&tn("t")).await.unwrap();
    assert_eq!(take(&log), each("post_open"));

    // Cleared: the old chain closes, nothing opens; writes go on without hooks.
    admin.set_coprocessors(&tn("t"), Vec::new()).await.unwrap();
    let mut want = each("pre_close");
    want.extend(each("post_close"));
    assert_eq!(take(&log), want);
    let t = conn.table("t").unwrap();
    t.put(put("a", "v")).await.unwrap();
    assert!(take(&log).is_empty());
    conn.close().await.unwrap();
}

/// Scanner hooks: starts the first scan at r10, drops rows whose number is odd,
/// records each batch's region and the opens and closes.
struct Scanner {
    log: Log,
    opens: Arc<AtomicUsize>,
    closes: Arc<AtomicUsize>,
}

#[async_trait]
impl RegionObserver for Scanner {
    async fn pre_scanner_open(
        &self,
        _ctx: &mut ObserverContext<'_>,
        scan: &mut Scan,
    ) -> basalt::Result<()> {
        // The first scan is moved to start at r10.
        if self.opens.fetch_add(1, Ordering::SeqCst) == 0 {
            *scan = scan.clone().start_row("r10");
        }
        Ok(())
    }
    async fn post_scanner_next(
        &self,
        ctx: &mut ObserverContext<'_>,
        rows: &mut Vec<RowResult>,
    ) -> basalt::Result<()> {
        for r in rows.iter() {
            // Every row of a batch lies in the batch's region.
            assert!(r.row.as_ref() >= ctx.region_start().as_ref());
            assert!(ctx.region_end().is_empty() || r.row.as_ref() < ctx.region_end().as_ref());
        }
        note(
            &self.log,
            format!("batch({},{})", ctx.region_id(), rows.len()),
        );
        rows.retain(|r| r.row.last().is_some_and(|d| d % 2 == 0));
        Ok(())
    }
    async fn post_scanner_close(&self, _ctx: &mut ObserverContext<'_>) -> basalt::Result<()> {
        self.closes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn scanner_hooks_rewrite_the_scan_filter_batches_and_always_close() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let opens = Arc::new(AtomicUsize::new(0));
    let closes = Arc::new(AtomicUsize::new(0));
    let (l, o, c) = (log.clone(), opens.clone(), closes.clone());
    register(&reg, "scanner", move || Scanner {
        log: l.clone(),
        opens: o.clone(),
        closes: c.clone(),
    });
    let conn = open_with(config(dir.path(), &reg)).await;
    let admin = conn.admin();
    admin
        .create_table_with_splits(
            with_cp(desc("t"), "scanner"),
            PreSplit::Keys(vec![b"r50".to_vec()]),
        )
        .await
        .unwrap();
    admin.create_table(desc("plain")).await.unwrap();
    let t = conn.table("t").unwrap();
    let plain = conn.table("plain").unwrap();
    for i in 0..100 {
        t.put(put(&format!("r{i:02}"), "v")).await.unwrap();
        plain.put(put(&format!("r{i:02}"), "v")).await.unwrap();
    }
    let regions = admin.regions(&tn("t")).await.unwrap();

    // The hook moved the start to r10 and dropped odd rows; one batch per region.
    let rows = scan_rows(&t, Scan::new()).await;
    let want: Vec<String> = (10..100).step_by(2).map(|i| format!("r{i:02}")).collect();
    assert_eq!(rows, want);
    assert_eq!(
        take(&log),
        [
            format!("batch({},40)", regions[0].id),
            format!("batch({},50)", regions[1].id)
        ]
    );
    assert_eq!(opens.load(Ordering::SeqCst), 1);
    assert_eq!(
        closes.load(Ordering::SeqCst),
        1,
        "closed when the stream ended"
    );

    // Dropped after one row: the close hook still runs, once.
    let mut stream = t.scan(Scan::new().start_row("r60")).unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(s(&first.row), "r60");
    drop(stream);
    eventually("the close hook of a dropped scan", || {
        closes.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(opens.load(Ordering::SeqCst), 2);

    // A table without the coprocessor is scanned as it is.
    assert_eq!(scan_rows(&plain, Scan::new()).await.len(), 100);
    assert_eq!(opens.load(Ordering::SeqCst), 2);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(closes.load(Ordering::SeqCst), 2, "never closed twice");
}

/// Flush hooks: records the family and, after the flush, the region's file count and
/// MemStore size.
struct Flushes {
    log: Log,
    post: PostFlush,
}

/// What [`Flushes::post_flush`] does after logging.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PostFlush {
    Fine,
    Panic,
    Fail,
}

#[async_trait]
impl RegionObserver for Flushes {
    async fn pre_flush(
        &self,
        _ctx: &mut ObserverContext<'_>,
        family: &Bytes,
    ) -> basalt::Result<()> {
        note(&self.log, format!("pre_flush({})", s(family)));
        Ok(())
    }
    async fn post_flush(
        &self,
        ctx: &mut ObserverContext<'_>,
        family: &Bytes,
    ) -> basalt::Result<()> {
        let info = ctx.region_info();
        note(
            &self.log,
            format!("post_flush({},{})", s(family), info.store_files),
        );
        match self.post {
            PostFlush::Fine => Ok(()),
            PostFlush::Panic => panic!("post_flush bug"),
            PostFlush::Fail => Err(basalt::Error::bad_argument("post_flush says no")),
        }
    }
}

#[tokio::test]
async fn flush_hooks_run_per_store_with_cells() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let l = log.clone();
    register(&reg, "flushes", move || Flushes {
        log: l.clone(),
        post: PostFlush::Fine,
    });
    let conn = open_with(config(dir.path(), &reg)).await;
    let admin = conn.admin();
    admin
        .create_table(with_cp(
            desc("t").family(ColumnFamilyDescriptor::new("g")),
            "flushes",
        ))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    t.put(put("a", "1")).await.unwrap();
    admin.flush(&tn("t")).await.unwrap();
    // Only the family with cells; after the flush its file exists.
    assert_eq!(take(&log), ["pre_flush(f)", "post_flush(f,1)"]);
    admin.flush(&tn("t")).await.unwrap();
    assert!(take(&log).is_empty(), "nothing to flush, no hook");
    t.put(put("b", "1").add_column("g", "q", "2"))
        .await
        .unwrap();
    admin.flush(&tn("t")).await.unwrap();
    assert_eq!(
        take(&log),
        [
            "pre_flush(f)",
            "pre_flush(g)",
            "post_flush(f,3)",
            "post_flush(g,3)"
        ]
    );
}

/// A post_flush that panics or errs under each policy: the flush is done either way and
/// the engine goes on. A panic is a fault (under `Unload` the coprocessor is unloaded); an
/// error is a refusal, logged by the engine, that never unloads.
async fn post_flush_failure(post: PostFlush) {
    for policy in [FailurePolicy::FailOperation, FailurePolicy::Unload] {
        let dir = tempfile::tempdir().unwrap();
        let reg = Arc::new(Registry::new());
        let log: Log = Arc::default();
        let l = log.clone();
        register(&reg, "flushes", move || Flushes {
            log: l.clone(),
            post,
        });
        let conn = open_with(config(dir.path(), &reg)).await;
        let admin = conn.admin();
        admin
            .create_table(
                desc("t").coprocessor(CoprocessorDescriptor::new("flushes").policy(policy)),
            )
            .await
            .unwrap();
        let t = conn.table("t").unwrap();
        t.put(put("a", "1")).await.unwrap();
        admin.flush(&tn("t")).await.unwrap();
        let info = &admin.regions(&tn("t")).await.unwrap()[0];
        assert_eq!(info.store_files, 1, "{policy:?}");
        assert_eq!(info.memstore_size, 0, "{policy:?}");
        // The engine goes on.
        t.put(put("b", "2")).await.unwrap();
        assert_eq!(scan_rows(&t, Scan::new()).await, ["a", "b"]);
        admin.flush(&tn("t")).await.unwrap();
        let m = reg.metrics(&tn("t"));
        let unloads = post == PostFlush::Panic && policy == FailurePolicy::Unload;
        if post == PostFlush::Panic {
            assert!(m[0].panics >= 1, "{policy:?}: {m:?}");
            assert_eq!(m[0].faults, m[0].panics, "{policy:?}: {m:?}");
            assert_eq!(m[0].refusals, 0, "{policy:?}: {m:?}");
        } else {
            assert_eq!((m[0].refusals, m[0].faults), (2, 0), "{policy:?}: {m:?}");
        }
        assert_eq!(m[0].loaded, !unloads, "{policy:?}: {m:?}");
        // Once unloaded the second flush no longer calls it.
        let calls = log
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.starts_with("post_flush"))
            .count();
        let want = if unloads { 1 } else { 2 };
        assert_eq!(calls, want, "{policy:?}");
        conn.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_panicking_post_flush_leaves_data_flushed_and_the_engine_usable() {
    post_flush_failure(PostFlush::Panic).await;
}

#[tokio::test]
async fn an_erring_post_flush_leaves_data_flushed_and_its_coprocessor_loaded() {
    post_flush_failure(PostFlush::Fail).await;
}

/// Drops the cells of rows starting with `drop` and upper-cases the values of rows starting
/// with `up`.
struct DropAndUpper;

impl CellTransform for DropAndUpper {
    fn transform(&self, _family: &Bytes, key: &basalt::cell::StoreKey, value: &mut Bytes) -> bool {
        if key.row.starts_with(b"drop") {
            return false;
        }
        if key.row.starts_with(b"up") {
            *value = Bytes::from(value.to_ascii_uppercase());
        }
        true
    }
}

/// Shrinks the first selection it sees to its two newest files; transforms major
/// compactions with [`DropAndUpper`].
struct Compactions {
    log: Log,
    shrink: AtomicBool,
}

#[async_trait]
impl RegionObserver for Compactions {
    async fn pre_compact_selection(
        &self,
        _ctx: &mut ObserverContext<'_>,
        selection: &mut CompactionSelection,
    ) -> basalt::Result<()> {
        note(
            &self.log,
            format!("select({:?},{})", selection.kind, selection.files.len()),
        );
        if self.shrink.swap(false, Ordering::SeqCst) {
            selection.files.truncate(2);
        }
        Ok(())
    }
    async fn post_compact_selection(
        &self,
        _ctx: &mut ObserverContext<'_>,
        selection: &CompactionSelection,
    ) -> basalt::Result<()> {
        note(
            &self.log,
            format!("selected({:?},{})", selection.kind, selection.files.len()),
        );
        Ok(())
    }
    async fn pre_compact(
        &self,
        _ctx: &mut ObserverContext<'_>,
        request: &mut CompactionRequest,
    ) -> basalt::Result<()> {
        if request.kind() == CompactionKind::Major {
            request.add_transform(Arc::new(DropAndUpper));
        }
        Ok(())
    }
    async fn post_compact(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _family: &Bytes,
        outcome: &basalt::CompactionOutcome,
    ) -> basalt::Result<()> {
        note(
            &self.log,
            format!("compacted({},{})", outcome.files_in, outcome.cells_dropped),
        );
        Ok(())
    }
}

#[tokio::test]
async fn compaction_hooks_shrink_the_selection_and_drop_cells_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let l = log.clone();
    register(&reg, "compactions", move || Compactions {
        log: l.clone(),
        shrink: AtomicBool::new(true),
    });
    let conn = open_with(config(dir.path(), &reg)).await;
    let admin = conn.admin();
    admin
        .create_table(with_cp(desc("t"), "compactions"))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    for round in 0..4 {
        t.put(put(&format!("keep{round}"), "v")).await.unwrap();
        t.put(put(&format!("drop{round}"), "v")).await.unwrap();
        t.put(put(&format!("up{round}"), "abc")).await.unwrap();
        admin.flush(&tn("t")).await.unwrap();
    }
    let files = |conn: &Connection| {
        let conn = conn.clone();
        async move { conn.admin().regions(&tn("t")).await.unwrap()[0].store_files }
    };
    assert_eq!(files(&conn).await, 4);

    // First major compaction: the hook keeps two of four files, so it runs as a minor one
    // (no transform) and leaves three files.
    admin.major_compact(&tn("t")).await.unwrap();
    assert_eq!(
        take(&log),
        ["select(Major,4)", "selected(Minor,2)", "compacted(2,0)"]
    );
    assert_eq!(files(&conn).await, 3);
    assert!(t.exists(Get::new("drop0")).await.unwrap());

    // Second: every file, with the transform.
    admin.major_compact(&tn("t")).await.unwrap();
    assert_eq!(
        take(&log),
        ["select(Major,3)", "selected(Major,3)", "compacted(3,4)"]
    );
    assert_eq!(files(&conn).await, 1);
    let rows = scan_rows(&t, Scan::new()).await;
    assert_eq!(
        rows,
        ["keep0", "keep1", "keep2", "keep3", "up0", "up1", "up2", "up3"]
    );
    let up = t.get(Get::new("up2")).await.unwrap();
    assert_eq!(up.value("f", "q").map(|v| v.as_ref()), Some(&b"ABC"[..]));
    // The files on disk hold the result: it survives a reopen.
    conn.close().await.unwrap();
    drop((t, conn));
    let conn = open_with(config(dir.path(), &reg)).await;
    let t = conn.table("t").unwrap();
    assert!(!t.exists(Get::new("drop3")).await.unwrap());
    assert_eq!(scan_rows(&t, Scan::new()).await.len(), 8);
}

/// Vetoes splits at any row but `ok`.
struct Veto {
    log: Log,
}

#[async_trait]
impl RegionObserver for Veto {
    async fn pre_split(&self, ctx: &mut ObserverContext<'_>, row: &Bytes) -> basalt::Result<()> {
        if row.as_ref() != b"ok" {
            ctx.bypass();
        }
        Ok(())
    }
    async fn pre_close(&self, _ctx: &mut ObserverContext<'_>) -> basalt::Result<()> {
        note(&self.log, "pre_close".into());
        Ok(())
    }
    async fn post_split(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _: &RegionInfo,
        _: &RegionInfo,
    ) -> basalt::Result<()> {
        note(&self.log, "post_split".into());
        Ok(())
    }
}

#[tokio::test]
async fn a_vetoed_split_leaves_the_region_whole() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let l = log.clone();
    register(&reg, "veto", move || Veto { log: l.clone() });
    let conn = open_with(config(dir.path(), &reg)).await;
    let admin = conn.admin();
    admin
        .create_table(with_cp(desc("t"), "veto"))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    for r in ["a", "m", "ok", "z"] {
        t.put(put(r, "v")).await.unwrap();
    }
    let r0 = admin.regions(&tn("t")).await.unwrap()[0].id;
    assert_eq!(
        admin.split_region(&tn("t"), r0, Some(b"m")).await.unwrap(),
        None
    );
    let regions = admin.regions(&tn("t")).await.unwrap();
    assert_eq!(regions.len(), 1);
    assert_eq!(regions[0].id, r0);
    assert!(take(&log).is_empty(), "no close, no post_split");
    // The region still takes writes and reads.
    t.put(put("b", "v")).await.unwrap();
    assert_eq!(scan_rows(&t, Scan::new()).await, ["a", "b", "m", "ok", "z"]);
    // A split the hook allows goes through.
    let (lo, hi) = admin
        .split_region(&tn("t"), r0, Some(b"ok"))
        .await
        .unwrap()
        .unwrap();
    assert!(lo != hi);
    assert_eq!(take(&log), ["pre_close", "post_split"]);
    assert_eq!(admin.regions(&tn("t")).await.unwrap().len(), 2);
}

/// Records replayed WAL records; skips those holding a row starting with `skip`.
struct Restore {
    log: Log,
}

#[async_trait]
impl RegionObserver for Restore {
    async fn pre_wal_restore(
        &self,
        ctx: &mut ObserverContext<'_>,
        seq: u64,
        edits: &[WalEdit],
    ) -> basalt::Result<()> {
        assert!(edits.iter().all(|e| e.cell.key.seq == seq));
        let rows: Vec<String> = edits.iter().map(|e| s(&e.cell.key.row)).collect();
        note(&self.log, format!("pre({})", rows.join(",")));
        if rows.iter().any(|r| r.starts_with("skip")) {
            ctx.bypass();
        }
        Ok(())
    }
    async fn post_wal_restore(
        &self,
        ctx: &mut ObserverContext<'_>,
        _seq: u64,
        edits: &[WalEdit],
    ) -> basalt::Result<()> {
        // The edits are readable when the post hook runs.
        for e in edits {
            let row = ctx.get(&Get::new(e.cell.key.row.clone()))?;
            assert!(!row.is_empty());
        }
        let rows: Vec<String> = edits.iter().map(|e| s(&e.cell.key.row)).collect();
        note(&self.log, format!("post({})", rows.join(",")));
        Ok(())
    }
    async fn post_open(&self, _ctx: &mut ObserverContext<'_>) -> basalt::Result<()> {
        note(&self.log, "post_open".into());
        Ok(())
    }
}

#[tokio::test]
async fn wal_restore_hooks_see_the_replayed_edits_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let l = log.clone();
    register(&reg, "restore", move || Restore { log: l.clone() });
    let conn = open_with(config(dir.path(), &reg)).await;
    let admin = conn.admin();
    admin
        .create_table(with_cp(desc("t"), "restore"))
        .await
        .unwrap();
    admin.create_table(desc("plain")).await.unwrap();
    let t = conn.table("t").unwrap();
    t.put(put("flushed", "v")).await.unwrap();
    admin.flush(&tn("t")).await.unwrap();
    t.put(put("a", "v")).await.unwrap();
    t.put(put("skip1", "v")).await.unwrap();
    t.put(put("b", "v")).await.unwrap();
    conn.table("plain")
        .unwrap()
        .put(put("p", "v"))
        .await
        .unwrap();
    take(&log);
    // A crash: no close, nothing flushed.
    drop((t, admin, conn));
    let conn = open_with(config(dir.path(), &reg)).await;
    // Only the unflushed edits of the hooked table, in order, then the open.
    assert_eq!(
        take(&log),
        [
            "pre(a)",
            "post(a)",
            "pre(skip1)",
            "pre(b)",
            "post(b)",
            "post_open"
        ]
    );
    let t = conn.table("t").unwrap();
    assert_eq!(scan_rows(&t, Scan::new()).await, ["a", "b", "flushed"]);
    assert!(conn
        .table("plain")
        .unwrap()
        .exists(Get::new("p"))
        .await
        .unwrap());
}

/// Records table operations; vetoes creating tables named `forbidden`.
struct Tables {
    log: Log,
}

#[async_trait]
impl TableObserver for Tables {
    async fn pre_create_table(&self, desc: &TableDescriptor) -> basalt::Result<()> {
        note(&self.log, format!("pre_create({})", desc.name));
        if desc.name == tn("forbidden") {
            return Err(Error::bad_argument("no such tables"));
        }
        Ok(())
    }
    async fn post_create_table(&self, desc: &TableDescriptor) -> basalt::Result<()> {
        note(&self.log, format!("post_create({})", desc.name));
        Ok(())
    }
    async fn pre_disable_table(&self, name: &TableName) -> basalt::Result<()> {
        note(&self.log, format!("pre_disable({name})"));
        Ok(())
    }
    async fn post_disable_table(&self, name: &TableName) -> basalt::Result<()> {
        note(&self.log, format!("post_disable({name})"));
        Ok(())
    }
    async fn pre_enable_table(&self, name: &TableName) -> basalt::Result<()> {
        note(&self.log, format!("pre_enable({name})"));
        Ok(())
    }
    async fn post_enable_table(&self, name: &TableName) -> basalt::Result<()> {
        note(&self.log, format!("post_enable({name})"));
        Ok(())
    }
    async fn pre_delete_table(&self, name: &TableName) -> basalt::Result<()> {
        note(&self.log, format!("pre_delete({name})"));
        Ok(())
    }
    async fn post_delete_table(&self, name: &TableName) -> basalt::Result<()> {
        note(&self.log, format!("post_delete({name})"));
        Ok(())
    }
    async fn pre_modify_table(
        &self,
        old: &TableDescriptor,
        new: &TableDescriptor,
    ) -> basalt::Result<()> {
        note(
            &self.log,
            format!("pre_modify({},{})", old.families.len(), new.families.len()),
        );
        if new.families.len() > 2 {
            return Err(Error::bad_argument("at most two families"));
        }
        Ok(())
    }
    async fn post_modify_table(
        &self,
        old: &TableDescriptor,
        new: &TableDescriptor,
    ) -> basalt::Result<()> {
        note(
            &self.log,
            format!("post_modify({},{})", old.families.len(), new.families.len()),
        );
        Ok(())
    }
}

#[tokio::test]
async fn table_observer_sees_table_operations_and_its_veto_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let host = EngineObserverHost::new().table_observer(
        "tables",
        1,
        FailurePolicy::FailOperation,
        Arc::new(Tables { log: log.clone() }),
    );
    let conn = open_with(config(dir.path(), &reg).observer(Arc::new(host))).await;
    let admin = conn.admin();
    let err = admin.create_table(desc("forbidden")).await.unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    assert!(!admin.table_exists(&tn("forbidden")).await.unwrap());
    assert!(conn
        .table("forbidden")
        .unwrap()
        .put(put("a", "v"))
        .await
        .is_err());
    assert_eq!(take(&log), ["pre_create(default:forbidden)"]);

    admin.create_table(desc("t")).await.unwrap();
    admin
        .add_column_family(&tn("t"), ColumnFamilyDescriptor::new("g"))
        .await
        .unwrap();
    let err = admin
        .add_column_family(&tn("t"), ColumnFamilyDescriptor::new("h"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    assert_eq!(
        admin.describe_table(&tn("t")).await.unwrap().families.len(),
        2
    );
    admin.disable_table(&tn("t")).await.unwrap();
    admin.enable_table(&tn("t")).await.unwrap();
    admin.disable_table(&tn("t")).await.unwrap();
    admin.delete_table(&tn("t")).await.unwrap();
    assert_eq!(
        take(&log),
        [
            "pre_create(default:t)",
            "post_create(default:t)",
            "pre_modify(1,2)",
            "post_modify(1,2)",
            "pre_modify(2,3)",
            "pre_disable(default:t)",
            "post_disable(default:t)",
            "pre_enable(default:t)",
            "post_enable(default:t)",
            "pre_disable(default:t)",
            "post_disable(default:t)",
            "pre_delete(default:t)",
            "post_delete(default:t)",
        ]
    );
}

/// Records every WAL append and roll.
#[derive(Default)]
struct Wal {
    pre: Mutex<Vec<u64>>,
    post: Mutex<Vec<(u64, usize)>>,
    rolls: Mutex<Vec<(u64, u64)>>,
}

impl WalObserver for Wal {
    fn pre_wal_append(&self, record: &WalRecord) -> basalt::Result<()> {
        self.pre.lock().unwrap().push(record.seq);
        Ok(())
    }
    fn post_wal_append(&self, record: &WalRecord) {
        self.post
            .lock()
            .unwrap()
            .push((record.seq, record.edits.len()));
    }
    fn post_wal_roll(&self, closed: u64, opened: u64) {
        self.rolls.lock().unwrap().push((closed, opened));
    }
}

#[tokio::test]
async fn wal_observer_sees_every_append_in_order_and_every_roll() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let wal = Arc::new(Wal::default());
    let host =
        EngineObserverHost::new().wal_observer("wal", 1, FailurePolicy::FailOperation, wal.clone());
    let conn = open_with(
        config(dir.path(), &reg)
            .wal_segment_size(4096)
            .observer(Arc::new(host)),
    )
    .await;
    conn.admin().create_table(desc("t")).await.unwrap();
    let t = conn.table("t").unwrap();
    for i in 0..200 {
        t.put(put(&format!("r{i:03}"), &"x".repeat(100)).add_column("f", "q2", "y"))
            .await
            .unwrap();
    }
    let pre = wal.pre.lock().unwrap().clone();
    let post = wal.post.lock().unwrap().clone();
    assert_eq!(pre.len(), 200);
    assert!(pre.windows(2).all(|w| w[0] < w[1]), "in sequence order");
    assert_eq!(post.iter().map(|p| p.0).collect::<Vec<_>>(), pre);
    assert!(post.iter().all(|p| p.1 == 2), "two edits per put");
    let rolls = wal.rolls.lock().unwrap().clone();
    assert!(rolls.len() >= 3, "{rolls:?}");
    assert!(rolls.iter().all(|(c, o)| c + 1 == *o));
    assert!(rolls.windows(2).all(|w| w[0].1 == w[1].0));
}

/// A WAL observer whose `pre_wal_append` refuses rows starting with `no`.
struct Refuse;

impl WalObserver for Refuse {
    fn pre_wal_append(&self, record: &WalRecord) -> basalt::Result<()> {
        if record
            .edits
            .iter()
            .any(|e| e.cell.key.row.starts_with(b"no"))
        {
            return Err(Error::bad_argument("refused"));
        }
        Ok(())
    }
    fn post_wal_roll(&self, _: u64, _: u64) {
        panic!("roll observer bug");
    }
}

#[tokio::test]
async fn wal_observer_failures_refuse_writes_and_panics_are_contained() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let host = Arc::new(EngineObserverHost::new().wal_observer(
        "refuse",
        1,
        FailurePolicy::FailOperation,
        Arc::new(Refuse),
    ));
    let conn = open_with(
        config(dir.path(), &reg)
            .wal_segment_size(4096)
            .observer(host.clone()),
    )
    .await;
    conn.admin().create_table(desc("t")).await.unwrap();
    let t = conn.table("t").unwrap();
    assert!(t.put(put("no1", "v")).await.is_err());
    assert!(!t.exists(Get::new("no1")).await.unwrap());
    // Rolls panic in the observer: writes go on.
    for i in 0..100 {
        t.put(put(&format!("r{i:03}"), &"x".repeat(100)))
            .await
            .unwrap();
    }
    assert_eq!(scan_rows(&t, Scan::new()).await.len(), 100);
    let m = host.metrics();
    assert!(m[0].panics >= 1, "{m:?}");
    assert!(m[0].errors > m[0].panics, "the refusal counts too: {m:?}");
    assert_eq!(m[0].refusals, 1, "{m:?}");
    assert_eq!(m[0].faults, m[0].panics, "{m:?}");
}

#[tokio::test]
async fn a_wal_observer_refusal_under_unload_refuses_every_time_and_keeps_it_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let host = Arc::new(EngineObserverHost::new().wal_observer(
        "refuse",
        1,
        FailurePolicy::Unload,
        Arc::new(Refuse),
    ));
    let conn = open_with(config(dir.path(), &reg).observer(host.clone())).await;
    conn.admin().create_table(desc("t")).await.unwrap();
    let t = conn.table("t").unwrap();
    for i in 0..3 {
        let row = format!("no{i}");
        let err = t.put(put(&row, "v")).await.unwrap_err();
        assert!(
            matches!(&err, Error::Coprocessor { name, .. } if name == "refuse"),
            "{err:?}"
        );
        assert!(!t.exists(Get::new(row.as_str())).await.unwrap());
    }
    t.put(put("yes", "v")).await.unwrap();
    assert!(t.exists(Get::new("yes")).await.unwrap());
    let m = host.metrics();
    assert!(m[0].loaded, "{m:?}");
    assert_eq!(
        (m[0].refusals, m[0].faults, m[0].errors),
        (3, 0, 3),
        "{m:?}"
    );
}

/// Records `name:pre_put`.
struct Named {
    name: &'static str,
    log: Log,
}

#[async_trait]
impl RegionObserver for Named {
    async fn pre_put(&self, ctx: &mut ObserverContext<'_>, _: &mut Put) -> basalt::Result<()> {
        note(&self.log, format!("{}:{}", self.name, ctx.table()));
        Ok(())
    }
}

#[tokio::test]
async fn system_wide_observers_apply_to_new_tables_first_on_ties() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    for name in ["sys", "own", "late"] {
        let l = log.clone();
        register(&reg, name, move || Named {
            name,
            log: l.clone(),
        });
    }
    let cfg = config(dir.path(), &reg)
        .system_coprocessor(CoprocessorDescriptor::new("sys").priority(5))
        .system_coprocessor(CoprocessorDescriptor::new("late").priority(9));
    let conn = open_with(cfg).await;
    let admin = conn.admin();
    admin
        .create_table(desc("t").coprocessor(CoprocessorDescriptor::new("own").priority(5)))
        .await
        .unwrap();
    admin.create_table(desc("bare")).await.unwrap();
    conn.table("t").unwrap().put(put("a", "v")).await.unwrap();
    conn.table("bare")
        .unwrap()
        .put(put("a", "v"))
        .await
        .unwrap();
    assert_eq!(
        take(&log),
        [
            "sys:default:t",
            "own:default:t",
            "late:default:t",
            "sys:default:bare",
            "late:default:bare",
        ]
    );
    // The table's own list in the catalog does not hold the system entries.
    let d = admin.describe_table(&tn("bare")).await.unwrap();
    assert!(d.coprocessors.is_empty());
    // A table listing a system coprocessor by name replaces the system entry.
    admin
        .create_table(desc("over").coprocessor(CoprocessorDescriptor::new("sys").priority(20)))
        .await
        .unwrap();
    conn.table("over")
        .unwrap()
        .put(put("a", "v"))
        .await
        .unwrap();
    assert_eq!(take(&log), ["late:default:over", "sys:default:over"]);
}
