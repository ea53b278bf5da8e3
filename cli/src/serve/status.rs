//! What the status page, its JSON (`/status.json`) and the metrics scrape show: one
//! [`Status`] gathered from the engine (or, for a gateway in front of a cluster, from the
//! region servers through the client) at request time. Tables with their families and
//! settings; per table its regions in key order with the figures of HBase's region table
//! (name, start and end key, store files, size on disk, MemStore size, read and write
//! requests) and each region's share of the table's writes; its coprocessors with calls,
//! errors and latency; its indexes with their state; and the engine's and the gateway's
//! counters.
//!
//! Over a cluster the regions' figures come from their servers (`Admin::regions` through
//! the RPC), with the server of each region and the cluster's master and live servers
//! (`ClusterAdmin`); what only the engine in this process counts (the engine's counters,
//! coprocessor calls and latency, plugin statistics) is absent: `null` in the JSON, `-` on
//! the page, left out of the metrics.
//!
//! Invariants: regions are listed in key order; write shares are in 0..=1 and sum to 1 over
//! a table that took writes since the server started (all 0 otherwise). Gathering only
//! reads: it never flushes or otherwise changes the directory.

use super::state::State;
use crate::datadir::ClusterAddress;
use crate::error::ToolError;
use crate::shell::{family_settings, show_name};
use basalt_cluster::ClusterAdmin;
use basalt_core::client::report::key_to_string;
use basalt_core::client::Backend;
use basalt_core::{EngineStats, TableDescriptor};
use basalt_index::IndexState;
use serde::Serialize;
use std::collections::HashMap;

/// Everything the status page shows.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Basalt's version.
    pub version: &'static str,
    /// The data directory served (`None` for a gateway in front of a cluster).
    pub data_dir: Option<String>,
    /// The cluster served (`None` for a data directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterInfo>,
    /// Where the Thrift service listens.
    pub thrift_address: String,
    /// Seconds since the server started.
    pub uptime_secs: u64,
    /// The engine's counters since it opened (`None` over a cluster: each region server
    /// keeps its own).
    #[serde(serialize_with = "engine_json")]
    pub engine: Option<EngineStats>,
    /// The gateway's connections, scanners and requests.
    pub gateway: GatewayCounters,
    /// Every table, in the catalog's order.
    pub tables: Vec<TableStatus>,
}

/// The cluster a gateway serves: where it is, and its state as the shell's `status` shows
/// it.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterInfo {
    /// etcd's members, as given.
    pub etcd: Vec<String>,
    /// The prefix of the cluster's keys in etcd.
    pub prefix: String,
    /// The master's process name, if one is elected.
    pub master: Option<String>,
    /// Whether the balancer is on.
    pub balancer_on: bool,
    /// Regions not served where they are assigned (moving, or waiting for a server).
    pub regions_in_transition: usize,
    /// The live region servers.
    pub servers: Vec<ServerInfo>,
}

/// One live region server.
#[derive(Debug, Clone, Serialize)]
pub struct ServerInfo {
    /// Its name.
    pub name: String,
    /// Where its RPC service listens.
    pub rpc_address: String,
    /// Regions the master assigned to it.
    pub assigned: usize,
    /// Regions it serves now.
    pub serving: usize,
}

/// The cluster of `at`, as its `admin` sees it now.
async fn cluster_info(at: &ClusterAddress, admin: &ClusterAdmin) -> Result<ClusterInfo, ToolError> {
    let s = admin.status().await?;
    Ok(ClusterInfo {
        etcd: at.etcd.clone(),
        prefix: at.prefix.clone(),
        master: s.master,
        balancer_on: s.balancer_on,
        regions_in_transition: s.in_transition.len(),
        servers: s
            .servers
            .into_iter()
            .map(|v| ServerInfo {
                name: v.name,
                rpc_address: v.rpc_address,
                assigned: v.assigned,
                serving: v.serving,
            })
            .collect(),
    })
}

