//! The info server on the info port (HBase's is 9095 for its Thrift server): the status page
//! at `/`, the same data as JSON at `/status.json` ([`super::status::Status`]), and
//! `/metrics` in Prometheus' text format. HTTP/1.1 through `axum` on the server's tokio
//! runtime.
//!
//! Invariants: only `GET` (and `HEAD`) of these three paths answer 200; anything else is a
//! 404 or 405 without touching the engine; every answer is gathered fresh (no cache), and a
//! failure to gather is a 500 with its reason, never a panic.

use super::handler::State;
use super::{metrics, page, status};
use axum::extract::State as Shared;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// The routes of the info server over `state`.
pub(crate) fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/", get(status_page))
        .route("/status.json", get(status_json))
        .route("/metrics", get(metrics_text))
        .with_state(state)
}

fn failed(what: &str, e: impl std::fmt::Display) -> Response {
    tracing::warn!("{what} failed: {e}");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("{what} failed: {e}\n"),
    )
        .into_response()
}

async fn status_page(Shared(state): Shared<Arc<State>>) -> Response {
    match status::gather(&state).await {
        Ok(s) => Html(page::render(&s)).into_response(),
        Err(e) => failed("gathering the status", e),
    }
}

async fn status_json(Shared(state): Shared<Arc<State>>) -> Response {
    let s = match status::gather(&state).await {
        Ok(s) => s,
        Err(e) => return failed("gathering the status", e),
    };
    match serde_json::to_string_pretty(&s) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => failed("encoding the status", e),
    }
}

async fn metrics_text(Shared(state): Shared<Arc<State>>) -> Response {
    let s = match status::gather(&state).await {
        Ok(s) => s,
        Err(e) => return failed("gathering the metrics", e),
    };
    match metrics::render(&state.metrics, &s) {
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
