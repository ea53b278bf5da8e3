//! The client side of `failover_under_load`: this test binary run again inside the
//! client's network namespace (`BASALT_FAILOVER_ROLE=client`), or asked for the cluster's
//! state (`BASALT_FAILOVER_ROLE=status`).
//!
//! As the client it creates the tables (each pre-split in four, with a region-local index
//! on `d:user`), waits until the master spread them over the three servers, then runs the
//! writers until the orchestrator's stop file appears: each batch is an order row (its
//! index row written in the same region by the index coprocessor) and an increment of the
//! writer's counter row, in one table, so on one server. Every batch is counted as
//! attempted before it is sent; every acknowledged one is logged with its table, row,
//! writer, the server that acknowledged it and that server's WAL writer and segment.

use basalt_cluster::{EtcdConfig, EtcdCoordination, RetryPolicy};
use basalt_core::client::{BatchOp, Increment, Put};
use basalt_core::{
    ColumnFamilyDescriptor, CoprocessorDescriptor, PreSplit, TableDescriptor, TableName,
};
use basalt_index::{IndexDef, IndexState, ARG_PREFIX, MAINTAINER};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The tables, one per server once spread.
pub const TABLES: [&str; 3] = ["orders0", "orders1", "orders2"];
/// Writers (each writes one table: writer `w` writes `TABLES[w % 3]`).
pub const WRITERS: usize = 8;
/// The pause between a writer's batches (a bounded rate: at most 50 batches/s each).
pub const PAUSE: Duration = Duration::from_millis(20);

/// Who acknowledged each (table, row) last.
type AckTable = HashMap<(String, Vec<u8>), basalt_cluster::rpc::messages::Acknowledgement>;

fn etcd() -> EtcdConfig {
    let url = std::env::var("BASALT_ETCD").expect("BASALT_ETCD is set by the orchestrator");
    EtcdConfig::new([url])
}

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("BASALT_FAILOVER_DIR").expect("BASALT_FAILOVER_DIR is set"))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Prints the cluster's state: `MASTER <process>`, `LIVE <process>` per server, and
/// `HOLDER <table> <process>` for a table all of whose regions one live server owns.
pub fn status() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let coord = EtcdCoordination::connect(etcd()).await.expect("etcd");
        let live = coord.live_servers().await.expect("servers");
        // On a line of its own: the test harness prints the test's name first.
        println!();
        if let Ok(Some(m)) = coord.leader().await {
            // The master campaigns under a lease named `<process>.master`.
            let process = m.process.strip_suffix(".master").unwrap_or(&m.process);
            println!("MASTER {process}");
        }
        for s in &live {
            println!("LIVE {}", s.process);
        }
        let by_lease: HashMap<u64, &str> =
            live.iter().map(|s| (s.lease, s.process.as_str())).collect();
        let owners = coord.live_owners().await.expect("owners");
        let mut holders: BTreeMap<String, (usize, BTreeSet<&str>)> = BTreeMap::new();
        for (k, lease) in &owners {
            let e = holders.entry(k.table.qualifier().to_string()).or_default();
            e.0 += 1;
            if let Some(p) = by_lease.get(lease) {
                e.1.insert(p);
            }
        }
        for (table, (owned, servers)) in holders {
            if owned == 4 && servers.len() == 1 {
                if let Some(p) = servers.into_iter().next() {
                    println!("HOLDER {table} {p}");
                }
            }
        }
    });
}

/// Runs the client (see the module doc).
pub fn run() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(client());
}

