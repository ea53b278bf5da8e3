//! A region server's status page, its JSON and its `/metrics`, as HBase's region server
//! UI shows them: the server (name, RPC address, the life it serves in: lease and node
//! generation, the cluster's master), its RPC requests with their rate per second, its
//! engine's counters (the rows and metric names of `basalt serve`'s page), and the
//! regions it serves with the columns of HBase's region table (the metric names of
//! `basalt serve`'s per-region metrics).
//!
//! Invariants: only the regions this server serves now are listed (a region of the
//! catalog served elsewhere is not); between two lives (the lease was lost) the page
//! says so and lists nothing; every text from the cluster (names, keys) is HTML-escaped;
//! region rows carry `data-region`. Gathering only reads.

use super::rates::Rates;
use crate::serve::page::{duration, engine_rows, escape, region_figures, STYLE};
use crate::serve::scrape::{
    encode, int_counter, int_gauge, register_engine, register_process, register_regions,
};
use crate::serve::status::{engine_json, shares, RegionStatus};
use crate::shell::show_name;
use basalt_cluster::regionserver::ServerLives;
use basalt_cluster::ClusterAdmin;
use basalt_core::client::Backend;
use basalt_core::{Engine, EngineStats, TableName};
use prometheus::Registry;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

/// What a region server's pages read: the server's lives and the cluster.
pub(crate) struct RegionServerPage {
    /// The server's name.
    pub(crate) name: String,
    /// Where its RPC service listens.
    pub(crate) rpc_address: String,
    /// etcd's members, as given.
    pub(crate) etcd: Vec<String>,
    /// The prefix of the cluster's keys.
    pub(crate) prefix: String,
    /// The server's lives.
    pub(crate) lives: ServerLives,
    /// The cluster's state (the master's name).
    pub(crate) admin: ClusterAdmin,
    /// When the process started.
    pub(crate) started: Instant,
    /// The rate of its RPC requests.
    pub(crate) rates: Rates,
    /// Info connections refused for the bound.
    pub(crate) refused: AtomicU64,
}

/// Everything a region server's page shows.
#[derive(Debug, Clone, Serialize)]
pub struct RegionServerStatus {
    /// Basalt's version.
    pub version: &'static str,
    /// The server's name.
    pub name: String,
    /// Where its RPC service listens.
    pub rpc_address: String,
    /// etcd's members.
    pub etcd: Vec<String>,
    /// The prefix of the cluster's keys.
    pub prefix: String,
    /// The cluster's master, if one is elected (and etcd answered).
    pub master: Option<String>,
    /// Seconds since the process started.
    pub uptime_secs: u64,
    /// The life it serves in (`None` between lives).
    pub life: Option<LifeStatus>,
    /// Its RPC service's counters (`None` between lives).
    pub rpc: Option<RpcStatus>,
    /// Its engine's counters (`None` between lives).
    #[serde(serialize_with = "engine_json")]
    pub engine: Option<EngineStats>,
    /// The regions it serves, by table then key.
    pub regions: Vec<ServedRegion>,
}

/// The life a server serves in.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LifeStatus {
    /// The lease its registration is bound to.
    pub lease: u64,
    /// The lease's node generation (one more per life of the same name).
    pub node_generation: u64,
    /// When it registered, in milliseconds since the Unix epoch.
    pub started_ms: u64,
}

/// A server's RPC counters.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RpcStatus {
    /// Calls answered since the process started.
    pub requests: u64,
    /// Of those, answered with an error.
    pub errors: u64,
    /// Scans opened.
    pub scans: u64,
    /// Scans running now.
    pub open_scans: u64,
    /// Requests per second lately (`None` until two samples a second apart).
    pub requests_per_sec: Option<f64>,
}

/// One region this server serves.
#[derive(Debug, Clone, Serialize)]
pub struct ServedRegion {
    /// Its table, as HBase prints it.
    pub table: String,
    /// Its figures (its write share is of its table's writes on this server).
    #[serde(flatten)]
    pub region: RegionStatus,
}

/// Samples the server's request counter for its rate.
pub(crate) fn sample(page: &RegionServerPage) {
    if let Some(life) = page.lives.current() {
        page.rates
            .observe("rpc", life.load().requests, Instant::now());
    }
}

/// The status of the server `page` reads, now.
pub(crate) async fn gather(page: &RegionServerPage) -> RegionServerStatus {
    let life = page.lives.current();
    let master = page.admin.status().await.ok().and_then(|s| s.master);
    let mut status = RegionServerStatus {
        version: env!("CARGO_PKG_VERSION"),
        name: page.name.clone(),
        rpc_address: page.rpc_address.clone(),
        etcd: page.etcd.clone(),
        prefix: page.prefix.clone(),
        master,
        uptime_secs: page.started.elapsed().as_secs(),
        life: None,
        rpc: None,
        engine: None,
        regions: Vec::new(),
    };
    let Some(life) = life else {
        return status;
    };
    let load = life.load();
    status.life = Some(LifeStatus {
        lease: life.lease(),
        node_generation: life.node_generation(),
        started_ms: life.started_ms(),
    });
    status.rpc = Some(RpcStatus {
        requests: load.requests,
        errors: load.errors,
        scans: load.scans,
        open_scans: load.open_scans,
        requests_per_sec: page.rates.observe("rpc", load.requests, Instant::now()),
    });
    status.engine = Some(life.engine().stats());
    status.regions = served_regions(life.engine()).await;
    status
}

