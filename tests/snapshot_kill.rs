//! Table snapshots under real kills (issue 46): a `SIGKILL` in the middle of a snapshot, a
//! clone, a restore, a snapshot delete (the pass that frees the files no table and no other
//! snapshot lists) or a drop of a clone leaves a directory that opens with every region
//! online, no file a table or a snapshot lists missing, every acknowledged snapshot and
//! clone present and no half snapshot listed.
//!
//! As `tests/crash.rs` does: the test re-executes its own binary as a child
//! (`BASALT_SNAPSHOT_KILL_CHILD=<dir>`). Two writer tasks put new rows to table `t` (a small
//! flush size, so files come and go) and print `PUT <row> <epoch>` for each acknowledged put;
//! an admin loop snapshots `t`, clones a snapshot, restores `t` from one (disable, restore,
//! enable), deletes a snapshot, drops a clone, flushes and compacts `t`, printing
//! `BEGIN <op> ...` before and `ACK <op> ...` after each. The parent kills the child after a
//! random delay, opens the directory and checks it against those lines:
//! * every snapshot acknowledged, or listed at an earlier check, whose delete did not begin
//!   is listed; every clone acknowledged or seen, whose drop did not begin, exists;
//! * every snapshot listed is whole: cloned, the clone's files are all present and sound
//!   (`Admin::check_table`), it scans, holds every row acknowledged before the snapshot began
//!   and equals each clone made from it;
//! * every table scans, its files present and sound; `t` holds every acknowledged row a
//!   restore could not have rolled back (a put counts only if it began after the last
//!   restore finished: the admin loop bumps an epoch around each restore);
//! * closed, the offline check (`basalt::repair::check_dir`) finds the catalog, every store
//!   file and the WAL sound.
//!
//! Knobs: `BASALT_SNAPSHOT_KILL_CYCLES` (default 30) and `BASALT_SNAPSHOT_KILL_SEED`
//! (default: random, printed so a failure can be replayed).
#![cfg(unix)]

use basalt::client::Put;
use basalt::repair::check_dir;
use basalt::{Config, Connection, PreSplit};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/table_rows.rs"]
mod table_rows;
use table_rows::{put_rows, rows, table, Rows};

const CHILD_ENV: &str = "BASALT_SNAPSHOT_KILL_CHILD";
const RUN_ENV: &str = "BASALT_SNAPSHOT_KILL_RUN";
const SEED_ENV: &str = "BASALT_SNAPSHOT_KILL_SEED";
const CYCLES_ENV: &str = "BASALT_SNAPSHOT_KILL_CYCLES";
const WRITERS: u64 = 2;
const SIGKILL: i32 = 9;

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// The tables other than `t`: the clones.
async fn clones(conn: &Connection) -> Vec<String> {
    let tables = conn.admin().list_tables().await.unwrap();
    let names = tables.into_iter().map(|d| d.name.qualifier().to_string());
    names.filter(|n| n != "t").collect()
}

async fn snapshots(conn: &Connection) -> Vec<String> {
    let listed = conn.admin().list_snapshots().await.unwrap();
    listed.into_iter().map(|s| s.name).collect()
}

