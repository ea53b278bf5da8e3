//! [`Snapshot`]: one engine-wide read point held open, so that several scans - of one table
//! or of several, plain or salted - read the same committed state.
//!
//! Every commit takes one MVCC step for all the tables it writes (a row mutation, a batch, or
//! a coprocessor's additions to other tables such as index rows), so scans at one snapshot
//! see each commit entirely or not at all, whichever tables they read. HBase offers this
//! only within one region.
//!
//! A snapshot holds its backend's read point handle ([`Backend::ReadPoint`]), pinned by
//! [`Backend::pin_read_point`].
//!
//! Invariant kept: while a `Snapshot` (or any clone of it) lives, its read point stays
//! registered with the engine, so compactions keep every version a scan at that point needs;
//! the registration ends when the last clone is dropped.

use super::backend::{Backend, ReadPointHandle};
use crate::server::Engine;

/// A pinned engine-wide read point (see the module doc). Cheap to clone.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use basalt_core::client::{Connection, Put, Scan};
/// use basalt_core::{ColumnFamilyDescriptor, TableDescriptor, TableName};
/// use futures::TryStreamExt;
/// let dir = tempfile::tempdir().unwrap();
/// let conn = Connection::open(dir.path()).await.unwrap();
/// let desc = TableDescriptor::new(TableName::parse("t").unwrap())
///     .family(ColumnFamilyDescriptor::new("f"));
/// conn.admin().create_table(desc).await.unwrap();
/// let t = conn.table("t").unwrap();
/// t.put(Put::new("a").add_column("f", "q", "1")).await.unwrap();
/// let snap = conn.snapshot().unwrap();
/// t.put(Put::new("b").add_column("f", "q", "2")).await.unwrap();
/// // The snapshot was taken before "b" was written.
/// let rows: Vec<_> = t.scan_at(Scan::new(), &snap).unwrap().try_collect().await.unwrap();
/// assert_eq!(rows.len(), 1);
/// let now: Vec<_> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
/// assert_eq!(now.len(), 2);
/// # });
/// ```
pub struct Snapshot<B: Backend = Engine> {
    point: B::ReadPoint,
}

impl<B: Backend> Clone for Snapshot<B> {
    fn clone(&self) -> Self {
        Snapshot {
            point: self.point.clone(),
        }
    }
}

impl<B: Backend> Snapshot<B> {
    pub(crate) fn new(point: B::ReadPoint) -> Self {
        Snapshot { point }
    }

    /// The backend's handle on the pinned read point.
    pub(crate) fn point(&self) -> &B::ReadPoint {
        &self.point
    }

    /// The read point: scans at this snapshot see the commits with sequence ids up to it.
    pub fn read_point(&self) -> u64 {
        self.point.read_point()
    }
}

impl<B: Backend> std::fmt::Debug for Snapshot<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("read_point", &self.read_point())
            .finish()
    }
}
