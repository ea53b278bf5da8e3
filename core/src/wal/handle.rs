//! [`Wal`], the handle the engine holds, and [`WalTicket`], the promise an append returns.
//!
//! The handle owns the writer thread (see `writer.rs`) and the list of live segments. It
//! keeps these invariants: appends reach the file in call order; after [`Wal::close`] every
//! call that would write returns [`Error::Closed`]; after a write or fsync failure every such
//! call returns [`Error::WritesRefused`]; the current segment (the last one) is never purged.

use super::record::{payload_len, MAX_PAYLOAD_LEN};
use super::recovery;
use super::segment::{self, HEADER_LEN};
use super::writer::{Command, Shared, Writer};
use super::{Durability, SegmentInfo, WalOptions, WalRecord};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// The engine's write-ahead log: a directory of segments and one writer thread.
///
/// `Send + Sync`; share it behind an `Arc`. Dropping it closes it (draining the queue).
pub struct Wal {
    pub(crate) shared: Arc<Shared>,
    dir: PathBuf,
    thread: Mutex<Option<JoinHandle<Result<()>>>>,
}

/// Resolves once an appended record is as durable as its [`Durability`] asked.
#[derive(Debug)]
pub struct WalTicket {
    rx: Option<oneshot::Receiver<Result<()>>>,
}

impl WalTicket {
    fn done() -> Self {
        WalTicket { rx: None }
    }

    /// Waits until the record is written to the OS (`AsyncWal`, `SyncWal`) or fsynced
    /// (`FsyncWal`); at once for `SkipWal`. Fails with the I/O error if the write failed, or
    /// with [`Error::WritesRefused`] if the WAL had already failed.
    pub async fn wait(self) -> Result<()> {
        match self.rx {
            None => Ok(()),
            Some(rx) => rx.await.unwrap_or_else(|_| {
                Err(Error::WritesRefused(
                    "WAL writer stopped before the record was written".into(),
                ))
            }),
        }
    }
}

impl Wal {
    /// Opens the WAL in `dir` (created if missing): reads every existing segment in order,
    /// cuts a torn or corrupt tail (see the `recovery` module), returns all good records in
    /// file order, and starts a NEW segment for appends (old segments are kept until purged).
    pub fn open(dir: &Path, opts: WalOptions) -> Result<(Wal, Vec<WalRecord>)> {
        fs::create_dir_all(dir)?;
        let recovered = recovery::recover(dir)?;
        let id = recovered.next_id;
        let (file, path) = segment::create(dir, id)?;
        let mut segments = recovered.segments;
        segments.push(SegmentInfo {
            id,
            path,
            max_seq: None,
            size: HEADER_LEN as u64,
        });
        let shared = Arc::new(Shared::new(segments));
        let writer = Writer::new(Arc::clone(&shared), dir.to_path_buf(), opts, file, id);
        let thread = std::thread::Builder::new()
            .name("basalt-wal".into())
            .spawn(move || writer.run())?;
        let wal = Wal {
            shared,
            dir: dir.to_path_buf(),
            thread: Mutex::new(Some(thread)),
        };
        Ok((wal, recovered.records))
    }

    /// Enqueues a record. Cheap and non-blocking; call it in increasing `seq` order (file
    /// order equals call order). Every edit's `cell.key.seq` must equal `record.seq`. For
    /// `SkipWal` returns a ticket that is already done and writes nothing.
    pub fn append(&self, record: WalRecord, durability: Durability) -> Result<WalTicket> {
        if durability == Durability::SkipWal {
            self.shared.check()?;
            return Ok(WalTicket::done());
        }
        if let Some(e) = record.edits.iter().find(|e| e.cell.key.seq != record.seq) {
            return Err(Error::bad_argument(format!(
                "WAL edit has seq {} in record {}",
                e.cell.key.seq, record.seq
            )));
        }
        let len = payload_len(&record);
        if len > MAX_PAYLOAD_LEN {
            return Err(Error::bad_argument(format!(
                "WAL record of {len} bytes exceeds the {MAX_PAYLOAD_LEN}-byte limit"
            )));
        }
        let (done, rx) = oneshot::channel();
        let fsync = durability == Durability::FsyncWal;
        self.shared.push(Command::Append {
            record,
            fsync,
            done,
        })?;
        Ok(WalTicket { rx: Some(rx) })
    }

    /// Writes everything queued so far to the OS; with `fsync` also fsyncs.
    pub async fn sync(&self, fsync: bool) -> Result<()> {
        let (done, rx) = oneshot::channel();
        self.shared.push(Command::Sync { fsync, done })?;
        WalTicket { rx: Some(rx) }.wait().await
    }

    /// Closes the current segment and starts a new one; a no-op if the current segment holds
    /// no record. Everything appended before the call lands in the closed segment. Blocks
    /// until the writer thread has done it.
    pub fn roll(&self) -> Result<()> {
        let (done, rx) = std::sync::mpsc::sync_channel(1);
        self.shared.push(Command::Roll { done })?;
        rx.recv()
            .unwrap_or_else(|_| Err(Error::WritesRefused("WAL writer stopped".into())))
    }

    /// All live segments, oldest first, the current one last.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.shared.segments.lock().clone()
    }

    /// Deletes every closed (non-current) segment whose records all have seq <= `seq`;
    /// returns how many.
    pub fn purge_up_to(&self, seq: u64) -> Result<usize> {
        let victims: Vec<SegmentInfo> = {
            let segments = self.shared.segments.lock();
            let closed = segments.len().saturating_sub(1);
            segments[..closed]
                .iter()
                .filter(|s| s.max_seq.is_none_or(|m| m <= seq))
                .cloned()
                .collect()
        };
        let mut purged = 0;
        let mut outcome = Ok(());
        for victim in &victims {
            match fs::remove_file(&victim.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    outcome = Err(Error::Io(e));
                    break;
                }
            }
            self.shared.segments.lock().retain(|s| s.id != victim.id);
            purged += 1;
            tracing::debug!(segment = victim.id, "purged WAL segment");
        }
        if purged > 0 {
            segment::sync_dir(&self.dir)?;
        }
        outcome.map(|()| purged)
    }

    /// Drains the queue, fsyncs, stops the writer. Later appends return [`Error::Closed`].
    /// Returns [`Error::WritesRefused`] if the WAL had failed. Closing twice is a no-op.
    pub fn close(&self) -> Result<()> {
        // Held across the join so a concurrent close returns only once the drain is done.
        let mut thread = self.thread.lock();
        let Some(handle) = thread.take() else {
            return Ok(());
        };
        self.shared.queue.lock().closing = true;
        self.shared.wake.notify_all();
        handle
            .join()
            .unwrap_or_else(|_| Err(Error::WritesRefused("WAL writer thread panicked".into())))
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!(error = %e, "closing the WAL on drop failed");
        }
    }
}

impl fmt::Debug for Wal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wal").field("dir", &self.dir).finish()
    }
}
