//! Coprocessor integration tests: region observers loaded per table through a registry,
//! hook order, bypass, mutation rewrite, atomic mutations added under the row locks,
//! priority order, failure isolation (errors, panics, timeouts under each policy, row locks
//! released), schema changes without restart, persistence across reopen, and metrics.
//!
//! Each test opens a fresh engine in its own temporary directory with a `Registry` as the
//! coprocessor loader.

use async_trait::async_trait;
use basalt::client::{
    BatchOp, BatchOutcome, CheckAndMutate, Delete, Get, Mutation, Put, RowMutations, RowResult,
    Scan,
};
use basalt::coprocessors::{MiniBatch, ObserverContext, RegionObserver, Registry};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Error, FailurePolicy,
    PreSplit, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Log = Arc<Mutex<Vec<String>>>;

fn tn(s: &str) -> TableName {
    TableName::parse(s).unwrap()
}

fn desc(name: &str) -> TableDescriptor {
    TableDescriptor::new(tn(name)).family(ColumnFamilyDescriptor::new("f"))
}

async fn open(dir: &std::path::Path, reg: &Arc<Registry>) -> Connection {
    Connection::open_with(Config::new(dir).coprocessor_loader(reg.clone()))
        .await
        .unwrap()
}

fn val(r: &RowResult, q: &str) -> Option<String> {
    r.value("f", q)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

fn has_column(p: &Put, q: &str) -> bool {
    p.cells().any(|(_, qq, _, _)| qq == q.as_bytes())
}

/// Records `name:hook` for every hook call.
struct Recorder {
    name: String,
    log: Log,
}

impl Recorder {
    fn note(&self, hook: &str) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:{hook}", self.name));
    }
}

#[async_trait]
impl RegionObserver for Recorder {
    async fn pre_put(&self, _: &mut ObserverContext<'_>, _: &mut Put) -> basalt::Result<()> {
        self.note("pre_put");
        Ok(())
    }
    async fn post_put(&self, _: &mut ObserverContext<'_>, _: &Put) -> basalt::Result<()> {
        self.note("post_put");
        Ok(())
    }
    async fn pre_delete(&self, _: &mut ObserverContext<'_>, _: &mut Delete) -> basalt::Result<()> {
        self.note("pre_delete");
        Ok(())
    }
    async fn post_delete(&self, _: &mut ObserverContext<'_>, _: &Delete) -> basalt::Result<()> {
        self.note("post_delete");
        Ok(())
    }
    async fn pre_get(
        &self,
        _: &mut ObserverContext<'_>,
        _: &mut Get,
        _: &mut RowResult,
    ) -> basalt::Result<()> {
        self.note("pre_get");
        Ok(())
    }
    async fn post_get(
        &self,
        _: &mut ObserverContext<'_>,
        _: &Get,
        _: &mut RowResult,
    ) -> basalt::Result<()> {
        self.note("post_get");
        Ok(())
    }
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        assert_eq!(ctx.table(), &tn("t"));
        self.note(&format!("pre_batch_mutate({})", batch.len()));
        Ok(())
    }
}

