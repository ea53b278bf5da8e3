//! Admin API integration tests: namespaces, table creation (plain and pre-split), listing and
//! describing, enable/disable/delete, column-family changes, on-demand flush, and persistence
//! of all of it across close + reopen.
//!
//! Every test asserts what an HBase user expects from the equivalent `Admin` call (HBase
//! reference guide semantics), against a fresh engine in its own temporary directory.

use basalt::client::{Get, Put, Scan};
use basalt::{
    ColumnFamilyDescriptor, Connection, Error, PreSplit, SplitAlgorithm, TableDescriptor,
    TableName, DEFAULT_NAMESPACE, SYSTEM_NAMESPACE,
};
use bytes::Bytes;
use futures::TryStreamExt;

fn tn(s: &str) -> TableName {
    TableName::parse(s).unwrap()
}

fn desc(name: &str, families: &[&str]) -> TableDescriptor {
    families
        .iter()
        .fold(TableDescriptor::new(tn(name)), |d, f| {
            d.family(ColumnFamilyDescriptor::new(*f))
        })
}

async fn open(dir: &std::path::Path) -> Connection {
    Connection::open(dir).await.unwrap()
}

/// The value of `f:q` in `row`, as a string (None when absent).
async fn read(conn: &Connection, table: &str, row: &str, f: &str, q: &str) -> Option<String> {
    let t = conn.table(table).unwrap();
    let r = t.get(Get::new(row)).await.unwrap();
    r.value(f, q)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// (start, end) of every region of a table.
async fn bounds(conn: &Connection, name: &TableName) -> Vec<(Vec<u8>, Vec<u8>)> {
    conn.admin()
        .regions(name)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.start_key.to_vec(), r.end_key.to_vec()))
        .collect()
}

/// Per-region write counts of a table.
async fn writes(conn: &Connection, name: &TableName) -> Vec<u64> {
    conn.admin()
        .regions(name)
        .await
        .unwrap()
        .iter()
        .map(|r| r.write_requests)
        .collect()
}

/// The region boundaries that split keys `keys` should produce.
fn expected_bounds(keys: &[&[u8]]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut start: Vec<u8> = Vec::new();
    for k in keys {
        out.push((start.clone(), k.to_vec()));
        start = k.to_vec();
    }
    out.push((start, Vec::new()));
    out
}

/// Puts one cell into each row, one put per row.
async fn put_rows(conn: &Connection, table: &str, rows: &[&[u8]]) {
    let t = conn.table(table).unwrap();
    for r in rows {
        t.put(Put::new(r).add_column("f", "q", "v")).await.unwrap();
    }
}

#[tokio::test]
async fn create_table_has_one_region_covering_all_rows() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    assert!(admin.table_exists(&tn("t")).await.unwrap());
    assert!(admin.is_table_enabled(&tn("t")).await.unwrap());
    assert_eq!(bounds(&conn, &tn("t")).await, expected_bounds(&[]));
}

#[tokio::test]
async fn a_table_handle_resolves_its_name_on_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    // A handle taken before the table exists works once it does.
    let t = conn.table("t").unwrap();
    let err = t
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    conn.admin().create_table(desc("t", &["f"])).await.unwrap();
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert_eq!(t.name(), &tn("default:t"));
    // Another connection clone shares the engine.
    let other = conn.clone();
    assert_eq!(read(&other, "t", "r", "f", "q").await.as_deref(), Some("v"));
}

#[tokio::test]
async fn create_with_explicit_split_keys_sorts_them_into_region_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    // As HBase's createTable(desc, splitKeys): keys in any order, n keys give n + 1 regions.
    let keys = vec![b"m".to_vec(), b"c".to_vec(), b"x".to_vec()];
    conn.admin()
        .create_table_with_splits(desc("t", &["f"]), PreSplit::Keys(keys))
        .await
        .unwrap();
    assert_eq!(
        bounds(&conn, &tn("t")).await,
        expected_bounds(&[b"c", b"m", b"x"])
    );
}

#[tokio::test]
async fn explicit_split_keys_route_rows_to_their_regions() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let keys = vec![b"c".to_vec(), b"m".to_vec(), b"x".to_vec()];
    conn.admin()
        .create_table_with_splits(desc("t", &["f"]), PreSplit::Keys(keys))
        .await
        .unwrap();
    // A region's start key is inclusive and its end key exclusive.
    put_rows(
        &conn,
        "t",
        &[b"a", b"bzzz", b"c", b"lzz", b"m", b"mm", b"w", b"x", b"zzz"],
    )
    .await;
    assert_eq!(writes(&conn, &tn("t")).await, vec![2, 2, 3, 2]);
    for row in ["a", "bzzz", "c", "lzz", "m", "mm", "w", "x", "zzz"] {
        assert_eq!(read(&conn, "t", row, "f", "q").await.as_deref(), Some("v"));
    }
}

