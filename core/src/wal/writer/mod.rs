//! The write path: appenders queue their frames, one writer at a time writes the whole queue
//! (group commit for `SyncWal`), group-committed fsyncs, and the background flusher of
//! `AsyncWal` records.
//!
//! Two mutexes, always taken in this order when both are held: [`Shared::current`], the
//! writer lock over the [`Current`] segment (held across every write to a segment file, a
//! roll and a close), then [`Shared::queue`], the [`Queue`] of frames appended and not yet
//! written (held only to push or take bytes, never across a system call).
//!
//! - An append (any durability but `SkipWal`) encodes its frame without a lock, then under
//!   the queue lock checks the WAL is open and healthy and pushes the frame. Appends happen in
//!   the engine's commit order, so queue order (and file order) equals append order.
//! - A `SyncWal` or `FsyncWal` ticket first waits until its bytes are written to the OS: if
//!   nobody is writing, the waiter takes the writer lock itself, takes the whole queue (its
//!   own frame and everything queued before and after it), and writes it with one
//!   `write_all`; if somebody is, it waits asynchronously (its tokio worker runs other
//!   tasks) for that write to end and looks again. So concurrent committers share writes, and
//!   no thread blocks in a lock while another does I/O.
//! - An `AsyncWal` append wakes the flusher thread (once per batch of wakes); the flusher,
//!   any later writer, [`super::Wal::sync`], [`super::Wal::roll`] and [`super::Wal::close`]
//!   write the queued bytes. Past 4 MiB queued, the appender writes them itself.
//! - Every 8 MiB written to a segment, the flusher fsyncs it in the background (outside
//!   every lock), so the fsync that closes a full segment at its roll, which every committer
//!   waits for, has little left to write back.
//! - Positions are a global byte counter of record bytes since open (segment headers are not
//!   counted), so they compare across rolls. `written_upto` is the end of what reached the
//!   OS; `synced_upto` the end of what is known fsynced; `Queue::appended` the end of what
//!   was appended.
//! - `FsyncWal` (and `sync(true)`) group-commit by leader election in
//!   [`Shared::wait_synced`]: a waiter not yet covered by `synced_upto` takes the sync
//!   mutex, re-checks, and as leader writes what is queued, then fsyncs the current
//!   segment's file (a cloned `Arc<dyn WriteFile>`, outside the writer lock, on tokio's
//!   blocking pool) and raises `synced_upto` to the position written before the fsync
//!   started. Waiters queued behind it usually find themselves covered.
//!
//! Invariants kept: a closed segment was fsynced (and `synced_upto` raised past it) before
//! the next segment was created, so everything in older segments counts as synced. Every
//! release of the writer lock wakes the waiters, so a waiter that found the lock taken
//! always looks again. After a failed write or fsync nothing is written again (a failed fsync
//! may have dropped dirty pages, so retrying could acknowledge lost data):
//! [`Shared::failure`] is set once, later appends return `WritesRefused`, and tickets not yet
//! satisfied fail with the I/O error. One exception: a write that carried markers alone
//! (a flush's, see the `recovery` module) and failed is cut off the file and remembered
//! (`lost_markers`); no record was in it, so the WAL goes on, and the flush that queued
//! the marker fails ([`super::Wal::sync_marker`]). The next segment's opening marker only
//! counts seqs actually written.

mod objects;
mod wait;

use super::segment::{self, SegmentStore};
use super::{SegmentInfo, WalOptions};
use crate::error::{Error, Result};
use crate::fs::WriteFile;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::io;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Queued `AsyncWal` bytes beyond which the appender writes them itself (backpressure).
pub(crate) const PENDING_LIMIT: usize = 4 << 20;
/// A write buffer that grew past this is freed rather than kept for reuse.
const MAX_KEPT_BUF: usize = 8 << 20;
/// Each time this many bytes were written to a segment, the flusher fsyncs it in the
/// background, so the fsync that closes the segment at a roll (under the writer lock, with
/// every committer waiting) finds little left to write back.
const PRESYNC_BYTES: u64 = 8 << 20;

