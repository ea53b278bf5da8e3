//! What the whole gateway shares ([`State`]): the open data directory (or the connected
//! cluster), the runtime engine
//! calls run on, the open scanners and the gateway's metrics, with the addresses the
//! status page and `getTableRegions` report. Every connection's handler, the status page
//! and the metrics read it; the accept loop builds it once.
//!
//! Invariant: one `State` a server, built before anything listens and never replaced.

use super::metrics::GatewayMetrics;
use super::scanners::Scanners;
use crate::datadir::DataDir;
use basalt_core::client::Backend;
use std::sync::Arc;

/// What every connection's handler shares: the engine (or the cluster's connection), the
/// runtime, the scanners.
pub(crate) struct State<B: Backend> {
    pub(crate) data: DataDir<B>,
    pub(crate) rt: tokio::runtime::Handle,
    pub(crate) scanners: Scanners<B::Rows>,
    /// The gateway's request counters and latency histograms.
    pub(crate) metrics: Arc<GatewayMetrics>,
    /// The data directory served (as the status page shows it; `None` for a cluster,
    /// which `data` names).
    pub(crate) dir: Option<String>,
    /// The host and port `getTableRegions` reports as the regions' server (over a
    /// directory; over a cluster, each region's own server).
    pub(crate) host: String,
    pub(crate) port: u16,
}
