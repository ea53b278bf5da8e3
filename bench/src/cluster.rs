//! The `cluster` suite: YCSB workloads A and C through the cluster's remote client
//! (`basalt_cluster`) against the embedded engine, in one run on this machine.
//!
//! Three setups run one after the other, each on fresh directories, with the ycsb suite's
//! workload and driver (`ycsb::basalt`, generic over the client's backend): the embedded
//! engine (`Connection::open`, the baseline, exactly the ycsb suite's Basalt run); a cluster
//! of one region server; a cluster of three. A cluster is a local etcd (`LocalEtcd`, one for
//! the run, each cluster under a key prefix of its own), region servers started in this
//! process (`regionserver::start_with`, lease 3 s, the engine's block cache as the
//! embedded one's) on a shared store directory with a scratch directory each, and a client
//! that finds them through etcd (`connect_with`), talking gRPC over loopback. Each setup
//! loads the records, then runs A (update heavy) and C (read only).
//!
//! What the figures are: the client, the servers and etcd share this machine's cores (the
//! servers and the client share one tokio runtime), so a cluster figure is the cost of the
//! RPC path on the same hardware, not a cluster's capacity. With three servers the table's
//! regions are spread over the three by the master's balancer before the load (the run
//! prints the regions per server), so each server serves a third of the rows, but the
//! three share the same two cores. Writes are not equally durable either:
//! the embedded engine's WAL is files in its own directory, a `SyncWal` put acknowledged
//! once handed to the OS; a region server's WAL is on the shared store, one object per
//! group commit, stored durably (the object and its folder fsynced), so the cluster's write
//! figures include an object creation and fsyncs that the embedded engine's do not.
//!
//! The defaults (`DEFAULT_RECORDS`, `DEFAULT_OPERATIONS`, `DEFAULT_THREADS`) are sized for a
//! run of one to two minutes on a 2-core machine, the cluster's writes (about a thousand
//! puts a second there) taking most of it.
//!
//! Output: the settings, a progress line per phase, a table of every setup's throughput and
//! latency percentiles, then `RESULT cluster/<phase>_<n>server basalt_cluster=<ops/s>
//! embedded=<ops/s> ratio=<cluster/embedded> unit=ops/s` and, per latency percentile,
//! `RESULT cluster/<phase>_<n>server_<p50|p99> basalt_cluster=<µs> embedded=<µs>
//! ratio=<cluster/embedded> unit=us better=lower`.
//!
//! Invariants: everything started is stopped before the suite returns, on failure too
//! (servers stopped, engines closed, etcd killed by its guard, directories deleted); a
//! setup's figures are printed only if its every phase checked out (the ycsb driver fails
//! the run on a missing or incomplete row).

use crate::ycsb::{self, report, Measured, Settings};
use crate::BenchResult;
use basalt_cluster::regionserver::{self, RegionServerConfig, RunningServer};
use basalt_cluster::{EtcdConfig, EtcdCoordination, LocalEtcd, RetryPolicy};
use std::time::{Duration, Instant};

/// Default `--records`.
pub const DEFAULT_RECORDS: u64 = 20_000;
/// Default `--operations` (per workload).
pub const DEFAULT_OPERATIONS: u64 = 50_000;
/// Default `--threads`.
pub const DEFAULT_THREADS: usize = 8;
/// The workloads run after the load.
pub const WORKLOADS: [&str; 2] = ["a", "c"];
/// The cluster sizes measured, in region servers.
const SERVER_COUNTS: [usize; 2] = [1, 3];
/// The cluster sizes to measure: [`SERVER_COUNTS`], or the comma-separated list in
/// `BASALT_BENCH_SERVERS` (to profile one size alone).
fn server_counts() -> BenchResult<Vec<usize>> {
    match std::env::var("BASALT_BENCH_SERVERS") {
        Err(_) => Ok(SERVER_COUNTS.to_vec()),
        Ok(list) => list
            .split(',')
            .map(|n| match n.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("BASALT_BENCH_SERVERS: {n:?} is not a server count").into()),
            })
            .collect(),
    }
}