#[tokio::test]
async fn hex_string_presplit_creates_n_regions_and_routes_rows() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    conn.admin()
        .create_table_with_splits(
            desc("t", &["f"]),
            PreSplit::Algorithm(SplitAlgorithm::HexString, 4),
        )
        .await
        .unwrap();
    assert_eq!(
        bounds(&conn, &tn("t")).await,
        expected_bounds(&[b"40000000", b"80000000", b"c0000000"])
    );
    put_rows(
        &conn,
        "t",
        &[
            b"00000000",
            b"3fffffff",
            b"40000000",
            b"7fffffff",
            b"80000001",
            b"c0000000",
            b"deadbeef",
            b"ffffffff",
        ],
    )
    .await;
    assert_eq!(writes(&conn, &tn("t")).await, vec![2, 2, 1, 3]);
}

#[tokio::test]
async fn decimal_string_presplit_creates_n_regions_and_routes_rows() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    conn.admin()
        .create_table_with_splits(
            desc("t", &["f"]),
            PreSplit::Algorithm(SplitAlgorithm::DecimalString, 5),
        )
        .await
        .unwrap();
    assert_eq!(
        bounds(&conn, &tn("t")).await,
        expected_bounds(&[b"20000000", b"40000000", b"60000000", b"80000000"])
    );
    put_rows(
        &conn,
        "t",
        &[
            b"00000001",
            b"19999999",
            b"20000000",
            b"59999999",
            b"60000000",
            b"61234567",
            b"79999999",
            b"99999999",
        ],
    )
    .await;
    assert_eq!(writes(&conn, &tn("t")).await, vec![2, 1, 1, 3, 1]);
}

#[tokio::test]
async fn uniform_presplit_creates_n_regions_and_routes_rows() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    conn.admin()
        .create_table_with_splits(
            desc("t", &["f"]),
            PreSplit::Algorithm(SplitAlgorithm::Uniform, 3),
        )
        .await
        .unwrap();
    let (k1, k2) = ([0x55u8; 8], [0xAAu8; 8]);
    assert_eq!(bounds(&conn, &tn("t")).await, expected_bounds(&[&k1, &k2]));
    put_rows(
        &conn,
        "t",
        &[
            &[0x00],
            &[0x55, 0x55],
            &k1,
            &[0x80],
            &[0xAA, 0x00],
            &k2,
            &[0xFF; 12],
        ],
    )
    .await;
    assert_eq!(writes(&conn, &tn("t")).await, vec![2, 3, 2]);
}

#[tokio::test]
async fn presplit_of_sixteen_regions_spreads_hex_rows_evenly() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    conn.admin()
        .create_table_with_splits(
            desc("t", &["f"]),
            PreSplit::Algorithm(SplitAlgorithm::HexString, 16),
        )
        .await
        .unwrap();
    assert_eq!(conn.admin().regions(&tn("t")).await.unwrap().len(), 16);
    let rows: Vec<String> = (0..16u32).map(|i| format!("{i:x}1234567")).collect();
    let refs: Vec<&[u8]> = rows.iter().map(|r| r.as_bytes()).collect();
    put_rows(&conn, "t", &refs).await;
    assert_eq!(writes(&conn, &tn("t")).await, vec![1; 16]);
    // A batch counts one write per row, as HBase's writeRequestsCount: 3 rows in region 0,
    // 2 in region 1, whatever the cells per row.
    let t = conn.table("t").unwrap();
    let ops = ["01", "02", "03", "11", "12"].map(|r| {
        basalt::client::BatchOp::Put(
            Put::new(format!("{r}abcdef"))
                .add_column("f", "a", "1")
                .add_column("f", "b", "2"),
        )
    });
    for outcome in t.batch(ops.to_vec()).await.unwrap() {
        outcome.unwrap();
    }
    let w = writes(&conn, &tn("t")).await;
    assert_eq!((w[0], w[1], w[2]), (4, 3, 1), "{w:?}");
}

#[tokio::test]
async fn bad_presplits_are_rejected_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    let bad = [
        PreSplit::Algorithm(SplitAlgorithm::HexString, 1),
        PreSplit::Algorithm(SplitAlgorithm::DecimalString, 0),
        PreSplit::Keys(vec![b"a".to_vec(), Vec::new()]),
        PreSplit::Keys(vec![b"a".to_vec(), b"b".to_vec(), b"a".to_vec()]),
    ];
    for split in bad {
        let err = admin
            .create_table_with_splits(desc("t", &["f"]), split.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)), "{split:?}: {err:?}");
        assert!(!admin.table_exists(&tn("t")).await.unwrap());
    }
}