fn register_recorder(reg: &Registry, name: &str, log: &Log) {
    let (n, log) = (name.to_string(), log.clone());
    reg.register(name, move |_| {
        Ok(Arc::new(Recorder {
            name: n.clone(),
            log: log.clone(),
        }) as Arc<dyn RegionObserver>)
    })
    .unwrap();
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[tokio::test]
async fn counting_observer_sees_every_hook_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    register_recorder(&reg, "rec", &log);
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(desc("t").coprocessor(CoprocessorDescriptor::new("rec")))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    t.put(Put::new("r1").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert_eq!(
        take(&log),
        ["rec:pre_put", "rec:pre_batch_mutate(1)", "rec:post_put"]
    );
    let r = t.get(Get::new("r1")).await.unwrap();
    assert_eq!(val(&r, "q").as_deref(), Some("v"));
    assert_eq!(take(&log), ["rec:pre_get", "rec:post_get"]);
    t.delete(Delete::new("r1")).await.unwrap();
    assert_eq!(
        take(&log),
        [
            "rec:pre_delete",
            "rec:pre_batch_mutate(1)",
            "rec:post_delete"
        ]
    );
    let out = t
        .batch(vec![
            BatchOp::Put(Put::new("a").add_column("f", "q", "1")),
            BatchOp::Put(Put::new("b").add_column("f", "q", "2")),
            BatchOp::Get(Get::new("a")),
        ])
        .await
        .unwrap();
    assert!(out.iter().all(|r| r.is_ok()));
    assert_eq!(
        take(&log),
        [
            "rec:pre_put",
            "rec:pre_put",
            "rec:pre_batch_mutate(2)",
            "rec:post_put",
            "rec:post_put",
            "rec:pre_get",
            "rec:post_get"
        ]
    );
    // A table without coprocessors calls nothing.
    conn.admin().create_table(desc("plain")).await.unwrap();
    let p = conn.table("plain").unwrap();
    p.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    p.get(Get::new("r")).await.unwrap();
    assert!(take(&log).is_empty());
    conn.close().await.unwrap();
}

/// Bypasses puts of rows starting with `skip`, adds `f:added` to the others, answers gets
/// of `virtual` itself and upper-cases `f:q` in get results.
struct Shaper;

#[async_trait]
impl RegionObserver for Shaper {
    async fn pre_put(&self, ctx: &mut ObserverContext<'_>, put: &mut Put) -> basalt::Result<()> {
        if put.row().starts_with(b"skip") {
            ctx.bypass();
        } else {
            *put = put.clone().add_column("f", "added", "yes");
        }
        Ok(())
    }
    async fn pre_get(
        &self,
        ctx: &mut ObserverContext<'_>,
        get: &mut Get,
        result: &mut RowResult,
    ) -> basalt::Result<()> {
        if get.row().as_ref() == b"virtual" {
            *result = ctx.get(&Get::new("real"))?;
            ctx.bypass();
        }
        Ok(())
    }
    async fn post_get(
        &self,
        _: &mut ObserverContext<'_>,
        _: &Get,
        result: &mut RowResult,
    ) -> basalt::Result<()> {
        for c in &mut result.cells {
            if c.qualifier.as_ref() == b"q" {
                c.value = c.value.to_ascii_uppercase().into();
            }
        }
        Ok(())
    }
}

#[tokio::test]
async fn pre_put_bypass_skips_the_write_and_rewrite_adds_a_column() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    reg.register(
        "shaper",
        |_| Ok(Arc::new(Shaper) as Arc<dyn RegionObserver>),
    )
    .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(desc("t").coprocessor(CoprocessorDescriptor::new("shaper")))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    // Bypass: the put succeeds and writes nothing.
    t.put(Put::new("skip-1").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert!(!t.exists(Get::new("skip-1")).await.unwrap());
    // Rewrite: the put gains a column.
    t.put(Put::new("real").add_column("f", "q", "v"))
        .await
        .unwrap();
    let r = t.get(Get::new("real")).await.unwrap();
    assert_eq!(val(&r, "added").as_deref(), Some("yes"));
    // post_get changed the result.
    assert_eq!(val(&r, "q").as_deref(), Some("V"));
    // pre_get supplied the result and bypassed the read (and the post hooks).
    let v = t.get(Get::new("virtual")).await.unwrap();
    assert_eq!(val(&v, "q").as_deref(), Some("v"));
    // A batch: the bypassed put answers Done and writes nothing.
    let out = t
        .batch(vec![
            BatchOp::Put(Put::new("skip-2").add_column("f", "q", "v")),
            BatchOp::Put(Put::new("kept").add_column("f", "q", "v")),
        ])
        .await
        .unwrap();
    assert!(matches!(out[0], Ok(BatchOutcome::Done)));
    assert!(matches!(out[1], Ok(BatchOutcome::Done)));
    assert!(!t.exists(Get::new("skip-2")).await.unwrap());
    let kept = t.get(Get::new("kept")).await.unwrap();
    assert_eq!(val(&kept, "added").as_deref(), Some("yes"));
    conn.close().await.unwrap();
}

/// Under the row locks: vetoes puts of rows starting with `bad`, adds an audit row
/// `audit/<row>` per put, and (for rows starting with `broken`) an invalid mutation that
/// must fail the whole batch.
struct Audit;

#[async_trait]
impl RegionObserver for Audit {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let mut added = Vec::new();
        let mut vetoes = Vec::new();
        for (i, m) in batch.operations().enumerate() {
            let Mutation::Put(p) = m else { continue };
            if p.row().starts_with(b"audit/") {
                continue;
            }
            if p.row().starts_with(b"bad") {
                vetoes.push(i);
                continue;
            }
            let mut audit_row = b"audit/".to_vec();
            audit_row.extend_from_slice(p.row());
            let family = if p.row().starts_with(b"broken") {
                "nope"
            } else {
                "f"
            };
            added.push(Mutation::Put(Put::new(audit_row).add_column(
                family,
                "by",
                ctx.coprocessor_name(),
            )));
        }
        for i in vetoes {
            batch.veto(
                i,
                Error::Coprocessor {
                    name: "audit".into(),
                    msg: "row refused".into(),
                },
            );
        }
        for m in added {
            batch.add_mutation(m);
        }
        Ok(())
    }
}

