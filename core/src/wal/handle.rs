//! [`Wal`], the handle the engine holds, and [`WalTicket`], the promise an append returns.
//!
//! The handle owns the shared write state (see `writer.rs`), the `AsyncWal` flusher thread
//! and the list of live segments. It keeps these invariants: appends reach the file in call
//! order; after [`Wal::close`] every call that would write returns [`Error::Closed`]; after a
//! write or fsync failure every such call returns [`Error::WritesRefused`]; the current
//! segment (the last one) is never purged.

use super::record::{self, EditRef, UnsealedFrame};
use super::recovery;
use super::segment::{self, SegmentStore};
use super::writer::{Current, Shared, PENDING_LIMIT};
use super::{Durability, SegmentInfo, WalOptions, WalRecord};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use parking_lot::Mutex;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The engine's write-ahead log: a directory of segments, written by the appenders' threads.
///
/// `Send + Sync`; share it behind an `Arc`. Dropping it closes it (writing what is pending).
pub struct Wal {
    pub(crate) shared: Arc<Shared>,
    store: SegmentStore,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Where a queued marker ends in the WAL's stream (see [`Wal::sync_marker`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MarkerTicket {
    end: u64,
}

/// Resolves once an appended record is as durable as its [`Durability`] asked.
pub struct WalTicket {
    state: Ticket,
}

enum Ticket {
    /// Nothing left to wait for.
    Done,
    /// The write failed.
    Failed(Error),
    /// An `AsyncWal` or `SyncWal` record: done once every byte before `end` is written.
    Written { shared: Arc<Shared>, end: u64 },
    /// An `FsyncWal` record: done once every byte before `end` is written and fsynced.
    Synced { shared: Arc<Shared>, end: u64 },
}

impl WalTicket {
    fn done() -> Self {
        WalTicket {
            state: Ticket::Done,
        }
    }

    /// Waits until the record is written to the OS (`AsyncWal`, `SyncWal`) or fsynced
    /// (`FsyncWal`); at once for `SkipWal`. A waiter that finds nobody writing writes
    /// everything queued so far itself (group commit); otherwise it waits without blocking
    /// its thread for the running write to end. Fails with the I/O error if the write or fsync failed (also when another write's
    /// failure stopped the WAL before this record was written or fsynced).
    pub async fn wait(self) -> Result<()> {
        match self.state {
            Ticket::Done => Ok(()),
            Ticket::Failed(e) => Err(e),
            Ticket::Written { shared, end } => shared.wait_written(end).await,
            Ticket::Synced { shared, end } => {
                shared.wait_written(end).await?;
                shared.wait_synced(end).await
            }
        }
    }
}

impl fmt::Debug for WalTicket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            Ticket::Done => f.write_str("WalTicket::Done"),
            Ticket::Failed(e) => f.debug_tuple("WalTicket::Failed").field(e).finish(),
            Ticket::Written { end, .. } => f
                .debug_struct("WalTicket::Written")
                .field("end", end)
                .finish(),
            Ticket::Synced { end, .. } => f
                .debug_struct("WalTicket::Synced")
                .field("end", end)
                .finish(),
        }
    }
}

impl Wal {
    /// Opens the WAL in `dir` (created if missing): reads every existing segment in order,
    /// treats damage as `opts.recovery` says (see the `recovery` module; an open that fails
    /// changes nothing), returns all good records in file order, and starts a NEW segment
    /// for appends (old segments are kept until purged). All file access goes through
    /// `fs`. The engine opens in two steps instead (`Wal::scan`, then `Wal::start`) so
    /// that it can check a cut against its store files in between.
    #[cfg(test)]
    pub fn open(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        opts: WalOptions,
    ) -> Result<(Wal, Vec<WalRecord>)> {
        let store = SegmentStore::Dir {
            fs: Arc::clone(fs),
            dir: dir.to_path_buf(),
        };
        let mut recovered = Wal::scan(&store, opts.recovery, &Default::default())?;
        let base = recovered.max_seq;
        let records = std::mem::take(&mut recovered.records);
        let wal = Wal::start(store, opts, recovered, base)?;
        Ok((wal, records))
    }