#[tokio::test]
async fn creating_an_existing_table_fails_with_table_exists() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    conn.table("t")
        .unwrap()
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    // Also with different families: the name is what collides; the table is untouched.
    let err = admin.create_table(desc("t", &["g"])).await.unwrap_err();
    assert!(matches!(err, Error::TableExists(_)), "{err:?}");
    let err = admin
        .create_table(desc("default:t", &["f"]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableExists(_)), "{err:?}");
    assert_eq!(
        admin.describe_table(&tn("t")).await.unwrap(),
        desc("t", &["f"])
    );
    assert_eq!(read(&conn, "t", "r", "f", "q").await.as_deref(), Some("v"));
}

#[tokio::test]
async fn bad_table_names_are_bad_arguments() {
    for name in [
        "", "bad name", ".meta", "-t", "ns:t:u", "n-s:t", ":t", "ns:", "t/u", "t\u{e9}",
    ] {
        let err = TableName::parse(name).unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)), "{name:?}: {err:?}");
    }
    for name in ["t", "ns_1:t-2.x", "T_0", "a.b-c"] {
        assert!(TableName::parse(name).is_ok(), "{name:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let err = conn.table("bad name").unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
}

#[tokio::test]
async fn bad_families_are_bad_arguments_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    let cf = ColumnFamilyDescriptor::new;
    let bad = [
        desc("t", &[]),
        desc("t", &[""]),
        desc("t", &["a:b"]),
        desc("t", &["a/b"]),
        desc("t", &["a\\b"]),
        desc("t", &["a\nb"]),
        desc("t", &["."]),
        desc("t", &[".hidden"]),
        desc("t", &["f", "f"]),
        TableDescriptor::new(tn("t")).family(cf("f").max_versions(0)),
        TableDescriptor::new(tn("t")).family(cf("f").max_versions(2).min_versions(3)),
        TableDescriptor::new(tn("t")).family(cf("f").ttl_secs(0)),
    ];
    for d in bad {
        let err = admin.create_table(d.clone()).await.unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)), "{d:?}: {err:?}");
        assert!(!admin.table_exists(&tn("t")).await.unwrap());
    }
    assert!(admin.list_tables().await.unwrap().is_empty());
}

#[tokio::test]
async fn create_in_unknown_namespace_fails_with_namespace_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    let err = admin
        .create_table(desc("nope:t", &["f"]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NamespaceNotFound(ns) if ns == "nope"),
        "{err:?}"
    );
    assert!(!admin.table_exists(&tn("nope:t")).await.unwrap());
}

#[tokio::test]
async fn default_and_system_namespaces_exist_and_cannot_be_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    let ns = admin.list_namespaces().await.unwrap();
    assert!(ns.contains(&DEFAULT_NAMESPACE.to_string()), "{ns:?}");
    assert!(ns.contains(&SYSTEM_NAMESPACE.to_string()), "{ns:?}");
    assert_eq!(SYSTEM_NAMESPACE, "basalt");
    for reserved in [DEFAULT_NAMESPACE, SYSTEM_NAMESPACE] {
        let err = admin.delete_namespace(reserved).await.unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)), "{reserved}: {err:?}");
        let err = admin.create_namespace(reserved).await.unwrap_err();
        assert!(
            matches!(err, Error::NamespaceExists(_)),
            "{reserved}: {err:?}"
        );
    }
    assert_eq!(admin.list_namespaces().await.unwrap(), ns);
}

#[tokio::test]
async fn create_list_and_delete_a_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_namespace("im").await.unwrap();
    assert!(admin
        .list_namespaces()
        .await
        .unwrap()
        .contains(&"im".to_string()));
    let err = admin.create_namespace("im").await.unwrap_err();
    assert!(matches!(err, Error::NamespaceExists(_)), "{err:?}");

    admin.create_table(desc("im:msgs", &["f"])).await.unwrap();
    let t = conn.table("im:msgs").unwrap();
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    assert_eq!(
        read(&conn, "im:msgs", "r", "f", "q").await.as_deref(),
        Some("v")
    );
    // A table of the same qualifier in another namespace is a different table.
    assert!(!admin.table_exists(&tn("msgs")).await.unwrap());

    admin.disable_table(&tn("im:msgs")).await.unwrap();
    admin.delete_table(&tn("im:msgs")).await.unwrap();
    admin.delete_namespace("im").await.unwrap();
    assert!(!admin
        .list_namespaces()
        .await
        .unwrap()
        .contains(&"im".to_string()));
    let err = admin.delete_namespace("im").await.unwrap_err();
    assert!(matches!(err, Error::NamespaceNotFound(_)), "{err:?}");
    let err = admin.create_table(desc("im:t2", &["f"])).await.unwrap_err();
    assert!(matches!(err, Error::NamespaceNotFound(_)), "{err:?}");
}

