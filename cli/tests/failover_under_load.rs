//! `failover_under_load` (issue 48): etcd, three region servers (`basalt regionserver`,
//! 3 s leases, every one a candidate for master) and a client, each in its own network
//! namespace (`common::netns`: a bridge, a veth per node), a shared directory as the
//! object store. The client (this binary again, in its namespace: `failover/client.rs`)
//! creates three tables (each one table group, so the master puts one on each server), then
//! eight writers send batches at a bounded rate: an order row (with a region-local index on
//! it) and an increment of the writer's counter, atomic on one server, each acknowledgement
//! logged with its server and that server's WAL writer and segment.
//!
//! Faults, in an order and with pauses drawn from the seed: kill -9 the server holding a
//! table (restarted afterwards); SIGSTOP another for two lease lengths, then SIGCONT; take
//! a third's link down for two lease lengths; kill -9 the master (restarted afterwards).
//! Then, with every process stopped, an engine opening the store checks: zero acknowledged
//! writes lost; zero acknowledgements from a fenced writer (every acknowledged segment is
//! below its writer's fence); each local index equal to a rebuild from its data;
//! acknowledged <= counter <= attempted per writer; every region writable again within
//! 15 s of each fault (the times are printed: `RECOVERY <fault> <ms>`).
//!
//! One seed by default; `BASALT_FAILOVER_SEEDS=n` runs n seeds, `BASALT_FAILOVER_SEED=s`
//! one given seed. Needs root and iproute2 (`.ci/run` installs it); without them it fails,
//! saying so.

#[path = "failover/client.rs"]
mod client;
mod common;

use basalt_core::client::Get;
use basalt_core::objects::{Objects, StoreObjects};
use basalt_core::{Config, TableName};
use common::netns::{self, Lab};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The lease of every process.
const LEASE: Duration = Duration::from_secs(3);
/// How long a region may stay unwritable after a fault.
const RECOVERY_BOUND: Duration = Duration::from_secs(15);
const SERVERS: [&str; 3] = ["rs1", "rs2", "rs3"];

#[test]
fn failover_under_load() {
    match std::env::var("BASALT_FAILOVER_ROLE").as_deref() {
        Ok("client") => return client::run(),
        Ok("status") => return client::status(),
        _ => {}
    }
    assert!(
        netns::available(),
        "failover_under_load needs root and iproute2 (`ip`): .ci/run installs it"
    );
    let seeds: Vec<u64> = match std::env::var("BASALT_FAILOVER_SEED") {
        Ok(s) => vec![s.parse().expect("a seed")],
        Err(_) => {
            let n: u64 = std::env::var("BASALT_FAILOVER_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            (1..=n).collect()
        }
    };
    let _ = Lab::sweep_stale();
    for seed in seeds {
        println!("SEED {seed}");
        run_seed(seed);
    }
}

/// A small seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Kill,
    Pause,
    CutLink,
    KillMaster,
}

/// A process in a namespace, killed when dropped.
struct Proc {
    child: Child,
}

impl Proc {
    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {sig}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Cluster {
    lab: Lab,
    dir: PathBuf,
    store: PathBuf,
    etcd_url: String,
    servers: BTreeMap<String, Proc>,
}

impl Cluster {
    fn start_server(&mut self, name: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .expect("a server log");
        let mut child = self
            .lab
            .command(name, env!("CARGO_BIN_EXE_basalt"))
            .args(["regionserver", "--etcd", &self.etcd_url, "--port", "16020"])
            .args(["--bind", &self.lab.addr(name).to_string(), "--name", name])
            .args(["--lease-secs", &LEASE.as_secs().to_string()])
            .arg("--store")
            .arg(&self.store)
            .arg("--data")
            .arg(self.dir.join(format!("{name}-{}", now_ms())))
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("the basalt binary starts");
        let line = common::first_line(&mut child);
        if !line.starts_with("listening on ") {
            let _ = child.wait();
            let log = std::fs::read_to_string(self.dir.join(format!("{name}.log")));
            panic!("{name} did not start: {line:?}; its log: {log:?}");
        }
        self.servers.insert(name.to_string(), Proc { child });
    }

