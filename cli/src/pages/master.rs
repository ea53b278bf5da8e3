//! The master's page, its JSON and its `/metrics`, as HBase's master UI shows a cluster:
//! whether this process is the active master (or a backup, naming the active one), the
//! balancer, the live region servers with their regions (assigned and served), requests
//! per second and since start (from each server's RPC counters, `Request::ServerLoad`),
//! the procedures in flight (regions in transition: assigned where they are not served
//! yet; and operators' move requests the master has not acted on), and where every
//! region is.
//!
//! Invariants: everything is read from etcd and the servers at request time or by the
//! sampler (never written); a server that does not answer its load in time is listed
//! with no figures, not left out; every text from the cluster is HTML-escaped; server rows
//! carry `data-server`, region rows `data-region`.

use super::rates::Rates;
use crate::serve::page::{duration, escape, key_cell, STYLE};
use crate::serve::scrape::{encode, int_gauge, register_process};
use crate::shell::show_name;
use basalt_cluster::rpc::client::RpcClient;
use basalt_cluster::rpc::messages::ServerLoad;
use basalt_cluster::{ClusterAdmin, ClusterStatus, ServerStatus};
use basalt_core::client::report::key_to_string;
use basalt_core::Result;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the page waits for a server's load.
pub const LOAD_DEADLINE: Duration = Duration::from_secs(1);

/// What the master's pages read: the cluster through etcd, and the servers' loads.
pub(crate) struct MasterPage {
    /// This process's name (a master candidate's, or a region server's).
    pub(crate) process: String,
    /// etcd's members, as given.
    pub(crate) etcd: Vec<String>,
    /// The prefix of the cluster's keys.
    pub(crate) prefix: String,
    /// The cluster's state.
    pub(crate) admin: ClusterAdmin,
    /// When the process started.
    pub(crate) started: Instant,
    /// Each server's requests per second.
    pub(crate) rates: Rates,
    /// A client per server address (channels kept between samples).
    pub(crate) clients: Mutex<HashMap<String, RpcClient>>,
    /// Info connections refused for the bound.
    pub(crate) refused: AtomicU64,
}

/// Everything the master's page shows.
#[derive(Debug, Clone, Serialize)]
pub struct MasterStatus {
    /// Basalt's version.
    pub version: &'static str,
    /// The process serving the page.
    pub process: String,
    /// Whether that process is the active master.
    pub active: bool,
    /// The active master, if one is elected.
    pub master: Option<String>,
    /// etcd's members.
    pub etcd: Vec<String>,
    /// The prefix of the cluster's keys.
    pub prefix: String,
    /// Seconds since the process started.
    pub uptime_secs: u64,
    /// Whether the balancer is on.
    pub balancer_on: bool,
    /// Regions the catalog lists.
    pub regions: usize,
    /// Regions in transition, pending move requests, and split and merge procedures
    /// not finished.
    pub procedures_in_flight: usize,
    /// Regions assigned where they are not served (yet), or not assigned.
    pub regions_in_transition: Vec<RegionPlace>,
    /// Move requests the master has not acted on.
    pub pending_moves: Vec<PendingMove>,
    /// Split and merge procedures not finished.
    pub splits_and_merges: Vec<SplitOrMerge>,
    /// The live region servers.
    pub servers: Vec<ServerRow>,
    /// Every region, by table then key, with where it is.
    pub placements: Vec<RegionPlace>,
}

/// A split or merge procedure the master runs.
#[derive(Debug, Clone, Serialize)]
pub struct SplitOrMerge {
    /// `split_region`, `merge_regions`, `create_table` or `delete_table`.
    pub kind: &'static str,
    /// Its table.
    pub table: String,
    /// The regions it acts on.
    pub regions: Vec<u64>,
    /// `requested` or `running`.
    pub state: &'static str,
}

/// One live region server.
#[derive(Debug, Clone, Serialize)]
pub struct ServerRow {
    /// Its name.
    pub name: String,
    /// Where its RPC service listens.
    pub rpc_address: String,
    /// Its status page (`None`: it serves none).
    pub info_url: Option<String>,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// Regions assigned to it.
    pub assigned: usize,
    /// Regions it serves now.
    pub serving: usize,
    /// RPC calls it answered since it started (`None`: it did not answer in time).
    pub requests: Option<u64>,
    /// Of those, errors.
    pub errors: Option<u64>,
    /// Requests per second lately (`None` until two samples a second apart).
    pub requests_per_sec: Option<f64>,
}

