//! Coordination behind an interface: who is alive, who owns which region, the region
//! catalog, and each region's manifest pointer. These are the facts a cluster keeps in a
//! consistent store (HBase keeps them in ZooKeeper and `hbase:meta`; Basalt's cluster plan
//! puts them in etcd). The embedded engine keeps them in memory ([`MemoryCoordination`]);
//! region servers use `basalt_cluster::EtcdCoordination` (the `cluster` crate), the same
//! [`Coordination`] on etcd v3. The conformance suite both run is `tests/coordination.rs`.
//!
//! The model:
//!
//! - A **lease** per process ([`Coordination::grant_lease`]): alive while the process
//!   renews it within its time to live ([`Coordination::keep_alive`]). Each lease carries a
//!   **node generation**, one more than the last lease granted to the same process name,
//!   so a restarted process never passes for its earlier life.
//! - **Region ownership** with generations ([`Coordination::claim_region`]): a region is
//!   owned by at most one live lease. A claim succeeds when the region has no owner, or its
//!   owner's lease expired or was revoked, and then raises the region's **generation**;
//!   the owner renewing its claim keeps it. A claim while another live lease owns the
//!   region fails with [`Error::RegionOwned`](crate::Error::RegionOwned).
//! - The **region catalog** ([`Coordination::put_region`]): one [`RegionRecord`] per
//!   region, each change a compare-and-swap on the record's revision.
//! - The **manifest pointer** of a region ([`Coordination::swap_manifest`]): swapped only
//!   by the region's current owner, at the region's current generation, from the pointer it
//!   last saw; a writer fenced by a newer generation cannot move it.
//!
//! Invariants every implementation keeps: at any instant a region has at most one owner
//! whose lease is alive; a region's generation only grows, and grows at every change of
//! owner; a compare-and-swap that lost changes nothing and says so
//! ([`Error::CoordinationConflict`](crate::Error::CoordinationConflict)); node generations of one process name only grow.
//! Leases are the liveness signal, not the guarantee: the storage enforces ownership
//! (fenced writers), as etcd's own locks cannot promise mutual exclusion on their own.

mod memory;

pub use memory::{Clock, ManualClock, MemoryCoordination, SystemClock};

use crate::error::Result;
use crate::schema::TableName;
use async_trait::async_trait;
use bytes::Bytes;
use std::fmt::Debug;
use std::time::Duration;

/// A process's lease, as [`Coordination::grant_lease`] granted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lease's id, unique in the coordination store.
    pub id: u64,
    /// The process name it was granted to.
    pub process: String,
    /// One more than the previous lease of the same process name (the first is 1).
    pub node_generation: u64,
    /// How long the lease lives without a [`Coordination::keep_alive`].
    pub ttl: Duration,
}

/// Who owns a region, and at which generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// The owner's lease.
    pub lease: u64,
    /// The owner's process name.
    pub process: String,
    /// The region's generation under this owner.
    pub generation: u64,
    /// False once the owner's lease expired or was revoked (the region can be claimed).
    pub alive: bool,
}

/// A region's identity in the coordination store: its table and its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionKey {
    /// The table the region belongs to.
    pub table: TableName,
    /// The region's id.
    pub region: u64,
}

impl RegionKey {
    /// The key of region `region` of `table`.
    pub fn new(table: TableName, region: u64) -> Self {
        RegionKey { table, region }
    }
}

impl std::fmt::Display for RegionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.table, self.region)
    }
}

/// One region in the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRecord {
    /// The region.
    pub key: RegionKey,
    /// Its first row (inclusive; empty for the table's first region).
    pub start: Bytes,
    /// Its end row (exclusive; empty for the table's last region).
    pub end: Bytes,
    /// The store's revision of this record, raised by every change (0 in a record not yet
    /// stored: [`Coordination::put_region`] sets it).
    pub revision: u64,
}