    /// Reads the WAL in directory `dir` (created if missing) under `mode`, changing
    /// nothing in it.
    pub(crate) fn scan_dir(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        mode: super::WalRecoveryMode,
    ) -> Result<recovery::Recovered> {
        Wal::scan(
            &SegmentStore::Dir {
                fs: Arc::clone(fs),
                dir: dir.to_path_buf(),
            },
            mode,
            &Default::default(),
        )
    }

    /// Reads the WAL at `store` under `mode`, changing nothing in it: a directory (created
    /// if missing), or on an object store the folders of `writers`, each fenced first.
    pub(crate) fn scan(
        store: &SegmentStore,
        mode: super::WalRecoveryMode,
        writers: &std::collections::BTreeSet<u64>,
    ) -> Result<recovery::Recovered> {
        match store {
            SegmentStore::Dir { fs, dir } => {
                fs.create_dir_all(dir)?;
                recovery::scan(store, mode)
            }
            SegmentStore::Objects { objects, .. } => recovery::scan_writers(objects, mode, writers),
        }
    }

    /// The numbers of every writer folder on `objects`.
    pub(crate) fn writers(
        objects: &Arc<dyn crate::objects::Objects>,
    ) -> Result<std::collections::BTreeSet<u64>> {
        Ok(objects
            .list(segment::OBJECT_ROOT)?
            .iter()
            .filter_map(|name| name.rsplit_once('/'))
            .filter_map(|(folder, _)| segment::writer_of(folder))
            .collect())
    }

    /// The folder of writer `writer` on `objects` (a number the catalog handed out).
    pub(crate) fn writer_store(
        objects: &Arc<dyn crate::objects::Objects>,
        writer: u64,
    ) -> SegmentStore {
        SegmentStore::Objects {
            objects: Arc::clone(objects),
            folder: segment::writer_folder(writer),
        }
    }

