//! The write path: the current segment behind one mutex, written by the appenders' own
//! threads; group-committed fsyncs; and the background flusher of `AsyncWal` records.
//!
//! All writes to a segment happen under [`Shared::current`], the mutex on the [`Current`]
//! segment, so file order equals the order in which writers took that mutex:
//!
//! - A `SyncWal` or `FsyncWal` append encodes its frame without the lock, then under it
//!   writes any pending `AsyncWal` bytes plus its own frame with one `write_all`, updates the
//!   segment's size and max seq, and rolls the segment if it reached the size limit.
//! - An `AsyncWal` append only copies its frame into `Current::pending` (under the lock) and
//!   wakes the flusher thread when the buffer goes from empty to non-empty. The flusher, any
//!   later direct writer, [`super::Wal::sync`], [`super::Wal::roll`] and
//!   [`super::Wal::close`] write the pending bytes, ahead of anything appended after them.
//! - Positions are a global byte counter of record bytes since open (segment headers are not
//!   counted), so they compare across rolls. `written_upto` is the end of what reached the
//!   OS; `synced_upto` the end of what is known fsynced.
//! - `FsyncWal` (and `sync(true)`) group-commit by leader election in
//!   [`Shared::wait_synced`]: a waiter not yet covered by `synced_upto` takes the sync
//!   mutex, re-checks, and as leader fsyncs the current segment's file (a cloned `Arc<dyn WriteFile>`,
//!   outside the segment mutex, on tokio's blocking pool) and then raises `synced_upto` to
//!   the position written before the fsync started. Waiters queued behind it usually find
//!   themselves covered.
//!
//! Invariants kept: a closed segment was fsynced (and `synced_upto` raised past it) before
//! the next segment was created, so everything in older segments counts as synced. After a
//! failed write or fsync nothing is written again (a failed fsync may have dropped dirty
//! pages, so retrying could acknowledge lost data): [`Shared::failure`] is set once, later
//! appends return `WritesRefused`, and tickets not yet satisfied fail with the I/O error.

use super::segment::{self, HEADER_LEN};
use super::{SegmentInfo, WalOptions};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WriteFile};
use parking_lot::{Condvar, Mutex};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Pending `AsyncWal` bytes beyond which the appender writes them itself (backpressure).
pub(crate) const PENDING_LIMIT: usize = 4 << 20;
/// A pending buffer that grew past this is freed rather than kept for reuse.
const MAX_KEPT_BUF: usize = 8 << 20;

/// Why the WAL stopped writing.
pub(crate) struct Failure {
    reason: String,
    kind: io::ErrorKind,
}

impl Failure {
    /// The error for a call that would write after the failure.
    pub fn refused(&self) -> Error {
        Error::WritesRefused(self.reason.clone())
    }

    /// The error for a ticket whose record was not yet written (or fsynced) at the failure.
    pub fn io(&self) -> Error {
        Error::Io(io::Error::new(self.kind, self.reason.clone()))
    }
}

/// The current segment, guarded by [`Shared::current`].
pub(crate) struct Current {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    opts: WalOptions,
    file: Arc<dyn WriteFile>,
    id: u64,
    /// Bytes in the segment file, header included.
    size: u64,
    /// Record bytes written to the OS since open, over all segments.
    written: u64,
    /// `AsyncWal` frames not yet written; they occupy positions `written..written + len`.
    pending: Vec<u8>,
    /// The largest seq in `pending`.
    pending_max_seq: Option<u64>,
}

impl Current {
    /// The freshly created segment `id` (header only).
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        opts: WalOptions,
        file: Box<dyn WriteFile>,
        id: u64,
    ) -> Self {
        Current {
            fs,
            dir,
            opts,
            file: Arc::from(file),
            id,
            size: HEADER_LEN as u64,
            written: 0,
            pending: Vec::new(),
            pending_max_seq: None,
        }
    }

    /// The position just past everything appended so far (written or pending).
    pub fn appended(&self) -> u64 {
        self.written + self.pending.len() as u64
    }

    /// Queues an `AsyncWal` frame; returns true if the buffer was empty before.
    pub fn push_pending(&mut self, frame: &[u8], seq: u64) -> bool {
        let was_empty = self.pending.is_empty();
        self.pending.extend_from_slice(frame);
        self.pending_max_seq = self.pending_max_seq.max(Some(seq));
        was_empty
    }

    /// The bytes waiting for the flusher.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Record bytes written to the OS since open.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Whether the segment holds no record.
    pub fn is_empty(&self) -> bool {
        self.size == HEADER_LEN as u64
    }
}

