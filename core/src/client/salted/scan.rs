//! Salted scans: one scan per bucket, run in parallel, merged in logical key order.
//!
//! Plan: the logical scan's range (start/stop or prefix, HBase's reverse convention) becomes
//! one physical range per bucket: the bucket's salt in front of each bound, and the bucket's
//! own key range where a bound is open. When a prefix (or a start and stop row sharing the
//! bytes up to the end of the hashed part) fixes the hashed part, only its bucket is planned.
//! Every bucket scan keeps the caller's filter, columns, time range, versions and limit (the
//! limit pushed down: no bucket reads more rows than the whole scan returns). Every bucket
//! scan reads at one read point, registered before any of them lists its regions, so the
//! merged scan is one snapshot: a batch that wrote rows in several buckets is seen whole or
//! not at all, as in a plain scan across regions.
//!
//! Run: each bucket scan is driven by its own tokio task that sends chunks of rows (salt
//! stripped) into a bounded channel of [`channel_chunks`] chunks of at most [`CHUNK_ROWS`]
//! rows. A full channel suspends the task (backpressure: a bucket never reads far ahead of
//! the merge); an empty one suspends the merge until rows arrive (no polling). Dropping the
//! stream closes the channels, and every task stops at its next send.
//!
//! Merge (ordered): a binary heap holds every bucket that has a head row, keyed by that row
//! (max-first for reverse scans); the merge takes the top bucket's head, and refills that
//! bucket's head from its buffer or channel. The merge runs as its own task and sends the
//! merged rows to the stream in chunks, through one more bounded channel. A scan of one bucket skips the task, channel
//! and merge and reads the bucket's stream directly. A logical key lives in exactly one bucket, so
//! equal keys in the heap only happen for the parts of one row split by a scan batch size,
//! which come from one bucket in order. Unordered mode shares one channel among all tasks.
//!
//! Invariants: the merged stream yields exactly the rows of the bucket streams, each once,
//! in logical order (ordered mode); at most `limit` rows; the first error ends the stream.

use super::strip_row;
use crate::client::backend::{Backend, ReadPointHandle};
use crate::client::{Snapshot, Table};
use crate::error::{Error, Result};
use crate::keys::prefix_successor;
use crate::ops::{RowResult, Scan};
use crate::schema::salt::SaltSpec;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Rows per chunk a bucket task sends.
pub const CHUNK_ROWS: usize = 256;
/// Rows all the bucket channels of one ordered scan may hold together (read ahead of the
/// merge), before each bucket's share is bounded below by [`MIN_CHANNEL_CHUNKS`].
pub const READ_AHEAD_ROWS: usize = 64 * 1024;
/// Chunks a bucket's channel holds at least.
pub const MIN_CHANNEL_CHUNKS: usize = 2;

/// Chunks a bucket's channel holds before its task waits, for a scan of `buckets` buckets:
/// an ordered merge needs each bucket's next rows in turn, so every bucket reads ahead as
/// far as the shared budget allows (16 buckets: 16 chunks each; 128 buckets: 2), which
/// rides out a bucket task's scheduling delays on a busy machine.
pub fn channel_chunks(buckets: usize) -> usize {
    (READ_AHEAD_ROWS / (CHUNK_ROWS * buckets.max(1))).max(MIN_CHANNEL_CHUNKS)
}

type Chunk = Result<Vec<RowResult>>;

/// What a salted scan read, for hotspot and cost checks.
#[derive(Debug, Default)]
pub struct SaltedScanStats {
    buckets: usize,
    read_point: u64,
    rows_read: AtomicU64,
}

impl SaltedScanStats {
    /// How many buckets the scan reads (1 when narrowed to one bucket).
    pub fn buckets_scanned(&self) -> usize {
        self.buckets
    }
    /// The read point every bucket scan reads at (the scan's one snapshot).
    pub fn read_point(&self) -> u64 {
        self.read_point
    }
    /// Rows the bucket scans have read from the engine so far (returned or buffered; a
    /// bucket's rows are counted as its task hands them to the merge, all of them by the
    /// time the stream ends).
    pub fn rows_read(&self) -> u64 {
        self.rows_read.load(AtomicOrdering::Relaxed)
    }
}

/// The rows of a salted scan, with what it read ([`SaltedScanStream::stats`]).
pub struct SaltedScanStream {
    inner: Pin<Box<dyn Stream<Item = Result<RowResult>> + Send>>,
    stats: Arc<SaltedScanStats>,
}

impl std::fmt::Debug for SaltedScanStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaltedScanStream")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl SaltedScanStream {
    /// What the scan has read so far.
    pub fn stats(&self) -> Arc<SaltedScanStats> {
        self.stats.clone()
    }
}

