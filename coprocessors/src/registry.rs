//! The [`Registry`]: names to observer factories, and the engine's coprocessor loader.
//!
//! A table descriptor lists coprocessors by registered name; when the engine opens the
//! table, creates it or its list changes, it asks the registry (set as
//! `Config::coprocessor_loader`) for a [`CoprocessorHost`] built from those names. Invariants:
//! a name is registered at most once; loading fails with [`Error::Coprocessor`], building
//! nothing, if any listed name is unknown or its factory fails or panics; the registry keeps
//! only weak references to the hosts it built (for [`Registry::metrics`]), so dropping a
//! table or an engine frees them.

use crate::host::{CoprocessorHost, CoprocessorMetrics, Loaded};
use crate::observer::RegionObserver;
use crate::plugin::PluginRuntime;
use crate::read_only::ReadOnlyHooks;
use basalt_core::coprocessor::RegionHooks;
use basalt_core::HooksLoader;
use basalt_core::RecoveryRepair;
use basalt_core::{
    plugin_id_of, CoprocessorDescriptor, Error, PluginKind, PluginSource, Result, TableDescriptor,
    TableName,
};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// A coprocessor's string arguments, as the table descriptor lists them.
pub type Args = BTreeMap<String, String>;

/// Builds one observer instance from its arguments (a bad argument is an error).
pub type Factory = dyn Fn(&Args) -> Result<Arc<dyn RegionObserver>> + Send + Sync;

/// The timeout of one hook call when the descriptor sets none (HBase has none; a hook
/// under row locks should never run this long).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Names to factories; the engine's coprocessor loader.
///
/// ```
/// use basalt_coprocessors::{Registry, RegionObserver};
/// use std::sync::Arc;
/// struct Noop;
/// impl RegionObserver for Noop {}
/// let registry = Arc::new(Registry::new());
/// registry.register("noop", |_args| Ok(Arc::new(Noop) as Arc<dyn RegionObserver>)).unwrap();
/// let config = basalt_core::Config::new("/tmp/basalt-doc-cp").coprocessor_loader(registry.clone());
/// assert!(config.coprocessor_loader.is_some());
/// ```
pub struct Registry {
    factories: RwLock<HashMap<String, Arc<Factory>>>,
    default_timeout: Duration,
    hosts: Mutex<HashMap<TableName, Weak<CoprocessorHost>>>,
    repairs: RwLock<Vec<Arc<dyn RecoveryRepair>>>,
    read_only_when_missing: bool,
    /// Runs coprocessors named `plugin:{sha256}`, if set.
    plugins: RwLock<Option<Arc<dyn PluginRuntime>>>,
    /// Where plugins' bytes are read (bound by the engine at open).
    plugin_source: RwLock<Option<Arc<dyn PluginSource>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("names", &self.names())
            .field("default_timeout", &self.default_timeout)
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry with the [`DEFAULT_TIMEOUT`].
    pub fn new() -> Self {
        Self::with_default_timeout(DEFAULT_TIMEOUT)
    }

    /// An empty registry whose hooks time out after `timeout` unless a descriptor says
    /// otherwise.
    pub fn with_default_timeout(timeout: Duration) -> Self {
        Registry {
            factories: RwLock::new(HashMap::new()),
            default_timeout: timeout,
            hosts: Mutex::new(HashMap::new()),
            repairs: RwLock::new(Vec::new()),
            read_only_when_missing: false,
            plugins: RwLock::new(None),
            plugin_source: RwLock::new(None),
        }
    }

    /// This registry, but a table listing a coprocessor it does not have opens read-only
    /// ([`ReadOnlyHooks`]: reads work, writes fail with `Error::ReadOnlyTable` naming the
    /// missing coprocessors) instead of failing to open; for tools that look at a data
    /// directory without the application's code. The same holds for a table created, or
    /// changed, to list a name this registry does not have: it is read-only from then on.
    pub fn read_only_when_missing(mut self) -> Self {
        self.read_only_when_missing = true;
        self
    }