/// A region and where it is.
#[derive(Debug, Clone, Serialize)]
pub struct RegionPlace {
    /// Its table, as HBase prints it.
    pub table: String,
    /// Its id.
    pub region: u64,
    /// Its start key (empty: the table's start).
    pub start_key: String,
    /// Its end key (empty: the table's end).
    pub end_key: String,
    /// The server the master assigned it to.
    pub assigned: Option<String>,
    /// The server serving it now.
    pub serving: Option<String>,
}

/// A move request the master has not acted on.
#[derive(Debug, Clone, Serialize)]
pub struct PendingMove {
    /// The region's table.
    pub table: String,
    /// The region.
    pub region: u64,
    /// The server asked for (`None`: any other).
    pub target: Option<String>,
}

impl MasterPage {
    /// A client of the server at `address`, made once.
    fn client(&self, address: &str) -> Result<RpcClient> {
        let mut clients = self
            .clients
            .lock()
            .map_err(|_| basalt_core::Error::Busy("the page's clients are poisoned".into()))?;
        if let Some(c) = clients.get(address) {
            return Ok(c.clone());
        }
        let c = RpcClient::new(address)?;
        clients.insert(address.to_string(), c.clone());
        Ok(c)
    }

    /// Each live server's load (in parallel, [`LOAD_DEADLINE`] each), its rate recorded
    /// (a series per server life: a restarted server starts a new one); servers gone are
    /// forgotten.
    async fn loads(&self, status: &ClusterStatus) -> HashMap<String, (ServerLoad, Option<f64>)> {
        let series = |s: &ServerStatus| format!("{}@{}", s.name, s.started_ms);
        let asks = status.servers.iter().map(|s| async move {
            let load = match self.client(&s.rpc_address) {
                Ok(c) => c.server_load(LOAD_DEADLINE).await,
                Err(e) => Err(e),
            };
            (s, load, Instant::now())
        });
        let mut out = HashMap::new();
        for (s, load, at) in futures::future::join_all(asks).await {
            match load {
                Ok(load) => {
                    let rate = self.rates.observe(&series(s), load.requests, at);
                    out.insert(s.name.clone(), (load, rate));
                }
                Err(e) => tracing::debug!(server = %s.name, error = %e, "no load"),
            }
        }
        self.rates
            .retain(|k| status.servers.iter().any(|s| series(s) == k));
        if let Ok(mut clients) = self.clients.lock() {
            clients.retain(|a, _| status.servers.iter().any(|s| s.rpc_address == *a));
        }
        out
    }
}

/// Samples every live server's load for its rate.
pub(crate) async fn sample(page: &MasterPage) {
    if let Ok(status) = page.admin.status().await {
        page.loads(&status).await;
    }
}

/// The page of a server at `rpc_address` whose info port is `port`.
fn info_url(rpc_address: &str, port: u16) -> Option<String> {
    if port == 0 {
        return None;
    }
    let host = rpc_address.rsplit_once(':').map_or(rpc_address, |(h, _)| h);
    Some(format!("http://{host}:{port}/"))
}

