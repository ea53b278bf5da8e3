//! Basalt's coprocessors as sandboxed plugins: WebAssembly components of the WIT package
//! `basalt:coprocessor@0.2.0` (`plugins/wit/coprocessor.wit`), run by wasmtime.
//!
//! [`PluginHost`] is the runtime: set it on a coprocessor registry
//! (`Registry::set_plugin_runtime`) and every coprocessor named `plugin:{sha256}` (uploaded
//! with `Admin::upload_plugin`, attached with `Admin::add_coprocessor`) runs in it. Per
//! call an epoch deadline ([`PluginLimits::call_deadline`]); per instance a memory cap and
//! a wasm stack cap; nothing of the host is reachable but the `region` interface (reads of
//! the call's region, a log line) and what the attachment grants ([`Grants`]: WASI's clocks,
//! random numbers): every other import a component declares (files, sockets, environment)
//! is linked to a trap, so it can be loaded but never reached.
//! Instances are pooled and reused; a trap, a deadline or an out-of-memory drops that
//! instance and fails the call with `Error::PluginFault`, which the coprocessor host
//! handles under the attachment's failure policy: never the server.
//!
//! Layers, bottom to top: `bindings`, `state`, `columns`, `stats`, `grants`, `convert`,
//! `runtime`, `pool`, `observer`, `endpoint`. That is: the bindings generated from the WIT;
//! what a store holds and the host side of `region`; its column scanner (pages of a few
//! columns packed into bytes); each attachment's counters (calls, faults, mean and p99
//! latency, memory); the functions a grant links; mutations across the interface; the engine, its ticker, the
//! compilation cache and the list of counters; an attachment's pool of instances (deadline,
//! limits, timing, back-off); the `RegionObserver` a plugin becomes (and the registry's
//! `PluginRuntime`); a plugin endpoint and its merge.
//!
//! Public modules: none; what users name is re-exported here.
//!
//! Invariants: a store is never re-entered (host functions call no plugin) and never used
//! again after a trap; the compiled component of an id is cached for the host's life and
//! shared by every table that attaches it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod bindings;
mod columns;
mod convert;
mod endpoint;
mod grants;
mod observer;
mod pool;
mod runtime;
mod state;
mod stats;

pub use endpoint::{PluginEndpoint, PluginEndpoints};
pub use grants::{Grants, GRANTS_ARG};
pub use observer::PluginObserver;
pub use runtime::{PluginHost, PluginLimits};
pub use stats::PluginStats;

/// The interface's text, `basalt:coprocessor@0.2.0`.
pub const WIT: &str = include_str!("../wit/coprocessor.wit");
