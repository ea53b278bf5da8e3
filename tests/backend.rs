//! The client's backend seam ([`basalt::client::Backend`]): a second implementation of it -
//! a delegating backend that forwards every call to another backend and counts it, as a
//! network client forwards each call to a server - runs the client's whole surface (Admin,
//! Table, salted tables, snapshots) through the same generic client code and gives exactly
//! the results of the embedded engine used directly. Every method of the trait is called
//! (the count proves the client reached the engine through the seam and nowhere else), and
//! delegating backends nest (a backend over a backend).

use basalt::client::{
    Append, Backend, BatchOp, BatchOutcome, CheckAndMutate, CompareOp, Delete, Get, Increment,
    PreSplit, Put, ReadPointHandle, RowMutations, RowResult, Scan,
};
use basalt::coprocessors::{
    try_collect_ordered, CallOptions, EndpointRegistry, Endpoints, KeyRange, RowCount, ROW_COUNT,
};
use basalt::endpoint::EndpointAnswers;
use basalt::keys::RowRange;
use basalt::{
    ColumnFamilyDescriptor, CompactionKind, Connection, CoprocessorDescriptor, Engine,
    IntegrityReport, OfflineRegion, PluginInfo, RegionInfo, Result, SaltSpec, SnapshotDescription,
    TableDescriptor, TableName,
};
use bytes::Bytes;
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

/// A backend over another: forwards every call and counts it by method name.
#[derive(Debug)]
struct Counting<B: Backend = Engine> {
    inner: Arc<B>,
    calls: Mutex<BTreeMap<&'static str, u64>>,
}

impl<B: Backend> Counting<B> {
    fn new(inner: Arc<B>) -> Self {
        Counting {
            inner,
            calls: Mutex::new(BTreeMap::new()),
        }
    }

    fn count(&self, method: &'static str) {
        *self.calls.lock().unwrap().entry(method).or_default() += 1;
    }

    fn calls(&self) -> BTreeMap<&'static str, u64> {
        self.calls.lock().unwrap().clone()
    }
}

/// The delegating backend's own read point handle: the inner backend's, wrapped, so the
/// client must hand back exactly what this backend pinned.
#[derive(Debug, Clone)]
struct CountedPoint<P>(P);

impl<P: ReadPointHandle> ReadPointHandle for CountedPoint<P> {
    fn read_point(&self) -> u64 {
        self.0.read_point()
    }
}

impl<B: Backend> Backend for Counting<B> {
    type ReadPoint = CountedPoint<B::ReadPoint>;
    type Rows = B::Rows;

