//! Index queries ([`Index`], [`Query`]): by equal values, value prefix or value range,
//! forward or reverse, with a limit; answered as data row keys, as covered "hits" read from
//! the index alone, or as whole data rows fetched in batches.
//!
//! A query given a [`Snapshot`] ([`Query::at`]) reads the index (and, for whole rows, the data
//! table) at that engine-wide read point: the index rows and data rows of one commit are
//! seen together or not at all, so its answer equals what the data table gives at the
//! same snapshot.
//!
//! A salted index table is read through the salted API ([`basalt_core::SaltedTable`]): one
//! scan per bucket, merged in logical key order. An index row whose indexed value has
//! expired under its data family's TTL is never returned (the row's timestamps are stored
//! in it, see [`crate::layout`]). An index still being built refuses queries
//! ([`basalt_core::Error::IndexNotReady`], when the handle is made).

use crate::layout::{covered_qualifier, Bounds, IndexValue, Layout, FAMILY};
use basalt_core::client::{Backend, BatchOp, BatchOutcome, Get, RowResult, Scan, Snapshot};
use basalt_core::now_ms;
use basalt_core::{Engine, Result, SaltedTable, Table};
use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;

/// How many data rows [`Index::rows`] gets per batch.
pub const FETCH_BATCH: usize = 256;

/// A value for a query: `Some(bytes)`.
pub fn val(v: impl AsRef<[u8]>) -> IndexValue {
    Some(Bytes::copy_from_slice(v.as_ref()))
}

/// What a query asks for.
pub struct Query<B: Backend = Engine> {
    kind: Kind,
    reverse: bool,
    limit: Option<usize>,
    snapshot: Option<Snapshot<B>>,
}

impl<B: Backend> Clone for Query<B> {
    fn clone(&self) -> Self {
        Query {
            kind: self.kind.clone(),
            reverse: self.reverse,
            limit: self.limit,
            snapshot: self.snapshot.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Query<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("kind", &self.kind)
            .field("reverse", &self.reverse)
            .field("limit", &self.limit)
            .field("snapshot", &self.snapshot)
            .finish()
    }
}

#[derive(Debug, Clone)]
enum Kind {
    Prefix(Vec<IndexValue>),
    Range(Option<Vec<IndexValue>>, Option<Vec<IndexValue>>),
}

impl<B: Backend> Query<B> {
    /// Rows whose indexed values equal `values` (one per indexed column).
    pub fn eq(values: Vec<IndexValue>) -> Self {
        Query {
            kind: Kind::Prefix(values),
            reverse: false,
            limit: None,
            snapshot: None,
        }
    }
    /// Rows whose leading indexed values equal `values` (fewer than the columns).
    pub fn prefix(values: Vec<IndexValue>) -> Self {
        Self::eq(values)
    }
    /// Rows whose indexed values lie in `[lo, hi)` (tuple order, each column in its own
    /// direction; a bound is a tuple prefix, `None` is unbounded).
    pub fn range(lo: Option<Vec<IndexValue>>, hi: Option<Vec<IndexValue>>) -> Self {
        Query {
            kind: Kind::Range(lo, hi),
            reverse: false,
            limit: None,
            snapshot: None,
        }
    }
    /// Highest index order first.
    pub fn reverse(mut self) -> Self {
        self.reverse = true;
        self
    }
    /// At most `n` answers.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
    /// Reads at `snapshot` (see the module doc) instead of the latest state.
    pub fn at(mut self, snapshot: &Snapshot<B>) -> Self {
        self.snapshot = Some(snapshot.clone());
        self
    }
    /// The snapshot the query reads at, if given.
    pub fn snapshot(&self) -> Option<&Snapshot<B>> {
        self.snapshot.as_ref()
    }
    /// True for highest index order first.
    pub fn is_reverse(&self) -> bool {
        self.reverse
    }
    /// The most answers asked for.
    pub fn get_limit(&self) -> Option<usize> {
        self.limit
    }
    /// The logical key bounds of the query's answers under `layout`.
    pub(crate) fn bounds(&self, layout: &Layout) -> Result<Bounds> {
        Ok(match &self.kind {
            Kind::Prefix(v) => {
                let p = layout.prefix(v)?;
                Bounds {
                    hi: basalt_core::keys::prefix_successor(&p).map(|b| b.to_vec()),
                    lo: Some(p),
                }
            }
            Kind::Range(lo, hi) => Bounds {
                lo: lo.as_ref().map(|v| layout.prefix(v)).transpose()?,
                hi: hi.as_ref().map(|v| layout.prefix(v)).transpose()?,
            },
        })
    }
}

/// One index row, read without the data table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The indexed values.
    pub values: Vec<IndexValue>,
    /// The data row key.
    pub row: Bytes,
    /// The covered columns the data row had, by (family, qualifier).
    pub covered: BTreeMap<(Bytes, Bytes), Bytes>,
}