/// Why the WAL stopped writing.
pub(crate) struct Failure {
    reason: String,
    kind: io::ErrorKind,
    /// Set when the writer was fenced: `(writer folder, segment id)`.
    fenced: Option<(String, u64)>,
}

impl Failure {
    /// The error for a call that would write after the failure.
    pub fn refused(&self) -> Error {
        match &self.fenced {
            Some(_) => self.fenced_error(),
            None => Error::WritesRefused(self.reason.clone()),
        }
    }

    /// The error for a ticket whose record was not yet written (or fsynced) at the failure.
    pub fn io(&self) -> Error {
        match &self.fenced {
            Some(_) => self.fenced_error(),
            None => Error::Io(io::Error::new(self.kind, self.reason.clone())),
        }
    }

    fn fenced_error(&self) -> Error {
        let (writer, segment) = self.fenced.clone().unwrap_or_default();
        Error::Fenced { writer, segment }
    }
}

/// How many failed marker-only writes [`Shared::marker_lost`] remembers.
const LOST_MARKERS_KEPT: usize = 64;

/// Frames appended and not yet written, guarded by [`Shared::queue`].
#[derive(Default)]
pub(crate) struct Queue {
    /// The frames, in append order; they occupy positions `appended - len..appended`.
    pending: Vec<u8>,
    /// The largest seq of a record in `pending`.
    pending_max_seq: Option<u64>,
    /// The largest seq in `pending`, markers included.
    pending_high: u64,
    /// Record bytes appended since open (written or queued).
    appended: u64,
    /// The flusher was woken for `AsyncWal` bytes and no writer took the queue since.
    flusher_woken: bool,
}

impl Queue {
    /// Queues a frame; returns the position just past it.
    pub fn push(&mut self, frame: &[u8], seq: u64) -> u64 {
        self.pending.extend_from_slice(frame);
        self.pending_max_seq = self.pending_max_seq.max(Some(seq));
        self.pending_high = self.pending_high.max(seq);
        self.appended += frame.len() as u64;
        self.appended
    }

    /// Queues a marker frame (a record without edits, see the `recovery` module): it
    /// counts for the bound of later segments' markers, not for the segment's `max_seq`.
    pub fn push_marker(&mut self, frame: &[u8], seq: u64) -> u64 {
        self.pending.extend_from_slice(frame);
        self.pending_high = self.pending_high.max(seq);
        self.appended += frame.len() as u64;
        self.appended
    }

    /// The bytes waiting to be written.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// True (once per batch of wakes) when an `AsyncWal` append should wake the flusher.
    pub fn should_wake_flusher(&mut self) -> bool {
        !std::mem::replace(&mut self.flusher_woken, true)
    }
}

/// The current segment, guarded by [`Shared::current`] (the writer lock).
pub(crate) struct Current {
    store: SegmentStore,
    opts: WalOptions,
    /// The current segment's file; `None` on an object store, where each write is a
    /// segment object of its own (already durable when stored).
    file: Option<Arc<dyn WriteFile>>,
    /// The current segment (on an object store: the last one stored).
    id: u64,
    /// Bytes in the segment file, header included.
    size: u64,
    /// Bytes of a segment holding no record: its header and its opening marker.
    base: u64,
    /// The largest seq written so far, markers included: the next segment's marker.
    high_seq: u64,
    /// Record bytes written to the OS since open, over all segments.
    written: u64,
    /// The buffer a write swaps with the queue's (kept empty between writes for reuse).
    spare: Vec<u8>,
}

impl Current {
    /// The freshly created segment `id` (header and opening marker) of `store`; on an
    /// object store no file (every write is a segment object of its own, `id + 1` next).
    pub fn new(
        store: SegmentStore,
        opts: WalOptions,
        file: Option<Box<dyn WriteFile>>,
        id: u64,
        base: u64,
        high_seq: u64,
    ) -> Self {
        Current {
            store,
            opts,
            file: file.map(Arc::from),
            id,
            size: base,
            base,
            high_seq,
            written: 0,
            spare: Vec::new(),
        }
    }

    /// Whether the segment holds no record.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.size == self.base
    }
}

