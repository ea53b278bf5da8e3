//! Coprocessor hooks of increments, appends, check-and-mutates and exists, and the batch
//! hooks beyond `pre_batch_mutate`: writes added to other tables (atomic with the batch,
//! across a simulated crash too; checked against the other table's schema; counters
//! resolved under the lock; row locks without deadlock), `post_batch_mutate` before
//! visibility, and `post_batch` with the outcome, failures included.
//!
//! Each test opens a fresh engine (a temporary directory, or an in-memory
//! `basalt::fs::FaultFs` where faults or crashes are injected) with a `Registry` as the
//! coprocessor loader.

use async_trait::async_trait;
use basalt::client::{
    Append, BatchOp, CheckAndMutate, Delete, Get, Increment, Mutation, Put, RowResult, Scan,
};
use basalt::coprocessors::{MiniBatch, ObserverContext, RegionObserver, Registry};
use basalt::fs::{CrashKind, FaultFs};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Durability, Error,
    TableDescriptor, TableName,
};
use futures::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

type Log = Arc<Mutex<Vec<String>>>;

fn tn(s: &str) -> TableName {
    TableName::parse(s).unwrap()
}

fn desc(name: &str) -> TableDescriptor {
    TableDescriptor::new(tn(name)).family(ColumnFamilyDescriptor::new("f"))
}

fn with_cp(name: &str, cp: &str) -> TableDescriptor {
    desc(name).coprocessor(CoprocessorDescriptor::new(cp))
}

async fn open_dir(dir: &std::path::Path, reg: &Arc<Registry>) -> Connection {
    Connection::open_with(Config::new(dir).coprocessor_loader(reg.clone()))
        .await
        .unwrap()
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn note(log: &Log, s: impl Into<String>) {
    log.lock().unwrap().push(s.into());
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

fn counter(r: &RowResult, q: &str) -> i64 {
    r.value("f", q)
        .map(|v| i64::from_be_bytes(v.as_ref().try_into().unwrap()))
        .unwrap_or(0)
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

/// Rewrites and bypasses increments, appends, check-and-mutates and exists by row name, and
/// logs what each hook saw.
struct Rmw {
    log: Log,
}

#[async_trait]
impl RegionObserver for Rmw {
    async fn pre_increment(
        &self,
        ctx: &mut ObserverContext<'_>,
        inc: &mut Increment,
        result: &mut RowResult,
    ) -> basalt::Result<()> {
        note(&self.log, format!("pre_increment:{}", text(inc.row())));
        if inc.row().as_ref() == b"bypass" {
            *result = RowResult {
                row: inc.row().clone(),
                cells: Vec::new(),
            };
            ctx.bypass();
        } else {
            // Doubles every amount.
            for (_, _, a) in inc.columns_mut().iter_mut() {
                *a *= 2;
            }
        }
        Ok(())
    }
    async fn post_increment(
        &self,
        _: &mut ObserverContext<'_>,
        _: &Increment,
        result: &mut RowResult,
    ) -> basalt::Result<()> {
        note(
            &self.log,
            format!("post_increment:{}", counter(result, "n")),
        );
        // Reports ten times the new value.
        for c in &mut result.cells {
            let v = i64::from_be_bytes(c.value.as_ref().try_into().unwrap());
            c.value = (v * 10).to_be_bytes().to_vec().into();
        }
        Ok(())
    }
    async fn pre_append(
        &self,
        ctx: &mut ObserverContext<'_>,
        app: &mut Append,
        result: &mut RowResult,
    ) -> basalt::Result<()> {
        note(&self.log, format!("pre_append:{}", text(app.row())));
        if app.row().as_ref() == b"bypass" {
            *result = ctx.get(&Get::new("supplied"))?;
            ctx.bypass();
        }
        Ok(())
    }
    async fn post_append(
        &self,
        _: &mut ObserverContext<'_>,
        _: &Append,
        result: &mut RowResult,
    ) -> basalt::Result<()> {
        let v = result.value("f", "s").map(|v| text(v)).unwrap_or_default();
        note(&self.log, format!("post_append:{v}"));
        for c in &mut result.cells {
            c.value = c.value.to_ascii_uppercase().into();
        }
        Ok(())
    }
    async fn pre_check_and_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        cam: &mut CheckAndMutate,
        passed: &mut bool,
    ) -> basalt::Result<()> {
        note(
            &self.log,
            format!("pre_check_and_mutate:{}", text(cam.row())),
        );
        if cam.row().as_ref() == b"bypass" {
            *passed = true;
            ctx.bypass();
        }
        Ok(())
    }
    async fn post_check_and_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        cam: &CheckAndMutate,
        passed: &mut bool,
    ) -> basalt::Result<()> {
        note(&self.log, format!("post_check_and_mutate:{passed}"));
        if cam.row().as_ref() == b"invert" {
            *passed = !*passed;
        }
        Ok(())
    }
    async fn pre_exists(
        &self,
        ctx: &mut ObserverContext<'_>,
        get: &mut Get,
        exists: &mut bool,
    ) -> basalt::Result<()> {
        note(&self.log, format!("pre_exists:{}", text(get.row())));
        if get.row().as_ref() == b"ghost" {
            *exists = true;
            ctx.bypass();
        }
        Ok(())
    }
    async fn post_exists(
        &self,
        _: &mut ObserverContext<'_>,
        get: &Get,
        exists: &mut bool,
    ) -> basalt::Result<()> {
        note(&self.log, format!("post_exists:{exists}"));
        if get.row().as_ref() == b"hidden" {
            *exists = false;
        }
        Ok(())
    }
    async fn pre_get(
        &self,
        _: &mut ObserverContext<'_>,
        _: &mut Get,
        _: &mut RowResult,
    ) -> basalt::Result<()> {
        note(&self.log, "pre_get");
        Ok(())
    }
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        note(&self.log, format!("pre_batch_mutate({})", batch.len()));
        Ok(())
    }
}

