//! The seam to a sandboxed plugin runtime: [`PluginRuntime`] turns an uploaded plugin's
//! bytes into an observer. The registry resolves every coprocessor named
//! `plugin:{sha256}` through it, reading the bytes from the engine's object space; the
//! `basalt-plugins` crate implements it with wasmtime, so this crate links no runtime.
//!
//! Invariant: the runtime validates (compiles) bytes before the engine stores them, so an
//! attachment only ever names bytes that compiled once.

use crate::observer::RegionObserver;
use basalt_core::{CoprocessorDescriptor, PluginKind, Result, TableName};
use bytes::Bytes;
use std::sync::Arc;

/// Runs uploaded plugins.
pub trait PluginRuntime: Send + Sync + std::fmt::Debug {
    /// Checks that `bytes` are a plugin this runtime can run, and what they export.
    fn validate(&self, bytes: &[u8]) -> Result<PluginKind>;

    /// The observer of plugin `id` (whose bytes are `bytes`) for `table`, as its
    /// attachment `cp` configures it (arguments, timeout). An error refuses the attachment.
    fn observer(
        &self,
        table: &TableName,
        id: &str,
        bytes: &Bytes,
        cp: &CoprocessorDescriptor,
    ) -> Result<Arc<dyn RegionObserver>>;
}
