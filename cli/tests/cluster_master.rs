//! `basalt master`: a candidate for master that serves no region, beside a `basalt
//! regionserver --no-master`. The master is elected (its lease `<name>.master` holds the
//! master key), assigns the regions of a table the client creates to the region server,
//! and the region server never becomes master; when the master process is killed, its term
//! ends with its lease and no other candidate takes it.

mod common;

use basalt_cluster::{EtcdConfig, EtcdCoordination, LocalEtcd, RetryPolicy};
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