    /// Runs coprocessors named `plugin:{sha256}` (uploaded with `Admin::upload_plugin`)
    /// with `runtime`.
    pub fn set_plugin_runtime(&self, runtime: Arc<dyn PluginRuntime>) {
        *self.plugins.write() = Some(runtime);
    }

    /// The plugin runtime, if set.
    pub fn plugin_runtime(&self) -> Option<Arc<dyn PluginRuntime>> {
        self.plugins.read().clone()
    }

    /// The coprocessors `table` lists that this registry does not have, in list order.
    pub fn missing(&self, table: &TableDescriptor) -> Vec<String> {
        table
            .coprocessors
            .iter()
            .filter(|d| !self.contains(&d.name))
            .map(|d| d.name.clone())
            .collect()
    }

    /// Registers a factory under `name`; fails if the name is taken.
    pub fn register<F>(&self, name: impl Into<String>, factory: F) -> Result<()>
    where
        F: Fn(&Args) -> Result<Arc<dyn RegionObserver>> + Send + Sync + 'static,
    {
        let name = name.into();
        let mut map = self.factories.write();
        if map.contains_key(&name) {
            return Err(Error::bad_argument(format!(
                "coprocessor {name} is already registered"
            )));
        }
        map.insert(name, Arc::new(factory));
        Ok(())
    }

    /// Adds a verification and repair of derived data that a connection opened with this
    /// registry runs after a salvage or an offline repair (see
    /// [`basalt_core::RecoveryRepair`]); run in registration order.
    pub fn register_recovery_repair(&self, repair: Arc<dyn RecoveryRepair>) {
        self.repairs.write().push(repair);
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.factories.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// True when `name` is registered, or names a plugin and a plugin runtime is set.
    pub fn contains(&self, name: &str) -> bool {
        if plugin_id_of(name).is_some() {
            return self.plugins.read().is_some();
        }
        self.factories.read().contains_key(name)
    }

    /// The host this registry last built for `table`, while the engine still uses it.
    pub fn host(&self, table: &TableName) -> Option<Arc<CoprocessorHost>> {
        self.hosts.lock().get(table).and_then(Weak::upgrade)
    }

    /// The counters of `table`'s coprocessors, in run order (empty when it has none).
    pub fn metrics(&self, table: &TableName) -> Vec<CoprocessorMetrics> {
        self.host(table).map(|h| h.metrics()).unwrap_or_default()
    }

    fn build(&self, table: &TableDescriptor) -> Result<CoprocessorHost> {
        let mut chain = Vec::with_capacity(table.coprocessors.len());
        for d in &table.coprocessors {
            if let Some(id) = plugin_id_of(&d.name) {
                let observer = self.plugin_observer(&table.name, id, d)?;
                chain.push(Loaded::new(d, self.default_timeout, observer));
                continue;
            }
            let factory =
                self.factories
                    .read()
                    .get(&d.name)
                    .cloned()
                    .ok_or_else(|| Error::Coprocessor {
                        name: d.name.clone(),
                        msg: format!("not registered (table {})", table.name),
                    })?;
            let observer = std::panic::catch_unwind(AssertUnwindSafe(|| factory(&d.args)))
                .map_err(|_| Error::Coprocessor {
                    name: d.name.clone(),
                    msg: "factory panicked".into(),
                })?
                .map_err(|e| match e {
                    e @ Error::Coprocessor { .. } => e,
                    e => Error::Coprocessor {
                        name: d.name.clone(),
                        msg: format!("factory failed: {e}"),
                    },
                })?;
            chain.push(Loaded::new(d, self.default_timeout, observer));
        }
        Ok(CoprocessorHost::new(table.name.clone(), chain))
    }

    /// Plugin `id`'s observer, configured by `d`.
    fn plugin_observer(
        &self,
        table: &TableName,
        id: &str,
        d: &CoprocessorDescriptor,
    ) -> Result<Arc<dyn RegionObserver>> {
        let failed = |msg: String| Error::Coprocessor {
            name: d.name.clone(),
            msg,
        };
        let runtime = self
            .plugin_runtime()
            .ok_or_else(|| failed("no plugin runtime is loaded here".into()))?;
        let source = self
            .plugin_source
            .read()
            .clone()
            .ok_or_else(|| failed("the engine gave no plugin store".into()))?;
        let bytes = source.plugin_bytes(id)?;
        runtime.observer(table, id, &bytes, d).map_err(|e| match e {
            e @ Error::Coprocessor { .. } => e,
            e => failed(format!("plugin failed to load: {e}")),
        })
    }
}

impl HooksLoader for Registry {
    fn load(&self, table: &TableDescriptor) -> Result<Arc<dyn RegionHooks>> {
        if self.read_only_when_missing {
            let missing = self.missing(table);
            if !missing.is_empty() {
                return Ok(Arc::new(ReadOnlyHooks::new(table.name.clone(), missing)));
            }
        }
        let host = Arc::new(self.build(table)?);
        let mut hosts = self.hosts.lock();
        hosts.retain(|_, w| w.strong_count() > 0);
        hosts.insert(table.name.clone(), Arc::downgrade(&host));
        Ok(host)
    }

