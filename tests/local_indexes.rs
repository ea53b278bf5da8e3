//! Region-local indexes (`IndexDef::local`): their rows live in the data table's regions
//! (the reserved `.local` family), hidden from user reads and writes; queries fan out per
//! region and merge in index order; splits and merges move each row to its data row's
//! region, so index == data holds through them, concurrently with writes and queries, and
//! across a reopen. (The concurrent proptest and the simulated crash with local indexes are
//! in `tests/indexes.rs`; kill -9 cycles in `tests/crash.rs`.)

use basalt::client::{Delete, Get, Put, RowResult, Scan};
use basalt::coprocessors::Registry;
use basalt::index::val;
use basalt::index::{Index, IndexAdmin, IndexDef, Query};
use basalt::keys::local::LOCAL_FAMILY;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, PreSplit, SaltSpec, TableDescriptor,
    TableName,
};
use bytes::Bytes;
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::sync::Arc;

async fn open(dir: &std::path::Path) -> (Connection, IndexAdmin) {
    let reg = Arc::new(Registry::new());
    let rt = basalt::index::register(&reg).unwrap();
    let conn = Connection::open_with(Config::new(dir).coprocessor_loader(reg))
        .await
        .unwrap();
    let admin = IndexAdmin::new(&conn, rt);
    (conn, admin)
}

async fn table(conn: &Connection, name: &str, splits: &[&str]) {
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(TableName::parse(name).unwrap())
                .family(ColumnFamilyDescriptor::new("f")),
            PreSplit::Keys(splits.iter().map(|s| s.as_bytes().to_vec()).collect()),
        )
        .await
        .unwrap();
}

fn by_city(table: &str) -> IndexDef {
    IndexDef::new("by_city", table)
        .column("f", "city")
        .cover("f", "name")
        .local()
}

fn city(i: u32) -> String {
    format!("c{:02}", (i * 7) % 13)
}

/// The answers the data gives for a full forward query: (city, row, covered name), in
/// index order.
async fn expected(conn: &Connection, table: &str) -> Vec<(Bytes, Bytes, Option<Bytes>)> {
    let rows: Vec<RowResult> = conn
        .table(table)
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut out: Vec<_> = rows
        .iter()
        .filter_map(|r| {
            let c = r.value("f", "city")?.clone();
            Some((c, r.row.clone(), r.value("f", "name").cloned()))
        })
        .collect();
    out.sort();
    out
}

async fn answers(idx: &Index) -> Vec<(Bytes, Bytes, Option<Bytes>)> {
    idx.hits(&Query::range(None, None))
        .await
        .unwrap()
        .into_iter()
        .map(|h| {
            let name = h
                .covered
                .get(&(Bytes::from_static(b"f"), Bytes::from_static(b"name")))
                .cloned();
            (h.values[0].clone().unwrap_or_default(), h.row, name)
        })
        .collect()
}

