//! Schema changes: namespaces, tables, column families, enable/disable, flush on demand.
//!
//! Every change is validated first, then written to the catalog in one atomic update, then
//! applied to the open regions; a failed validation or catalog write changes nothing.
//!
//! The engine observer (`Config::observer`) sees create, delete, enable and disable here
//! (`pre_*` before anything changes, able to veto; `post_*` after); table modifications go
//! through [`Engine::observed_modify`] (the `Admin` calls do).

use super::recovery::open_region;
use super::{Engine, TableState};
use crate::catalog::RegionEntry;
use crate::error::{Error, Result};
use crate::region::{Region, RegionInfo, Store};
use crate::schema::split::{validate_split_keys, SplitAlgorithm};
use crate::schema::{validate_namespace, ColumnFamilyDescriptor, TableDescriptor, TableName};
use crate::schema::{DEFAULT_NAMESPACE, SYSTEM_NAMESPACE};
use bytes::Bytes;
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How a new table is pre-split into regions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PreSplit {
    /// One region.
    #[default]
    None,
    /// Explicit split keys (n keys give n + 1 regions), as `create 't','cf',{SPLITS=>[..]}`.
    Keys(Vec<Vec<u8>>),
    /// A region count with one of HBase's split algorithms.
    Algorithm(SplitAlgorithm, usize),
}

impl Engine {
    /// Creates a namespace.
    pub(crate) fn create_namespace(&self, ns: &str) -> Result<()> {
        self.check_open()?;
        validate_namespace(ns)?;
        self.catalog.update(|s| {
            if !s.namespaces.insert(ns.to_string()) {
                return Err(Error::NamespaceExists(ns.to_string()));
            }
            Ok(())
        })
    }

    /// Deletes an empty namespace (never `default` or the system namespace).
    pub(crate) fn delete_namespace(&self, ns: &str) -> Result<()> {
        self.check_open()?;
        if ns == DEFAULT_NAMESPACE || ns == SYSTEM_NAMESPACE {
            return Err(Error::bad_argument(format!(
                "namespace {ns} cannot be deleted"
            )));
        }
        self.catalog.update(|s| {
            if !s.namespaces.contains(ns) {
                return Err(Error::NamespaceNotFound(ns.to_string()));
            }
            if s.tables
                .values()
                .any(|t| t.descriptor.name.namespace() == ns)
            {
                return Err(Error::bad_argument(format!(
                    "namespace {ns} still has tables"
                )));
            }
            s.namespaces.remove(ns);
            Ok(())
        })
    }

    /// Every namespace.
    pub(crate) fn list_namespaces(&self) -> Vec<String> {
        self.catalog.snapshot().namespaces.into_iter().collect()
    }

    /// Creates a table, optionally pre-split: the engine observer's `pre_create_table` (which
    /// may veto it), the change, the regions' `post_open`, then `post_create_table`.
    pub(crate) async fn create_table(
        self: &Arc<Self>,
        desc: TableDescriptor,
        split: PreSplit,
    ) -> Result<()> {
        self.check_open()?;
        desc.validate()?;
        let observer = self.config.observer.clone();
        if let Some(o) = &observer {
            o.pre_create_table(&desc).await?;
        }
        self.create_table_unobserved(desc.clone(), split)?;
        if let Ok(t) = self.table(&desc.name) {
            if let Some(hooks) = t.hooks() {
                let regions: Vec<_> = t.regions.read().clone();
                self.hooks_post_open(&t, &hooks, &regions).await;
            }
        }
        match &observer {
            Some(o) => o.post_create_table(&desc).await,
            None => Ok(()),
        }
    }