#[tokio::test]
async fn a_namespace_with_tables_cannot_be_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_namespace("im").await.unwrap();
    admin.create_table(desc("im:msgs", &["f"])).await.unwrap();
    // HBase: "Only empty namespaces can be removed" (a ConstraintException).
    let err = admin.delete_namespace("im").await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    assert!(admin
        .list_namespaces()
        .await
        .unwrap()
        .contains(&"im".to_string()));
    assert!(admin.table_exists(&tn("im:msgs")).await.unwrap());
    // Also when the table is disabled: it still exists.
    admin.disable_table(&tn("im:msgs")).await.unwrap();
    let err = admin.delete_namespace("im").await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    admin.delete_table(&tn("im:msgs")).await.unwrap();
    admin.delete_namespace("im").await.unwrap();
}

#[tokio::test]
async fn bad_namespace_names_are_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    for ns in ["", "a-b", "a.b", "a b", "a:b"] {
        let err = admin.create_namespace(ns).await.unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)), "{ns:?}: {err:?}");
    }
    let err = admin.delete_namespace("never_created").await.unwrap_err();
    assert!(matches!(err, Error::NamespaceNotFound(_)), "{err:?}");
}

#[tokio::test]
async fn list_and_describe_tables() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_namespace("ns").await.unwrap();
    let a = TableDescriptor::new(tn("a"))
        .family(
            ColumnFamilyDescriptor::new("f")
                .max_versions(5)
                .min_versions(1)
                .ttl_secs(3600),
        )
        .family(ColumnFamilyDescriptor::new("g").keep_deleted_cells(true))
        .memstore_flush_size(1 << 20);
    let b = desc("ns:b", &["x"]);
    admin.create_table(a.clone()).await.unwrap();
    admin.create_table(b.clone()).await.unwrap();

    let mut listed = admin.list_tables().await.unwrap();
    listed.sort_by(|x, y| x.name.cmp(&y.name));
    let mut want = vec![a.clone(), b.clone()];
    want.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(listed, want);

    assert_eq!(admin.describe_table(&tn("a")).await.unwrap(), a);
    assert_eq!(admin.describe_table(&tn("ns:b")).await.unwrap(), b);
    assert_eq!(a.name.to_string(), "default:a");
    let err = admin.describe_table(&tn("missing")).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    assert!(!admin.table_exists(&tn("missing")).await.unwrap());
    let err = admin.is_table_enabled(&tn("missing")).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
}

#[tokio::test]
async fn a_disabled_table_refuses_puts_gets_and_scans() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    let t = conn.table("t").unwrap();
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    admin.disable_table(&tn("t")).await.unwrap();
    assert!(!admin.is_table_enabled(&tn("t")).await.unwrap());
    assert!(admin.table_exists(&tn("t")).await.unwrap());

    let err = t
        .put(Put::new("r2").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableDisabled(_)), "{err:?}");
    let err = t.get(Get::new("r")).await.unwrap_err();
    assert!(matches!(err, Error::TableDisabled(_)), "{err:?}");
    let err = t.exists(Get::new("r")).await.unwrap_err();
    assert!(matches!(err, Error::TableDisabled(_)), "{err:?}");
    let err = match t.scan(Scan::new()) {
        Err(e) => e,
        Ok(s) => s.try_collect::<Vec<_>>().await.unwrap_err(),
    };
    assert!(matches!(err, Error::TableDisabled(_)), "{err:?}");
    let err = t
        .delete(basalt::client::Delete::new("r"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableDisabled(_)), "{err:?}");
    let err = t
        .increment(basalt::client::Increment::new("r").add_column("f", "c", 1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableDisabled(_)), "{err:?}");
}

