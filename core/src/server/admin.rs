//! Schema changes: namespaces, tables, column families, enable/disable, flush on demand;
//! a table's coprocessors changed without a restart; what recovery found.
//!
//! Coprocessor changes: the new chain is loaded before anything changes (a list that cannot
//! load changes nothing), then the table's regions are reopened as far as the hooks can
//! tell, as HBase's modify-table does.
//!
//! Every change is validated first, then written to the catalog in one atomic update, then
//! applied to the open regions; a failed validation or catalog write changes nothing.
//!
//! The engine observer (`Config::observer`) sees create, delete, enable and disable here
//! (`pre_*` before anything changes, able to veto; `post_*` after); table modifications go
//! through [`Engine::observed_modify`] (the `Admin` calls do).

use crate::server::config::RecoveryRepairOutcome;
use crate::server::hooks::lifecycle::{self, load_hooks};
use crate::server::hooks::tables::{self, TableChange};
use crate::server::open::recovery::OfflineRegion;
use crate::server::open::regions::open_region;

use crate::catalog::RegionEntry;
use crate::error::{Error, Result};
use crate::region::{Region, RegionInfo, Store};
use crate::schema::split::{validate_split_keys, SplitAlgorithm};
use crate::schema::CoprocessorDescriptor;
use crate::schema::{validate_namespace, ColumnFamilyDescriptor, TableDescriptor, TableName};
use crate::schema::{DEFAULT_NAMESPACE, SYSTEM_NAMESPACE};
use crate::server::shared::TableState;
use crate::server::Engine;
use bytes::Bytes;
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How a new table is pre-split into regions.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
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
        self.shared.check_open()?;
        validate_namespace(ns)?;
        self.shared.catalog.update(|s| {
            if !s.namespaces.insert(ns.to_string()) {
                return Err(Error::NamespaceExists(ns.to_string()));
            }
            Ok(())
        })
    }

    /// Deletes an empty namespace (never `default` or the system namespace).
    pub(crate) fn delete_namespace(&self, ns: &str) -> Result<()> {
        self.shared.check_open()?;
        if ns == DEFAULT_NAMESPACE || ns == SYSTEM_NAMESPACE {
            return Err(Error::bad_argument(format!(
                "namespace {ns} cannot be deleted"
            )));
        }
        self.shared.catalog.update(|s| {
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
        self.shared
            .catalog
            .snapshot()
            .namespaces
            .into_iter()
            .collect()
    }

    /// Creates a table, optionally pre-split: the engine observer's `pre_create_table` (which
    /// may veto it), the change, the regions' `post_open`, then `post_create_table`.
    pub(crate) async fn create_table(
        self: &Arc<Self>,
        desc: TableDescriptor,
        split: PreSplit,
    ) -> Result<()> {
        self.shared.check_open()?;
        desc.validate()?;
        let config = &self.shared.config;
        tables::before(config, TableChange::Create(&desc)).await?;
        self.create_table_unobserved(desc.clone(), split)?;
        if let Ok(t) = self.shared.table(&desc.name) {
            let ids: Vec<u64> = t.regions.read().iter().map(|r| r.id).collect();
            self.shared.hand_over(&desc.name, &[], &ids).await?;
            if let Some(hooks) = t.hooks() {
                let regions: Vec<_> = t.regions.read().clone();
                lifecycle::hooks_post_open(&self.reads, &t, &hooks, &regions).await;
            }
        }
        tables::after(config, TableChange::Create(&desc)).await
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
        desc.check_split_keys(&keys)?;
        let name = desc.name.to_string();
        // Loaded before anything is written: a coprocessor that cannot load fails the create.
        let hooks = load_hooks(&self.shared.config, &desc)?;
        let writers: Vec<u64> = Some(self.shared.catalog.writer())
            .filter(|w| *w > 0)
            .into_iter()
            .collect();
        let entries = self.shared.catalog.update(|s| {
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
                    generation: 1,
                    // Its edits go to this engine's WAL writer (none on a directory).
                    writers: writers.clone(),
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
                &self.shared.objects,
                &desc,
                e,
                &self.shared.cache,
                &mut live,
                &mut max_seq,
            )?));
        }
        self.shared.tables.write().insert(
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
        self.shared
            .tables
            .read()
            .values()
            .map(|t| t.descriptor.read().clone())
            .collect()
    }

    /// A table's descriptor.
    pub(crate) fn describe(&self, name: &TableName) -> Result<TableDescriptor> {
        Ok(self.shared.table(name)?.descriptor.read().clone())
    }

    /// True when the table exists.
    pub(crate) fn table_exists(&self, name: &TableName) -> bool {
        self.shared.tables.read().contains_key(name)
    }

    /// True when the table is enabled.
    pub(crate) fn is_enabled(&self, name: &TableName) -> Result<bool> {
        Ok(self.shared.table(name)?.enabled.load(Ordering::Acquire))
    }

    /// Disables a table: flushes it, then refuses reads and writes until enabled. Its
    /// regions' close hooks run around the flush.
    pub(crate) async fn disable_table(self: &Arc<Self>, name: &TableName) -> Result<()> {
        let t = self.shared.whole_table(name)?;
        require_enabled(&t, true)?;
        tables::before(&self.shared.config, TableChange::Disable(name)).await?;
        let hooks = t.hooks();
        let regions: Vec<_> = t.regions.read().clone();
        if let Some(h) = &hooks {
            lifecycle::hooks_close(&self.reads, &t, h, &regions, false).await;
        }
        self.upkeep.flush_table(name).await?;
        self.set_enabled(&t, false)?;
        if let Some(h) = &hooks {
            lifecycle::hooks_close(&self.reads, &t, h, &regions, true).await;
        }
        tables::after(&self.shared.config, TableChange::Disable(name)).await
    }

    /// Enables a disabled table; its regions' `post_open` follows.
    pub(crate) async fn enable_table(self: &Arc<Self>, name: &TableName) -> Result<()> {
        let t = self.shared.whole_table(name)?;
        require_enabled(&t, false)?;
        tables::before(&self.shared.config, TableChange::Enable(name)).await?;
        self.set_enabled(&t, true)?;
        if let Some(h) = t.hooks() {
            let regions: Vec<_> = t.regions.read().clone();
            lifecycle::hooks_post_open(&self.reads, &t, &h, &regions).await;
        }
        tables::after(&self.shared.config, TableChange::Enable(name)).await
    }

    fn set_enabled(&self, t: &TableState, enabled: bool) -> Result<()> {
        let key = t.name.to_string();
        self.shared.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.enabled = enabled;
            Ok(())
        })?;
        t.enabled.store(enabled, Ordering::Release);
        Ok(())
    }

    /// Deletes a disabled table and its files (its regions were closed at disable).
    pub(crate) async fn delete_table(&self, name: &TableName) -> Result<()> {
        let t = self.shared.whole_table(name)?;
        require_enabled(&t, false)?;
        tables::before(&self.shared.config, TableChange::Delete(name)).await?;
        let ids: Vec<u64> = t.regions.read().iter().map(|r| r.id).collect();
        self.delete_table_unobserved(name)?;
        self.shared.hand_over(name, &ids, &[]).await?;
        tables::after(&self.shared.config, TableChange::Delete(name)).await
    }

    fn delete_table_unobserved(&self, name: &TableName) -> Result<()> {
        let key = name.to_string();
        let unlisted = self.shared.catalog.update(|s| {
            let removed = s
                .tables
                .remove(&key)
                .ok_or_else(|| Error::TableNotFound(key.clone()))?;
            let files: Vec<crate::catalog::FileEntry> = removed
                .regions
                .iter()
                .flat_map(|r| r.files.values().flatten())
                .filter(|f| !s.lists_file(f.id))
                .cloned()
                .collect();
            Ok(files)
        })?;
        self.shared.tables.write().remove(name);
        for f in &unlisted {
            if let Err(e) = self.shared.objects.delete(&f.name()) {
                tracing::warn!(file = f.id, error = %e, "could not remove store file of deleted table");
            }
        }
        Ok(())
    }

    /// Adds a column family to a table.
    pub(crate) fn add_family(&self, name: &TableName, cf: ColumnFamilyDescriptor) -> Result<()> {
        let t = self.shared.whole_table(name)?;
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
        let t = self.shared.whole_table(name)?;
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

    /// Removes a column family and its data (a table keeps at least one family, and its
    /// reserved family of local index rows while it has any: refused).
    pub(crate) fn remove_family(&self, name: &TableName, family: &[u8]) -> Result<()> {
        if crate::schema::is_local_family(family) {
            return Err(Error::bad_argument(format!(
                "family {} of {name} holds its local index rows; drop the local indexes \
                 instead (the family goes with the table)",
                String::from_utf8_lossy(family)
            )));
        }
        let t = self.shared.whole_table(name)?;
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
        let dropped = self.shared.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.descriptor = desc.clone();
            let mut dropped = Vec::new();
            for r in &mut e.regions {
                if let Some(files) = r.files.remove(&fam) {
                    dropped.extend(files);
                }
            }
            // Only the files no other region (of any table) lists.
            dropped.retain(|f| !s.lists_file(f.id));
            Ok(dropped
                .iter()
                .map(crate::catalog::FileEntry::name)
                .collect::<Vec<_>>())
        })?;
        *t.descriptor.write() = desc;
        for r in t.regions.read().iter() {
            r.stores.write().remove(family);
        }
        for name in dropped {
            if let Err(e) = self.shared.objects.delete(&name) {
                tracing::warn!(file = %name, error = %e, "could not remove store file of removed family");
            }
        }
        Ok(())
    }

    fn store_descriptor(&self, t: &TableState, desc: TableDescriptor) -> Result<()> {
        desc.validate()?;
        let key = t.name.to_string();
        self.shared.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.descriptor = desc.clone();
            Ok(())
        })?;
        *t.descriptor.write() = desc;
        Ok(())
    }

    /// Facts about every region of a table, in key order.
    pub(crate) fn regions(&self, name: &TableName) -> Result<Vec<RegionInfo>> {
        let t = self.shared.table(name)?;
        let regions: Vec<Arc<Region>> = t.regions.read().clone();
        Ok(regions.iter().map(|r| r.info()).collect())
    }

    /// Replaces a table's coprocessor list (a schema change: the new chain serves the next
    /// operation, no restart). The new hooks are loaded before anything else happens, so a
    /// list that cannot load changes nothing. On an enabled table the change reopens the
    /// table's regions as far as the hooks can tell, as HBase's modify-table does: the old
    /// chain's `pre_close` for every region, the swap (catalog, then the live chain), the old
    /// chain's `post_close`, then the new chain's `post_open` for every region. The regions
    /// keep serving throughout; an operation sees either the old chain or the new one.
    pub(crate) async fn set_coprocessors(
        self: &Arc<Self>,
        name: &TableName,
        coprocessors: Vec<CoprocessorDescriptor>,
    ) -> Result<()> {
        let t = self.shared.whole_table(name)?;
        let mut desc = t.descriptor.read().clone();
        desc.coprocessors = coprocessors;
        desc.validate()?;
        let hooks = load_hooks(&self.shared.config, &desc)?;
        let open = t.enabled.load(Ordering::Acquire);
        let regions: Vec<_> = if open {
            t.regions.read().clone()
        } else {
            Vec::new()
        };
        let old = t.hooks();
        if let Some(h) = &old {
            lifecycle::hooks_close(&self.reads, &t, h, &regions, false).await;
        }
        let key = t.name.to_string();
        self.shared.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.descriptor = desc.clone();
            Ok(())
        })?;
        *t.descriptor.write() = desc;
        t.hooks.set(hooks);
        if let Some(h) = &old {
            lifecycle::hooks_close(&self.reads, &t, h, &regions, true).await;
        }
        if let Some(h) = t.hooks() {
            lifecycle::hooks_post_open(&self.reads, &t, &h, &regions).await;
        }
        Ok(())
    }

    /// Adds a coprocessor to a table (loaded after those already listed); see
    /// [`Engine::set_coprocessors`] for the hooks it runs.
    pub(crate) async fn add_coprocessor(
        self: &Arc<Self>,
        name: &TableName,
        cp: CoprocessorDescriptor,
    ) -> Result<()> {
        let mut list = self
            .shared
            .table(name)?
            .descriptor
            .read()
            .coprocessors
            .clone();
        if list.iter().any(|c| c.name == cp.name) {
            return Err(Error::bad_argument(format!(
                "table {name} already has coprocessor {}",
                cp.name
            )));
        }
        list.push(cp);
        self.set_coprocessors(name, list).await
    }

    /// Removes a coprocessor from a table by name; see [`Engine::set_coprocessors`] for the
    /// hooks it runs.
    pub(crate) async fn remove_coprocessor(
        self: &Arc<Self>,
        name: &TableName,
        cp_name: &str,
    ) -> Result<()> {
        let mut list = self
            .shared
            .table(name)?
            .descriptor
            .read()
            .coprocessors
            .clone();
        let before = list.len();
        list.retain(|c| c.name != cp_name);
        if list.len() == before {
            return Err(Error::bad_argument(format!(
                "table {name} has no coprocessor {cp_name}"
            )));
        }
        self.set_coprocessors(name, list).await
    }

    /// Runs a table change with the engine observer's `pre_modify_table` before it and
    /// `post_modify_table` after it; `proposed` says what the descriptor becomes. `change` is a
    /// future, so nothing of it runs before the pre-hook.
    pub(crate) async fn observed_modify(
        &self,
        name: &TableName,
        proposed: impl FnOnce(&TableDescriptor) -> TableDescriptor,
        change: impl Future<Output = Result<()>>,
    ) -> Result<()> {
        self.shared.whole_table(name)?;
        let config = &self.shared.config;
        if config.observer.is_none() {
            return change.await;
        }
        let old = self.describe(name)?;
        let new = proposed(&old);
        tables::before(config, TableChange::Modify(&old, &new)).await?;
        change.await?;
        let now = self.describe(name)?;
        tables::after(config, TableChange::Modify(&old, &now)).await
    }

    /// Records what the recovery repairs found ([`RecoveryReport::repairs`]) and makes the
    /// directory's record of tables to verify name only `still_pending` (tables that could
    /// not be verified yet, such as disabled ones), durably.
    pub(crate) fn finish_recovery_repairs(
        &self,
        repairs: Vec<RecoveryRepairOutcome>,
        still_pending: Vec<TableName>,
    ) -> Result<()> {
        crate::server::open::pending::replace(
            &*self.shared.config.fs,
            &self.shared.config.dir,
            still_pending,
        )?;
        self.recovery.write().repairs = repairs;
        Ok(())
    }

    /// Every offline region of every table, in table then key order.
    pub(crate) fn offline_regions(&self) -> Vec<OfflineRegion> {
        let tables: Vec<Arc<TableState>> = self.shared.tables.read().values().cloned().collect();
        let mut out = Vec::new();
        for t in tables {
            for r in t.regions.read().iter() {
                if let Some(fault) = r.offline.get().filter(|f| !f.elsewhere) {
                    out.push(OfflineRegion {
                        table: t.name.clone(),
                        region_id: r.id,
                        start: r.start.clone(),
                        end: r.end.clone(),
                        file: fault.file.clone(),
                        reason: fault.reason.clone(),
                    });
                }
            }
        }
        out
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
