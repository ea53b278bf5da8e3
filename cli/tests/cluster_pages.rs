//! The pages of a cluster's processes, on real processes (a local etcd, `basalt master`
//! and two `basalt regionserver --no-master` on one shared store, `common::cluster`):
//!
//! - each region server's status page, `/status.json` and `/metrics` list exactly the
//!   regions it serves (as etcd says), each with the writes it took, its RPC requests,
//!   its engine's counters, and the master;
//! - the master's page lists both servers with their regions and a request rate above
//!   zero under load, every region with where it is served, and no procedure in flight
//!   once settled; a move requested while the master is paused shows as a procedure in
//!   flight on the cluster's page of a region server (`/master`), and is gone once the
//!   master acted on it; so is a split asked while the master is paused (`requested`), gone
//!   once its daughters are served;
//! - Debian's chromium, headless, renders the master's page (a row per server, linking to
//!   its page) and a region server's (a row per region), and the cluster's page as served
//!   while the split was in flight; screenshots are saved to
//!   `$CARGO_TARGET_TMPDIR/master-page.png`, `regionserver-page.png` and
//!   `master-page-split.png`.
//!
//! Needs `etcd-server` and `chromium` (`.ci/run` installs both).

mod common;
#[path = "common/web.rs"]
mod web;

use basalt_cluster::{ClusterAdmin, RegionPlacement, RetryPolicy};
use basalt_core::client::Put;
use basalt_core::{ColumnFamilyDescriptor, PreSplit, TableDescriptor, TableName};
use common::cluster::{until, Cluster};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use web::{chromium, get_json, http_get, screenshot};

const SETTLE: Duration = Duration::from_secs(30);

fn name(t: &str) -> TableName {
    TableName::parse(t).unwrap()
}

