//! `/metrics` in Prometheus' text format (the `prometheus` crate's registry and encoder).
//!
//! Two sources. The gateway's own instruments ([`GatewayMetrics`]) live for the server's
//! life. The engine's figures (flushes, compactions, WAL syncs and bytes, block cache hits
//! and misses, MemStore bytes; per region its requests, MemStore and store files; per
//! coprocessor its calls, errors and time) are counters the engine keeps itself, read at
//! scrape time from a [`Status`] into a registry built for that scrape. A gateway in front
//! of a cluster has the regions' figures (from their servers) and not the engine's nor the
//! coprocessors' (each region server keeps its own): those are left out.
//!
//! Invariant: a scrape only reads; the registry of the engine's figures is built anew each
//! time, so a region or table gone is gone from the next scrape.

use super::metrics::GatewayMetrics;
use super::status::{RegionStatus, Status};
use basalt_core::EngineStats;
use prometheus::{
    Counter, CounterVec, Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

pub(crate) fn int_counter(name: &str, help: &str, value: u64) -> prometheus::Result<IntCounter> {
    let c = IntCounter::new(name, help)?;
    c.inc_by(value);
    Ok(c)
}

pub(crate) fn int_gauge(name: &str, help: &str, value: u64) -> prometheus::Result<IntGauge> {
    let g = IntGauge::new(name, help)?;
    g.set(i64::try_from(value).unwrap_or(i64::MAX));
    Ok(g)
}

/// The engine's counters of `e` in `r` (absent over a cluster: each region server keeps
/// its own).
pub(crate) fn register_engine(r: &Registry, e: &EngineStats) -> prometheus::Result<()> {
    let counters = [
        (
            "basalt_flushes_total",
            "Region flushes that wrote store files",
            e.flushes,
        ),
        (
            "basalt_compactions_total",
            "Store compactions committed",
            e.compactions,
        ),
        (
            "basalt_wal_syncs_total",
            "WAL fsyncs (group commits, background syncs, rolls)",
            e.wal_syncs,
        ),
        (
            "basalt_wal_written_bytes_total",
            "Bytes of WAL records written",
            e.wal_bytes,
        ),
        (
            "basalt_block_cache_hits_total",
            "Block reads the block cache served",
            e.block_cache_hits,
        ),
        (
            "basalt_block_cache_misses_total",
            "Block reads that went to the file",
            e.block_cache_misses,
        ),
        (
            "basalt_memstore_blocked_writes_total",
            "Writes that waited for the global MemStore budget",
            e.memstore_blocked_writes,
        ),
    ];
    for (name, help, v) in counters {
        r.register(Box::new(int_counter(name, help, v)?))?;
    }
    let gauges = [
        (
            "basalt_memstore_bytes",
            "Bytes in every MemStore",
            e.memstore_bytes,
        ),
        (
            "basalt_block_cache_bytes",
            "Bytes of decoded blocks the block cache holds",
            e.block_cache_bytes,
        ),
        (
            "basalt_block_cache_capacity_bytes",
            "The block cache's capacity",
            e.block_cache_capacity,
        ),
    ];
    for (name, help, v) in gauges {
        r.register(Box::new(int_gauge(name, help, v)?))?;
    }
    Ok(())
}

/// The figures of `regions` (each with its table's name) as per-region metrics in `r`:
/// the same names on the gateway's and a region server's `/metrics`.
pub(crate) fn register_regions<'a>(
    r: &Registry,
    regions: impl IntoIterator<Item = (&'a str, &'a RegionStatus)>,
) -> prometheus::Result<()> {
    let region_labels = &["table", "region"];
    let reads = IntCounterVec::new(
        Opts::new(
            "basalt_region_read_requests_total",
            "Reads a region served since start",
        ),
        region_labels,
    )?;
    let writes = IntCounterVec::new(
        Opts::new(
            "basalt_region_write_requests_total",
            "Writes a region served since start",
        ),
        region_labels,
    )?;
    let memstore = IntGaugeVec::new(
        Opts::new(
            "basalt_region_memstore_bytes",
            "Bytes in a region's MemStores",
        ),
        region_labels,
    )?;
    let file_bytes = IntGaugeVec::new(
        Opts::new(
            "basalt_region_store_file_bytes",
            "Bytes of a region's store files",
        ),
        region_labels,
    )?;
    let files = IntGaugeVec::new(
        Opts::new("basalt_region_store_files", "A region's store files"),
        region_labels,
    )?;
    let gauge_of = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    for (table, reg) in regions {
        let id = reg.id.to_string();
        let l = [table, id.as_str()];
        reads.with_label_values(&l).inc_by(reg.read_requests);
        writes.with_label_values(&l).inc_by(reg.write_requests);
        memstore
            .with_label_values(&l)
            .set(gauge_of(reg.memstore_bytes));
        file_bytes
            .with_label_values(&l)
            .set(gauge_of(reg.store_file_bytes));
        files
            .with_label_values(&l)
            .set(gauge_of(reg.store_files as u64));
    }
    r.register(Box::new(reads))?;
    r.register(Box::new(writes))?;
    r.register(Box::new(memstore))?;
    r.register(Box::new(file_bytes))?;
    r.register(Box::new(files))?;
    Ok(())
}