#[tokio::test]
async fn increment_append_check_and_mutate_and_exists_hooks_change_bypass_and_answer() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let l = log.clone();
    register(&reg, "rmw", move || Rmw { log: l.clone() });
    let conn = open_dir(dir.path(), &reg).await;
    conn.admin()
        .create_table(with_cp("t", "rmw"))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();

    // pre_increment doubled the amount, post_increment saw the stored value and reported
    // ten times it; the increment ran the batch hooks as a put of its new value.
    let r = t
        .increment(Increment::new("c").add_column("f", "n", 3))
        .await
        .unwrap();
    assert_eq!(counter(&r, "n"), 60);
    assert_eq!(
        take(&log),
        ["pre_increment:c", "pre_batch_mutate(1)", "post_increment:6"]
    );
    let r = t
        .increment(Increment::new("c").add_column("f", "n", 1))
        .await
        .unwrap();
    assert_eq!(counter(&r, "n"), 80);
    take(&log);
    // Bypass: the supplied (empty) result, nothing written, no post hook.
    let r = t
        .increment(Increment::new("bypass").add_column("f", "n", 1))
        .await
        .unwrap();
    assert!(r.is_empty());
    assert_eq!(take(&log), ["pre_increment:bypass"]);
    assert!(!t.exists(Get::new("bypass")).await.unwrap());
    take(&log);

    // Append: post_append saw the stored value and upper-cased the result; each append ran
    // the batch hooks as a put of its new value.
    t.append(Append::new("a").add_column("f", "s", "ab"))
        .await
        .unwrap();
    let r = t
        .append(Append::new("a").add_column("f", "s", "cd"))
        .await
        .unwrap();
    assert_eq!(r.value("f", "s").map(|v| text(v)).as_deref(), Some("ABCD"));
    assert_eq!(
        take(&log),
        [
            "pre_append:a",
            "pre_batch_mutate(1)",
            "post_append:ab",
            "pre_append:a",
            "pre_batch_mutate(1)",
            "post_append:abcd"
        ]
    );
    // Bypass with a supplied result read through the context.
    t.put(Put::new("supplied").add_column("f", "s", "from-hook"))
        .await
        .unwrap();
    take(&log);
    let r = t
        .append(Append::new("bypass").add_column("f", "s", "x"))
        .await
        .unwrap();
    assert_eq!(
        r.value("f", "s").map(|v| text(v)).as_deref(),
        Some("from-hook")
    );
    assert_eq!(take(&log), ["pre_append:bypass"]);
    let stored = conn
        .table("t")
        .unwrap()
        .get(Get::new("bypass"))
        .await
        .unwrap();
    assert!(stored.is_empty());
    take(&log);

    // Check-and-mutate: pre, then (the check passing) the batch hook, then post.
    let passed = t
        .check_and_mutate(
            CheckAndMutate::new("k", "f", "q")
                .if_absent()
                .then_put(Put::new("k").add_column("f", "q", "v")),
        )
        .await
        .unwrap();
    assert!(passed);
    assert_eq!(
        take(&log),
        [
            "pre_check_and_mutate:k",
            "pre_batch_mutate(1)",
            "post_check_and_mutate:true"
        ]
    );
    // A failing check runs no batch hook.
    let passed = t
        .check_and_mutate(
            CheckAndMutate::new("k", "f", "q")
                .if_absent()
                .then_put(Put::new("k").add_column("f", "q", "w")),
        )
        .await
        .unwrap();
    assert!(!passed);
    assert_eq!(
        take(&log),
        ["pre_check_and_mutate:k", "post_check_and_mutate:false"]
    );
    // Bypass: the supplied answer, nothing checked or written.
    let passed = t
        .check_and_mutate(
            CheckAndMutate::new("bypass", "f", "q")
                .if_absent()
                .then_put(Put::new("bypass").add_column("f", "q", "v")),
        )
        .await
        .unwrap();
    assert!(passed);
    assert_eq!(take(&log), ["pre_check_and_mutate:bypass"]);
    // post_check_and_mutate changed the answer (the write happened).
    let passed = t
        .check_and_mutate(
            CheckAndMutate::new("invert", "f", "q")
                .if_absent()
                .then_put(Put::new("invert").add_column("f", "q", "v")),
        )
        .await
        .unwrap();
    assert!(!passed);
    take(&log);

    // Exists runs its own hooks, not the get hooks.
    assert!(t.exists(Get::new("k")).await.unwrap());
    assert_eq!(take(&log), ["pre_exists:k", "post_exists:true"]);
    assert!(t.exists(Get::new("ghost")).await.unwrap());
    assert_eq!(take(&log), ["pre_exists:ghost"]);
    t.put(Put::new("hidden").add_column("f", "q", "v"))
        .await
        .unwrap();
    take(&log);
    assert!(!t.exists(Get::new("hidden")).await.unwrap());
    assert_eq!(take(&log), ["pre_exists:hidden", "post_exists:true"]);
    assert!(!t.get(Get::new("hidden")).await.unwrap().is_empty());
    assert_eq!(take(&log), ["pre_get"]);

    // A batch's increments, appends and check-and-mutates run the same hooks.
    let out = t
        .batch(vec![
            BatchOp::Increment(Increment::new("c").add_column("f", "n", 1)),
            BatchOp::Append(Append::new("bypass").add_column("f", "s", "x")),
        ])
        .await
        .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
    assert_eq!(
        take(&log),
        [
            "pre_increment:c",
            "pre_batch_mutate(1)",
            "post_increment:10",
            "pre_append:bypass"
        ]
    );
    conn.close().await.unwrap();
}