/// Where the index rows are: an index table, salted or not, or the data table's regions
/// (a local index, see [`crate::local`]).
pub(crate) enum IndexTable<B: Backend> {
    Plain(Table<B>),
    Salted(SaltedTable<B>),
    Local,
}

impl<B: Backend> Clone for IndexTable<B> {
    fn clone(&self) -> Self {
        match self {
            IndexTable::Plain(t) => IndexTable::Plain(t.clone()),
            IndexTable::Salted(t) => IndexTable::Salted(t.clone()),
            IndexTable::Local => IndexTable::Local,
        }
    }
}

type RowStream = Pin<Box<dyn Stream<Item = Result<RowResult>> + Send>>;

/// A query handle on one built index.
pub struct Index<B: Backend = Engine> {
    pub(crate) layout: Layout,
    pub(crate) table: IndexTable<B>,
    pub(crate) data: Table<B>,
    /// TTL in milliseconds of each data family that has one.
    pub(crate) ttls: HashMap<Bytes, u64>,
}

impl<B: Backend> Clone for Index<B> {
    fn clone(&self) -> Self {
        Index {
            layout: self.layout.clone(),
            table: self.table.clone(),
            data: self.data.clone(),
            ttls: self.ttls.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Index<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("layout", &self.layout)
            .field("data", &self.data.name())
            .finish_non_exhaustive()
    }
}

impl<B: Backend> Index<B> {
    /// The index's layout (and definition).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn scan(&self, s: Scan, snapshot: Option<&Snapshot<B>>) -> Result<RowStream> {
        Ok(match (&self.table, snapshot) {
            (IndexTable::Plain(t), None) => Box::pin(t.scan(s)?),
            (IndexTable::Plain(t), Some(snap)) => Box::pin(t.scan_at(s, snap)?),
            (IndexTable::Salted(t), None) => Box::pin(t.scan(s)?),
            (IndexTable::Salted(t), Some(snap)) => Box::pin(t.scan_at(s, snap)?),
            (IndexTable::Local, _) => {
                return Err(basalt_core::Error::bad_argument(
                    "a local index has no index table to scan",
                ))
            }
        })
    }