#[tokio::test]
async fn pre_batch_audit_rows_commit_atomically_with_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    reg.register("audit", |_| Ok(Arc::new(Audit) as Arc<dyn RegionObserver>))
        .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table_with_splits(
            desc("t").coprocessor(CoprocessorDescriptor::new("audit")),
            PreSplit::Keys(vec![b"m".to_vec()]),
        )
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    t.put(Put::new("x1").add_column("f", "q", "v"))
        .await
        .unwrap();
    let a = t.get(Get::new("audit/x1")).await.unwrap();
    assert_eq!(val(&a, "by").as_deref(), Some("audit"));
    // A batch over two regions: the vetoed put fails alone, the others commit with their
    // audit rows.
    let out = t
        .batch(vec![
            BatchOp::Put(Put::new("c1").add_column("f", "q", "v")),
            BatchOp::Put(Put::new("bad1").add_column("f", "q", "v")),
            BatchOp::Put(Put::new("y1").add_column("f", "q", "v")),
        ])
        .await
        .unwrap();
    assert!(out[0].is_ok() && out[2].is_ok(), "{out:?}");
    assert!(
        matches!(&out[1], Err(Error::Coprocessor { name, .. }) if name == "audit"),
        "{out:?}"
    );
    for row in ["c1", "audit/c1", "y1", "audit/y1"] {
        assert!(t.exists(Get::new(row)).await.unwrap(), "{row}");
    }
    assert!(!t.exists(Get::new("bad1")).await.unwrap());
    // A vetoed single put fails with the veto.
    let err = t
        .put(Put::new("bad2").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    // An invalid added mutation fails the whole batch: neither the rows nor any audit row.
    let out = t
        .batch(vec![
            BatchOp::Put(Put::new("d1").add_column("f", "q", "v")),
            BatchOp::Put(Put::new("broken1").add_column("f", "q", "v")),
        ])
        .await
        .unwrap();
    assert!(out.iter().all(|r| r.is_err()), "{out:?}");
    for row in ["d1", "audit/d1", "broken1", "audit/broken1"] {
        assert!(!t.exists(Get::new(row)).await.unwrap(), "{row}");
    }
    let err = t
        .put(Put::new("broken2").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidAddedMutation { table, reason }
            if table == "default:t" && matches!(**reason, Error::FamilyNotFound { .. })),
        "{err:?}"
    );
    assert!(!t.exists(Get::new("broken2")).await.unwrap());

    // Row mutations and check-and-mutate run the batch hook too.
    t.mutate_row(
        RowMutations::new("e1")
            .add(Put::new("e1").add_column("f", "q", "1"))
            .add(Put::new("e1").add_column("f", "p", "2")),
    )
    .await
    .unwrap();
    assert!(t.exists(Get::new("audit/e1")).await.unwrap());
    let passed = t
        .check_and_mutate(
            CheckAndMutate::new("e2", "f", "q")
                .if_absent()
                .then_put(Put::new("e2").add_column("f", "q", "v")),
        )
        .await
        .unwrap();
    assert!(passed);
    assert!(t.exists(Get::new("audit/e2")).await.unwrap());
    let err = t
        .mutate_row(RowMutations::new("bad3").add(Put::new("bad3").add_column("f", "q", "v")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    assert!(!t.exists(Get::new("bad3")).await.unwrap());

    // Concurrent writers and scans: every snapshot holds each row with its audit row.
    let writer = {
        let t = t.clone();
        tokio::spawn(async move {
            for i in 0..300 {
                t.put(Put::new(format!("w{i:04}")).add_column("f", "q", "v"))
                    .await
                    .unwrap();
            }
        })
    };
    while !writer.is_finished() {
        let rows: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
        let keys: std::collections::BTreeSet<Vec<u8>> =
            rows.iter().map(|r| r.row.to_vec()).collect();
        for k in &keys {
            if k.starts_with(b"w") {
                let mut a = b"audit/".to_vec();
                a.extend_from_slice(k);
                assert!(
                    keys.contains(&a),
                    "{} without its audit row",
                    String::from_utf8_lossy(k)
                );
            }
        }
        tokio::task::yield_now().await;
    }
    writer.await.unwrap();
    conn.close().await.unwrap();
    drop(conn);

    // After reopen: both or neither, as before.
    let conn = open(dir.path(), &reg).await;
    let t = conn.table("t").unwrap();
    for row in [
        "x1",
        "audit/x1",
        "c1",
        "audit/c1",
        "y1",
        "audit/y1",
        "w0299",
        "audit/w0299",
    ] {
        assert!(t.exists(Get::new(row)).await.unwrap(), "{row}");
    }
    for row in ["bad1", "d1", "audit/d1", "broken1", "audit/broken1"] {
        assert!(!t.exists(Get::new(row)).await.unwrap(), "{row}");
    }
    // The observer is loaded again: a new put gets its audit row.
    t.put(Put::new("z1").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert!(t.exists(Get::new("audit/z1")).await.unwrap());
    // Dropped without close: WAL replay brings back the row and its audit row together
    // (one WAL record), in two regions.
    drop(t);
    drop(conn);
    let conn = open(dir.path(), &reg).await;
    let t = conn.table("t").unwrap();
    for row in ["z1", "audit/z1", "x1", "audit/x1"] {
        assert!(t.exists(Get::new(row)).await.unwrap(), "{row}");
    }
    conn.close().await.unwrap();
}

#[tokio::test]
async fn chains_run_in_priority_order_ties_by_load_order() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    for n in ["a", "b", "c", "d", "e"] {
        register_recorder(&reg, n, &log);
    }
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(
            desc("t")
                .coprocessor(CoprocessorDescriptor::new("a").priority(10))
                .coprocessor(CoprocessorDescriptor::new("b").priority(5))
                .coprocessor(CoprocessorDescriptor::new("c").priority(10))
                .coprocessor(CoprocessorDescriptor::new("d").priority(5)),
        )
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    let pre_puts = |log: &Log| -> Vec<String> {
        take(log)
            .into_iter()
            .filter(|e| e.ends_with(":pre_put"))
            .map(|e| e[..1].to_string())
            .collect()
    };
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert_eq!(pre_puts(&log), ["b", "d", "a", "c"]);
    // Added later: loaded last among its priority, no restart.
    conn.admin()
        .add_coprocessor(&tn("t"), CoprocessorDescriptor::new("e").priority(5))
        .await
        .unwrap();
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert_eq!(pre_puts(&log), ["b", "d", "e", "a", "c"]);
    conn.admin()
        .remove_coprocessor(&tn("t"), "d")
        .await
        .unwrap();
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert_eq!(pre_puts(&log), ["b", "e", "a", "c"]);
    assert_eq!(reg.host(&tn("t")).unwrap().loaded(), ["b", "e", "a", "c"]);
    conn.close().await.unwrap();
    drop(conn);
    // The list and its order survive reopen.
    let conn = open(dir.path(), &reg).await;
    let listed: Vec<String> = conn
        .admin()
        .describe_table(&tn("t"))
        .await
        .unwrap()
        .coprocessors
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(listed, ["a", "b", "c", "e"]);
    let t = conn.table("t").unwrap();
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert_eq!(pre_puts(&log), ["b", "e", "a", "c"]);
    // Removing them all: the table runs without hooks.
    conn.admin()
        .set_coprocessors(&tn("t"), Vec::new())
        .await
        .unwrap();
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert!(take(&log).is_empty());
    assert!(reg.metrics(&tn("t")).is_empty());
    conn.close().await.unwrap();
}

#[derive(Clone, Copy)]
enum Fault {
    /// Returns an error.
    Fail,
    Panic,
    Sleep,
}

/// Fails (by `fault`) in `pre_batch_mutate`, under the row locks, on puts carrying a
/// `boom` column.
struct Faulty {
    fault: Fault,
}

#[async_trait]
impl RegionObserver for Faulty {
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let boom = batch
            .operations()
            .any(|m| matches!(m, Mutation::Put(p) if has_column(p, "boom")));
        // Additions made before the failure must never commit.
        batch.add_mutation(Mutation::Put(
            Put::new("faulty-added").add_column("f", "q", "v"),
        ));
        if boom {
            match self.fault {
                Fault::Fail => return Err(Error::bad_argument("boom refused")),
                Fault::Panic => panic!("boom in pre_batch_mutate"),
                Fault::Sleep => tokio::time::sleep(Duration::from_secs(30)).await,
            }
        }
        Ok(())
    }
}