/// The regions `engine` serves with their figures, by table then key (a table dropped
/// meanwhile is left out).
async fn served_regions(engine: &Arc<Engine>) -> Vec<ServedRegion> {
    let mut by_table: BTreeMap<TableName, Vec<u64>> = BTreeMap::new();
    for (table, id) in engine.served_regions() {
        by_table.entry(table).or_default().push(id);
    }
    let mut out = Vec::new();
    for (table, ids) in by_table {
        let infos = match engine.regions(&table).await {
            Ok(infos) => infos,
            Err(e) => {
                tracing::debug!(%table, error = %e, "status page: regions not read");
                continue;
            }
        };
        let served: Vec<_> = infos.into_iter().filter(|r| ids.contains(&r.id)).collect();
        let writes: Vec<u64> = served.iter().map(|r| r.write_requests).collect();
        let name = show_name(&table);
        for (r, share) in served.iter().zip(shares(&writes)) {
            out.push(ServedRegion {
                table: name.clone(),
                region: RegionStatus::of(&name, r, share),
            });
        }
    }
    out
}

/// The page for `s`.
pub(crate) fn render(s: &RegionServerStatus) -> String {
    let mut h = String::with_capacity(8 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Basalt region server {name}</title><style>{STYLE}</style></head><body>\
         <header><h1>Region server <code>{name}</code></h1><p>Basalt {version} · RPC on \
         {rpc} · up {up} · <a href=\"/status.json\">JSON</a> · \
         <a href=\"/metrics\">metrics</a> · <a href=\"/master\">the cluster</a></p></header><main>",
        name = escape(&s.name),
        version = escape(s.version),
        rpc = escape(&s.rpc_address),
        up = duration(s.uptime_secs),
    );
    let serving = match &s.life {
        Some(l) => format!(
            "serving (lease {}, node generation {})",
            l.lease, l.node_generation
        ),
        None => "not serving: opening its engine, or between two leases".to_string(),
    };
    let mut rows = vec![
        ("State", serving),
        (
            "Master",
            s.master.clone().unwrap_or_else(|| "(none elected)".into()),
        ),
        (
            "Cluster",
            format!("etcd {} (prefix {})", s.etcd.join(","), s.prefix),
        ),
    ];
    if let Some(r) = &s.rpc {
        rows.push((
            "Requests per second",
            r.requests_per_sec
                .map_or_else(|| "-".to_string(), |v| format!("{v:.1}")),
        ));
        rows.push((
            "Requests (errors)",
            format!("{} ({})", r.requests, r.errors),
        ));
        rows.push((
            "Scans (open now)",
            format!("{} ({})", r.scans, r.open_scans),
        ));
    }
    if let Some(e) = &s.engine {
        rows.extend(engine_rows(e));
    }
    h.push_str("<section id=\"server\"><h2>Server</h2><table class=\"kv\">");
    for (k, v) in rows {
        let _ = write!(h, "<tr><td>{k}</td><td>{}</td></tr>", escape(&v));
    }
    h.push_str("</table></section>");
    regions_section(&mut h, &s.regions);
    h.push_str("</main></body></html>\n");
    h
}

fn regions_section(h: &mut String, regions: &[ServedRegion]) {
    let _ = write!(
        h,
        "<section id=\"regions\"><h2>Regions</h2><p class=\"muted\">{} region(s) served \
         here</p><table><tr><th>Table</th><th>Region</th><th>Start key</th><th>End key</th>\
         <th class=\"num\">Store files</th><th class=\"num\">Size on disk</th>\
         <th class=\"num\">MemStore</th><th class=\"num\">Read requests</th>\
         <th class=\"num\">Write requests</th></tr>",
        regions.len()
    );
    if regions.is_empty() {
        h.push_str("<tr><td colspan=\"9\" class=\"muted\">no region served here</td></tr>");
    }
    for s in regions {
        let r = &s.region;
        let _ = write!(
            h,
            "<tr class=\"region\" data-region=\"{id}\"><td>{table}</td><td><code>{name}</code></td>\
             {figures}</tr>",
            id = r.id,
            table = escape(&s.table),
            name = escape(&r.name),
            figures = region_figures(r),
        );
    }
    h.push_str("</table></section>");
}

/// `/metrics` for `s`: the engine's and the regions' metrics of `basalt serve`, the RPC
/// counters, and whether the server serves.
pub(crate) fn metrics(s: &RegionServerStatus, refused: u64) -> prometheus::Result<String> {
    let r = Registry::new();
    if let Some(e) = &s.engine {
        register_engine(&r, e)?;
    }
    register_regions(&r, s.regions.iter().map(|x| (x.table.as_str(), &x.region)))?;
    if let Some(rpc) = &s.rpc {
        let counters = [
            (
                "basalt_rpc_requests_total",
                "RPC calls answered",
                rpc.requests,
            ),
            (
                "basalt_rpc_errors_total",
                "RPC calls answered with an error",
                rpc.errors,
            ),
            ("basalt_rpc_scans_total", "Scans opened", rpc.scans),
        ];
        for (name, help, v) in counters {
            r.register(Box::new(int_counter(name, help, v)?))?;
        }
        r.register(Box::new(int_gauge(
            "basalt_rpc_open_scans",
            "Scans running now",
            rpc.open_scans,
        )?))?;
    }
    let gauges = [
        (
            "basalt_regionserver_serving",
            "1 while the server serves under a live lease",
            u64::from(s.life.is_some()),
        ),
        (
            "basalt_regionserver_regions",
            "Regions the server serves",
            s.regions.len() as u64,
        ),
    ];
    for (name, help, v) in gauges {
        r.register(Box::new(int_gauge(name, help, v)?))?;
    }
    register_process(&r, s.uptime_secs, refused)?;
    encode(&r)
}
