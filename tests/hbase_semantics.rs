//! Where Basalt follows HBase on points an HBase user would otherwise trip over: filters and
//! versions, check-and-mutate timestamps and empty expected values, a family delete after
//! column deletes in one `Delete`, raw scans, `KEEP_DELETED_CELLS => TTL`, and the time
//! range of increments and appends. Each test names the HBase test or source it follows and
//! checks its result at every stage a cell goes through: in the MemStore, flushed to a
//! file, major-compacted, and after a reopen.

use basalt::cell::CellType;
use basalt::client::{
    Append, CheckAndMutate, CompareOp, Delete, Get, Increment, Put, RowResult, Scan, Table,
    TimeRange,
};
use basalt::now_ms;
use basalt::{
    ColumnFamilyDescriptor, Comparator, Connection, Filter, KeepDeletedCells, TableDescriptor,
    TableName,
};
use futures::TryStreamExt;
use tempfile::TempDir;

/// Where the cells are when a check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    MemStore,
    Flushed,
    MajorCompacted,
    Reopened,
}

const STAGES: [Stage; 4] = [
    Stage::MemStore,
    Stage::Flushed,
    Stage::MajorCompacted,
    Stage::Reopened,
];

/// A table `t` of the given families in a fresh directory, moved through the stages.
struct Env {
    dir: TempDir,
    conn: Connection,
    table: Table,
}

impl Env {
    async fn new(families: Vec<ColumnFamilyDescriptor>) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path()).await.unwrap();
        let desc = families
            .into_iter()
            .fold(TableDescriptor::new(name()), |d, f| d.family(f));
        conn.admin().create_table(desc).await.unwrap();
        let table = conn.table("t").unwrap();
        Env { dir, conn, table }
    }

    /// Moves the table's cells to `stage` (each stage follows the one before).
    async fn enter(&mut self, stage: Stage) {
        let admin = self.conn.admin();
        match stage {
            Stage::MemStore => {}
            Stage::Flushed => admin.flush(&name()).await.unwrap(),
            Stage::MajorCompacted => {
                admin.flush(&name()).await.unwrap();
                admin.major_compact(&name()).await.unwrap();
            }
            Stage::Reopened => {
                self.conn.close().await.unwrap();
                self.conn = Connection::open(self.dir.path()).await.unwrap();
                self.table = self.conn.table("t").unwrap();
            }
        }
    }
}

fn name() -> TableName {
    TableName::parse("t").unwrap()
}

fn cf(name: &str) -> ColumnFamilyDescriptor {
    ColumnFamilyDescriptor::new(name)
}

/// `(timestamp, value)` of every cell.
fn versions(r: &RowResult) -> Vec<(u64, String)> {
    r.cells
        .iter()
        .map(|c| (c.timestamp, String::from_utf8_lossy(&c.value).into_owned()))
        .collect()
}

async fn scan_all(t: &Table, scan: Scan) -> Vec<RowResult> {
    t.scan(scan).unwrap().try_collect().await.unwrap()
}

