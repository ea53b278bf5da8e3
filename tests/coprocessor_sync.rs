//! The synchronous hook forms (`pre_put_now`, `post_put_now`, `pre_delete_now`,
//! `post_delete_now`): an answer from the synchronous form replaces the async hook; `None`
//! runs the async form for that call (and the chain goes on after it, in order); each call
//! is counted once; refusals, bypasses, panics and bypass misuse are handled as for the
//! async hooks; an observer whose synchronous form answers `None` only for some calls keeps
//! both forms.

use async_trait::async_trait;
use basalt::client::{Delete, Get, Put, RowResult};
use basalt::coprocessors::{ObserverContext, RegionObserver, Registry};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Error, FailurePolicy,
    TableDescriptor, TableName,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

type Log = Arc<Mutex<Vec<String>>>;

fn tn(s: &str) -> TableName {
    TableName::parse(s).unwrap()
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

fn value_of(p: &Put) -> Vec<u8> {
    p.cells()
        .find(|(f, q, _, _)| f == b"f" && q == b"v")
        .map(|(_, _, _, v)| v.to_vec())
        .unwrap_or_default()
}

/// Answers synchronously except for rows starting with `slow`, which go to the async
/// forms (which wait once before answering). By `f:v`: `bad` is refused, `skip` bypassed,
/// `boom` panics (in whichever form runs); every put it lets through gets `f:<name>`.
struct Mixed {
    name: &'static str,
    log: Log,
}

impl Mixed {
    fn note(&self, what: &str) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:{what}", self.name));
    }

    fn judge(&self, ctx: &mut ObserverContext<'_>, put: &mut Put) -> basalt::Result<()> {
        match value_of(put).as_slice() {
            b"bad" => Err(Error::bad_argument("bad value")),
            b"skip" => {
                ctx.bypass();
                Ok(())
            }
            b"boom" => panic!("boom in {}", self.name),
            _ => {
                let p = std::mem::replace(put, Put::new("x"));
                *put = p.add_column("f", self.name, "seen");
                Ok(())
            }
        }
    }
}

fn slow(row: &[u8]) -> bool {
    row.starts_with(b"slow")
}

#[async_trait]
impl RegionObserver for Mixed {
    fn pre_put_now(
        &self,
        ctx: &mut ObserverContext<'_>,
        put: &mut Put,
    ) -> Option<basalt::Result<()>> {
        if slow(put.row()) {
            return None;
        }
        self.note("pre_put_now");
        Some(self.judge(ctx, put))
    }

    async fn pre_put(&self, ctx: &mut ObserverContext<'_>, put: &mut Put) -> basalt::Result<()> {
        tokio::task::yield_now().await;
        self.note("pre_put");
        self.judge(ctx, put)
    }

    fn post_put_now(&self, ctx: &mut ObserverContext<'_>, put: &Put) -> Option<basalt::Result<()>> {
        if slow(put.row()) {
            return None;
        }
        self.note("post_put_now");
        if value_of(put) == b"misuse" {
            ctx.bypass();
        }
        Some(Ok(()))
    }

    async fn post_put(&self, _: &mut ObserverContext<'_>, _: &Put) -> basalt::Result<()> {
        tokio::task::yield_now().await;
        self.note("post_put");
        Ok(())
    }

    fn pre_delete_now(
        &self,
        ctx: &mut ObserverContext<'_>,
        delete: &mut Delete,
    ) -> Option<basalt::Result<()>> {
        self.note("pre_delete_now");
        if delete.row().starts_with(b"keep") {
            ctx.bypass();
        }
        Some(Ok(()))
    }

    fn post_delete_now(
        &self,
        _: &mut ObserverContext<'_>,
        _: &Delete,
    ) -> Option<basalt::Result<()>> {
        self.note("post_delete_now");
        Some(Ok(()))
    }
}

/// Only synchronous forms, counting what it saw: no async body at all. Its `pre_put_now`
/// answers `None` for rows starting with `slow` (the async form, the trait's no-op
/// default, then runs for that call only).
#[derive(Default)]
struct SyncOnly {
    pre: AtomicU64,
    post: AtomicU64,
}