/// [`EngineStats`] as the JSON shows it: an object of its counters by their field names
/// (core's type does not derive `Serialize`), or `null` when absent.
pub(crate) fn engine_json<S: serde::Serializer>(
    e: &Option<EngineStats>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let Some(e) = e else {
        return s.serialize_none();
    };
    let fields = [
        ("flushes", e.flushes),
        ("compactions", e.compactions),
        ("wal_syncs", e.wal_syncs),
        ("wal_bytes", e.wal_bytes),
        ("block_cache_hits", e.block_cache_hits),
        ("block_cache_misses", e.block_cache_misses),
        ("block_cache_bytes", e.block_cache_bytes),
        ("block_cache_capacity", e.block_cache_capacity),
        ("memstore_bytes", e.memstore_bytes),
        ("memstore_blocked_writes", e.memstore_blocked_writes),
    ];
    let mut st = s.serialize_struct("EngineStats", fields.len())?;
    for (name, value) in fields {
        st.serialize_field(name, &value)?;
    }
    st.end()
}

/// The gateway's own counters.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct GatewayCounters {
    /// Connections open now.
    pub connections: u64,
    /// Scanners open now.
    pub open_scanners: u64,
    /// Requests served since start (every method).
    pub requests: u64,
    /// Of those, requests answered with an exception.
    pub errors: u64,
    /// Connections closed when accepted, the bound reached (Thrift and info port).
    pub refused_connections: u64,
    /// Thrift connections closed for sending no complete request in time.
    pub timed_out_connections: u64,
}

/// One table.
#[derive(Debug, Clone, Serialize)]
pub struct TableStatus {
    /// The name as HBase prints it (the qualifier alone in the default namespace).
    pub name: String,
    /// False when disabled.
    pub enabled: bool,
    /// Salt buckets, for a salted table.
    pub salt_buckets: Option<u32>,
    /// Coprocessors the table lists that this server lacks (then it is read-only here).
    pub missing_coprocessors: Vec<String>,
    /// Its column families.
    pub families: Vec<FamilyStatus>,
    /// Its regions in key order.
    pub regions: Vec<RegionStatus>,
    /// Its coprocessors in run order.
    pub coprocessors: Vec<CoprocessorStatus>,
    /// Its secondary indexes.
    pub indexes: Vec<IndexStatus>,
}

/// One column family.
#[derive(Debug, Clone, Serialize)]
pub struct FamilyStatus {
    /// The family's name (`Bytes.toStringBinary`).
    pub name: String,
    /// Versions kept.
    pub versions: u32,
    /// Time to live in seconds (`None`: forever).
    pub ttl_secs: Option<u64>,
    /// Every setting as HBase's `describe` prints it.
    pub settings: String,
}

