//! The state every stage of the engine shares, at the bottom of `server/`: the open tables
//! ([`TableState`]: descriptor, enabled flag, regions, coprocessor hooks) and the engine-wide
//! state ([`EngineShared`]: settings, catalog, objects, WAL, MVCC, block cache, directory
//! lock, ownership), with what every stage asks of them (find a table or a row's region,
//! check the engine open, hand regions over in the coordination store).
//!
//! Invariants: a table's regions are sorted by start key and cover the whole key space
//! without gaps or overlaps; sequence ids are taken and WAL records appended only under
//! `commit_lock`, so WAL order is sequence order.

use super::config::Config;
use super::ownership::{self, Ownership};
use crate::catalog::Catalog;
use crate::coprocessor::{HookSlot, RegionHooks};
use crate::error::{Error, Result};
use crate::fs::FileLock;
use crate::mvcc::Mvcc;
use crate::objects::Objects;
use crate::region::Region;
use crate::schema::{ColumnFamilyDescriptor, TableDescriptor, TableName};
use crate::storage::storefile::{BlockCache, WriterOptions};
use crate::wal::Wal;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// An open table: descriptor, state and regions.
#[derive(Debug)]
pub struct TableState {
    /// The name.
    pub name: TableName,
    /// The name as `ns:name`, formatted once (row locks are keyed by it on every write).
    pub key: String,
    /// XXH3 of `key`, the seed of the hooked-write clock's row hash.
    pub(crate) key_hash: u64,
    /// The descriptor.
    pub descriptor: RwLock<TableDescriptor>,
    /// False when disabled.
    pub enabled: AtomicBool,
    /// Regions sorted by start key.
    pub regions: RwLock<Vec<Arc<Region>>>,
    /// The coprocessor hooks; `None` when the table lists no coprocessor (the fast path).
    pub hooks: HookSlot,
}

impl TableState {
    /// The table's hooks, if it has coprocessors (no allocation either way).
    pub fn hooks(&self) -> Option<Arc<dyn RegionHooks>> {
        self.hooks.get()
    }

    /// The region holding `row`.
    pub fn locate(&self, row: &[u8]) -> Option<Arc<Region>> {
        let regions = self.regions.read();
        let idx = regions.partition_point(|r| r.start.as_ref() <= row);
        idx.checked_sub(1).and_then(|i| regions.get(i).cloned())
    }

    /// Region `id` of this table ([`Error::RegionNotFound`] when it has none).
    pub(crate) fn region(&self, id: u64) -> Result<Arc<Region>> {
        self.regions
            .read()
            .iter()
            .find(|r| r.id == id)
            .cloned()
            .ok_or_else(|| Error::RegionNotFound {
                table: self.name.to_string(),
                id,
            })
    }

    /// The regions this engine serves (all but those another engine of a shared store
    /// serves, see [`Config::serve_regions`]).
    pub fn served_regions(&self) -> Vec<Arc<Region>> {
        let regions = self.regions.read();
        regions
            .iter()
            .filter(|r| !r.served_elsewhere())
            .cloned()
            .collect()
    }

    /// The region holding `row`, if it serves (an offline region fails with its reason).
    pub(crate) fn online_region(&self, row: &[u8]) -> Result<Arc<Region>> {
        let region = self
            .locate(row)
            .ok_or_else(|| Error::TableNotFound(self.name.to_string()))?;
        region.check_online()?;
        Ok(region)
    }

    /// Fails unless the table is enabled.
    pub fn check_enabled(&self) -> Result<()> {
        if self.enabled.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(Error::TableDisabled(self.name.to_string()))
        }
    }
}

/// What every stage of the engine shares: the settings, the catalog and the open tables,
/// the WAL with the lock that orders its appends, MVCC and the block cache.
///
/// Invariant: sequence ids are taken and WAL records appended only under `commit_lock`, so
/// WAL order is sequence order (a flush takes the lock to cut its snapshot between two
/// commits).
pub(crate) struct EngineShared {
    pub(crate) config: Config,
    pub(crate) catalog: Catalog,
    /// Where the catalog and the store files live ([`Config::objects`] or the data
    /// directory's).
    pub(crate) objects: Arc<dyn Objects>,
    /// On cache lines of its own: every operation read-locks it (an atomic write), and the
    /// fields every read only loads (`closed`, `config`) should not share its line (bench
    /// `core`, random reads after the re-cut into stages: 0.79x of before without the
    /// padding, within noise with it).
    pub(crate) tables: CacheLine<RwLock<BTreeMap<TableName, Arc<TableState>>>>,
    pub(crate) wal: Wal,
    pub(crate) commit_lock: Mutex<()>,
    pub(crate) mvcc: Mvcc,
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) closed: AtomicBool,
    /// Holds an exclusive lock on `<dir>/LOCK` so that two engines never share a directory.
    /// Here rather than in [`Engine`](super::Engine): background work (a flush, a compaction) holds the
    /// shared state, and with it the directory, until it ends, even when the engine was
    /// dropped without a close.
    pub(crate) dir_lock: Mutex<Option<Box<dyn FileLock>>>,
    /// The engine's lease and regions in the coordination store, once a connection took
    /// them ([`Engine::take_ownership`](super::Engine::take_ownership)).
    pub(crate) ownership: std::sync::OnceLock<Arc<Ownership>>,
}

