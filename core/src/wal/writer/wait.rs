//! Waiting for the OS and the disk: a ticket waits until its bytes are written
//! ([`Shared::wait_written`], which writes the queue itself when nobody is writing) and, for
//! `FsyncWal`, fsynced ([`Shared::wait_synced`], the group-commit fsync by leader election);
//! and the flusher thread ([`Shared::run_flusher`]), which writes `AsyncWal` bytes and fsyncs
//! the current segment in the background.
//!
//! Invariants kept (see the `writer` module doc): no thread blocks in a lock while another
//! does I/O; an fsync runs outside the writer and queue locks and raises `synced_upto` only
//! to the position written before it started; a failed fsync puts the WAL in the failed
//! state, so nothing is retried; a flusher that stops other than by close refuses every
//! later write.

use super::{Failure, Shared};
use crate::error::{Error, Result};
use crate::fs::WriteFile;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Shared {
    /// Resolves once every byte before `end` is written to the OS. When nobody is writing,
    /// writes the queue itself (with everything queued so far); otherwise waits for the
    /// running write to end, without blocking its thread, and looks again.
    pub async fn wait_written(&self, end: u64) -> Result<()> {
        loop {
            if self.written_upto.load(Ordering::Acquire) >= end {
                return Ok(());
            }
            let released = self.released.notified();
            tokio::pin!(released);
            // Registered before looking at the lock: a release after this wakes us.
            released.as_mut().enable();
            if let Some(mut cur) = self.try_writer() {
                if cur.written >= end {
                    return Ok(());
                }
                if let Some(f) = self.failure.get() {
                    return Err(f.io());
                }
                self.write_queued(&mut cur).map_err(|e| self.error_of(e))?;
                if cur.written >= end {
                    return Ok(());
                }
                return Err(Error::WritesRefused(
                    "WAL record was dropped before it was written".into(),
                ));
            }
            if let Some(f) = self.failure.get() {
                return Err(f.io());
            }
            released.await;
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
            // The leader first writes whatever is queued, so its fsync covers every waiter
            // queued so far, not only those whose bytes some writer happened to write.
            let mut cur = self.writer();
            self.write_queued(&mut cur).map_err(|e| self.error_of(e))?;
            let Some(file) = cur.file.clone() else {
                // An object store: what is written is durable.
                self.synced_upto.fetch_max(cur.written, Ordering::AcqRel);
                return Ok(());
            };
            (file, cur.written, cur.id)
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

    /// The flusher thread's body: writes queued bytes whenever woken, and fsyncs the
    /// current segment in the background when a write crossed a [`PRESYNC_BYTES`]
    /// boundary, until close.
    ///
    /// [`PRESYNC_BYTES`]: super::PRESYNC_BYTES
    pub fn run_flusher(self: Arc<Self>) {
        let _guard = StopGuard(Arc::clone(&self));
        let mut q = self.queue.lock();
        loop {
            if self.closing.load(Ordering::Acquire) {
                return;
            }
            if self.failure.get().is_some() {
                self.wake.wait(&mut q);
                continue;
            }
            if !q.pending.is_empty() {
                drop(q);
                {
                    // A failure is recorded by `write_queued`; the tickets see it.
                    let mut cur = self.writer();
                    let _ = self.write_queued(&mut cur);
                }
                q = self.queue.lock();
                continue;
            }
            if self.presync_due.swap(false, Ordering::AcqRel) {
                drop(q);
                let (file, target, id) = {
                    let cur = self.writer();
                    (cur.file.clone(), cur.written, cur.id)
                };
                // Outside every lock. If a roll closed this segment meanwhile, it was
                // fsynced already and this fsync is merely redundant. A failure is recorded.
                if let Some(file) = file {
                    let _ = self.sync_file(&*file, target, id);
                }
                q = self.queue.lock();
                continue;
            }
            self.wake.wait(&mut q);
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
                fenced: None,
            });
        }
    }
}
