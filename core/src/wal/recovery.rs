//! Recovery: replays the segments of a WAL directory when it is opened.
//!
//! Segments are read in id order and their records returned in file order. At the first
//! frame that is torn or corrupt (see `record.rs`), recovery keeps every record before it,
//! truncates that segment at the frame's start offset and fsyncs it, and moves every LATER
//! segment aside as `<name>.corrupt`: replaying records after a hole would apply batches out
//! of order. A segment whose header is torn (shorter than 24 bytes) holds nothing and is
//! removed; one whose header is complete but wrong is moved aside; later segments follow it
//! aside in both cases. Segments left without a record are removed. Every cut, removal and
//! rename is logged with `tracing::warn!`, and the directory is synced after them.
//!
//! Invariants kept: the records returned are a prefix of what was written, in write order;
//! every kept segment is fsynced (so a replayed record cannot vanish in a later power loss
//! while newer ones survive); no input bytes make recovery panic.

use super::record::{read_frame, Frame};
use super::segment::{self, HEADER_LEN};
use super::{SegmentInfo, WalRecord};
use crate::error::Result;
use crate::fs::FileSystem;
use std::path::{Path, PathBuf};

/// What recovery found in a WAL directory.
pub(crate) struct Recovered {
    /// The segments kept, oldest first; all closed.
    pub segments: Vec<SegmentInfo>,
    /// Every good record, in file order.
    pub records: Vec<WalRecord>,
    /// The id for the new current segment.
    pub next_id: u64,
}

/// How reading one segment ended.
enum Scan {
    /// Read to a clean end.
    Clean(SegmentInfo),
    /// Cut at a bad frame: kept up to it, and no later segment may be replayed.
    Cut(SegmentInfo),
    /// The header was bad: the segment is gone (removed or moved aside).
    Dropped,
}

/// Replays `dir` (which exists), repairing it as the module doc says.
pub(crate) fn recover(fs: &dyn FileSystem, dir: &Path) -> Result<Recovered> {
    let listing = segment::list(fs, dir)?;
    let next_id = segment::next_id(dir, &listing)?;
    let mut records = Vec::new();
    let mut segments = Vec::new();
    let mut changed = false;
    let mut rest = listing.live.iter();
    for (id, path) in rest.by_ref() {
        let (info, stop) = match scan(fs, *id, path, &mut records)? {
            Scan::Clean(info) => (Some(info), false),
            Scan::Cut(info) => (Some(info), true),
            Scan::Dropped => (None, true),
        };
        changed |= stop;
        if let Some(info) = info {
            if info.max_seq.is_some() {
                segments.push(info);
            } else {
                fs.remove_file(&info.path)?;
                tracing::debug!(file = %info.path.display(), "removed WAL segment without records");
                changed = true;
            }
        }
        if stop {
            break;
        }
    }
    for (_, path) in rest {
        let to = segment::move_aside(fs, path)?;
        tracing::warn!(
            file = %path.display(),
            moved_to = %to.display(),
            "WAL segment follows a cut segment; moved aside, its records are not replayed"
        );
    }
    if changed {
        segment::sync_dir(fs, dir)?;
    }
    Ok(Recovered {
        segments,
        records,
        next_id,
    })
}

/// Reads segment `id` at `path`, appending its good records to `records`.
fn scan(fs: &dyn FileSystem, id: u64, path: &Path, records: &mut Vec<WalRecord>) -> Result<Scan> {
    let data = fs.read(path)?;
    if data.len() < HEADER_LEN {
        tracing::warn!(
            file = %path.display(),
            offset = 0,
            reason = %format!("header cut after {} of {HEADER_LEN} bytes", data.len()),
            "torn WAL segment header; segment holds nothing and is removed"
        );
        fs.remove_file(path)?;
        return Ok(Scan::Dropped);
    }
    if let Err(reason) = segment::check_header(&data, id) {
        let to = segment::move_aside(fs, path)?;
        tracing::warn!(
            file = %path.display(),
            offset = 0,
            %reason,
            moved_to = %to.display(),
            "corrupt WAL segment header; segment moved aside"
        );
        return Ok(Scan::Dropped);
    }
    let mut offset = HEADER_LEN;
    let mut max_seq = None;
    loop {
        let rest = data.get(offset..).unwrap_or_default();
        let reason = match read_frame(rest) {
            Frame::End => break,
            Frame::Record { record, len } => {
                max_seq = max_seq.max(Some(record.seq));
                records.push(record);
                offset += len;
                continue;
            }
            Frame::Torn(reason) => format!("torn record: {reason}"),
            Frame::Corrupt(reason) => format!("corrupt record: {reason}"),
        };
        tracing::warn!(
            file = %path.display(),
            offset,
            %reason,
            "WAL segment cut at a bad record; it and everything after it are dropped"
        );
        let file = fs.open_append(path)?;
        file.set_len(offset as u64)?;
        file.sync_all()?;
        return Ok(Scan::Cut(info(id, path.to_path_buf(), max_seq, offset)));
    }
    // The previous process may have written this tail without an fsync (SyncWal/AsyncWal).
    fs.open_append(path)?.sync_all()?;
    Ok(Scan::Clean(info(id, path.to_path_buf(), max_seq, offset)))
}

fn info(id: u64, path: PathBuf, max_seq: Option<u64>, size: usize) -> SegmentInfo {
    SegmentInfo {
        id,
        path,
        max_seq,
        size: size as u64,
    }
}
