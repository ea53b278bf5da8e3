//! Changing a table's coprocessors without a restart: the new chain is loaded before
//! anything changes (a list that cannot load changes nothing), then the table's regions are
//! reopened as far as the hooks can tell, as HBase's modify-table does.

use super::*;
use crate::error::{Error, Result};
use crate::schema::{CoprocessorDescriptor, TableName};
use crate::server::Engine;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Engine {
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
        let t = self.table(name)?;
        let mut desc = t.descriptor.read().clone();
        desc.coprocessors = coprocessors;
        desc.validate()?;
        let hooks = load_hooks(&self.config, &desc)?;
        let open = t.enabled.load(Ordering::Acquire);
        let regions: Vec<_> = if open {
            t.regions.read().clone()
        } else {
            Vec::new()
        };
        let old = t.hooks();
        if let Some(h) = &old {
            self.hooks_close(&t, h, &regions, false).await;
        }
        let key = t.name.to_string();
        self.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.descriptor = desc.clone();
            Ok(())
        })?;
        *t.descriptor.write() = desc;
        t.hooks.set(hooks);
        if let Some(h) = &old {
            self.hooks_close(&t, h, &regions, true).await;
        }
        if let Some(h) = t.hooks() {
            self.hooks_post_open(&t, &h, &regions).await;
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
        let mut list = self.table(name)?.descriptor.read().coprocessors.clone();
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
        let mut list = self.table(name)?.descriptor.read().coprocessors.clone();
        let before = list.len();
        list.retain(|c| c.name != cp_name);
        if list.len() == before {
            return Err(Error::bad_argument(format!(
                "table {name} has no coprocessor {cp_name}"
            )));
        }
        self.set_coprocessors(name, list).await
    }
}