/// Rows written to the `k`-th region of a table (start key '', then m): all different.
fn rows_in_region(k: usize) -> usize {
    4 * k + 3
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

/// The regions served by each server, by (table, region id).
fn served_by(placements: &[RegionPlacement]) -> BTreeMap<String, BTreeSet<(String, u64)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, u64)>> = BTreeMap::new();
    for p in placements {
        let server = p.serving.clone().expect("every region served once settled");
        out.entry(server)
            .or_default()
            .insert((p.key.table.qualifier().to_string(), p.key.region));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn region_servers_and_the_master_serve_their_pages() {
    let mut cluster = Cluster::empty();
    let (master, master_page) = cluster.start_master("m1");
    cluster.start_server_with("rs-0", &["--no-master"]);
    cluster.start_server_with("rs-1", &["--no-master"]);
    let coord = cluster.coordination().await;
    until("m1 is master and both servers registered", || async {
        let live = coord.live_servers().await.map(|s| s.len()).unwrap_or(0);
        matches!(coord.leader().await, Ok(Some(l)) if l.process == "m1.master") && live == 2
    })
    .await;

    // Two tables (two groups, so the balancer gives each server one), two regions each.
    let conn = basalt_cluster::connect_with(cluster.config(), RetryPolicy::default())
        .await
        .unwrap();
    let placing = basalt_cluster::ClusterAdmin::connect(cluster.config())
        .await
        .unwrap();
    for t in ["left", "right"] {
        // Placed whole: a table's regions are served by one server.
        placing
            .set_placement(&name(t), basalt_cluster::Placement::Grouped)
            .await
            .unwrap();
        let desc = TableDescriptor::new(name(t)).family(ColumnFamilyDescriptor::new("f"));
        conn.admin()
            .create_table_with_splits(desc, PreSplit::Keys(vec![b"m".to_vec()]))
            .await
            .unwrap();
    }
    let admin = ClusterAdmin::connect(cluster.config()).await.unwrap();
    until("the balancer spreads the groups", || async {
        let placements = admin.regions(None).await.unwrap_or_default();
        placements.len() == 4
            && placements.iter().all(|p| p.serving.is_some())
            && served_by(&placements).len() == 2
    })
    .await;
    admin.wait_settled(SETTLE).await.unwrap();
    let placements = admin.regions(None).await.unwrap();
    let served = served_by(&placements);

    // A known load: a different number of rows per region.
    let mut writes: BTreeMap<u64, u64> = BTreeMap::new();
    for t in ["left", "right"] {
        let table = conn.table(name(t)).unwrap();
        for (k, prefix) in ["a", "n"].iter().enumerate() {
            for i in 0..rows_in_region(k) {
                let row = format!("{prefix}{i:03}");
                table
                    .put(Put::new(&row).add_column("f", "q", "v"))
                    .await
                    .unwrap();
            }
            let region = placements
                .iter()
                .find(|p| p.key.table == name(t) && (p.start.is_empty() == (k == 0)))
                .unwrap()
                .key
                .region;
            writes.insert(region, rows_in_region(k) as u64);
        }
    }

    // Each region server's page: exactly the regions it serves, with their writes.
    for (i, server) in cluster.names.iter().enumerate() {
        let info = &cluster.infos[i];
        let s = get_json(info, "/status.json");
        assert_eq!(s["name"], server.as_str(), "{s}");
        assert_eq!(s["master"], "m1", "{s}");
        assert!(s["life"]["lease"].as_u64() > Some(0), "{s}");
        assert!(s["engine"]["wal_syncs"].as_u64().is_some(), "{s}");
        let listed: BTreeSet<(String, u64)> = s["regions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["table"].as_str().unwrap().to_string(),
                    r["id"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(Some(&listed), served.get(server), "{server}: {s}");
        let mut took = 0;
        for r in s["regions"].as_array().unwrap() {
            let id = r["id"].as_u64().unwrap();
            assert_eq!(
                r["write_requests"].as_u64(),
                writes.get(&id).copied(),
                "{r}"
            );
            took += writes[&id];
        }
        assert!(s["rpc"]["requests"].as_u64() >= Some(took), "{s}");

        let (status, metrics) = http_get(info, "/metrics");
        assert!(status.contains(" 200 "), "{status}");
        assert!(metrics.contains("basalt_rpc_requests_total "), "{metrics}");
        assert!(
            metrics.contains("basalt_regionserver_serving 1"),
            "{metrics}"
        );
        for (table, id) in &served[server] {
            let line = format!(
                "basalt_region_write_requests_total{{region=\"{id}\",table=\"{table}\"}} {}",
                writes[id]
            );
            assert!(metrics.contains(&line), "{line} in {metrics}");
        }
        let (status, page) = http_get(info, "/");
        assert!(status.contains(" 200 "), "{status}");
        for p in &placements {
            let row = format!("data-region=\"{}\"", p.key.region);
            let here = p.serving.as_deref() == Some(server.as_str());
            assert_eq!(page.contains(&row), here, "{server}: region {}", p.key);
        }
        let (status, _) = http_get(info, "/nothing-here");
        assert!(status.contains(" 404 "), "{status}");
    }

    // The master's page under load: both servers with their regions and a rate.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        let tables = [
            conn.table(name("left")).unwrap(),
            conn.table(name("right")).unwrap(),
        ];
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for t in &tables {
                    let row = format!("load{i:08}");
                    t.put(Put::new(&row).add_column("f", "q", "v"))
                        .await
                        .unwrap();
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    until(
        "the master's page shows both servers' request rates",
        || async {
            let m = get_json(&master_page, "/status.json");
            m["servers"].as_array().is_some_and(|s| {
                s.len() == 2 && s.iter().all(|v| v["requests_per_sec"].as_f64() > Some(0.0))
            })
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    let m = get_json(&master_page, "/status.json");
    assert_eq!(m["active"], true, "{m}");
    assert_eq!(m["master"], "m1", "{m}");
    assert_eq!(m["regions"], 4, "{m}");
    assert_eq!(m["procedures_in_flight"], 0, "{m}");
    for v in m["servers"].as_array().unwrap() {
        let server = v["name"].as_str().unwrap();
        assert_eq!(
            v["serving"].as_u64(),
            Some(served[server].len() as u64),
            "{v}"
        );
        assert!(v["requests"].as_u64() > Some(0), "{v}");
        let i = cluster.names.iter().position(|n| n == server).unwrap();
        assert_eq!(
            v["info_url"].as_str(),
            Some(format!("http://{}/", cluster.infos[i]).as_str()),
            "{v}"
        );
    }
    assert_eq!(m["placements"].as_array().map(Vec::len), Some(4), "{m}");
    let (status, metrics) = http_get(&master_page, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    for line in [
        "basalt_master_active 1",
        "basalt_cluster_live_servers 2",
        "basalt_cluster_regions 4",
        "basalt_cluster_regions_in_transition 0",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    assert!(
        metrics.contains("basalt_server_requests_per_second{server=\"rs-0\"}"),
        "{metrics}"
    );

    // The cluster's page of a region server: not the master; a move requested while the
    // master is paused is a procedure in flight until the master acts on it.
    let rs0 = &cluster.infos[0];
    let c = get_json(rs0, "/master.json");
    assert_eq!(
        (c["active"].clone(), c["master"].clone()),
        (false.into(), "m1".into()),
        "{c}"
    );
    let left = placements
        .iter()
        .find(|p| p.key.table == name("left"))
        .unwrap();
    let from = left.serving.clone().unwrap();
    let to = if from == "rs-0" { "rs-1" } else { "rs-0" };
    // The balancer off: the move gathers both groups on one server, and they stay.
    admin.balancer(false).await.unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    signal(master.0.id(), "-STOP");
    let requested = admin
        .move_region(&name("left"), left.key.region, Some(to))
        .await;
    let paused = get_json(rs0, "/master.json");
    let (_, paused_page) = http_get(rs0, "/master");
    signal(master.0.id(), "-CONT");
    requested.unwrap();
    assert!(
        paused["procedures_in_flight"].as_u64() >= Some(1),
        "{paused}"
    );
    let pending = &paused["pending_moves"][0];
    assert_eq!(
        (
            pending["table"].as_str(),
            pending["region"].as_u64(),
            pending["target"].as_str()
        ),
        (Some("left"), Some(left.key.region), Some(to)),
        "{paused}"
    );
    assert!(paused_page.contains("move (requested)"), "{paused_page}");
    admin.wait_settled(SETTLE).await.unwrap();
    until("the move is done and no procedure is in flight", || async {
        let c = get_json(rs0, "/master.json");
        c["procedures_in_flight"] == 0
            && c["placements"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["table"] == "left")
                .all(|p| p["serving"] == to)
    })
    .await;

    // A split asked while the master is paused is a procedure in flight too, requested
    // until the master runs it. The page as it was then is kept for the browser below.
    let right = placements
        .iter()
        .find(|p| p.key.table == name("right") && p.start.is_empty())
        .unwrap()
        .key
        .region;
    signal(master.0.id(), "-STOP");
    let splitting = {
        let conn = conn.clone();
        tokio::spawn(async move {
            conn.admin()
                .split_region(name("right"), right, Some(b"c".as_slice()))
                .await
        })
    };
    until("the split is recorded in etcd", || async {
        admin.procedures().await.is_ok_and(|p| !p.is_empty())
    })
    .await;
    let paused = get_json(rs0, "/master.json");
    let (_, split_page) = http_get(rs0, "/master");
    signal(master.0.id(), "-CONT");
    let daughters = splitting.await.unwrap().unwrap();
    assert!(daughters.is_some(), "the split made no daughters");
    let split = &paused["splits_and_merges"][0];
    assert_eq!(
        (
            split["kind"].as_str(),
            split["table"].as_str(),
            split["regions"][0].as_u64(),
            split["state"].as_str()
        ),
        (
            Some("split_region"),
            Some("right"),
            Some(right),
            Some("requested")
        ),
        "{paused}"
    );
    assert!(
        paused["procedures_in_flight"].as_u64() >= Some(1),
        "{paused}"
    );
    assert!(
        split_page.contains("split_region (requested)"),
        "{split_page}"
    );
    until("the split is done and its procedure gone", || async {
        let c = get_json(rs0, "/master.json");
        c["procedures_in_flight"] == 0 && c["placements"].as_array().map(Vec::len) == Some(5)
    })
    .await;

    // In a real browser: the master's page with a row per server, linking to its page,
    // and a region server's with a row per region.
    let profile = tempfile::tempdir().unwrap();
    let master_url = format!("http://{master_page}/");
    let dom = chromium(
        profile.path(),
        &["--dump-dom".to_string(), master_url.clone()],
    );
    for (i, server) in cluster.names.iter().enumerate() {
        let row = dom
            .split(&format!("data-server=\"{server}\""))
            .nth(1)
            .and_then(|r| r.split("</tr>").next())
            .unwrap_or_else(|| panic!("no row of {server}: {dom}"));
        assert!(
            row.contains(&format!("href=\"http://{}/\"", cluster.infos[i])),
            "{row}"
        );
    }
    assert_eq!(dom.matches("class=\"region\"").count(), 5, "{dom}");
    let rs_url = format!("http://{rs0}/");
    let dom = chromium(profile.path(), &["--dump-dom".to_string(), rs_url.clone()]);
    let here = admin
        .regions(None)
        .await
        .unwrap()
        .iter()
        .filter(|p| p.serving.as_deref() == Some("rs-0"))
        .count();
    assert_eq!(dom.matches("class=\"region\"").count(), here, "{dom}");
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    screenshot(&master_url, &tmp.join("master-page.png"), 1300, 1100);
    screenshot(&rs_url, &tmp.join("regionserver-page.png"), 1300, 1100);
    // The cluster's page while the split was in flight, from the bytes served then.
    let split_html = tmp.join("master-page-split.html");
    std::fs::write(&split_html, &split_page).unwrap();
    screenshot(
        &format!("file://{}", split_html.display()),
        &tmp.join("master-page-split.png"),
        1300,
        1100,
    );
    println!("screenshots: {}", tmp.display());
    conn.close().await.unwrap();
}
