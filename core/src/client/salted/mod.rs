//! [`SaltedTable`]: the data operations of a salted table by logical row key.
//!
//! The caller never sees a salt: every operation's row is turned into its physical key
//! (salt + logical key, [`SaltSpec::physical_key`]) before it reaches the engine, and every
//! row that comes back has the salt stripped, in [`RowResult::row`] and in each cell's row.
//! Scans fan out one scan per bucket and merge them (see the `scan` module).
//!
//! What a caller should know: filters run inside each bucket's scan, on physical rows, so a
//! filter that looks at row keys (a row, prefix or fuzzy-row filter) sees the salt in front
//! of the key; value, column and family filters behave as on an unsalted table. A
//! PageFilter's page applies per bucket (use the scan's limit for a global one). All the
//! bucket scans of one salted scan read one snapshot (one read point).

mod scan;

pub use scan::{BucketRange, SaltedScanStats, SaltedScanStream};

use super::backend::Backend;
use super::report::RegionReport;
use super::{Snapshot, Table};
use crate::error::{Error, Result};
use crate::ops::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Delete, Get, Increment, Mutation, Put,
    RowMutations, RowResult, Scan,
};
use crate::region::RegionInfo;
use crate::schema::salt::SaltSpec;
use crate::schema::TableName;
use crate::server::Engine;
use bytes::Bytes;
use std::sync::Arc;

/// A salted table, addressed by logical row keys. Cheap to clone.
///
/// ```
/// use basalt_core::client::{Get, Put, Scan};
/// use basalt_core::SaltSpec;
/// use basalt_core::{ColumnFamilyDescriptor, Connection, TableDescriptor, TableName};
/// use futures::TryStreamExt;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> basalt_core::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let conn = Connection::open(dir.path()).await?;
/// let desc = TableDescriptor::new(TableName::parse("events")?)
///     .family(ColumnFamilyDescriptor::new("d"))
///     .salt(SaltSpec::new(8));
/// conn.admin().create_table(desc).await?; // eight regions, one per bucket
/// let events = conn.salted_table("events")?;
/// for i in 0..20u32 {
///     events.put(Put::new(format!("e{i:03}")).add_column("d", "n", i.to_be_bytes())).await?;
/// }
/// assert_eq!(events.get(Get::new("e007")).await?.row.as_ref(), b"e007");
/// let rows: Vec<_> = events.scan(Scan::new().start_row("e005").limit(3))?.try_collect().await?;
/// let keys: Vec<_> = rows.iter().map(|r| r.row.clone()).collect();
/// assert_eq!(keys, vec!["e005", "e006", "e007"]);
/// # conn.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SaltedTable<B: Backend = Engine> {
    table: Table<B>,
    spec: Arc<SaltSpec>,
}

impl<B: Backend> Clone for SaltedTable<B> {
    fn clone(&self) -> Self {
        SaltedTable {
            table: self.table.clone(),
            spec: self.spec.clone(),
        }
    }
}

impl<B: Backend> SaltedTable<B> {
    /// A salted handle on `table`, whose descriptor holds the salt specification.
    pub(crate) fn open(table: Table<B>) -> Result<Self> {
        let spec = table.descriptor()?.salt.ok_or_else(|| {
            Error::bad_argument(format!(
                "table {} is not salted (its descriptor has no salt)",
                table.name()
            ))
        })?;
        Ok(SaltedTable {
            table,
            spec: Arc::new(spec),
        })
    }

    /// The table's name.
    pub fn name(&self) -> &TableName {
        self.table.name()
    }

    /// The salt specification.
    pub fn spec(&self) -> &SaltSpec {
        &self.spec
    }

    /// The unsalted handle on the same table (physical row keys).
    pub fn physical(&self) -> &Table<B> {
        &self.table
    }

    /// The physical row key of a logical one.
    pub fn physical_key(&self, logical: &[u8]) -> Result<Bytes> {
        self.spec.physical_key(logical).map(Bytes::from)
    }

    /// The bucket of a logical row key.
    pub fn bucket(&self, logical: &[u8]) -> Result<u32> {
        self.spec.bucket(logical)
    }

    fn salt(&self, row: &mut Bytes) -> Result<()> {
        *row = self.physical_key(row)?;
        Ok(())
    }

    fn salt_mutations(&self, rm: &mut RowMutations) -> Result<()> {
        self.salt(&mut rm.row)?;
        for m in &mut rm.mutations {
            match m {
                Mutation::Put(p) => self.salt(&mut p.row)?,
                Mutation::Delete(d) => self.salt(&mut d.row)?,
            }
        }
        Ok(())
    }

    fn salt_op(&self, op: &mut BatchOp) -> Result<()> {
        match op {
            BatchOp::Put(p) => self.salt(&mut p.row),
            BatchOp::Delete(d) => self.salt(&mut d.row),
            BatchOp::Get(g) => self.salt(&mut g.row),
            BatchOp::Increment(i) => self.salt(&mut i.row),
            BatchOp::Append(a) => self.salt(&mut a.row),
            BatchOp::RowMutations(rm) => self.salt_mutations(rm),
            BatchOp::CheckAndMutate(c) => self.salt_check(c),
        }
    }

    fn salt_check(&self, c: &mut CheckAndMutate) -> Result<()> {
        self.salt(&mut c.row)?;
        if let Some(rm) = c.action.as_mut() {
            self.salt_mutations(rm)?;
        }
        Ok(())
    }

