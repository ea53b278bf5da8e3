//! The info servers of a cluster's processes, as HBase's region servers and master have
//! theirs: a region server's status page at `/` with `/status.json` and `/metrics`
//! ([`server`]), and the master's page of the cluster ([`master`]) at `/` of `basalt
//! master`'s info port and at `/master` of every region server's (any process reads the
//! cluster's state from etcd; the page says whether it is the active master's). The
//! accept loop and its bounds are the gateway's info server's (`serve::info`); a sampler
//! reads the request counters every [`SAMPLE_EVERY`], so the rates per second are there
//! before the first page load (a region server's view of the cluster samples every
//! server's load only within [`CLUSTER_VIEW_SAMPLED_FOR`] of a load of that page).
//!
//! Layers, bottom to top: `rates`, `server`, `master`.
//!
//! Invariants: only `GET` (and `HEAD`) of the listed paths answer 200, anything else is a
//! 404 or 405; a failure to gather is a 500 with its reason, never a panic; the info
//! server and the sampler stop when the process stops.

mod master;
mod rates;
mod server;

use crate::serve::info::{failed, json_answer, metrics_answer, serve_router};
use axum::extract::State as Shared;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
pub(crate) use master::MasterPage;
pub use master::{MasterStatus, PendingMove, RegionPlace, ServerRow};
pub(crate) use server::RegionServerPage;
pub use server::{LifeStatus, RegionServerStatus, RpcStatus, ServedRegion};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often the sampler reads the request counters.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// How long after a load of a region server's `/master` page its sampler keeps reading
/// every server's load (so that the page's rates are current, without every server
/// polling every other one all the time).
pub const CLUSTER_VIEW_SAMPLED_FOR: Duration = Duration::from_secs(60);

/// Both pages a region server serves.
struct RegionServerPages {
    server: RegionServerPage,
    cluster: MasterPage,
    /// When the cluster's page was last loaded.
    cluster_viewed: std::sync::Mutex<Option<std::time::Instant>>,
}

impl RegionServerPages {
    fn viewed(&self) {
        if let Ok(mut v) = self.cluster_viewed.lock() {
            *v = Some(std::time::Instant::now());
        }
    }

    fn viewed_lately(&self) -> bool {
        self.cluster_viewed
            .lock()
            .ok()
            .and_then(|v| *v)
            .is_some_and(|at| at.elapsed() < CLUSTER_VIEW_SAMPLED_FOR)
    }
}

async fn server_page(Shared(p): Shared<Arc<RegionServerPages>>) -> Response {
    Html(server::render(&server::gather(&p.server).await)).into_response()
}

async fn server_json(Shared(p): Shared<Arc<RegionServerPages>>) -> Response {
    json_answer(&server::gather(&p.server).await)
}

async fn server_metrics(Shared(p): Shared<Arc<RegionServerPages>>) -> Response {
    let s = server::gather(&p.server).await;
    metrics_answer(server::metrics(
        &s,
        p.server.refused.load(Ordering::Relaxed),
    ))
}

async fn cluster_page(Shared(p): Shared<Arc<RegionServerPages>>) -> Response {
    p.viewed();
    match master::gather(&p.cluster).await {
        Ok(s) => Html(master::render(&s, "/master.json", None)).into_response(),
        Err(e) => failed("gathering the cluster's status", e),
    }
}

async fn cluster_json(Shared(p): Shared<Arc<RegionServerPages>>) -> Response {
    p.viewed();
    match master::gather(&p.cluster).await {
        Ok(s) => json_answer(&s),
        Err(e) => failed("gathering the cluster's status", e),
    }
}

async fn master_page(Shared(p): Shared<Arc<MasterPage>>) -> Response {
    match master::gather(&p).await {
        Ok(s) => Html(master::render(&s, "/status.json", Some("/metrics"))).into_response(),
        Err(e) => failed("gathering the cluster's status", e),
    }
}

async fn master_json(Shared(p): Shared<Arc<MasterPage>>) -> Response {
    match master::gather(&p).await {
        Ok(s) => json_answer(&s),
        Err(e) => failed("gathering the cluster's status", e),
    }
}

async fn master_metrics(Shared(p): Shared<Arc<MasterPage>>) -> Response {
    match master::gather(&p).await {
        Ok(s) => metrics_answer(master::metrics(&s, p.refused.load(Ordering::Relaxed))),
        Err(e) => failed("gathering the cluster's status", e),
    }
}

/// Serves a region server's pages on `listener` (and samples its counters) until `stop`
/// turns true.
pub(crate) async fn serve_region_server(
    listener: tokio::net::TcpListener,
    server: RegionServerPage,
    cluster: MasterPage,
    stop: watch::Receiver<bool>,
) {
    let pages = Arc::new(RegionServerPages {
        server,
        cluster,
        cluster_viewed: Default::default(),
    });
    let app = Router::new()
        .route("/", get(server_page))
        .route("/status.json", get(server_json))
        .route("/metrics", get(server_metrics))
        .route("/master", get(cluster_page))
        .route("/master.json", get(cluster_json))
        .with_state(Arc::clone(&pages));
    let sampled = Arc::clone(&pages);
    let sampler = sample_until(stop.clone(), move || {
        let pages = Arc::clone(&sampled);
        async move {
            server::sample(&pages.server);
            if pages.viewed_lately() {
                master::sample(&pages.cluster).await;
            }
        }
    });
    let refusals = Arc::clone(&pages);
    let refused = move || {
        refusals.server.refused.fetch_add(1, Ordering::Relaxed);
    };
    tokio::join!(serve_router(listener, app, refused, stop), sampler);
}

/// Serves the master's pages on `listener` (and samples the servers' loads) until `stop`
/// turns true.
pub(crate) async fn serve_master(
    listener: tokio::net::TcpListener,
    page: MasterPage,
    stop: watch::Receiver<bool>,
) {
    let page = Arc::new(page);
    let app = Router::new()
        .route("/", get(master_page))
        .route("/status.json", get(master_json))
        .route("/metrics", get(master_metrics))
        .with_state(Arc::clone(&page));
    let sampled = Arc::clone(&page);
    let sampler = sample_until(stop.clone(), move || {
        let page = Arc::clone(&sampled);
        async move { master::sample(&page).await }
    });
    let refusals = Arc::clone(&page);
    let refused = move || {
        refusals.refused.fetch_add(1, Ordering::Relaxed);
    };
    tokio::join!(serve_router(listener, app, refused, stop), sampler);
}

/// Runs `sample` every [`SAMPLE_EVERY`] until `stop` turns true.
async fn sample_until<F, Fut>(mut stop: watch::Receiver<bool>, sample: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        tokio::select! {
            _ = sample() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(SAMPLE_EVERY) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