impl Stream for SaltedScanStream {
    type Item = Result<RowResult>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// The physical scan of bucket `b` for the logical scan `s`.
fn bucket_scan(spec: &SaltSpec, b: u32, s: &Scan) -> Scan {
    let salt = spec.salt(b);
    let with = |k: &[u8]| -> Bytes { [&salt[..], k].concat().into() };
    let mut out = s.clone();
    let nonempty = |x: &Option<Bytes>| x.clone().filter(|k| !k.is_empty());
    if let Some(p) = &s.prefix {
        out.prefix = Some(with(p));
        out.start_row = None;
        out.stop_row = None;
        return out;
    }
    // An open upper end is the bucket's end: the successor of its salt. No stored row equals
    // that successor exactly (that would be an empty logical key, which is refused), so
    // using it as the inclusive start of a reverse scan reads nothing extra.
    let bucket_end = prefix_successor(&salt).unwrap_or_default();
    let bucket_start = Bytes::from(salt.clone());
    let (start, stop) = if s.reverse {
        (
            nonempty(&s.start_row).map_or(bucket_end, |k| with(&k)),
            nonempty(&s.stop_row).map_or(bucket_start, |k| with(&k)),
        )
    } else {
        (
            nonempty(&s.start_row).map_or(bucket_start, |k| with(&k)),
            nonempty(&s.stop_row).map_or(bucket_end, |k| with(&k)),
        )
    };
    out.start_row = Some(start);
    out.stop_row = Some(stop);
    out
}

/// One bucket's share of a logical range: the physical rows `[start, stop)` of bucket
/// `bucket` (`stop` empty: unbounded, only for the last bucket of an all-`0xff` salt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketRange {
    /// The bucket.
    pub bucket: u32,
    /// Inclusive physical start row.
    pub start: Bytes,
    /// Exclusive physical stop row (empty: unbounded).
    pub stop: Bytes,
}

/// The smallest key above `k`.
fn successor(k: &Bytes) -> Bytes {
    let mut v = Vec::with_capacity(k.len() + 1);
    v.extend_from_slice(k);
    v.push(0);
    v.into()
}

/// The physical ranges, one per bucket that may hold rows of `s`, in bucket order.
pub(super) fn bucket_ranges(spec: &SaltSpec, s: &Scan) -> Vec<BucketRange> {
    use std::ops::Bound;
    plan_buckets(spec, s)
        .into_iter()
        .filter_map(|b| {
            let r = bucket_scan(spec, b, s).row_range();
            let start = match r.lo {
                Bound::Included(k) => k,
                Bound::Excluded(k) => successor(&k),
                Bound::Unbounded => Bytes::from(spec.salt(b)),
            };
            let stop = match r.hi {
                Bound::Excluded(k) => k,
                Bound::Included(k) => successor(&k),
                Bound::Unbounded => Bytes::new(),
            };
            (stop.is_empty() || start < stop).then_some(BucketRange {
                bucket: b,
                start,
                stop,
            })
        })
        .collect()
}

/// The buckets a logical scan must read.
fn plan_buckets(spec: &SaltSpec, s: &Scan) -> Vec<u32> {
    let fixed = match &s.prefix {
        Some(p) => spec.bucket_for_prefix(p),
        None => {
            let (lo, hi) = if s.reverse {
                (&s.stop_row, &s.start_row)
            } else {
                (&s.start_row, &s.stop_row)
            };
            match (lo, hi) {
                (Some(lo), Some(hi)) if !lo.is_empty() && !hi.is_empty() => {
                    spec.bucket_for_range(lo, hi)
                }
                _ => None,
            }
        }
    };
    match fixed {
        Some(b) => vec![b],
        None => (0..spec.buckets).collect(),
    }
}

