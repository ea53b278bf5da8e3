//! Backups of a running engine, at the top of `server/`: the tables at one read point,
//! copied to another object store by `crate::backup`.
//!
//! A backup of every table first takes a table snapshot of them (online, one read point,
//! see [`super::snapshots`]), named `basalt-backup-{ms}-{random}`, which keeps the files it
//! copies alive while it copies them (a compaction meanwhile cannot delete them), and
//! deletes it when the copy ends, done or failed (a process that dies meanwhile leaves it
//! listed until the directory's next open, which deletes it). A backup of a named snapshot copies that snapshot.
//! The copy runs off the async threads.
//!
//! Invariant: the backup's catalog is the engine's with the tables of the snapshot (their
//! schemas, regions and files at its read point) and no snapshots.

use crate::backup::{write_backup, BackupOptions, BackupSummary};
use crate::error::{Error, Result};
use crate::objects::Objects;
use crate::schema::TableName;
use crate::server::snapshots;
use crate::server::Engine;
use std::sync::Arc;

/// What a backup copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupSource {
    /// Every table, at one read point taken now.
    AllTables,
    /// The tables of an existing table snapshot.
    Snapshot(String),
}

/// Backs `source` up to `target`; see the module doc.
pub(crate) async fn backup(
    engine: &Arc<Engine>,
    target: Arc<dyn Objects>,
    source: BackupSource,
    options: BackupOptions,
) -> Result<BackupSummary> {
    engine.shared.check_open()?;
    let (name, temporary) = match source {
        BackupSource::Snapshot(name) => (name, false),
        BackupSource::AllTables => {
            let name = format!(
                "{}{}-{:08x}",
                snapshots::BACKUP_SNAPSHOT_PREFIX,
                crate::cell::now_ms(),
                crate::backup::random_up_to(u32::MAX.into())
            );
            let tables: Vec<TableName> = engine
                .shared
                .all_tables()
                .iter()
                .map(|t| t.name.clone())
                .collect();
            if tables.is_empty() {
                return Err(Error::bad_argument("no table to back up"));
            }
            snapshots::take_snapshot(engine, &name, &tables, false).await?;
            (name, true)
        }
    };
    let result = copy_snapshot(engine, &name, target, options).await;
    if temporary {
        if let Err(e) = snapshots::delete_snapshot(engine, &name).await {
            tracing::warn!(snapshot = %name, error = %e, "could not delete a backup's snapshot");
        }
    }
    result
}

async fn copy_snapshot(
    engine: &Arc<Engine>,
    name: &str,
    target: Arc<dyn Objects>,
    options: BackupOptions,
) -> Result<BackupSummary> {
    let mut state = engine.shared.catalog.snapshot();
    let entry = state
        .snapshots
        .remove(name)
        .ok_or_else(|| Error::SnapshotNotFound(name.to_string()))?;
    state.tables = entry.tables;
    state.snapshots.clear();
    let source = Arc::clone(&engine.shared.objects);
    let read_point = entry.read_point;
    tokio::task::spawn_blocking(move || {
        write_backup(&*source, &*target, &state, read_point, &options)
    })
    .await
    .map_err(|e| Error::Io(std::io::Error::other(format!("backup task failed: {e}"))))?
}
