//! Table snapshots of indexed tables: [`IndexAdmin::clone_snapshot`] clones a snapshot's
//! data table together with its index tables, renamed for the new table, so the clone
//! maintains its own indexes and never the original's.
//!
//! Invariants: the clone's definitions are the snapshot's with the data table renamed (the
//! index tables follow from it, `ns:<table>.idx.<name>`); every global index of the data
//! table must be in the snapshot (a snapshot taken without its companion tables cannot be
//! cloned with its indexes); the system table lists the clone's indexes after the clone.

use crate::admin::IndexAdmin;
use crate::def::IndexDef;
use crate::maintainer::{ARG_PREFIX, GUARD, MAINTAINER};
use basalt_core::client::Backend;
use basalt_core::{Error, IntoTableName, Result, TableDescriptor, DEFAULT_NAMESPACE};

impl<B: Backend> IndexAdmin<B> {
    /// Clones snapshot `name` as table `new_table`: the snapshot's one data table (the
    /// table not guarded as an index table) becomes `new_table`, each of its index tables
    /// `ns:<new_table>.idx.<index>`, all sharing the snapshot's files; the clone's indexes
    /// are recorded in the system table.
    pub async fn clone_snapshot(&self, name: &str, new_table: impl IntoTableName) -> Result<()> {
        let new_table = new_table.into_table_name()?;
        let admin = self.conn.admin();
        let snap = admin.describe_snapshot(name).await?;
        let data: Vec<&TableDescriptor> = snap
            .descriptors
            .iter()
            .filter(|d| !d.coprocessors.iter().any(|c| c.name == GUARD))
            .collect();
        let [data] = data.as_slice() else {
            return Err(Error::bad_argument(format!(
                "snapshot {name} holds {} data tables; clone them one by one with \
                 Admin::clone_snapshot_tables",
                data.len()
            )));
        };
        let renamed = match new_table.namespace() {
            DEFAULT_NAMESPACE => new_table.qualifier().to_string(),
            _ => new_table.to_string(),
        };
        let mut clone = (*data).clone();
        clone.name = new_table.clone();
        let mut defs = Vec::new();
        let mut targets = Vec::new();
        for cp in clone
            .coprocessors
            .iter_mut()
            .filter(|c| c.name == MAINTAINER)
        {
            for (key, arg) in cp.args.iter_mut() {
                if !key.starts_with(ARG_PREFIX) {
                    continue;
                }
                let old = IndexDef::from_arg(arg)?;
                let mut def = old.clone();
                def.table = renamed.clone();
                *arg = def.to_arg()?;
                if !def.local {
                    let from = old.index_table()?;
                    let index = snap
                        .descriptors
                        .iter()
                        .find(|d| d.name == from)
                        .ok_or_else(|| {
                            Error::bad_argument(format!(
                                "snapshot {name} lacks index table {from} of index {}: it was \
                                 taken without its index tables",
                                def.name
                            ))
                        })?;
                    let mut index = index.clone();
                    index.name = def.index_table()?;
                    targets.push((from, index));
                }
                defs.push(def);
            }
        }
        targets.insert(0, (data.name.clone(), clone));
        admin.clone_snapshot_tables(name, targets).await?;
        for def in &defs {
            self.record(&new_table, &def.name, Some(def)).await?;
        }
        Ok(())
    }
}
