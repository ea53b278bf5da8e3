//! What the whole gateway shares ([`State`]): the open data directory, the runtime engine
//! calls run on, the open scanners and the gateway's metrics, with the addresses the
//! status page and `getTableRegions` report. Every connection's handler, the status page
//! and the metrics read it; the accept loop builds it once.
//!
//! Invariant: one `State` a server, built before anything listens and never replaced.

use super::metrics::GatewayMetrics;
use super::scanners::Scanners;
use crate::datadir::DataDir;
use std::sync::Arc;

/// What every connection's handler shares: the engine, the runtime, the scanners.
pub(crate) struct State {
    pub(crate) data: DataDir,
    pub(crate) rt: tokio::runtime::Handle,
    pub(crate) scanners: Scanners,
    /// The gateway's request counters and latency histograms.
    pub(crate) metrics: Arc<GatewayMetrics>,
    /// The data directory served (as the status page shows it).
    pub(crate) dir: String,
    /// The host and port `getTableRegions` reports as the regions' server.
    pub(crate) host: String,
    pub(crate) port: u16,
}