#[tokio::test]
async fn enabling_a_disabled_table_serves_its_data_again() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    let t = conn.table("t").unwrap();
    t.put(Put::new("r").add_column("f", "q", "before"))
        .await
        .unwrap();
    admin.disable_table(&tn("t")).await.unwrap();
    // Disabling an already disabled table is a state error, as HBase's TableNotEnabledException.
    let err = admin.disable_table(&tn("t")).await.unwrap_err();
    assert!(matches!(err, Error::TableState { .. }), "{err:?}");

    admin.enable_table(&tn("t")).await.unwrap();
    assert!(admin.is_table_enabled(&tn("t")).await.unwrap());
    // Enabling an enabled table is a state error, as HBase's TableNotDisabledException.
    let err = admin.enable_table(&tn("t")).await.unwrap_err();
    assert!(matches!(err, Error::TableState { .. }), "{err:?}");

    assert_eq!(
        read(&conn, "t", "r", "f", "q").await.as_deref(),
        Some("before")
    );
    t.put(Put::new("r2").add_column("f", "q", "after"))
        .await
        .unwrap();
    let rows: Vec<_> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert_eq!(rows.len(), 2);
}

#[tokio::test]
async fn deleting_an_enabled_table_is_a_state_error() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    conn.table("t")
        .unwrap()
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    let err = admin.delete_table(&tn("t")).await.unwrap_err();
    assert!(matches!(err, Error::TableState { .. }), "{err:?}");
    assert!(admin.table_exists(&tn("t")).await.unwrap());
    assert_eq!(read(&conn, "t", "r", "f", "q").await.as_deref(), Some("v"));
}

#[tokio::test]
async fn deleting_a_disabled_table_removes_it_and_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    let t = conn.table("t").unwrap();
    t.put(Put::new("flushed").add_column("f", "q", "v"))
        .await
        .unwrap();
    admin.flush(&tn("t")).await.unwrap();
    t.put(Put::new("unflushed").add_column("f", "q", "v"))
        .await
        .unwrap();
    admin.disable_table(&tn("t")).await.unwrap();
    admin.delete_table(&tn("t")).await.unwrap();

    assert!(!admin.table_exists(&tn("t")).await.unwrap());
    assert!(admin.list_tables().await.unwrap().is_empty());
    let err = admin.describe_table(&tn("t")).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    let err = t.get(Get::new("flushed")).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    let err = t
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    let err = admin.delete_table(&tn("t")).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    let err = admin.enable_table(&tn("t")).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");

    // A new table of the same name starts empty.
    admin.create_table(desc("t", &["f"])).await.unwrap();
    let rows: Vec<_> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert!(rows.is_empty(), "{rows:?}");
}

#[tokio::test]
async fn a_deleted_table_stays_deleted_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = open(dir.path()).await;
        let admin = conn.admin();
        admin.create_table(desc("t", &["f"])).await.unwrap();
        conn.table("t")
            .unwrap()
            .put(Put::new("r").add_column("f", "q", "v"))
            .await
            .unwrap();
        admin.disable_table(&tn("t")).await.unwrap();
        admin.delete_table(&tn("t")).await.unwrap();
        admin.create_table(desc("t", &["f"])).await.unwrap();
        conn.close().await.unwrap();
    }
    let conn = open(dir.path()).await;
    assert_eq!(read(&conn, "t", "r", "f", "q").await, None);
}