async fn failure_case(fault: Fault, policy: FailurePolicy) {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    reg.register("faulty", move |_| {
        Ok(Arc::new(Faulty { fault }) as Arc<dyn RegionObserver>)
    })
    .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(
            desc("t").coprocessor(
                CoprocessorDescriptor::new("faulty")
                    .policy(policy)
                    .timeout_ms(200),
            ),
        )
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    let started = Instant::now();
    let out = t.put(Put::new("r").add_column("f", "boom", "1")).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let m = reg.metrics(&tn("t")).remove(0);
    // An error returned is the hook's answer: it fails the operation under every policy
    // and unloads nothing. Only a fault (panic, timeout) is up to the policy.
    let fails = policy == FailurePolicy::FailOperation || matches!(fault, Fault::Fail);
    // post_open at create and pre_put (no-op defaults, counted too), the failed
    // pre_batch_mutate and, when the operation failed, post_batch with the failure; once
    // unloaded the coprocessor hears nothing more.
    let calls = if fails { 4 } else { 3 };
    assert_eq!((m.calls, m.errors), (calls, 1), "{m:?}");
    match fault {
        Fault::Fail => assert_eq!((m.refusals, m.faults, m.panics, m.timeouts), (1, 0, 0, 0)),
        Fault::Panic => assert_eq!((m.refusals, m.faults, m.panics, m.timeouts), (0, 1, 1, 0)),
        Fault::Sleep => assert_eq!((m.refusals, m.faults, m.panics, m.timeouts), (0, 1, 0, 1)),
    }
    if fails {
        match out {
            Err(Error::Coprocessor { name, msg }) => {
                assert_eq!(name, "faulty");
                match fault {
                    Fault::Fail => assert!(msg.contains("boom refused"), "{msg}"),
                    Fault::Panic => assert!(msg.contains("panicked"), "{msg}"),
                    Fault::Sleep => assert!(msg.contains("timeout"), "{msg}"),
                }
            }
            other => panic!("expected a coprocessor error, got {other:?}"),
        }
        assert!(!t.exists(Get::new("r")).await.unwrap());
        assert!(m.loaded);
    } else {
        out.unwrap();
        assert!(t.exists(Get::new("r")).await.unwrap());
        assert!(!m.loaded);
        assert!(reg.host(&tn("t")).unwrap().loaded().is_empty());
    }
    // The failed coprocessor's addition was rolled back.
    assert!(!t.exists(Get::new("faulty-added")).await.unwrap());
    // The row lock is free: a second write to the same row goes through at once.
    let started = Instant::now();
    tokio::time::timeout(
        Duration::from_secs(5),
        t.put(Put::new("r").add_column("f", "q", "2")),
    )
    .await
    .expect("row lock still held")
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    let r = t.get(Get::new("r")).await.unwrap();
    assert_eq!(val(&r, "q").as_deref(), Some("2"));
    // Still loaded it ran again and added its row; unloaded it did not.
    let added = t.exists(Get::new("faulty-added")).await.unwrap();
    assert_eq!(added, fails);
    // The engine keeps serving other tables too.
    conn.admin().create_table(desc("other")).await.unwrap();
    conn.table("other")
        .unwrap()
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    conn.close().await.unwrap();
}

