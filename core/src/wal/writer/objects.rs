//! The write path on an object store: each write of the queue becomes a segment object of
//! its own, and a writer that loses a create was fenced (see `segment.rs`).

use super::Current;
use super::{Failure, Shared, MAX_KEPT_BUF};
use crate::error::Error;
use crate::wal::segment::{self, SegmentStore};
use crate::wal::SegmentInfo;
use std::io;
use std::sync::atomic::Ordering;

impl Shared {
    /// The error for a caller of a failed [`Shared::write_queued`]: [`Error::Fenced`] when
    /// the writer was fenced, else the I/O error.
    pub fn error_of(&self, e: io::Error) -> Error {
        match self.failure.get() {
            Some(f) if f.fenced.is_some() => f.io(),
            _ => Error::Io(e),
        }
    }

    /// [`Shared::write_queued`] on an object store: the queued frames become segment object
    /// `id + 1`, created create-if-absent (durable once stored). Losing the create means
    /// the writer was fenced; any failure stops the WAL (an error may hide a stored
    /// object, so the id is never tried again).
    pub(super) fn write_object(
        &self,
        cur: &mut Current,
        max_seq: Option<u64>,
        high_seq: u64,
    ) -> io::Result<()> {
        let SegmentStore::Objects { objects, folder } = &cur.store else {
            return Err(io::Error::other("WAL segment file missing"));
        };
        let n = cur.spare.len() as u64;
        let id = cur.id + 1;
        #[cfg(test)]
        let injected = {
            self.writes.fetch_add(1, Ordering::Relaxed);
            self.inject_failure.swap(false, Ordering::SeqCst)
        };
        #[cfg(not(test))]
        let injected = false;
        let outcome = match injected {
            true => Err(io::Error::other("injected failure")),
            false => segment::put_object(&**objects, folder, id, cur.high_seq, &cur.spare),
        };
        cur.spare.clear();
        if cur.spare.capacity() > MAX_KEPT_BUF {
            cur.spare = Vec::new();
        }
        let (path, size) = match outcome {
            Ok(stored) => stored,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let reason = format!("WAL writer {folder} was fenced at segment {id}");
                tracing::error!(%reason, "another engine took over; writes are refused");
                let _ = self.failure.set(Failure {
                    reason,
                    kind: e.kind(),
                    fenced: Some((folder.clone(), id)),
                });
                return Err(e);
            }
            Err(e) => {
                self.fail("write", id, &e);
                return Err(e);
            }
        };
        // A stored object is durable: one group commit, counted as a file's fsync is.
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        cur.id = id;
        cur.high_seq = high_seq;
        cur.size = size;
        cur.written += n;
        self.written_upto.store(cur.written, Ordering::Release);
        self.synced_upto.fetch_max(cur.written, Ordering::AcqRel);
        self.segments.lock().push(SegmentInfo {
            id,
            path,
            max_seq,
            size,
        });
        Ok(())
    }
}