/// Checks, in `post_batch_mutate`, that the batch's rows are not visible yet (through the
/// context and through the client, which takes no lock to read), and in `post_batch` that
/// they are.
struct Visibility {
    log: Log,
    table: Arc<OnceLock<basalt::Table>>,
}

impl Visibility {
    async fn seen(&self, ctx: &ObserverContext<'_>, ops: &[&Mutation]) -> String {
        let mut out = Vec::new();
        for m in ops {
            let by_ctx = !ctx.get(&Get::new(m.row())).unwrap().is_empty();
            let by_client = match self.table.get() {
                Some(t) => !t.get(Get::new(m.row())).await.unwrap().is_empty(),
                None => by_ctx,
            };
            assert_eq!(by_ctx, by_client);
            out.push(format!("{}={by_ctx}", text(m.row())));
        }
        out.join(",")
    }
}

#[async_trait]
impl RegionObserver for Visibility {
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let vetoed: Vec<usize> = batch
            .operations()
            .enumerate()
            .filter(|(_, m)| m.row().starts_with(b"veto"))
            .map(|(i, _)| i)
            .collect();
        for i in vetoed {
            {
                batch.veto(
                    i,
                    Error::Coprocessor {
                        name: "vis".into(),
                        msg: "vetoed".into(),
                    },
                );
            }
        }
        note(&self.log, format!("pre_batch_mutate({})", batch.len()));
        Ok(())
    }
    async fn post_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        ops: &[&Mutation],
    ) -> basalt::Result<()> {
        let seen = self.seen(ctx, ops).await;
        note(&self.log, format!("post_batch_mutate:{seen}"));
        Ok(())
    }
    async fn post_batch(
        &self,
        ctx: &mut ObserverContext<'_>,
        ops: &[&Mutation],
        outcome: &basalt::Result<()>,
    ) -> basalt::Result<()> {
        let seen = self.seen(ctx, ops).await;
        let outcome = match outcome {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("err({e})"),
        };
        note(&self.log, format!("post_batch:{outcome}:{seen}"));
        Ok(())
    }
    async fn post_put(&self, ctx: &mut ObserverContext<'_>, p: &Put) -> basalt::Result<()> {
        let seen = !ctx.get(&Get::new(p.row())).unwrap().is_empty();
        note(&self.log, format!("post_put:{}={seen}", text(p.row())));
        Ok(())
    }
}

fn register_visibility(reg: &Registry, log: &Log) -> Arc<OnceLock<basalt::Table>> {
    let slot: Arc<OnceLock<basalt::Table>> = Arc::default();
    let (l, s) = (log.clone(), slot.clone());
    register(reg, "vis", move || Visibility {
        log: l.clone(),
        table: s.clone(),
    });
    slot
}

#[tokio::test]
async fn post_batch_mutate_runs_before_visibility_and_post_batch_after() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let slot = register_visibility(&reg, &log);
    let conn = open_dir(dir.path(), &reg).await;
    conn.admin()
        .create_table(with_cp("t", "vis"))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    slot.set(t.clone()).ok();
    t.put(Put::new("a").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert_eq!(
        take(&log),
        [
            "pre_batch_mutate(1)",
            "post_batch_mutate:a=false",
            "post_batch:ok:a=true",
            "post_put:a=true"
        ]
    );
    // A batch: vetoed operations are left out of the later hooks.
    let out = t
        .batch(vec![
            BatchOp::Put(Put::new("b").add_column("f", "q", "v")),
            BatchOp::Put(Put::new("veto1").add_column("f", "q", "v")),
            BatchOp::Delete(Delete::new("a")),
        ])
        .await
        .unwrap();
    assert!(
        out[0].is_ok() && out[1].is_err() && out[2].is_ok(),
        "{out:?}"
    );
    assert_eq!(
        take(&log),
        [
            "pre_batch_mutate(3)",
            "post_batch_mutate:b=false,a=true",
            "post_batch:ok:b=true,a=false",
            "post_put:b=true"
        ]
    );
    // A vetoed single put: post_batch hears the veto; nothing after it runs.
    let err = t
        .put(Put::new("veto2").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    assert_eq!(
        take(&log),
        [
            "pre_batch_mutate(1)",
            "post_batch:err(coprocessor vis failed: vetoed):veto2=false"
        ]
    );
    drop(t);
    drop(slot);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn post_batch_hears_the_error_when_the_wal_append_fails() {
    let fs = FaultFs::new();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    let _slot = register_visibility(&reg, &log);
    let conn = Connection::open_with(
        Config::new("/db")
            .filesystem(fs.as_dyn())
            .coprocessor_loader(reg.clone()),
    )
    .await
    .unwrap();
    conn.admin()
        .create_table(with_cp("t", "vis"))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    t.put(
        Put::new("a")
            .add_column("f", "q", "v")
            .durability(Durability::FsyncWal),
    )
    .await
    .unwrap();
    take(&log);
    fs.fail_sync(1);
    let err = t
        .put(
            Put::new("b")
                .add_column("f", "q", "v")
                .durability(Durability::FsyncWal),
        )
        .await
        .unwrap_err();
    let log = take(&log);
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0], "pre_batch_mutate(1)");
    assert!(
        log[1].starts_with("post_batch:err(") && log[1].ends_with(":b=false"),
        "{log:?}"
    );
    assert!(log[1].contains(&err.to_string()), "{log:?} / {err}");
    // In a batch too: every operation fails, post_batch hears it once.
    let out = t
        .batch(vec![BatchOp::Put(Put::new("c").add_column("f", "q", "v"))])
        .await
        .unwrap();
    assert!(matches!(out[0], Err(Error::WritesRefused(_))), "{out:?}");
}