/// The child: writes and runs snapshot operations until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_snapshot_ops() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let (run, seed) = (env_u64(RUN_ENV).unwrap(), env_u64(SEED_ENV).unwrap());
    let conn = Connection::open(Path::new(&dir)).await.unwrap();
    let admin = conn.admin();
    // A kill between the disable and the enable of a restore or a drop.
    for name in std::iter::once("t".to_string()).chain(clones(&conn).await) {
        if !admin.is_table_enabled(name.as_str()).await.unwrap() {
            admin.enable_table(name.as_str()).await.unwrap();
        }
    }
    say("READY".into());
    // Odd while a restore runs: a put read an even epoch `e` began after every restore
    // that bumped it to `e - 1` had finished.
    let epoch = Arc::new(AtomicU64::new(0));
    for w in 0..WRITERS {
        let (t, epoch) = (conn.table("t").unwrap(), epoch.clone());
        tokio::spawn(async move {
            for k in 0.. {
                let e = epoch.load(Ordering::SeqCst);
                let row = format!("w{w}-{run:03}-{k:06}");
                let put = Put::new(row.clone()).add_column("f", "q", row.clone());
                match t.put(put).await {
                    Ok(()) => say(format!("PUT {row} {e}")),
                    // Disabled for a restore: not acknowledged.
                    Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
                }
                // Bounded data: the admin loop's operations are what is tested.
                if k % 16 == 15 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
    }
    let mut rng = StdRng::seed_from_u64(seed ^ run.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for n in 0.. {
        let snaps = snapshots(&conn).await;
        let cloned = clones(&conn).await;
        let op = match (snaps.len(), cloned.len()) {
            (0, _) => 0,
            (7.., _) => 7,
            (_, 5..) => 9,
            _ => rng.random_range(0..12),
        };
        let any_snap = match snaps.is_empty() {
            true => String::new(),
            false => snaps[rng.random_range(0..snaps.len())].clone(),
        };
        match op {
            0..=2 => {
                let s = format!("s{run}_{n}");
                say(format!("BEGIN snapshot {s}"));
                admin.snapshot(&s, "t").await.unwrap();
                say(format!("ACK snapshot {s}"));
            }
            3 | 4 => {
                let c = format!("c{run}_{n}");
                say(format!("BEGIN clone {any_snap} {c}"));
                admin.clone_snapshot(&any_snap, c.as_str()).await.unwrap();
                say(format!("ACK clone {any_snap} {c}"));
            }
            5 | 6 => {
                let e = epoch.fetch_add(1, Ordering::SeqCst) + 1;
                say(format!("BEGIN restore {any_snap} {e}"));
                admin.disable_table("t").await.unwrap();
                let failsafe = admin.restore_snapshot(&any_snap).await.unwrap();
                admin.enable_table("t").await.unwrap();
                epoch.fetch_add(1, Ordering::SeqCst);
                let failsafe = failsafe.unwrap_or_else(|| "-".into());
                say(format!("ACK restore {any_snap} {failsafe}"));
            }
            7 | 8 => {
                say(format!("BEGIN delete {any_snap}"));
                admin.delete_snapshot(&any_snap).await.unwrap();
                say(format!("ACK delete {any_snap}"));
            }
            9 if !cloned.is_empty() => {
                let c = &cloned[rng.random_range(0..cloned.len())];
                say(format!("BEGIN drop {c}"));
                admin.disable_table(c.as_str()).await.unwrap();
                admin.delete_table(c.as_str()).await.unwrap();
                say(format!("ACK drop {c}"));
            }
            10 => admin.flush("t").await.unwrap(),
            _ => admin.major_compact("t").await.unwrap(),
        }
    }
}

/// Runs one child, kills it after `delay_ms` past its `READY`; its complete lines.
fn run_child(dir: &Path, run: u64, seed: u64, delay_ms: u64) -> Vec<String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_snapshot_ops",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .env(RUN_ENV, run.to_string())
        .env(SEED_ENV, seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        // A line cut by the kill has no newline: `lines` would yield it, so read by hand.
        let mut r = BufReader::new(stdout);
        let mut buf = Vec::new();
        while matches!(r.read_until(b'\n', &mut buf), Ok(n) if n > 0 && buf.ends_with(b"\n")) {
            let _ = tx.send(String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned());
            buf.clear();
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        // libtest prints `test child_snapshot_ops ... ` without a newline first.
        let ready = line.ends_with("READY");
        lines.push(line);
        if ready {
            std::thread::sleep(Duration::from_millis(delay_ms));
            break;
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    let stderr = err_reader.join().unwrap();
    assert_eq!(
        status.signal(),
        Some(SIGKILL),
        "run {run}: the child died before our SIGKILL ({status}); its stderr:\n{stderr}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("READY")),
        "run {run}: {stderr}"
    );
    lines
}

/// What the parent knows, carried from cycle to cycle.
#[derive(Default)]
struct Model {
    /// Snapshots that must be listed.
    snaps: BTreeSet<String>,
    /// Clones that must exist.
    tables: BTreeSet<String>,
    /// The snapshot each clone begun was made from.
    clones: BTreeMap<String, String>,
    /// Rows `t` must hold.
    present: BTreeSet<String>,
    /// Rows each snapshot must hold (acknowledged before it began).
    snap_rows: BTreeMap<String, BTreeSet<String>>,
    /// Operations acknowledged, and cut by a kill, by kind.
    acked: BTreeMap<String, u64>,
    cut: BTreeMap<String, u64>,
}

impl Model {
    fn apply(&mut self, lines: &[String]) {
        let mut restore_epoch: Option<u64> = None;
        let mut failsafe_rows = BTreeSet::new();
        let mut open: Option<String> = None;
        for l in lines {
            let p: Vec<&str> = l.split(' ').collect();
            match p.as_slice() {
                ["PUT", row, e] => {
                    let e: u64 = e.parse().unwrap();
                    if restore_epoch.is_none_or(|r| e > r) {
                        self.present.insert(row.to_string());
                    }
                }
                ["BEGIN", op, rest @ ..] => {
                    open = Some(op.to_string());
                    match (*op, rest) {
                        ("snapshot", [s]) => {
                            self.snap_rows.insert(s.to_string(), self.present.clone());
                        }
                        ("clone", [s, c]) => {
                            self.clones.insert(c.to_string(), s.to_string());
                        }
                        ("restore", [s, e]) => {
                            // Rolled back to `s` or not yet: what both hold.
                            restore_epoch = Some(e.parse().unwrap());
                            let to = self.snap_rows.get(*s).cloned().unwrap_or_default();
                            failsafe_rows = std::mem::replace(&mut self.present, to);
                            self.present.retain(|r| failsafe_rows.contains(r));
                        }
                        ("delete", [s]) => {
                            self.snaps.remove(*s);
                        }
                        ("drop", [c]) => {
                            self.tables.remove(*c);
                        }
                        _ => panic!("unknown line {l}"),
                    }
                }
                ["ACK", op, rest @ ..] => {
                    open = None;
                    *self.acked.entry(op.to_string()).or_default() += 1;
                    match (*op, rest) {
                        ("snapshot", [s]) => {
                            self.snaps.insert(s.to_string());
                        }
                        ("clone", [_, c]) => {
                            self.tables.insert(c.to_string());
                        }
                        ("restore", [s, failsafe]) => {
                            let to = self.snap_rows.get(*s).cloned().unwrap_or_default();
                            self.present.extend(to);
                            if *failsafe != "-" {
                                self.snaps.insert(failsafe.to_string());
                                let rows = std::mem::take(&mut failsafe_rows);
                                self.snap_rows.insert(failsafe.to_string(), rows);
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if let Some(op) = open {
            *self.cut.entry(op).or_default() += 1;
        }
    }
}

/// Checks a table: its files present and sound, every row's value its key (or a seed row's).
async fn check_table(conn: &Connection, name: &str, ctx: &str) -> Rows {
    let report = conn.admin().check_table(name).await.unwrap();
    assert!(report.is_healthy(), "{ctx}: table {name}: {report}");
    let got = rows(conn, name).await;
    for (row, value) in &got {
        assert!(
            value == row || value == "seed",
            "{ctx}: {name}: {row} = {value}"
        );
    }
    got
}

fn must_hold(got: &Rows, want: Option<&BTreeSet<String>>, ctx: &str) {
    let lost: Vec<&String> = want
        .into_iter()
        .flatten()
        .filter(|r| !got.contains_key(*r))
        .collect();
    assert!(
        lost.is_empty(),
        "{ctx}: lost {} rows, first {:?}",
        lost.len(),
        lost.first()
    );
}

async fn check(dir: &Path, m: &mut Model, cycle: u64) {
    let ctx = format!("cycle {cycle}");
    let conn = Connection::open(dir)
        .await
        .unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
    let admin = conn.admin();
    assert!(admin.offline_regions().await.unwrap().is_empty(), "{ctx}");
    let listed = snapshots(&conn).await;
    let missing: Vec<_> = m.snaps.iter().filter(|s| !listed.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "{ctx}: snapshots lost: {missing:?}, listed {listed:?}"
    );
    let tables = clones(&conn).await;
    let gone: Vec<_> = m.tables.iter().filter(|c| !tables.contains(c)).collect();
    assert!(
        gone.is_empty(),
        "{ctx}: clones lost: {gone:?}, listed {tables:?}"
    );
    let mut clone_rows = BTreeMap::new();
    for name in std::iter::once("t".to_string()).chain(tables.iter().cloned()) {
        if !admin.is_table_enabled(name.as_str()).await.unwrap() {
            admin.enable_table(name.as_str()).await.unwrap();
        }
        let got = check_table(&conn, &name, &ctx).await;
        if name == "t" {
            must_hold(&got, Some(&m.present), &format!("{ctx}: t"));
        } else {
            clone_rows.insert(name, got);
        }
    }
    // Every snapshot listed is whole: its clone reads every file it lists.
    for (i, s) in listed.iter().enumerate() {
        let d = admin.describe_snapshot(s).await.unwrap();
        assert_eq!(d.tables, vec!["default:t".to_string()], "{ctx}: {s}");
        let v = format!("v{cycle}_{i}");
        admin.clone_snapshot(s, v.as_str()).await.unwrap();
        assert!(
            admin.offline_regions().await.unwrap().is_empty(),
            "{ctx}: {s}"
        );
        let sctx = format!("{ctx}: snapshot {s}");
        let got = check_table(&conn, &v, &sctx).await;
        must_hold(&got, m.snap_rows.get(s), &sctx);
        for (c, rows) in &clone_rows {
            if m.clones.get(c) == Some(s) {
                assert!(*rows == got, "{sctx}: its clone {c} differs");
            }
        }
        admin.disable_table(v.as_str()).await.unwrap();
        admin.delete_table(v.as_str()).await.unwrap();
    }
    // What is there now stays (unless a later child deletes it).
    m.snaps = listed.into_iter().collect();
    m.snap_rows.retain(|s, _| m.snaps.contains(s));
    m.clones.retain(|c, _| tables.contains(c));
    m.tables = tables.into_iter().collect();
    conn.close().await.unwrap();
    let offline = check_dir(&Config::new(dir)).unwrap();
    assert!(offline.is_healthy(), "{ctx}: the offline check:\n{offline}");
}

#[test]
fn kill_9_during_snapshot_clone_restore_and_delete_leaves_whole_snapshots() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let cycles = env_u64(CYCLES_ENV).unwrap_or(30);
    let seed = env_u64(SEED_ENV).unwrap_or_else(|| rand::rng().random());
    println!("snapshot kill test: {cycles} cycles, {SEED_ENV}={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut m = Model::default();
    rt.block_on(async {
        let conn = Connection::open(dir).await.unwrap();
        let t = table("t").memstore_flush_size(16 << 10);
        let split = PreSplit::Keys(vec![b"w1".to_vec()]);
        conn.admin()
            .create_table_with_splits(t, split)
            .await
            .unwrap();
        put_rows(&conn, "t", 0..50, "seed").await;
        conn.close().await.unwrap();
    });
    m.present = (0..50).map(|i| format!("r{i:04}")).collect();
    let started = Instant::now();
    for cycle in 0..cycles {
        let t0 = Instant::now();
        let lines = run_child(dir, cycle, seed, rng.random_range(50..600));
        m.apply(&lines);
        rt.block_on(check(dir, &mut m, cycle));
        println!(
            "cycle {cycle}: {} lines, {} snapshots, {} clones, {} rows held, {:?}",
            lines.len(),
            m.snaps.len(),
            m.tables.len(),
            m.present.len(),
            t0.elapsed()
        );
    }
    println!(
        "snapshot kill test: acknowledged {:?}, cut by the kill {:?}, {:?}",
        m.acked,
        m.cut,
        started.elapsed()
    );
    assert!(!m.cut.is_empty(), "no kill landed inside an operation");
    for op in ["snapshot", "clone", "restore", "delete", "drop"] {
        assert!(
            m.acked.contains_key(op),
            "no {op} acknowledged: {:?}",
            m.acked
        );
    }
}