/// HBASE-17125, `TestFromClientSide5#testReadWithFilter`: the family's versions reach the
/// filter before the read's max versions caps what it included, so a filter matching an
/// older version finds it with 1, 2 or 3 versions; a version beyond the family's max
/// versions is never seen.
#[tokio::test]
async fn filters_see_every_version_the_family_keeps_before_the_version_cap() {
    let mut env = Env::new(vec![cf("f").max_versions(3), cf("g").max_versions(2)]).await;
    for (ts, v) in [(1, "value-a"), (2, "value-b"), (3, "value-c")] {
        let put = Put::new("r")
            .add_column_ts("f", "q", ts, v)
            .add_column_ts("g", "q", ts, v);
        env.table.put(put).await.unwrap();
    }
    let only_a = Filter::Value(CompareOp::Equal, Comparator::Substring("value-a".into()));
    let only_b = Filter::Value(CompareOp::Equal, Comparator::Substring("value-b".into()));
    for stage in STAGES {
        env.enter(stage).await;
        let t = &env.table;
        for n in 1..=3 {
            let g = Get::new("r").add_family("f").max_versions(n);
            let got = t.get(g.clone().filter(only_a.clone())).await.unwrap();
            assert_eq!(
                versions(&got),
                [(1, "value-a".into())],
                "{stage:?}, {n} versions"
            );
            let rows = scan_all(
                t,
                Scan::new()
                    .add_family("f")
                    .max_versions(n)
                    .filter(only_a.clone()),
            )
            .await;
            assert_eq!(rows.len(), 1, "{stage:?}");
            assert_eq!(versions(&rows[0]), [(1, "value-a".into())], "{stage:?}");
        }
        // The cap counts included cells: two of three versions pass, one is kept.
        let not_c = Filter::Value(CompareOp::NotEqual, Comparator::Substring("value-c".into()));
        let got = t
            .get(Get::new("r").add_family("f").filter(not_c))
            .await
            .unwrap();
        assert_eq!(versions(&got), [(2, "value-b".into())], "{stage:?}");
        // A TimestampsFilter naming an older timestamp, with the default one version.
        let g = Get::new("r")
            .add_family("f")
            .filter(Filter::Timestamps(vec![2]));
        assert_eq!(versions(&t.get(g).await.unwrap()), [(2, "value-b".into())]);
        // Family g keeps 2 versions: ts 1 is beyond them, whatever the filter.
        let g = Get::new("r").add_family("g").max_versions(3);
        let got = t.get(g.clone().filter(only_a.clone())).await.unwrap();
        assert!(got.is_empty(), "{stage:?}: {got:?}");
        let got = t.get(g.filter(only_b.clone())).await.unwrap();
        assert_eq!(versions(&got), [(2, "value-b".into())], "{stage:?}");
    }
}

/// HBASE-14054 (`HRegion#checkAndMutate`): a passing check stamps the put no older than the
/// checked cell, so a cell dated in the future does not hide the write the check let
/// through.
#[tokio::test]
async fn check_and_mutate_writes_no_older_than_the_checked_cell() {
    let mut env = Env::new(vec![cf("f").max_versions(3)]).await;
    let future = now_ms() + 86_400_000;
    env.table
        .put(Put::new("r").add_column_ts("f", "q", future, "v0"))
        .await
        .unwrap();
    let mut expected = "v0".to_string();
    for (i, stage) in STAGES.into_iter().enumerate() {
        env.enter(stage).await;
        let t = &env.table;
        let next = format!("v{}", i + 1);
        let cam = CheckAndMutate::new("r", "f", "q")
            .if_value(CompareOp::Equal, &expected)
            .then_put(Put::new("r").add_column("f", "q", &next));
        assert!(t.check_and_mutate(cam).await.unwrap(), "{stage:?}");
        let got = t.get(Get::new("r")).await.unwrap();
        assert_eq!(versions(&got), [(future, next.clone())], "{stage:?}");
        expected = next;
    }
    // A put with its own timestamp keeps it.
    let cam = CheckAndMutate::new("r", "f", "q")
        .if_value(CompareOp::Equal, &expected)
        .then_put(Put::new("r").add_column_ts("f", "q", 5, "old"));
    assert!(env.table.check_and_mutate(cam).await.unwrap());
    let got = env.table.get(Get::new("r").max_versions(3)).await.unwrap();
    assert_eq!(got.cells.last().map(|c| c.timestamp), Some(5));
}

/// `TestHRegion#testCheckAndMutate_WithEmptyRowValue`: an empty expected value matches an
/// absent column or a zero-length value (`NotEqual` the opposite), and "if absent" passes on
/// a zero-length value.
#[tokio::test]
async fn an_empty_expected_value_means_no_value() {
    let mut env = Env::new(vec![cf("f")]).await;
    env.table
        .put(Put::new("empty").add_column("f", "q", ""))
        .await
        .unwrap();
    env.table
        .put(Put::new("full").add_column("f", "q", "x"))
        .await
        .unwrap();
    for stage in STAGES {
        env.enter(stage).await;
        let t = &env.table;
        // The action writes another column, so the checked state stays.
        let check = |row: &str, cam: CheckAndMutate| {
            cam.then_put(Put::new(row).add_column("f", "other", "1"))
        };
        for (row, eq_empty, ne_empty, absent, eq_x) in [
            ("missing", true, false, true, false),
            ("empty", true, false, true, false),
            ("full", false, true, false, true),
        ] {
            let c = |cam| check(row, cam);
            let base = || CheckAndMutate::new(row, "f", "q");
            assert_eq!(
                t.check_and_mutate(c(base().if_value(CompareOp::Equal, "")))
                    .await
                    .unwrap(),
                eq_empty,
                "{stage:?} {row} == empty"
            );
            assert_eq!(
                t.check_and_mutate(c(base().if_value(CompareOp::NotEqual, "")))
                    .await
                    .unwrap(),
                ne_empty,
                "{stage:?} {row} != empty"
            );
            assert_eq!(
                t.check_and_mutate(c(base().if_absent())).await.unwrap(),
                absent,
                "{stage:?} {row} absent"
            );
            assert_eq!(
                t.check_and_mutate(c(base().if_value(CompareOp::Equal, "x")))
                    .await
                    .unwrap(),
                eq_x,
                "{stage:?} {row} == x"
            );
        }
    }
}

