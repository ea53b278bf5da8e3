//! `/metrics` in Prometheus' text format (the `prometheus` crate's registry and encoder).
//!
//! Two sources. The gateway's own instruments live for the server's life
//! (`GatewayMetrics`): requests and errors by method and table, a latency histogram by
//! method, open connections. The engine's figures (flushes, compactions, WAL syncs and
//! bytes, block cache hits and misses, MemStore bytes; per region its requests, MemStore and
//! store files; per coprocessor its calls, errors and time) are counters the engine keeps
//! itself, read at scrape time from a [`Status`] into a registry built for that scrape.
//!
//! Invariants: the table label takes at most [`MAX_TABLE_LABELS`] distinct values (a client
//! naming ever new tables cannot grow the metrics without bound; later ones are counted as
//! `(other)`); a request whose call named no table has the label empty.

use super::calls::Call;
use super::status::Status;
use prometheus::{
    Counter, CounterVec, Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most distinct values of the `table` label of request metrics.
pub const MAX_TABLE_LABELS: usize = 1000;

/// Latency buckets of requests, in seconds: 50 us to 10 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 10.0,
];

/// The gateway's instruments, for the server's life.
pub(crate) struct GatewayMetrics {
    registry: Registry,
    requests: IntCounterVec,
    errors: IntCounterVec,
    latency: HistogramVec,
    /// Connections being served.
    pub(crate) connections: IntGauge,
    /// Connections closed when accepted: the bound was reached and no connection could
    /// make room (Thrift and info port).
    pub(crate) refused: IntCounterVec,
    /// Connections closed for sending no complete request in time: no first request
    /// within the first-request deadline, idle past the read timeout, or made to give
    /// their place to a new connection while they waited for their first request.
    pub(crate) timed_out: IntCounter,
    /// Requests for a method the service lacks.
    unknown: IntCounter,
    /// Requests counted in `requests`, over every label set.
    served: AtomicU64,
    /// Requests counted in `errors`, over every label set.
    failed: AtomicU64,
    /// Table labels handed out so far.
    tables: Mutex<HashSet<String>>,
    /// When the server started.
    pub(crate) started: Instant,
}

