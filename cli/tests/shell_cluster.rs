//! `basalt shell --etcd`: the HBase shell against a cluster of real processes (a local
//! etcd and two `basalt regionserver` processes on one shared store, `common::cluster`).
//!
//! - Every transcript of `tests/transcripts/` but the snapshots' runs against a fresh
//!   cluster through `basalt_cli::run_script` on `DataDir::connect`, and must print what
//!   it prints on a data directory (the `.out` files), once the lines that name the
//!   backend and the coprocessor counters only an embedded engine has are normalised (and
//!   those are checked to say what they should).
//! - Snapshots over a cluster: taken, listed, described, cloned (an indexed table's with
//!   its index tables), restored and deleted, printing what a data directory prints.
//! - The binary: `basalt shell --etcd URLS --prefix P` reads a script from standard input
//!   or from a file (create, put, get, scan, count, a counter, an index built and queried,
//!   aggregations); `call_endpoint` is refused on a cluster; DIR with `--etcd` and an
//!   unreachable etcd are errors.

use crate::common::cluster::{basalt, Cluster};
use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

/// The output less `Took` lines, hook latencies and snapshot times (as `transcripts.rs`).
fn strip_took(text: &str) -> String {
    let latency = regex::Regex::new(r" +\d+\.\dus\b").unwrap();
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC").unwrap();
    text.lines()
        .filter(|l| !l.starts_with("Took "))
        .map(|l| {
            let l = latency.replace_all(l, " N.Nus");
            format!("{}\n", time.replace_all(&l, "YYYY-MM-DD HH:MM:SS UTC"))
        })
        .collect()
}

/// A cluster's coprocessor rows (`REMOTE`, no counters) and an engine's (`LOADED` with its
/// counters) as one line, so both outputs compare.
fn coprocessor_rows(text: &str) -> String {
    let embedded =
        regex::Regex::new(r"(?m)^(\$\d+ +\S+ +\d+)  LOADED +\d+ +\d+ +\d+ +\d+ +(?:N\.Nus|-)  ")
            .unwrap();
    let cluster = regex::Regex::new(r"(?m)^(\$\d+ +\S+ +\d+)  REMOTE +- +- +- +- +-  ").unwrap();
    let text = embedded.replace_all(text, "$1  (state and counters)  ");
    cluster
        .replace_all(&text, "$1  (state and counters)  ")
        .into_owned()
}

const REMOTE_NOTE: &str =
    "Calls, errors and latency are counted by each region server: not available over a cluster\n";