/// Starts a salted scan (ordered or not) over `table`.
pub(super) fn salted_scan<B: Backend>(
    table: &Table<B>,
    spec: &SaltSpec,
    s: Scan,
    ordered: bool,
    snapshot: Option<&Snapshot<B>>,
) -> Result<SaltedScanStream> {
    let rt = tokio::runtime::Handle::try_current()
        .map_err(|_| Error::bad_argument("a salted scan needs a tokio runtime"))?;
    let buckets = plan_buckets(spec, &s);
    // One read point for every bucket, taken before any bucket lists its regions: the
    // whole salted scan is one snapshot, as a plain scan across regions is.
    let point = match snapshot {
        Some(snap) => snap.point().clone(),
        None => table.pin_read_point()?,
    };
    let mut streams = Vec::with_capacity(buckets.len());
    for b in &buckets {
        let mut one = bucket_scan(spec, *b, &s);
        if buckets.len() > 1 {
            // The bucket's task and channel already read ahead of the merge; the engine's
            // own prefetch would only add a hop through a blocking thread per chunk.
            one.prefetch = false;
            // The buckets already read in parallel, one task each: a merge helper thread
            // per bucket on top would only oversubscribe the cores.
            one.pipeline_merges = false;
        }
        // Opening validates the scan (families, versions, batch) before any task starts.
        streams.push(table.scan_pinned(one, &point)?);
    }
    let stats = Arc::new(SaltedScanStats {
        buckets: buckets.len(),
        read_point: point.read_point(),
        rows_read: AtomicU64::new(0),
    });
    let width = spec.width();
    let limit = s.limit.filter(|n| *n > 0);
    let depth = channel_chunks(streams.len());
    let inner: Pin<Box<dyn Stream<Item = Result<RowResult>> + Send>> = if streams.len() == 1 {
        // One bucket (a narrowed scan, or one bucket in all): its stream is already in
        // order and limited; no task, channel or merge is needed.
        let counted = stats.clone();
        Box::pin(futures::stream::iter(streams).flatten().map(move |r| {
            counted.rows_read.fetch_add(1, AtomicOrdering::Relaxed);
            r.map(|row| strip_row(width, row))
        }))
    } else if ordered {
        let mut receivers = Vec::with_capacity(streams.len());
        for stream in streams {
            let (tx, rx) = mpsc::channel(depth);
            rt.spawn(pump(stream, tx, width, stats.clone()));
            receivers.push(rx);
        }
        let merge = Merge {
            heads: receivers.iter().map(|_| VecDeque::new()).collect(),
            receivers,
            heap: Vec::with_capacity(buckets.len()),
            started: false,
            reverse: s.reverse,
            batched: s.batch.is_some(),
            left: limit,
            last_row: None,
            failed: false,
        };
        // The merge runs as a task beside the bucket tasks, so its waits for a bucket's
        // next chunk are wake-ups inside the runtime, and hands merged chunks to the
        // caller's stream: the caller's thread is woken once per chunk, not per bucket
        // refill. The merge applies the limit; the caller's side only passes rows on.
        let (tx, rx) = mpsc::channel(MERGED_CHUNKS);
        rt.spawn(merge_task(merge, tx));
        let state = Unordered {
            rx,
            buf: VecDeque::new(),
            batched: false,
            left: None,
            last_row: None,
            failed: false,
        };
        Box::pin(futures::stream::unfold(state, |mut u| async move {
            let item = u.next().await?;
            Some((item, u))
        }))
    } else {
        let (tx, rx) = mpsc::channel(depth * streams.len().max(1));
        for stream in streams {
            rt.spawn(pump(stream, tx.clone(), width, stats.clone()));
        }
        drop(tx);
        let state = Unordered {
            rx,
            buf: VecDeque::new(),
            batched: s.batch.is_some(),
            left: limit,
            last_row: None,
            failed: false,
        };
        Box::pin(futures::stream::unfold(state, |mut u| async move {
            let item = u.next().await?;
            Some((item, u))
        }))
    };
    Ok(SaltedScanStream { inner, stats })
}

/// Drives one bucket's scan into its channel until the scan ends, fails, or the receiver
/// is gone.
async fn pump(
    mut stream: impl Stream<Item = Result<RowResult>> + Unpin,
    tx: mpsc::Sender<Chunk>,
    width: usize,
    stats: Arc<SaltedScanStats>,
) {
    // Rows are counted a chunk at a time: one shared counter bumped per row by every bucket
    // task would bounce its cache line between the cores on every row.
    let mut buf = Vec::with_capacity(CHUNK_ROWS);
    while let Some(r) = stream.next().await {
        match r {
            Ok(row) => {
                buf.push(strip_row(width, row));
                if buf.len() >= CHUNK_ROWS {
                    stats
                        .rows_read
                        .fetch_add(buf.len() as u64, AtomicOrdering::Relaxed);
                    let full = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK_ROWS));
                    if tx.send(Ok(full)).await.is_err() {
                        return;
                    }
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        }
    }
    if !buf.is_empty() {
        stats
            .rows_read
            .fetch_add(buf.len() as u64, AtomicOrdering::Relaxed);
        let _ = tx.send(Ok(buf)).await;
    }
}

/// Merged chunks the merge task may hold ready before the caller takes them.
const MERGED_CHUNKS: usize = 4;
/// Rows per chunk the merge task sends to the caller.
const MERGED_CHUNK_ROWS: usize = 1024;

