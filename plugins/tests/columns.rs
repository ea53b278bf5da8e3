//! The column scanner (`region.column-scanner`) through a plugin: an endpoint that reads a
//! few columns page by page sees exactly the rows and newest values a scan of those columns
//! sees, over regions read in place (one compacted file), regions with MemStore rows and
//! regions with delete markers; in a hook, the column scanner answers an error (no trap).

use crate::common;

use basalt::client::{Delete, Put, RowResult, Scan};
use basalt::coprocessors::{KeyRange, Registry};
use basalt::{
    plugin_coprocessor_name, ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor,
    Error, PreSplit, TableDescriptor, TableName,
};
use basalt_plugins::{PluginEndpoints, PluginHost};
use common::{component, Observer};
use futures::TryStreamExt;
use std::sync::Arc;

/// The columns the endpoint asks for, in its order: two families, one column no row has.
const COLUMNS: [(&str, &str); 4] = [("f", "a"), ("g", "d"), ("f", "zz"), ("f", "b")];

/// Rows per `next` call: small, so that every region takes several pages.
const PAGE_ROWS: u32 = 3;

/// Little-endian bytes as a WAT data string.
fn wat_bytes(words: &[u32]) -> String {
    words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .map(|b| format!("\\{b:02x}"))
        .collect()
}

/// An endpoint whose answer is every page of a column scan of its region (of [`COLUMNS`],
/// [`PAGE_ROWS`] rows a call) concatenated, and whose merge concatenates two answers: the
/// merged answer of a call is the packed rows of the whole range, in key order.
fn column_endpoint() -> Vec<u8> {
    // The column names at 2048 ("f", "a", "g", "d", "zz", "b"), the list of (family,
    // qualifier) pairs at 1024.
    let (f, a, g, d, zz, b) = (2048, 2049, 2050, 2051, 2052, 2054);
    let pairs = wat_bytes(&[f, 1, a, 1, g, 1, d, 1, f, 1, zz, 2, f, 1, b, 1]);
    let wat = format!(
        r#"(module
  (import "basalt:coprocessor/region@0.2.0" "[constructor]column-scanner"
    (func $new (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "basalt:coprocessor/region@0.2.0" "[method]column-scanner.next"
    (func $next (param i32 i32 i32)))
  (import "basalt:coprocessor/region@0.2.0" "[resource-drop]column-scanner"
    (func $drop (param i32)))
  (memory (export "memory") 32)
  (global $bump (mut i32) (i32.const 1048576))
  (data (i32.const 1024) "{pairs}")
  (data (i32.const 2048) "fagdzzb")
  (func $alloc (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $bump))
    (global.set $bump (i32.add (local.get $p) (local.get $n)))
    (if (i32.gt_u (global.get $bump) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.div_u (i32.sub (global.get $bump)
                (i32.mul (memory.size) (i32.const 65536))) (i32.const 65536)) (i32.const 1))))))
    (local.get $p))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    ;; 8-aligned bump allocation
    (global.set $bump (i32.and (i32.add (global.get $bump) (i32.const 7)) (i32.const -8)))
    (call $alloc (local.get 3)))
  ;; ok(list) of the bytes at $p, $n long, answered at 256
  (func $ok (param $p i32) (param $n i32) (result i32)
    (i32.store8 (i32.const 256) (i32.const 0))
    (i32.store (i32.const 260) (local.get $p))
    (i32.store (i32.const 264) (local.get $n))
    (i32.const 256))
  (func (export "basalt:coprocessor/endpoint@0.2.0#call")
    (param i32 i32 i64 i32 i32 i32 i32 i32 i32) (result i32)
    (local $h i32) (local $out i32) (local $len i32)
    (global.set $bump (i32.const 1048576))
    (local.set $h (call $new (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
                             (i32.const 1024) (i32.const 4)))
    ;; the answer grows at 65536 (below the bump area)
    (local.set $out (i32.const 65536))
    (block $done
      (loop $more
        (call $next (local.get $h) (i32.const {PAGE_ROWS}) (i32.const 512))
        (if (i32.load8_u (i32.const 512))
          (then
            ;; err(string): answered as it came
            (i32.store8 (i32.const 256) (i32.const 1))
            (i32.store (i32.const 260) (i32.load (i32.const 516)))
            (i32.store (i32.const 264) (i32.load (i32.const 520)))
            (return (i32.const 256))))
        (local.set $len (i32.load (i32.const 520)))
        (br_if $done (i32.eqz (local.get $len)))
        (memory.copy (local.get $out) (i32.load (i32.const 516)) (local.get $len))
        (local.set $out (i32.add (local.get $out) (local.get $len)))
        (br $more)))
    (call $drop (local.get $h))
    (call $ok (i32.const 65536) (i32.sub (local.get $out) (i32.const 65536))))
  (func (export "basalt:coprocessor/endpoint@0.2.0#merge")
    (param $a i32) (param $an i32) (param $b i32) (param $bn i32) (result i32)
    (local $p i32)
    (local.set $p (call $alloc (i32.add (local.get $an) (local.get $bn))))
    (memory.copy (local.get $p) (local.get $a) (local.get $an))
    (memory.copy (i32.add (local.get $p) (local.get $an)) (local.get $b) (local.get $bn))
    (call $ok (local.get $p) (i32.add (local.get $an) (local.get $bn))))
)"#
    );
    component(&wat, "region-endpoint")
}

