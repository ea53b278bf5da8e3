//! What a region server's RPC service counts ([`ServerLoad`]): calls and scans answered,
//! errors among them, scans running; shared by the services of one server's lives and
//! read by its status page and, through `Request::ServerLoad`, by the master's.
//!
//! Invariant: counters only grow (a server's lives share them; a restarted process starts
//! from zero).

use super::messages::ServerLoad;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What a service counted ([`ServerLoad`]): calls and scans answered, errors among them.
/// Shared by the services of one server's lives when given (`RegionRpc::counting`).
#[derive(Debug)]
pub struct RpcCounters {
    started: Instant,
    requests: AtomicU64,
    errors: AtomicU64,
    scans: AtomicU64,
}

impl Default for RpcCounters {
    fn default() -> Self {
        RpcCounters {
            started: Instant::now(),
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            scans: AtomicU64::new(0),
        }
    }
}

impl RpcCounters {
    /// Counts one answered call, an error or not.
    pub(crate) fn answered(&self, error: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts one scan opened.
    pub(crate) fn scan_opened(&self) {
        self.scans.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now, with `open_scans` scans running.
    pub fn load(&self, open_scans: u64) -> ServerLoad {
        ServerLoad {
            requests: self.requests.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            open_scans,
            uptime_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// What a service counted (`RegionRpc::load_source`), without the service.
#[derive(Debug, Clone)]
pub struct LoadSource {
    pub(crate) counters: Arc<RpcCounters>,
    pub(crate) open_scans: Arc<AtomicUsize>,
}

impl LoadSource {
    /// The counts now.
    pub fn load(&self) -> ServerLoad {
        let open = self.open_scans.load(Ordering::SeqCst);
        self.counters.load(u64::try_from(open).unwrap_or(u64::MAX))
    }
}