/// Every query shape answers as the data does, and verify finds nothing.
async fn check(conn: &Connection, admin: &IndexAdmin, table: &str) {
    let want = expected(conn, table).await;
    let idx = admin.index(table, "by_city").await.unwrap();
    assert_eq!(answers(&idx).await, want);
    let keys =
        |w: &[(Bytes, Bytes, Option<Bytes>)]| w.iter().map(|a| a.1.clone()).collect::<Vec<_>>();
    let rev = idx
        .keys(&Query::range(None, None).reverse().limit(5))
        .await
        .unwrap();
    let want_rev: Vec<Bytes> = keys(&want).into_iter().rev().take(5).collect();
    assert_eq!(rev, want_rev);
    let eq = idx.keys(&Query::eq(vec![val("c03")])).await.unwrap();
    let want_eq: Vec<Bytes> = want
        .iter()
        .filter(|a| a.0.as_ref() == b"c03")
        .map(|a| a.1.clone())
        .collect();
    assert_eq!(eq, want_eq);
    let range = idx
        .keys(&Query::range(Some(vec![val("c02")]), Some(vec![val("c05")])).limit(7))
        .await
        .unwrap();
    let want_range: Vec<Bytes> = want
        .iter()
        .filter(|a| a.0.as_ref() >= b"c02".as_slice() && a.0.as_ref() < b"c05".as_slice())
        .take(7)
        .map(|a| a.1.clone())
        .collect();
    assert_eq!(range, want_range);
    let rows = idx.rows(&Query::eq(vec![val("c03")])).await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.row.clone()).collect::<Vec<_>>(),
        want_eq
    );
    let report = admin.verify(table, "by_city").await.unwrap();
    assert!(report.is_consistent(), "{report:?}");
    assert_eq!(report.index_rows as usize, want.len());
    // Each local row lies in the region of its data row.
    let regions = conn.table(table).unwrap().regions().await.unwrap();
    let local: Vec<RowResult> = conn
        .table(table)
        .unwrap()
        .scan(Scan::new().add_family(LOCAL_FAMILY))
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    for r in &local {
        let owner = basalt::keys::local::owner(&r.row).unwrap();
        let region = regions
            .iter()
            .find(|g| {
                g.start_key.as_ref() <= owner
                    && (g.end_key.is_empty() || owner < g.end_key.as_ref())
            })
            .unwrap();
        assert!(
            r.row.starts_with(&region.start_key),
            "{r:?} outside {region:?}"
        );
    }
}

