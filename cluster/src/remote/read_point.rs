//! A remote read point: pinned on every live server when it is taken (by a task, as the
//! client's `pin_read_point` is synchronous), on a server that joined later the first time
//! a scan at it reaches that server, and released on every server when the last clone
//! drops.
//!
//! A cluster has no read point common to its servers (each engine numbers its own
//! commits, as each HBase region does), so a snapshot across servers is a snapshot per
//! server, taken on all of them at once. The client that took it waits for the pinning
//! before any later call (`route::Router::settle`), so none of its own later writes shows
//! at the read point; a write another client sends at the same moment may or may not, as
//! with any two concurrent operations.
//!
//! Invariants: at most one pin per server per handle; a pin's handle is released when the
//! handle's last clone drops (a server also expires pins unused for five minutes, so a
//! client that dies pins nothing for long); the number [`ReadPointHandle::read_point`]
//! gives orders the read points one client took.

use crate::rpc::client::RpcClient;
use crate::rpc::messages::{Reply, Request};
use basalt_core::client::ReadPointHandle;
use basalt_core::Result;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A remote backend's pinned read point (see the module doc).
#[derive(Debug, Clone)]
pub struct RemoteReadPoint {
    pins: Arc<Pins>,
}

#[derive(Debug)]
struct Pins {
    /// The client's count of read points taken, this one included.
    ordinal: u64,
    /// By server address: the server's client, the pin's handle and its read point.
    by_server: tokio::sync::Mutex<HashMap<String, (RpcClient, u64, u64)>>,
}

impl RemoteReadPoint {
    /// The client's `ordinal`th read point, not pinned anywhere yet.
    pub(crate) fn new(ordinal: u64) -> Self {
        RemoteReadPoint {
            pins: Arc::new(Pins {
                ordinal,
                by_server: tokio::sync::Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Pins it on each of `servers` (a server that cannot be reached now is pinned on
    /// first use instead).
    pub(crate) async fn pin_on(&self, servers: Vec<RpcClient>, deadline: Duration) {
        for server in servers {
            if let Err(e) = self.handle_on(&server, deadline).await {
                tracing::debug!(server = server.address(), error = %e, "read point not pinned");
            }
        }
    }

    /// The pin's handle on `server`, pinning it there first if needed.
    pub(crate) async fn handle_on(&self, server: &RpcClient, deadline: Duration) -> Result<u64> {
        let mut pins = self.pins.by_server.lock().await;
        if let Some((_, handle, _)) = pins.get(server.address()) {
            return Ok(*handle);
        }
        match server.call(Request::PinReadPoint, deadline).await? {
            Reply::ReadPoint { handle, point } => {
                pins.insert(
                    server.address().to_string(),
                    (server.clone(), handle, point),
                );
                Ok(handle)
            }
            other => Err(crate::rpc::client::unexpected("pin_read_point", &other)),
        }
    }
}

impl ReadPointHandle for RemoteReadPoint {
    /// Which of the client's read points this is (1 for its first): each server numbers
    /// its commits apart, so no single sequence id names a read point of a cluster; this
    /// number orders the ones one client took.
    fn read_point(&self) -> u64 {
        self.pins.ordinal
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        let pins = std::mem::take(self.by_server.get_mut());
        if pins.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime left: the servers expire the pins
        };
        runtime.spawn(async move {
            for (_, (server, handle, _)) in pins {
                let release = Request::ReleaseReadPoint(handle);
                let _ = server.call(release, Duration::from_secs(5)).await;
            }
        });
    }
}