/// HBase 2's `Delete#addFamily` ("overrides previous calls to addColumn and addColumns for
/// the family"): the column markers added before it are dropped, so a version above the
/// family marker stays visible.
#[tokio::test]
async fn a_family_delete_replaces_the_column_deletes_before_it() {
    let mut env = Env::new(vec![cf("f").max_versions(3), cf("g")]).await;
    env.table
        .put(
            Put::new("r")
                .add_column_ts("f", "q", 100, "kept")
                .add_column_ts("f", "p", 40, "gone")
                .add_column_ts("g", "q", 100, "g-gone"),
        )
        .await
        .unwrap();
    let d = Delete::new("r")
        .add_columns_ts("f", "q", 200)
        .add_columns_ts("g", "q", 200)
        .add_family_ts("f", 50);
    assert_eq!(d.kinds().len(), 2); // g:q's marker and the family's
    env.table.delete(d).await.unwrap();
    for stage in STAGES {
        env.enter(stage).await;
        let got = env.table.get(Get::new("r")).await.unwrap();
        assert_eq!(versions(&got), [(100, "kept".into())], "{stage:?}");
    }
}

/// `Scan#setRaw` (the shell's `scan 't', {RAW => true, VERSIONS => 10}`;
/// `TestFromClientSide#testRawScanRespectsVersions`): delete markers come back as cells of
/// their kind, with the versions they mask; a flush drops the versions masked in a family
/// that does not keep deleted cells, and a major compaction its markers too.
#[tokio::test]
async fn raw_scans_show_delete_markers_until_a_major_compaction_removes_them() {
    let mut env = Env::new(vec![
        cf("f").max_versions(3),
        cf("k").max_versions(3).keep_deleted_cells(true),
    ])
    .await;
    for fam in ["f", "k"] {
        let t = &env.table;
        t.put(Put::new("r").add_column_ts(fam, "q", 1, "one"))
            .await
            .unwrap();
        t.put(Put::new("r").add_column_ts(fam, "q", 2, "two"))
            .await
            .unwrap();
        t.delete(Delete::new("r").add_columns_ts(fam, "q", 2))
            .await
            .unwrap();
        t.put(Put::new("r").add_column_ts(fam, "q", 3, "three"))
            .await
            .unwrap();
    }
    type Raw = Vec<(String, u64, CellType, String)>;
    let raw = |r: &RowResult| -> Raw {
        r.cells
            .iter()
            .map(|c| {
                (
                    String::from_utf8_lossy(&c.family).into_owned(),
                    c.timestamp,
                    c.kind,
                    String::from_utf8_lossy(&c.value).into_owned(),
                )
            })
            .collect()
    };
    let cell = |f: &str, ts, kind, v: &str| (f.to_string(), ts, kind, v.to_string());
    let k: Raw = vec![
        // k keeps deleted cells: everything stays.
        cell("k", 3, CellType::Put, "three"),
        cell("k", 2, CellType::DeleteColumn, ""),
        cell("k", 2, CellType::Put, "two"),
        cell("k", 1, CellType::Put, "one"),
    ];
    let f_in_memstore: Raw = vec![
        // In the MemStore the masked versions are still there.
        cell("f", 3, CellType::Put, "three"),
        cell("f", 2, CellType::DeleteColumn, ""),
        cell("f", 2, CellType::Put, "two"),
        cell("f", 1, CellType::Put, "one"),
    ];
    let f_flushed: Raw = vec![
        cell("f", 3, CellType::Put, "three"),
        cell("f", 2, CellType::DeleteColumn, ""),
    ];
    let f_compacted: Raw = vec![cell("f", 3, CellType::Put, "three")];
    for stage in STAGES {
        env.enter(stage).await;
        let rows = scan_all(&env.table, Scan::new().raw(true).max_versions(10)).await;
        assert_eq!(rows.len(), 1, "{stage:?}");
        let f = match stage {
            Stage::MemStore => &f_in_memstore,
            Stage::Flushed => &f_flushed,
            Stage::MajorCompacted | Stage::Reopened => &f_compacted,
        };
        let want: Raw = f.iter().chain(&k).cloned().collect();
        assert_eq!(raw(&rows[0]), want, "{stage:?}");
        // Max versions counts puts only, and the put past it ends the column; a normal
        // scan shows no marker.
        let rows = scan_all(&env.table, Scan::new().raw(true).add_family("k")).await;
        assert_eq!(
            raw(&rows[0]),
            [
                cell("k", 3, CellType::Put, "three"),
                cell("k", 2, CellType::DeleteColumn, "")
            ],
            "{stage:?}"
        );
        let rows = scan_all(&env.table, Scan::new().max_versions(10)).await;
        assert!(rows[0].cells.iter().all(|c| c.kind == CellType::Put));
    }
}