/// The writer lock held: dereferences to the [`Current`] segment and, once released, wakes
/// every ticket waiting for a write to end.
pub(crate) struct Writer<'a> {
    guard: MutexGuard<'a, Current>,
    /// Dropped after `guard` (fields drop in declaration order): the waiters are woken only
    /// once the lock is free. Woken before, a waiter could find the lock still taken, wait
    /// again, and never be woken.
    _wake: WakeOnDrop<'a>,
}

impl Deref for Writer<'_> {
    type Target = Current;
    fn deref(&self) -> &Current {
        &self.guard
    }
}

impl DerefMut for Writer<'_> {
    fn deref_mut(&mut self) -> &mut Current {
        &mut self.guard
    }
}

/// Wakes the waiters of [`Shared::released`] when dropped.
struct WakeOnDrop<'a>(&'a tokio::sync::Notify);

impl Drop for WakeOnDrop<'_> {
    fn drop(&mut self) {
        // Waiters register before trying the lock: whoever found it taken by this holder is
        // woken here and looks again.
        self.0.notify_waiters();
    }
}

/// State shared by the [`super::Wal`] handle, its tickets and the flusher thread.
pub(crate) struct Shared {
    /// The writer lock over the current segment; every write happens under it. Take it
    /// with [`Shared::writer`] or [`Shared::try_writer`].
    current: Mutex<Current>,
    /// Frames appended and not yet written.
    pub queue: Mutex<Queue>,
    /// Wakes the flusher (waiting on `queue`) when `AsyncWal` bytes are queued or at close.
    pub wake: Condvar,
    /// Notified whenever the writer lock is released.
    released: tokio::sync::Notify,
    /// Live segments, oldest first, the current one last.
    pub segments: Mutex<Vec<SegmentInfo>>,
    /// Mirrors `Current::written` for lock-free checks.
    written_upto: AtomicU64,
    /// Every record byte before this position is fsynced.
    synced_upto: AtomicU64,
    /// Held by the fsync leader.
    sync_lock: tokio::sync::Mutex<()>,
    /// Set by close (under `queue`): calls that would write return `Closed`.
    closing: AtomicBool,
    /// Set once by the first failed write, fsync or roll.
    failure: OnceLock<Failure>,
    /// Set by a write that crossed a [`PRESYNC_BYTES`] boundary of its segment; the flusher
    /// clears it and fsyncs the segment.
    presync_due: AtomicBool,
    /// Called after each roll with the closed and the new segment's ids.
    pub roll_listener: OnceLock<super::RollListener>,
    /// Stream positions `(start, end)` of the latest writes of markers alone that failed
    /// (and were cut off): a flush whose marker lies there must fail.
    lost_markers: parking_lot::Mutex<Vec<(u64, u64)>>,
    /// Test hook: the next write fails with an injected I/O error.
    #[cfg(test)]
    pub inject_failure: AtomicBool,
    /// Test hook: the next group-commit fsync fails with an injected I/O error.
    #[cfg(test)]
    pub inject_fsync_failure: AtomicBool,
    /// Fsyncs of the current segment for waiting writes (group commit) and by the
    /// background presync; rolls are counted in `rolls`.
    pub fsyncs: AtomicU64,
    /// Segment rolls (each fsyncs the segment it closes).
    pub rolls: AtomicU64,
    /// Test counter: writes to segment files (each carries one or more frames).
    #[cfg(test)]
    pub writes: AtomicU64,
}

impl Shared {
    /// Shared state over the given live segments (the current one last) and its writer.
    pub fn new(segments: Vec<SegmentInfo>, current: Current) -> Self {
        Shared {
            current: Mutex::new(current),
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            released: tokio::sync::Notify::new(),
            segments: Mutex::new(segments),
            written_upto: AtomicU64::new(0),
            synced_upto: AtomicU64::new(0),
            sync_lock: tokio::sync::Mutex::new(()),
            closing: AtomicBool::new(false),
            failure: OnceLock::new(),
            presync_due: AtomicBool::new(false),
            lost_markers: parking_lot::Mutex::new(Vec::new()),
            roll_listener: OnceLock::new(),
            #[cfg(test)]
            inject_failure: AtomicBool::new(false),
            #[cfg(test)]
            inject_fsync_failure: AtomicBool::new(false),
            fsyncs: AtomicU64::new(0),
            rolls: AtomicU64::new(0),
            #[cfg(test)]
            writes: AtomicU64::new(0),
        }
    }