#[tokio::test]
async fn local_rows_are_hidden_from_user_reads_and_refuse_user_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    table(&conn, "users", &["m"]).await;
    admin.create(by_city("users")).await.unwrap();
    let t = conn.table("users").unwrap();
    t.put(
        Put::new("ada")
            .add_column("f", "city", "Paris")
            .add_column("f", "name", "Ada"),
    )
    .await
    .unwrap();
    t.put(Put::new("tom").add_column("f", "city", "Oslo"))
        .await
        .unwrap();
    // Reads without a column selection see the data rows only.
    let all: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all
        .iter()
        .all(|r| r.cells.iter().all(|c| c.family.as_ref() == b"f")));
    assert_eq!(t.get(Get::new("ada")).await.unwrap().cells.len(), 2);
    // Two local rows, one per region, each in its data row's region.
    let local: Vec<RowResult> = t
        .scan(Scan::new().add_family(LOCAL_FAMILY))
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(local.len(), 2);
    assert!(local[0].row.starts_with(b"\0"));
    assert!(local[1].row.starts_with(b"m\0"));
    // A user write to the family is refused; a whole-row delete of a local row's key does
    // not reach it.
    let err = t
        .put(Put::new("x").add_column(LOCAL_FAMILY, "m", "v"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("local index rows"), "{err}");
    let err = t
        .delete(Delete::new(&local[0].row).add_family(LOCAL_FAMILY))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("local index rows"), "{err}");
    t.delete(Delete::new(&local[0].row)).await.unwrap();
    check(&conn, &admin, "users").await;
    // Unique or salted local indexes are refused with a clear error.
    let err = admin
        .create(
            IndexDef::new("u", "users")
                .column("f", "name")
                .local()
                .unique(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::BadArgument(_)) && err.to_string().contains("global"),
        "{err}"
    );
    let err = admin
        .create(
            IndexDef::new("s", "users")
                .column("f", "name")
                .local()
                .salt_buckets(4),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err}");
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_removed_covered_column_leaves_the_local_row_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    table(&conn, "t", &[]).await;
    admin.create(by_city("t")).await.unwrap();
    let t = conn.table("t").unwrap();
    t.put(
        Put::new("r")
            .add_column("f", "city", "c01")
            .add_column("f", "name", "n"),
    )
    .await
    .unwrap();
    t.delete(Delete::new("r").add_columns("f", "name"))
        .await
        .unwrap();
    check(&conn, &admin, "t").await;
    assert_eq!(expected(&conn, "t").await.len(), 1);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn splits_and_merges_keep_the_local_index_equal_to_the_data() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (conn, admin) = open(dir.path()).await;
        table(&conn, "t", &["k300"]).await;
        let t = conn.table("t").unwrap();
        // Rows before the index (built online) and after it.
        for i in 0..200u32 {
            t.put(
                Put::new(format!("k{i:03}"))
                    .add_column("f", "city", city(i))
                    .add_column("f", "name", format!("n{i}")),
            )
            .await
            .unwrap();
        }
        admin.create(by_city("t")).await.unwrap();
        for i in 200..600u32 {
            t.put(Put::new(format!("k{i:03}")).add_column("f", "city", city(i)))
                .await
                .unwrap();
        }
        check(&conn, &admin, "t").await;
        let a = conn.admin();
        for row in ["k100", "k450", "k050", "k520"] {
            let regions = t.regions().await.unwrap();
            let r = regions
                .iter()
                .find(|g| {
                    g.start_key.as_ref() <= row.as_bytes()
                        && (g.end_key.is_empty() || row.as_bytes() < g.end_key.as_ref())
                })
                .unwrap();
            a.split_region("t", r.id, Some(row.as_bytes()))
                .await
                .unwrap();
            // Writes that change, move and remove index rows between the splits.
            for i in (0..600u32).step_by(37) {
                t.put(Put::new(format!("k{i:03}")).add_column("f", "city", city(i + 1)))
                    .await
                    .unwrap();
            }
            t.delete(Delete::new(format!("k{:03}", row.len() * 11)))
                .await
                .unwrap();
            check(&conn, &admin, "t").await;
        }
        assert_eq!(t.regions().await.unwrap().len(), 6);
        // Merge everything back, checking after each merge.
        loop {
            let regions = t.regions().await.unwrap();
            if regions.len() == 1 {
                break;
            }
            a.merge_regions("t", regions[0].id, regions[1].id)
                .await
                .unwrap();
            t.put(Put::new("k007").add_column("f", "city", "c99"))
                .await
                .unwrap();
            check(&conn, &admin, "t").await;
        }
        conn.close().await.unwrap();
    }
    let (conn, admin) = open(dir.path()).await;
    check(&conn, &admin, "t").await;
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queries_at_a_snapshot_answer_like_the_data_during_splits_merges_and_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    table(&conn, "t", &[]).await;
    admin.create(by_city("t")).await.unwrap();
    let t = conn.table("t").unwrap();
    for i in 0..300u32 {
        t.put(Put::new(format!("k{i:03}")).add_column("f", "city", city(i)))
            .await
            .unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (t, stop) = (t.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let row = format!("k{:03}", (i * 13) % 300);
                t.put(Put::new(row).add_column("f", "city", city(i)))
                    .await
                    .unwrap();
                i += 1;
            }
        })
    };
    let shaper = {
        let (conn, t, stop) = (conn.clone(), t.clone(), stop.clone());
        tokio::spawn(async move {
            let a = conn.admin();
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let regions = t.regions().await.unwrap();
                if regions.len() < 4 {
                    let row = format!("k{:03}", 20 + (n * 71) % 260);
                    if let Some(r) = regions.iter().find(|g| {
                        g.start_key.as_ref() < row.as_bytes()
                            && (g.end_key.is_empty() || row.as_bytes() < g.end_key.as_ref())
                    }) {
                        a.split_region("t", r.id, Some(row.as_bytes()))
                            .await
                            .unwrap();
                    }
                } else {
                    a.merge_regions("t", regions[1].id, regions[2].id)
                        .await
                        .unwrap();
                }
                n += 1;
            }
            n
        })
    };
    let idx = admin.index("t", "by_city").await.unwrap();
    for _ in 0..60 {
        let snap = conn.snapshot().unwrap();
        let rows: Vec<RowResult> = t
            .scan_at(Scan::new(), &snap)
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let mut want: Vec<(Bytes, Bytes)> = rows
            .iter()
            .filter_map(|r| Some((r.value("f", "city")?.clone(), r.row.clone())))
            .collect();
        want.sort();
        let got: Vec<(Bytes, Bytes)> = idx
            .hits(&Query::range(None, None).at(&snap))
            .await
            .unwrap()
            .into_iter()
            .map(|h| (h.values[0].clone().unwrap_or_default(), h.row))
            .collect();
        assert_eq!(got, want);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.await.unwrap();
    let reshapes = shaper.await.unwrap();
    assert!(reshapes > 0);
    check(&conn, &admin, "t").await;
    conn.close().await.unwrap();
}

