//! Unique region-local indexes (`IndexDef::local().row_prefix(n).unique()`): unique where
//! the value's region is known. The index's first value is the data row's key prefix, and
//! the data table's split restriction keeps the rows sharing it in one region, so that
//! region alone decides: one row per (prefix, value), the same value free in another
//! prefix. Writers racing for a value, in one region or across a split or merge that
//! completes while one of them runs its hooks, end with exactly one winner; splits and
//! merges keep index == data; a unique local index anywhere else is refused with a clear
//! error. (The concurrent proptest and the simulated crash with this index are in
//! `tests/indexes.rs`, kill -9 cycles in `tests/crash.rs`.)

use basalt::client::{Get, Put, Scan};
use basalt::coprocessors::{MiniBatch, ObserverContext, RegionObserver, Registry};
use basalt::index::{IndexAdmin, IndexDef, Query};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Error, PreSplit,
    SplitPolicy, SplitRestriction, TableDescriptor, TableName,
};
use bytes::Bytes;
use futures::TryStreamExt;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// The bytes of a conversation id: the group of rows kept in one region.
const CONV: u32 = 4;

/// An observer that runs after the index maintainer and holds a write of a row ending in
/// `|slow` for a while: the maintainer has keyed its index row with its region's start and
/// required it absent by then.
struct Pause;