/// One region: the columns of HBase's region table.
#[derive(Debug, Clone, Serialize)]
pub struct RegionStatus {
    /// `table,start key,id`.
    pub name: String,
    /// The region id.
    pub id: u64,
    /// Inclusive start key (`Bytes.toStringBinary`; empty: the table's start).
    pub start_key: String,
    /// Exclusive end key (empty: the table's end).
    pub end_key: String,
    /// Store files.
    pub store_files: usize,
    /// Bytes of its store files on disk.
    pub store_file_bytes: u64,
    /// Bytes in its MemStores.
    pub memstore_bytes: u64,
    /// Reads served since the server started.
    pub read_requests: u64,
    /// Writes served since the server started.
    pub write_requests: u64,
    /// Its share of the table's writes since start (0..=1).
    pub write_share: f64,
    /// The region server serving it (over a cluster; absent from the JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

impl RegionStatus {
    /// The status of region `r` of the table HBase prints as `table`, with its share of
    /// the table's writes.
    pub(crate) fn of(table: &str, r: &basalt_core::RegionInfo, write_share: f64) -> Self {
        RegionStatus {
            name: format!("{},{},{}", table, key_to_string(&r.start_key), r.id),
            id: r.id,
            start_key: key_to_string(&r.start_key),
            end_key: key_to_string(&r.end_key),
            store_files: r.store_files,
            store_file_bytes: r.store_file_size,
            memstore_bytes: r.memstore_size,
            read_requests: r.read_requests,
            write_requests: r.write_requests,
            write_share,
            server: None,
        }
    }
}

/// One coprocessor of a table.
#[derive(Debug, Clone, Serialize)]
pub struct CoprocessorStatus {
    /// The registered name.
    pub name: String,
    /// Its priority (lower runs first).
    pub priority: u32,
    /// `LOADED`, `UNLOADED` (by its failure policy), `MISSING` (this server lacks it),
    /// `NOT RUN` (the table is read-only here) or, over a cluster, `REMOTE` (run by the
    /// region servers, which keep its state and counters).
    pub state: &'static str,
    /// Hook calls (`None` over a cluster).
    pub calls: Option<u64>,
    /// Hook calls that failed, refusals and faults (`None` over a cluster).
    pub errors: Option<u64>,
    /// Mean latency of a call in microseconds (`None` before the first call, or over a
    /// cluster).
    pub mean_latency_micros: Option<f64>,
    /// Time spent in its hooks, in seconds (`None` over a cluster).
    pub total_latency_secs: Option<f64>,
    /// A plugin's 99th-percentile call latency in microseconds (`None` for a native
    /// coprocessor, or before the first call).
    pub p99_latency_micros: Option<f64>,
    /// The largest memory one of a plugin's instances reached, in bytes (`None` for a
    /// native coprocessor).
    pub memory_bytes: Option<u64>,
}

/// One secondary index.
#[derive(Debug, Clone, Serialize)]
pub struct IndexStatus {
    /// The index name.
    pub name: String,
    /// Indexed columns (`f:q`, `DESC` when descending).
    pub columns: Vec<String>,
    /// Covered columns.
    pub covered: Vec<String>,
    /// Unique index.
    pub unique: bool,
    /// `ACTIVE` or `BUILDING`.
    pub state: &'static str,
}

fn column_text(family: &[u8], qualifier: &[u8]) -> String {
    format!("{}:{}", key_to_string(family), key_to_string(qualifier))
}

/// Each value's share of their sum (all 0 when the sum is 0).
pub(crate) fn shares(values: &[u64]) -> Vec<f64> {
    let total: u64 = values.iter().sum();
    values
        .iter()
        .map(|&v| {
            if total == 0 {
                0.0
            } else {
                v as f64 / total as f64
            }
        })
        .collect()
}

/// Gathers the status of the server over `state`.
pub(crate) async fn gather<B: Backend>(state: &State<B>) -> Result<Status, ToolError> {
    let data = &state.data;
    let admin = data.conn.admin();
    let mut tables = Vec::new();
    for d in admin.list_tables().await? {
        tables.push(table_status(state, d).await?);
    }
    let cluster = match (data.cluster(), data.cluster_admin()) {
        (Some(at), Some(admin)) => Some(cluster_info(at, admin).await?),
        _ => None,
    };
    let metrics = &state.metrics;
    Ok(Status {
        version: env!("CARGO_PKG_VERSION"),
        data_dir: state.dir.clone(),
        cluster,
        thrift_address: format!("{}:{}", state.host, state.port),
        uptime_secs: metrics.started.elapsed().as_secs(),
        engine: data.embedded().map(|e| e.conn.engine().stats()),
        gateway: GatewayCounters {
            connections: u64::try_from(metrics.connections.get()).unwrap_or(0),
            open_scanners: state.scanners.len() as u64,
            requests: metrics.requests_served(),
            errors: metrics.errors_answered(),
            refused_connections: metrics.refused_connections(),
            timed_out_connections: metrics.timed_out.get(),
        },
        tables,
    })
}

async fn table_status<B: Backend>(
    state: &State<B>,
    d: TableDescriptor,
) -> Result<TableStatus, ToolError> {
    let data = &state.data;
    let admin = data.conn.admin();
    let name = d.name.clone();
    let enabled = admin.is_table_enabled(name.clone()).await?;
    let regions = admin.regions(name.clone()).await?;
    let servers: HashMap<u64, String> = match data.cluster_admin() {
        Some(cluster) => cluster
            .regions(Some(&name))
            .await?
            .into_iter()
            .filter_map(|p| p.serving.map(|s| (p.key.region, s)))
            .collect(),
        None => HashMap::new(),
    };
    let writes: Vec<u64> = regions.iter().map(|r| r.write_requests).collect();
    let shown = show_name(&name);
    let regions = regions
        .iter()
        .zip(shares(&writes))
        .map(|(r, share)| RegionStatus {
            server: servers.get(&r.id).cloned(),
            ..RegionStatus::of(&shown, r, share)
        })
        .collect();
    let missing = data.coprocessors.missing(&d);
    let local = data.embedded();
    let metrics = match local {
        Some(_) => data.coprocessors.metrics(&name),
        None => Vec::new(),
    };
    let full_name = name.to_string();
    let plugin_stats: Vec<_> = local
        .map(|e| e.plugin_host.plugin_stats())
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.table == full_name)
        .collect();
    let coprocessors = d
        .coprocessors
        .iter()
        .map(|cp| {
            let m = metrics.iter().find(|m| m.name == cp.name);
            let plugin = plugin_stats.iter().find(|p| p.name == cp.name);
            let state = if missing.contains(&cp.name) {
                "MISSING"
            } else if !missing.is_empty() {
                "NOT RUN"
            } else if local.is_none() {
                "REMOTE"
            } else if m.is_some_and(|m| !m.loaded) {
                "UNLOADED"
            } else {
                "LOADED"
            };
            let counted = local.map(|_| {
                m.map_or((0, 0, 0.0), |m| {
                    (m.calls, m.errors, m.total_latency.as_secs_f64())
                })
            });
            CoprocessorStatus {
                name: cp.name.clone(),
                priority: cp.priority,
                state,
                calls: counted.map(|(calls, _, _)| calls),
                errors: counted.map(|(_, errors, _)| errors),
                mean_latency_micros: counted
                    .filter(|(calls, _, _)| *calls > 0)
                    .map(|(calls, _, total)| total * 1e6 / calls as f64),
                total_latency_secs: counted.map(|(_, _, total)| total),
                p99_latency_micros: plugin.and_then(|p| p.p99).map(|d| d.as_secs_f64() * 1e6),
                memory_bytes: plugin.map(|p| p.memory_bytes),
            }
        })
        .collect();
    let indexes = data
        .index_admin()
        .list(name.clone())
        .await?
        .into_iter()
        .map(|i| IndexStatus {
            columns: i
                .columns
                .iter()
                .map(|(c, o)| {
                    let t = column_text(&c.family, &c.qualifier);
                    if *o == basalt_core::keys::Order::Desc {
                        format!("{t} DESC")
                    } else {
                        t
                    }
                })
                .collect(),
            covered: i
                .covered
                .iter()
                .map(|c| column_text(&c.family, &c.qualifier))
                .collect(),
            unique: i.unique,
            state: match i.state {
                IndexState::Active => "ACTIVE",
                IndexState::Building => "BUILDING",
                IndexState::Dropping => "DROPPING",
            },
            name: i.name,
        })
        .collect();
    Ok(TableStatus {
        name: show_name(&name),
        enabled,
        salt_buckets: d.salt.as_ref().map(|s| s.buckets),
        missing_coprocessors: missing,
        families: d
            .families
            .iter()
            .map(|f| FamilyStatus {
                name: key_to_string(&f.name),
                versions: f.max_versions,
                ttl_secs: f.ttl_secs,
                settings: family_settings(f),
            })
            .collect(),
        regions,
        coprocessors,
        indexes,
    })
}

#[cfg(test)]
mod tests {
    use super::shares;

    #[test]
    fn write_shares_sum_to_one_or_are_all_zero() {
        assert_eq!(shares(&[1, 3]), vec![0.25, 0.75]);
        assert_eq!(shares(&[0, 0]), vec![0.0, 0.0]);
        assert!(shares(&[]).is_empty());
    }
}