/// The reference guide's "Keeping Deleted Cells" example, through its stages
/// (`RawScanQueryMatcher`: a raw scan applies no marker; `MinorCompactionScanQueryMatcher`,
/// which HBase's flushes use too: a flush drops the puts a marker in it masks): puts at 10,
/// 12 and 14 and a column delete at 11 all show in a raw scan until the flush, which drops
/// the masked put; the major compaction drops the marker. With keep-deleted-cells all four
/// stay. A raw scan counts puts only against its versions, and the first put past them ends
/// the column, older markers included. Family markers show in the empty qualifier's
/// column, and the puts they mask in their own columns until the flush.
#[tokio::test]
async fn raw_scans_show_masked_puts_until_a_flush_or_compaction_drops_them() {
    let mut env = Env::new(vec![
        cf("e").max_versions(1000),
        cf("k").max_versions(1000).keep_deleted_cells(true),
    ])
    .await;
    for fam in ["e", "k"] {
        for ts in [10, 12, 14] {
            let put = Put::new("r1").add_column_ts(fam, "c1", ts, "value");
            env.table.put(put).await.unwrap();
        }
        let d = Delete::new("r1").add_columns_ts(fam, "c1", 11);
        env.table.delete(d).await.unwrap();
    }
    // Row r2: a family delete and a family version delete, each masking a put.
    let t = &env.table;
    t.put(Put::new("r2").add_column_ts("e", "a", 5, "old"))
        .await
        .unwrap();
    t.put(Put::new("r2").add_column_ts("e", "b", 30, "at 30"))
        .await
        .unwrap();
    t.put(Put::new("r2").add_column_ts("e", "b", 40, "new"))
        .await
        .unwrap();
    t.delete(Delete::new("r2").add_family_ts("e", 20))
        .await
        .unwrap();
    t.delete(Delete::new("r2").add_family_version("e", 30))
        .await
        .unwrap();
    type Raw = Vec<(String, String, u64, CellType)>;
    let raw = |rows: &[RowResult]| -> Raw {
        rows.iter()
            .flat_map(|r| &r.cells)
            .map(|c| {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                let column = format!("{}:{}", text(&c.family), text(&c.qualifier));
                (text(&c.row), column, c.timestamp, c.kind)
            })
            .collect()
    };
    let cell = |row: &str, column: &str, ts, kind| (row.to_string(), column.to_string(), ts, kind);
    let (put, dc) = (CellType::Put, CellType::DeleteColumn);
    let k_r1: Raw = vec![
        cell("r1", "k:c1", 14, put),
        cell("r1", "k:c1", 12, put),
        cell("r1", "k:c1", 11, dc),
        cell("r1", "k:c1", 10, put),
    ];
    for stage in STAGES {
        env.enter(stage).await;
        let t = &env.table;
        let e_r1: Raw = match stage {
            Stage::MemStore => vec![
                cell("r1", "e:c1", 14, put),
                cell("r1", "e:c1", 12, put),
                cell("r1", "e:c1", 11, dc),
                cell("r1", "e:c1", 10, put),
            ],
            Stage::Flushed => vec![
                cell("r1", "e:c1", 14, put),
                cell("r1", "e:c1", 12, put),
                cell("r1", "e:c1", 11, dc),
            ],
            Stage::MajorCompacted | Stage::Reopened => {
                vec![cell("r1", "e:c1", 14, put), cell("r1", "e:c1", 12, put)]
            }
        };
        let e_r2: Raw = match stage {
            Stage::MemStore => vec![
                cell("r2", "e:", 30, CellType::DeleteFamilyVersion),
                cell("r2", "e:", 20, CellType::DeleteFamily),
                cell("r2", "e:a", 5, put),
                cell("r2", "e:b", 40, put),
                cell("r2", "e:b", 30, put),
            ],
            Stage::Flushed => vec![
                cell("r2", "e:", 30, CellType::DeleteFamilyVersion),
                cell("r2", "e:", 20, CellType::DeleteFamily),
                cell("r2", "e:b", 40, put),
            ],
            Stage::MajorCompacted | Stage::Reopened => vec![cell("r2", "e:b", 40, put)],
        };
        let want: Raw = e_r1.iter().chain(&k_r1).chain(&e_r2).cloned().collect();
        let got = raw(&scan_all(t, Scan::new().raw(true).max_versions(1000)).await);
        assert_eq!(got, want, "{stage:?}");

        // Versions: the marker is no version, but the put past them ends the column.
        let k = |n| Scan::new().raw(true).add_family("k").max_versions(n);
        assert_eq!(raw(&scan_all(t, k(2)).await), k_r1[..3], "{stage:?}");
        assert_eq!(raw(&scan_all(t, k(1)).await), k_r1[..1], "{stage:?}");

        // Reads that are not raw see none of it, at every stage.
        let got = t
            .get(Get::new("r1").add_family("e").max_versions(1000))
            .await;
        assert_eq!(
            versions(&got.unwrap()),
            [(14, "value".into()), (12, "value".into())],
            "{stage:?}"
        );
        let got = t.get(Get::new("r2").max_versions(1000)).await.unwrap();
        assert_eq!(versions(&got), [(40, "new".into())], "{stage:?}");
    }
}