/// A cluster's output with what only a cluster prints (the lines that name the backend,
/// the cluster's lines of `status`, its commands in `help`, `list_regions`' server
/// column) as an engine's, each checked first.
fn as_if_embedded(got: &str, prefix: &str) -> String {
    let at = regex::Regex::new(&format!(
        r"a cluster at etcd http://127\.0\.0\.1:\d+ \(prefix {}\)",
        regex::escape(prefix)
    ))
    .unwrap();
    let status = regex::Regex::new(
        r"(?m)^master rs-\d, balancer on, \d+ regions in transition, \d+ moves pending\n(\d+) live servers\n((?:    rs-\d 127\.0\.0\.1:\d+: \d+ assigned, \d+ serving\n)*)",
    )
    .unwrap();
    let mut lines = got.lines().peekable();
    let mut out = String::new();
    while let Some(line) = lines.next() {
        if line.contains("namespaces,") {
            assert!(at.is_match(line), "status names the cluster: {line}");
        }
        let Some(cut) = line
            .strip_prefix("SERVER_NAME")
            .and_then(|_| line.find(" | "))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        // A list_regions table: every row's region is served by a server of the cluster.
        out.push_str(&line[cut + 3..]);
        out.push('\n');
        while let Some(row) = lines.next_if(|l| !l.ends_with(" row(s)")) {
            assert!(row.starts_with("rs-"), "a region's server: {row}");
            out.push_str(&row[cut + 3..]);
            out.push('\n');
        }
    }
    for c in status.captures_iter(&out) {
        assert_eq!(
            c[2].lines().count(),
            c[1].parse::<usize>().unwrap(),
            "{out}"
        );
        assert_eq!(&c[1], "2", "two live servers: {out}");
    }
    let out = status.replace_all(&out, "");
    let out = at.replace_all(&out, "1 embedded engine");
    out.replace(
        "Basalt shell: HBase shell commands over a Basalt cluster.",
        "Basalt shell: HBase shell commands over an embedded Basalt data directory.",
    )
    .replace(
        "\n  Group name: cluster\n  Commands: move, balancer, balance_switch\n",
        "",
    )
    .replace(
        "(cluster client), HBase shell syntax",
        "(embedded engine), HBase shell syntax",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcripts_read_the_same_on_a_cluster() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hbase"))
        // Snapshots have their own test below (read points and times differ).
        .filter(|p| !p.to_string_lossy().contains("snapshots"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 10, "transcripts missing: {scripts:?}");
    let mut failures = Vec::new();
    let mut remote_rows = 0;
    for script in &scripts {
        let cluster = Cluster::start(2).await;
        let data = basalt_cli::DataDir::connect(vec![cluster.endpoint()], cluster.prefix.clone())
            .await
            .unwrap();
        assert!(data.embedded().is_none() && data.cluster().is_some());
        let input = std::fs::read_to_string(script)
            .unwrap()
            .replace("$TRANSCRIPTS", dir.to_str().unwrap());
        let mut out = Vec::new();
        basalt_cli::run_script(&data, &input, &mut out)
            .await
            .unwrap();
        data.close().await.unwrap();
        let got = strip_took(&String::from_utf8(out).unwrap());
        let lists_coprocessors = got.contains(" REMOTE ");
        if lists_coprocessors {
            remote_rows += got.matches(" REMOTE ").count();
            assert!(got.contains(REMOTE_NOTE), "{got}");
        }
        let got = coprocessor_rows(&as_if_embedded(&got, &cluster.prefix)).replace(REMOTE_NOTE, "");
        let expected =
            coprocessor_rows(&std::fs::read_to_string(script.with_extension("out")).unwrap());
        if got != expected {
            failures.push(format!(
                "{}: output differs on a cluster\n--- embedded\n{expected}\n--- cluster\n{got}",
                script.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(remote_rows > 0, "a transcript lists coprocessors");
}

/// Runs `script` on a fresh connection to `cluster`; the output less `Took` lines.
async fn run_on(cluster: &Cluster, script: &str) -> String {
    let data = basalt_cli::DataDir::connect(vec![cluster.endpoint()], cluster.prefix.clone())
        .await
        .unwrap();
    let mut out = Vec::new();
    basalt_cli::run_script(&data, script, &mut out)
        .await
        .unwrap();
    data.close().await.unwrap();
    strip_took(&String::from_utf8(out).unwrap())
}

/// The snapshot commands, run on a data directory and on a cluster.
const SNAPSHOTS: &str = "\
create 't', 'f', {SPLITS => ['m']}
put 't', 'a', 'f:q', 'v1'
put 't', 'z', 'f:q', 'v2'
snapshot 't', 'plain'
put 't', 'b', 'f:q', 'v3'
clone_snapshot 'plain', 't2'
scan 't2'
create_index 't', 'by_q', 'f:q'
snapshot 't', 'indexed'
snapshot 't', 'data_only', {INDEXES => false}
list_snapshots
describe_snapshot 'indexed'
clone_snapshot 'indexed', 't3'
exists 't3'
clone_snapshot 'data_only', 't4'
disable 't'
put 't', 'q', 'f:q', 'x'
restore_snapshot 'plain'
enable 't'
scan 't'
delete_snapshot 'plain'
list_snapshots 'plain'
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_on_a_cluster_as_on_a_directory() {
    // Read points are a cluster client's own ordinals, and timestamps the clocks'.
    let read_point = regex::Regex::new(r"READ POINT +\d+|timestamp=\d+").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let data = basalt_cli::DataDir::open(tmp.path()).await.unwrap();
    let mut out = Vec::new();
    basalt_cli::run_script(&data, SNAPSHOTS, &mut out)
        .await
        .unwrap();
    data.close().await.unwrap();
    let embedded = strip_took(&String::from_utf8(out).unwrap());
    let embedded = read_point.replace_all(&embedded, "(varies)");

    let cluster = Cluster::start(2).await;
    let got = run_on(&cluster, SNAPSHOTS).await;
    let got = read_point.replace_all(&got, "(varies)");
    // The clone taken from the snapshot before the later put, listed snapshots, the
    // restored table: as on a directory.
    for e in [
        " a                                 column=f:q",
        " indexed                                 t, t.idx.by_q (YYYY-MM-DD HH:MM:SS UTC)\n",
        "TABLES                  t, t.idx.by_q\n",
    ] {
        assert!(got.contains(e), "missing {e:?} in\n{got}");
    }
    // The indexed clone too (its index definitions renamed by the index admin).
    assert!(embedded.contains("Table t3 does exist\n"), "{embedded}");
    assert_eq!(
        got, embedded,
        "a cluster's output differs from a directory's"
    );
}

/// `basalt shell ARGS` with `stdin` as standard input.
fn shell(args: &[String], stdin: &str) -> Output {
    let mut child = basalt()
        .arg("shell")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the basalt binary starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

const SCRIPT: &str = "\
create 'orders', 'd', {SPLITS => ['m']}
put 'orders', 'a1', 'd:city', 'Oslo'
put 'orders', 'b2', 'd:city', 'Bergen'
put 'orders', 'n3', 'd:city', 'Oslo'
put 'orders', 'z4', 'd:city', 'Tromso'
get 'orders', 'n3'
scan 'orders', {COLUMNS => ['d:city'], STARTROW => 'b', STOPROW => 'z'}
count 'orders'
incr 'orders', 'c', 'd:n', 5
incr 'orders', 'x', 'd:n', 7
get_counter 'orders', 'c', 'd:n'
create_index 'orders', 'by_city', 'd:city'
scan_index 'orders', 'by_city', 'Oslo'
put 'orders', 'p5', 'd:city', 'Oslo'
scan_index 'orders', 'by_city', 'Oslo'
scan_index 'orders', 'by_city', {FROM => ['Bergen'], TO => ['Oslo'], ROWS => true}
verify_index 'orders', 'by_city'
aggregate 'orders', 'count'
aggregate 'orders', 'sum', 'd:n'
aggregate 'orders', 'max', 'd:n'
get_splits 'orders'
list_coprocessors 'orders'
call_endpoint 'orders', 'abcd', 'x'
version
status
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_binary_runs_a_script_against_a_cluster() {
    let cluster = Cluster::start(2).await;
    let out = shell(&cluster.flags(), SCRIPT);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {text}\n{err}", out.status);
    let expect = [
        " n3                                column=d:city, timestamp=",
        ", value=Oslo\n",
        // The scan: b2 and n3, in key order across the two regions.
        " b2                                column=d:city, timestamp=",
        "2 row(s)\n",
        "4 row(s)\n",
        "COUNTER VALUE = 5\n",
        "Created index by_city on orders (ACTIVE)\n",
        " a1                                values=[Oslo]\n n3                                values=[Oslo]\n2 row(s)\n",
        " a1                                values=[Oslo]\n n3                                values=[Oslo]\n p5                                values=[Oslo]\n3 row(s)\n",
        // The range query's data rows: Bergen up to Oslo (exclusive).
        "value=Bergen\n1 row(s)\n",
        // Seven rows (the counters' rows index as nil): all consistent.
        "data rows: 7, index rows: 7, missing: 0, extra: 0, stale: 0\nIndex is consistent\n",
        "COUNT = 7\n",
        "SUM = 12\n",
        "MAX = 7\n",
        "Total number of splits = 2\nm\n",
        "REMOTE",
        "ERROR: call_endpoint is not available over a cluster: endpoint plugins run in the \
         shell's own process, on an embedded engine; the region servers serve the built-in \
         aggregations (aggregate)\n",
        "(cluster client), HBase shell syntax\n",
        "a cluster at etcd ",
        "2 namespaces, 3 tables, 4 regions, 0 offline regions\n",
    ];
    for e in expect {
        assert!(text.contains(e), "missing {e:?} in\n{text}");
    }
    assert_eq!(text.matches("ERROR:").count(), 1, "{text}");

    // A script file: the lone path after --etcd; the table is still there.
    let script = cluster.scratch_file("count.hbase");
    std::fs::write(&script, "count 'orders'\nexists 'orders'\n").unwrap();
    let mut args = cluster.flags();
    args.push(script.to_string_lossy().into_owned());
    let out = shell(&args, "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("7 row(s)\n") && text.contains("Table orders does exist\n"),
        "{text}"
    );
}

#[test]
fn the_shell_refuses_a_directory_with_etcd_and_an_unreachable_etcd() {
    let both = shell(
        &[
            "/tmp/some-dir".into(),
            "script".into(),
            "--etcd".into(),
            "127.0.0.1:2379".into(),
        ],
        "",
    );
    assert!(!both.status.success());
    let err = String::from_utf8_lossy(&both.stderr);
    assert!(err.contains("cannot be used with"), "{err}");
    // Nothing listens on port 1: the shell says where it looked, and exits with 1.
    let none = shell(&["--etcd".into(), "127.0.0.1:1".into()], "list\n");
    assert_eq!(none.status.code(), Some(1));
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(
        err.starts_with("ERROR: cannot reach the cluster at etcd 127.0.0.1:1 (prefix /basalt): "),
        "{err}"
    );
}

/// One shell session on a connection to a cluster, line by line.
struct Session {
    shell: basalt_cli::Shell<basalt_cluster::RemoteBackend>,
}

impl Session {
    async fn connect(cluster: &Cluster) -> Session {
        let data = basalt_cli::DataDir::connect(vec![cluster.endpoint()], cluster.prefix.clone())
            .await
            .unwrap();
        Session {
            shell: basalt_cli::Shell::new(data),
        }
    }

    /// The output of `line`, less its `Took` line.
    async fn run(&mut self, line: &str) -> String {
        let mut out = Vec::new();
        self.shell.execute(line, &mut out).await.unwrap();
        strip_took(&String::from_utf8(out).unwrap())
    }

    /// Each region of `table`'s server, from `list_regions`, in key order.
    async fn servers(&mut self, table: &str) -> Vec<String> {
        let text = self.run(&format!("list_regions '{table}'")).await;
        let mut lines = text.lines();
        assert!(lines.next().unwrap().starts_with("SERVER_NAME "), "{text}");
        lines
            .take_while(|l| !l.ends_with(" row(s)"))
            .map(|l| l.split(" | ").next().unwrap().trim().to_string())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_list_regions_move_and_the_balancer_on_a_cluster() {
    let cluster = Cluster::start(2).await;
    let mut s = Session::connect(&cluster).await;
    let admin = basalt_cluster::ClusterAdmin::connect(cluster.config())
        .await
        .unwrap();
    for t in ["a", "b", "c", "d"] {
        // Placed whole: a move takes every region of the table.
        let name = basalt_core::TableName::parse(t).unwrap();
        admin
            .set_placement(&name, basalt_cluster::Placement::Grouped)
            .await
            .unwrap();
        let out = s
            .run(&format!("create '{t}', 'f', {{SPLITS => ['m']}}"))
            .await;
        assert_eq!(out, format!("Created table {t}\n"));
        s.run(&format!("put '{t}', 'k', 'f:q', 'v'")).await;
    }
    basalt_cluster::ClusterAdmin::connect(cluster.config())
        .await
        .unwrap()
        .wait_settled(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let status = s.run("status").await;
    let lines: Vec<&str> = status.lines().collect();
    assert!(
        lines[0].ends_with("2 namespaces, 4 tables, 8 regions, 0 offline regions"),
        "{status}"
    );
    assert!(
        regex::Regex::new(
            r"^master rs-[01], balancer on, 0 regions in transition, 0 moves pending$"
        )
        .unwrap()
        .is_match(lines[1]),
        "{status}"
    );
    assert_eq!(lines[2], "2 live servers", "{status}");
    let assigned: usize = lines[3..]
        .iter()
        .map(|l| {
            let c =
                regex::Regex::new(r"^    rs-[01] 127\.0\.0\.1:\d+: (\d+) assigned, (\d+) serving$")
                    .unwrap()
                    .captures(l)
                    .unwrap_or_else(|| panic!("a server line: {l}"));
            assert_eq!(c[1], c[2], "settled: {l}");
            c[1].parse::<usize>().unwrap()
        })
        .sum();
    assert_eq!(assigned, 8, "{status}");

    // The balancer off: only our moves change where tables are served.
    assert_eq!(
        s.run("balance_switch false").await,
        "Previous balancer state : true\n"
    );
    assert_eq!(
        s.run("balance_switch false").await,
        "Previous balancer state : false\n"
    );
    assert!(s.run("status").await.contains(", balancer off, "));
    // Every table to rs-0: a move takes the region's whole table group.
    for t in ["a", "b", "c", "d"] {
        let servers = s.servers(t).await;
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0], servers[1], "a table's regions on one server");
        if servers[0] == "rs-0" {
            continue;
        }
        let list = s.run(&format!("list_regions '{t}'")).await;
        let id = list.lines().nth(1).unwrap().split(" | ").nth(1).unwrap();
        let id = id.trim().rsplit(',').next().unwrap().to_string();
        let out = s.run(&format!("move '{id}', 'rs-0'")).await;
        assert_eq!(out, format!("Moved region {id} of {t}: served by rs-0\n"));
        assert_eq!(s.servers(t).await, ["rs-0", "rs-0"]);
    }
    // The rows are still there, read from their new server.
    for t in ["a", "b", "c", "d"] {
        assert!(s.run(&format!("count '{t}'")).await.contains("1 row(s)\n"));
    }
    // One balancing pass spreads the groups again.
    let out = s.run("balancer").await;
    let moved = regex::Regex::new(r"^true\nThe balancer moved (\d+) region\(s\)\n$")
        .unwrap()
        .captures(&out)
        .unwrap_or_else(|| panic!("{out}"))[1]
        .parse::<usize>()
        .unwrap();
    assert!(moved >= 2, "a table group of two regions at least: {out}");
    let mut moved_tables = 0;
    for t in ["a", "b", "c", "d"] {
        let servers = s.servers(t).await;
        assert_eq!(servers[0], servers[1], "a table's regions on one server");
        moved_tables += usize::from(servers[0] == "rs-1");
    }
    assert_eq!(moved_tables * 2, moved, "{out}");

    // Splits and merges go to the table's server; list_regions shows where each is.
    assert!(s
        .run("split 'a', 'f'")
        .await
        .ends_with("1 region(s) split\n"));
    let servers = s.servers("a").await;
    assert_eq!(servers.len(), 3);
    assert!(servers.iter().all(|x| *x == servers[0]), "{servers:?}");

    // Refusals: a region that does not exist, a server that is not live, bad arguments.
    let out = s.run("move '99999'").await;
    assert!(out.starts_with("ERROR: move: no region 99999"), "{out}");
    let list = s.run("list_regions 'b'").await;
    let id = list.lines().nth(1).unwrap().split(" | ").nth(1).unwrap();
    let id = id.trim().rsplit(',').next().unwrap().to_string();
    let out = s.run(&format!("move '{id}', 'nope'")).await;
    assert_eq!(
        out,
        "ERROR: bad argument: nope is not a live region server (status lists them)\n"
    );
    let out = s.run("balance_switch 'maybe'").await;
    assert!(
        out.starts_with("ERROR: balance_switch: give true or false."),
        "{out}"
    );
    assert_eq!(
        s.run("balance_switch true").await,
        "Previous balancer state : false\n"
    );
    assert!(s
        .run("help")
        .await
        .contains("Group name: cluster\n  Commands: move, balancer, balance_switch\n"));
    assert!(s
        .run("help 'move'")
        .await
        .starts_with("move 'region' [, 'server']"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_commands_are_refused_on_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let data = basalt_cli::DataDir::open(tmp.path()).await.unwrap();
    let mut out = Vec::new();
    basalt_cli::run_script(
        &data,
        "create 't', 'f'\nmove '1'\nbalancer\nbalance_switch false\nhelp 'balancer'\n",
        &mut out,
    )
    .await
    .unwrap();
    data.close().await.unwrap();
    let out = strip_took(&String::from_utf8(out).unwrap());
    for cmd in ["move", "balancer", "balance_switch"] {
        assert!(
            out.contains(&format!(
                "ERROR: {cmd} needs a cluster (basalt shell --etcd URLS): an embedded engine \
                 serves every region itself\n"
            )),
            "{out}"
        );
    }
    assert!(
        out.ends_with("balancer (one balancing pass; prints how many regions moved)\n"),
        "{out}"
    );
}