/// A row of a column scan: its key and each column's value.
type Row = (Vec<u8>, Vec<Option<Vec<u8>>>);

/// Decodes packed rows of `columns` columns (the encoding of `column-scanner.next`).
fn decode(mut b: &[u8], columns: usize) -> Vec<Row> {
    let field = |b: &mut &[u8]| -> Option<Vec<u8>> {
        let n = u32::from_le_bytes(b[..4].try_into().unwrap());
        *b = &b[4..];
        if n == u32::MAX {
            return None;
        }
        let (v, rest) = b.split_at(n as usize);
        *b = rest;
        Some(v.to_vec())
    };
    let mut rows = Vec::new();
    while !b.is_empty() {
        let row = field(&mut b).unwrap();
        let values = (0..columns).map(|_| field(&mut b)).collect();
        rows.push((row, values));
    }
    rows
}

/// The same rows as a scan of the columns gives them.
async fn scanned(conn: &Connection, range: &KeyRange) -> Vec<Row> {
    let mut scan = COLUMNS
        .iter()
        .fold(Scan::new(), |s, (f, q)| s.add_column(f, q));
    if let Some(start) = &range.start {
        scan = scan.start_row(start);
    }
    if let Some(stop) = &range.stop {
        scan = scan.stop_row(stop);
    }
    let rows: Vec<RowResult> = conn
        .table("t")
        .unwrap()
        .scan(scan)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    rows.iter()
        .map(|r| {
            let values = COLUMNS
                .iter()
                .map(|(f, q)| r.value(f, q).map(|v| v.to_vec()))
                .collect();
            (r.row.to_vec(), values)
        })
        .collect()
}