impl RegionObserver for SyncOnly {
    fn pre_put_now(&self, _: &mut ObserverContext<'_>, p: &mut Put) -> Option<basalt::Result<()>> {
        if slow(p.row()) {
            return None;
        }
        self.pre.fetch_add(1, Ordering::SeqCst);
        Some(Ok(()))
    }
    fn post_put_now(&self, _: &mut ObserverContext<'_>, _: &Put) -> Option<basalt::Result<()>> {
        self.post.fetch_add(1, Ordering::SeqCst);
        Some(Ok(()))
    }
}

/// A table `t` with `Mixed` observers `a` then `b` (policy `policy`), and one with the
/// `SyncOnly` observer `only`.
async fn setup(policy: FailurePolicy) -> (tempfile::TempDir, Connection, Arc<Registry>, Log) {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let log: Log = Arc::default();
    for name in ["a", "b"] {
        let log = log.clone();
        reg.register(name, move |_| {
            Ok(Arc::new(Mixed {
                name,
                log: log.clone(),
            }) as Arc<dyn RegionObserver>)
        })
        .unwrap();
    }
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(
            TableDescriptor::new(tn("t"))
                .family(ColumnFamilyDescriptor::new("f"))
                .coprocessor(CoprocessorDescriptor::new("a").policy(policy))
                .coprocessor(CoprocessorDescriptor::new("b").policy(policy)),
        )
        .await
        .unwrap();
    (dir, conn, reg, log)
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// The synchronous forms run instead of the async ones; a `None` sends that call to the
/// async form and the chain goes on in order after it; each coprocessor's hook call is
/// counted once either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_forms_answer_and_none_falls_back_in_chain_order() {
    let (_dir, conn, reg, log) = setup(FailurePolicy::FailOperation).await;
    let t = conn.table("t").unwrap();
    t.put(Put::new("fast").add_column("f", "v", "1"))
        .await
        .unwrap();
    assert_eq!(
        take(&log),
        [
            "a:pre_put_now",
            "b:pre_put_now",
            "a:post_put_now",
            "b:post_put_now"
        ]
    );
    t.put(Put::new("slow1").add_column("f", "v", "2"))
        .await
        .unwrap();
    assert_eq!(
        take(&log),
        ["a:pre_put", "b:pre_put", "a:post_put", "b:post_put"]
    );
    for row in ["fast", "slow1"] {
        let r = t.get(Get::new(row)).await.unwrap();
        assert_eq!(val(&r, "a").as_deref(), Some("seen"), "{row}");
        assert_eq!(val(&r, "b").as_deref(), Some("seen"), "{row}");
    }
    // Still both forms after a `None`: the next fast put is synchronous again.
    t.put(Put::new("fast2").add_column("f", "v", "3"))
        .await
        .unwrap();
    assert_eq!(
        take(&log),
        [
            "a:pre_put_now",
            "b:pre_put_now",
            "a:post_put_now",
            "b:post_put_now"
        ]
    );
    for m in reg.metrics(&tn("t")) {
        // post_open, 3 puts x (pre_put, post_put), and the learnt defaults, called once
        // each: pre_batch_mutate, post_batch_mutate, post_batch, pre_get, post_get.
        assert_eq!((m.calls, m.errors), (1 + 3 * 2 + 5, 0), "{m:?}");
    }
    conn.close().await.unwrap();
}