impl GatewayMetrics {
    /// Fresh instruments.
    pub(crate) fn new() -> prometheus::Result<Self> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "basalt_thrift_requests_total",
                "Thrift requests served, by method and table",
            ),
            &["method", "table"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "basalt_thrift_request_errors_total",
                "Thrift requests answered with an exception, by method and table",
            ),
            &["method", "table"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "basalt_thrift_request_duration_seconds",
                "Time from a request's arguments to its reply, by method",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["method"],
        )?;
        let connections = IntGauge::new(
            "basalt_thrift_connections",
            "Thrift connections being served",
        )?;
        let refused = IntCounterVec::new(
            Opts::new(
                "basalt_connections_refused_total",
                "Connections closed when accepted because the port's bound was reached, by port",
            ),
            &["port"],
        )?;
        let timed_out = IntCounter::new(
            "basalt_thrift_connections_timed_out_total",
            "Thrift connections closed for sending no complete request in time",
        )?;
        let unknown = IntCounter::new(
            "basalt_thrift_unknown_method_requests_total",
            "Requests for a method the service does not have",
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(connections.clone()))?;
        registry.register(Box::new(unknown.clone()))?;
        registry.register(Box::new(refused.clone()))?;
        registry.register(Box::new(timed_out.clone()))?;
        Ok(GatewayMetrics {
            registry,
            requests,
            errors,
            latency,
            connections,
            refused,
            timed_out,
            unknown,
            served: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            tables: Mutex::new(HashSet::new()),
            started: Instant::now(),
        })
    }

    /// The label for `table`: itself while fewer than [`MAX_TABLE_LABELS`] were handed out.
    fn table_label(&self, table: Option<&str>) -> String {
        let Some(t) = table else {
            return String::new();
        };
        let mut seen = self
            .tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.contains(t) {
            return t.to_string();
        }
        if seen.len() >= MAX_TABLE_LABELS {
            return "(other)".to_string();
        }
        seen.insert(t.to_string());
        t.to_string()
    }

    /// Counts one served request that took `elapsed`.
    pub(crate) fn observe(&self, call: &Call, elapsed: Duration) {
        let table = self.table_label(call.table.as_deref());
        let labels = [call.method, table.as_str()];
        self.requests.with_label_values(&labels).inc();
        self.served.fetch_add(1, Ordering::Relaxed);
        if call.failed {
            self.errors.with_label_values(&labels).inc();
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.latency
            .with_label_values(&[call.method])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a request for a method the service lacks.
    pub(crate) fn unknown_method(&self) {
        self.unknown.inc();
    }

    /// Requests served since start.
    pub(crate) fn requests_served(&self) -> u64 {
        self.served.load(Ordering::Relaxed) + self.unknown.get()
    }

    /// Requests answered with an exception since start.
    pub(crate) fn errors_answered(&self) -> u64 {
        self.failed.load(Ordering::Relaxed) + self.unknown.get()
    }

    /// A connection to `port` ("thrift" or "info") closed when accepted.
    pub(crate) fn refuse(&self, port: &str) {
        self.refused.with_label_values(&[port]).inc();
    }

    /// Connections closed when accepted since start, on both ports.
    pub(crate) fn refused_connections(&self) -> u64 {
        ["thrift", "info"]
            .iter()
            .map(|p| self.refused.with_label_values(&[*p]).get())
            .sum()
    }
}

fn int_counter(name: &str, help: &str, value: u64) -> prometheus::Result<IntCounter> {
    let c = IntCounter::new(name, help)?;
    c.inc_by(value);
    Ok(c)
}

fn int_gauge(name: &str, help: &str, value: u64) -> prometheus::Result<IntGauge> {
    let g = IntGauge::new(name, help)?;
    g.set(i64::try_from(value).unwrap_or(i64::MAX));
    Ok(g)
}

/// The engine's figures in `status`, as metrics of a registry built for one scrape.
fn engine_registry(status: &Status) -> prometheus::Result<Registry> {
    let r = Registry::new();
    let e = &status.engine;
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
        (
            "basalt_thrift_open_scanners",
            "Thrift scanners open",
            status.gateway.open_scanners,
        ),
    ];
    for (name, help, v) in gauges {
        r.register(Box::new(int_gauge(name, help, v)?))?;
    }
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
    let gauge_of = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    for t in &status.tables {
        for reg in &t.regions {
            let id = reg.id.to_string();
            let l = [t.name.as_str(), id.as_str()];
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
        for cp in &t.coprocessors {
            let l = [t.name.as_str(), cp.name.as_str()];
            cp_calls.with_label_values(&l).inc_by(cp.calls);
            cp_errors.with_label_values(&l).inc_by(cp.errors);
            cp_time.with_label_values(&l).inc_by(cp.total_latency_secs);
        }
    }
    r.register(Box::new(reads))?;
    r.register(Box::new(writes))?;
    r.register(Box::new(memstore))?;
    r.register(Box::new(file_bytes))?;
    r.register(Box::new(files))?;
    r.register(Box::new(cp_calls))?;
    r.register(Box::new(cp_errors))?;
    r.register(Box::new(cp_time))?;
    let uptime = Counter::new(
        "basalt_uptime_seconds_total",
        "Seconds since the server started",
    )?;
    uptime.inc_by(status.uptime_secs as f64);
    r.register(Box::new(uptime))?;
    Ok(r)
}

/// Every metric, in Prometheus' text format.
pub(crate) fn render(gateway: &GatewayMetrics, status: &Status) -> prometheus::Result<String> {
    let mut families = gateway.registry.gather();
    families.extend(engine_registry(status)?.gather());
    let mut out = Vec::new();
    TextEncoder::new().encode(&families, &mut out)?;
    String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(method: &'static str, table: Option<&str>, failed: bool) -> Call {
        Call {
            method,
            started: Instant::now(),
            table: table.map(str::to_string),
            failed,
        }
    }

    #[test]
    fn requests_are_counted_by_method_and_table() {
        let m = GatewayMetrics::new().unwrap();
        m.observe(
            &call("mutateRows", Some("t"), false),
            Duration::from_micros(300),
        );
        m.observe(
            &call("mutateRows", Some("t"), true),
            Duration::from_micros(300),
        );
        m.observe(
            &call("getTableNames", None, false),
            Duration::from_millis(2),
        );
        m.unknown_method();
        assert_eq!(m.requests_served(), 4);
        assert_eq!(m.errors_answered(), 2);
        let families = m.registry.gather();
        let mut out = Vec::new();
        TextEncoder::new().encode(&families, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(r#"basalt_thrift_requests_total{method="mutateRows",table="t"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"basalt_thrift_request_errors_total{method="mutateRows",table="t"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"basalt_thrift_request_duration_seconds_bucket{method="getTableNames",le="0.0025"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"basalt_thrift_request_duration_seconds_bucket{method="getTableNames",le="0.001"} 0"#),
            "{text}"
        );
    }

    #[test]
    fn table_labels_are_bounded() {
        let m = GatewayMetrics::new().unwrap();
        for i in 0..MAX_TABLE_LABELS + 50 {
            let t = format!("t{i}");
            m.observe(&call("get", Some(&t), true), Duration::ZERO);
        }
        let other = m.errors.with_label_values(&["get", "(other)"]).get();
        assert_eq!(other, 50);
        // A table seen before the bound keeps its own label.
        m.observe(&call("get", Some("t0"), false), Duration::ZERO);
        assert_eq!(m.requests.with_label_values(&["get", "t0"]).get(), 2);
    }
}