    fn recovery_repairs(&self) -> Vec<Arc<dyn RecoveryRepair>> {
        self.repairs.read().clone()
    }

    fn validate_plugin(&self, bytes: &[u8]) -> Result<PluginKind> {
        match self.plugin_runtime() {
            Some(r) => r.validate(bytes),
            None => Err(Error::bad_argument(
                "no plugin runtime is loaded here (basalt-plugins' PluginHost)",
            )),
        }
    }

    fn bind_plugins(&self, source: Arc<dyn PluginSource>) {
        *self.plugin_source.write() = Some(source);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use basalt_core::{ColumnFamilyDescriptor, CoprocessorDescriptor};

    struct Noop;
    impl RegionObserver for Noop {}

    fn desc(cps: &[(&str, u32)]) -> TableDescriptor {
        cps.iter().fold(
            TableDescriptor::new(TableName::parse("t").unwrap())
                .family(ColumnFamilyDescriptor::new("f")),
            |d, (n, p)| d.coprocessor(CoprocessorDescriptor::new(*n).priority(*p)),
        )
    }

    fn registry() -> Registry {
        let r = Registry::new();
        for n in ["a", "b", "c"] {
            r.register(n, |_| Ok(Arc::new(Noop) as Arc<dyn RegionObserver>))
                .unwrap();
        }
        r.register("panics", |_| panic!("factory bug")).unwrap();
        r
    }

    #[test]
    fn chains_sort_by_priority_then_load_order() {
        let r = registry();
        let _hooks = r.load(&desc(&[("c", 7), ("a", 3), ("b", 7)])).unwrap();
        let host = r.host(&TableName::parse("t").unwrap()).unwrap();
        assert_eq!(host.loaded(), ["a", "c", "b"]);
        let m = host.metrics();
        assert!(m.iter().all(|m| m.loaded && m.calls == 0));
    }

    #[test]
    fn unknown_names_and_panicking_factories_are_errors() {
        let r = registry();
        assert!(r
            .register("a", |_| Ok(Arc::new(Noop) as Arc<dyn RegionObserver>))
            .is_err());
        match r.load(&desc(&[("a", 1), ("zzz", 1)])) {
            Err(Error::Coprocessor { name, .. }) => assert_eq!(name, "zzz"),
            other => panic!("{other:?}"),
        }
        match r.load(&desc(&[("panics", 1)])) {
            Err(Error::Coprocessor { name, msg }) => {
                assert_eq!(name, "panics");
                assert!(msg.contains("panicked"));
            }
            other => panic!("{other:?}"),
        }
        // Nothing was built for the table.
        assert!(r.metrics(&TableName::parse("t").unwrap()).is_empty());
    }
}