/// State shared by the [`super::Wal`] handle, its tickets and the flusher thread.
pub(crate) struct Shared {
    /// The current segment; every write happens under this mutex.
    pub current: Mutex<Current>,
    /// Wakes the flusher (waiting on `current`) when `pending` gains bytes or at close.
    pub wake: Condvar,
    /// Live segments, oldest first, the current one last.
    pub segments: Mutex<Vec<SegmentInfo>>,
    /// Mirrors `Current::written` for lock-free checks.
    written_upto: AtomicU64,
    /// Every record byte before this position is fsynced.
    synced_upto: AtomicU64,
    /// Held by the fsync leader.
    sync_lock: tokio::sync::Mutex<()>,
    /// Set by close (under `current`): calls that would write return `Closed`.
    closing: AtomicBool,
    /// Set once by the first failed write, fsync or roll.
    failure: OnceLock<Failure>,
    /// Called after each roll with the closed and the new segment's ids.
    pub roll_listener: OnceLock<super::RollListener>,
    /// Test hook: the next write fails with an injected I/O error.
    #[cfg(test)]
    pub inject_failure: AtomicBool,
    /// Test hook: the next group-commit fsync fails with an injected I/O error.
    #[cfg(test)]
    pub inject_fsync_failure: AtomicBool,
    /// Test counter: group-commit fsyncs done.
    #[cfg(test)]
    pub fsyncs: AtomicU64,
}

impl Shared {
    /// Shared state over the given live segments (the current one last) and its writer.
    pub fn new(segments: Vec<SegmentInfo>, current: Current) -> Self {
        Shared {
            current: Mutex::new(current),
            wake: Condvar::new(),
            segments: Mutex::new(segments),
            written_upto: AtomicU64::new(0),
            synced_upto: AtomicU64::new(0),
            sync_lock: tokio::sync::Mutex::new(()),
            closing: AtomicBool::new(false),
            failure: OnceLock::new(),
            roll_listener: OnceLock::new(),
            #[cfg(test)]
            inject_failure: AtomicBool::new(false),
            #[cfg(test)]
            inject_fsync_failure: AtomicBool::new(false),
            #[cfg(test)]
            fsyncs: AtomicU64::new(0),
        }
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

    /// Writes the pending bytes followed by `frame` (with its seq), if any, in one write;
    /// then updates the segment's size and max seq and rolls it if it reached the limit.
    /// A failed write puts the WAL in the failed state and drops the pending bytes. A failed
    /// roll after a good write does too, but the write itself still succeeded.
    pub fn write(&self, cur: &mut Current, frame: Option<(&[u8], u64)>) -> io::Result<()> {
        let mut max_seq = cur.pending_max_seq.take();
        let mut pending = std::mem::take(&mut cur.pending);
        let buf: &[u8] = match frame {
            Some((frame, seq)) => {
                max_seq = max_seq.max(Some(seq));
                if pending.is_empty() {
                    frame
                } else {
                    pending.extend_from_slice(frame);
                    &pending
                }
            }
            None => &pending,
        };
        let n = buf.len() as u64;
        let outcome = if n == 0 {
            Ok(())
        } else {
            self.write_raw(&*cur.file, buf)
        };
        pending.clear();
        if pending.capacity() <= MAX_KEPT_BUF {
            cur.pending = pending;
        }
        if let Err(e) = outcome {
            self.fail("write", cur.id, &e);
            return Err(e);
        }
        if n == 0 {
            return Ok(());
        }
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
        }
        Ok(())
    }

    fn write_raw(&self, file: &dyn WriteFile, buf: &[u8]) -> io::Result<()> {
        #[cfg(test)]
        if self.inject_failure.swap(false, Ordering::SeqCst) {
            return Err(io::Error::other("injected failure"));
        }
        file.write_all(buf)
    }

