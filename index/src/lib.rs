//! Basalt's secondary indexes, kept in sync with their data table by an observer inside one
//! atomic engine batch: a reader never sees a data row without its index rows or an index
//! row without its data row, after any crash.
//!
//! - `def`: index definitions ([`IndexDef`]).
//! - `layout`: the index row key and cells of a data row.
//! - `maintainer`: the observer that maintains the indexes ([`Maintainer`]), and the guard
//!   that keeps users from writing index tables ([`Guard`]).
//! - `admin`: create (online build with progress), drop, list, describe, verify, repair
//!   ([`IndexAdmin`]).
//! - `snapshots`: clones of an indexed table's snapshot with its index tables
//!   ([`IndexAdmin::clone_snapshot`]).
//! - `query`: queries by equal values ([`val`]), prefix and range, as keys, covered hits or
//!   rows ([`Index`], [`Query`]).
//! - `local`: queries of region-local indexes, one scan per region merged in index order.
//!
//! Setup: register the coprocessors in the engine's registry ([`register`]) before opening
//! the connection, then use an [`IndexAdmin`]:
//!
//! ```
//! use basalt_core::{ColumnFamilyDescriptor, Config, Connection, TableDescriptor, TableName};
//! use basalt_core::client::Put;
//! use basalt_index::{val, IndexAdmin, IndexDef, Query};
//! use std::sync::Arc;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> basalt_core::Result<()> {
//! # let dir = tempfile::tempdir()?;
//! let registry = Arc::new(basalt_coprocessors::Registry::new());
//! let runtime = basalt_index::register(&registry)?;
//! let conn = Connection::open_with(Config::new(dir.path()).coprocessor_loader(registry)).await?;
//! let users = TableDescriptor::new(TableName::parse("users")?).family(ColumnFamilyDescriptor::new("p"));
//! conn.admin().create_table(users).await?;
//! let indexes = IndexAdmin::new(&conn, runtime);
//! indexes.create(IndexDef::new("by_city", "users").column("p", "city")).await?;
//! conn.table("users")?.put(Put::new("ada").add_column("p", "city", "Paris")).await?;
//! let by_city = indexes.index("users", "by_city").await?;
//! assert_eq!(by_city.keys(&Query::eq(vec![val("Paris")])).await?, vec!["ada"]);
//! # conn.close().await?;
//! # Ok(()) }
//! ```
//!
//! Layers, bottom to top: `def`, `layout`, `local`, `query`, `maintainer`, `admin`,
//! `verify`, `snapshots`.
//!
//! Public modules: none. Every module is private; what users name is re-exported here.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod def;
mod layout;
mod local;
mod maintainer;
mod query;
mod snapshots;
mod verify;

pub use admin::{IndexAdmin, BUILD_BATCH, SYSTEM_TABLE};
pub use def::{ColumnRef, IndexDef, IndexState};
pub use layout::{Entry, IndexValue, Layout, FAMILY, META};
pub use local::ATTEMPTS;
pub use maintainer::{Guard, Maintainer, Runtime, ARG_PREFIX, GUARD, MAINTAINER};
pub use query::{val, Hit, Index, Query, FETCH_BATCH};
pub use verify::VerifyReport;

use std::sync::Arc;

/// Registers the index coprocessors in `registry`, and the recovery repair that verifies
/// and repairs every index of a table after a salvage or an offline repair
/// (`basalt_core::RecoveryRepair`); returns the runtime to give every
/// [`IndexAdmin`] of a connection using that registry.
pub fn register(registry: &basalt_coprocessors::Registry) -> basalt_core::Result<Arc<Runtime>> {
    let runtime = Arc::new(Runtime::default());
    maintainer::register(registry, runtime.clone())?;
    registry.register_recovery_repair(Arc::new(admin::IndexRecovery {
        runtime: runtime.clone(),
    }));
    Ok(runtime)
}