    fn create_table_unobserved(&self, desc: TableDescriptor, split: PreSplit) -> Result<()> {
        let mut keys = match split {
            PreSplit::None => Vec::new(),
            PreSplit::Keys(k) => validate_split_keys(k)?,
            PreSplit::Algorithm(alg, n) => alg.split(n)?,
        };
        // A salted table starts with (at least) one region per bucket; the caller's keys
        // split buckets further.
        if let Some(salt) = &desc.salt {
            keys.extend(salt.split_keys());
            keys.sort_unstable();
            keys.dedup();
        }
        let name = desc.name.to_string();
        // Loaded before anything is written: a coprocessor that cannot load fails the create.
        let hooks = super::hooks::load_hooks(&self.config, &desc)?;
        let entries = self.catalog.update(|s| {
            if !s.namespaces.contains(desc.name.namespace()) {
                return Err(Error::NamespaceNotFound(desc.name.namespace().to_string()));
            }
            if s.tables.contains_key(&name) {
                return Err(Error::TableExists(name.clone()));
            }
            let mut bounds = Vec::with_capacity(keys.len() + 1);
            let mut start = Bytes::new();
            for k in &keys {
                let k = Bytes::copy_from_slice(k);
                bounds.push((start, k.clone()));
                start = k;
            }
            bounds.push((start, Bytes::new()));
            let mut regions = Vec::with_capacity(bounds.len());
            for (start, end) in bounds {
                regions.push(RegionEntry {
                    id: s.next_region_id,
                    start,
                    end,
                    flushed_seq: 0,
                    files: BTreeMap::new(),
                });
                s.next_region_id += 1;
            }
            s.tables.insert(
                name.clone(),
                crate::catalog::TableEntry {
                    descriptor: desc.clone(),
                    enabled: true,
                    regions: regions.clone(),
                },
            );
            Ok(regions)
        })?;
        let mut regions = Vec::with_capacity(entries.len());
        let mut live = HashSet::new();
        let mut max_seq = 0;
        for e in &entries {
            regions.push(Arc::new(open_region(
                &self.config,
                &desc,
                e,
                &self.cache,
                &mut live,
                &mut max_seq,
            )?));
        }
        self.tables.write().insert(
            desc.name.clone(),
            Arc::new(TableState {
                name: desc.name.clone(),
                key: desc.name.to_string(),
                key_hash: crate::keys::hash::xxh3(desc.name.to_string().as_bytes()),
                descriptor: RwLock::new(desc),
                enabled: AtomicBool::new(true),
                regions: RwLock::new(regions),
                hooks: crate::coprocessor::HookSlot::new(hooks),
            }),
        );
        Ok(())
    }

    /// Every table's descriptor.
    pub(crate) fn list_tables(&self) -> Vec<TableDescriptor> {
        self.tables
            .read()
            .values()
            .map(|t| t.descriptor.read().clone())
            .collect()
    }

    /// A table's descriptor.
    pub(crate) fn describe(&self, name: &TableName) -> Result<TableDescriptor> {
        Ok(self.table(name)?.descriptor.read().clone())
    }

    /// True when the table exists.
    pub(crate) fn table_exists(&self, name: &TableName) -> bool {
        self.tables.read().contains_key(name)
    }

    /// True when the table is enabled.
    pub(crate) fn is_enabled(&self, name: &TableName) -> Result<bool> {
        Ok(self.table(name)?.enabled.load(Ordering::Acquire))
    }

    /// Flushes every region of a table.
    pub(crate) async fn flush_table(self: &Arc<Self>, name: &TableName) -> Result<()> {
        let t = self.table(name)?;
        // No split or merge meanwhile: each region listed now is flushed, none retired.
        let _ops = self.region_ops.lock().await;
        let regions: Vec<_> = t.regions.read().clone();
        for r in regions {
            self.flush_region(&r).await?;
        }
        Ok(())
    }

    /// Disables a table: flushes it, then refuses reads and writes until enabled. Its
    /// regions' close hooks run around the flush.
    pub(crate) async fn disable_table(self: &Arc<Self>, name: &TableName) -> Result<()> {
        let t = self.table(name)?;
        require_enabled(&t, true)?;
        if let Some(o) = &self.config.observer {
            o.pre_disable_table(name).await?;
        }
        let hooks = t.hooks();
        let regions: Vec<_> = t.regions.read().clone();
        if let Some(h) = &hooks {
            self.hooks_close(&t, h, &regions, false).await;
        }
        self.flush_table(name).await?;
        self.set_enabled(&t, false)?;
        if let Some(h) = &hooks {
            self.hooks_close(&t, h, &regions, true).await;
        }
        match &self.config.observer {
            Some(o) => o.post_disable_table(name).await,
            None => Ok(()),
        }
    }

    /// Enables a disabled table; its regions' `post_open` follows.
    pub(crate) async fn enable_table(self: &Arc<Self>, name: &TableName) -> Result<()> {
        let t = self.table(name)?;
        require_enabled(&t, false)?;
        if let Some(o) = &self.config.observer {
            o.pre_enable_table(name).await?;
        }
        self.set_enabled(&t, true)?;
        if let Some(h) = t.hooks() {
            let regions: Vec<_> = t.regions.read().clone();
            self.hooks_post_open(&t, &h, &regions).await;
        }
        match &self.config.observer {
            Some(o) => o.post_enable_table(name).await,
            None => Ok(()),
        }
    }