#[tokio::test]
async fn dropping_a_local_index_removes_its_rows_only() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    table(&conn, "t", &["k5"]).await;
    admin.create(by_city("t")).await.unwrap();
    admin
        .create(IndexDef::new("by_name", "t").column("f", "name").local())
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    for i in 0..10u32 {
        t.put(
            Put::new(format!("k{i}"))
                .add_column("f", "city", city(i))
                .add_column("f", "name", format!("n{i}")),
        )
        .await
        .unwrap();
    }
    let count = || async {
        t.scan(Scan::new().add_family(LOCAL_FAMILY))
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .len()
    };
    assert_eq!(count().await, 20);
    admin.drop_index("t", "by_name").await.unwrap();
    assert_eq!(count().await, 10);
    check(&conn, &admin, "t").await;
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_local_index_on_a_salted_table_answers_across_its_buckets_in_index_order() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    conn.admin()
        .create_table(
            TableDescriptor::new(TableName::parse("events").unwrap())
                .family(ColumnFamilyDescriptor::new("f"))
                .salt(SaltSpec::new(8)),
        )
        .await
        .unwrap();
    admin.create(by_city("events")).await.unwrap();
    let salted = conn.salted_table("events").unwrap();
    let mut want = BTreeMap::new();
    for i in 0..200u32 {
        let key = format!("e{i:03}");
        salted
            .put(Put::new(&key).add_column("f", "city", city(i)))
            .await
            .unwrap();
        want.insert((city(i), key), ());
    }
    assert_eq!(
        conn.table("events").unwrap().regions().await.unwrap().len(),
        8
    );
    check(&conn, &admin, "events").await;
    let idx = admin.index("events", "by_city").await.unwrap();
    let got: Vec<Bytes> = idx.keys(&Query::eq(vec![val("c04")])).await.unwrap();
    // Equal values sort by data row: the salted physical key, bucket first.
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(got, sorted);
    let mut logical: Vec<Vec<u8>> = got.iter().map(|g| g[1..].to_vec()).collect();
    logical.sort();
    let wanted: Vec<Vec<u8>> = want
        .keys()
        .filter(|(c, _)| c == "c04")
        .map(|(_, k)| k.as_bytes().to_vec())
        .collect();
    assert_eq!(logical, wanted);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_split_row_that_leaves_no_room_for_local_rows_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    table(&conn, "t", &["a"]).await;
    admin.create(by_city("t")).await.unwrap();
    let t = conn.table("t").unwrap();
    t.put(Put::new("a\0x").add_column("f", "city", "c1"))
        .await
        .unwrap();
    let regions = t.regions().await.unwrap();
    let err = conn
        .admin()
        .split_region("t", regions[1].id, Some(b"a\0x"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("local index rows"), "{err}");
    check(&conn, &admin, "t").await;
    // A table with such a region refuses a local index.
    table(&conn, "u", &["a", "a\0b"]).await;
    let err = admin.create(by_city("u")).await.unwrap_err();
    assert!(
        err.to_string().contains("no room for local index rows"),
        "{err}"
    );
    conn.close().await.unwrap();
}

/// An observer that runs after the index maintainer and holds a write of row `r-slow` for a
/// while: the maintainer has keyed the row's index rows with its region's start by then.
struct Pause;

#[async_trait::async_trait]
impl basalt::coprocessors::RegionObserver for Pause {
    async fn pre_batch_mutate(
        &self,
        _ctx: &mut basalt::coprocessors::ObserverContext<'_>,
        batch: &mut basalt::coprocessors::MiniBatch<'_>,
    ) -> basalt::Result<()> {
        if batch.operations().any(|m| m.row().as_ref() == b"r-slow") {
            tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        }
        Ok(())
    }
}

