//! Failover of `basalt regionserver` processes: a local etcd, two region servers (real
//! processes of the `basalt` binary, 3 s leases, both serving, one of them master) on one
//! shared store directory, and a client in this process writing under load through
//! `basalt_cluster::connect`.
//!
//! Faults: the server holding the table killed with SIGKILL (once its lease expired the
//! master assigns its regions to the other, which fences its WAL, replays the regions'
//! edits and serves), and the server holding the table paused with SIGSTOP for two lease
//! lengths, then resumed (it answers nothing, not even a read, finds itself fenced and
//! starts a new life holding nothing). Afterwards every write the client saw acknowledged
//! reads back, the cluster took writes again within 15 s of each fault (the measured times
//! are printed), and the processes are stopped.

mod common;

use basalt_cluster::rpc::client::RpcClient;
use basalt_cluster::rpc::messages::Request;
use basalt_cluster::{EtcdConfig, EtcdCoordination, LocalEtcd, RetryPolicy};
use basalt_core::client::{Get, Put};
use basalt_core::{ColumnFamilyDescriptor, PreSplit, TableDescriptor, TableName};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `basalt regionserver` process, killed when dropped.
struct Server {
    name: String,
    child: Child,
}

impl Server {
    fn start(etcd: &str, prefix: &str, store: &Path, scratch: &Path, name: &str) -> Server {
        let data = scratch.join(name);
        let mut child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args([
                "regionserver",
                "--etcd",
                etcd,
                "--prefix",
                prefix,
                "--port",
                "0",
                "--info-port",
                "0",
            ])
            .args(["--lease-secs", "3", "--name", name])
            .arg("--store")
            .arg(store)
            .arg("--data")
            .arg(&data)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the basalt binary starts");
        let line = common::first_line(&mut child);
        assert!(line.starts_with("listening on "), "{line:?}");
        Server {
            name: name.to_string(),
            child,
        }
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The live server that owns every region of `orders` (waiting up to 20 s for one other
/// than `not`).
async fn holder_other_than(coord: &EtcdCoordination, not: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let by_lease: HashMap<u64, String> = coord
            .live_servers()
            .await
            .unwrap()
            .into_iter()
            .map(|s| (s.lease, s.process))
            .collect();
        let owners: Vec<Option<&String>> = coord
            .live_owners()
            .await
            .unwrap()
            .iter()
            .filter(|(k, _)| k.table.qualifier() == "orders")
            .map(|(_, lease)| by_lease.get(lease))
            .collect();
        let holders: BTreeSet<&String> = owners.iter().flatten().copied().collect();
        if owners.len() == 4 && holders.len() == 1 {
            if let Some(h) = holders.into_iter().next().filter(|h| *h != not) {
                return h.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no server other than {not:?} holds the table"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The live server that owns every region of `orders` (waiting up to 20 s for one).
async fn holder(coord: &EtcdCoordination) -> String {
    holder_other_than(coord, "").await
}

/// Waits up to 20 s until `n` servers are registered.
async fn wait_for_servers(coord: &EtcdCoordination, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while coord.live_servers().await.unwrap().len() < n {
        assert!(
            Instant::now() < deadline,
            "fewer than {n} servers registered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writers putting unique rows until stopped; every acknowledged row is logged, with the
/// time of the last acknowledgement.
struct Load {
    acked: Arc<Mutex<Vec<String>>>,
    last_ack_ms: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    start: Instant,
}

impl Load {
    fn start(
        conn: &basalt_core::Connection<basalt_cluster::RemoteBackend>,
        writers: usize,
    ) -> Load {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let last_ack_ms = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let tasks = (0..writers)
            .map(|w| {
                let t = conn.table("orders").unwrap();
                let (acked, last, stop) = (acked.clone(), last_ack_ms.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let row = format!("{}-{w}-{i:08}", (b'a' + (i % 26) as u8) as char);
                        let put = Put::new(&row).add_column("d", "v", row.as_bytes());
                        if t.put(put).await.is_ok() {
                            acked.lock().unwrap().push(row);
                            last.store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
                        }
                        i += 1;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
            })
            .collect();
        Load {
            acked,
            last_ack_ms,
            stop,
            tasks,
            start,
        }
    }

    /// How long after `fault` (an instant after `start`) the first acknowledgement came
    /// (an answer sent before the fault may still arrive within its first 200 ms: those do
    /// not count).
    async fn writable_after(&self, fault: Instant) -> Duration {
        let from = fault.duration_since(self.start).as_millis() as u64 + 200;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let last = self.last_ack_ms.load(Ordering::Relaxed);
            if last > from {
                return Duration::from_millis(last - from);
            }
            assert!(
                Instant::now() < deadline,
                "no write acknowledged within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        let acked = self.acked.lock().unwrap().clone();
        acked
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_or_paused_server_loses_no_acknowledged_write() {
    let etcd = LocalEtcd::start().expect("a local etcd (Debian's etcd-server)");
    let endpoint = etcd.endpoint();
    let prefix = format!("/failover-{}", std::process::id());
    let store = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let config = EtcdConfig::new([endpoint.clone()]).prefix(prefix.clone());
    let coord = EtcdCoordination::connect(config.clone()).await.unwrap();
    let mut servers = vec![
        Server::start(&endpoint, &prefix, store.path(), scratch.path(), "rs-0"),
        Server::start(&endpoint, &prefix, store.path(), scratch.path(), "rs-1"),
    ];
    wait_for_servers(&coord, 2).await;

    let conn = basalt_cluster::connect_with(config, RetryPolicy::default())
        .await
        .unwrap();
    // Placed whole: one server holds the table, the victim of each fault.
    basalt_cluster::ClusterAdmin::new(coord.clone())
        .set_placement(
            &TableName::parse("orders").unwrap(),
            basalt_cluster::Placement::Grouped,
        )
        .await
        .unwrap();
    let desc = TableDescriptor::new(TableName::parse("orders").unwrap())
        .family(ColumnFamilyDescriptor::new("d"));
    let split = PreSplit::Keys(vec![b"g".to_vec(), b"n".to_vec(), b"t".to_vec()]);
    conn.admin()
        .create_table_with_splits(desc, split)
        .await
        .unwrap();
    let load = Load::start(&conn, 4);
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // kill -9 the server holding the table; the master moves its regions to the other.
    let victim = holder(&coord).await;
    let i = servers.iter().position(|s| s.name == victim).unwrap();
    let killed_at = Instant::now();
    servers[i].signal("-KILL");
    let survivor = holder_other_than(&coord, &victim).await;
    println!(
        "kill -9 {victim}: {survivor} holds the table after {:?}",
        killed_at.elapsed()
    );
    let after_kill = load.writable_after(killed_at).await;
    println!(
        "kill -9 {victim}: writable again after {:?}",
        after_kill + Duration::from_millis(200)
    );
    assert!(after_kill < Duration::from_secs(15), "{after_kill:?}");
    // The killed server comes back, serving nothing until the master assigns it regions.
    servers[i] = Server::start(&endpoint, &prefix, store.path(), scratch.path(), &victim);
    wait_for_servers(&coord, 2).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;

    // SIGSTOP the server holding the table for two lease lengths, then SIGCONT.
    let paused = holder(&coord).await;
    let paused_address = coord
        .live_servers()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.process == paused)
        .unwrap()
        .info
        .rpc_address;
    let j = servers.iter().position(|s| s.name == paused).unwrap();
    let paused_at = Instant::now();
    servers[j].signal("-STOP");
    // Another server takes over while it is paused.
    let now = holder_other_than(&coord, &paused).await;
    println!(
        "SIGSTOP {paused}: {now} holds the table after {:?}",
        paused_at.elapsed()
    );
    let after_pause = load.writable_after(paused_at).await;
    println!(
        "SIGSTOP {paused}: writable again after {:?}",
        after_pause + Duration::from_millis(200)
    );
    assert!(after_pause < Duration::from_secs(15), "{after_pause:?}");
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(paused_at.elapsed())).await;
    servers[j].signal("-CONT");
    // Woken up, it answers nothing: not even a read (its lease is past, by its own clock).
    let direct = RpcClient::new(&paused_address).unwrap();
    let get = Request::Get(
        TableName::parse("orders").unwrap(),
        Get::new("a-0-00000000"),
    );
    let answer = direct.call(get, Duration::from_secs(3)).await;
    assert!(answer.is_err(), "the paused server answered {answer:?}");
    println!(
        "SIGCONT {paused}: a read sent to it at once: {:?}",
        answer.err()
    );
    // It starts a new life (a new lease) and serves nothing of the table.
    wait_for_servers(&coord, 2).await;
    assert_eq!(
        holder(&coord).await,
        now,
        "the paused server was fenced and holds nothing"
    );

    let acked = load.stop().await;
    assert!(
        acked.len() > 100,
        "only {} writes acknowledged",
        acked.len()
    );
    let t = conn.table("orders").unwrap();
    let mut lost = Vec::new();
    for row in &acked {
        let got = t.get(Get::new(row)).await.unwrap();
        if got.is_empty() {
            lost.push(row.clone());
        }
    }
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost: {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    println!("{} acknowledged writes, none lost", acked.len());
    drop(servers);
}