/// On table `t`: every put of row `r` also writes `other/r` (`f:from = r`) and increments
/// `other/count` (`f:n`), unless the row names a fault (`bad-family...`, `bad-table...`,
/// `bad-counter...`, `bad-row...`).
struct Mirror;

#[async_trait]
impl RegionObserver for Mirror {
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let rows: Vec<_> = batch
            .operations()
            .filter_map(|m| match m {
                Mutation::Put(p) => Some(p.row().clone()),
                Mutation::Delete(_) => None,
            })
            .collect();
        for row in rows {
            let (table, family) = if row.starts_with(b"bad-family") {
                ("other", "nope")
            } else if row.starts_with(b"bad-table") {
                ("missing", "f")
            } else {
                ("other", "f")
            };
            let target = if row.starts_with(b"bad-row") {
                Vec::new()
            } else {
                row.to_vec()
            };
            batch.add_mutation_to(
                tn(table),
                Mutation::Put(Put::new(target).add_column(family, "from", row.clone())),
            );
            let counter_row = if row.starts_with(b"bad-counter") {
                "text"
            } else {
                "count"
            };
            batch.add_increment_to(
                tn("other"),
                Increment::new(counter_row).add_column("f", "n", 1),
            );
        }
        Ok(())
    }
}

/// A row that makes `Mirror` add a bad write, the table named, and the reason expected.
type Case = (&'static str, &'static str, fn(&Error) -> bool);

#[tokio::test]
async fn invalid_added_writes_fail_the_batch_with_nothing_written_and_run_no_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    register(&reg, "mirror", || Mirror);
    let log: Log = Arc::default();
    let l = log.clone();
    register(&reg, "rec", move || Rmw { log: l.clone() });
    let conn = open_dir(dir.path(), &reg).await;
    conn.admin()
        .create_table(with_cp("t", "mirror"))
        .await
        .unwrap();
    // `other` has its own observer: added writes must not run it.
    conn.admin()
        .create_table(with_cp("other", "rec"))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    let other = conn.table("other").unwrap();
    other
        .put(Put::new("text").add_column("f", "n", "not a counter"))
        .await
        .unwrap();
    take(&log);

    t.put(Put::new("ok1").add_column("f", "q", "v"))
        .await
        .unwrap();
    let out = t
        .batch(vec![
            BatchOp::Put(Put::new("ok2").add_column("f", "q", "v")),
            BatchOp::Put(Put::new("ok3").add_column("f", "q", "v")),
        ])
        .await
        .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
    assert!(
        take(&log).is_empty(),
        "added writes ran the other table's hooks"
    );
    let stats = other.get(Get::new("count")).await.unwrap();
    take(&log);
    // Two increments of one counter in one batch are summed.
    assert_eq!(counter(&stats, "n"), 3);

    let cases: [Case; 4] = [
        ("bad-family1", "default:other", |e| {
            matches!(e, Error::FamilyNotFound { .. })
        }),
        ("bad-table1", "default:missing", |e| {
            matches!(e, Error::TableNotFound(_))
        }),
        ("bad-counter1", "default:other", |e| {
            matches!(e, Error::NotACounter { .. })
        }),
        ("bad-row1", "default:other", |e| {
            matches!(e, Error::InvalidRow(_))
        }),
    ];
    for (row, in_table, why) in cases {
        let err = t
            .put(Put::new(row).add_column("f", "q", "v"))
            .await
            .unwrap_err();
        match &err {
            Error::InvalidAddedMutation { table, reason } => {
                assert_eq!(table, in_table, "{err:?}");
                assert!(why(reason), "{err:?}");
            }
            other => panic!("{row}: expected InvalidAddedMutation, got {other:?}"),
        }
        // In a batch, every operation fails with it, good ones too.
        let out = t
            .batch(vec![
                BatchOp::Put(Put::new("good").add_column("f", "q", "v")),
                BatchOp::Put(Put::new(row).add_column("f", "q", "v")),
            ])
            .await
            .unwrap();
        assert!(
            out.iter()
                .all(|r| matches!(r, Err(Error::InvalidAddedMutation { .. }))),
            "{out:?}"
        );
        for r in [row, "good"] {
            assert!(!t.exists(Get::new(r)).await.unwrap(), "{r}");
            assert!(other.get(Get::new(r)).await.unwrap().is_empty(), "{r}");
        }
        let stats = other.get(Get::new("count")).await.unwrap();
        assert_eq!(counter(&stats, "n"), 3, "{row}");
    }
    let text_row = other.get(Get::new("text")).await.unwrap();
    assert_eq!(
        text_row.value("f", "n").map(|v| text(v)).as_deref(),
        Some("not a counter")
    );
    // A disabled target table is refused the same way.
    conn.admin().disable_table(&tn("other")).await.unwrap();
    let err = t
        .put(Put::new("ok4").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidAddedMutation { reason, .. } if matches!(**reason, Error::TableDisabled(_))),
        "{err:?}"
    );
    conn.admin().enable_table(&tn("other")).await.unwrap();
    assert!(!t.exists(Get::new("ok4")).await.unwrap());
    conn.close().await.unwrap();
}