/// `KeepDeletedCells.TTL` (its javadoc: deleted cells are kept until the delete marker
/// expires by the TTL; `TestKeepDeletes` for the other modes): a marker younger than
/// the TTL keeps what it masks for time-range reads that end before it (as `TRUE`), and
/// major compactions keep it; once older than the TTL it behaves as `FALSE` and the next
/// major compaction removes it.
#[tokio::test]
async fn keep_deleted_cells_ttl_keeps_deleted_cells_until_the_marker_expires() {
    let hour = 3_600_000;
    let now = now_ms();
    let mut env = Env::new(vec![cf("f")
        .max_versions(3)
        .min_versions(2)
        .ttl_secs(3600)
        .keep_deleted_cells(KeepDeletedCells::Ttl)])
    .await;
    let t = &env.table;
    // Row "young": deleted 10 minutes ago, its versions just before.
    t.put(Put::new("young").add_column_ts("f", "q", now - 30 * 60_000, "y1"))
        .await
        .unwrap();
    t.delete(Delete::new("young").add_columns_ts("f", "q", now - 10 * 60_000))
        .await
        .unwrap();
    // Row "old": versions and their delete older than the TTL (min versions keep the
    // versions themselves from expiring).
    t.put(Put::new("old").add_column_ts("f", "q", now - 3 * hour, "o1"))
        .await
        .unwrap();
    t.delete(Delete::new("old").add_columns_ts("f", "q", now - 2 * hour))
        .await
        .unwrap();
    let before = |row: &str, ts: u64| Get::new(row).time_range(TimeRange::new(0, ts).unwrap());
    for stage in STAGES {
        env.enter(stage).await;
        let t = &env.table;
        // Young marker: a read ending before it sees the deleted version; a current read not.
        let got = t.get(before("young", now - 20 * 60_000)).await.unwrap();
        assert_eq!(
            versions(&got),
            [(now - 30 * 60_000, "y1".into())],
            "{stage:?}"
        );
        assert!(
            t.get(Get::new("young")).await.unwrap().is_empty(),
            "{stage:?}"
        );
        // Expired marker: as FALSE, it masks the version for every read.
        let got = t.get(before("old", now - 2 * hour - 60_000)).await.unwrap();
        assert!(got.is_empty(), "{stage:?}: {got:?}");
        // Raw: the young marker and what it masks stay through a major compaction; the old
        // marker's masked version goes at the flush (which sees both), the marker itself at
        // the major compaction.
        let rows = scan_all(t, Scan::new().raw(true).max_versions(10)).await;
        let kinds: Vec<(String, CellType)> = rows
            .iter()
            .flat_map(|r| {
                r.cells
                    .iter()
                    .map(|c| (String::from_utf8_lossy(&r.row).into_owned(), c.kind))
            })
            .collect();
        let young = [
            ("young".to_string(), CellType::DeleteColumn),
            ("young".to_string(), CellType::Put),
        ];
        let mut want = match stage {
            Stage::MemStore => vec![
                ("old".to_string(), CellType::DeleteColumn),
                ("old".to_string(), CellType::Put),
            ],
            Stage::Flushed => vec![("old".to_string(), CellType::DeleteColumn)],
            Stage::MajorCompacted | Stage::Reopened => Vec::new(),
        };
        want.extend(young);
        assert_eq!(kinds, want, "{stage:?}");
    }
}

