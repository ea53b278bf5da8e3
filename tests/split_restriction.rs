//! Split restrictions (`SplitRestriction::KeyPrefix`, HBase's key-prefix split restriction):
//! a table keeps the rows sharing a key prefix in one region. Computed split points are cut
//! to their group (a region that is one group does not split), split rows and pre-split
//! keys inside a group are refused with a typed error, splits by themselves keep every group
//! whole, and the restriction survives a reopen.

use basalt::client::{BatchOp, Put, Scan};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, PreSplit, RegionInfo, SaltFormat, SaltSpec,
    SplitPolicy, SplitRestriction, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const PREFIX: u32 = 5;

/// Table `t`, small blocks, its rows kept together by their first 5 bytes.
fn desc() -> TableDescriptor {
    TableDescriptor::new(TableName::parse("t").unwrap())
        .family(ColumnFamilyDescriptor::new("f").block_size(1024))
        .split_restriction(SplitRestriction::KeyPrefix(PREFIX))
}

/// Row `i` of group `g`: the group is the first 5 bytes.
fn row(g: usize, i: usize) -> String {
    format!("g{g:03}|{i:05}")
}

async fn fill(conn: &Connection, groups: std::ops::Range<usize>, per_group: usize) {
    let t = conn.table("t").unwrap();
    for g in groups {
        let ops = (0..per_group)
            .map(|i| BatchOp::Put(Put::new(row(g, i)).add_column("f", "q", noise(g, i))))
            .collect();
        for r in t.batch(ops).await.unwrap() {
            r.unwrap();
        }
    }
}