#[tokio::test]
async fn add_column_family_accepts_writes_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    let t = conn.table("t").unwrap();
    let err = t
        .put(Put::new("r").add_column("g", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FamilyNotFound { .. }), "{err:?}");

    let g = ColumnFamilyDescriptor::new("g").max_versions(2);
    admin.add_column_family(&tn("t"), g.clone()).await.unwrap();
    assert_eq!(
        admin.describe_table(&tn("t")).await.unwrap(),
        desc("t", &["f"]).family(g.clone())
    );
    t.put(
        Put::new("r")
            .add_column("f", "q", "vf")
            .add_column("g", "q", "vg"),
    )
    .await
    .unwrap();
    assert_eq!(read(&conn, "t", "r", "g", "q").await.as_deref(), Some("vg"));
    assert_eq!(read(&conn, "t", "r", "f", "q").await.as_deref(), Some("vf"));

    // Adding it again is refused (HBase: InvalidFamilyOperationException).
    let err = admin.add_column_family(&tn("t"), g).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = admin
        .add_column_family(&tn("t"), ColumnFamilyDescriptor::new("a:b"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = admin
        .add_column_family(&tn("missing"), ColumnFamilyDescriptor::new("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
}

#[tokio::test]
async fn modify_max_versions_takes_effect_on_reads() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin
        .create_table(
            TableDescriptor::new(tn("t")).family(ColumnFamilyDescriptor::new("f").max_versions(1)),
        )
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    let versions = |r: basalt::client::RowResult| -> Vec<u64> {
        r.versions("f", "q").iter().map(|c| c.timestamp).collect()
    };

    admin
        .modify_column_family(&tn("t"), ColumnFamilyDescriptor::new("f").max_versions(3))
        .await
        .unwrap();
    for ts in 1..=4 {
        t.put(Put::new("r").add_column_ts("f", "q", ts, format!("v{ts}")))
            .await
            .unwrap();
    }
    let all = Get::new("r").max_versions(10);
    assert_eq!(versions(t.get(all.clone()).await.unwrap()), vec![4, 3, 2]);

    admin
        .modify_column_family(&tn("t"), ColumnFamilyDescriptor::new("f").max_versions(2))
        .await
        .unwrap();
    assert_eq!(
        admin.describe_table(&tn("t")).await.unwrap().families[0].max_versions,
        2
    );
    assert_eq!(versions(t.get(all.clone()).await.unwrap()), vec![4, 3]);
    // Also for data that was flushed to store files.
    admin.flush(&tn("t")).await.unwrap();
    assert_eq!(versions(t.get(all).await.unwrap()), vec![4, 3]);
}

#[tokio::test]
async fn modify_ttl_takes_effect_on_reads() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    let t = conn.table("t").unwrap();
    let hour_ago = basalt::now_ms() - 3_600_000;
    t.put(Put::new("old").add_column_ts("f", "q", hour_ago, "v"))
        .await
        .unwrap();
    t.put(Put::new("new").add_column("f", "q", "v"))
        .await
        .unwrap();
    admin
        .modify_column_family(&tn("t"), ColumnFamilyDescriptor::new("f").ttl_secs(60))
        .await
        .unwrap();
    assert_eq!(read(&conn, "t", "old", "f", "q").await, None);
    assert_eq!(
        read(&conn, "t", "new", "f", "q").await.as_deref(),
        Some("v")
    );
}

#[tokio::test]
async fn modify_of_unknown_family_or_to_bad_settings_fails() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    let err = admin
        .modify_column_family(&tn("t"), ColumnFamilyDescriptor::new("g"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FamilyNotFound { .. }), "{err:?}");
    let err = admin
        .modify_column_family(&tn("t"), ColumnFamilyDescriptor::new("f").max_versions(0))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    assert_eq!(
        admin.describe_table(&tn("t")).await.unwrap(),
        desc("t", &["f"])
    );
}

#[tokio::test]
async fn removing_the_only_family_fails() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f"])).await.unwrap();
    conn.table("t")
        .unwrap()
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    let err = admin.delete_column_family(&tn("t"), "f").await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = admin.delete_column_family(&tn("t"), "g").await.unwrap_err();
    assert!(matches!(err, Error::FamilyNotFound { .. }), "{err:?}");
    assert_eq!(
        admin.describe_table(&tn("t")).await.unwrap(),
        desc("t", &["f"])
    );
    assert_eq!(read(&conn, "t", "r", "f", "q").await.as_deref(), Some("v"));
}

#[tokio::test]
async fn removing_a_family_drops_its_data_and_refuses_writes_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin.create_table(desc("t", &["f", "g"])).await.unwrap();
    let t = conn.table("t").unwrap();
    t.put(
        Put::new("r1")
            .add_column("f", "q", "f1")
            .add_column("g", "q", "g1"),
    )
    .await
    .unwrap();
    admin.flush(&tn("t")).await.unwrap();
    t.put(
        Put::new("r2")
            .add_column("f", "q", "f2")
            .add_column("g", "q", "g2"),
    )
    .await
    .unwrap();

    admin.delete_column_family(&tn("t"), "g").await.unwrap();
    assert_eq!(
        admin.describe_table(&tn("t")).await.unwrap(),
        desc("t", &["f"])
    );

    // The remaining family is intact; the removed one is gone from reads.
    let rows: Vec<_> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert!(r.cells.iter().all(|c| c.family.as_ref() == b"f"), "{r:?}");
    }
    let err = t
        .put(Put::new("r3").add_column("g", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FamilyNotFound { .. }), "{err:?}");
    let err = t.get(Get::new("r1").add_family("g")).await.unwrap_err();
    assert!(matches!(err, Error::FamilyNotFound { .. }), "{err:?}");
    // Nothing of the failed put was written.
    assert!(t.get(Get::new("r3")).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_re_added_family_does_not_resurrect_removed_data() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = open(dir.path()).await;
        let admin = conn.admin();
        admin.create_table(desc("t", &["f", "g"])).await.unwrap();
        let t = conn.table("t").unwrap();
        t.put(Put::new("r1").add_column("g", "q", "old-file"))
            .await
            .unwrap();
        admin.flush(&tn("t")).await.unwrap();
        t.put(Put::new("r2").add_column("g", "q", "old-mem"))
            .await
            .unwrap();
        admin.delete_column_family(&tn("t"), "g").await.unwrap();
        admin
            .add_column_family(&tn("t"), ColumnFamilyDescriptor::new("g"))
            .await
            .unwrap();
        assert!(t.get(Get::new("r1")).await.unwrap().is_empty());
        assert!(t.get(Get::new("r2")).await.unwrap().is_empty());
        t.put(Put::new("r3").add_column("g", "q", "new"))
            .await
            .unwrap();
        conn.close().await.unwrap();
    }
    let conn = open(dir.path()).await;
    assert_eq!(read(&conn, "t", "r1", "g", "q").await, None);
    assert_eq!(read(&conn, "t", "r2", "g", "q").await, None);
    assert_eq!(
        read(&conn, "t", "r3", "g", "q").await.as_deref(),
        Some("new")
    );
}