/// The cluster as `page` reads it now.
pub(crate) async fn gather(page: &MasterPage) -> Result<MasterStatus> {
    let status = page.admin.status().await?;
    let placements = page.admin.regions(None).await?;
    let moves = page.admin.pending_moves().await?;
    let splits_and_merges: Vec<SplitOrMerge> = page
        .admin
        .procedures()
        .await?
        .into_iter()
        .filter(|p| matches!(p.state, "requested" | "running"))
        .map(|p| SplitOrMerge {
            kind: p.kind,
            table: show_name(&p.table),
            regions: p.regions,
            state: p.state,
        })
        .collect();
    let loads = page.loads(&status).await;
    let row = |p: &basalt_cluster::RegionPlacement| RegionPlace {
        table: show_name(&p.key.table),
        region: p.key.region,
        start_key: key_to_string(&p.start),
        end_key: key_to_string(&p.end),
        assigned: p.assigned.clone(),
        serving: p.serving.clone(),
    };
    let in_transition: Vec<RegionPlace> = placements
        .iter()
        .filter(|p| status.in_transition.contains(&p.key))
        .map(row)
        .collect();
    let pending_moves: Vec<PendingMove> = moves
        .into_iter()
        .map(|(key, target)| PendingMove {
            table: show_name(&key.table),
            region: key.region,
            target,
        })
        .collect();
    let servers = status
        .servers
        .iter()
        .map(|s| {
            let load = loads.get(&s.name);
            ServerRow {
                name: s.name.clone(),
                rpc_address: s.rpc_address.clone(),
                info_url: info_url(&s.rpc_address, s.info_port),
                started_ms: s.started_ms,
                assigned: s.assigned,
                serving: s.serving,
                requests: load.map(|(l, _)| l.requests),
                errors: load.map(|(l, _)| l.errors),
                requests_per_sec: load.and_then(|(_, r)| *r),
            }
        })
        .collect();
    Ok(MasterStatus {
        version: env!("CARGO_PKG_VERSION"),
        process: page.process.clone(),
        active: status.master.as_deref() == Some(page.process.as_str()),
        master: status.master.clone(),
        etcd: page.etcd.clone(),
        prefix: page.prefix.clone(),
        uptime_secs: page.started.elapsed().as_secs(),
        balancer_on: status.balancer_on,
        regions: status.regions,
        procedures_in_flight: in_transition.len() + pending_moves.len() + splits_and_merges.len(),
        regions_in_transition: in_transition,
        pending_moves,
        splits_and_merges,
        servers,
        placements: placements.iter().map(row).collect(),
    })
}

/// The servers' requests per second together, `None` while no server has a rate yet (a sum
/// of no floats is -0.0, which the page showed).
fn total_rate(servers: &[ServerRow]) -> Option<f64> {
    servers
        .iter()
        .filter_map(|v| v.requests_per_sec)
        .fold(None, |sum, r| Some(sum.unwrap_or(0.0) + r))
}

fn or_dash(v: &Option<String>) -> String {
    v.as_deref().map_or_else(
        || "<span class=\"muted\">-</span>".to_string(),
        |s| format!("<code>{}</code>", escape(s)),
    )
}

/// The page for `s`, its JSON at `json` and its metrics at `metrics` (when served).
pub(crate) fn render(s: &MasterStatus, json: &str, metrics: Option<&str>) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let role = match (&s.master, s.active) {
        (_, true) => "the active master".to_string(),
        (Some(m), false) => format!("not the master: the active master is {m}"),
        (None, false) => "no master is elected".to_string(),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Basalt master {process}</title><style>{STYLE}</style></head><body>\
         <header><h1>Master <code>{process}</code></h1><p>Basalt {version} · {role} · \
         etcd <code>{etcd}</code> (prefix <code>{prefix}</code>) · up {up} · \
         <a href=\"{json}\">JSON</a>{metrics}</p></header><main>",
        json = escape(json),
        metrics = metrics.map_or_else(String::new, |m| {
            format!(" · <a href=\"{}\">metrics</a>", escape(m))
        }),
        process = escape(&s.process),
        version = escape(s.version),
        role = escape(&role),
        etcd = escape(&s.etcd.join(",")),
        prefix = escape(&s.prefix),
        up = duration(s.uptime_secs),
    );
    let rate = total_rate(&s.servers).map_or_else(
        || "<span class=\"muted\">-</span>".to_string(),
        |r| format!("{r:.1}"),
    );
    let _ = write!(
        h,
        "<section id=\"summary\"><h2>Cluster</h2><table class=\"kv\">\
         <tr><td>Master</td><td>{master}</td></tr>\
         <tr><td>Region servers</td><td>{servers}</td></tr>\
         <tr><td>Regions</td><td>{regions}</td></tr>\
         <tr><td>Requests per second</td><td>{rate}</td></tr>\
         <tr><td>Procedures in flight</td><td id=\"procedures\">{procs}</td></tr>\
         <tr><td>Balancer</td><td>{balancer}</td></tr></table></section>",
        master = or_dash(&s.master),
        servers = s.servers.len(),
        regions = s.regions,
        procs = s.procedures_in_flight,
        balancer = if s.balancer_on { "on" } else { "off" },
    );
    servers_section(&mut h, s);
    procedures_section(&mut h, s);
    regions_section(&mut h, &s.placements);
    h.push_str("</main></body></html>\n");
    h
}

