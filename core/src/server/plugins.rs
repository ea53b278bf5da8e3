//! Uploaded plugins (sandboxed coprocessors, WebAssembly components): store one, list,
//! describe and delete them, and hand their bytes to the coprocessor loader.
//!
//! Upload: the bytes are bounded ([`MAX_PLUGIN_BYTES`]), validated by the configured
//! loader ([`crate::HooksLoader::validate_plugin`]: it compiles them and checks the world
//! they target), stored under their sha256 (`plugins/{sha256}.wasm`, written whole and
//! durable before anything names it), then listed in the catalog in one update: the commit
//! point. A crash before the update leaves an unlisted object, which the next upload of the
//! same bytes overwrites and the next open removes; after it, the whole plugin.
//!
//! Invariants: the catalog lists a plugin only once its object is durable; a plugin a
//! table's coprocessor list names (`plugin:{sha256}`) is never deleted; the bytes the loader
//! gets are checked against their sha256, so a damaged object never runs.

use crate::catalog::{plugin_path, validate_plugin_id, PluginEntry, PluginKind, PLUGIN_DIR};
use crate::cell::now_ms;
use crate::error::{Error, Result};
use crate::objects::{Objects, PutMode};
use crate::server::config::PluginSource;
use crate::server::shared::EngineShared;
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The largest plugin accepted, in bytes (64 MiB).
pub const MAX_PLUGIN_BYTES: usize = 64 << 20;

/// The coprocessor name under which tables list plugin `id`.
pub fn plugin_coprocessor_name(id: &str) -> String {
    format!("{PLUGIN_PREFIX}{id}")
}

/// The prefix of plugin coprocessor names: `plugin:{sha256}`.
pub const PLUGIN_PREFIX: &str = "plugin:";

/// The plugin id a coprocessor name names, if it names one.
pub fn plugin_id_of(coprocessor: &str) -> Option<&str> {
    coprocessor.strip_prefix(PLUGIN_PREFIX)
}

/// The hex sha256 of `bytes`: a plugin's id.
pub fn plugin_id(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// One uploaded plugin, as [`crate::client::Admin::list_plugins`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PluginInfo {
    /// The hex sha256 of its bytes.
    pub id: String,
    /// What it exports.
    pub kind: PluginKind,
    /// Its size in bytes.
    pub size: u64,
    /// When it was uploaded, in milliseconds since the epoch.
    pub uploaded_ms: u64,
    /// The tables whose coprocessor list names it.
    pub tables: Vec<String>,
}

/// [`PluginSource`] over an engine's objects.
#[derive(Debug)]
pub(crate) struct ObjectPlugins {
    pub(crate) objects: Arc<dyn Objects>,
}

impl PluginSource for ObjectPlugins {
    fn plugin_bytes(&self, id: &str) -> Result<Bytes> {
        validate_plugin_id(id)?;
        let path = plugin_path(id);
        let bytes = match self.objects.read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::PluginNotFound(id.to_string()))
            }
            Err(e) => return Err(e.into()),
        };
        if plugin_id(&bytes) != id {
            return Err(Error::corruption(
                self.objects.locate(&path),
                0,
                "plugin bytes do not hash to their name",
            ));
        }
        Ok(Bytes::from(bytes))
    }
}

/// Validates, stores and lists `bytes` as a plugin; an upload of bytes already listed
/// answers the listed plugin.
pub(crate) fn upload_plugin(shared: &EngineShared, bytes: &[u8]) -> Result<PluginInfo> {
    shared.check_open()?;
    if bytes.is_empty() || bytes.len() > MAX_PLUGIN_BYTES {
        return Err(Error::bad_argument(format!(
            "a plugin is 1 to {MAX_PLUGIN_BYTES} bytes, not {}",
            bytes.len()
        )));
    }
    let id = plugin_id(bytes);
    if shared.catalog.snapshot().plugins.contains_key(&id) {
        return describe_plugin(shared, &id);
    }
    let loader = shared.config.coprocessor_loader.as_ref().ok_or_else(|| {
        Error::bad_argument("this engine has no coprocessor loader, so no plugin runtime")
    })?;
    let kind = loader.validate_plugin(bytes)?;
    shared
        .objects
        .put(&plugin_path(&id), bytes, PutMode::Overwrite)?;
    let entry = PluginEntry {
        size: bytes.len() as u64,
        kind,
        uploaded_ms: now_ms(),
    };
    shared.catalog.update(|s| {
        s.plugins.entry(id.clone()).or_insert_with(|| entry.clone());
        Ok(())
    })?;
    describe_plugin(shared, &id)
}

/// Every uploaded plugin, by id.
pub(crate) fn list_plugins(shared: &EngineShared) -> Vec<PluginInfo> {
    let state = shared.catalog.snapshot();
    state
        .plugins
        .iter()
        .map(|(id, e)| info(&state, id, e))
        .collect()
}

fn info(state: &crate::catalog::CatalogState, id: &str, e: &PluginEntry) -> PluginInfo {
    let name = plugin_coprocessor_name(id);
    PluginInfo {
        id: id.to_string(),
        kind: e.kind,
        size: e.size,
        uploaded_ms: e.uploaded_ms,
        tables: state
            .tables
            .iter()
            .filter(|(_, t)| t.descriptor.coprocessors.iter().any(|c| c.name == name))
            .map(|(n, _)| n.clone())
            .collect(),
    }
}

/// Plugin `id` as listed.
pub(crate) fn describe_plugin(shared: &EngineShared, id: &str) -> Result<PluginInfo> {
    validate_plugin_id(id)?;
    let state = shared.catalog.snapshot();
    let e = state
        .plugins
        .get(id)
        .ok_or_else(|| Error::PluginNotFound(id.to_string()))?;
    Ok(info(&state, id, e))
}

/// Removes plugin `id` from the catalog, then its object; refused while a table lists it.
pub(crate) fn delete_plugin(shared: &EngineShared, id: &str) -> Result<()> {
    shared.check_open()?;
    validate_plugin_id(id)?;
    shared.catalog.update(|s| {
        if !s.plugins.contains_key(id) {
            return Err(Error::PluginNotFound(id.to_string()));
        }
        let users = info(s, id, &s.plugins[id]).tables;
        if !users.is_empty() {
            return Err(Error::bad_argument(format!(
                "plugin {id} is attached to {}; detach it first",
                users.join(", ")
            )));
        }
        s.plugins.remove(id);
        Ok(())
    })?;
    shared.objects.delete(&plugin_path(id))?;
    Ok(())
}

/// Removes plugin objects the catalog does not list (uploads a crash interrupted); the
/// number removed.
pub(crate) fn sweep_unlisted(
    objects: &dyn Objects,
    state: &crate::catalog::CatalogState,
) -> Result<usize> {
    let mut removed = 0;
    for name in objects.list(PLUGIN_DIR)? {
        let id = name
            .strip_prefix(PLUGIN_DIR)
            .and_then(|n| n.strip_prefix('/'))
            .and_then(|n| n.strip_suffix(".wasm"));
        if id.is_some_and(|id| state.plugins.contains_key(id)) {
            continue;
        }
        objects.delete(&name)?;
        removed += 1;
    }
    Ok(removed)
}