#[tokio::test]
async fn a_re_added_family_does_not_resurrect_removed_data_after_an_unclean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = open(dir.path()).await;
        let admin = conn.admin();
        admin.create_table(desc("t", &["f", "g"])).await.unwrap();
        let t = conn.table("t").unwrap();
        // Only in the MemStore and the WAL when the family is removed.
        t.put(Put::new("r1").add_column("g", "q", "old"))
            .await
            .unwrap();
        admin.delete_column_family(&tn("t"), "g").await.unwrap();
        admin
            .add_column_family(&tn("t"), ColumnFamilyDescriptor::new("g"))
            .await
            .unwrap();
        t.put(Put::new("r2").add_column("g", "q", "new"))
            .await
            .unwrap();
        // Dropped without close: the engine replays its WAL on the next open.
    }
    let conn = open(dir.path()).await;
    assert_eq!(read(&conn, "t", "r1", "g", "q").await, None);
    assert_eq!(
        read(&conn, "t", "r2", "g", "q").await.as_deref(),
        Some("new")
    );
}

#[tokio::test]
async fn flush_on_demand_moves_memstores_into_store_files() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    admin
        .create_table_with_splits(desc("t", &["f", "g"]), PreSplit::Keys(vec![b"m".to_vec()]))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    for row in ["a", "b", "n", "z"] {
        t.put(
            Put::new(row)
                .add_column("f", "q", row)
                .add_column("g", "q", row),
        )
        .await
        .unwrap();
    }
    let before = admin.regions(&tn("t")).await.unwrap();
    assert_eq!(before.len(), 2);
    for r in &before {
        assert!(r.memstore_size > 0, "{r:?}");
        assert_eq!(r.store_files, 0, "{r:?}");
    }

    admin.flush(&tn("t")).await.unwrap();
    let after = admin.regions(&tn("t")).await.unwrap();
    for r in &after {
        assert_eq!(r.memstore_size, 0, "{r:?}");
        assert!(r.store_files > 0, "{r:?}");
        assert!(r.store_file_size > 0, "{r:?}");
    }
    for row in ["a", "b", "n", "z"] {
        assert_eq!(read(&conn, "t", row, "g", "q").await.as_deref(), Some(row));
    }
    // Flushing with empty MemStores is harmless.
    admin.flush(&tn("t")).await.unwrap();
    let err = admin.flush(&tn("missing")).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
}