fn servers_section(h: &mut String, s: &MasterStatus) {
    h.push_str(
        "<section id=\"servers\"><h2>Region servers</h2><table><tr><th>Server</th>\
         <th>RPC address</th><th class=\"num\">Regions assigned</th>\
         <th class=\"num\">Serving</th><th class=\"num\">Requests per second</th>\
         <th class=\"num\">Requests</th><th class=\"num\">Errors</th></tr>",
    );
    if s.servers.is_empty() {
        h.push_str("<tr><td colspan=\"7\" class=\"muted\">no live region server</td></tr>");
    }
    let num = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for v in &s.servers {
        let name = match &v.info_url {
            Some(url) => format!(
                "<a href=\"{}\"><code>{}</code></a>",
                escape(url),
                escape(&v.name)
            ),
            None => format!("<code>{}</code>", escape(&v.name)),
        };
        let _ = write!(
            h,
            "<tr class=\"server\" data-server=\"{id}\"><td>{name}</td><td>{rpc}</td>\
             <td class=\"num\">{assigned}</td><td class=\"num\">{serving}</td>\
             <td class=\"num rate\">{rate}</td><td class=\"num\">{requests}</td>\
             <td class=\"num\">{errors}</td></tr>",
            id = escape(&v.name),
            rpc = escape(&v.rpc_address),
            assigned = v.assigned,
            serving = v.serving,
            rate = v
                .requests_per_sec
                .map_or_else(|| "-".to_string(), |r| format!("{r:.1}")),
            requests = num(v.requests),
            errors = num(v.errors),
        );
    }
    h.push_str("</table></section>");
}

fn procedures_section(h: &mut String, s: &MasterStatus) {
    h.push_str(
        "<section id=\"in-flight\"><h2>Procedures in flight</h2><table><tr>\
         <th>Procedure</th><th>Table</th><th class=\"num\">Region</th><th>From</th>\
         <th>To</th></tr>",
    );
    if s.procedures_in_flight == 0 {
        h.push_str("<tr><td colspan=\"5\" class=\"muted\">none: every region is served where it is assigned</td></tr>");
    }
    for r in &s.regions_in_transition {
        let _ = write!(
            h,
            "<tr class=\"procedure\"><td>assign</td><td>{}</td><td class=\"num\">{}</td>\
             <td>{}</td><td>{}</td></tr>",
            escape(&r.table),
            r.region,
            or_dash(&r.serving),
            or_dash(&r.assigned),
        );
    }
    for p in &s.splits_and_merges {
        let regions: Vec<String> = p.regions.iter().map(u64::to_string).collect();
        let _ = write!(
            h,
            "<tr class=\"procedure\"><td>{} ({})</td><td>{}</td>\
             <td class=\"num\">{}</td><td></td><td></td></tr>",
            p.kind,
            p.state,
            escape(&p.table),
            regions.join(", "),
        );
    }
    for m in &s.pending_moves {
        let _ = write!(
            h,
            "<tr class=\"procedure\"><td>move (requested)</td><td>{}</td>\
             <td class=\"num\">{}</td><td></td><td>{}</td></tr>",
            escape(&m.table),
            m.region,
            m.target
                .as_deref()
                .map_or_else(|| "any other server".to_string(), escape),
        );
    }
    h.push_str("</table></section>");
}

