//! The engine observer's table hooks ([`crate::coprocessor::EngineHooks`]) around a schema
//! change: `pre_*` before it (an error vetoes it, nothing changed), `post_*` after it (its
//! error is the caller's answer, the change stays).
//!
//! Invariant: without an engine observer, nothing is called and nothing allocated.

use crate::error::Result;
use crate::schema::{TableDescriptor, TableName};
use crate::server::config::Config;

/// A table change the engine observer hears of.
#[derive(Clone, Copy)]
pub(crate) enum TableChange<'a> {
    /// A table created (its descriptor).
    Create(&'a TableDescriptor),
    /// A table deleted.
    Delete(&'a TableName),
    /// A table enabled.
    Enable(&'a TableName),
    /// A table disabled.
    Disable(&'a TableName),
    /// A table's descriptor changed from the first to the second (before the change: the
    /// one proposed; after it: the one in force).
    Modify(&'a TableDescriptor, &'a TableDescriptor),
}

/// The observer's `pre_*` hook of `change`, if the engine has an observer.
pub(crate) async fn before(config: &Config, change: TableChange<'_>) -> Result<()> {
    let Some(o) = &config.observer else {
        return Ok(());
    };
    match change {
        TableChange::Create(desc) => o.pre_create_table(desc).await,
        TableChange::Delete(name) => o.pre_delete_table(name).await,
        TableChange::Enable(name) => o.pre_enable_table(name).await,
        TableChange::Disable(name) => o.pre_disable_table(name).await,
        TableChange::Modify(old, new) => o.pre_modify_table(old, new).await,
    }
}

/// The observer's `post_*` hook of `change`, if the engine has an observer.
pub(crate) async fn after(config: &Config, change: TableChange<'_>) -> Result<()> {
    let Some(o) = &config.observer else {
        return Ok(());
    };
    match change {
        TableChange::Create(desc) => o.post_create_table(desc).await,
        TableChange::Delete(name) => o.post_delete_table(name).await,
        TableChange::Enable(name) => o.post_enable_table(name).await,
        TableChange::Disable(name) => o.post_disable_table(name).await,
        TableChange::Modify(old, now) => o.post_modify_table(old, now).await,
    }
}