#[tokio::test]
async fn schema_state_regions_and_data_survive_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let live = TableDescriptor::new(tn("app:live"))
        .family(ColumnFamilyDescriptor::new("f").max_versions(3))
        .family(ColumnFamilyDescriptor::new("g").ttl_secs(86_400 * 365 * 100));
    let off = desc("off", &["f"]);
    let (live_bounds, off_bounds);
    {
        let conn = open(dir.path()).await;
        let admin = conn.admin();
        admin.create_namespace("app").await.unwrap();
        admin.create_namespace("empty").await.unwrap();
        admin
            .create_table_with_splits(
                live.clone(),
                PreSplit::Algorithm(SplitAlgorithm::HexString, 4),
            )
            .await
            .unwrap();
        admin
            .create_table_with_splits(off.clone(), PreSplit::Keys(vec![b"k".to_vec()]))
            .await
            .unwrap();
        let t = conn.table("app:live").unwrap();
        for (i, row) in ["10", "50", "90", "d0"].iter().enumerate() {
            for ts in 1..=3u64 {
                t.put(Put::new(row).add_column_ts("f", "q", ts, format!("{i}-{ts}")))
                    .await
                    .unwrap();
            }
        }
        admin.flush(&tn("app:live")).await.unwrap();
        // Some data only in MemStores at close time.
        t.put(Put::new("e0").add_column("g", "q", "mem"))
            .await
            .unwrap();
        conn.table("off")
            .unwrap()
            .put(Put::new("a").add_column("f", "q", "v"))
            .await
            .unwrap();
        admin.disable_table(&tn("off")).await.unwrap();
        live_bounds = bounds(&conn, &tn("app:live")).await;
        off_bounds = bounds(&conn, &tn("off")).await;
        conn.close().await.unwrap();
    }
    let conn = open(dir.path()).await;
    let admin = conn.admin();
    let ns = admin.list_namespaces().await.unwrap();
    for want in ["app", "empty", DEFAULT_NAMESPACE, SYSTEM_NAMESPACE] {
        assert!(ns.contains(&want.to_string()), "{ns:?}");
    }
    assert_eq!(admin.describe_table(&tn("app:live")).await.unwrap(), live);
    assert_eq!(admin.describe_table(&tn("off")).await.unwrap(), off);
    assert!(admin.is_table_enabled(&tn("app:live")).await.unwrap());
    assert!(!admin.is_table_enabled(&tn("off")).await.unwrap());
    assert_eq!(bounds(&conn, &tn("app:live")).await, live_bounds);
    assert_eq!(bounds(&conn, &tn("off")).await, off_bounds);
    assert_eq!(live_bounds.len(), 4);

    let t = conn.table("app:live").unwrap();
    let rows: Vec<_> = t
        .scan(Scan::new().max_versions(10))
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let keys: Vec<Bytes> = rows.iter().map(|r| r.row.clone()).collect();
    assert_eq!(keys, vec!["10", "50", "90", "d0", "e0"]);
    for r in &rows[..4] {
        let ts: Vec<u64> = r.versions("f", "q").iter().map(|c| c.timestamp).collect();
        assert_eq!(ts, vec![3, 2, 1]);
    }
    assert_eq!(
        rows[4].value("g", "q").map(|v| v.as_ref()),
        Some(&b"mem"[..])
    );

    let err = conn
        .table("off")
        .unwrap()
        .get(Get::new("a"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableDisabled(_)), "{err:?}");
    admin.enable_table(&tn("off")).await.unwrap();
    assert_eq!(
        read(&conn, "off", "a", "f", "q").await.as_deref(),
        Some("v")
    );
}

/// `Engine::stats`: the counters a status page and a metrics scrape show move with the work
/// that should move them, and only with it.
#[tokio::test]
async fn engine_stats_count_flushes_compactions_wal_and_block_cache() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    conn.admin().create_table(desc("s", &["f"])).await.unwrap();
    let before = conn.engine().stats();
    assert_eq!((before.flushes, before.compactions), (0, 0));
    let t = conn.table("s").unwrap();
    for round in 0..3 {
        for i in 0..50 {
            t.put(
                Put::new(format!("r{i:03}"))
                    .add_column("f", "q", format!("v{round}"))
                    .durability(basalt::Durability::FsyncWal),
            )
            .await
            .unwrap();
        }
        let mid = conn.engine().stats();
        assert!(mid.memstore_bytes > 0, "{mid:?}");
        conn.admin().flush("s").await.unwrap();
    }
    let written = conn.engine().stats();
    assert!(written.wal_bytes > before.wal_bytes, "{written:?}");
    assert!(written.wal_syncs > before.wal_syncs, "{written:?}");
    assert_eq!(written.flushes, 3, "{written:?}");
    assert_eq!(written.memstore_bytes, 0, "{written:?}");
    // A flush of empty MemStores writes nothing and counts nothing.
    conn.admin().flush("s").await.unwrap();
    assert_eq!(conn.engine().stats().flushes, 3);
    conn.admin().major_compact("s").await.unwrap();
    let compacted = conn.engine().stats();
    assert_eq!(compacted.compactions, 1, "{compacted:?}");
    // The first read of the compacted file misses the cache, the second hits it.
    let r = t.get(Get::new("r007")).await.unwrap();
    assert_eq!(r.value("f", "q").map(|v| v.to_vec()), Some(b"v2".to_vec()));
    let once = conn.engine().stats();
    assert!(
        once.block_cache_misses > compacted.block_cache_misses,
        "{once:?}"
    );
    t.get(Get::new("r007")).await.unwrap();
    let twice = conn.engine().stats();
    assert!(twice.block_cache_hits > once.block_cache_hits, "{twice:?}");
    assert_eq!(twice.block_cache_misses, once.block_cache_misses);
    assert!(twice.block_cache_bytes > 0 && twice.block_cache_capacity >= twice.block_cache_bytes);
    conn.close().await.unwrap();
}