impl EngineShared {
    /// The open table `name`.
    pub(crate) fn table(&self, name: &TableName) -> Result<Arc<TableState>> {
        self.check_open()?;
        self.tables
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::TableNotFound(name.to_string()))
    }

    /// The open table `name`, for a schema change: every region of it must be served here
    /// ([`Error::RegionNotServed`] otherwise: the engines serving the others would go on
    /// with the old schema).
    pub(crate) fn whole_table(&self, name: &TableName) -> Result<Arc<TableState>> {
        let t = self.table(name)?;
        let elsewhere = t
            .regions
            .read()
            .iter()
            .find(|r| r.served_elsewhere())
            .cloned();
        match elsewhere {
            Some(r) => Err(Error::RegionNotServed {
                table: name.to_string(),
                region: r.id,
            }),
            None => Ok(t),
        }
    }

    /// Every open table, in name order.
    pub(crate) fn all_tables(&self) -> Vec<Arc<TableState>> {
        self.tables.read().values().cloned().collect()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// How a flush writes a store file of a family: the family's block size, compression and
    /// bloom type, the engine's bloom error rate (a compaction swaps in the family's
    /// compaction compression).
    pub(crate) fn writer_options(&self, d: &ColumnFamilyDescriptor) -> WriterOptions {
        WriterOptions {
            block_size: d.block_size as usize,
            compression: d.compression,
            bloom: d.bloom,
            bloom_fp_rate: self.config.bloom_error_rate,
        }
    }

    /// The object name of store file `id` written by `region` (at its generation).
    pub(crate) fn file_name(&self, id: u64, region: &Region) -> String {
        crate::catalog::store_file_name(id, region.generation)
    }
}

/// A value on cache lines of its own (128 bytes: two lines, as adjacent-line prefetch pairs
/// them), so that atomic writes to it do not slow down loads of its neighbours.
#[repr(align(128))]
pub(crate) struct CacheLine<T>(pub(crate) T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl EngineShared {
    /// Claims regions `claimed` and releases regions `released` of `table` (a table
    /// created or dropped, a split, a merge), and updates the store's catalog to match:
    /// claims first, then releases, so the rows of a split parent or merged inputs always
    /// have an owner. Without ownership (an engine opened without a connection) does
    /// nothing. A failed claim is returned (nothing is released then): the region serves
    /// here while another process owns it.
    pub(crate) async fn hand_over(
        &self,
        table: &TableName,
        released: &[u64],
        claimed: &[u64],
    ) -> Result<()> {
        let Some(own) = self.ownership.get() else {
            return Ok(());
        };
        let new: Vec<Arc<Region>> = match self.tables.read().get(table) {
            Some(t) => t
                .regions
                .read()
                .iter()
                .filter(|r| claimed.contains(&r.id))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        own.claim(ownership::keys(table, claimed.iter().copied()))
            .await?;
        let gone = ownership::keys(table, released.iter().copied());
        own.release(&gone).await;
        // The new regions are listed before the gone ones are unlisted: no row of the
        // table is ever without a listed region (a reader of both retries on the gone one).
        own.publish(ownership::records(table, &new)).await?;
        own.unpublish(&gone).await?;
        self.point_manifests(table, claimed).await;
        Ok(())
    }

    /// Moves the manifest pointers of regions `ids` of `table` to the catalog's current
    /// version, on a versioned (shared) store once the engine owns its regions. A move the
    /// coordination store refuses means another process owns a region now: the WAL then
    /// refuses every later write, as when the lease ends.
    pub(crate) async fn point_manifests(&self, table: &TableName, ids: &[u64]) {
        let (Some(own), Some(version)) = (self.ownership.get(), self.catalog.version()) else {
            return;
        };
        let regions = ownership::keys(table, ids.iter().copied());
        if let Err(e) = own.point_manifests(&regions, version).await {
            tracing::error!(%table, error = %e, "a region's manifest pointer could not be moved");
            self.wal.refuse(format!(
                "the manifest pointer of a region of {table} could not be moved ({e}): another \
                 process may own it"
            ));
        }
    }

    /// Renews `own`'s lease every third of its time to live while the engine lives and is
    /// open; when a renewal finds the lease ended, makes the WAL refuse writes and stops.
    pub(crate) fn start_lease_renewal(self: &Arc<Self>, own: Arc<Ownership>) {
        let Some(every) = own.renewal_period() else {
            return;
        };
        let shared = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                if shared.check_open().is_err() {
                    return;
                }
                if let Err(e) = own.keep_alive().await {
                    shared.wal.refuse(format!(
                        "the engine's lease {} ended ({e}): another process may own its regions",
                        own.lease().id
                    ));
                    return;
                }
            }
        });
    }
}
