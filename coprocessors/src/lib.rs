//! Basalt's coprocessor framework: Observer hooks, their host and the registry that loads
//! them per table.
//!
//! - [`RegionObserver`]: the async trait a coprocessor implements (every hook a no-op by
//!   default), with an [`ObserverContext`] per call (table, region, reads, bypass).
//! - [`Registry`]: registered names to factories; set it as the engine's
//!   `Config::coprocessor_loader`. Tables list coprocessors by name, priority, arguments,
//!   failure policy and timeout in their descriptor ([`basalt_core::CoprocessorDescriptor`]),
//!   persisted in the catalog, so reopening the engine reloads them; `Admin::add_coprocessor`
//!   and `Admin::remove_coprocessor` change them without a restart.
//! - [`CoprocessorHost`]: one table's chain, run in priority order (ties in load order),
//!   each hook call isolated and counted ([`CoprocessorMetrics`], through
//!   [`Registry::metrics`]): an error a hook returns (a refusal) fails the operation under
//!   every policy; panics and timeouts (faults) are handled under the coprocessor's policy.
//!
//! Invariants: a coprocessor never brings down the engine or leaves a row lock held; the
//! engine's dispatch interface is `basalt_core::coprocessor::RegionHooks`, which this crate
//! implements and core calls, so core never names a coprocessor.
//!
//! - Endpoints ([`Endpoint`], [`Endpoints`]): typed services registered per table in an
//!   [`EndpointRegistry`], called with [`Endpoints::coprocessor_service`] once per region of a
//!   key range, in parallel, all regions at one read point; answers stream per region, with
//!   helpers to fold or merge them in key order ([`fold`], [`collect_ordered`]). The built-ins
//!   are aggregation over a column ([`AGGREGATE`]) and a fast row count ([`ROW_COUNT`],
//!   [`RowCount`]), with [`AggregationClient`].
//! - Salted tables: [`SaltedEndpoints`] calls an endpoint over a *logical* key
//!   range, one call per bucket range and region, all at one read point, folded or merged
//!   in logical key order ([`merge_logical`]); [`SaltedAggregationClient`] aggregates over
//!   logical ranges.
//! - [`relations`]: the built-in relation coprocessors (inverse relations, tree links, a
//!   guard of references), the crate's one public module.
//!
//! - Lifecycle hooks of [`RegionObserver`]: region open and close, scanners, flush,
//!   compaction (selection and a [`CellTransform`] over the cells written), split (with
//!   veto) and WAL replay; `core/src/server/hooks/lifecycle.rs` says where each is called.
//! - System-wide region coprocessors: `Config::system_coprocessor` lists registered names
//!   that every user table loads ahead of its own list (system first on equal priorities).
//! - [`StripedCounter`]: a counter for hooks that count, striped by thread so writers on
//!   several cores do not share its cache line (the host counts its calls with it).
//! - [`EngineObserverHost`]: engine-wide [`TableObserver`]s (create, delete, enable, disable,
//!   modify table, with veto) and [`WalObserver`]s (append and roll), set with
//!   `Config::observer`, isolated and counted like region observers.
//!
//! - Plugins: coprocessors named `plugin:{sha256}` are uploaded WebAssembly components,
//!   run by the [`PluginRuntime`] set with [`Registry::set_plugin_runtime`]
//!   (`basalt-plugins`).
//!
//! Layers, bottom to top: `counter`, `observer`, `plugin`, `read_only`, `endpoint`, `answers`,
//! `service`, `aggregate`, `salted`, `host`, `engine`, `registry`, `relations`.
//!
//! Public modules: `relations`. Every other module is private; what users name is
//! re-exported here.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod aggregate;
mod answers;
mod counter;
mod endpoint;
mod engine;
mod host;
mod observer;
mod plugin;
mod read_only;
mod registry;
pub mod relations;
mod salted;
mod service;

pub use aggregate::{
    register_builtins, Aggregate, AggregateOp, AggregateRequest, AggregateResponse,
    AggregationClient, Column, Interpreter, Number, RegionHistogram, RegionStats, RowCount,
    AGGREGATE, ROW_COUNT,
};
pub use basalt_core::coprocessor::{
    AddedOp, CellTransform, CompactionRequest, CompactionSelection, Flow, HookEnv, MiniBatch,
    RowOwner, StoreFileSummary,
};
pub use basalt_core::{CoprocessorDescriptor, FailurePolicy};
pub use counter::{StripedCounter, STRIPES};
pub use endpoint::{call_isolated, Endpoint, EndpointRegistry, ErasedEndpoint};
pub use engine::{EngineObserverHost, TableObserver, WalObserver};
pub use host::{CoprocessorHost, CoprocessorMetrics};
pub use observer::{ObserverContext, RegionObserver};
pub use plugin::PluginRuntime;
pub use read_only::ReadOnlyHooks;
pub use registry::{Args, Factory, Registry, DEFAULT_TIMEOUT};
pub use salted::{merge_logical, SaltedAggregationClient, SaltedEndpoints, SaltedSnapshot};
pub use service::{
    collect_ordered, fold, fold_partial, merge_sorted, try_collect_ordered, CallOptions, Endpoints,
    ErrorMode, KeyRange, Partial, RegionResponse, ResponseStream, Snapshot,
};