/// `Increment#setTimeRange` and `Append#setTimeRange` (`HRegion#reckonDeltas` reads the
/// current values with the operation's time range): a column with no version inside the
/// range counts as absent.
#[tokio::test]
async fn increments_and_appends_read_inside_their_time_range() {
    let mut env = Env::new(vec![cf("f").max_versions(100)]).await;
    env.table
        .put(
            Put::new("r")
                .add_column_ts("f", "n", 100, 5i64.to_be_bytes())
                .add_column_ts("f", "s", 100, "ab"),
        )
        .await
        .unwrap();
    for stage in STAGES {
        env.enter(stage).await;
        let t = &env.table;
        // Outside the range: absent, so 0 + 1 and "" + "c".
        let inc = Increment::new("r")
            .add_column("f", "n", 1)
            .time_range(TimeRange::new(0, 50).unwrap());
        let got = t.increment(inc).await.unwrap();
        assert_eq!(got.cells[0].value.as_ref(), 1i64.to_be_bytes(), "{stage:?}");
        let app = Append::new("r")
            .add_column("f", "s", "c")
            .time_range(TimeRange::new(0, 50).unwrap());
        let got = t.append(app).await.unwrap();
        assert_eq!(got.cells[0].value.as_ref(), b"c", "{stage:?}");
        // Inside the range: the version at 100.
        let inc = Increment::new("r")
            .add_column("f", "n", 1)
            .time_range(TimeRange::at(100));
        let got = t.increment(inc).await.unwrap();
        assert_eq!(got.cells[0].value.as_ref(), 6i64.to_be_bytes(), "{stage:?}");
        let app = Append::new("r")
            .add_column("f", "s", "c")
            .time_range(TimeRange::at(100));
        let got = t.append(app).await.unwrap();
        assert_eq!(got.cells[0].value.as_ref(), b"abc", "{stage:?}");
    }
}