#[tokio::test]
async fn failing_hook_fails_the_operation_and_frees_the_row_lock() {
    failure_case(Fault::Fail, FailurePolicy::FailOperation).await;
}

#[tokio::test]
async fn failing_hook_fails_the_operation_under_unload_too_and_stays_loaded() {
    failure_case(Fault::Fail, FailurePolicy::Unload).await;
}

#[tokio::test]
async fn panicking_hook_fails_the_operation_and_frees_the_row_lock() {
    failure_case(Fault::Panic, FailurePolicy::FailOperation).await;
}

#[tokio::test]
async fn panicking_hook_is_unloaded_and_the_operation_goes_on() {
    failure_case(Fault::Panic, FailurePolicy::Unload).await;
}

#[tokio::test]
async fn sleeping_hook_times_out_and_fails_the_operation() {
    failure_case(Fault::Sleep, FailurePolicy::FailOperation).await;
}

#[tokio::test]
async fn sleeping_hook_times_out_and_is_unloaded() {
    failure_case(Fault::Sleep, FailurePolicy::Unload).await;
}

/// Refuses, in `pre_put`, every put whose `f:age` is not a number from 0 to 150.
struct AgeValidator;

#[async_trait]
impl RegionObserver for AgeValidator {
    async fn pre_put(&self, _: &mut ObserverContext<'_>, put: &mut Put) -> basalt::Result<()> {
        for (_, q, _, v) in put.cells() {
            if q == b"age".as_slice() {
                let ok = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<u8>().ok())
                    .is_some_and(|a| a <= 150);
                if !ok {
                    return Err(Error::bad_argument(format!(
                        "age {:?} is not a number from 0 to 150",
                        String::from_utf8_lossy(v)
                    )));
                }
            }
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_refusing_hook_under_unload_fails_each_bad_write_and_stays_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    reg.register("age", |_| {
        Ok(Arc::new(AgeValidator) as Arc<dyn RegionObserver>)
    })
    .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(
            desc("t").coprocessor(CoprocessorDescriptor::new("age").policy(FailurePolicy::Unload)),
        )
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    // The refusal is the hook's answer: each bad put fails with the typed error, under
    // Unload as under FailOperation, and writes nothing.
    for (i, bad) in ["-1", "151", "old", "999"].iter().enumerate() {
        let row = format!("bad{i}");
        let err = t
            .put(Put::new(row.as_str()).add_column("f", "age", *bad))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Coprocessor { name, msg } if name == "age" && msg.contains("not a number from 0 to 150")),
            "{bad}: {err:?}"
        );
        assert!(
            t.get(Get::new(row.as_str())).await.unwrap().is_empty(),
            "{bad}"
        );
        // Still loaded after every refusal.
        assert_eq!(reg.host(&tn("t")).unwrap().loaded(), ["age"], "{bad}");
    }
    // A good put goes through.
    t.put(Put::new("good").add_column("f", "age", "36"))
        .await
        .unwrap();
    assert_eq!(
        val(&t.get(Get::new("good")).await.unwrap(), "age").as_deref(),
        Some("36")
    );
    let m = reg.metrics(&tn("t")).remove(0);
    assert!(m.loaded, "{m:?}");
    assert_eq!(
        (m.refusals, m.faults, m.panics, m.timeouts),
        (4, 0, 0, 0),
        "{m:?}"
    );
    assert_eq!(m.errors, 4, "{m:?}");
    conn.close().await.unwrap();
}

/// Under the row lock, writes the same row again through the client API: it waits for the
/// lock its own batch holds, until the timeout cancels it.
struct Reenter {
    table: Arc<std::sync::OnceLock<basalt::Table>>,
}

#[async_trait]
impl RegionObserver for Reenter {
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let reenter = batch
            .operations()
            .find(|m| matches!(m, Mutation::Put(p) if has_column(p, "reenter")))
            .map(|m| m.row().clone());
        if let (Some(row), Some(t)) = (reenter, self.table.get()) {
            t.put(Put::new(row).add_column("f", "q", "inner")).await?;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_hook_deadlocked_on_its_own_row_lock_is_cancelled_and_the_lock_freed() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let slot: Arc<std::sync::OnceLock<basalt::Table>> = Arc::default();
    let s = slot.clone();
    reg.register("reenter", move |_| {
        Ok(Arc::new(Reenter { table: s.clone() }) as Arc<dyn RegionObserver>)
    })
    .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(desc("t").coprocessor(CoprocessorDescriptor::new("reenter").timeout_ms(300)))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    slot.set(t.clone()).ok();
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        t.put(Put::new("r").add_column("f", "reenter", "1")),
    )
    .await
    .expect("deadlocked")
    .unwrap_err();
    assert!(
        matches!(&err, Error::Coprocessor { msg, .. } if msg.contains("timeout")),
        "{err:?}"
    );
    // Neither write happened, and the row is free again.
    assert!(!t.exists(Get::new("r")).await.unwrap());
    tokio::time::timeout(
        Duration::from_secs(5),
        t.put(Put::new("r").add_column("f", "q", "after")),
    )
    .await
    .expect("row lock still held")
    .unwrap();
    let r = t.get(Get::new("r")).await.unwrap();
    assert_eq!(val(&r, "q").as_deref(), Some("after"));
    drop(t);
    drop(slot);
    conn.close().await.unwrap();
}