#[async_trait::async_trait]
impl RegionObserver for Pause {
    async fn pre_batch_mutate(
        &self,
        _ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt::Result<()> {
        if batch.operations().any(|m| m.row().ends_with(b"|slow")) {
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        Ok(())
    }
}

async fn open(dir: &std::path::Path) -> (Connection, IndexAdmin) {
    let reg = Arc::new(Registry::new());
    let rt = basalt::index::register(&reg).unwrap();
    reg.register("pause", |_| Ok(Arc::new(Pause) as Arc<dyn RegionObserver>))
        .unwrap();
    let config = Config::new(dir)
        .coprocessor_loader(reg)
        .split_policy(SplitPolicy::Disabled);
    let conn = Connection::open_with(config).await.unwrap();
    let admin = IndexAdmin::new(&conn, rt);
    (conn, admin)
}

/// Messages `msgs`, keyed `conversation (4 bytes) | message`, each conversation in one
/// region, pre-split at `splits`.
async fn messages(conn: &Connection, splits: &[&str]) {
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(TableName::parse("msgs").unwrap())
                .family(ColumnFamilyDescriptor::new("m"))
                .split_restriction(SplitRestriction::KeyPrefix(CONV)),
            PreSplit::Keys(splits.iter().map(|s| s.as_bytes().to_vec()).collect()),
        )
        .await
        .unwrap();
}

/// At most one message per conversation and client message id, covering the body.
fn dedup() -> IndexDef {
    IndexDef::new("dedup", "msgs")
        .local()
        .row_prefix(CONV)
        .column("m", "client_id")
        .cover("m", "body")
        .unique()
}

fn message(row: &str, client_id: &str) -> Put {
    Put::new(row)
        .add_column("m", "client_id", client_id)
        .add_column("m", "body", format!("body of {row}"))
}

/// The index's answer equals the data's: one (conversation, client id) -> row each, the
/// covered body with it; eq and prefix queries agree; verify finds nothing.
async fn check(conn: &Connection, admin: &IndexAdmin) {
    let rows: Vec<_> = conn
        .table("msgs")
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut want: Vec<(Bytes, Bytes, Bytes)> = rows
        .iter()
        .filter_map(|r| {
            let id = r.value("m", "client_id")?.clone();
            Some((r.row.slice(..CONV as usize), id, r.row.clone()))
        })
        .collect();
    want.sort();
    let pairs: BTreeSet<(Bytes, Bytes)> = want.iter().map(|w| (w.0.clone(), w.1.clone())).collect();
    assert_eq!(pairs.len(), want.len(), "two rows share a value: {want:?}");
    let idx = admin.index("msgs", "dedup").await.unwrap();
    let hits = idx.hits(&Query::range(None, None)).await.unwrap();
    let got: Vec<(Bytes, Bytes, Bytes)> = hits
        .iter()
        .map(|h| {
            let v = |i: usize| h.values[i].clone().unwrap_or_default();
            (v(0), v(1), h.row.clone())
        })
        .collect();
    assert_eq!(got, want);
    for h in &hits {
        let body = &h.covered[&(Bytes::from_static(b"m"), Bytes::from_static(b"body"))];
        assert_eq!(
            body.as_ref(),
            format!("body of {}", String::from_utf8_lossy(&h.row)).as_bytes()
        );
    }
    for (conv, id, row) in &want {
        let q = Query::eq(vec![Some(conv.clone()), Some(id.clone())]);
        assert_eq!(idx.keys(&q).await.unwrap(), std::slice::from_ref(row));
    }
    let convs: BTreeSet<Bytes> = want.iter().map(|w| w.0.clone()).collect();
    for conv in convs {
        let rows: Vec<Bytes> = want
            .iter()
            .filter(|w| w.0 == conv)
            .map(|w| w.2.clone())
            .collect();
        let got = idx.keys(&Query::prefix(vec![Some(conv)])).await.unwrap();
        assert_eq!(got.len(), rows.len());
    }
    let report = admin.verify("msgs", "dedup").await.unwrap();
    assert!(report.is_consistent(), "{report:?}");
}

fn violation(r: basalt::Result<()>) {
    match r {
        Err(Error::UniqueViolation { .. }) => {}
        other => panic!("expected a unique violation, got {other:?}"),
    }
}

#[tokio::test]
async fn one_row_per_conversation_and_value_and_the_value_free_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    messages(&conn, &["c002"]).await;
    let t = conn.table("msgs").unwrap();
    // An online build over rows that repeat a value in one conversation fails and is undone.
    t.put(message("c009|m1", "D")).await.unwrap();
    t.put(message("c009|m2", "D")).await.unwrap();
    violation(admin.create(dedup()).await);
    assert!(admin.list("msgs").await.unwrap().is_empty());
    t.delete(basalt::client::Delete::new("c009|m2"))
        .await
        .unwrap();
    admin.create(dedup()).await.unwrap();
    t.put(message("c001|m1", "A")).await.unwrap();
    violation(t.put(message("c001|m2", "A")).await);
    assert!(t.get(Get::new("c001|m2")).await.unwrap().is_empty());
    // Another conversation, in another region, takes the same value.
    t.put(message("c002|m1", "A")).await.unwrap();
    // A batch whose two rows of one conversation take one value fails whole.
    let outs = t
        .batch(vec![
            basalt::client::BatchOp::Put(message("c003|m1", "B")),
            basalt::client::BatchOp::Put(message("c003|m2", "B")),
        ])
        .await
        .unwrap();
    assert!(outs
        .iter()
        .any(|o| matches!(o, Err(Error::UniqueViolation { .. }))));
    check(&conn, &admin).await;
    // A value given up is free again; rewriting a row's own value is no violation.
    t.put(message("c001|m1", "Z")).await.unwrap();
    t.put(message("c001|m1", "Z")).await.unwrap();
    t.put(message("c001|m2", "A")).await.unwrap();
    t.delete(basalt::client::Delete::new("c001|m2"))
        .await
        .unwrap();
    t.put(message("c001|m3", "A")).await.unwrap();
    check(&conn, &admin).await;
    // The definition survives a reopen, and still refuses.
    conn.close().await.unwrap();
    let (conn, admin) = open(dir.path()).await;
    let t = conn.table("msgs").unwrap();
    violation(t.put(message("c001|m4", "Z")).await);
    check(&conn, &admin).await;
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_unique_local_index_where_the_values_region_is_unknown_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    let bad = |e: Error| assert!(matches!(e, Error::BadArgument(_)), "{e:?}");
    // No row prefix: a value's rows may be in any region.
    let no_prefix = IndexDef::new("u", "msgs")
        .local()
        .column("m", "client_id")
        .unique();
    messages(&conn, &[]).await;
    let e = admin.create(no_prefix).await.unwrap_err();
    assert!(e.to_string().contains("row_prefix"), "{e}");
    // A row prefix longer than the table's groups is fine; a shorter one is not.
    bad(admin
        .create(dedup().row_prefix(CONV - 1))
        .await
        .unwrap_err());
    admin.create(dedup().row_prefix(CONV + 2)).await.unwrap();
    // A table without a split restriction.
    conn.admin()
        .create_table(
            TableDescriptor::new(TableName::parse("free").unwrap())
                .family(ColumnFamilyDescriptor::new("m")),
        )
        .await
        .unwrap();
    let mut free = dedup();
    free.table = "free".into();
    let e = admin.create(free).await.unwrap_err();
    assert!(e.to_string().contains("split restriction"), "{e}");
    assert!(admin.list("free").await.unwrap().is_empty());
    // A global index has no row prefix.
    let mut global = dedup();
    global.local = false;
    bad(admin.create(global).await.unwrap_err());
    conn.close().await.unwrap();
}

/// Adds the pausing observer after the index maintainer of `msgs`.
async fn add_pause(conn: &Connection) {
    let name = TableName::parse("msgs").unwrap();
    let mut cps = conn
        .admin()
        .describe_table(&name)
        .await
        .unwrap()
        .coprocessors;
    cps.push(
        CoprocessorDescriptor::new("pause")
            .priority(CoprocessorDescriptor::PRIORITY_USER.saturating_mul(4)),
    );
    conn.admin().set_coprocessors(&name, cps).await.unwrap();
}