fn crash_config(fs: &FaultFs, reg: &Arc<Registry>) -> Config {
    Config::new("/db")
        .filesystem(fs.as_dyn())
        .coprocessor_loader(reg.clone())
        .memstore_flush_size(4096)
        .wal_segment_size(4096)
}

/// One crash point: rows written to `t` (each mirrored into `other` with the counter) until
/// the filesystem stops at sync `crash_at`; after the crash and reopen, every row of `t` has
/// its mirror and the counter counts them, and every acknowledged row is there.
/// Returns whether the crash point was reached and how many rows survived.
async fn crash_case(crash_at: u64, kind: CrashKind) -> Result<(bool, usize), String> {
    let reg = Arc::new(Registry::new());
    register(&reg, "mirror", || Mirror);
    let fs = FaultFs::new();
    let conn = Connection::open_with(crash_config(&fs, &reg))
        .await
        .map_err(|e| e.to_string())?;
    conn.admin()
        .create_table(with_cp("t", "mirror"))
        .await
        .map_err(|e| e.to_string())?;
    conn.admin()
        .create_table(desc("other"))
        .await
        .map_err(|e| e.to_string())?;
    fs.crash_at_sync(crash_at);
    let t = conn.table("t").map_err(|e| e.to_string())?;
    let mut acked = Vec::new();
    for i in 0..40 {
        let row = format!("r{i:02}");
        let d = if i % 2 == 0 {
            Durability::FsyncWal
        } else {
            Durability::SyncWal
        };
        let put = Put::new(&row)
            .add_column("f", "q", format!("value-{i}-{}", "x".repeat(100)))
            .durability(d);
        match t.put(put).await {
            Ok(()) if d == Durability::FsyncWal || kind == CrashKind::Process => acked.push(row),
            Ok(()) => {}
            Err(_) if fs.is_stopped() => break,
            Err(e) => return Err(format!("put {row} failed before the crash: {e}")),
        }
    }
    let stopped = fs.is_stopped();
    drop(t);
    drop(conn);
    let fs = fs.crash(kind);
    let conn = Connection::open_with(crash_config(&fs, &reg))
        .await
        .map_err(|e| format!("reopen: {e}"))?;
    let rows = |name: &'static str| {
        let conn = &conn;
        async move {
            let rows: Vec<RowResult> = conn
                .table(name)
                .unwrap()
                .scan(Scan::new())
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            rows.into_iter()
                .map(|r| (text(&r.row), r))
                .collect::<BTreeMap<_, _>>()
        }
    };
    let data = rows("t").await;
    let mirror = rows("other").await;
    for row in &acked {
        if !data.contains_key(row) {
            return Err(format!("acknowledged row {row} lost"));
        }
    }
    for row in data.keys() {
        let from = mirror
            .get(row)
            .and_then(|r| r.value("f", "from"))
            .map(|v| text(v));
        if from.as_deref() != Some(row.as_str()) {
            return Err(format!("row {row} without its mirror in other"));
        }
    }
    let mirrored = mirror.keys().filter(|k| k.starts_with('r')).count();
    if mirrored != data.len() {
        return Err(format!("{mirrored} mirrors for {} rows", data.len()));
    }
    let count = mirror.get("count").map_or(0, |r| counter(r, "n"));
    if count != data.len() as i64 {
        return Err(format!("counter {count} for {} rows", data.len()));
    }
    conn.close().await.map_err(|e| e.to_string())?;
    Ok((stopped, data.len()))
}