    /// The index rows answering `q`, as hits.
    pub async fn hits(&self, q: &Query<B>) -> Result<Vec<Hit>> {
        let l = &self.layout;
        if let IndexTable::Local = self.table {
            let bounds = q.bounds(l)?;
            let local = crate::local::LocalQuery {
                snapshot: q.snapshot(),
                reverse: q.is_reverse(),
                limit: q.get_limit(),
            };
            let rows = crate::local::rows(l, &self.data, &self.ttls, &local, &bounds).await?;
            return rows.iter().map(|(k, cells)| self.hit(k, cells)).collect();
        }
        let (scan, lo, hi) = match &q.kind {
            Kind::Prefix(v) => (Scan::new().with_prefix(l.prefix(v)?), None, None),
            Kind::Range(lo, hi) => {
                let lo = lo.as_ref().map(|v| l.prefix(v)).transpose()?;
                let hi = hi.as_ref().map(|v| l.prefix(v)).transpose()?;
                let mut s = Scan::new();
                if q.reverse {
                    // Start at the high end (inclusive; keys equal to it are dropped below);
                    // stop by hand at the low end, which must stay included.
                    if let Some(h) = &hi {
                        s = s.start_row(h);
                    }
                } else {
                    if let Some(x) = &lo {
                        s = s.start_row(x);
                    }
                    if let Some(h) = &hi {
                        s = s.stop_row(h);
                    }
                }
                (s, lo, hi)
            }
        };
        let mut stream = self.scan(scan.reversed(q.reverse), q.snapshot.as_ref())?;
        let now = now_ms();
        let ttl = |f: &[u8]| self.ttls.get(f).copied();
        let mut out = Vec::new();
        if q.limit == Some(0) {
            return Ok(out);
        }
        while let Some(r) = stream.try_next().await? {
            let key = r.row.clone();
            if hi.as_ref().is_some_and(|h| key.as_ref() >= h.as_slice()) {
                continue;
            }
            if lo.as_ref().is_some_and(|x| key.as_ref() < x.as_slice()) {
                if q.reverse {
                    break;
                }
                continue;
            }
            let cells: BTreeMap<Bytes, Bytes> = r
                .cells
                .iter()
                .filter(|c| c.family.as_ref() == FAMILY)
                .map(|c| (c.qualifier.clone(), c.value.clone()))
                .collect();
            if l.expiry(&cells, &ttl).is_some_and(|x| x <= now) {
                continue;
            }
            out.push(self.hit(&key, &cells)?);
            if q.limit.is_some_and(|n| out.len() >= n) {
                break;
            }
        }
        Ok(out)
    }

    fn hit(&self, key: &[u8], cells: &BTreeMap<Bytes, Bytes>) -> Result<Hit> {
        let (values, _) = self.layout.split_key(key)?;
        let row = self.layout.data_row_logical(key, cells)?;
        let mut covered = BTreeMap::new();
        for c in &self.layout.def.covered {
            if let Some(v) = cells.get(covered_qualifier(&c.family, &c.qualifier).as_slice()) {
                covered.insert(
                    (
                        Bytes::copy_from_slice(&c.family),
                        Bytes::copy_from_slice(&c.qualifier),
                    ),
                    v.clone(),
                );
            }
        }
        Ok(Hit {
            values,
            row,
            covered,
        })
    }

    /// The data row keys answering `q`, in index order.
    pub async fn keys(&self, q: &Query<B>) -> Result<Vec<Bytes>> {
        Ok(self.hits(q).await?.into_iter().map(|h| h.row).collect())
    }

    /// The data rows answering `q`, in index order, fetched [`FETCH_BATCH`](crate::FETCH_BATCH) at a time. A
    /// row deleted between the index read and the fetch is left out. At a snapshot, each row
    /// is read at that snapshot (one single-row scan each) and none is ever left out.
    pub async fn rows(&self, q: &Query<B>) -> Result<Vec<RowResult>> {
        let keys = self.keys(q).await?;
        let mut out = Vec::with_capacity(keys.len());
        if let Some(snap) = &q.snapshot {
            for k in &keys {
                let mut stop = k.to_vec();
                stop.push(0);
                let one = Scan::new().start_row(k).stop_row(stop).limit(1);
                if let Some(row) = self.data.scan_at(one, snap)?.try_next().await? {
                    out.push(row);
                }
            }
            return Ok(out);
        }
        for chunk in keys.chunks(FETCH_BATCH) {
            let ops = chunk.iter().map(|k| BatchOp::Get(Get::new(k))).collect();
            for r in self.data.batch(ops).await? {
                if let BatchOutcome::Row(row) = r? {
                    if !row.is_empty() {
                        out.push(row);
                    }
                }
            }
        }
        Ok(out)
    }
}
