//! The info server on the info port (HBase's is 9095 for its Thrift server): the status page
//! at `/`, the same data as JSON at `/status.json` ([`super::status::Status`]), and
//! `/metrics` in Prometheus' text format. HTTP/1.1 through `axum` on the server's tokio
//! runtime. Its accept loop ([`serve_router`]) also serves the region servers' and the
//! master's pages (`crate::pages`).
//!
//! Invariants: only `GET` (and `HEAD`) of these three paths answer 200; anything else is a
//! 404 or 405 without touching the engine; every answer is gathered fresh (no cache), and a
//! failure to gather is a 500 with its reason, never a panic. The port holds at most
//! [`INFO_MAX_CONNECTIONS`] connections (more are closed when accepted and counted), a
//! request's head must arrive within [`INFO_HEADER_TIMEOUT`] and fit in
//! [`INFO_MAX_HEAD_BYTES`], a connection lives at most [`INFO_CONNECTION_LIFETIME`], and a
//! failed accept (out of descriptors) backs off and is logged at most once a second.

use super::state::State;
use super::{page, scrape, status};
use axum::extract::State as Shared;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use basalt_core::client::Backend;
use std::sync::Arc;
use std::time::Duration;

/// The most connections the info port holds at once.
pub const INFO_MAX_CONNECTIONS: usize = 32;
/// How long a client has to send a request's head.
pub const INFO_HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes of a request's head (request line and headers).
pub const INFO_MAX_HEAD_BYTES: usize = 64 * 1024;
/// How long one connection may stay open, requests and keep-alive included.
pub const INFO_CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// Serves the info routes on `listener` until `stop` turns true.
pub(crate) async fn serve<B: Backend>(
    listener: tokio::net::TcpListener,
    state: Arc<State<B>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let app = router(state.clone());
    serve_router(listener, app, move || state.metrics.refuse("info"), stop).await
}

/// Serves `app` on `listener` until `stop` turns true, within the bounds of the module
/// doc; `refused` counts each connection closed for the bound.
pub(crate) async fn serve_router(
    listener: tokio::net::TcpListener,
    app: Router,
    refused: impl Fn(),
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(INFO_MAX_CONNECTIONS));
    let mut refusals = super::RateLimitedLog::new();
    let mut accept_errors = super::RateLimitedLog::new();
    let mut failures = 0u32;
    // The connections' tasks: aborted at stop, so none reads the engine while it closes.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            a = listener.accept() => Some(a),
            _ = stop.wait_for(|stopped| *stopped) => None,
        };
        let Some(accepted) = accepted else {
            connections.shutdown().await;
            return;
        };
        let (stream, peer) = match accepted {
            Ok(x) => {
                failures = 0;
                x
            }
            Err(e) => {
                if let Some(n) = accept_errors.tick() {
                    tracing::warn!(
                        "info port: accept failed ({n} time(s) since the last line): {e}"
                    );
                }
                tokio::time::sleep(super::accept_backoff(failures)).await;
                failures = failures.saturating_add(1);
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Counted first: whoever sees the connection closed sees it counted.
            refused();
            drop(stream);
            if let Some(n) = refusals.tick() {
                tracing::warn!(%peer, "info port: refused {n} connection(s): {INFO_MAX_CONNECTIONS} already open");
            }
            continue;
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        connections.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(INFO_HEADER_TIMEOUT)
                .max_buf_size(INFO_MAX_HEAD_BYTES)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            match tokio::time::timeout(INFO_CONNECTION_LIFETIME, connection).await {
                Ok(Err(e)) => tracing::debug!(%peer, "info connection ended: {e}"),
                Err(_) => tracing::debug!(%peer, "info connection closed past its lifetime"),
                Ok(Ok(())) => {}
            }
            drop(permit);
        });
    }
}

/// The routes of the info server over `state`.
pub(crate) fn router<B: Backend>(state: Arc<State<B>>) -> Router {
    Router::new()
        .route("/", get(status_page::<B>))
        .route("/status.json", get(status_json::<B>))
        .route("/metrics", get(metrics_text::<B>))
        .with_state(state)
}

/// A 500 answer saying what failed and why (logged).
pub(crate) fn failed(what: &str, e: impl std::fmt::Display) -> Response {
    tracing::warn!("{what} failed: {e}");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("{what} failed: {e}\n"),
    )
        .into_response()
}

/// `value` as a pretty JSON answer.
pub(crate) fn json_answer(value: &impl serde::Serialize) -> Response {
    match serde_json::to_string_pretty(value) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => failed("encoding the status", e),
    }
}

/// Metrics in Prometheus' text format as an answer.
pub(crate) fn metrics_answer(body: prometheus::Result<String>) -> Response {
    match body {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => failed("encoding the metrics", e),
    }
}

async fn status_page<B: Backend>(Shared(state): Shared<Arc<State<B>>>) -> Response {
    match status::gather(&state).await {
        Ok(s) => Html(page::render(&s)).into_response(),
        Err(e) => failed("gathering the status", e),
    }
}

async fn status_json<B: Backend>(Shared(state): Shared<Arc<State<B>>>) -> Response {
    match status::gather(&state).await {
        Ok(s) => json_answer(&s),
        Err(e) => failed("gathering the status", e),
    }
}

async fn metrics_text<B: Backend>(Shared(state): Shared<Arc<State<B>>>) -> Response {
    match status::gather(&state).await {
        Ok(s) => metrics_answer(scrape::render(&state.metrics, &s)),
        Err(e) => failed("gathering the metrics", e),
    }
}