/// Returns an error from `pre_put` while `fail` is set.
struct Flaky {
    fail: Arc<AtomicBool>,
}

#[async_trait]
impl RegionObserver for Flaky {
    async fn pre_put(&self, _: &mut ObserverContext<'_>, _: &mut Put) -> basalt::Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(Error::bad_argument("flaky says no"));
        }
        Ok(())
    }
}

#[tokio::test]
async fn metrics_count_calls_errors_and_latency() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let fail = Arc::new(AtomicBool::new(false));
    let f = fail.clone();
    reg.register("flaky", move |_| {
        Ok(Arc::new(Flaky { fail: f.clone() }) as Arc<dyn RegionObserver>)
    })
    .unwrap();
    let log: Log = Arc::default();
    register_recorder(&reg, "rec", &log);
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(
            desc("t")
                .coprocessor(CoprocessorDescriptor::new("flaky").priority(1))
                .coprocessor(CoprocessorDescriptor::new("rec").priority(2)),
        )
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    for i in 0..3 {
        t.put(Put::new(format!("r{i}")).add_column("f", "q", "v"))
            .await
            .unwrap();
    }
    fail.store(true, Ordering::SeqCst);
    let err = t
        .put(Put::new("x").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Coprocessor { name, msg } if name == "flaky" && msg.contains("flaky says no")),
        "{err:?}"
    );
    assert!(!t.exists(Get::new("x")).await.unwrap());
    let m = reg.metrics(&tn("t"));
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].name, "flaky");
    // flaky: 4 pre_puts (one failed); the other hooks are its no-op defaults, each called
    // (and counted) once, then learnt and skipped: post_open at create, pre_batch_mutate,
    // post_batch_mutate, post_batch and post_put at the first put, pre_exists and
    // post_exists at the exists.
    assert_eq!((m[0].calls, m[0].errors), (11, 1), "{:?}", m[0]);
    // The error was a refusal, not a fault.
    assert_eq!((m[0].refusals, m[0].faults), (1, 0), "{:?}", m[0]);
    assert!(m[0].loaded);
    // rec never saw the failed put.
    // rec: post_open, 3 each of pre_put, pre_batch_mutate and post_put, pre_exists and
    // post_exists (it implements them), and its default post_batch_mutate and post_batch
    // once each (learnt at the first put).
    assert_eq!((m[1].calls, m[1].errors), (14, 0), "{:?}", m[1]);
    assert!(m[1].total_latency > Duration::ZERO);
    conn.close().await.unwrap();
}

/// Bypasses where bypass is not supported.
struct WrongBypass;

#[async_trait]
impl RegionObserver for WrongBypass {
    async fn post_put(&self, ctx: &mut ObserverContext<'_>, _: &Put) -> basalt::Result<()> {
        ctx.bypass();
        Ok(())
    }
}

#[tokio::test]
async fn bypass_in_a_post_hook_is_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    reg.register("wrong", |_| {
        Ok(Arc::new(WrongBypass) as Arc<dyn RegionObserver>)
    })
    .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(desc("t").coprocessor(CoprocessorDescriptor::new("wrong")))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    let err = t
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Coprocessor { msg, .. } if msg.contains("does not support bypass")),
        "{err:?}"
    );
    // A post-hook fails the call after the write committed, as HBase's postPut.
    assert!(t.exists(Get::new("r")).await.unwrap());
    // A bypass where none is supported is a bug of the coprocessor: a fault.
    let m = reg.metrics(&tn("t")).remove(0);
    assert_eq!((m.refusals, m.faults), (0, 1), "{m:?}");
    conn.close().await.unwrap();
}