    /// Fsyncs and closes the current segment, then creates the next one.
    fn roll(&self, cur: &mut Current) -> io::Result<()> {
        cur.file.sync_all()?;
        self.synced_upto.fetch_max(cur.written, Ordering::AcqRel);
        let id = cur
            .id
            .checked_add(1)
            .ok_or_else(|| io::Error::other("WAL segment ids exhausted"))?;
        let (file, path) = segment::create(&*cur.fs, &cur.dir, id)?;
        cur.file = Arc::from(file);
        cur.id = id;
        cur.size = HEADER_LEN as u64;
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

    /// [`super::Wal::roll`]: writes the pending bytes, then rolls unless the segment is
    /// empty.
    pub fn requested_roll(&self) -> Result<()> {
        let mut cur = self.current.lock();
        self.check()?;
        self.write(&mut cur, None)?;
        if cur.is_empty() {
            return Ok(()); // nothing to close: the current segment holds no record
        }
        self.roll(&mut cur).map_err(|e| {
            self.fail("roll", cur.id, &e);
            Error::Io(e)
        })
    }

    /// [`super::Wal::sync`]'s first half: writes the pending bytes; returns the position
    /// just past them.
    pub fn flush(&self) -> Result<u64> {
        let mut cur = self.current.lock();
        self.check()?;
        self.write(&mut cur, None)?;
        Ok(cur.written)
    }

    /// Marks the WAL closed, writes the pending bytes and fsyncs the current segment, and
    /// wakes the flusher so it exits. Refused if the WAL had failed.
    pub fn close(&self) -> Result<()> {
        let mut cur = self.current.lock();
        self.closing.store(true, Ordering::Release);
        let out = match self.failure.get() {
            Some(f) => Err(f.refused()),
            None => self
                .write(&mut cur, None)
                .map_err(Error::Io)
                .and_then(|()| match cur.file.sync_all() {
                    Ok(()) => {
                        self.synced_upto.fetch_max(cur.written, Ordering::AcqRel);
                        Ok(())
                    }
                    Err(e) => {
                        self.fail("fsync at close", cur.id, &e);
                        Err(Error::Io(e))
                    }
                }),
        };
        drop(cur);
        self.wake.notify_all();
        out
    }

    /// Resolves once every byte before `end` is written to the OS, writing the pending
    /// bytes itself if the flusher has not yet.
    pub fn wait_written(&self, end: u64) -> Result<()> {
        if self.written_upto.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        let mut cur = self.current.lock();
        if cur.written >= end {
            return Ok(());
        }
        if let Some(f) = self.failure.get() {
            return Err(f.io());
        }
        self.write(&mut cur, None)?;
        if cur.written >= end {
            Ok(())
        } else {
            Err(Error::WritesRefused(
                "WAL record was dropped before it was written".into(),
            ))
        }
    }

    /// Group commit: resolves once every byte before `end` (already written) is fsynced.
    pub async fn wait_synced(self: &Arc<Self>, end: u64) -> Result<()> {
        if self.synced_upto.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        let _leader = self.sync_lock.lock().await;
        if self.synced_upto.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        if let Some(f) = self.failure.get() {
            return Err(f.io());
        }
        let (file, target, id) = {
            let cur = self.current.lock();
            (Arc::clone(&cur.file), cur.written, cur.id)
        };
        // Older segments were fsynced by their roll; `target` ends in `file` or before it.
        let shared = Arc::clone(self);
        // The job records its own outcome, so it counts even if this future is dropped.
        let job = move || shared.sync_file(&*file, target, id);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => rt.spawn_blocking(job).await.unwrap_or_else(|e| {
                Err(Error::Io(io::Error::other(format!(
                    "WAL fsync task did not complete: {e}"
                ))))
            }),
            Err(_) => job(),
        }
    }

    /// Fsyncs `file` (segment `id`), which holds everything up to `target`.
    fn sync_file(&self, file: &dyn WriteFile, target: u64, id: u64) -> Result<()> {
        #[cfg(test)]
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        #[cfg(test)]
        let outcome = if self.inject_fsync_failure.swap(false, Ordering::SeqCst) {
            Err(io::Error::other("injected fsync failure"))
        } else {
            file.sync_data()
        };
        #[cfg(not(test))]
        let outcome = file.sync_data();
        match outcome {
            Ok(()) => {
                self.synced_upto.fetch_max(target, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => {
                self.fail("fsync", id, &e);
                Err(Error::Io(e))
            }
        }
    }

    /// Enters the failed state (the first failure wins): no more writes, appends refused.
    fn fail(&self, what: &str, id: u64, e: &io::Error) {
        let reason = format!("WAL {what} failed in segment {id}: {e}");
        tracing::error!(%reason, "WAL failed; writes are refused until the engine is reopened");
        let _ = self.failure.set(Failure {
            reason,
            kind: e.kind(),
        });
    }

    /// The flusher thread's body: writes pending `AsyncWal` bytes whenever woken, until
    /// close.
    pub fn run_flusher(self: Arc<Self>) {
        let _guard = StopGuard(Arc::clone(&self));
        let mut cur = self.current.lock();
        loop {
            if self.closing.load(Ordering::Acquire) {
                return;
            }
            if !cur.pending.is_empty() && self.failure.get().is_none() {
                // A failure is recorded by `write`; the tickets see it.
                let _ = self.write(&mut cur, None);
                continue;
            }
            self.wake.wait(&mut cur);
        }
    }
}

/// On flusher exit other than by close (a panic), refuses further work, so pending
/// `AsyncWal` records fail their tickets instead of being silently kept in memory.
struct StopGuard(Arc<Shared>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        if !self.0.closing.load(Ordering::Acquire) {
            let _ = self.0.failure.set(Failure {
                reason: "WAL flusher thread stopped".into(),
                kind: io::ErrorKind::Other,
            });
        }
    }
}
