//! The writer thread: group commit into the current segment, and rolling by size.
//!
//! Appenders push [`Command`]s onto one queue (a mutex-guarded vector plus a condition
//! variable, in call order). The single writer thread drains everything queued, encodes the
//! records into one buffer, does one `write_all`, one `sync_data` if any drained command asked
//! for an fsync, then completes the tickets. A roll request splits the drained commands: what
//! was queued before it goes to the old segment.
//!
//! Invariants kept: file order equals queue order; a ticket is completed only after its bytes
//! are written (and fsynced when asked); a closed segment was fsynced before the next segment
//! was created. After a failed write or fsync the writer never writes again (a failed fsync
//! may have dropped dirty pages, so retrying could acknowledge lost data): it fails every
//! later command and sets `Queue::failed`, which makes appends return `WritesRefused`.

use super::record::encode_frame;
use super::segment::{self, HEADER_LEN};
use super::{SegmentInfo, WalOptions, WalRecord};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::oneshot;

/// Completes a [`super::WalTicket`].
pub(crate) type Done = oneshot::Sender<Result<()>>;

/// A request to the writer thread.
pub(crate) enum Command {
    /// Write a record; fsync first if `fsync`.
    Append {
        record: WalRecord,
        fsync: bool,
        done: Done,
    },
    /// Complete once everything queued before is written (and fsynced if `fsync`).
    Sync { fsync: bool, done: Done },
    /// Close the current segment (if it holds anything) and start a new one.
    Roll {
        done: std::sync::mpsc::SyncSender<Result<()>>,
    },
}

/// The queue between appenders and the writer thread.
#[derive(Default)]
pub(crate) struct Queue {
    /// Commands not yet taken by the writer, in call order.
    pub items: Vec<Command>,
    /// Set by close: the writer drains, fsyncs and exits; pushes fail with `Closed`.
    pub closing: bool,
    /// Set once a write or fsync failed: pushes fail with `WritesRefused`.
    pub failed: Option<String>,
}