/// The region servers' lease time to live.
const LEASE_TTL: Duration = Duration::from_secs(3);
/// How long a cluster may take until a server serves.
const SERVE_TIMEOUT: Duration = Duration::from_secs(60);

/// What one setup measured: its name in the table, its server count (0: embedded) and
/// its phases in run order.
struct Setup {
    label: String,
    servers: usize,
    phases: Vec<Measured>,
}

/// Runs the suite: the embedded baseline, then each cluster, then the table and the
/// `RESULT` lines.
pub fn run(s: &Settings) -> BenchResult<()> {
    if s.records < 2 || s.threads == 0 {
        return Err("cluster: --records must be at least 2 and --threads at least 1".into());
    }
    print_settings(s);
    std::fs::create_dir_all(&s.core.dir)?;
    let mut setups = vec![Setup {
        label: "embedded".into(),
        servers: 0,
        phases: ycsb::basalt::run_as("embedded", s)?,
    }];
    let etcd = LocalEtcd::start()?;
    println!("etcd: {} (pid {})", etcd.endpoint(), etcd.pid());
    for (i, &n) in server_counts()?.iter().enumerate() {
        let label = format!("{n}server");
        let phases = run_cluster(
            &etcd,
            &format!("/bench-{}-{i}", std::process::id()),
            n,
            &label,
            s,
        )?;
        setups.push(Setup {
            label,
            servers: n,
            phases,
        });
    }
    drop(etcd);
    println!();
    print(&setups);
    Ok(())
}

/// Runs the load and the workloads through a cluster of `servers` region servers on
/// `etcd` (keys under `prefix`), on a runtime of its own; stops the servers however it
/// ends.
fn run_cluster(
    etcd: &LocalEtcd,
    prefix: &str,
    servers: usize,
    label: &str,
    s: &Settings,
) -> BenchResult<Vec<Measured>> {
    let root = ycsb::temp_dir(s, &format!("cluster-{label}"))?;
    let etcd_config = EtcdConfig::new([etcd.endpoint()]).prefix(prefix.to_string());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut running: Vec<(String, RunningServer)> = Vec::with_capacity(servers);
    let out = measure_cluster(&rt, &mut running, &etcd_config, &root, servers, label, s);
    rt.block_on(stop_all(label, running, &etcd_config));
    drop(rt);
    out
}