#[tokio::test]
async fn writes_added_to_another_table_are_atomic_with_the_batch_across_crashes() {
    let mut failures = Vec::new();
    let mut cut_short = 0;
    for crash_at in 1..=60 {
        for kind in [CrashKind::Machine, CrashKind::Process] {
            match crash_case(crash_at, kind).await {
                Ok((true, rows)) if rows > 0 && rows < 40 => cut_short += 1,
                Ok(_) => {}
                Err(e) => failures.push(format!("crash at sync {crash_at} ({kind:?}): {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // The crash points fell inside the workload, with part of it recovered.
    assert!(
        cut_short > 30,
        "only {cut_short} crashes cut the workload short"
    );
}

/// Under the row lock of its row `a` (or `b`), waits for the other batch to hold its lock
/// too, then adds a put to the other's row: one of the two must wait out of lock order.
struct Crosswise {
    barrier: Arc<tokio::sync::Barrier>,
    /// Rows whose first batch already met the other at the barrier.
    met: Arc<Mutex<std::collections::BTreeSet<Vec<u8>>>>,
    /// Calls of the hook.
    calls: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait]
impl RegionObserver for Crosswise {
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let Some(m) = batch.operation(0) else {
            return Ok(());
        };
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let row = m.row().clone();
        let other = if row.as_ref() == b"a" { "b" } else { "a" };
        // The first batch of each row waits until both hold their own row.
        let first = self.met.lock().unwrap().insert(row.to_vec());
        if first
            && tokio::time::timeout(Duration::from_secs(5), self.barrier.wait())
                .await
                .is_err()
        {
            return Err(Error::bad_argument("the two batches never held both rows"));
        }
        batch.add_mutation_to(
            tn("t"),
            Mutation::Put(Put::new(other).add_column("f", "from", row)),
        );
        Ok(())
    }
}

/// Two batches each hold their own row and add a write to the other's: the one whose added
/// row lies below a stripe it holds gives up its locks, relocks both rows in order and runs
/// its hook again, so both commit and neither waits out the lock timeout.
#[tokio::test]
async fn batches_adding_to_each_others_rows_both_commit_by_relocking() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (b, c) = (barrier.clone(), calls.clone());
    let met = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    register(&reg, "cross", move || Crosswise {
        barrier: b.clone(),
        met: met.clone(),
        calls: c.clone(),
    });
    let conn = Connection::open_with(
        Config::new(dir.path())
            .coprocessor_loader(reg.clone())
            .row_lock_wait_ms(300),
    )
    .await
    .unwrap();
    conn.admin()
        .create_table(with_cp("t", "cross"))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    let (ra, rb) = tokio::join!(
        {
            let t = t.clone();
            async move { t.put(Put::new("a").add_column("f", "q", "A")).await }
        },
        {
            let t = t.clone();
            async move { t.put(Put::new("b").add_column("f", "q", "B")).await }
        }
    );
    ra.unwrap();
    rb.unwrap();
    // One of them ran its hook again, after relocking (and maybe once more, to stamp its
    // write past the other's write of the row it adds to).
    assert!(calls.load(std::sync::atomic::Ordering::SeqCst) >= 3);
    // Each wrote its row and its addition to the other.
    let a = t.get(Get::new("a")).await.unwrap();
    let b = t.get(Get::new("b")).await.unwrap();
    assert_eq!(a.value("f", "q").map(|v| text(v)).as_deref(), Some("A"));
    assert_eq!(b.value("f", "q").map(|v| text(v)).as_deref(), Some("B"));
    assert_eq!(a.value("f", "from").map(|v| text(v)).as_deref(), Some("b"));
    assert_eq!(b.value("f", "from").map(|v| text(v)).as_deref(), Some("a"));
    conn.close().await.unwrap();
}

/// Seed 004's follower counts: `follows` rows are `<follower>|<followed>` with `f:on` = `1`
/// (following) or `0` (not); the observer keeps `user_stats/<user>` `f:followers` and
/// `f:following` in the same atomic batch, from the edge's state under its row lock.
struct Follow;

#[async_trait]
impl RegionObserver for Follow {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let mut state: BTreeMap<bytes::Bytes, bool> = BTreeMap::new();
        let mut changes = Vec::new();
        for m in batch.operations() {
            let row = m.row().clone();
            let before = match state.get(&row) {
                Some(s) => *s,
                None => {
                    let r = ctx.get(&Get::new(&row).add_column("f", "on"))?;
                    r.value("f", "on").is_some_and(|v| v.as_ref() == b"1")
                }
            };
            let after = match m {
                Mutation::Put(p) => {
                    match p.cells().find(|(f, q, _, _)| *f == b"f" && *q == b"on") {
                        Some((_, _, _, v)) => v == b"1",
                        None => before,
                    }
                }
                Mutation::Delete(_) => false,
            };
            state.insert(row.clone(), after);
            if before != after {
                changes.push((row, if after { 1 } else { -1 }));
            }
        }
        for (row, delta) in changes {
            let key = text(&row);
            let Some((follower, followed)) = key.split_once('|') else {
                return Err(Error::bad_argument(format!("bad edge {key}")));
            };
            batch.add_increment_to(
                tn("user_stats"),
                Increment::new(follower).add_column("f", "following", delta),
            );
            batch.add_increment_to(
                tn("user_stats"),
                Increment::new(followed).add_column("f", "followers", delta),
            );
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_follow_and_unfollow_keep_the_counters_exact() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    register(&reg, "follow", || Follow);
    let conn = open_dir(dir.path(), &reg).await;
    conn.admin()
        .create_table(with_cp("follows", "follow"))
        .await
        .unwrap();
    conn.admin().create_table(desc("user_stats")).await.unwrap();
    let users = ["ann", "bob", "cid", "dee", "eve"];
    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let follows = conn.table("follows").unwrap();
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(task);
            for _ in 0..120 {
                let mut edge = || {
                    let a = users[rng.random_range(0..users.len())];
                    let b = users[rng.random_range(0..users.len())];
                    format!("{a}|{b}")
                };
                let (e1, e2) = (edge(), edge());
                let on = if rng.random_bool(0.5) { "1" } else { "0" };
                if e1 != e2 && rng.random_bool(0.2) {
                    // Two edges in one batch (two writes of one cell in one batch would
                    // share a timestamp and a sequence id: not done).
                    let out = follows
                        .batch(vec![
                            BatchOp::Put(Put::new(&e1).add_column("f", "on", on)),
                            BatchOp::Put(Put::new(&e2).add_column("f", "on", "1")),
                        ])
                        .await
                        .unwrap();
                    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
                } else {
                    follows
                        .put(Put::new(&e1).add_column("f", "on", on))
                        .await
                        .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let edges: Vec<RowResult> = conn
        .table("follows")
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut expect: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for e in &edges {
        if e.value("f", "on").map(|v| v.as_ref()) == Some(b"1") {
            let key = text(&e.row);
            let (a, b) = key.split_once('|').unwrap();
            expect.entry(a.to_string()).or_default().1 += 1;
            expect.entry(b.to_string()).or_default().0 += 1;
        }
    }
    assert!(expect.values().any(|(f, _)| *f > 0));
    let stats = conn.table("user_stats").unwrap();
    for u in users {
        let r = stats.get(Get::new(u)).await.unwrap();
        let got = (counter(&r, "followers"), counter(&r, "following"));
        assert_eq!(
            got,
            expect.get(u).copied().unwrap_or_default(),
            "counters of {u}"
        );
    }
    conn.close().await.unwrap();
}

/// Adds, for each put to `owner`, an owned write of `side` row `<row>/idx` (a row only the
/// owner row's writes make, as a non-unique index row).
struct Owning;

#[async_trait]
impl RegionObserver for Owning {
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let rows: Vec<bytes::Bytes> = batch.operations().map(|m| m.row().clone()).collect();
        for row in rows {
            let mut side = row.to_vec();
            side.extend_from_slice(b"/idx");
            batch.add_owned_mutation_to(
                tn("side"),
                Mutation::Put(Put::new(side).add_column("f", "from", row)),
            );
        }
        Ok(())
    }
}

/// Holds a `side` row's lock (its batch hook runs under it) until released.
struct Holding {
    entered: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl RegionObserver for Holding {
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        _: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        self.entered.notify_one();
        self.release.notified().await;
        Ok(())
    }
}

/// An owned added write commits with its batch, is checked like any added write, and takes
/// no lock of its own: a batch adding one to a row whose lock another writer holds commits
/// without waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_added_writes_commit_with_the_batch_without_a_lock_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let entered = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let (e, r) = (entered.clone(), release.clone());
    register(&reg, "owning", || Owning);
    register(&reg, "holding", move || Holding {
        entered: e.clone(),
        release: r.clone(),
    });
    let conn = open_dir(dir.path(), &reg).await;
    conn.admin()
        .create_table(with_cp("owner", "owning"))
        .await
        .unwrap();
    conn.admin()
        .create_table(with_cp("side", "holding"))
        .await
        .unwrap();
    let (owner, side) = (conn.table("owner").unwrap(), conn.table("side").unwrap());

    // Another writer holds the lock of `a/idx` in `side`.
    let holder = tokio::spawn({
        let side = side.clone();
        async move {
            side.put(Put::new("a/idx").add_column("f", "held", "1"))
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(5), entered.notified())
        .await
        .expect("the holder's hook runs under its row lock");

    // The owner's put adds an owned write to `a/idx` and commits all the same.
    tokio::time::timeout(
        Duration::from_secs(5),
        owner.put(Put::new("a").add_column("f", "q", "A")),
    )
    .await
    .expect("an owned write waits for no lock")
    .unwrap();
    let got = side.get(Get::new("a/idx")).await.unwrap();
    assert_eq!(
        got.value("f", "from").map(|v| text(v)).as_deref(),
        Some("a")
    );
    assert!(!holder.is_finished(), "the holder still holds its lock");
    release.notify_one();
    holder.await.unwrap().unwrap();
    let got = side.get(Get::new("a/idx")).await.unwrap();
    assert_eq!(
        got.value("f", "held").map(|v| text(v)).as_deref(),
        Some("1")
    );
    assert_eq!(
        got.value("f", "from").map(|v| text(v)).as_deref(),
        Some("a")
    );

    // Checked like any added write: a family `side` lacks fails the batch, nothing written.
    struct Bad;
    #[async_trait]
    impl RegionObserver for Bad {
        async fn pre_batch_mutate(
            &self,
            _: &mut ObserverContext<'_>,
            batch: &mut MiniBatch<'_>,
        ) -> basalt::Result<()> {
            batch.add_owned_mutation_to(
                tn("side"),
                Mutation::Put(Put::new("b/idx").add_column("nope", "q", "v")),
            );
            Ok(())
        }
    }
    register(&reg, "bad", || Bad);
    conn.admin()
        .create_table(with_cp("bad_owner", "bad"))
        .await
        .unwrap();
    let err = conn
        .table("bad_owner")
        .unwrap()
        .put(Put::new("b").add_column("f", "q", "B"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidAddedMutation { .. }), "{err:?}");
    let bad = conn.table("bad_owner").unwrap();
    assert!(bad.get(Get::new("b")).await.unwrap().is_empty());
    assert!(side.get(Get::new("b/idx")).await.unwrap().is_empty());
    conn.close().await.unwrap();
}

/// Records what `get_before_after` answers for the first row of each batch.
struct BeforeAfter {
    seen: Arc<Mutex<Vec<(RowResult, RowResult)>>>,
    versions: u32,
}

#[async_trait]
impl RegionObserver for BeforeAfter {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let row = batch.operations().next().map(|m| m.row().clone());
        if let Some(row) = row {
            let g = Get::new(&row).max_versions(self.versions);
            let seen = ctx.get_before_after(batch, &g)?;
            self.seen.lock().unwrap().push(seen);
        }
        Ok(())
    }
}

fn cells_of(r: &RowResult) -> Vec<(String, String, u64, String)> {
    r.cells
        .iter()
        .map(|c| {
            (
                text(&c.family),
                text(&c.qualifier),
                c.timestamp,
                text(&c.value),
            )
        })
        .collect()
}

/// A hook's view of a new row as the batch will leave it equals a get of the row once the
/// batch committed: batches of distinct puts (read without the matcher), puts of one column
/// twice, puts older than the family's TTL, deletes, over two families with their own
/// version limits, read for one version and for three.
#[tokio::test]
async fn before_and_after_of_a_new_row_match_the_committed_row() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let seen: Arc<Mutex<Vec<(RowResult, RowResult)>>> = Arc::default();
    for (name, versions) in [("seen.one", 1), ("seen.three", 3)] {
        let seen = seen.clone();
        register(&reg, name, move || BeforeAfter {
            seen: seen.clone(),
            versions,
        });
    }
    let conn = open_dir(dir.path(), &reg).await;
    for (table, cp) in [("one", "seen.one"), ("three", "seen.three")] {
        conn.admin()
            .create_table(
                TableDescriptor::new(tn(table))
                    .family(ColumnFamilyDescriptor::new("f").max_versions(3))
                    .family(ColumnFamilyDescriptor::new("g").ttl_secs(3600))
                    .coprocessor(CoprocessorDescriptor::new(cp)),
            )
            .await
            .unwrap();
    }
    let mut rng = StdRng::seed_from_u64(7);
    let hour_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        - 7_200_000;
    let (mut fast, mut slow) = (0, 0);
    for i in 0..300 {
        let table = conn
            .table(if i % 2 == 0 { "one" } else { "three" })
            .unwrap();
        let row = format!("r{i:04}");
        let mut ops = Vec::new();
        let mut distinct_puts = true;
        let mut columns = std::collections::BTreeSet::new();
        for _ in 0..rng.random_range(1..3) {
            if rng.random_bool(0.15) {
                distinct_puts = false;
                let fam = if rng.random_bool(0.5) { "f" } else { "g" };
                let q = format!("q{}", rng.random_range(0..3));
                ops.push(BatchOp::Delete(Delete::new(&row).add_columns(fam, q)));
                continue;
            }
            let mut p = Put::new(&row);
            for _ in 0..rng.random_range(1..4) {
                let fam = if rng.random_bool(0.5) { "f" } else { "g" };
                let q = format!("q{}", rng.random_range(0..3));
                let v = format!("v{}", rng.random_range(0..100));
                distinct_puts &= columns.insert((fam, q.clone()));
                p = match rng.random_range(0..4) {
                    0 => p.add_column_ts(fam, q, hour_ago + rng.random_range(0..3), v),
                    1 => p.add_column_ts(fam, q, 1_000 + rng.random_range(0..3), v),
                    _ => p.add_column(fam, q, v),
                };
            }
            ops.push(BatchOp::Put(p));
        }
        if distinct_puts {
            fast += 1;
        } else {
            slow += 1;
        }
        for r in table.batch(ops).await.unwrap() {
            r.unwrap();
        }
        let (before, after) = seen.lock().unwrap().pop().unwrap();
        let versions = if i % 2 == 0 { 1 } else { 3 };
        let got = table
            .get(Get::new(&row).max_versions(versions))
            .await
            .unwrap();
        assert!(
            before.is_empty(),
            "row {row}: before {:?}",
            cells_of(&before)
        );
        assert_eq!(cells_of(&after), cells_of(&got), "row {row}");
    }
    assert!(fast > 50 && slow > 50, "fast {fast}, slow {slow}");
}

/// Adds to each put of `<any>/<target>` a write of row `<target>`: a row delete when the put's
/// `f:do` is `del`, else a put of `f:v` with the value of `f:do`; and to each write of a row
/// `bump...` an increment of `c` `f:n` (added increments are not clocked by their row).
struct Mover;

#[async_trait]
impl RegionObserver for Mover {
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        let mut added = Vec::new();
        let mut bumps = 0;
        for m in batch.operations() {
            let row = m.row().as_ref();
            if row.starts_with(b"bump") {
                bumps += 1;
                continue;
            }
            let Some(slash) = row.iter().position(|b| *b == b'/') else {
                continue;
            };
            let (Mutation::Put(p), target) = (m, &row[slash + 1..]) else {
                continue;
            };
            let Some((_, _, _, action)) = p.cells().find(|(f, q, _, _)| *f == b"f" && *q == b"do")
            else {
                continue;
            };
            added.push(if action == b"del" {
                Mutation::Delete(Delete::new(target))
            } else {
                Mutation::Put(Put::new(target).add_column("f", "v", action))
            });
        }
        for m in added {
            batch.add_mutation(m);
        }
        for _ in 0..bumps {
            batch.add_increment_to(tn("t"), Increment::new("c").add_column("f", "n", 1));
        }
        Ok(())
    }
}

/// A hooked batch's added writes are stamped by their region's clock, which increments can
/// run ahead of the wall clock. The added rows must record that stamp: a put added right
/// after a delete added to the same row would otherwise take the delete's millisecond and
/// be hidden by it.
#[tokio::test]
async fn an_added_put_after_an_added_delete_is_seen_when_the_region_clock_runs_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    register(&reg, "mover", || Mover);
    let conn = open_dir(dir.path(), &reg).await;
    conn.admin()
        .create_table(with_cp("t", "mover"))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    t.put(Put::new("r").add_column("f", "v", "old"))
        .await
        .unwrap();
    for round in 0..3 {
        // Each increment of one counter takes its old version's timestamp plus one: a
        // burst of them, added by puts of distinct rows (which do not wait for each other),
        // runs the region's clock ahead of the wall clock.
        for i in 0..400 {
            t.put(
                Put::new(format!("bump{round}.{i}"))
                    .add_column("f", "q", "")
                    .durability(Durability::SkipWal),
            )
            .await
            .unwrap();
        }
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let counter = t.get(Get::new("c")).await.unwrap();
        let ahead = cells_of(&counter)[0].2.saturating_sub(wall);
        assert!(
            ahead >= 20,
            "round {round}: the clock ran only {ahead} ms ahead"
        );
        // Two batches of two rows, so that only the row they add to orders them.
        t.put(Put::new(format!("a{round}/r")).add_column("f", "do", "del"))
            .await
            .unwrap();
        let value = format!("new{round}");
        t.put(Put::new(format!("b{round}/r")).add_column("f", "do", value.as_str()))
            .await
            .unwrap();
        let got = t.get(Get::new("r")).await.unwrap();
        assert_eq!(
            got.value("f", "v").map(|v| text(v)),
            Some(value),
            "round {round}: the added put is hidden (the clock ran {ahead} ms ahead)"
        );
    }
    conn.close().await.unwrap();
}