    fn strip(&self, r: RowResult) -> RowResult {
        strip_row(self.spec.width(), r)
    }

    /// Writes one row.
    pub async fn put(&self, mut p: Put) -> Result<()> {
        self.salt(&mut p.row)?;
        self.table.put(p).await
    }

    /// Reads one row (empty when nothing matches).
    pub async fn get(&self, mut g: Get) -> Result<RowResult> {
        self.salt(&mut g.row)?;
        Ok(self.strip(self.table.get(g).await?))
    }

    /// True when the get would return at least one cell.
    pub async fn exists(&self, mut g: Get) -> Result<bool> {
        self.salt(&mut g.row)?;
        self.table.exists(g).await
    }

    /// Writes delete markers.
    pub async fn delete(&self, mut d: Delete) -> Result<()> {
        self.salt(&mut d.row)?;
        self.table.delete(d).await
    }

    /// Adds to counters atomically; returns the new values.
    pub async fn increment(&self, mut inc: Increment) -> Result<RowResult> {
        self.salt(&mut inc.row)?;
        Ok(self.strip(self.table.increment(inc).await?))
    }

    /// Appends to cells atomically; returns the new values.
    pub async fn append(&self, mut a: Append) -> Result<RowResult> {
        self.salt(&mut a.row)?;
        Ok(self.strip(self.table.append(a).await?))
    }

    /// Applies a mutation if a condition holds; returns whether it held.
    pub async fn check_and_mutate(&self, mut c: CheckAndMutate) -> Result<bool> {
        self.salt_check(&mut c)?;
        self.table.check_and_mutate(c).await
    }

    /// Applies a row's puts and deletes atomically.
    pub async fn mutate_row(&self, mut rm: RowMutations) -> Result<()> {
        self.salt_mutations(&mut rm)?;
        self.table.mutate_row(rm).await
    }

    /// Runs many operations, one result per operation (rows in outcomes are logical).
    pub async fn batch(&self, mut ops: Vec<BatchOp>) -> Result<Vec<Result<BatchOutcome>>> {
        for op in &mut ops {
            self.salt_op(op)?;
        }
        let out = self.table.batch(ops).await?;
        Ok(out
            .into_iter()
            .map(|r| {
                r.map(|o| match o {
                    BatchOutcome::Row(row) => BatchOutcome::Row(self.strip(row)),
                    other => other,
                })
            })
            .collect())
    }

    /// An ordered scan over logical keys: the scan's start, stop and prefix are logical, and
    /// rows come in logical key order (reverse when the scan is reversed), at most the
    /// scan's limit of them. One scan runs per bucket in parallel, each limited to the same
    /// limit and feeding a bounded buffer, and a heap merges them; when the scan's prefix
    /// (or both its start and stop row) fixes the hashed part, only that bucket is read.
    pub fn scan(&self, s: Scan) -> Result<SaltedScanStream> {
        scan::salted_scan(&self.table, &self.spec, s, true, None)
    }

    /// [`scan`](Self::scan) without the merge: rows come as the buckets produce them, in
    /// key order within a bucket only. Faster when order does not matter.
    pub fn scan_unordered(&self, s: Scan) -> Result<SaltedScanStream> {
        scan::salted_scan(&self.table, &self.spec, s, false, None)
    }

    /// [`scan`](Self::scan) at `snapshot`: every bucket reads the state it pinned (see
    /// [`Snapshot`]).
    pub fn scan_at(&self, s: Scan, snapshot: &Snapshot<B>) -> Result<SaltedScanStream> {
        scan::salted_scan(&self.table, &self.spec, s, true, Some(snapshot))
    }

    /// [`scan_unordered`](Self::scan_unordered) at `snapshot`.
    pub fn scan_unordered_at(&self, s: Scan, snapshot: &Snapshot<B>) -> Result<SaltedScanStream> {
        scan::salted_scan(&self.table, &self.spec, s, false, Some(snapshot))
    }

    /// The physical row ranges a logical scan reads, one per bucket that may hold its rows,
    /// in bucket order: the scan's prefix, or its start and stop rows (HBase's convention,
    /// reversed for a reverse scan), salted per bucket. One bucket when the prefix or range
    /// fixes the hashed part. This is how calls that run per region (endpoints) cover a
    /// logical range: one call per bucket range, at one read point.
    pub fn bucket_ranges(&self, s: &Scan) -> Vec<BucketRange> {
        scan::bucket_ranges(&self.spec, s)
    }

    /// Facts about every region, in physical key order.
    pub async fn regions(&self) -> Result<Vec<RegionInfo>> {
        self.table.regions().await
    }

    /// The region report (reads, writes and size per region).
    pub async fn region_report(&self) -> Result<RegionReport> {
        self.table.region_report().await
    }
}

/// `r` with the first `width` bytes of its row key (and its cells' row keys) removed.
pub(crate) fn strip_row(width: usize, mut r: RowResult) -> RowResult {
    let cut = |b: &Bytes| {
        if b.len() >= width {
            b.slice(width..)
        } else {
            b.clone()
        }
    };
    if !r.row.is_empty() {
        r.row = cut(&r.row);
    }
    for c in &mut r.cells {
        c.row = cut(&c.row);
    }
    r
}