async fn client() {
    let dir = dir();
    let policy = RetryPolicy::default();
    let conn = basalt_cluster::connect_with(etcd(), policy)
        .await
        .expect("the client connects");
    let coord = EtcdCoordination::connect(etcd()).await.expect("etcd");
    let admin = basalt_cluster::ClusterAdmin::new(coord.clone());
    for t in TABLES {
        // An order row and its writer's counter row are in one batch: the table is placed
        // whole on one server, so the batch is atomic.
        let name = TableName::parse(t).expect("a name");
        admin
            .set_placement(&name, basalt_cluster::Placement::Grouped)
            .await
            .expect("the placement is set");
        let index = IndexDef {
            state: IndexState::Active,
            ..IndexDef::new("by_user", t).local().column("d", "user")
        };
        let maintainer = CoprocessorDescriptor::new(MAINTAINER)
            .priority(CoprocessorDescriptor::PRIORITY_USER.saturating_mul(3))
            .arg(
                format!("{ARG_PREFIX}by_user"),
                index.to_arg().expect("an index definition"),
            );
        let desc = TableDescriptor::new(TableName::parse(t).expect("a name"))
            .family(ColumnFamilyDescriptor::new("d"))
            .family(ColumnFamilyDescriptor::local_rows())
            .coprocessor(maintainer);
        let split = PreSplit::Keys(vec![b"g".to_vec(), b"n".to_vec(), b"t".to_vec()]);
        conn.admin()
            .create_table_with_splits(desc, split)
            .await
            .expect("the table is created");
    }
    // The master spreads the table groups: one table per server.
    let spread = Instant::now() + Duration::from_secs(60);
    loop {
        let assigned = coord.assignments().await.expect("assignments");
        let servers: BTreeSet<&String> = assigned.values().collect();
        let owners = coord.live_owners().await.expect("owners");
        if assigned.len() == 12 && servers.len() == 3 && owners.len() == 12 {
            break;
        }
        assert!(
            Instant::now() < spread,
            "the tables were not spread: {assigned:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let acks: Arc<Mutex<AckTable>> = Arc::default();
    let seen = acks.clone();
    conn.backend()
        .observe_acknowledgements(Arc::new(move |t, row, ack| {
            if let Ok(mut m) = seen.lock() {
                m.insert((t.qualifier().to_string(), row.to_vec()), ack.clone());
            }
        }));
    let log = Arc::new(Mutex::new(
        std::fs::File::create(dir.join("acks.log")).expect("the ack log"),
    ));
    let attempted: Arc<Vec<AtomicU64>> =
        Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    std::fs::write(dir.join("ready"), b"").expect("the ready file");
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let table = TABLES[w % TABLES.len()];
        let t = conn.table(table).expect("a table");
        let (acks, log, attempted, stop) =
            (acks.clone(), log.clone(), attempted.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            let mut errors = 0u32;
            let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ w as u64;
            while !stop.load(Ordering::Relaxed) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let letter = (b'a' + (state % 26) as u8) as char;
                let row = format!("{letter}-{w}-{i:08}");
                let order = Put::new(&row)
                    .add_column("d", "user", format!("u{}", i % 50))
                    .add_column("d", "amount", format!("{}", i % 997));
                let counter = Increment::new(format!("cnt-{w}")).add_column("d", "n", 1);
                attempted[w].fetch_add(1, Ordering::SeqCst);
                let out = t
                    .batch(vec![BatchOp::Put(order), BatchOp::Increment(counter)])
                    .await;
                let failure = match &out {
                    Err(e) => Some(e.to_string()),
                    Ok(results) => results
                        .iter()
                        .find_map(|r| r.as_ref().err())
                        .map(|e| e.to_string()),
                };
                if let (Some(e), true) = (failure, errors < 20) {
                    errors += 1;
                    if let Ok(mut f) = log.lock() {
                        let _ = writeln!(f, "ERR {w} {} {e}", now_ms());
                    }
                }
                if let Ok(results) = out {
                    if results.iter().all(|r| r.is_ok()) {
                        let ack = acks.lock().ok().and_then(|m| {
                            m.get(&(table.to_string(), row.clone().into_bytes()))
                                .cloned()
                        });
                        let (server, writer, segment) = ack
                            .map_or(("?".to_string(), 0, 0), |a| (a.server, a.writer, a.segment));
                        if let Ok(mut f) = log.lock() {
                            let _ = writeln!(
                                f,
                                "ACK {table} {row} {w} {server} {writer} {segment} {}",
                                now_ms()
                            );
                        }
                    }
                }
                i += 1;
                tokio::time::sleep(PAUSE).await;
            }
        }));
    }
    while !dir.join("stop").exists() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let mut f = log.lock().expect("the ack log");
    for (w, n) in attempted.iter().enumerate() {
        let _ = writeln!(f, "ATTEMPTED {w} {}", n.load(Ordering::SeqCst));
    }
    let _ = f.flush();
    drop(f);
    std::fs::write(dir.join("done"), b"").expect("the done file");
}