    /// Makes the changes `recovered` planned, then starts a new segment whose opening
    /// marker carries `base_seq` (at least every seq on disk, store files included). On
    /// an object store the new segment (id 1, the marker alone) begins the writer's
    /// folder, create-if-absent: a folder another engine fenced first fails the start with
    /// [`Error::Fenced`] (its number came from the catalog, which gives each number once).
    pub(crate) fn start(
        store: SegmentStore,
        opts: WalOptions,
        mut recovered: recovery::Recovered,
        base_seq: u64,
    ) -> Result<Wal> {
        recovered.apply(&store)?;
        let base_seq = base_seq.max(recovered.max_seq);
        let mut segments = recovered.segments;
        let (store, current) = match store {
            SegmentStore::Dir { ref fs, ref dir } => {
                let id = recovered.next_id;
                let (file, path, base) = segment::create(&**fs, dir, id, base_seq)?;
                segments.push(SegmentInfo {
                    id,
                    path,
                    max_seq: None,
                    size: base,
                });
                let current = Current::new(store.clone(), opts, Some(file), id, base, base_seq);
                (store, current)
            }
            SegmentStore::Objects { objects, folder } => {
                match segment::put_object(&*objects, &folder, 1, base_seq, &[]) {
                    Ok((path, base)) => {
                        segments.push(SegmentInfo {
                            id: 1,
                            path,
                            max_seq: None,
                            size: base,
                        });
                        let store = SegmentStore::Objects { objects, folder };
                        let current = Current::new(store.clone(), opts, None, 1, base, base_seq);
                        (store, current)
                    }
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        // The catalog gave this number to this engine alone: another engine
                        // that claimed its regions since fenced the folder before it began.
                        return Err(Error::Fenced {
                            writer: folder,
                            segment: 1,
                        });
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let shared = Arc::new(Shared::new(segments, current));
        let flusher = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("basalt-wal".into())
            .spawn(move || flusher.run_flusher())?;
        Ok(Wal {
            shared,
            store,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a marker (a record without edits, see the `recovery` module) carrying `seq`:
    /// once written, a crash that loses records after it shows in recovery as a cut whose
    /// bound is at least `seq`. A flush marks the largest seq handed out before it syncs the
    /// WAL; call it under the engine's commit lock so that file order stays seq order.
    pub(crate) fn mark(&self, seq: u64) -> Result<MarkerTicket> {
        let frame = record::marker_frame(seq)?;
        let mut q = self.shared.queue.lock();
        self.shared.check()?;
        Ok(MarkerTicket {
            end: q.push_marker(&frame, seq),
        })
    }

    /// Waits until the marker of `ticket` is written and fsynced with everything before it;
    /// fails if the write that carried it failed (whoever made that write).
    pub(crate) async fn sync_marker(&self, ticket: MarkerTicket) -> Result<()> {
        self.sync(true).await?;
        if self.shared.marker_lost(ticket.end) {
            return Err(Error::Io(io::Error::other(
                "the WAL write carrying a flush marker failed",
            )));
        }
        Ok(())
    }

    /// Appends a record; call it in increasing `seq` order (file order equals call order).
    /// Every edit's `cell.key.seq` must equal `record.seq`.
    ///
    /// Every durability but `SkipWal` queues the record's frame (a memory copy under a short
    /// lock) and returns a ticket. A `SyncWal` or `FsyncWal` record reaches the OS when its
    /// ticket is waited on (by that waiter or by a concurrent one whose write carried it),
    /// the `FsyncWal` one is then fsynced (grouped with concurrent waiters). `AsyncWal`
    /// wakes the background flusher (the appender writes the queue itself if 4 MiB are
    /// already queued). `SkipWal` writes nothing and returns a done ticket. A failed write
    /// puts the WAL in the failed state and fails the tickets of every record it did not
    /// write.
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
        let mut frame = UnsealedFrame::encode(record.edits.iter().map(EditRef::of))?;
        self.append_unsealed(&mut frame, record.seq, durability)
    }

    /// [`Wal::append`] for a batch encoded beforehand (outside the engine's commit lock):
    /// writes `seq` into the frame and queues it. Same order rule and tickets as `append`.
    pub(crate) fn append_unsealed(
        &self,
        frame: &mut UnsealedFrame,
        seq: u64,
        durability: Durability,
    ) -> Result<WalTicket> {
        if durability == Durability::SkipWal {
            self.shared.check()?;
            return Ok(WalTicket::done());
        }
        let frame = frame.seal(seq);
        let shared = &self.shared;
        let mut q = shared.queue.lock();
        shared.check()?;
        let end = q.push(frame, seq);
        let shared = Arc::clone(shared);
        let state = match durability {
            Durability::AsyncWal if q.pending_len() >= PENDING_LIMIT => {
                // The flusher fell behind: write here rather than queue without bound.
                drop(q);
                let mut cur = shared.writer();
                match shared.write_queued(&mut cur) {
                    Ok(()) => Ticket::Written {
                        shared: Arc::clone(&shared),
                        end,
                    },
                    Err(e) => Ticket::Failed(shared.error_of(e)),
                }
            }
            Durability::AsyncWal => {
                let wake = q.should_wake_flusher();
                drop(q);
                if wake {
                    shared.wake.notify_one();
                }
                Ticket::Written { shared, end }
            }
            Durability::FsyncWal => Ticket::Synced { shared, end },
            _ => Ticket::Written { shared, end },
        };
        Ok(WalTicket { state })
    }

    /// Writes everything appended so far to the OS; with `fsync` also fsyncs.
    pub async fn sync(&self, fsync: bool) -> Result<()> {
        let end = self.shared.flush()?;
        if fsync {
            self.shared.wait_synced(end).await
        } else {
            Ok(())
        }
    }

    /// Closes the current segment and starts a new one; a no-op if the current segment holds
    /// no record. Everything appended before the call lands in the closed segment. Blocks
    /// while it writes what is pending and fsyncs the closed segment.
    #[cfg(test)]
    pub fn roll(&self) -> Result<()> {
        self.shared.requested_roll()
    }

    /// Refuses every later append with [`Error::WritesRefused`] carrying `reason`, and
    /// fails records not yet written, as after a write failure (the engine lost the lease
    /// its ownership of the regions rests on). Until the engine is reopened.
    pub(crate) fn refuse(&self, reason: String) {
        self.shared.refuse(reason);
    }

    /// Sets the function told of every segment roll (closed id, new id); only the first
    /// call takes effect. It runs under the writer lock: it must be quick and must not
    /// append to this WAL.
    pub fn on_roll(&self, listener: super::RollListener) {
        let _ = self.shared.roll_listener.set(listener);
    }

    /// Fsyncs of segments since the WAL opened: group commits, background syncs and rolls.
    pub fn syncs(&self) -> u64 {
        self.shared
            .fsyncs
            .load(std::sync::atomic::Ordering::Relaxed)
            + self.shared.rolls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Record bytes written to segment files since the WAL opened.
    pub fn bytes_written(&self) -> u64 {
        self.shared.bytes_written()
    }

    /// The id of the newest segment (on an object store: of the last object written), 0
    /// before the first. A write acknowledged before this call is in it or an older one.
    pub fn current_segment(&self) -> u64 {
        self.shared.segments.lock().last().map_or(0, |s| s.id)
    }

    /// All live segments, oldest first, the current one last.
    #[cfg(test)]
    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.shared.segments.lock().clone()
    }

    /// Whether the WAL holds more than `max_segments` segments: segment files counted; on
    /// an object store (an object per write) their bytes, against `max_segments` full
    /// segments of `segment_size`.
    pub(crate) fn longer_than(&self, max_segments: usize, segment_size: u64) -> bool {
        let segments = self.shared.segments.lock();
        match self.store {
            SegmentStore::Dir { .. } => segments.len() > max_segments,
            SegmentStore::Objects { .. } => {
                let bytes: u64 = segments.iter().map(|s| s.size).sum();
                bytes > segment_size.saturating_mul(max_segments as u64)
            }
        }
    }

    /// Deletes the oldest closed (non-current) segments whose records all have seq <=
    /// `seq`, up to the first that has a later one; returns how many.
    pub fn purge_up_to(&self, seq: u64) -> Result<usize> {
        let victims: Vec<SegmentInfo> = {
            let segments = self.shared.segments.lock();
            let closed = segments.len().saturating_sub(1);
            // Oldest first and without gaps: each segment's opening marker is checked
            // against the end of the one before it at recovery.
            segments[..closed]
                .iter()
                .take_while(|s| s.max_seq.is_none_or(|m| m <= seq))
                .cloned()
                .collect()
        };
        let mut purged = 0;
        let mut outcome = Ok(());
        for victim in &victims {
            match self.store.remove(&victim.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    outcome = Err(Error::Io(e));
                    break;
                }
            }
            // Victims are the oldest segments, so each is found at the front, by its id
            // (comparing paths over the whole list, under the lock every append takes, made
            // a purge of thousands of segment objects quadratic).
            let mut segments = self.shared.segments.lock();
            if let Some(at) = segments.iter().position(|s| s.id == victim.id) {
                segments.remove(at);
            }
            purged += 1;
            tracing::debug!(segment = victim.id, "purged WAL segment");
        }
        if purged > 0 {
            self.store.sync()?;
        }
        outcome.map(|()| purged)
    }

    /// Writes what is pending, fsyncs, stops the flusher. Later appends return
    /// [`Error::Closed`]. Returns [`Error::WritesRefused`] if the WAL had failed. Closing
    /// twice is a no-op.
    pub fn close(&self) -> Result<()> {
        // Held until the flusher exits, so a concurrent close returns only once it is done.
        let mut thread = self.thread.lock();
        let Some(handle) = thread.take() else {
            return Ok(());
        };
        let out = self.shared.close();
        if handle.join().is_err() {
            return out.and(Err(Error::WritesRefused(
                "WAL flusher thread panicked".into(),
            )));
        }
        out
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
        f.debug_struct("Wal")
            .field("segments", &self.store.describe())
            .finish()
    }
}
