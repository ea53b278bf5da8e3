//! `basalt master`: a candidate for master that serves no region, beside a `basalt
//! regionserver --no-master`. The master is elected (its lease `<name>.master` holds the
//! master key), assigns the regions of a table the client creates to the region server,
//! and the region server never becomes master; when the master process is killed, its term
//! ends with its lease and no other candidate takes it.
//!
//! A schema change's hold under faults, with two `basalt master` processes and three
//! region servers: a client (a shell) killed while it holds a spread table (its master
//! paused) leaves the hold to its lease, after which the next master spreads the table again
//! unchanged; a master killed while a change waits for its gather is replaced, and the next
//! master gathers the table, the change goes through and the table spreads again.

mod common;

use basalt_cluster::{ClusterAdmin, EtcdConfig, EtcdCoordination, LocalEtcd, RetryPolicy};
use basalt_core::client::{Get, Put};
use basalt_core::{ColumnFamilyDescriptor, PreSplit, TableDescriptor, TableName};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str], first: &str) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the basalt binary starts");
    let line = common::first_line(&mut child);
    assert!(line.starts_with(first), "{args:?}: {line:?}");
    Proc(child)
}

/// Waits up to 15 s for `check` to hold.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within 15 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_process_assigns_regions_to_servers_that_never_campaign() {
    let etcd = LocalEtcd::start().expect("a local etcd (Debian's etcd-server)");
    let endpoint = etcd.endpoint();
    let prefix = format!("/master-{}", std::process::id());
    let store = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let config = EtcdConfig::new([endpoint.clone()]).prefix(prefix.clone());
    let coord = EtcdCoordination::connect(config.clone()).await.unwrap();

    let master = spawn(
        &[
            "master",
            "--etcd",
            &endpoint,
            "--prefix",
            &prefix,
            "--name",
            "m1",
            "--lease-secs",
            "3",
            "--info-port",
            "0",
        ],
        "campaigning",
    );
    let data = scratch.path().join("rs-0");
    let store_arg = store.path().to_str().unwrap().to_string();
    let data_arg = data.to_str().unwrap().to_string();
    let _server = spawn(
        &[
            "regionserver",
            "--etcd",
            &endpoint,
            "--prefix",
            &prefix,
            "--port",
            "0",
            "--info-port",
            "0",
            "--name",
            "rs-0",
            "--lease-secs",
            "3",
            "--no-master",
            "--store",
            &store_arg,
            "--data",
            &data_arg,
        ],
        "listening on ",
    );
    until("m1 becomes master", || async {
        matches!(coord.leader().await, Ok(Some(l)) if l.process == "m1.master")
    })
    .await;
    until("rs-0 registers", || async {
        coord.live_servers().await.map(|s| s.len()).unwrap_or(0) == 1
    })
    .await;

    let conn = basalt_cluster::connect_with(config, RetryPolicy::default())
        .await
        .unwrap();
    let desc = TableDescriptor::new(TableName::parse("orders").unwrap())
        .family(ColumnFamilyDescriptor::new("d"));
    conn.admin()
        .create_table_with_splits(desc, PreSplit::Keys(vec![b"m".to_vec()]))
        .await
        .unwrap();
    until("the table's regions are assigned to rs-0", || async {
        let a = coord.assignments().await.unwrap_or_default();
        a.len() == 2 && a.values().all(|p| p == "rs-0")
    })
    .await;
    let t = conn.table("orders").unwrap();
    t.put(Put::new("a").add_column("d", "v", "1"))
        .await
        .unwrap();
    assert!(!t.get(Get::new("a")).await.unwrap().is_empty());

    // The master dies: its term ends with its lease; the server never campaigns.
    drop(master);
    until("the master key is gone", || async {
        matches!(coord.leader().await, Ok(None))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(matches!(coord.leader().await, Ok(None)));
    // Regions stay served without a master.
    assert!(!t.get(Get::new("a")).await.unwrap().is_empty());
}

/// Sends `signal` (`-STOP`, `-KILL`) to `process`.
fn signal(process: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &process.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal}");
}