#[tokio::test]
async fn unknown_or_unloadable_coprocessors_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    reg.register("needs-arg", |args| {
        if args.contains_key("table") {
            Ok(Arc::new(Audit) as Arc<dyn RegionObserver>)
        } else {
            Err(Error::bad_argument("argument table missing"))
        }
    })
    .unwrap();
    assert!(reg
        .register("needs-arg", |_| Ok(
            Arc::new(Audit) as Arc<dyn RegionObserver>
        ))
        .is_err());
    let conn = open(dir.path(), &reg).await;
    let admin = conn.admin();
    let err = admin
        .create_table(desc("t").coprocessor(CoprocessorDescriptor::new("missing")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    assert!(!admin.table_exists(&tn("t")).await.unwrap());
    let err = admin
        .create_table(desc("t").coprocessor(CoprocessorDescriptor::new("needs-arg")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    admin
        .create_table(
            desc("t").coprocessor(CoprocessorDescriptor::new("needs-arg").arg("table", "x")),
        )
        .await
        .unwrap();
    // A failed change leaves the list as it was.
    let err = admin
        .add_coprocessor(&tn("t"), CoprocessorDescriptor::new("missing"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    assert_eq!(
        admin
            .describe_table(&tn("t"))
            .await
            .unwrap()
            .coprocessors
            .len(),
        1
    );
    assert!(admin
        .add_coprocessor(&tn("t"), CoprocessorDescriptor::new("needs-arg"))
        .await
        .is_err());
    conn.close().await.unwrap();
    drop(conn);
    // Reopening without a loader refuses to run the table without its observers.
    let err = Connection::open(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
}

/// Counts its post_puts, after waiting once (so its hook goes through the host's timer
/// path); every other hook is the trait's default.
struct CountsPostPuts {
    seen: Arc<std::sync::atomic::AtomicU64>,
}

#[async_trait]
impl RegionObserver for CountsPostPuts {
    async fn post_put(&self, _: &mut ObserverContext<'_>, _: &Put) -> basalt::Result<()> {
        tokio::task::yield_now().await;
        self.seen.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// An observer with only default hooks.
struct NoHooks;
impl RegionObserver for NoHooks {}

/// Hooks an observer leaves at the trait's no-op default are called once, learnt and then
/// skipped (with every hook of a put skipped the write takes the unhooked path), while an
/// implemented hook, even one that waits, runs on every call; writes and reads are as
/// without the observers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_hooks_are_learnt_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let s = seen.clone();
    reg.register("counts", move |_| {
        Ok(Arc::new(CountsPostPuts { seen: s.clone() }) as Arc<dyn RegionObserver>)
    })
    .unwrap();
    reg.register("none", |_| Ok(Arc::new(NoHooks) as Arc<dyn RegionObserver>))
        .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(desc("a").coprocessor(CoprocessorDescriptor::new("counts")))
        .await
        .unwrap();
    conn.admin()
        .create_table(desc("b").coprocessor(CoprocessorDescriptor::new("none")))
        .await
        .unwrap();
    let (a, b) = (conn.table("a").unwrap(), conn.table("b").unwrap());
    for i in 0..50 {
        for t in [&a, &b] {
            t.put(Put::new(format!("r{i:02}")).add_column("f", "q", format!("v{i}")))
                .await
                .unwrap();
        }
    }
    assert_eq!(seen.load(Ordering::SeqCst), 50);
    for t in [&a, &b] {
        let rows: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
        assert_eq!(rows.len(), 50);
        assert_eq!(val(&rows[7], "q").as_deref(), Some("v7"));
    }
    // counts: post_open, then the first put's pre_put, pre_batch_mutate,
    // post_batch_mutate and post_batch (defaults, once each), 50 post_puts, and the scan's
    // three scanner hooks (defaults, once each).
    let m = reg.metrics(&tn("a")).remove(0);
    assert_eq!((m.calls, m.errors), (5 + 50 + 3, 0), "{m:?}");
    // none: post_open, the five hooks of the first put and the three of the scan, once
    // each; the other 49 puts call nothing.
    let m = reg.metrics(&tn("b")).remove(0);
    assert_eq!((m.calls, m.errors), (9, 0), "{m:?}");
    // A delete runs the delete hooks once (learnt), then they are skipped too.
    for i in 0..3 {
        b.delete(Delete::new(format!("r{i:02}"))).await.unwrap();
    }
    let m = reg.metrics(&tn("b")).remove(0);
    assert_eq!(m.calls, 9 + 2, "{m:?}");
    assert!(!b.exists(Get::new("r01")).await.unwrap());
    conn.close().await.unwrap();
}

/// A registry built with `read_only_when_missing` opens a table whose coprocessors it lacks
/// read-only: every read works, every kind of write fails with `Error::ReadOnlyTable` naming
/// the missing coprocessors and writes nothing; a plain registry refuses to open the table,
/// and the application's own registry writes again.
#[tokio::test]
async fn tables_with_missing_coprocessors_open_read_only() {
    use basalt::client::{Append, Increment};
    #[derive(Debug)]
    struct Noop;
    impl RegionObserver for Noop {}
    let dir = tempfile::tempdir().unwrap();
    let app = Arc::new(Registry::new());
    app.register(
        "app-rule",
        |_| Ok(Arc::new(Noop) as Arc<dyn RegionObserver>),
    )
    .unwrap();
    {
        let conn = open(dir.path(), &app).await;
        conn.admin()
            .create_table(
                desc("shop")
                    .coprocessor(CoprocessorDescriptor::new("app-rule"))
                    .coprocessor(CoprocessorDescriptor::new("app-audit").priority(2)),
            )
            .await
            .expect_err("app-audit is not registered");
        conn.admin()
            .create_table(desc("shop").coprocessor(CoprocessorDescriptor::new("app-rule")))
            .await
            .unwrap();
        let t = conn.table("shop").unwrap();
        t.put(Put::new("r1").add_column("f", "q", "v1"))
            .await
            .unwrap();
        conn.close().await.unwrap();
    }
    // A tool without the application's code, in read-only mode.
    let tool = Arc::new(Registry::new().read_only_when_missing());
    let conn = open(dir.path(), &tool).await;
    let t = conn.table("shop").unwrap();
    assert_eq!(
        val(&t.get(Get::new("r1")).await.unwrap(), "q").as_deref(),
        Some("v1")
    );
    let rows: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert_eq!(rows.len(), 1);
    let is_read_only = |e: Error| match e {
        Error::ReadOnlyTable { table, missing } => {
            assert_eq!(table, "default:shop");
            assert_eq!(missing, vec!["app-rule".to_string()]);
        }
        other => panic!("expected ReadOnlyTable, got {other:?}"),
    };
    is_read_only(
        t.put(Put::new("r2").add_column("f", "q", "x"))
            .await
            .unwrap_err(),
    );
    is_read_only(t.delete(Delete::new("r1")).await.unwrap_err());
    is_read_only(
        t.increment(Increment::new("c").add_column("f", "n", 1))
            .await
            .unwrap_err(),
    );
    is_read_only(
        t.append(Append::new("r1").add_column("f", "q", "+"))
            .await
            .unwrap_err(),
    );
    is_read_only(
        t.check_and_mutate(
            CheckAndMutate::new("r3", "f", "q").then_put(Put::new("r3").add_column("f", "q", "x")),
        )
        .await
        .unwrap_err(),
    );
    is_read_only(
        t.mutate_row(RowMutations::new("r1").add(Put::new("r1").add_column("f", "z", "x")))
            .await
            .unwrap_err(),
    );
    let outcomes = t
        .batch(vec![
            BatchOp::Put(Put::new("r4").add_column("f", "q", "x")),
            BatchOp::Get(Get::new("r1")),
        ])
        .await
        .unwrap();
    assert!(
        matches!(outcomes[0], Err(Error::ReadOnlyTable { .. })),
        "{outcomes:?}"
    );
    // Nothing was written.
    let rows: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(val(&rows[0], "q").as_deref(), Some("v1"));
    conn.admin().flush("shop").await.unwrap();
    conn.close().await.unwrap();
    // A plain registry without the name refuses to open the table's regions.
    let plain = Arc::new(Registry::new());
    match Connection::open_with(Config::new(dir.path()).coprocessor_loader(plain)).await {
        Err(Error::Coprocessor { name, .. }) => assert_eq!(name, "app-rule"),
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("a registry without app-rule opened the table"),
    }
    // The application writes again.
    let conn = open(dir.path(), &app).await;
    let t = conn.table("shop").unwrap();
    t.put(Put::new("r2").add_column("f", "q", "v2"))
        .await
        .unwrap();
    assert_eq!(
        val(&t.get(Get::new("r2")).await.unwrap(), "q").as_deref(),
        Some("v2")
    );
    conn.close().await.unwrap();
}

/// A region a hook ran in: id, start key, end key.
type RanIn = (u64, Vec<u8>, Vec<u8>);

/// Holds the put of row `r5` in its `pre_put` until released, and records the region each
/// `post_put` ran in.
#[derive(Default)]
struct SplitWitness {
    entered: tokio::sync::Notify,
    release: tokio::sync::Notify,
    post: Mutex<Vec<RanIn>>,
}

#[async_trait]
impl RegionObserver for SplitWitness {
    async fn pre_put(&self, _: &mut ObserverContext<'_>, put: &mut Put) -> basalt::Result<()> {
        if put.row().as_ref() == b"r5" {
            self.entered.notify_one();
            self.release.notified().await;
        }
        Ok(())
    }
    async fn post_put(&self, ctx: &mut ObserverContext<'_>, _: &Put) -> basalt::Result<()> {
        self.post.lock().unwrap().push((
            ctx.region_id(),
            ctx.region_start().to_vec(),
            ctx.region_end().to_vec(),
        ));
        Ok(())
    }
}

/// A put's `post_put` runs in the region its `pre_put` ran in only while that region still
/// serves the row: when a split retires it in between, the post-hook sees the daughter
/// that committed the put.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_put_after_a_split_runs_in_the_daughter() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let witness = Arc::new(SplitWitness::default());
    let w = witness.clone();
    reg.register("witness", move |_| Ok(w.clone() as Arc<dyn RegionObserver>))
        .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(desc("w").coprocessor(CoprocessorDescriptor::new("witness")))
        .await
        .unwrap();
    let t = conn.table("w").unwrap();
    t.put(Put::new("r1").add_column("f", "q", "1"))
        .await
        .unwrap();
    let parent = conn.admin().regions(&tn("w")).await.unwrap()[0].id;
    {
        let post = witness.post.lock().unwrap();
        assert_eq!(post.len(), 1);
        assert_eq!(post[0].0, parent);
    }

    let held = tokio::spawn({
        let t = t.clone();
        async move { t.put(Put::new("r5").add_column("f", "q", "5")).await }
    });
    witness.entered.notified().await;
    conn.admin()
        .split_region(&tn("w"), parent, Some(b"r3"))
        .await
        .unwrap()
        .unwrap();
    witness.release.notify_one();
    held.await.unwrap().unwrap();

    let post = witness.post.lock().unwrap().clone();
    assert_eq!(post.len(), 2);
    let (id, start, end) = &post[1];
    assert_ne!(*id, parent, "post_put ran in the retired parent");
    assert_eq!(start.as_slice(), b"r3");
    assert!(end.is_empty());
    let got = t.get(Get::new("r5")).await.unwrap();
    assert_eq!(val(&got, "q").as_deref(), Some("5"));
}
