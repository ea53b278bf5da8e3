//! kill -9 during plugin uploads, swaps and deletes: after any kill the catalog opens, the
//! table has exactly one version attached (the old or the new one of a swap the kill
//! interrupted, never neither, never both), every plugin whose upload was acknowledged is
//! listed and loads, and no upload the kill interrupted leaves an object behind.
//!
//! As `tests/crash.rs` does: the test re-executes its own binary as a child
//! (`BASALT_PLUGIN_CRASH_CHILD=<dir>`), which uploads new versions and swaps the table to
//! each, deleting the one it swapped away from now and then, printing `BEGIN <op> <id>`
//! before and `ACK <op> <id>` after each; the parent kills it with SIGKILL after a random
//! delay and checks the directory against those lines.

mod common;

use basalt::client::{Get, Put};
use basalt::{
    plugin_coprocessor_name, plugin_id_of, ColumnFamilyDescriptor, CoprocessorDescriptor,
    TableDescriptor, TableName,
};
use basalt_plugins::PluginLimits;
use common::{open, Observer};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "BASALT_PLUGIN_CRASH_CHILD";
const CYCLES: u64 = 12;

/// A distinct version of the keep-all observer: `n` in a data segment changes its hash.
fn version(n: u64) -> Vec<u8> {
    let mut o = Observer::keep_all();
    o.extra = format!(r#"(data (i32.const 700) "version {n}")"#);
    o.component()
}

/// The plugin `t` has attached.
async fn attached(conn: &basalt::Connection) -> Vec<String> {
    let d = conn.admin().describe_table("t").await.unwrap();
    d.coprocessors
        .iter()
        .filter_map(|c| plugin_id_of(&c.name).map(str::to_string))
        .collect()
}

/// The child: uploads, swaps and deletes until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_admin() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let run: u64 = std::env::var("BASALT_PLUGIN_CRASH_RUN")
        .unwrap()
        .parse()
        .unwrap();
    let (conn, _registry) = open(Path::new(&dir), PluginLimits::default()).await;
    let admin = conn.admin();
    let mut out = std::io::stdout();
    let mut say = |line: String| {
        writeln!(out, "{line}").unwrap();
        out.flush().unwrap();
    };
    for k in 0.. {
        let bytes = version(run * 10_000 + k);
        let id = basalt::plugin_id(&bytes);
        say(format!("BEGIN upload {id}"));
        admin.upload_plugin(bytes).await.unwrap();
        say(format!("ACK upload {id}"));
        let cur = attached(&conn).await.remove(0);
        say(format!("BEGIN swap {id}"));
        admin
            .swap_coprocessor(
                "t",
                &plugin_coprocessor_name(&cur),
                CoprocessorDescriptor::new(plugin_coprocessor_name(&id)),
            )
            .await
            .unwrap();
        say(format!("ACK swap {id}"));
        conn.table("t")
            .unwrap()
            .put(Put::new(format!("r{run}-{k}")).add_column("f", "q", "v"))
            .await
            .unwrap();
        if k % 3 == 1 {
            say(format!("BEGIN delete {cur}"));
            admin.delete_plugin(&cur).await.unwrap();
            say(format!("ACK delete {cur}"));
        }
    }
}

fn plugin_objects(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("plugins")).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".wasm"))
            .count()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_upload_attach_and_swap_leaves_one_version_attached() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().to_path_buf();
    {
        let (conn, _r) = open(&path, PluginLimits::default()).await;
        let first = conn.admin().upload_plugin(version(0)).await.unwrap().id;
        let d = TableDescriptor::new(TableName::parse("t").unwrap())
            .family(ColumnFamilyDescriptor::new("f"))
            .coprocessor(CoprocessorDescriptor::new(plugin_coprocessor_name(&first)));
        conn.admin().create_table(d).await.unwrap();
        conn.close().await.unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let mut acked_uploads: BTreeSet<String> = BTreeSet::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut swaps_seen = 0;
    for run in 1..=CYCLES {
        let mut child = Command::new(&exe)
            .args(["--exact", "child_admin", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .env("BASALT_PLUGIN_CRASH_RUN", run.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(150 + seed % 600));
        child.kill().unwrap();
        child.wait().unwrap();
        let lines = reader.join().unwrap();

        // What the lines say: acknowledged uploads, the last acknowledged swap target and a
        // swap begun but not acknowledged, deletes begun.
        let mut last_swap: Option<String> = None;
        let mut open_swap: Option<String> = None;
        let mut deleting: BTreeSet<String> = BTreeSet::new();
        for l in &lines {
            let parts: Vec<&str> = l.split(' ').collect();
            match parts.as_slice() {
                ["ACK", "upload", id] => {
                    acked_uploads.insert(id.to_string());
                }
                ["BEGIN", "swap", id] => open_swap = Some(id.to_string()),
                ["ACK", "swap", id] => {
                    last_swap = Some(id.to_string());
                    open_swap = None;
                    swaps_seen += 1;
                }
                ["BEGIN", "delete", id] => {
                    deleting.insert(id.to_string());
                }
                _ => {}
            }
        }
        println!(
            "run {run}: {} lines, last swap {last_swap:?}, open swap {open_swap:?}",
            lines.len()
        );
        let (conn, _r) = open(&path, PluginLimits::default()).await;
        let now = attached(&conn).await;
        assert_eq!(now.len(), 1, "run {run}: attached {now:?}");
        let now = &now[0];
        if let Some(last) = &last_swap {
            assert!(
                now == last || Some(now) == open_swap.as_ref(),
                "run {run}: attached {now}, last acknowledged swap {last}, begun {open_swap:?}"
            );
        }
        // Every acknowledged upload is listed, unless a delete of it began.
        let listed: BTreeSet<String> = conn
            .admin()
            .list_plugins()
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.id)
            .collect();
        for id in acked_uploads.difference(&deleting) {
            assert!(
                listed.contains(id),
                "run {run}: acknowledged upload {id} lost"
            );
        }
        acked_uploads.retain(|id| listed.contains(id));
        assert!(
            listed.contains(now),
            "run {run}: the attached plugin is not listed"
        );
        // Opened: every listed plugin has its object and nothing else is left.
        assert_eq!(plugin_objects(&path), listed.len(), "run {run}");
        // The attached version loads and serves.
        let t = conn.table("t").unwrap();
        t.put(Put::new(format!("check{run}")).add_column("f", "q", "v"))
            .await
            .unwrap();
        assert!(t.exists(Get::new(format!("check{run}"))).await.unwrap());
        conn.close().await.unwrap();
    }
    assert!(swaps_seen > 0, "no swap was acknowledged in {CYCLES} runs");
}