    /// The cluster's state through a status process in the client's namespace: the
    /// master and each table's holder.
    fn status(&self) -> (Option<String>, BTreeMap<String, String>) {
        let out = role(&self.lab, "status", &self.etcd_url)
            .output()
            .expect("the status process runs");
        let text = String::from_utf8_lossy(&out.stdout);
        if std::env::var_os("BASALT_FAILOVER_DEBUG").is_some() {
            eprintln!("status: {text}\n{}", String::from_utf8_lossy(&out.stderr));
        }
        let mut master = None;
        let mut holders = BTreeMap::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["MASTER", m] => master = Some(m.to_string()),
                ["HOLDER", t, p] => {
                    holders.insert(t.to_string(), p.to_string());
                }
                _ => {}
            }
        }
        (master, holders)
    }

    /// Waits until every table is held by one live server and a master is elected.
    fn settled(&self, within: Duration) -> (String, BTreeMap<String, String>) {
        let deadline = Instant::now() + within;
        loop {
            let (master, holders) = self.status();
            if let (Some(m), 3) = (master, holders.len()) {
                return (m, holders);
            }
            assert!(Instant::now() < deadline, "the cluster did not settle");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// This test binary run again in the client's namespace as `role` (`client`, `status`),
/// reaching etcd at `etcd_url`.
fn role(lab: &Lab, role: &str, etcd_url: &str) -> Command {
    let mut command = lab.command("client", std::env::current_exe().expect("this test"));
    command
        .args([
            "failover_under_load",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BASALT_FAILOVER_ROLE", role)
        .env("BASALT_ETCD", etcd_url);
    command
}

/// Waits up to 30 s until etcd answers its health check from the client's namespace.
fn wait_for_etcd(lab: &Lab, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let probe =
        format!("import urllib.request; urllib.request.urlopen('{url}/health', timeout=1).read()");
    loop {
        let ok = lab
            .command("client", "python3")
            .args(["-c", &probe])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
        assert!(Instant::now() < deadline, "etcd did not come up at {url}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn run_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let lab = Lab::new(&["etcd", "rs1", "rs2", "rs3", "client"]).expect("the lab");
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path().to_path_buf();
    let store = dir.join("store");
    std::fs::create_dir_all(&store).expect("the store");
    let etcd_addr = lab.addr("etcd");
    let etcd_url = format!("http://{etcd_addr}:2379");
    let etcd_bin = std::env::var(basalt_cluster::ETCD_BIN_VAR).unwrap_or_else(|_| "etcd".into());
    let etcd = Proc {
        child: lab
            .command("etcd", etcd_bin)
            .args(["--name", "e", "--data-dir"])
            .arg(dir.join("etcd"))
            .args(["--listen-client-urls", &etcd_url])
            .args(["--advertise-client-urls", &etcd_url])
            .args(["--listen-peer-urls", &format!("http://{etcd_addr}:2380")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://{etcd_addr}:2380"),
            ])
            .args(["--initial-cluster", &format!("e=http://{etcd_addr}:2380")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd starts (Debian's etcd-server)"),
    };
    wait_for_etcd(&lab, &etcd_url);
    let mut cluster = Cluster {
        lab,
        dir: dir.clone(),
        store: store.clone(),
        etcd_url: etcd_url.clone(),
        servers: BTreeMap::new(),
    };
    for s in SERVERS {
        cluster.start_server(s);
    }
    let client = Proc {
        child: role(&cluster.lab, "client", &etcd_url)
            .env("BASALT_FAILOVER_DIR", &dir)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("the client starts"),
    };
    let ready = Instant::now() + Duration::from_secs(90);
    while !dir.join("ready").exists() {
        assert!(Instant::now() < ready, "the client never got ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));

    // The faults, in a seeded order, the master kill anywhere among them.
    let mut faults = vec![Fault::Kill, Fault::Pause, Fault::CutLink, Fault::KillMaster];
    for i in (1..faults.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        faults.swap(i, j);
    }
    let mut injected: Vec<(Fault, String, u64)> = Vec::new();
    for fault in faults {
        let (master, holders) = cluster.settled(Duration::from_secs(60));
        // A table holder that is not the master (the master kill is a fault of its own).
        let others: Vec<&String> = holders.values().filter(|p| **p != master).collect();
        let victim = match fault {
            Fault::KillMaster => master.clone(),
            _ => others[rng.below(others.len() as u64) as usize].clone(),
        };
        let at = now_ms();
        println!("FAULT {fault:?} {victim}");
        match fault {
            Fault::Kill | Fault::KillMaster => {
                cluster.servers.remove(&victim); // SIGKILL on drop
                std::thread::sleep(2 * LEASE);
                cluster.start_server(&victim);
            }
            Fault::Pause => {
                let p = &cluster.servers[&victim];
                p.signal("-STOP");
                std::thread::sleep(2 * LEASE);
                cluster.servers[&victim].signal("-CONT");
            }
            Fault::CutLink => {
                cluster.lab.link_down(&victim).expect("link down");
                std::thread::sleep(2 * LEASE);
                cluster.lab.link_up(&victim).expect("link up");
            }
        }
        injected.push((fault, victim, at));
        std::thread::sleep(Duration::from_millis(1000 + rng.below(2000)));
    }
    cluster.settled(Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(dir.join("stop"), b"").expect("the stop file");
    let done = Instant::now() + Duration::from_secs(60);
    while !dir.join("done").exists() {
        assert!(Instant::now() < done, "the client never finished");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(client);
    cluster.servers.clear();
    drop(etcd);
    let Cluster { lab, .. } = cluster;
    drop(lab);
    check(&dir, &store, &injected);
}

/// What the client logged: acknowledged batches and attempts per writer.
struct Log {
    /// (table, row, writer, server, wal writer, segment, time ms)
    acks: Vec<(String, String, usize, String, u64, u64, u64)>,
    attempted: BTreeMap<usize, u64>,
}

fn read_log(dir: &Path) -> Log {
    let text = std::fs::read_to_string(dir.join("acks.log")).expect("the ack log");
    let mut log = Log {
        acks: Vec::new(),
        attempted: BTreeMap::new(),
    };
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["ACK", t, row, writer, server, wal, seg, ms] => log.acks.push((
                t.to_string(),
                row.to_string(),
                writer.parse().expect("a writer"),
                server.to_string(),
                wal.parse().expect("a WAL writer"),
                seg.parse().expect("a segment"),
                ms.parse().expect("a time"),
            )),
            ["ATTEMPTED", w, n] => {
                log.attempted
                    .insert(w.parse().expect("a writer"), n.parse().expect("a count"));
            }
            ["ERR", ..] => println!("{line}"),
            _ => panic!("a line the client does not write: {line:?}"),
        }
    }
    log
}

/// The fence of each WAL writer folder of the store (the id of an empty last object).
fn fences(store: &Path) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    let Ok(folders) = std::fs::read_dir(store.join("wal")) else {
        return out;
    };
    for folder in folders.flatten() {
        let Some(writer) = folder.file_name().to_str().and_then(|n| {
            n.trim_start_matches(|c: char| !c.is_ascii_digit())
                .parse::<u64>()
                .ok()
        }) else {
            continue;
        };
        let mut ids: Vec<(u64, u64)> = std::fs::read_dir(folder.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|f| {
                let id = f.file_name().to_str()?.parse::<u64>().ok()?;
                Some((id, f.metadata().ok()?.len()))
            })
            .collect();
        ids.sort();
        if let Some((id, 0)) = ids.last() {
            out.insert(writer, *id);
        }
    }
    out
}

/// The checks after the run (see the module doc).
fn check(dir: &Path, store: &Path, injected: &[(Fault, String, u64)]) {
    let log = read_log(dir);
    assert!(
        log.acks.len() > 500,
        "only {} batches acknowledged",
        log.acks.len()
    );
    // No acknowledgement from a fenced writer.
    let fences = fences(store);
    for (t, row, _, server, writer, segment, _) in &log.acks {
        assert!(*writer > 0, "{t}/{row}: no acknowledgement metadata");
        if let Some(fence) = fences.get(writer) {
            assert!(
                segment < fence,
                "{t}/{row} acknowledged by {server} in segment {segment} of writer {writer}, fenced at {fence}"
            );
        }
    }
    // Every region writable again within the bound after each fault.
    for (fault, victim, at) in injected {
        let mut worst = 0u64;
        for (table, range) in client::TABLES
            .iter()
            .flat_map(|t| [("", "g"), ("g", "n"), ("n", "t"), ("t", "~")].map(|r| (*t, r)))
        {
            let first = log
                .acks
                .iter()
                .filter(|a| a.0 == table && a.1.as_str() >= range.0 && a.1.as_str() < range.1)
                .map(|a| a.6)
                .filter(|ms| *ms > at + 200)
                .min()
                .unwrap_or(u64::MAX);
            worst = worst.max(first.saturating_sub(*at));
        }
        println!("RECOVERY {fault:?} {victim} {worst} ms");
        assert!(
            Duration::from_millis(worst) < RECOVERY_BOUND,
            "{fault:?} of {victim}: a region was unwritable for {worst} ms"
        );
    }
    // And no table went longer without an acknowledgement at any time of the run.
    for table in client::TABLES {
        let mut times: Vec<u64> = log
            .acks
            .iter()
            .filter(|a| a.0 == table)
            .map(|a| a.6)
            .collect();
        times.sort_unstable();
        let gap = times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        println!("LONGEST GAP {table} {gap} ms");
        assert!(
            Duration::from_millis(gap) < RECOVERY_BOUND,
            "{table} took no write for {gap} ms"
        );
    }
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let objects: Arc<dyn Objects> =
            Arc::new(StoreObjects::local_directory(store).expect("the store"));
        let check_dir = dir.join("check");
        let data = basalt_cli::DataDir::open_with(Config::new(&check_dir).objects(objects))
            .await
            .expect("the store opens");
        let mut lost = Vec::new();
        let mut acked: BTreeMap<usize, u64> = BTreeMap::new();
        for (t, row, w, ..) in &log.acks {
            *acked.entry(*w).or_default() += 1;
            let got = data.conn.table(t.as_str()).expect("a table").get(Get::new(row)).await;
            if got.map(|r| r.value("d", "user").is_none()).unwrap_or(true) {
                lost.push(format!("{t}/{row}"));
            }
        }
        assert!(lost.is_empty(), "{} acknowledged writes lost: {:?}", lost.len(), &lost[..lost.len().min(10)]);
        for (w, attempted) in &log.attempted {
            let t = client::TABLES[w % client::TABLES.len()];
            let r = data
                .conn
                .table(t)
                .expect("a table")
                .get(Get::new(format!("cnt-{w}")))
                .await
                .expect("the counter");
            let counter = r
                .value("d", "n")
                .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
                .map_or(0, |b| i64::from_be_bytes(b) as u64);
            let ok = acked.get(w).copied().unwrap_or(0);
            println!("COUNTER writer {w}: acknowledged {ok} <= counter {counter} <= attempted {attempted}");
            assert!(ok <= counter && counter <= *attempted, "writer {w}: {ok} <= {counter} <= {attempted}");
        }
        let indexes = basalt_index::IndexAdmin::new(&data.conn, data.indexes.clone());
        for t in client::TABLES {
            let report = indexes
                .verify(TableName::parse(t).expect("a name"), "by_user")
                .await
                .expect("the index verifies");
            assert!(report.is_consistent(), "{t}: index differs from its data: {report:?}");
            println!("INDEX {t}: {} data rows, {} index rows, consistent", report.data_rows, report.index_rows);
        }
        println!("{} acknowledged batches, none lost", log.acks.len());
        data.conn.close().await.expect("the check closes");
    });
}