/// 64 bytes that do not compress.
fn noise(g: usize, i: usize) -> Vec<u8> {
    let mut x = (g as u64) << 32 | i as u64 | 1;
    (0..64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

async fn regions(conn: &Connection) -> Vec<RegionInfo> {
    conn.admin().regions("t").await.unwrap()
}

/// Every boundary is a group boundary, and every row's group lies in one region.
async fn assert_groups_whole(conn: &Connection) {
    let rs = regions(conn).await;
    for r in &rs[1..] {
        assert!(
            r.start_key.len() <= PREFIX as usize,
            "boundary {:?} inside a group",
            r.start_key
        );
    }
    let rows: Vec<_> = conn
        .table("t")
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut region_of_group: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    for r in rows {
        let region = rs
            .iter()
            .rev()
            .find(|x| x.start_key.as_ref() <= r.row.as_ref())
            .unwrap()
            .id;
        let group = r.row[..PREFIX as usize].to_vec();
        let was = *region_of_group.entry(group.clone()).or_insert(region);
        assert_eq!(was, region, "group {group:?} spans two regions");
    }
}

#[tokio::test]
async fn computed_split_points_are_cut_to_their_group_and_given_rows_inside_one_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(dir.path()).split_policy(SplitPolicy::Disabled);
    let conn = Connection::open_with(config.clone()).await.unwrap();
    let admin = conn.admin();
    admin.create_table(desc()).await.unwrap();
    fill(&conn, 0..6, 300).await;
    admin.flush("t").await.unwrap();
    let one = regions(&conn).await[0].id;
    // A given row inside a group: refused, nothing changes.
    let err = admin
        .split_region("t", one, Some(b"g002|00100"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    assert!(err.to_string().contains("g002|"), "{err}");
    assert_eq!(regions(&conn).await.len(), 1);
    // The computed point (the middle block's first row) is cut to its group.
    let (lo, hi) = admin.split_region("t", one, None).await.unwrap().unwrap();
    let rs = regions(&conn).await;
    assert_eq!(rs.iter().map(|r| r.id).collect::<Vec<_>>(), [lo, hi]);
    assert_eq!(rs[1].start_key.len(), PREFIX as usize);
    assert!(rs[1].start_key.starts_with(b"g00"));
    assert_groups_whole(&conn).await;
    // A given row at a group boundary splits.
    let upper = rs[1].clone();
    let at = format!("g{:03}|", 5);
    let at = &at.as_bytes()[..PREFIX as usize];
    if upper.start_key.as_ref() < at {
        admin.split_region("t", upper.id, Some(at)).await.unwrap();
    }
    assert_groups_whole(&conn).await;
    // A region holding one group has no split point: no split, no error.
    let last = regions(&conn).await.last().unwrap().clone();
    assert_eq!(last.start_key.as_ref(), at);
    admin.compact_region("t", last.id).await.unwrap();
    assert_eq!(admin.split_region("t", last.id, None).await.unwrap(), None);
    // The restriction is in the catalog: a reopened engine keeps enforcing it.
    let count = regions(&conn).await.len();
    conn.close().await.unwrap();
    let conn = Connection::open_with(config).await.unwrap();
    let d = conn.admin().describe_table("t").await.unwrap();
    assert_eq!(
        d.split_restriction,
        Some(SplitRestriction::KeyPrefix(PREFIX))
    );
    let first = regions(&conn).await[0].clone();
    let err = conn
        .admin()
        .split_region("t", first.id, Some(b"g000|00007"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    assert_eq!(regions(&conn).await.len(), count);
    assert_groups_whole(&conn).await;
    conn.close().await.unwrap();
}

/// A computed point in a region's first group would cut at the region's start: the split
/// takes the first key after that group instead, and splits the other groups off.
#[tokio::test]
async fn a_point_in_the_first_group_splits_after_that_group() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(dir.path()).split_policy(SplitPolicy::Disabled);
    let conn = Connection::open_with(config).await.unwrap();
    let admin = conn.admin();
    let keys = PreSplit::Keys(vec![b"g000|".to_vec()]);
    admin.create_table_with_splits(desc(), keys).await.unwrap();
    fill(&conn, 0..1, 1000).await;
    fill(&conn, 1..3, 10).await;
    admin.flush("t").await.unwrap();
    let second = regions(&conn).await[1].clone();
    admin.compact_region("t", second.id).await.unwrap();
    let (_, hi) = admin
        .split_region("t", second.id, None)
        .await
        .unwrap()
        .unwrap();
    let rs = regions(&conn).await;
    let upper = rs.iter().find(|r| r.id == hi).unwrap();
    assert_eq!(upper.start_key.as_ref(), b"g000}");
    assert_groups_whole(&conn).await;
    conn.close().await.unwrap();
}

#[tokio::test]
async fn pre_split_keys_inside_a_group_and_salts_wider_than_the_prefix_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let admin = conn.admin();
    let keys = |k: &[&str]| PreSplit::Keys(k.iter().map(|s| s.as_bytes().to_vec()).collect());
    let err = admin
        .create_table_with_splits(desc(), keys(&["g001|", "g002|0"]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    assert!(!admin.table_exists("t").await.unwrap());
    let err = admin
        .create_table(desc().split_restriction(SplitRestriction::KeyPrefix(0)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    // A decimal salt of 1,000 buckets is 3 bytes wide: it must fit in the prefix.
    let salted = |n| {
        desc()
            .salt(SaltSpec::new(1000).format(SaltFormat::Decimal))
            .split_restriction(SplitRestriction::KeyPrefix(n))
    };
    let err = admin.create_table(salted(2)).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    admin.create_table(salted(3)).await.unwrap();
    admin.disable_table("t").await.unwrap();
    admin.delete_table("t").await.unwrap();
    admin
        .create_table_with_splits(desc(), keys(&["g001|", "g003"]))
        .await
        .unwrap();
    assert_eq!(regions(&conn).await.len(), 3);
    conn.close().await.unwrap();
}

/// A table that splits by itself under load keeps every group in one region.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splits_by_themselves_keep_every_group_whole() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(dir.path())
        .memstore_flush_size(256 << 10)
        .max_region_size(1 << 20)
        .split_policy(SplitPolicy::ConstantSize);
    let conn = Connection::open_with(config).await.unwrap();
    conn.admin().create_table(desc()).await.unwrap();
    fill(&conn, 0..60, 500).await;
    conn.admin().flush("t").await.unwrap();
    // About 2.9 MB of store files under a 1 MiB limit: once no region wants to split there
    // are at least 3 of them. How many more depends on when the splits ran during the fill
    // (a split early in the fill leaves regions just under the limit), so only 3 is certain.
    let deadline = Instant::now() + Duration::from_secs(60);
    while regions(&conn).await.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "the table did not split by itself"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        conn.admin().flush("t").await.unwrap();
    }
    assert_groups_whole(&conn).await;
    conn.close().await.unwrap();
}