/// State shared by the [`super::Wal`] handle and the writer thread.
pub(crate) struct Shared {
    /// The command queue.
    pub queue: Mutex<Queue>,
    /// Wakes the writer when the queue gains work or `closing` is set.
    pub wake: Condvar,
    /// Live segments, oldest first, the current one last.
    pub segments: Mutex<Vec<SegmentInfo>>,
    /// Test hook: the next write fails with an injected I/O error.
    #[cfg(test)]
    pub inject_failure: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Shared state over the given live segments.
    pub fn new(segments: Vec<SegmentInfo>) -> Self {
        Shared {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            segments: Mutex::new(segments),
            #[cfg(test)]
            inject_failure: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Fails if the WAL is closed or failed.
    pub fn check(&self) -> Result<()> {
        check(&self.queue.lock())
    }

    /// Queues `cmd` for the writer, unless the WAL is closed or failed.
    pub fn push(&self, cmd: Command) -> Result<()> {
        let mut q = self.queue.lock();
        check(&q)?;
        q.items.push(cmd);
        drop(q);
        self.wake.notify_one();
        Ok(())
    }
}

fn check(q: &Queue) -> Result<()> {
    if q.closing {
        return Err(Error::Closed);
    }
    match &q.failed {
        Some(reason) => Err(Error::WritesRefused(reason.clone())),
        None => Ok(()),
    }
}

/// The writer thread's state: the current segment.
pub(crate) struct Writer {
    shared: Arc<Shared>,
    dir: PathBuf,
    opts: WalOptions,
    file: File,
    id: u64,
    size: u64,
    failed: Option<String>,
    buf: Vec<u8>,
}

impl Writer {
    /// A writer appending to the freshly created segment `id` (header only).
    pub fn new(shared: Arc<Shared>, dir: PathBuf, opts: WalOptions, file: File, id: u64) -> Self {
        Writer {
            shared,
            dir,
            opts,
            file,
            id,
            size: HEADER_LEN as u64,
            failed: None,
            buf: Vec::new(),
        }
    }

    /// The thread body: serves commands until close, then fsyncs and returns the outcome.
    pub fn run(mut self) -> Result<()> {
        let _guard = StopGuard(Arc::clone(&self.shared));
        loop {
            let (items, closing) = {
                let mut q = self.shared.queue.lock();
                while q.items.is_empty() && !q.closing {
                    self.shared.wake.wait(&mut q);
                }
                (std::mem::take(&mut q.items), q.closing)
            };
            self.process(items);
            if closing {
                return self.finish();
            }
        }
    }

    fn process(&mut self, items: Vec<Command>) {
        let mut group = Vec::with_capacity(items.len());
        for cmd in items {
            match cmd {
                Command::Roll { done } => {
                    self.commit(&mut group);
                    let _ = done.send(self.requested_roll());
                }
                other => group.push(other),
            }
        }
        self.commit(&mut group);
    }

    /// Writes the records of `group` with one write (and one fsync if any asked), completes
    /// its tickets, and rolls if the segment passed its size.
    fn commit(&mut self, group: &mut Vec<Command>) {
        if group.is_empty() {
            return;
        }
        if let Some(reason) = &self.failed {
            for cmd in group.drain(..) {
                complete(cmd, || Err(Error::WritesRefused(reason.clone())));
            }
            return;
        }
        self.buf.clear();
        let mut fsync = false;
        let mut max_seq = None;
        for cmd in group.iter() {
            match cmd {
                Command::Append {
                    record, fsync: f, ..
                } => {
                    encode_frame(record, &mut self.buf);
                    max_seq = max_seq.max(Some(record.seq));
                    fsync |= f;
                }
                Command::Sync { fsync: f, .. } => fsync |= f,
                Command::Roll { .. } => {}
            }
        }
        match self.write_out(fsync) {
            Ok(()) => {
                self.size += self.buf.len() as u64;
                if let Some(current) = self.shared.segments.lock().last_mut() {
                    current.size = self.size;
                    current.max_seq = current.max_seq.max(max_seq);
                }
                for cmd in group.drain(..) {
                    complete(cmd, || Ok(()));
                }
                if self.size >= self.opts.segment_size {
                    if let Err(e) = self.roll() {
                        self.fail("roll", &e);
                    }
                }
            }
            Err(e) => {
                self.fail("write", &e);
                for cmd in group.drain(..) {
                    complete(cmd, || {
                        Err(Error::Io(io::Error::new(e.kind(), e.to_string())))
                    });
                }
            }
        }
        if self.buf.capacity() > 8 << 20 {
            self.buf = Vec::new();
        }
    }

    fn write_out(&mut self, fsync: bool) -> io::Result<()> {
        #[cfg(test)]
        if self
            .shared
            .inject_failure
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(io::Error::other("injected failure"));
        }
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf)?;
        }
        if fsync {
            self.file.sync_data()?;
        }
        Ok(())
    }

    fn requested_roll(&mut self) -> Result<()> {
        if let Some(reason) = &self.failed {
            return Err(Error::WritesRefused(reason.clone()));
        }
        if self.size == HEADER_LEN as u64 {
            return Ok(()); // nothing to close: the current segment holds no record
        }
        self.roll().map_err(|e| {
            self.fail("roll", &e);
            Error::Io(e)
        })
    }

    /// Fsyncs and closes the current segment, then creates the next one.
    fn roll(&mut self) -> io::Result<()> {
        self.file.sync_all()?;
        let id = self.id + 1;
        let (file, path) = segment::create(&self.dir, id)?;
        self.file = file;
        self.id = id;
        self.size = HEADER_LEN as u64;
        self.shared.segments.lock().push(SegmentInfo {
            id,
            path,
            max_seq: None,
            size: self.size,
        });
        tracing::debug!(segment = id, "rolled WAL segment");
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(reason) = &self.failed {
            return Err(Error::WritesRefused(reason.clone()));
        }
        self.file.sync_all().map_err(|e| {
            self.fail("fsync at close", &e);
            Error::Io(e)
        })
    }

    /// Enters the failed state: no more writes, appends refused.
    fn fail(&mut self, what: &str, e: &io::Error) {
        let reason = format!("WAL {what} failed in segment {}: {e}", self.id);
        tracing::error!(%reason, "WAL failed; writes are refused until the engine is reopened");
        self.shared.queue.lock().failed = Some(reason.clone());
        self.failed = Some(reason);
    }
}

/// Completes the ticket of `cmd` with `result()`.
fn complete(cmd: Command, result: impl FnOnce() -> Result<()>) {
    match cmd {
        Command::Append { done, .. } | Command::Sync { done, .. } => {
            let _ = done.send(result());
        }
        Command::Roll { done } => {
            let _ = done.send(result());
        }
    }
}

/// On writer exit (including an unexpected one), refuses further work and drops queued
/// commands, which fails their tickets instead of leaving them pending forever.
struct StopGuard(Arc<Shared>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        let mut q = self.0.queue.lock();
        if !q.closing && q.failed.is_none() {
            q.failed = Some("WAL writer thread stopped".into());
        }
        q.items.clear();
    }
}