    /// Takes the writer lock, blocking.
    pub fn writer(&self) -> Writer<'_> {
        Writer {
            guard: self.current.lock(),
            _wake: WakeOnDrop(&self.released),
        }
    }

    /// Takes the writer lock if nobody holds it.
    fn try_writer(&self) -> Option<Writer<'_>> {
        self.current.try_lock().map(|guard| Writer {
            guard,
            _wake: WakeOnDrop(&self.released),
        })
    }

    /// Fails if the WAL is closed or failed.
    pub fn check(&self) -> Result<()> {
        if self.closing.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        match self.failure.get() {
            Some(f) => Err(f.refused()),
            None => Ok(()),
        }
    }

    /// Writes every queued byte with one write; then updates the segment's size and max seq
    /// and rolls it if it reached the limit. A failed write puts the WAL in the failed state
    /// and drops the bytes it took. A failed roll after a good write does too, but the write
    /// itself still succeeded.
    pub fn write_queued(&self, cur: &mut Current) -> io::Result<()> {
        let (max_seq, high_seq) = {
            let mut q = self.queue.lock();
            q.flusher_woken = false;
            std::mem::swap(&mut q.pending, &mut cur.spare);
            let high = cur.high_seq.max(std::mem::take(&mut q.pending_high));
            (q.pending_max_seq.take(), high)
        };
        let n = cur.spare.len() as u64;
        if n == 0 {
            return Ok(());
        }
        let Some(file) = cur.file.clone() else {
            return self.write_object(cur, max_seq, high_seq);
        };
        let outcome = self.write_raw(&*file, &cur.spare);
        cur.spare.clear();
        if cur.spare.capacity() > MAX_KEPT_BUF {
            cur.spare = Vec::new();
        }
        if let Err(e) = outcome {
            // Markers alone (a flush on a full disk): nobody waits for them and no write is
            // lost, so once the partial bytes are cut off the WAL goes on (the flush fails).
            if max_seq.is_none() && file.set_len(cur.size).is_ok() {
                let start = cur.written;
                cur.written += n;
                self.written_upto.store(cur.written, Ordering::Release);
                let mut lost = self.lost_markers.lock();
                if lost.len() >= LOST_MARKERS_KEPT {
                    lost.remove(0);
                }
                lost.push((start, cur.written));
                return Err(e);
            }
            self.fail("write", cur.id, &e);
            return Err(e);
        }
        cur.high_seq = high_seq;
        let before = cur.size;
        cur.size += n;
        cur.written += n;
        self.written_upto.store(cur.written, Ordering::Release);
        if let Some(current) = self.segments.lock().last_mut() {
            current.size = cur.size;
            current.max_seq = current.max_seq.max(max_seq);
        }
        if cur.size >= cur.opts.segment_size {
            if let Err(e) = self.roll(cur) {
                self.fail("roll", cur.id, &e);
            }
        } else if before / PRESYNC_BYTES != cur.size / PRESYNC_BYTES
            && !self.presync_due.swap(true, Ordering::AcqRel)
        {
            self.wake_flusher();
        }
        Ok(())
    }

    fn write_raw(&self, file: &dyn WriteFile, buf: &[u8]) -> io::Result<()> {
        #[cfg(test)]
        {
            self.writes.fetch_add(1, Ordering::Relaxed);
            if self.inject_failure.swap(false, Ordering::SeqCst) {
                return Err(io::Error::other("injected failure"));
            }
        }
        file.write_all(buf)
    }

    /// Fsyncs and closes the current segment, then creates the next one.
    fn roll(&self, cur: &mut Current) -> io::Result<()> {
        let SegmentStore::Dir { fs, dir } = &cur.store else {
            return Ok(()); // on an object store every write is a segment of its own
        };
        if let Some(file) = &cur.file {
            file.sync_all()?;
        }
        self.rolls.fetch_add(1, Ordering::Relaxed);
        self.synced_upto.fetch_max(cur.written, Ordering::AcqRel);
        let id = cur
            .id
            .checked_add(1)
            .ok_or_else(|| io::Error::other("WAL segment ids exhausted"))?;
        let (file, path, base) = segment::create(&**fs, dir, id, cur.high_seq)?;
        cur.file = Some(Arc::from(file));
        cur.id = id;
        cur.size = base;
        cur.base = base;
        self.segments.lock().push(SegmentInfo {
            id,
            path,
            max_seq: None,
            size: cur.size,
        });
        tracing::debug!(segment = id, "rolled WAL segment");
        if let Some(listener) = self.roll_listener.get() {
            listener(id - 1, id);
        }
        Ok(())
    }

    /// Record bytes written to segment files since the WAL opened.
    pub fn bytes_written(&self) -> u64 {
        self.written_upto.load(Ordering::Acquire)
    }

    /// Whether the marker whose frame ends at stream position `end` was cut off by a
    /// failed write (see `lost_markers`).
    pub fn marker_lost(&self, end: u64) -> bool {
        self.lost_markers
            .lock()
            .iter()
            .any(|&(start, stop)| start < end && end <= stop)
    }

    /// [`super::Wal::roll`]: writes the queued bytes, then rolls unless the segment is
    /// empty.
    #[cfg(test)]
    pub fn requested_roll(&self) -> Result<()> {
        let mut cur = self.writer();
        self.check()?;
        self.write_queued(&mut cur).map_err(|e| self.error_of(e))?;
        if cur.is_empty() {
            return Ok(()); // nothing to close: the current segment holds no record
        }
        self.roll(&mut cur).map_err(|e| {
            self.fail("roll", cur.id, &e);
            Error::Io(e)
        })
    }

    /// [`super::Wal::sync`]'s first half: writes the queued bytes; returns the position
    /// just past them.
    pub fn flush(&self) -> Result<u64> {
        let mut cur = self.writer();
        self.check()?;
        self.write_queued(&mut cur).map_err(|e| self.error_of(e))?;
        Ok(cur.written)
    }

    /// Marks the WAL closed, writes the queued bytes and fsyncs the current segment, and
    /// wakes the flusher so it exits. Refused if the WAL had failed.
    pub fn close(&self) -> Result<()> {
        let mut cur = self.writer();
        {
            // Under the queue lock: every append either queued before this (and is written
            // below) or sees `closing`.
            let _q = self.queue.lock();
            self.closing.store(true, Ordering::Release);
        }
        let out = match self.failure.get() {
            Some(f) => Err(f.refused()),
            None => self
                .write_queued(&mut cur)
                .map_err(|e| self.error_of(e))
                .and_then(
                    |()| match cur.file.as_ref().map_or(Ok(()), |f| f.sync_all()) {
                        Ok(()) => {
                            self.synced_upto.fetch_max(cur.written, Ordering::AcqRel);
                            Ok(())
                        }
                        Err(e) => {
                            self.fail("fsync at close", cur.id, &e);
                            Err(Error::Io(e))
                        }
                    },
                ),
        };
        drop(cur);
        self.wake_flusher();
        out
    }

    /// Wakes the flusher; taking the queue lock first means a flusher between its check
    /// and its wait cannot miss the wake.
    pub fn wake_flusher(&self) {
        drop(self.queue.lock());
        self.wake.notify_one();
    }

    /// Enters the failed state for a reason outside the WAL (the engine lost its lease):
    /// appends are refused with `reason`, and records not yet written fail.
    pub fn refuse(&self, reason: String) {
        tracing::error!(%reason, "writes are refused until the engine is reopened");
        let _ = self.failure.set(Failure {
            reason,
            kind: io::ErrorKind::PermissionDenied,
            fenced: None,
        });
        self.wake_flusher();
    }

    /// Enters the failed state (the first failure wins): no more writes, appends refused.
    fn fail(&self, what: &str, id: u64, e: &io::Error) {
        let reason = format!("WAL {what} failed in segment {id}: {e}");
        tracing::error!(%reason, "WAL failed; writes are refused until the engine is reopened");
        let _ = self.failure.set(Failure {
            reason,
            kind: e.kind(),
            fenced: None,
        });
    }
}