/// A writer whose hooks ran in a region a split or merge then replaced races one whose
/// hooks ran in the new region, for one value: exactly one wins. The slow one's check is
/// re-keyed for the region holding its conversation at commit; without that it would read
/// where no row of the conversation is and let both in.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_racing_across_a_split_or_merge_end_with_one_winner() {
    for merge in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (conn, admin) = open(dir.path()).await;
        messages(&conn, if merge { &["c002"] } else { &[] }).await;
        admin.create(dedup()).await.unwrap();
        add_pause(&conn).await;
        let t = conn.table("msgs").unwrap();
        for row in ["c001|a", "c002|a", "c003|a"] {
            t.put(message(row, "seed")).await.unwrap();
        }
        // The slow write runs its hooks first, in the region about to be replaced.
        let slow = {
            let t = t.clone();
            tokio::spawn(async move { t.put(message("c002|slow", "X")).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let regions = t.regions().await.unwrap();
        if merge {
            conn.admin()
                .merge_regions("msgs", regions[0].id, regions[1].id)
                .await
                .unwrap();
        } else {
            conn.admin()
                .split_region("msgs", regions[0].id, Some(b"c002"))
                .await
                .unwrap();
        }
        let fast = t.put(message("c002|fast", "X")).await;
        let slow = slow.await.unwrap();
        let won = [&fast, &slow].iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "fast {fast:?}, slow {slow:?}");
        for r in [fast, slow].into_iter().filter(|r| r.is_err()) {
            violation(r);
        }
        check(&conn, &admin).await;
        conn.close().await.unwrap();
    }
}

/// Many writers of one conversation race for a few values while its region splits and
/// merges: one winner per value, and index == data after every reshape.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn splits_and_merges_under_racing_writers_keep_one_row_per_value() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    messages(&conn, &[]).await;
    admin.create(dedup()).await.unwrap();
    let t = conn.table("msgs").unwrap();
    for c in 0..8 {
        for m in 0..20 {
            t.put(message(&format!("c{c:03}|m{m:02}"), &format!("v{m}")))
                .await
                .unwrap();
        }
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let shaper = {
        let conn = conn.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let a = conn.admin();
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let regions = a.regions("msgs").await.unwrap();
                if regions.len() > 3 {
                    a.merge_regions("msgs", regions[0].id, regions[1].id)
                        .await
                        .unwrap();
                } else {
                    let at = format!("c{:03}", 1 + n % 7);
                    let r = regions
                        .iter()
                        .rev()
                        .find(|r| r.start_key.as_ref() <= at.as_bytes())
                        .unwrap();
                    if r.start_key.as_ref() != at.as_bytes() {
                        a.split_region("msgs", r.id, Some(at.as_bytes()))
                            .await
                            .unwrap();
                    }
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            n
        })
    };
    for round in 0..30 {
        let c = round % 8;
        let value = format!("r{round}");
        let writers: Vec<_> = (0..6)
            .map(|w| {
                let t = t.clone();
                let row = format!("c{c:03}|w{round}-{w}");
                let value = value.clone();
                tokio::spawn(async move { t.put(message(&row, &value)).await })
            })
            .collect();
        let mut won = 0;
        for w in writers {
            match w.await.unwrap() {
                Ok(()) => won += 1,
                Err(Error::UniqueViolation { .. }) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(won, 1, "round {round}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(shaper.await.unwrap() > 0);
    check(&conn, &admin).await;
    conn.close().await.unwrap();
}

/// A unique local index never goes ACTIVE over duplicates (issue 44): two messages of one
/// conversation holding one client id, 600 rows apart (different build batches of 256),
/// fail the build, which is undone; without them it builds.
#[tokio::test]
async fn a_unique_local_build_over_duplicates_in_different_batches_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    messages(&conn, &["c002"]).await;
    let t = conn.table("msgs").unwrap();
    let mut ops = vec![basalt::client::BatchOp::Put(message("c001|0000", "same"))];
    for i in 1..600 {
        let m = message(&format!("c001|{i:04}"), &format!("id{i}"));
        ops.push(basalt::client::BatchOp::Put(m));
    }
    ops.push(basalt::client::BatchOp::Put(message("c001|9999", "same")));
    for r in t.batch(ops).await.unwrap() {
        r.unwrap();
    }
    violation(admin.create(dedup()).await);
    assert!(admin.list("msgs").await.unwrap().is_empty());
    t.delete(basalt::client::Delete::new("c001|9999"))
        .await
        .unwrap();
    admin.create(dedup()).await.unwrap();
    check(&conn, &admin).await;
    conn.close().await.unwrap();
}