fn regions_section(h: &mut String, placements: &[RegionPlace]) {
    h.push_str(
        "<section id=\"regions\"><h2>Regions</h2><table><tr><th>Table</th>\
         <th class=\"num\">Region</th><th>Start key</th><th>End key</th>\
         <th>Assigned to</th><th>Served by</th></tr>",
    );
    if placements.is_empty() {
        h.push_str("<tr><td colspan=\"6\" class=\"muted\">no region</td></tr>");
    }
    for r in placements {
        let _ = write!(
            h,
            "<tr class=\"region\" data-region=\"{id}\"><td>{table}</td><td class=\"num\">{id}</td>\
             <td>{start}</td><td>{end}</td><td>{assigned}</td><td>{serving}</td></tr>",
            id = r.region,
            table = escape(&r.table),
            start = key_cell(&r.start_key, "(start)"),
            end = key_cell(&r.end_key, "(end)"),
            assigned = or_dash(&r.assigned),
            serving = or_dash(&r.serving),
        );
    }
    h.push_str("</table></section>");
}

/// `/metrics` for `s`: the cluster's gauges and each server's figures.
pub(crate) fn metrics(s: &MasterStatus, refused: u64) -> prometheus::Result<String> {
    let r = Registry::new();
    let gauges = [
        (
            "basalt_master_active",
            "1 when this process is the active master",
            u64::from(s.active),
        ),
        (
            "basalt_cluster_live_servers",
            "Live region servers",
            s.servers.len() as u64,
        ),
        (
            "basalt_cluster_regions",
            "Regions of the catalog",
            s.regions as u64,
        ),
        (
            "basalt_cluster_regions_in_transition",
            "Regions not served where they are assigned",
            s.regions_in_transition.len() as u64,
        ),
        (
            "basalt_cluster_pending_moves",
            "Move requests the master has not acted on",
            s.pending_moves.len() as u64,
        ),
        (
            "basalt_cluster_balancer_on",
            "1 when the balancer is on",
            u64::from(s.balancer_on),
        ),
    ];
    for (name, help, v) in gauges {
        r.register(Box::new(int_gauge(name, help, v)?))?;
    }
    let labels = &["server"];
    let serving = IntGaugeVec::new(
        Opts::new("basalt_server_regions", "Regions a server serves"),
        labels,
    )?;
    let requests = IntCounterVec::new(
        Opts::new(
            "basalt_server_requests_total",
            "RPC calls a server answered since it started",
        ),
        labels,
    )?;
    let rate = GaugeVec::new(
        Opts::new(
            "basalt_server_requests_per_second",
            "A server's RPC calls per second lately",
        ),
        labels,
    )?;
    for v in &s.servers {
        let l = [v.name.as_str()];
        serving
            .with_label_values(&l)
            .set(i64::try_from(v.serving).unwrap_or(i64::MAX));
        if let Some(n) = v.requests {
            requests.with_label_values(&l).inc_by(n);
        }
        if let Some(per_sec) = v.requests_per_sec {
            rate.with_label_values(&l).set(per_sec);
        }
    }
    r.register(Box::new(serving))?;
    r.register(Box::new(requests))?;
    r.register(Box::new(rate))?;
    register_process(&r, s.uptime_secs, refused)?;
    encode(&r)
}

#[cfg(test)]
mod tests {
    use super::{info_url, total_rate, ServerRow};

    fn server(rate: Option<f64>) -> ServerRow {
        ServerRow {
            name: "rs".into(),
            rpc_address: "127.0.0.1:1".into(),
            info_url: None,
            started_ms: 0,
            assigned: 0,
            serving: 0,
            requests: None,
            errors: None,
            requests_per_sec: rate,
        }
    }

    #[test]
    fn the_total_rate_is_unknown_until_a_server_has_one() {
        assert_eq!(total_rate(&[]), None);
        assert_eq!(total_rate(&[server(None), server(None)]), None);
        let idle = total_rate(&[server(None), server(Some(0.0))]);
        assert_eq!(idle.map(|r| format!("{r:.1}")).as_deref(), Some("0.0"));
        assert_eq!(
            total_rate(&[server(Some(1.5)), server(Some(2.0))]),
            Some(3.5)
        );
    }

    #[test]
    fn a_server_page_is_on_its_rpc_host() {
        assert_eq!(
            info_url("10.0.0.2:16020", 16030).as_deref(),
            Some("http://10.0.0.2:16030/")
        );
        assert_eq!(
            info_url("[::1]:16020", 8080).as_deref(),
            Some("http://[::1]:8080/")
        );
        assert_eq!(info_url("127.0.0.1:1", 0), None);
    }
}