/// `Mutation#setTTL` (cell TTLs; `TestHRegion#testCellTTLs`): a cell expires once its
/// timestamp plus its own TTL is below the clock, whatever the family's min versions, and
/// the family's TTL still applies. Basalt counts an expired cell among the max versions, so
/// an older version does not come back when a newer one expires (see docs/hbase.md).
#[tokio::test]
async fn cell_ttls_expire_single_versions() {
    let now = now_ms();
    let mut env = Env::new(vec![
        cf("f").max_versions(3).min_versions(2),
        cf("g").max_versions(1),
    ])
    .await;
    for fam in ["f", "g"] {
        env.table
            .put(Put::new("r").add_column_ts(fam, "q", now - 2_000, "old"))
            .await
            .unwrap();
        env.table
            .put(
                Put::new("r")
                    .add_column_ts(fam, "q", now - 1_000, "short")
                    .ttl_ms(500),
            )
            .await
            .unwrap();
        env.table
            .put(
                Put::new("r")
                    .add_column_ts(fam, "p", now, "long")
                    .ttl_ms(3_600_000),
            )
            .await
            .unwrap();
    }
    for stage in STAGES {
        env.enter(stage).await;
        let t = &env.table;
        let f = t
            .get(Get::new("r").add_family("f").max_versions(3))
            .await
            .unwrap();
        assert_eq!(
            versions(&f),
            [(now, "long".into()), (now - 2_000, "old".into())],
            "{stage:?}"
        );
        // g keeps one version: the expired one took it.
        let g = t
            .get(Get::new("r").add_family("g").max_versions(3))
            .await
            .unwrap();
        assert_eq!(versions(&g), [(now, "long".into())], "{stage:?}");
    }
    // A cell that expires while it is read.
    let t = &env.table;
    let soon = Put::new("s").add_column("f", "q", "v").ttl_ms(300);
    t.put(soon).await.unwrap();
    assert_eq!(t.get(Get::new("s")).await.unwrap().cells.len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(t.get(Get::new("s")).await.unwrap().is_empty());
    // An increment's new value carries the TTL; a zero TTL is refused.
    let inc = Increment::new("c").add_column("f", "n", 1).ttl_ms(300);
    t.increment(inc).await.unwrap();
    assert_eq!(t.get(Get::new("c")).await.unwrap().cells.len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(t.get(Get::new("c")).await.unwrap().is_empty());
    let zero = Put::new("z").add_column("f", "q", "v").ttl_ms(0);
    assert!(matches!(
        t.put(zero).await,
        Err(basalt::Error::BadArgument(_))
    ));
}

/// Server timestamps never go backwards within a region (issue 44): increments are stamped
/// `max(now, old + 1)` (`HRegion#reckonDeltas`), so a burst of them within one millisecond
/// runs ahead of the wall clock; a put or a delete at server time that follows is stamped no
/// older than them, so it is not hidden under them. HBase's round trips rarely fit in a
/// millisecond; Basalt's embedded ones do.
#[tokio::test]
async fn server_time_writes_after_a_burst_of_increments_are_not_hidden() {
    let env = Env::new(vec![cf("f")]).await;
    let t = &env.table;
    let counter = |got: RowResult| -> i64 {
        let v: [u8; 8] = got.cells[0].value.as_ref().try_into().unwrap();
        i64::from_be_bytes(v)
    };
    let read = |got: RowResult| got.cells.first().map(|c| c.value.clone());
    // The sequence happybase's counter_inc / counter_get / counter_set make.
    let got = t
        .increment(Increment::new("k").add_column("f", "n", 10))
        .await;
    assert_eq!(counter(got.unwrap()), 10);
    let got = t
        .increment(Increment::new("k").add_column("f", "n", 0))
        .await;
    assert_eq!(counter(got.unwrap()), 10);
    let zero = 0i64.to_be_bytes();
    t.put(Put::new("k").add_column("f", "n", zero))
        .await
        .unwrap();
    let got = t
        .increment(Increment::new("k").add_column("f", "n", 1))
        .await;
    assert_eq!(
        counter(got.unwrap()),
        1,
        "the put landed under the increments"
    );
    // One row per round: as in HBase, a delete marker masks a put of the same timestamp,
    // and for a burst's length the region's clock stays at the delete's. The bursts keep
    // the clock within its lead of a second (`MAX_CLOCK_LEAD_MS`): past it, stamps are
    // not recorded.
    for round in 0..3 {
        let row = format!("b{round}");
        for _ in 0..150 {
            let inc = Increment::new(row.as_str()).add_column("f", "n", 1);
            t.increment(inc).await.unwrap();
        }
        let five = 5i64.to_be_bytes();
        let put = Put::new(row.as_str()).add_column("f", "n", five);
        t.put(put).await.unwrap();
        let got = t.get(Get::new(row.as_str())).await.unwrap();
        assert_eq!(read(got), Some(five.to_vec().into()), "{row}: put hidden");
        // An append is stamped the same way.
        for _ in 0..150 {
            let app = Append::new(row.as_str()).add_column("f", "s", "x");
            t.append(app).await.unwrap();
        }
        let put = Put::new(row.as_str()).add_column("f", "s", "y");
        t.put(put).await.unwrap();
        let got = t
            .get(Get::new(row.as_str()).add_column("f", "s"))
            .await
            .unwrap();
        assert_eq!(
            read(got),
            Some("y".into()),
            "{row}: put hidden by the appends"
        );
        // A delete at server time covers the burst.
        t.delete(Delete::new(row.as_str())).await.unwrap();
        let got = t.get(Get::new(row.as_str())).await.unwrap();
        assert!(got.cells.is_empty(), "{row}: the delete missed {got:?}");
    }
}