/// A refusal from a synchronous form fails the put and writes nothing; a bypass skips the
/// write and the rest of the chain; a bypass in a synchronous post-hook is a fault.
#[tokio::test]
async fn synchronous_refusal_bypass_and_misuse() {
    let (_dir, conn, reg, log) = setup(FailurePolicy::FailOperation).await;
    let t = conn.table("t").unwrap();
    let err = t
        .put(Put::new("r1").add_column("f", "v", "bad"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Coprocessor { ref name, .. } if name == "a"),
        "{err}"
    );
    assert!(!t.exists(Get::new("r1")).await.unwrap());
    assert_eq!(take(&log), ["a:pre_put_now"]);
    t.put(Put::new("r2").add_column("f", "v", "skip"))
        .await
        .unwrap();
    assert!(!t.exists(Get::new("r2")).await.unwrap());
    assert_eq!(take(&log), ["a:pre_put_now"]);
    // The same through the async forms.
    t.put(Put::new("slow-skip").add_column("f", "v", "skip"))
        .await
        .unwrap();
    assert!(!t.exists(Get::new("slow-skip")).await.unwrap());
    let err = t
        .put(Put::new("r3").add_column("f", "v", "misuse"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("does not support bypass"), "{err}");
    // The put committed before its post-hook failed.
    assert!(t.exists(Get::new("r3")).await.unwrap());
    let a = reg.metrics(&tn("t")).remove(0);
    assert_eq!((a.refusals, a.faults), (1, 1), "{a:?}");
    conn.close().await.unwrap();
}

/// A panic in a synchronous form is a fault: it fails the put under `FailOperation`, and
/// under `Unload` unloads the coprocessor and lets the put go on through the rest.
#[tokio::test]
async fn synchronous_panics_are_faults_under_each_policy() {
    let (_dir, conn, reg, _log) = setup(FailurePolicy::FailOperation).await;
    let t = conn.table("t").unwrap();
    let err = t
        .put(Put::new("r1").add_column("f", "v", "boom"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
    assert!(!t.exists(Get::new("r1")).await.unwrap());
    assert_eq!(reg.metrics(&tn("t"))[0].panics, 1);
    conn.close().await.unwrap();

    let (_dir, conn, reg, log) = setup(FailurePolicy::Unload).await;
    let t = conn.table("t").unwrap();
    t.put(Put::new("r1").add_column("f", "v", "boom"))
        .await
        .unwrap();
    // `a` panicked and was unloaded, then `b` heard the put and panicked too: both are
    // gone and the put went on.
    let m = reg.metrics(&tn("t"));
    assert!(!m[0].loaded && !m[1].loaded, "{m:?}");
    assert_eq!((m[0].panics, m[1].panics), (1, 1), "{m:?}");
    assert!(t.exists(Get::new("r1")).await.unwrap());
    take(&log);
    t.put(Put::new("r2").add_column("f", "v", "ok"))
        .await
        .unwrap();
    assert!(take(&log).is_empty());
    assert!(t.exists(Get::new("r2")).await.unwrap());
    conn.close().await.unwrap();
}

/// Deletes: the synchronous pre-hook can bypass, the post-hook hears the delete.
#[tokio::test]
async fn synchronous_delete_hooks() {
    let (_dir, conn, _reg, log) = setup(FailurePolicy::FailOperation).await;
    let t = conn.table("t").unwrap();
    for row in ["keep1", "drop1"] {
        t.put(Put::new(row).add_column("f", "v", "1"))
            .await
            .unwrap();
    }
    take(&log);
    t.delete(Delete::new("keep1")).await.unwrap();
    assert_eq!(take(&log), ["a:pre_delete_now"]);
    assert!(t.exists(Get::new("keep1")).await.unwrap());
    t.delete(Delete::new("drop1")).await.unwrap();
    assert_eq!(
        take(&log),
        [
            "a:pre_delete_now",
            "b:pre_delete_now",
            "a:post_delete_now",
            "b:post_delete_now"
        ]
    );
    assert!(!t.exists(Get::new("drop1")).await.unwrap());
    conn.close().await.unwrap();
}

/// An observer with only synchronous forms runs on every put from many writers, each call
/// counted once, also after one of its calls answered `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_only_observer_sees_every_put() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Arc::new(Registry::new());
    let only = Arc::new(SyncOnly::default());
    let o = only.clone();
    reg.register("only", move |_| Ok(o.clone() as Arc<dyn RegionObserver>))
        .unwrap();
    let conn = open(dir.path(), &reg).await;
    conn.admin()
        .create_table(
            TableDescriptor::new(tn("s"))
                .family(ColumnFamilyDescriptor::new("f"))
                .coprocessor(CoprocessorDescriptor::new("only")),
        )
        .await
        .unwrap();
    let t = conn.table("s").unwrap();
    // One put first: the batch hooks' defaults are learnt by one call each, and the async
    // `pre_put` default its `None` ran is not learnt (the synchronous form still runs).
    t.put(Put::new("slow-first").add_column("f", "v", "x"))
        .await
        .unwrap();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let t = t.clone();
            tokio::spawn(async move {
                for i in 0..100 {
                    t.put(Put::new(format!("w{w}-{i:03}")).add_column("f", "v", "x"))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(only.pre.load(Ordering::SeqCst), 400);
    assert_eq!(only.post.load(Ordering::SeqCst), 401);
    let m = reg.metrics(&tn("s")).remove(0);
    // post_open, 401 x (pre_put, post_put), and the three batch hooks' first calls.
    assert_eq!((m.calls, m.errors), (1 + 802 + 3, 0), "{m:?}");
    conn.close().await.unwrap();
}
