//! `basalt serve --etcd`: the Thrift gateway in front of a cluster of real processes (a
//! local etcd and two `basalt regionserver` processes on one shared store,
//! `common::cluster`).
//!
//! - The status page, `/status.json` and `/metrics` over a cluster: a table pre-split in
//!   four takes a known load through the gateway (a different number of rows per region,
//!   in `mutateRows` batches, and some gets); every region is listed with its write count
//!   as its server counted it and the server serving it, the index and coprocessors of a
//!   second table are listed, the cluster's master and servers are; and the engine's
//!   figures, which each region server keeps, are absent (`null` in the JSON, left out of
//!   the metrics, said so on the page).
//! - happybase unchanged: `cli/tests/happybase/test_cluster_gateway.py` runs the calls of
//!   the happybase suite (every transport and protocol, 32 concurrent clients) through the
//!   gateway (needs `python3` with `happybase` and `pytest`, as `happybase.rs`).
//! - `getTableRegions` reports each region at the region server serving it.
//! - SIGTERM stops the gateway cleanly (exit status 0), closing its cluster connection.

use crate::common;
use basalt_thrift::hbase::{BatchMutation, HbaseSyncClient, Mutation, THbaseSyncClient};
use common::cluster::{basalt, Cluster, Proc};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;
use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol};
use thrift::transport::{TBufferedReadTransport, TBufferedWriteTransport, TIoChannel, TTcpChannel};

const SPLITS: [&str; 3] = ["g", "m", "t"];

/// Rows written to region `k` (start key '' then g, m, t): all different, so a row
/// counted in the wrong region shows.
fn rows_in_region(k: usize) -> usize {
    3 * k + 2
}

use crate::web::http_get;

use crate::runner;