    fn put(self: &Arc<Self>, t: &TableName, p: Put) -> impl Future<Output = Result<()>> + Send {
        self.count("put");
        self.inner.put(t, p)
    }
    fn delete(
        self: &Arc<Self>,
        t: &TableName,
        d: Delete,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("delete");
        self.inner.delete(t, d)
    }
    fn get(
        self: &Arc<Self>,
        t: &TableName,
        g: Get,
    ) -> impl Future<Output = Result<RowResult>> + Send {
        self.count("get");
        self.inner.get(t, g)
    }
    fn exists(
        self: &Arc<Self>,
        t: &TableName,
        g: Get,
    ) -> impl Future<Output = Result<bool>> + Send {
        self.count("exists");
        self.inner.exists(t, g)
    }
    fn increment(
        self: &Arc<Self>,
        t: &TableName,
        i: Increment,
    ) -> impl Future<Output = Result<RowResult>> + Send {
        self.count("increment");
        self.inner.increment(t, i)
    }
    fn append(
        self: &Arc<Self>,
        t: &TableName,
        a: Append,
    ) -> impl Future<Output = Result<RowResult>> + Send {
        self.count("append");
        self.inner.append(t, a)
    }
    fn check_and_mutate(
        self: &Arc<Self>,
        t: &TableName,
        c: CheckAndMutate,
    ) -> impl Future<Output = Result<bool>> + Send {
        self.count("check_and_mutate");
        self.inner.check_and_mutate(t, c)
    }
    fn mutate_row(
        self: &Arc<Self>,
        t: &TableName,
        rm: RowMutations,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("mutate_row");
        self.inner.mutate_row(t, rm)
    }
    fn batch(
        self: &Arc<Self>,
        t: &TableName,
        ops: Vec<BatchOp>,
    ) -> impl Future<Output = Result<Vec<Result<BatchOutcome>>>> + Send {
        self.count("batch");
        self.inner.batch(t, ops)
    }
    fn scan(
        self: &Arc<Self>,
        t: &TableName,
        s: Scan,
        at: Option<&Self::ReadPoint>,
    ) -> Result<Self::Rows> {
        self.count("scan");
        self.inner.scan(t, s, at.map(|p| &p.0))
    }
    fn pin_read_point(self: &Arc<Self>) -> Result<Self::ReadPoint> {
        self.count("pin_read_point");
        self.inner.pin_read_point().map(CountedPoint)
    }
    fn call_endpoint(
        self: &Arc<Self>,
        table: &TableName,
        service: &str,
        range: RowRange,
        request: Bytes,
        at: &Self::ReadPoint,
    ) -> impl Future<Output = Result<EndpointAnswers>> + Send {
        self.count("call_endpoint");
        self.inner
            .call_endpoint(table, service, range, request, &at.0)
    }
    fn create_table(
        self: &Arc<Self>,
        desc: TableDescriptor,
        split: PreSplit,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("create_table");
        self.inner.create_table(desc, split)
    }
    fn delete_table(self: &Arc<Self>, t: &TableName) -> impl Future<Output = Result<()>> + Send {
        self.count("delete_table");
        self.inner.delete_table(t)
    }
    fn enable_table(self: &Arc<Self>, t: &TableName) -> impl Future<Output = Result<()>> + Send {
        self.count("enable_table");
        self.inner.enable_table(t)
    }
    fn disable_table(self: &Arc<Self>, t: &TableName) -> impl Future<Output = Result<()>> + Send {
        self.count("disable_table");
        self.inner.disable_table(t)
    }
    fn is_table_enabled(
        self: &Arc<Self>,
        t: &TableName,
    ) -> impl Future<Output = Result<bool>> + Send {
        self.count("is_table_enabled");
        self.inner.is_table_enabled(t)
    }
    fn table_exists(self: &Arc<Self>, t: &TableName) -> impl Future<Output = Result<bool>> + Send {
        self.count("table_exists");
        self.inner.table_exists(t)
    }
    fn list_tables(self: &Arc<Self>) -> impl Future<Output = Result<Vec<TableDescriptor>>> + Send {
        self.count("list_tables");
        self.inner.list_tables()
    }
    fn describe_table(self: &Arc<Self>, t: &TableName) -> Result<TableDescriptor> {
        self.count("describe_table");
        self.inner.describe_table(t)
    }
    fn add_column_family(
        self: &Arc<Self>,
        t: &TableName,
        cf: ColumnFamilyDescriptor,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("add_column_family");
        self.inner.add_column_family(t, cf)
    }
    fn modify_column_family(
        self: &Arc<Self>,
        t: &TableName,
        cf: ColumnFamilyDescriptor,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("modify_column_family");
        self.inner.modify_column_family(t, cf)
    }
    fn delete_column_family(
        self: &Arc<Self>,
        t: &TableName,
        family: &[u8],
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("delete_column_family");
        self.inner.delete_column_family(t, family)
    }
    fn add_coprocessor(
        self: &Arc<Self>,
        t: &TableName,
        cp: CoprocessorDescriptor,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("add_coprocessor");
        self.inner.add_coprocessor(t, cp)
    }
    fn remove_coprocessor(
        self: &Arc<Self>,
        t: &TableName,
        name: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("remove_coprocessor");
        self.inner.remove_coprocessor(t, name)
    }
    fn set_coprocessors(
        self: &Arc<Self>,
        t: &TableName,
        cps: Vec<CoprocessorDescriptor>,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("set_coprocessors");
        self.inner.set_coprocessors(t, cps)
    }
    fn create_namespace(self: &Arc<Self>, ns: &str) -> impl Future<Output = Result<()>> + Send {
        self.count("create_namespace");
        self.inner.create_namespace(ns)
    }
    fn delete_namespace(self: &Arc<Self>, ns: &str) -> impl Future<Output = Result<()>> + Send {
        self.count("delete_namespace");
        self.inner.delete_namespace(ns)
    }
    fn list_namespaces(self: &Arc<Self>) -> impl Future<Output = Result<Vec<String>>> + Send {
        self.count("list_namespaces");
        self.inner.list_namespaces()
    }
    fn regions(
        self: &Arc<Self>,
        t: &TableName,
    ) -> impl Future<Output = Result<Vec<RegionInfo>>> + Send {
        self.count("regions");
        self.inner.regions(t)
    }
    fn flush(self: &Arc<Self>, t: &TableName) -> impl Future<Output = Result<()>> + Send {
        self.count("flush");
        self.inner.flush(t)
    }
    fn compact(
        self: &Arc<Self>,
        t: &TableName,
        kind: CompactionKind,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("compact");
        self.inner.compact(t, kind)
    }
    fn compact_region(
        self: &Arc<Self>,
        t: &TableName,
        region_id: u64,
        kind: CompactionKind,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("compact_region");
        self.inner.compact_region(t, region_id, kind)
    }
    fn split_region(
        self: &Arc<Self>,
        t: &TableName,
        region_id: u64,
        split_row: Option<&[u8]>,
    ) -> impl Future<Output = Result<Option<(u64, u64)>>> + Send {
        self.count("split_region");
        self.inner.split_region(t, region_id, split_row)
    }
    fn merge_regions(
        self: &Arc<Self>,
        t: &TableName,
        a: u64,
        b: u64,
    ) -> impl Future<Output = Result<u64>> + Send {
        self.count("merge_regions");
        self.inner.merge_regions(t, a, b)
    }
    fn check_table(
        self: &Arc<Self>,
        t: &TableName,
    ) -> impl Future<Output = Result<IntegrityReport>> + Send {
        self.count("check_table");
        self.inner.check_table(t)
    }
    fn offline_regions(
        self: &Arc<Self>,
    ) -> impl Future<Output = Result<Vec<OfflineRegion>>> + Send {
        self.count("offline_regions");
        self.inner.offline_regions()
    }
    fn snapshot(
        self: &Arc<Self>,
        name: &str,
        tables: &[TableName],
        companions: bool,
    ) -> impl Future<Output = Result<SnapshotDescription>> + Send {
        self.count("snapshot");
        self.inner.snapshot(name, tables, companions)
    }
    fn list_snapshots(
        self: &Arc<Self>,
    ) -> impl Future<Output = Result<Vec<SnapshotDescription>>> + Send {
        self.count("list_snapshots");
        self.inner.list_snapshots()
    }
    fn describe_snapshot(
        self: &Arc<Self>,
        name: &str,
    ) -> impl Future<Output = Result<SnapshotDescription>> + Send {
        self.count("describe_snapshot");
        self.inner.describe_snapshot(name)
    }
    fn delete_snapshot(self: &Arc<Self>, name: &str) -> impl Future<Output = Result<()>> + Send {
        self.count("delete_snapshot");
        self.inner.delete_snapshot(name)
    }
    fn clone_snapshot(
        self: &Arc<Self>,
        name: &str,
        targets: Vec<(TableName, TableDescriptor)>,
    ) -> impl Future<Output = Result<()>> + Send {
        self.count("clone_snapshot");
        self.inner.clone_snapshot(name, targets)
    }
    fn restore_snapshot(
        self: &Arc<Self>,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>>> + Send {
        self.count("restore_snapshot");
        self.inner.restore_snapshot(name)
    }
    fn upload_plugin(
        self: &Arc<Self>,
        bytes: Vec<u8>,
    ) -> impl Future<Output = Result<PluginInfo>> + Send {
        self.count("upload_plugin");
        self.inner.upload_plugin(bytes)
    }
    fn list_plugins(self: &Arc<Self>) -> impl Future<Output = Result<Vec<PluginInfo>>> + Send {
        self.count("list_plugins");
        self.inner.list_plugins()
    }
    fn describe_plugin(
        self: &Arc<Self>,
        id: &str,
    ) -> impl Future<Output = Result<PluginInfo>> + Send {
        self.count("describe_plugin");
        self.inner.describe_plugin(id)
    }
    fn plugin_bytes(self: &Arc<Self>, id: &str) -> impl Future<Output = Result<Bytes>> + Send {
        self.count("plugin_bytes");
        self.inner.plugin_bytes(id)
    }
    fn delete_plugin(self: &Arc<Self>, id: &str) -> impl Future<Output = Result<()>> + Send {
        self.count("delete_plugin");
        self.inner.delete_plugin(id)
    }
    fn close(self: &Arc<Self>) -> impl Future<Output = Result<()>> + Send {
        self.count("close");
        self.inner.close()
    }
}

/// Every method of the trait, as [`Counting`] names them.
const METHODS: &[&str] = &[
    "upload_plugin",
    "list_plugins",
    "describe_plugin",
    "plugin_bytes",
    "delete_plugin",
    "put",
    "delete",
    "get",
    "exists",
    "increment",
    "append",
    "check_and_mutate",
    "mutate_row",
    "batch",
    "scan",
    "pin_read_point",
    "call_endpoint",
    "create_table",
    "delete_table",
    "enable_table",
    "disable_table",
    "is_table_enabled",
    "table_exists",
    "list_tables",
    "describe_table",
    "add_column_family",
    "modify_column_family",
    "delete_column_family",
    "add_coprocessor",
    "remove_coprocessor",
    "set_coprocessors",
    "create_namespace",
    "delete_namespace",
    "list_namespaces",
    "regions",
    "flush",
    "compact",
    "compact_region",
    "split_region",
    "merge_regions",
    "check_table",
    "offline_regions",
    "snapshot",
    "list_snapshots",
    "describe_snapshot",
    "delete_snapshot",
    "clone_snapshot",
    "restore_snapshot",
    "close",
];

/// A row as the transcript records it: key and (family, qualifier, value) per cell;
/// timestamps left out (the two engines run at different times).
fn row(r: &RowResult) -> String {
    let cells: Vec<String> = r
        .cells
        .iter()
        .map(|c| {
            format!(
                "{}:{}={}",
                String::from_utf8_lossy(&c.family),
                String::from_utf8_lossy(&c.qualifier),
                String::from_utf8_lossy(&c.value)
            )
        })
        .collect();
    format!("{}[{}]", String::from_utf8_lossy(&r.row), cells.join(","))
}

fn rows(rs: &[RowResult]) -> String {
    rs.iter().map(row).collect::<Vec<_>>().join(" ")
}

fn outcome(o: &Result<BatchOutcome>) -> String {
    match o {
        Ok(BatchOutcome::Row(r)) => format!("row {}", row(r)),
        Ok(other) => format!("{other:?}"),
        Err(e) => format!("error {e}"),
    }
}

fn families(d: &TableDescriptor) -> String {
    let names: Vec<String> = d
        .families
        .iter()
        .map(|f| format!("{}/{}", String::from_utf8_lossy(&f.name), f.max_versions))
        .collect();
    names.join(",")
}

/// The client's surface, generic over the backend: the same code runs on the embedded
/// engine and on any other backend. Returns what each step answered.
async fn flow<B: Backend>(conn: &Connection<B>) -> Vec<String> {
    let mut log = Vec::new();
    let admin = conn.admin();

    // Namespaces and a pre-split table.
    admin.create_namespace("app").await.unwrap();
    log.push(format!(
        "namespaces {:?}",
        admin.list_namespaces().await.unwrap()
    ));
    let name = TableName::parse("app:t").unwrap();
    let desc = TableDescriptor::new(name.clone())
        .family(ColumnFamilyDescriptor::new("f"))
        .family(ColumnFamilyDescriptor::new("g"));
    admin
        .create_table_with_splits(desc, PreSplit::Keys(vec![b"m".to_vec()]))
        .await
        .unwrap();
    log.push(format!(
        "exists {} enabled {}",
        admin.table_exists(&name).await.unwrap(),
        admin.is_table_enabled(&name).await.unwrap()
    ));
    let listed: Vec<String> = admin
        .list_tables()
        .await
        .unwrap()
        .iter()
        .map(|d| d.name.to_string())
        .collect();
    log.push(format!("tables {listed:?}"));

    // Data operations.
    let t = conn.table("app:t").unwrap();
    for k in ["a", "c", "k", "n", "x"] {
        t.put(
            Put::new(k)
                .add_column("f", "q", format!("v-{k}"))
                .add_column("g", "q", "1"),
        )
        .await
        .unwrap();
    }
    log.push(format!("get {}", row(&t.get(Get::new("c")).await.unwrap())));
    log.push(format!(
        "get absent {}",
        row(&t.get(Get::new("b")).await.unwrap())
    ));
    log.push(format!(
        "exists {} {}",
        t.exists(Get::new("k")).await.unwrap(),
        t.exists(Get::new("b")).await.unwrap()
    ));
    t.delete(Delete::new("k").add_family("g")).await.unwrap();
    log.push(format!(
        "after delete {}",
        row(&t.get(Get::new("k")).await.unwrap())
    ));
    let inc = Increment::new("ctr").add_column("f", "n", 5);
    log.push(format!(
        "increment {}",
        row(&t.increment(inc).await.unwrap())
    ));
    let app = Append::new("c").add_column("f", "q", "+");
    log.push(format!("append {}", row(&t.append(app).await.unwrap())));
    let held = CheckAndMutate::new("a", "f", "q")
        .if_value(CompareOp::Equal, "v-a")
        .then_put(Put::new("a").add_column("f", "q", "checked"));
    let failed = CheckAndMutate::new("a", "f", "q")
        .if_value(CompareOp::Equal, "v-a")
        .then_put(Put::new("a").add_column("f", "q", "never"));
    log.push(format!(
        "check_and_mutate {} {}",
        t.check_and_mutate(held).await.unwrap(),
        t.check_and_mutate(failed).await.unwrap()
    ));
    t.mutate_row(
        RowMutations::new("n")
            .add(Put::new("n").add_column("f", "r", "new"))
            .add(Delete::new("n").add_column("g", "q")),
    )
    .await
    .unwrap();
    log.push(format!(
        "mutate_row {}",
        row(&t.get(Get::new("n")).await.unwrap())
    ));
    let outcomes = t
        .batch(vec![
            BatchOp::Put(Put::new("z").add_column("f", "q", "batched")),
            BatchOp::Get(Get::new("c")),
            BatchOp::Increment(Increment::new("ctr").add_column("f", "n", 1)),
            BatchOp::Delete(Delete::new("x")),
            BatchOp::CheckAndMutate(
                CheckAndMutate::new("z", "f", "q")
                    .if_value(CompareOp::Equal, "nope")
                    .then_delete(Delete::new("z")),
            ),
        ])
        .await
        .unwrap();
    log.push(format!(
        "batch {:?}",
        outcomes.iter().map(outcome).collect::<Vec<_>>()
    ));

    // Scans, and a snapshot that outlives later writes.
    let all: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    log.push(format!("scan {}", rows(&all)));
    let back: Vec<RowResult> = t
        .scan(Scan::new().reversed(true).limit(3))
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    log.push(format!("reverse scan {}", rows(&back)));
    let snap = conn.snapshot().unwrap();
    t.put(Put::new("b").add_column("f", "q", "late"))
        .await
        .unwrap();
    t.delete(Delete::new("a")).await.unwrap();
    let then: Vec<RowResult> = t
        .scan_at(Scan::new(), &snap)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let now: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    log.push(format!("at snapshot {}", rows(&then)));
    log.push(format!("now {}", rows(&now)));
    log.push(format!(
        "snapshot == all before: {}",
        rows(&then) == rows(&all)
    ));
    let t_snap = t.snapshot().unwrap();
    assert!(t_snap.read_point() >= snap.read_point());
    drop(t_snap);

    // Regions and maintenance.
    admin.flush(&name).await.unwrap();
    admin.compact(&name).await.unwrap();
    admin.major_compact(&name).await.unwrap();
    let regions = t.regions().await.unwrap();
    let starts: Vec<String> = regions
        .iter()
        .map(|r| String::from_utf8_lossy(&r.start_key).into_owned())
        .collect();
    log.push(format!("regions {starts:?}"));
    admin.compact_region(&name, regions[0].id).await.unwrap();
    admin
        .major_compact_region(&name, regions[1].id)
        .await
        .unwrap();
    let (lo, hi) = admin
        .split_region(&name, regions[0].id, Some(&b"f"[..]))
        .await
        .unwrap()
        .expect("an explicit split row splits");
    let split: Vec<String> = admin
        .regions(&name)
        .await
        .unwrap()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.start_key).into_owned())
        .collect();
    log.push(format!("after split {split:?}"));
    admin.merge_regions(&name, hi, lo).await.unwrap();
    log.push(format!(
        "after merge {} regions, report {} regions",
        admin.regions(&name).await.unwrap().len(),
        admin.region_report(&name).await.unwrap().regions.len()
    ));
    log.push(format!(
        "table report {} regions",
        t.region_report().await.unwrap().regions.len()
    ));
    log.push(format!(
        "check healthy {}",
        admin.check_table(&name).await.unwrap().is_healthy()
    ));
    log.push(format!(
        "offline {:?}",
        admin.offline_regions().await.unwrap()
    ));
    let after: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    log.push(format!(
        "unchanged by maintenance: {}",
        rows(&after) == rows(&now)
    ));

    // Table snapshots: taken, cloned, listed, restored, deleted.
    let snap = admin.snapshot("backend-snap", &name).await.unwrap();
    log.push(format!(
        "snapshot of {:?}, {} files",
        snap.tables, snap.files
    ));
    admin.clone_snapshot("backend-snap", "clone").await.unwrap();
    let cloned: Vec<RowResult> = conn
        .table("clone")
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    log.push(format!("clone equal: {}", rows(&cloned) == rows(&after)));
    admin.disable_table("clone").await.unwrap();
    let failsafe = admin.restore_snapshot("backend-snap").await;
    log.push(format!(
        "restore of an enabled table: {}",
        failsafe.is_err()
    ));
    log.push(format!(
        "snapshots {:?}",
        admin
            .list_snapshots()
            .await
            .unwrap()
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
    ));
    // No plugin runtime here: uploads are refused, and nothing is listed.
    let none = "0".repeat(64);
    log.push(format!(
        "plugins: upload {:?}, list {:?}, describe {:?}, bytes {:?}, delete {:?}",
        admin.upload_plugin(b"\0asm".to_vec()).await.map(|p| p.id),
        admin.list_plugins().await.map(|l| l.len()),
        admin.describe_plugin(&none).await.map(|p| p.id),
        admin.plugin_bytes(&none).await.map(|b| b.len()),
        admin.delete_plugin(&none).await,
    ));
    let d = admin.describe_snapshot("backend-snap").await.unwrap();
    log.push(format!("described read point > 0: {}", d.read_point > 0));
    admin.delete_snapshot("backend-snap").await.unwrap();
    admin.delete_table("clone").await.unwrap();

    // Schema changes.
    admin
        .add_column_family(&name, ColumnFamilyDescriptor::new("h"))
        .await
        .unwrap();
    admin
        .modify_column_family(&name, ColumnFamilyDescriptor::new("h").max_versions(3))
        .await
        .unwrap();
    admin.delete_column_family(&name, "g").await.unwrap();
    log.push(format!(
        "families {}",
        families(&admin.describe_table(&name).await.unwrap())
    ));
    log.push(format!(
        "g gone {}",
        row(&t.get(Get::new("c")).await.unwrap())
    ));
    // Coprocessor lists (no loader is configured: both backends answer alike).
    let refused = admin
        .add_coprocessor(&name, CoprocessorDescriptor::new("missing"))
        .await;
    log.push(format!(
        "add coprocessor \"missing\" fails: {}",
        refused.is_err()
    ));
    let absent = admin.remove_coprocessor(&name, "missing").await;
    log.push(format!(
        "remove coprocessor \"missing\" fails: {}",
        absent.is_err()
    ));
    admin.set_coprocessors(&name, Vec::new()).await.unwrap();

    // A salted table by logical keys, with a snapshot across its buckets.
    let salted_name = TableName::parse("app:s").unwrap();
    admin
        .create_table(
            TableDescriptor::new(salted_name.clone())
                .family(ColumnFamilyDescriptor::new("d"))
                .salt(SaltSpec::new(4)),
        )
        .await
        .unwrap();
    let s = conn.salted_table(&salted_name).unwrap();
    for i in 0..24u32 {
        s.put(Put::new(format!("e{i:03}")).add_column("d", "n", i.to_string()))
            .await
            .unwrap();
    }
    log.push(format!(
        "salted get {}",
        row(&s.get(Get::new("e007")).await.unwrap())
    ));
    log.push(format!(
        "salted exists {}",
        s.exists(Get::new("e030")).await.unwrap()
    ));
    let snap = s.physical().snapshot().unwrap();
    s.delete(Delete::new("e005")).await.unwrap();
    s.increment(Increment::new("e001").add_column("d", "c", 2))
        .await
        .unwrap();
    let ordered: Vec<RowResult> = s
        .scan(Scan::new().start_row("e003").limit(5))
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    log.push(format!("salted scan {}", rows(&ordered)));
    let mut unordered: Vec<String> = s
        .scan_unordered(Scan::new())
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(row)
        .collect();
    unordered.sort();
    log.push(format!("salted unordered {}", unordered.join(" ")));
    let pinned: Vec<RowResult> = s
        .scan_at(Scan::new().start_row("e003").limit(5), &snap)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    log.push(format!("salted at snapshot {}", rows(&pinned)));
    let pinned_unordered = s
        .scan_unordered_at(Scan::new(), &snap)
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    log.push(format!(
        "salted unordered at snapshot {}",
        pinned_unordered.len()
    ));
    log.push(format!(
        "salted regions {}",
        s.regions().await.unwrap().len()
    ));
    let salted_batch = s
        .batch(vec![
            BatchOp::Get(Get::new("e003")),
            BatchOp::Delete(Delete::new("e002")),
        ])
        .await
        .unwrap();
    log.push(format!(
        "salted batch {:?}",
        salted_batch.iter().map(outcome).collect::<Vec<_>>()
    ));
    log.push(format!(
        "unsalted table is refused as salted: {}",
        conn.salted_table(&name).is_err()
    ));

    // An endpoint served by the backend: one answer per region, at one read point.
    let endpoints = Endpoints::served(conn).with_options(CallOptions::default().ordered(true));
    let counts = endpoints
        .coprocessor_service::<RowCount>(&name, ROW_COUNT, KeyRange::all(), &())
        .unwrap();
    let counts: Vec<u64> = try_collect_ordered(counts)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    log.push(format!("rows per region {counts:?}"));

    // Disable, enable, delete; a handle resolves its table by name on every call.
    admin.disable_table(&name).await.unwrap();
    log.push(format!(
        "disabled: enabled {}, get {:?}",
        admin.is_table_enabled(&name).await.unwrap(),
        t.get(Get::new("a"))
            .await
            .map(|r| row(&r))
            .map_err(|e| e.to_string())
    ));
    admin.enable_table(&name).await.unwrap();
    log.push(format!(
        "re-enabled get {}",
        row(&t.get(Get::new("c")).await.unwrap())
    ));
    for n in [&name, &salted_name] {
        admin.disable_table(n).await.unwrap();
        admin.delete_table(n).await.unwrap();
    }
    log.push(format!(
        "deleted: exists {}, get {:?}",
        admin.table_exists(&name).await.unwrap(),
        t.get(Get::new("a"))
            .await
            .map(|r| row(&r))
            .map_err(|e| e.to_string())
    ));
    admin.delete_namespace("app").await.unwrap();
    log.push(format!(
        "namespaces {:?}",
        admin.list_namespaces().await.unwrap()
    ));
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegating_backend_gives_the_embedded_engines_results() {
    let direct_dir = tempfile::tempdir().unwrap();
    let direct = Connection::open(direct_dir.path()).await.unwrap();
    direct
        .engine()
        .serve_endpoints(Arc::new(EndpointRegistry::with_builtins()));
    let want = flow(&direct).await;
    direct.close().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let embedded = Connection::open(dir.path()).await.unwrap();
    embedded
        .engine()
        .serve_endpoints(Arc::new(EndpointRegistry::with_builtins()));
    let counting = Arc::new(Counting::new(embedded.engine().clone()));
    let conn = Connection::new(counting.clone());
    let got = flow(&conn).await;
    assert_eq!(got, want);
    conn.close().await.unwrap();

    // Every method of the seam was used, so the client reached the engine through it.
    let calls = counting.calls();
    for m in METHODS {
        assert!(
            calls.get(m).copied().unwrap_or(0) > 0,
            "{m} was never called: {calls:?}"
        );
    }
    assert_eq!(calls.len(), METHODS.len(), "{calls:?}");
    // A closed backend refuses to pin a read point.
    assert!(conn.snapshot().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegating_backends_nest_and_share_one_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = Connection::open(dir.path()).await.unwrap();
    let inner = Arc::new(Counting::new(embedded.engine().clone()));
    let outer = Arc::new(Counting::new(inner.clone()));
    let conn: Connection<Counting<Counting>> = Connection::new(outer.clone());
    conn.admin()
        .create_table(
            TableDescriptor::new(TableName::parse("s").unwrap())
                .family(ColumnFamilyDescriptor::new("d"))
                .salt(SaltSpec::new(8)),
        )
        .await
        .unwrap();
    let s = conn.salted_table("s").unwrap();
    for i in 0..40u32 {
        s.put(Put::new(format!("k{i:02}")).add_column("d", "v", "1"))
            .await
            .unwrap();
    }
    let snap = conn.snapshot().unwrap();
    let direct_snap = embedded.snapshot().unwrap();
    s.put(Put::new("k99").add_column("d", "v", "1"))
        .await
        .unwrap();
    // One pin for all eight bucket scans, at the snapshot's read point.
    let pins = outer.calls()["pin_read_point"];
    let scans = outer.calls().get("scan").copied().unwrap_or(0);
    let stream = s.scan_at(Scan::new(), &snap).unwrap();
    assert_eq!(stream.stats().read_point(), snap.read_point());
    assert_eq!(stream.stats().buckets_scanned(), 8);
    let through: Vec<RowResult> = stream.try_collect().await.unwrap();
    assert_eq!(outer.calls()["pin_read_point"], pins);
    assert_eq!(outer.calls()["scan"], scans + 8);
    assert_eq!(inner.calls()["scan"], outer.calls()["scan"]);
    // The same rows as the engine's own salted handle at a snapshot taken at that moment.
    let direct: Vec<RowResult> = embedded
        .salted_table("s")
        .unwrap()
        .scan_at(Scan::new(), &direct_snap)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(through.len(), 40);
    assert_eq!(through, direct);
    conn.close().await.unwrap();
}