/// Runs the ordered merge, sending its rows in chunks of up to [`CHUNK_ROWS`], until the
/// merge ends or fails (the error goes after the rows before it), or the caller is gone.
async fn merge_task(mut m: Merge, tx: mpsc::Sender<Chunk>) {
    let mut buf = Vec::with_capacity(MERGED_CHUNK_ROWS);
    loop {
        match m.next().await {
            Some(Ok(row)) => {
                buf.push(row);
                if buf.len() >= MERGED_CHUNK_ROWS {
                    let full = std::mem::replace(&mut buf, Vec::with_capacity(MERGED_CHUNK_ROWS));
                    if tx.send(Ok(full)).await.is_err() {
                        return;
                    }
                }
            }
            end => {
                if !buf.is_empty() && tx.send(Ok(buf)).await.is_err() {
                    return;
                }
                if let Some(Err(e)) = end {
                    let _ = tx.send(Err(e)).await;
                }
                return;
            }
        }
    }
}

/// Counts rows against a limit. With a scan batch size a row may come in parts, which count
/// once (`last_row` is only tracked then, to keep reference-count traffic off the hot path).
fn take_row(
    left: &mut Option<usize>,
    last_row: &mut Option<Bytes>,
    batched: bool,
    row: &Bytes,
) -> bool {
    if batched && last_row.as_ref() == Some(row) {
        return true;
    }
    match left {
        Some(0) => return false,
        Some(n) => *n -= 1,
        None => {}
    }
    if batched {
        *last_row = Some(row.clone());
    }
    true
}

/// The ordered merge. `heap` is a binary heap of bucket indexes ordered by each bucket's
/// head row (`heads[i].front()`), smallest first (largest for reverse scans), ties by
/// bucket; only buckets with a head row are in it. Rows are compared where they lie, never
/// cloned, so the merge does no reference counting per row.
struct Merge {
    receivers: Vec<mpsc::Receiver<Chunk>>,
    heads: Vec<VecDeque<RowResult>>,
    heap: Vec<usize>,
    started: bool,
    reverse: bool,
    batched: bool,
    left: Option<usize>,
    last_row: Option<Bytes>,
    failed: bool,
}

impl Merge {
    /// True when bucket `a`'s head goes out before bucket `b`'s.
    fn before(&self, a: usize, b: usize) -> bool {
        let (Some(x), Some(y)) = (self.heads[a].front(), self.heads[b].front()) else {
            return a < b;
        };
        let o = x.row.cmp(&y.row);
        let o = if self.reverse { o.reverse() } else { o };
        o.then(a.cmp(&b)) == Ordering::Less
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut best = i;
            if l < self.heap.len() && self.before(self.heap[l], self.heap[best]) {
                best = l;
            }
            if r < self.heap.len() && self.before(self.heap[r], self.heap[best]) {
                best = r;
            }
            if best == i {
                return;
            }
            self.heap.swap(i, best);
            i = best;
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.before(self.heap[i], self.heap[parent]) {
                return;
            }
            self.heap.swap(i, parent);
            i = parent;
        }
    }

    /// Waits for bucket `i`'s next chunk; false when the bucket is done.
    async fn refill(&mut self, i: usize) -> Result<bool> {
        let Some(rx) = self.receivers.get_mut(i) else {
            return Ok(false);
        };
        match rx.recv().await {
            Some(chunk) => {
                self.heads[i] = chunk?.into();
                Ok(!self.heads[i].is_empty())
            }
            None => Ok(false),
        }
    }

    async fn next(&mut self) -> Option<Result<RowResult>> {
        if self.failed {
            return None;
        }
        if !self.started {
            self.started = true;
            for i in 0..self.receivers.len() {
                match self.refill(i).await {
                    Ok(true) => {
                        self.heap.push(i);
                        let last = self.heap.len() - 1;
                        self.sift_up(last);
                    }
                    Ok(false) => {}
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                }
            }
        }
        let i = *self.heap.first()?;
        let head = self.heads[i].front()?;
        if !take_row(&mut self.left, &mut self.last_row, self.batched, &head.row) {
            return None;
        }
        let row = self.heads[i].pop_front()?;
        let more = if self.heads[i].is_empty() {
            match self.refill(i).await {
                Ok(more) => more,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        } else {
            true
        };
        if !more {
            let last = self.heap.len() - 1;
            self.heap.swap(0, last);
            self.heap.pop();
        }
        self.sift_down(0);
        Some(Ok(row))
    }
}

struct Unordered {
    rx: mpsc::Receiver<Chunk>,
    buf: VecDeque<RowResult>,
    batched: bool,
    left: Option<usize>,
    last_row: Option<Bytes>,
    failed: bool,
}

impl Unordered {
    async fn next(&mut self) -> Option<Result<RowResult>> {
        if self.failed {
            return None;
        }
        while self.buf.is_empty() {
            match self.rx.recv().await? {
                Ok(rows) => self.buf = rows.into(),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let front = self.buf.front()?;
        if !take_row(&mut self.left, &mut self.last_row, self.batched, &front.row) {
            return None;
        }
        self.buf.pop_front().map(Ok)
    }
}