fn pytest(file: &str, gateway: &str) {
    let env = [
        ("BASALT_GATEWAY", gateway),
        ("BASALT_CONCURRENCY_SECS", "5"),
    ];
    let stdout = runner::pytest(file, &env);
    assert!(!stdout.contains(" skipped"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_serves_a_cluster_to_happybase_with_its_status_page() {
    let cluster = Cluster::start(2).await;
    // `events` placed whole on one server: no balancing move resets a region's counters
    // under the load below.
    basalt_cluster::ClusterAdmin::connect(cluster.config())
        .await
        .unwrap()
        .set_placement(
            &basalt_core::TableName::parse("events").unwrap(),
            basalt_cluster::Placement::Grouped,
        )
        .await
        .unwrap();
    // The tables, made through the cluster's client before the gateway starts.
    let splits: Vec<String> = SPLITS.iter().map(|s| format!("'{s}'")).collect();
    let script = format!(
        "create 'events', 'd', 'm', SPLITS => [{}]\n\
         create 'users', 'info'\n\
         create_index 'users', 'by_email', 'info:email', {{UNIQUE => true}}\n",
        splits.join(", ")
    );
    let data = basalt_cli::DataDir::connect(vec![cluster.endpoint()], cluster.prefix.clone())
        .await
        .unwrap();
    let mut out = Vec::new();
    basalt_cli::run_script(&data, &script, &mut out)
        .await
        .unwrap();
    data.close().await.unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(!out.contains("ERROR"), "{out}");
    // Every region served where the master put it: no move resets a region's counters
    // under the load below.
    basalt_cluster::ClusterAdmin::connect(cluster.config())
        .await
        .unwrap()
        .wait_settled(Duration::from_secs(30))
        .await
        .unwrap();

    let mut child = basalt()
        .arg("serve")
        .args(cluster.flags())
        .args(["--port", "0", "--info-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let mut gateway = Proc(child);
    let first = lines.next().unwrap().unwrap();
    let thrift = first.strip_prefix("listening on ").unwrap().to_string();
    let second = lines.next().unwrap().unwrap();
    let info = second
        .strip_prefix("status page on http://")
        .unwrap()
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
    let starts = ["", "g", "m", "t"];
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (k, start) in starts.iter().enumerate() {
        let prefix = if start.is_empty() { "a" } else { start };
        let rows: Vec<BatchMutation> = (0..rows_in_region(k))
            .map(|i| BatchMutation {
                row: Some(format!("{prefix}{i:04}").into_bytes()),
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
        expected.insert(start.to_string(), rows_in_region(k) as u64);
    }
    for i in 0..7 {
        let row = format!("a{:04}", i % rows_in_region(0)).into_bytes();
        let got = client
            .get_row(b"events".to_vec(), row, BTreeMap::new())
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

    // getTableRegions: each region at the region server serving it (host and RPC port).
    let admin = basalt_cluster::ClusterAdmin::connect(cluster.config())
        .await
        .unwrap();
    let status = admin.status().await.unwrap();
    let placements = admin
        .regions(Some(&basalt_core::TableName::parse("events").unwrap()))
        .await
        .unwrap();
    let listed = client.get_table_regions(b"events".to_vec()).unwrap();
    assert_eq!(listed.len(), placements.len());
    for region in &listed {
        let id = region.id.and_then(|id| u64::try_from(id).ok()).unwrap();
        let serving = placements
            .iter()
            .find(|p| p.key.region == id)
            .and_then(|p| p.serving.clone())
            .unwrap_or_else(|| panic!("region {id} is served"));
        let server = status.servers.iter().find(|s| s.name == serving).unwrap();
        let reported = format!(
            "{}:{}",
            String::from_utf8(region.server_name.clone().unwrap()).unwrap(),
            region.port.unwrap()
        );
        assert_eq!(reported, server.rpc_address, "region {id}");
    }

    // The JSON: the cluster, no engine figures, every region with its write count.
    let (status, body) = http_get(&info, "/status.json");
    assert!(status.contains(" 200 "), "{status}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(json["data_dir"].is_null(), "{body}");
    assert!(json["engine"].is_null(), "{body}");
    assert_eq!(json["cluster"]["prefix"], cluster.prefix.as_str(), "{body}");
    assert_eq!(
        json["cluster"]["etcd"][0],
        cluster.endpoint().as_str(),
        "{body}"
    );
    // The cluster's state: its master, balancer and both servers, all settled.
    let c = &json["cluster"];
    assert!(
        matches!(c["master"].as_str(), Some("rs-0" | "rs-1")),
        "{body}"
    );
    assert_eq!(c["balancer_on"], true, "{body}");
    assert_eq!(c["regions_in_transition"], 0, "{body}");
    let servers = c["servers"].as_array().unwrap();
    let names: Vec<&str> = servers
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["rs-0", "rs-1"], "{body}");
    let serving: u64 = servers.iter().map(|v| v["serving"].as_u64().unwrap()).sum();
    assert_eq!(serving, 4 + 1 + 1 + 1, "every region served: {body}");
    let table = |name: &str| {
        json["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("table {name} in {body}"))
            .clone()
    };
    let events = table("events");
    let regions = events["regions"].as_array().unwrap();
    assert_eq!(regions.len(), 4, "{events}");
    let total: u64 = expected.values().sum();
    for r in regions {
        let start = r["start_key"].as_str().unwrap().to_string();
        let writes = r["write_requests"].as_u64().unwrap();
        assert_eq!(Some(&writes), expected.get(&start), "region {start:?}: {r}");
        let share = r["write_share"].as_f64().unwrap();
        assert!((share - writes as f64 / total as f64).abs() < 1e-9, "{r}");
        // A table group is served by one server.
        assert_eq!(r["server"], regions[0]["server"], "{events}");
    }
    assert!(
        names.contains(&regions[0]["server"].as_str().unwrap()),
        "{events}"
    );
    assert_eq!(regions[0]["read_requests"].as_u64(), Some(7), "{events}");
    assert!(json["gateway"]["requests"].as_u64().unwrap() >= 4 + 7 + 5);
    let users = table("users");
    assert_eq!(users["indexes"][0]["name"], "by_email", "{users}");
    assert_eq!(users["indexes"][0]["state"], "ACTIVE", "{users}");
    let cps = users["coprocessors"].as_array().unwrap();
    assert!(!cps.is_empty(), "{users}");
    assert!(
        cps.iter()
            .all(|c| c["state"] == "REMOTE" && c["calls"].is_null() && c["errors"].is_null()),
        "{users}"
    );

    // The metrics: the regions' figures, not the engine's.
    let (status, metrics) = http_get(&info, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    for r in regions {
        let line = format!(
            "basalt_region_write_requests_total{{region=\"{}\",table=\"events\"}} {}",
            r["id"], r["write_requests"]
        );
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
    assert!(
        metrics.contains("basalt_thrift_requests_total{method=\"mutateRows\",table=\"events\"}")
    );
    assert!(!metrics.contains("basalt_flushes_total"), "{metrics}");
    assert!(
        !metrics.contains("basalt_coprocessor_calls_total{"),
        "{metrics}"
    );

    // The page: what it serves, and why the engine's figures are absent.
    let (status, page) = http_get(&info, "/");
    assert!(status.contains(" 200 "), "{status}");
    assert!(page.contains("Cluster <code>etcd "), "{page}");
    assert!(
        page.contains("<section id=\"cluster\"><h2>Cluster</h2>"),
        "{page}"
    );
    assert_eq!(page.matches("<tr class=\"server\">").count(), 2, "{page}");
    assert_eq!(
        page.matches("<td class=\"server\"><code>rs-").count(),
        7,
        "{page}"
    );
    assert!(
        page.contains("each region server keeps its own counters"),
        "{page}"
    );
    assert_eq!(
        page.matches("class=\"region\" data-region=").count(),
        4 + 1 + 1 + 1
    );

    // happybase, unchanged, through the gateway.
    drop(client);
    pytest("test_cluster_gateway.py", &thrift);

    // SIGTERM: the gateway closes its connections and its cluster connection, exit 0.
    let pid = gateway.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let code = gateway.0.wait().unwrap();
    let mut log = String::new();
    BufReader::new(stderr).read_to_string(&mut log).unwrap();
    assert!(code.success(), "{code}: {log}");
    assert!(
        log.contains(&format!(
            "connection to the cluster at etcd {} (prefix {}) closed",
            cluster.endpoint(),
            cluster.prefix
        )),
        "{log}"
    );
}