/// Stops every server, whether the phases succeeded or not (each closes its engine,
/// flushing it): the ones etcd does not list as live first, then the live ones. A server whose stop reports an error is stopped all the same (its task ended);
/// the error is printed as a warning, as it says nothing of the figures.
async fn stop_all(label: &str, running: Vec<(String, RunningServer)>, etcd: &EtcdConfig) {
    let serving: Vec<String> = match EtcdCoordination::connect(etcd.clone()).await {
        Ok(coord) => coord
            .live_servers()
            .await
            .map(|live| live.into_iter().map(|s| s.process).collect())
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let (serving, standby): (Vec<_>, Vec<_>) = running
        .into_iter()
        .partition(|(name, _)| serving.contains(name));
    for (name, server) in standby.into_iter().chain(serving) {
        if let Err(e) = server.stop().await {
            println!("{label}: warning: region server {name} stopped with an error: {e}");
            eprintln!("{label}: warning: region server {name} stopped with an error: {e}");
        }
    }
}

/// Starts `servers` region servers on `rt` (into `running`, for the caller to stop), waits
/// until one serves, connects, creates the table and runs the phases through the client.
fn measure_cluster(
    rt: &tokio::runtime::Runtime,
    running: &mut Vec<(String, RunningServer)>,
    etcd_config: &EtcdConfig,
    root: &tempfile::TempDir,
    servers: usize,
    label: &str,
    s: &Settings,
) -> BenchResult<Vec<Measured>> {
    let store = root.path().join("store");
    std::fs::create_dir_all(&store)?;
    let started = Instant::now();
    for i in 0..servers {
        let name = format!("rs-{i}");
        let data = root.path().join(&name);
        std::fs::create_dir_all(&data)?;
        let mut config = RegionServerConfig::new(etcd_config.clone(), &store, data, name.clone());
        config.lease_ttl = LEASE_TTL;
        let cache = s.core.cache_bytes;
        let server = rt.block_on(regionserver::start_with(config, move |c| {
            c.block_cache_size(cache)
        }))?;
        running.push((name, server));
    }
    let serving = rt.block_on(wait_for_servers(etcd_config, servers))?;
    println!(
        "{label}: {servers} region server(s) started; serving after {:.0} ms: {}",
        started.elapsed().as_secs_f64() * 1000.0,
        serving.join(", ")
    );
    let conn = rt.block_on(basalt_cluster::connect_with(
        etcd_config.clone(),
        RetryPolicy::default(),
    ))?;
    let table = rt.block_on(ycsb::basalt::create_table(&conn, &s.core))?;
    let spread = rt.block_on(wait_spread(etcd_config, servers))?;
    println!("{label}: regions per server once balanced: {spread}");
    let phases = ycsb::run_phases(label, s, |phase| {
        let before = wal_counts(running);
        let out = rt.block_on(ycsb::basalt::drive(table.clone(), phase));
        let after = wal_counts(running);
        let syncs: Vec<String> = before
            .iter()
            .zip(&after)
            .map(|((name, s0, b0), (_, s1, b1))| {
                format!("{name} {} syncs {} KiB", s1 - s0, (b1 - b0) >> 10)
            })
            .collect();
        println!(
            "{label}: WAL per server in this phase: {}",
            syncs.join(", ")
        );
        out
    });
    rt.block_on(conn.close())?;
    phases
}

/// Each server's WAL syncs and bytes so far (its engine's counters): how many group
/// commits the phase's writes took on each.
fn wal_counts(running: &[(String, RunningServer)]) -> Vec<(String, u64, u64)> {
    running
        .iter()
        .map(|(name, server)| {
            let stats = server
                .lives()
                .current()
                .map(|life| life.engine().stats())
                .unwrap_or_default();
            (name.clone(), stats.wal_syncs, stats.wal_bytes)
        })
        .collect()
}

/// Waits until the table's regions are served as evenly as they can be over `servers`
/// servers (the master's balancer spreads a new table); returns the regions per server.
async fn wait_spread(etcd: &EtcdConfig, servers: usize) -> BenchResult<String> {
    let admin = basalt_cluster::ClusterAdmin::connect(etcd.clone()).await?;
    let deadline = Instant::now() + SERVE_TIMEOUT;
    loop {
        admin.wait_settled(SERVE_TIMEOUT).await?;
        let mut per_server = std::collections::BTreeMap::<String, usize>::new();
        let regions = admin.regions(None).await?;
        for r in &regions {
            *per_server
                .entry(r.serving.clone().unwrap_or_default())
                .or_default() += 1;
        }
        let (min, max) = (per_server.values().min(), per_server.values().max());
        let even = max.zip(min).is_some_and(|(max, min)| max - min <= 1);
        if even && per_server.len() == servers.min(regions.len()) {
            let shown: Vec<String> = per_server.iter().map(|(p, n)| format!("{p} {n}")).collect();
            return Ok(shown.join(", "));
        }
        if Instant::now() > deadline {
            return Err(format!("the regions did not spread within {SERVE_TIMEOUT:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `servers` region servers of the cluster at `etcd` are registered (they
/// serve); returns their process names.
async fn wait_for_servers(etcd: &EtcdConfig, servers: usize) -> BenchResult<Vec<String>> {
    let coord = EtcdCoordination::connect(etcd.clone()).await?;
    let deadline = Instant::now() + SERVE_TIMEOUT;
    loop {
        let live = coord.live_servers().await?;
        if live.len() >= servers {
            return Ok(live.into_iter().map(|s| s.process).collect());
        }
        if Instant::now() > deadline {
            return Err(format!("no region server served within {SERVE_TIMEOUT:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Prints what the run does.
fn print_settings(s: &Settings) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("== suite cluster: settings ==");
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; use --release for meaningful figures");
    }
    println!(
        "records    : {} records x 10 fields x 100 B, loaded by the clients (the ycsb \
         suite's load)",
        s.records
    );
    println!(
        "workloads  : {} operations each of A (read/update 0.5/0.5) and C (read 1.0), \
         scrambled Zipfian, as the ycsb suite runs them",
        s.operations
    );
    println!(
        "clients    : {} tokio tasks on a {cores}-worker runtime (one runtime per setup; in a \
         cluster the region servers run on it too)",
        s.threads
    );
    println!(
        "setups     : embedded (Connection::open: the ycsb suite's Basalt run); then a \
         cluster of {} region servers: one local etcd, servers in this process on a shared \
         store directory (lease {} s), a remote client through etcd and gRPC on loopback; \
         the table's regions spread over the servers by the master's balancer before the load",
        SERVER_COUNTS
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" and of "),
        LEASE_TTL.as_secs()
    );
    println!(
        "table      : `usertable`, family `f`, {} regions pre-split, Put/Get with \
         Durability::SyncWal; BLOCKSIZE {} KiB, COMPRESSION {:?}, COMPRESSION_COMPACT {:?}; \
         block_cache_size {} MiB on every engine",
        s.core.regions,
        s.core.block_size / 1024,
        s.core.compression,
        s.core.compaction_compression,
        s.core.cache_bytes >> 20
    );
    println!(
        "machine    : {cores} cores, shared by the client, the servers and etcd: the cluster \
         figures are the RPC path's cost on the same hardware, not a cluster's capacity"
    );
    println!(
        "dirs       : each setup in its own temp dir under {}, deleted after",
        s.core.dir.display()
    );
    println!();
}

/// The phase `phase` of `setup`, if it ran.
fn phase<'a>(setup: &'a Setup, phase: &str) -> Option<&'a Measured> {
    setup.phases.iter().find(|m| m.phase == phase)
}

/// Prints the table and the `RESULT` lines.
fn print(setups: &[Setup]) {
    println!(
        "{:<6} {:<9} {:>10} {:>9} {:>12} {:>10} {:>10} {:>10}",
        "phase", "setup", "ops", "secs", "ops/s", "p50 µs", "p99 µs", "p99.9 µs"
    );
    let phases = std::iter::once("load").chain(WORKLOADS);
    for name in phases.clone() {
        for setup in setups {
            if let Some(m) = phase(setup, name) {
                println!(
                    "{:<6} {:<9} {:>10} {:>9.3} {:>12.0} {:>10.1} {:>10.1} {:>10.1}",
                    name,
                    setup.label,
                    m.ops,
                    m.elapsed.as_secs_f64(),
                    m.ops_per_sec(),
                    m.latency_us(0.5),
                    m.latency_us(0.99),
                    m.latency_us(0.999),
                );
            }
        }
    }
    println!();
    let Some(embedded) = setups.iter().find(|s| s.servers == 0) else {
        return;
    };
    for setup in setups.iter().filter(|s| s.servers > 0) {
        for name in phases.clone() {
            let (Some(c), Some(e)) = (phase(setup, name), phase(embedded, name)) else {
                continue;
            };
            let fig = format!("cluster/{name}_{}server", setup.servers);
            let (c_ops, e_ops) = (c.ops_per_sec(), e.ops_per_sec());
            println!(
                "RESULT {fig} basalt_cluster={c_ops:.0} embedded={e_ops:.0} ratio={:.3} \
                 unit=ops/s",
                c_ops / e_ops
            );
            for (q, tag) in [(0.5, "p50"), (0.99, "p99")] {
                let (c_us, e_us) = (c.latency_us(q), e.latency_us(q));
                println!(
                    "RESULT {fig}_{tag} basalt_cluster={c_us:.1} embedded={e_us:.1} \
                     ratio={:.3} unit=us better=lower",
                    c_us / e_us
                );
            }
        }
    }
    // The operation mixes, to show both setups ran the same streams.
    for setup in setups {
        for m in &setup.phases {
            println!("mix {:<9} {:<4} {}", setup.label, m.phase, report::mix(m));
        }
    }
}