    fn set_enabled(&self, t: &TableState, enabled: bool) -> Result<()> {
        let key = t.name.to_string();
        self.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.enabled = enabled;
            Ok(())
        })?;
        t.enabled.store(enabled, Ordering::Release);
        Ok(())
    }

    /// Deletes a disabled table and its files (its regions were closed at disable).
    pub(crate) async fn delete_table(&self, name: &TableName) -> Result<()> {
        let t = self.table(name)?;
        require_enabled(&t, false)?;
        if let Some(o) = &self.config.observer {
            o.pre_delete_table(name).await?;
        }
        self.delete_table_unobserved(name)?;
        match &self.config.observer {
            Some(o) => o.post_delete_table(name).await,
            None => Ok(()),
        }
    }

    fn delete_table_unobserved(&self, name: &TableName) -> Result<()> {
        let key = name.to_string();
        let removed = self.catalog.update(|s| {
            s.tables
                .remove(&key)
                .ok_or_else(|| Error::TableNotFound(key.clone()))
        })?;
        self.tables.write().remove(name);
        for r in &removed.regions {
            for f in r.files.values().flatten() {
                if let Err(e) = self.config.fs.remove_file(&self.file_path(f.id)) {
                    tracing::warn!(file = f.id, error = %e, "could not remove store file of deleted table");
                }
            }
        }
        Ok(())
    }

    /// Adds a column family to a table.
    pub(crate) fn add_family(&self, name: &TableName, cf: ColumnFamilyDescriptor) -> Result<()> {
        let t = self.table(name)?;
        cf.validate()?;
        let mut desc = t.descriptor.read().clone();
        if desc.get_family(&cf.name).is_some() {
            return Err(Error::bad_argument(format!(
                "column family {} already exists in {name}",
                cf.name_str()
            )));
        }
        desc.families.push(cf.clone());
        self.store_descriptor(&t, desc)?;
        for r in t.regions.read().iter() {
            r.stores.write().insert(
                cf.name.clone(),
                Arc::new(Store::new(cf.clone(), Vec::new())),
            );
        }
        Ok(())
    }

    /// Changes a column family's settings (they apply to reads at once, to files as written).
    pub(crate) fn modify_family(&self, name: &TableName, cf: ColumnFamilyDescriptor) -> Result<()> {
        let t = self.table(name)?;
        cf.validate()?;
        let mut desc = t.descriptor.read().clone();
        let slot = desc
            .families
            .iter_mut()
            .find(|f| f.name == cf.name)
            .ok_or_else(|| Error::FamilyNotFound {
                table: name.to_string(),
                family: cf.name_str(),
            })?;
        *slot = cf.clone();
        self.store_descriptor(&t, desc)?;
        for r in t.regions.read().iter() {
            if let Some(s) = r.store(&cf.name) {
                s.set_descriptor(cf.clone());
            }
        }
        Ok(())
    }

    /// Removes a column family and its data (a table keeps at least one family).
    pub(crate) fn remove_family(&self, name: &TableName, family: &[u8]) -> Result<()> {
        let t = self.table(name)?;
        let mut desc = t.descriptor.read().clone();
        let before = desc.families.len();
        desc.families.retain(|f| f.name.as_ref() != family);
        if desc.families.len() == before {
            return Err(Error::FamilyNotFound {
                table: name.to_string(),
                family: String::from_utf8_lossy(family).into_owned(),
            });
        }
        if desc.families.is_empty() {
            return Err(Error::bad_argument(format!(
                "cannot remove the only column family of {name}"
            )));
        }
        let key = name.to_string();
        let fam = Bytes::copy_from_slice(family);
        let dropped = self.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.descriptor = desc.clone();
            let mut dropped = Vec::new();
            for r in &mut e.regions {
                if let Some(files) = r.files.remove(&fam) {
                    dropped.extend(files.into_iter().map(|f| f.id));
                }
            }
            Ok(dropped)
        })?;
        *t.descriptor.write() = desc;
        for r in t.regions.read().iter() {
            r.stores.write().remove(family);
        }
        for id in dropped {
            if let Err(e) = self.config.fs.remove_file(&self.file_path(id)) {
                tracing::warn!(file = id, error = %e, "could not remove store file of removed family");
            }
        }
        Ok(())
    }

    fn store_descriptor(&self, t: &TableState, desc: TableDescriptor) -> Result<()> {
        desc.validate()?;
        let key = t.name.to_string();
        self.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.descriptor = desc.clone();
            Ok(())
        })?;
        *t.descriptor.write() = desc;
        Ok(())
    }

    /// Facts about every region of a table, in key order.
    pub(crate) fn regions(&self, name: &TableName) -> Result<Vec<RegionInfo>> {
        let t = self.table(name)?;
        let regions: Vec<Arc<Region>> = t.regions.read().clone();
        Ok(regions.iter().map(|r| r.info()).collect())
    }
}

/// Fails with [`Error::TableState`] unless the table's enabled flag is `enabled`.
fn require_enabled(t: &TableState, enabled: bool) -> Result<()> {
    if t.enabled.load(Ordering::Acquire) == enabled {
        return Ok(());
    }
    Err(Error::TableState {
        table: t.name.to_string(),
        expected: if enabled { "enabled" } else { "disabled" },
    })
}