/// The engine's figures in `status`, as metrics of a registry built for one scrape.
fn engine_registry(status: &Status) -> prometheus::Result<Registry> {
    let r = Registry::new();
    if let Some(e) = &status.engine {
        register_engine(&r, e)?;
    }
    r.register(Box::new(int_gauge(
        "basalt_thrift_open_scanners",
        "Thrift scanners open",
        status.gateway.open_scanners,
    )?))?;
    let cp_labels = &["table", "coprocessor"];
    let cp_calls = IntCounterVec::new(
        Opts::new(
            "basalt_coprocessor_calls_total",
            "Hook calls of a coprocessor",
        ),
        cp_labels,
    )?;
    let cp_errors = IntCounterVec::new(
        Opts::new(
            "basalt_coprocessor_errors_total",
            "Hook calls of a coprocessor that failed",
        ),
        cp_labels,
    )?;
    let cp_time = CounterVec::new(
        Opts::new(
            "basalt_coprocessor_latency_seconds_total",
            "Time spent in a coprocessor's hooks (mean latency: its rate over the calls' rate)",
        ),
        cp_labels,
    )?;
    let plugin_p99 = prometheus::GaugeVec::new(
        Opts::new(
            "basalt_plugin_latency_p99_seconds",
            "A plugin's 99th-percentile hook call latency",
        ),
        cp_labels,
    )?;
    let plugin_memory = IntGaugeVec::new(
        Opts::new(
            "basalt_plugin_memory_bytes",
            "The largest memory one of a plugin's instances reached",
        ),
        cp_labels,
    )?;
    let gauge_of = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    register_regions(
        &r,
        status
            .tables
            .iter()
            .flat_map(|t| t.regions.iter().map(move |reg| (t.name.as_str(), reg))),
    )?;
    for t in &status.tables {
        for cp in &t.coprocessors {
            let l = [t.name.as_str(), cp.name.as_str()];
            if let Some(calls) = cp.calls {
                cp_calls.with_label_values(&l).inc_by(calls);
            }
            if let Some(errors) = cp.errors {
                cp_errors.with_label_values(&l).inc_by(errors);
            }
            if let Some(secs) = cp.total_latency_secs {
                cp_time.with_label_values(&l).inc_by(secs);
            }
            if let Some(us) = cp.p99_latency_micros {
                plugin_p99.with_label_values(&l).set(us / 1e6);
            }
            if let Some(bytes) = cp.memory_bytes {
                plugin_memory.with_label_values(&l).set(gauge_of(bytes));
            }
        }
    }
    r.register(Box::new(cp_calls))?;
    r.register(Box::new(cp_errors))?;
    r.register(Box::new(cp_time))?;
    r.register(Box::new(plugin_p99))?;
    r.register(Box::new(plugin_memory))?;
    let uptime = Counter::new(
        "basalt_uptime_seconds_total",
        "Seconds since the server started",
    )?;
    uptime.inc_by(status.uptime_secs as f64);
    r.register(Box::new(uptime))?;
    Ok(r)
}

/// A process's own metrics in `r`: its uptime and the info connections it refused.
pub(crate) fn register_process(
    r: &Registry,
    uptime_secs: u64,
    refused: u64,
) -> prometheus::Result<()> {
    r.register(Box::new(int_counter(
        "basalt_info_refused_connections_total",
        "Info port connections closed for the bound",
        refused,
    )?))?;
    r.register(Box::new(int_counter(
        "basalt_uptime_seconds_total",
        "Seconds since the process started",
        uptime_secs,
    )?))
}

/// `r`'s metrics in Prometheus' text format.
pub(crate) fn encode(r: &Registry) -> prometheus::Result<String> {
    let mut out = Vec::new();
    TextEncoder::new().encode(&r.gather(), &mut out)?;
    String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

/// Every metric, in Prometheus' text format.
pub(crate) fn render(gateway: &GatewayMetrics, status: &Status) -> prometheus::Result<String> {
    let mut families = gateway.families();
    families.extend(engine_registry(status)?.gather());
    let mut out = Vec::new();
    TextEncoder::new().encode(&families, &mut out)?;
    String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
}