async fn open_with_pause(dir: &std::path::Path) -> (Connection, IndexAdmin) {
    let reg = Arc::new(Registry::new());
    let rt = basalt::index::register(&reg).unwrap();
    reg.register("pause", |_| {
        Ok(Arc::new(Pause) as Arc<dyn basalt::coprocessors::RegionObserver>)
    })
    .unwrap();
    let conn = Connection::open_with(Config::new(dir).coprocessor_loader(reg))
        .await
        .unwrap();
    let admin = IndexAdmin::new(&conn, rt);
    (conn, admin)
}

/// A split or merge that completes while a write's hooks run (after the maintainer keyed
/// its index rows with the old region's start): the commit re-keys them for the region of
/// their data row, and the old index row is deleted where the split or merge moved it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_split_or_merge_during_a_write_leaves_its_index_rows_in_its_region() {
    for merge in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (conn, admin) = open_with_pause(dir.path()).await;
        table(&conn, "t", if merge { &["m"] } else { &[] }).await;
        let pause = basalt::CoprocessorDescriptor::new("pause")
            .priority(basalt::CoprocessorDescriptor::PRIORITY_USER.saturating_mul(4));
        admin.create(by_city("t")).await.unwrap();
        let mut cps = conn
            .admin()
            .describe_table(&TableName::parse("t").unwrap())
            .await
            .unwrap()
            .coprocessors;
        cps.push(pause);
        conn.admin()
            .set_coprocessors(&TableName::parse("t").unwrap(), cps)
            .await
            .unwrap();
        let t = conn.table("t").unwrap();
        for row in ["a", "k", "r-slow", "z"] {
            t.put(Put::new(row).add_column("f", "city", "c01"))
                .await
                .unwrap();
        }
        let slow = {
            let t = t.clone();
            tokio::spawn(async move {
                t.put(Put::new("r-slow").add_column("f", "city", "c02"))
                    .await
                    .unwrap();
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let regions = t.regions().await.unwrap();
        if merge {
            conn.admin()
                .merge_regions("t", regions[0].id, regions[1].id)
                .await
                .unwrap();
        } else {
            conn.admin()
                .split_region("t", regions[0].id, Some(b"m"))
                .await
                .unwrap();
        }
        slow.await.unwrap();
        check(&conn, &admin, "t").await;
        // The regions split and merge again with every local row in place.
        let regions = t.regions().await.unwrap();
        if merge {
            conn.admin()
                .split_region("t", regions[0].id, Some(b"q"))
                .await
                .unwrap();
        } else {
            conn.admin()
                .merge_regions("t", regions[0].id, regions[1].id)
                .await
                .unwrap();
        }
        check(&conn, &admin, "t").await;
        conn.close().await.unwrap();
    }
}

#[tokio::test]
async fn the_local_row_family_refuses_every_user_write_and_its_removal() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, admin) = open(dir.path()).await;
    table(&conn, "t", &[]).await;
    admin.create(by_city("t")).await.unwrap();
    let t = conn.table("t").unwrap();
    let refused = |e: basalt::Error| assert!(e.to_string().contains("local index rows"), "{e}");
    refused(
        t.increment(basalt::client::Increment::new("x").add_column(LOCAL_FAMILY, "n", 1))
            .await
            .unwrap_err(),
    );
    refused(
        t.append(basalt::client::Append::new("x").add_column(LOCAL_FAMILY, "n", "v"))
            .await
            .unwrap_err(),
    );
    let outcomes = t
        .batch(vec![basalt::client::BatchOp::Put(
            Put::new("x").add_column(LOCAL_FAMILY, "m", "v"),
        )])
        .await
        .unwrap();
    refused(outcomes.into_iter().next().unwrap().unwrap_err());
    let name = TableName::parse("t").unwrap();
    refused(
        conn.admin()
            .delete_column_family(&name, LOCAL_FAMILY)
            .await
            .unwrap_err(),
    );
    // After the last local index is dropped the family stays, still refused.
    admin.drop_index("t", "by_city").await.unwrap();
    refused(
        t.put(Put::new("x").add_column(LOCAL_FAMILY, "m", "v"))
            .await
            .unwrap_err(),
    );
    conn.close().await.unwrap();
}
