//! The status page in a real browser: `basalt serve` over a table pre-split into 8 regions,
//! a known load through the Thrift service (a different number of rows per region, in
//! `mutateRows` batches as happybase sends them, and some gets), then Debian's chromium,
//! headless, loads the page. Every region must be listed with its write count (one per row,
//! as HBase counts them), and `/status.json` and `/metrics` must agree. A screenshot is
//! saved to `$CARGO_TARGET_TMPDIR/status-page.png`.
//!
//! Needs `chromium` (`.ci/run` installs Debian's package).

use basalt_thrift::hbase::{BatchMutation, HbaseSyncClient, Mutation, THbaseSyncClient};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol};
use thrift::transport::{TBufferedReadTransport, TBufferedWriteTransport, TIoChannel, TTcpChannel};

const SPLITS: [&str; 7] = ["b", "c", "d", "e", "f", "g", "h"];

/// Rows written to region `k` (start key '' then b..h): all different, so a row counted in
/// the wrong region shows.
fn rows_in_region(k: usize) -> usize {
    3 * k + 2
}

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn basalt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
}

#[path = "common/web.rs"]
mod web;
use web::{chromium, http_get, screenshot};

#[test]
fn every_region_is_listed_with_its_write_count_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The pre-split table, made by the shell before the server opens the directory.
    let splits: Vec<String> = SPLITS.iter().map(|s| format!("'{s}'")).collect();
    // A second table with a secondary index: its coprocessors and index are on the page.
    // And the example validation plugin attached to it: its p99 and memory are too.
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plugins/validation.wasm");
    let plugin_id = std::fs::read_to_string(plugin.with_extension("wasm.sha256")).unwrap();
    let plugin_id = plugin_id.split_whitespace().next().unwrap().to_string();
    let script = format!(
        "create 'events', {{NAME => 'd', VERSIONS => 3}}, 'm', SPLITS => [{}]\n\
         create 'users', 'info'\n\
         create_index 'users', 'by_email', 'info:email', {{UNIQUE => true}}\n\
         upload_coprocessor '{}'\n\
         alter 'users', METHOD => 'table_att', 'coprocessor' => 'plugin:{plugin_id}'\n",
        splits.join(", "),
        plugin.display()
    );
    let mut shell = basalt()
        .args(["shell", "-n"])
        .arg(&data)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    shell
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(shell.wait().unwrap().success());

    let mut child = basalt()
        .arg("serve")
        .arg(&data)
        .args(["--port", "0", "--info-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let mut server = Server { child };
    let first = lines.next().unwrap().unwrap();
    let thrift = first.strip_prefix("listening on ").unwrap().to_string();
    let second = lines.next().unwrap().unwrap();
    let page_url = second.strip_prefix("status page on ").unwrap().to_string();
    let info = page_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();

    // The known load: region k gets rows_in_region(k) rows in batches of 4, two cells each.
    let mut ch = TTcpChannel::new();
    ch.open(thrift.as_str()).unwrap();
    let (r, w) = ch.split().unwrap();
    let mut client = HbaseSyncClient::new(
        TBinaryInputProtocol::new(TBufferedReadTransport::new(r), true),
        TBinaryOutputProtocol::new(TBufferedWriteTransport::new(w), true),
    );
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for k in 0..8 {
        let letter = (b'a' + k as u8) as char;
        let start = if k == 0 {
            String::new()
        } else {
            letter.to_string()
        };
        let rows: Vec<BatchMutation> = (0..rows_in_region(k))
            .map(|i| BatchMutation {
                row: Some(format!("{letter}{i:04}").into_bytes()),
                mutations: Some(
                    ["d:v", "m:n"]
                        .iter()
                        .map(|col| Mutation {
                            is_delete: Some(false),
                            column: Some(col.as_bytes().to_vec()),
                            value: Some(vec![b'x'; 64]),
                            write_to_w_a_l: Some(true),
                        })
                        .collect(),
                ),
            })
            .collect();
        for chunk in rows.chunks(4) {
            client
                .mutate_rows(b"events".to_vec(), chunk.to_vec(), BTreeMap::new())
                .unwrap();
        }
        expected.insert(start, rows_in_region(k) as u64);
    }
    for i in 0..7 {
        let got = client
            .get_row(
                b"events".to_vec(),
                format!("a{:04}", i % rows_in_region(0)).into_bytes(),
                BTreeMap::new(),
            )
            .unwrap();
        assert_eq!(got.len(), 1);
    }

    for i in 0..5 {
        let m = Mutation {
            is_delete: Some(false),
            column: Some(b"info:email".to_vec()),
            value: Some(format!("u{i}@example.com").into_bytes()),
            write_to_w_a_l: Some(true),
        };
        client
            .mutate_row(
                b"users".to_vec(),
                format!("u{i}").into_bytes(),
                vec![m],
                BTreeMap::new(),
            )
            .unwrap();
    }

    // The JSON: every region, in key order, with its write count and share.
    let (status, body) = http_get(&info, "/status.json");
    assert!(status.contains(" 200 "), "{status}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let table = json["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "events")
        .unwrap();
    let regions = table["regions"].as_array().unwrap();
    assert_eq!(regions.len(), 8, "{body}");
    let total: u64 = expected.values().sum();
    let mut by_id = BTreeMap::new();
    for r in regions {
        let start = r["start_key"].as_str().unwrap().to_string();
        let writes = r["write_requests"].as_u64().unwrap();
        assert_eq!(Some(&writes), expected.get(&start), "region {start:?}: {r}");
        let share = r["write_share"].as_f64().unwrap();
        assert!((share - writes as f64 / total as f64).abs() < 1e-9, "{r}");
        by_id.insert(r["id"].as_u64().unwrap(), (start, writes));
    }
    assert_eq!(regions[0]["read_requests"].as_u64(), Some(7), "{body}");
    assert!(json["gateway"]["requests"].as_u64().unwrap() >= 8 + 7 + 5);
    let users = json["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "users")
        .unwrap();
    assert_eq!(users["indexes"][0]["name"], "by_email", "{users}");
    assert_eq!(users["indexes"][0]["state"], "ACTIVE", "{users}");
    assert_eq!(users["indexes"][0]["unique"], true, "{users}");
    let cps = users["coprocessors"].as_array().unwrap();
    assert!(!cps.is_empty(), "{users}");
    assert!(
        cps.iter()
            .all(|c| c["state"] == "LOADED" && c["errors"] == 0),
        "{users}"
    );
    assert!(
        cps.iter().any(|c| c["calls"].as_u64() >= Some(5)),
        "{users}"
    );
    let validation = cps
        .iter()
        .find(|c| c["name"] == format!("plugin:{plugin_id}"))
        .unwrap_or_else(|| panic!("no plugin in {users}"));
    assert!(validation["calls"].as_u64() >= Some(1), "{validation}");
    assert!(
        validation["p99_latency_micros"].as_f64() > Some(0.0),
        "{validation}"
    );
    assert!(
        validation["memory_bytes"].as_u64() >= Some(65536),
        "{validation}"
    );

    // The page as chromium renders it: every region's row with its write count.
    let profile = tempfile::tempdir().unwrap();
    let dom = chromium(
        profile.path(),
        &["--dump-dom".to_string(), page_url.clone()],
    );
    assert!(dom.contains("Table events"), "{dom}");
    let users_section = dom
        .split("data-table=\"users\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no section of table users: {dom}"));
    assert!(users_section.contains("by_email"), "{users_section}");
    assert!(users_section.contains("info:email"), "{users_section}");
    let plugin_row = users_section
        .split(plugin_id.as_str())
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .unwrap_or_else(|| panic!("no row of the plugin: {users_section}"));
    for cell in ["class=\"num p99\">", "class=\"num memory\">"] {
        let value = plugin_row.split(cell).nth(1).unwrap_or("-");
        assert!(
            !value.starts_with('-'),
            "{cell} of the plugin: {plugin_row}"
        );
    }
    let events_section = dom
        .split("data-table=\"events\"")
        .nth(1)
        .and_then(|s| s.split("<section").next())
        .unwrap_or_else(|| panic!("no section of table events: {dom}"));
    let mut listed = BTreeMap::new();
    for row in events_section.split("<tr class=\"region\"").skip(1) {
        let id: u64 = row
            .split_once("data-region=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .and_then(|(id, _)| id.parse().ok())
            .unwrap_or_else(|| panic!("a region row without its id: {row}"));
        let writes: u64 = row
            .split_once("class=\"num writes\">")
            .and_then(|(_, rest)| rest.split_once('<'))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or_else(|| panic!("region {id} without its write count: {row}"));
        listed.insert(id, writes);
    }
    let want: BTreeMap<u64, u64> = by_id.iter().map(|(id, (_, w))| (*id, *w)).collect();
    assert_eq!(
        listed, want,
        "the page lists every region with its write count"
    );

    // The metrics agree.
    let (status, metrics) = http_get(&info, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    for (id, (_, writes)) in &by_id {
        let line = format!(
            "basalt_region_write_requests_total{{region=\"{id}\",table=\"events\"}} {writes}"
        );
        assert!(metrics.contains(&line), "{line} missing from:\n{metrics}");
    }
    assert!(
        metrics.contains("basalt_thrift_requests_total{method=\"mutateRows\",table=\"events\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("basalt_wal_written_bytes_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "basalt_plugin_memory_bytes{{coprocessor=\"plugin:{plugin_id}\",table=\"users\"}}"
        )),
        "{metrics}"
    );
    let (status, _) = http_get(&info, "/nothing-here");
    assert!(status.contains(" 404 "), "{status}");

    // The screenshot, for a person to look at.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    screenshot(&page_url, &shot, 1400, 2600);
    println!("screenshot: {}", shot.display());

    // SIGTERM closes the engine cleanly.
    let pid = server.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let code = server.child.wait().unwrap();
    let mut log = String::new();
    BufReader::new(stderr).read_to_string(&mut log).unwrap();
    assert!(code.success(), "{code}: {log}");
    assert!(log.contains("engine closed"), "{log}");
}
