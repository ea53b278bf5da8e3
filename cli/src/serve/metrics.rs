//! The gateway's own instruments (`GatewayMetrics`), for the server's life: requests and
//! errors by method and table, a latency histogram by method, open connections, refused
//! and timed-out connections, requests for unknown methods. The `scrape` module renders
//! them in `/metrics` with the engine's figures of the moment.
//!
//! Invariants: the table label takes at most [`MAX_TABLE_LABELS`] distinct values (a client
//! naming ever new tables cannot grow the metrics without bound; later ones are counted as
//! `(other)`); a request whose call named no table has the label empty.

use super::calls::Call;
use prometheus::proto::MetricFamily;
use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
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

    /// Every instrument's current values.
    pub(crate) fn families(&self) -> Vec<MetricFamily> {
        self.registry.gather()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, TextEncoder};

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
        let families = m.families();
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
