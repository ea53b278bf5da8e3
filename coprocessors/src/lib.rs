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
//!   each hook call isolated (errors, panics, timeouts handled under the coprocessor's
//!   policy) and counted ([`CoprocessorMetrics`], through [`Registry::metrics`]).
//!
//! Invariants: a coprocessor never brings down the engine or leaves a row lock held; the
//! engine's dispatch interface is `basalt_core::coprocessor::RegionHooks`, which this crate
//! implements and core calls, so core never names a coprocessor.
//!
//! Not yet here: scanner, flush, compaction, split and WAL hooks, table and engine
//! observers, Endpoint services.
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod host;
pub mod observer;
pub mod registry;

pub use basalt_core::coprocessor::{AddedOp, Flow, HookEnv, MiniBatch};
pub use basalt_core::{CoprocessorDescriptor, FailurePolicy};
pub use host::{CoprocessorHost, CoprocessorMetrics};
pub use observer::{ObserverContext, RegionObserver};
pub use registry::{Args, Factory, Registry, DEFAULT_TIMEOUT};