fn key(i: u32) -> String {
    format!("r{i:03}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_column_scanner_sees_what_a_scan_sees() {
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::with_defaults().unwrap();
    let registry = Arc::new(Registry::new());
    registry.set_plugin_runtime(host.clone());
    let conn = Connection::open_with(Config::new(dir.path()).coprocessor_loader(registry))
        .await
        .unwrap();
    let id = conn
        .admin()
        .upload_plugin(column_endpoint())
        .await
        .unwrap()
        .id;
    let desc = TableDescriptor::new(TableName::parse("t").unwrap())
        .family(ColumnFamilyDescriptor::new("f").max_versions(3))
        .family(ColumnFamilyDescriptor::new("g"));
    // Region 1 [.., r100): one compacted file per store, read in place. Region 2
    // [r100, r200): delete markers in the MemStore. Region 3 [r200, ..): rows in the
    // MemStore over the flushed ones.
    let splits = PreSplit::Keys(vec![key(100).into_bytes(), key(200).into_bytes()]);
    conn.admin()
        .create_table_with_splits(desc, splits)
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    for i in 0..300u32 {
        for v in 0..1 + i % 3 {
            let ts = 1_000 + u64::from(v);
            let mut p = Put::new(key(i)).add_column_ts("f", "other", ts, "x");
            if i % 2 == 0 {
                p = p.add_column_ts("f", "a", ts, format!("a{i}.{v}"));
            }
            if i % 3 == 0 {
                p = p.add_column_ts("f", "b", ts, format!("b{i}.{v}"));
            }
            if i % 5 == 0 {
                p = p.add_column_ts("g", "d", ts, format!("d{i}.{v}"));
            }
            t.put(p).await.unwrap();
        }
    }
    conn.admin().flush("t").await.unwrap();
    conn.admin().major_compact("t").await.unwrap();
    for i in (100..200u32).step_by(7) {
        let d = match i % 4 {
            0 => Delete::new(key(i)).add_column("f", "a"),
            1 => Delete::new(key(i)).add_columns("f", "b"),
            2 => Delete::new(key(i)).add_family("f"),
            _ => Delete::new(key(i)),
        };
        t.delete(d).await.unwrap();
    }
    for i in (200..300u32).step_by(4) {
        t.put(
            Put::new(key(i))
                .add_column("f", "zz", "new")
                .add_column("f", "a", "newer"),
        )
        .await
        .unwrap();
    }
    let endpoints = PluginEndpoints::new(host);
    for range in [
        KeyRange::all(),
        KeyRange::new(key(50), key(250)),
        KeyRange::new(key(100), key(101)),
    ] {
        let answer = endpoints
            .call(&conn, "t", &id, range.clone(), b"")
            .await
            .unwrap()
            .unwrap();
        let got = decode(&answer, COLUMNS.len());
        let want = scanned(&conn, &range).await;
        assert!(!want.is_empty());
        assert_eq!(got, want, "{range:?}");
    }
    // Only rows with one of the columns, each column's newest visible version: r004 has
    // two versions of f:a; r100's newest f:a is deleted, its older one shows.
    let all = scanned(&conn, &KeyRange::all()).await;
    let a_of = |i: u32| {
        all.iter()
            .find(|(row, _)| row == key(i).as_bytes())
            .and_then(|(_, v)| v[0].clone())
    };
    assert_eq!(a_of(4).as_deref(), Some(&b"a4.1"[..]));
    assert_eq!(a_of(100).as_deref(), Some(&b"a100.0"[..]));
    assert!(all.iter().all(|(_, v)| v.iter().any(Option::is_some)));
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_gets_an_error_from_the_column_scanner() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, _registry) = common::open(dir.path(), Default::default()).await;
    // Vetoes the batch when `next` answers an error (the result's tag at 3000).
    let mut probe = Observer::veto_first("the column scanner refused");
    probe.imports = r#"
  (import "basalt:coprocessor/region@0.2.0" "[constructor]column-scanner"
    (func $new (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "basalt:coprocessor/region@0.2.0" "[method]column-scanner.next"
    (func $next (param i32 i32 i32)))"#
        .into();
    probe.pre_batch = "(call $next (call $new (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)) (i32.const 1) (i32.const 3000))
        (if (result i32) (i32.load8_u (i32.const 3000)) (then (i32.const 320)) (else (i32.const 256)))"
        .into();
    let id = conn
        .admin()
        .upload_plugin(probe.component())
        .await
        .unwrap()
        .id;
    let desc = TableDescriptor::new(TableName::parse("h").unwrap())
        .family(ColumnFamilyDescriptor::new("f"))
        .coprocessor(CoprocessorDescriptor::new(plugin_coprocessor_name(&id)));
    conn.admin().create_table(desc).await.unwrap();
    let err = conn
        .table("h")
        .unwrap()
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    // Refused by the plugin's answer, not a fault: the host answered an error, no trap.
    assert!(
        matches!(&err, Error::Coprocessor { msg, .. } if msg.contains("the column scanner refused")),
        "{err:?}"
    );
    conn.close().await.unwrap();
}