/// Regions of `table` per live server once nothing is in transition.
async fn spread_of(admin: &ClusterAdmin, table: &TableName) -> Vec<usize> {
    let mut per: std::collections::BTreeMap<String, usize> = Default::default();
    for r in admin.regions(Some(table)).await.unwrap_or_default() {
        *per.entry(r.serving.unwrap_or_default()).or_default() += 1;
    }
    per.into_values().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_hold_outlives_neither_its_client_nor_its_master() {
    let mut cluster = common::cluster::Cluster::empty();
    let coord = cluster.coordination().await;
    let (m1, _) = cluster.start_master("m1");
    until("m1 becomes master", || async {
        matches!(coord.leader().await, Ok(Some(l)) if l.process == "m1.master")
    })
    .await;
    let (m2, _) = cluster.start_master("m2");
    for i in 0..3 {
        cluster.start_server_with(&format!("rs-{i}"), &["--no-master"]);
    }
    until("three servers register", || async {
        coord.live_servers().await.map(|s| s.len()).unwrap_or(0) == 3
    })
    .await;
    let conn = basalt_cluster::connect_with(cluster.config(), RetryPolicy::default())
        .await
        .unwrap();
    let admin = ClusterAdmin::connect(cluster.config()).await.unwrap();
    let events = TableName::parse("events").unwrap();
    let splits = ["d", "h", "l", "p", "t"].map(|k| k.as_bytes().to_vec());
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(events.clone()).family(ColumnFamilyDescriptor::new("f")),
            PreSplit::Keys(splits.to_vec()),
        )
        .await
        .unwrap();
    let t = conn.table("events").unwrap();
    let rows: Vec<String> = (b'a'..=b'z').map(|c| format!("{}1", c as char)).collect();
    for r in &rows {
        t.put(Put::new(r).add_column("f", "q", r)).await.unwrap();
    }
    let spread = || async { spread_of(&admin, &events).await == [2, 2, 2] };
    until("the table spreads 2/2/2", spread).await;

    // A client dies holding the table: a shell whose `alter` waits for the gather, which
    // no master makes (both are paused).
    signal(&m1.0, "-STOP");
    signal(&m2.0, "-STOP");
    let mut shell = common::cluster::basalt()
        .arg("shell")
        .args(cluster.flags())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let script = b"alter 'events', NAME => 'h'\n";
    std::io::Write::write_all(shell.stdin.as_mut().unwrap(), script).unwrap();
    drop(shell.stdin.take());
    until("the shell's alter holds the table", || async {
        admin
            .status()
            .await
            .is_ok_and(|s| s.held == [events.clone()])
    })
    .await;
    signal(&shell, "-KILL");
    let _ = shell.wait();
    signal(&m1.0, "-KILL");
    signal(&m2.0, "-CONT");
    // m2 takes over and gathers the held table; the hold ends with the dead client's lease
    // (10 s), and the table spreads again, unchanged.
    until("m2 takes over", || async {
        matches!(coord.leader().await, Ok(Some(l)) if l.process == "m2.master")
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut gathered = false;
    loop {
        let s = admin.status().await.unwrap();
        let spread = spread_of(&admin, &events).await;
        gathered |= !s.held.is_empty() && spread == [6];
        if s.held.is_empty() && spread == [2, 2, 2] {
            break;
        }
        assert!(Instant::now() < deadline, "{s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gathered, "m2 gathered the held table while the hold lasted");
    let families = conn
        .admin()
        .describe_table("events")
        .await
        .unwrap()
        .families;
    assert_eq!(families.len(), 1, "the dead client's change was never sent");
    drop(m1);
    until("m2 stays master", || async {
        matches!(coord.leader().await, Ok(Some(l)) if l.process == "m2.master")
    })
    .await;

    // The master dies while a schema change waits for its gather: the next master gathers
    // the table, the change goes through, and the table spreads again.
    signal(&m2.0, "-STOP");
    let change = {
        let conn = conn.clone();
        tokio::spawn(async move {
            conn.admin()
                .add_column_family("events", ColumnFamilyDescriptor::new("h"))
                .await
        })
    };
    until("the change holds the table", || async {
        admin
            .status()
            .await
            .is_ok_and(|s| s.held == [events.clone()])
    })
    .await;
    signal(&m2.0, "-KILL");
    let (_m3, _) = cluster.start_master("m3");
    tokio::time::timeout(Duration::from_secs(60), change)
        .await
        .expect("the change ends within 60 s")
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(admin.status().await.unwrap().held.is_empty()
        && spread_of(&admin, &events).await == [2, 2, 2])
    {
        assert!(Instant::now() < deadline, "the table spreads again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for r in &rows {
        t.put(Put::new(r).add_column("h", "q", r)).await.unwrap();
        let got = t.get(Get::new(r)).await.unwrap();
        assert_eq!(
            got.value("f", "q").map(|v| v.to_vec()),
            Some(r.as_bytes().to_vec())
        );
        assert_eq!(
            got.value("h", "q").map(|v| v.to_vec()),
            Some(r.as_bytes().to_vec())
        );
    }
    drop(m2);
}