/// The coordination store. Async, as a networked store's calls are; the in-memory one
/// answers at once.
#[async_trait]
pub trait Coordination: Send + Sync + Debug {
    /// Grants `process` a lease living `ttl` past each renewal, with the next node
    /// generation of that process name. A zero `ttl` is refused ([`Error::BadArgument`]).
    ///
    /// [`Error::BadArgument`]: crate::Error::BadArgument
    async fn grant_lease(&self, process: &str, ttl: Duration) -> Result<Lease>;

    /// Renews lease `lease` for another time to live; [`Error::LeaseExpired`] when it
    /// already expired or was revoked (it cannot come back).
    ///
    /// [`Error::LeaseExpired`]: crate::Error::LeaseExpired
    async fn keep_alive(&self, lease: u64) -> Result<()>;

    /// Ends lease `lease` now: the regions it owns can be claimed. Revoking an unknown or
    /// ended lease does nothing.
    async fn revoke_lease(&self, lease: u64) -> Result<()>;

    /// Makes lease `lease` the owner of `region` and returns the region's generation: the
    /// current one when `lease` already owns it, one more when it changes owner (the first
    /// owner's is 1). Fails with [`Error::RegionOwned`] while another live lease owns it,
    /// and with [`Error::LeaseExpired`] when `lease` is not alive.
    ///
    /// [`Error::RegionOwned`]: crate::Error::RegionOwned
    /// [`Error::LeaseExpired`]: crate::Error::LeaseExpired
    async fn claim_region(&self, region: &RegionKey, lease: u64) -> Result<u64>;

    /// Gives `region` up, if lease `lease` owns it at `generation` (otherwise nothing
    /// changes: a fenced owner cannot release what is no longer its). The generation stays.
    async fn release_region(&self, region: &RegionKey, lease: u64, generation: u64) -> Result<()>;

    /// The owner of `region`, if it has one (a dead one included, marked `alive: false`).
    async fn owner(&self, region: &RegionKey) -> Result<Option<Ownership>>;

    /// Stores `record` if the stored record's revision is `expected` (`None`: no record of
    /// that region may exist); returns the new revision. [`Error::CoordinationConflict`]
    /// when the revision moved.
    ///
    /// [`Error::CoordinationConflict`]: crate::Error::CoordinationConflict
    async fn put_region(&self, record: RegionRecord, expected: Option<u64>) -> Result<u64>;

    /// Removes `region`'s record if its revision is `expected`
    /// ([`Error::CoordinationConflict`] otherwise, or when there is none).
    ///
    /// [`Error::CoordinationConflict`]: crate::Error::CoordinationConflict
    async fn remove_region(&self, region: &RegionKey, expected: u64) -> Result<()>;

    /// The catalog's records of `table`, by start row.
    async fn regions(&self, table: &TableName) -> Result<Vec<RegionRecord>>;

    /// Points `region`'s manifest at `new`, if lease `lease` owns the region at
    /// `generation` and the pointer is `expected` (`None`: none set yet). Fails with
    /// [`Error::CoordinationConflict`] when the pointer moved or the owner or generation is
    /// not the caller's (a fenced writer), and changes nothing then.
    ///
    /// [`Error::CoordinationConflict`]: crate::Error::CoordinationConflict
    async fn swap_manifest(
        &self,
        region: &RegionKey,
        lease: u64,
        generation: u64,
        expected: Option<&[u8]>,
        new: Bytes,
    ) -> Result<()>;

    /// `region`'s manifest pointer, if one was set.
    async fn manifest(&self, region: &RegionKey) -> Result<Option<Bytes>>;
}

/// Who splits a region its table's split policy finds too big, in a cluster: the engine
/// asks instead of splitting it itself, as HBase 2's region server asks the master for a
/// split procedure (the master then sends the split back to the region's server). An
/// engine without one ([`crate::Config::split_asker`]) splits such a region itself.
#[async_trait]
pub trait SplitAsker: Send + Sync + Debug {
    /// Asks for `region` to be split at a row its server chooses. Asking again while an
    /// ask is pending changes nothing; an ask that is lost (its master gone before it ran)
    /// is made again after the region's next flush or compaction.
    async fn ask_split(&self, region: &RegionKey) -> Result<()>;
}
