//! Recovery: reads the segments of a WAL directory when it is opened, decides what to keep
//! under the [`WalRecoveryMode`], and only then changes the directory.
//!
//! Recovery runs in two steps. [`scan`] reads every live segment in id order, changing
//! nothing, and returns a [`Recovered`] plan: the good records in file order, the damage
//! found, where replay stops if it stops early (the cut), and the file changes the mode asks
//! for. The engine checks the plan against its store files (a cut must leave a point in time
//! for every table) and then calls [`Recovered::apply`]. An open that fails therefore leaves
//! the directory as it found it, and the user may retry in another mode.
//!
//! Damage is a frame that is torn or corrupt (see `record.rs`) or a segment header that is
//! cut or wrong. What each mode does with it:
//!
//! - [`WalRecoveryMode::TolerateCorruptedTail`]: damage is accepted only as the tail of the
//!   newest segment (the one being written when the process stopped): a bad frame there
//!   with no good frame after it is cut, and a header cut short (a crash while the segment
//!   was created) removes the segment. Damage anywhere else fails the open with
//!   [`Error::WalCorruption`]: a good frame after a bad one, or a bad frame in a closed
//!   segment, means acknowledged writes would be lost.
//! - [`WalRecoveryMode::PointInTime`]: at the first damage anywhere the segment is cut there
//!   (a segment with a bad header is moved aside whole) and every later segment is moved
//!   aside as `<name>.corrupt`; replay stops at the cut.
//! - [`WalRecoveryMode::Salvage`]: a bad frame is skipped up to the next good frame, found by
//!   the bad frame's length when that is intact, else by searching byte by byte for a frame
//!   whose checksum and decoding hold and whose seq is not below the last good one; with no
//!   good frame after it, the rest of the segment is skipped. A bad header skips the header
//!   only. Every good record of every segment is replayed. A damaged segment is first moved
//!   aside as `<name>.corrupt`, then written anew (same name, same id) with its good frames,
//!   so the next open finds no damage.
//!
//! A *marker* is a record with no edits. The WAL writes one at the start of every segment
//! (the largest seq written before it) and one before every flush (the largest seq handed
//! out), so:
//! - the last good record before a cut bounds, from below, every write a crash could have
//!   lost there: a store file holding a seq above it holds data newer than the cut;
//! - a segment that ends below the seq the next segment opens with lost records though no
//!   frame is bad (a cut at a frame boundary, a segment removed): recovery treats that as
//!   damage at the end of the earlier segment;
//! - the largest seq in the WAL is at least every store file's largest seq: the engine
//!   treats a store file past it as a lost WAL tail (see `server::recovery`).
//!
//! Markers are not returned as records; they count for [`Recovered::max_seq`]. Segments
//! written before markers existed open with a record, and are not chain-checked.
//!
//! Segments left without any frame (markers included) are removed; the others stay until
//! purged, oldest first, so the chain of markers has no gap. Every change is logged with
//! `tracing::warn!`, and the directory is synced after the changes.
//!
//! Invariants kept: in the first two modes the records returned are a prefix of what was
//! written, in write order; every kept segment is fsynced (so a replayed record cannot
//! vanish in a later power loss while newer ones survive); no input bytes make recovery
//! panic.

use super::record::{read_frame, Frame, UnsealedFrame, FRAME_HEADER_LEN, MAX_PAYLOAD_LEN};
use super::segment::{self, HEADER_LEN};
use super::{DamageAction, SegmentInfo, WalCut, WalDamage, WalRecord, WalRecoveryMode};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// What recovery found in a WAL directory, and what it will change there.
pub(crate) struct Recovered {
    /// The segments kept, oldest first; all closed.
    pub segments: Vec<SegmentInfo>,
    /// Every good record with edits, in file order.
    pub records: Vec<WalRecord>,
    /// The largest seq of any good record or marker (0 when none).
    pub max_seq: u64,
    /// The id for the new current segment.
    pub next_id: u64,
    /// Where replay stopped before the end of the log, if it did.
    pub cut: Option<WalCut>,
    /// Every piece of damage, in file order.
    pub damage: Vec<WalDamage>,
    /// How many segments were read.
    pub segments_read: usize,
    /// Whether any segment held a marker (segments written before markers hold none).
    pub saw_marker: bool,
    /// The last segment read and its length.
    pub last_segment: Option<(PathBuf, u64)>,
    /// The changes [`Recovered::apply`] makes.
    actions: Vec<Action>,
}

/// A change to the WAL directory.
enum Action {
    /// Cut the file to `len` bytes and fsync it.
    Truncate { path: PathBuf, len: u64 },
    /// Rename the file to `<name>.corrupt`.
    MoveAside { path: PathBuf },
    /// Delete the file (it holds no record).
    Remove { path: PathBuf },
    /// Move the file aside, then write a new segment `id` under its name holding `frames`.
    Rewrite {
        path: PathBuf,
        id: u64,
        frames: Vec<u8>,
    },
    /// Fsync the file (its tail may have been written without one).
    Sync { path: PathBuf },
    /// Append a marker carrying `seq` to the file and fsync it.
    AppendMarker { path: PathBuf, seq: u64 },
}

/// A bad spot in a segment.
struct Bad {
    offset: usize,
    reason: String,
}

/// One segment read.
struct Read {
    /// The good frames, as byte ranges of the file, with their records.
    good: Vec<(Range<usize>, WalRecord)>,
    /// The first bad spot, and where the next good frame starts (if any).
    bad: Option<(Bad, Option<usize>)>,
    /// Further bad spots (salvage only), each with the bytes skipped.
    more_bad: Vec<(Bad, usize)>,
    /// The file's length.
    len: usize,
}

/// Reads `dir` (which exists) under `mode`, changing nothing.
pub(crate) fn scan(fs: &dyn FileSystem, dir: &Path, mode: WalRecoveryMode) -> Result<Recovered> {
    let listing = segment::list(fs, dir)?;
    let next_id = segment::next_id(dir, &listing)?;
    let mut out = Recovered {
        segments: Vec::new(),
        records: Vec::new(),
        max_seq: 0,
        next_id,
        cut: None,
        damage: Vec::new(),
        segments_read: 0,
        saw_marker: false,
        last_segment: None,
        actions: Vec::new(),
    };
    let newest = listing.live.last().map(|(id, _)| *id);
    let mut rest = listing.live.iter();
    // The previous segment read, if it opened with a marker: its path, length and the
    // largest seq read up to its end.
    let mut prev: Option<(PathBuf, usize, u64)> = None;
    for (id, path) in rest.by_ref() {
        let is_newest = Some(*id) == newest;
        let data = fs.read(path)?;
        out.segments_read += 1;
        out.last_segment = Some((path.clone(), data.len() as u64));
        if let (Some((prev_path, prev_len, prev_max)), Some(opens_at)) =
            (&prev, opening_marker(&data))
        {
            if *prev_max < opens_at
                && out.chain_broken(mode, prev_path, *prev_len, *prev_max, opens_at)?
            {
                out.set_aside(path);
                break;
            }
        }
        let kept_before = out.segments.len();
        let stop = out.segment(mode, *id, path, &data, is_newest)?;
        if stop {
            break;
        }
        // The chain runs through kept segments: one dropped (salvage) leaves the previous
        // kept one to compare with the next.
        if out.segments.len() > kept_before {
            prev = opening_marker(&data).map(|_| (path.clone(), data.len(), out.max_seq));
        }
    }
    // Closed segments holding no record at the head of the log (read-only sessions leave
    // one per open) are removed: nothing precedes them, so the chain keeps no gap.
    let lead = out
        .segments
        .iter()
        .take_while(|s| s.max_seq.is_none())
        .count();
    for s in out.segments.drain(..lead).collect::<Vec<_>>() {
        out.actions.push(Action::Remove { path: s.path });
    }
    for (_, path) in rest {
        out.set_aside(path);
    }
    Ok(out)
}

impl Recovered {
    /// Sets segment `path`, which follows a cut, aside unread.
    fn set_aside(&mut self, path: &Path) {
        self.damage.push(WalDamage {
            segment: path.to_path_buf(),
            offset: 0,
            reason: "follows a cut segment".into(),
            action: DamageAction::SetAside { bytes: 0 },
            moved_to: None,
        });
        self.actions.push(Action::MoveAside {
            path: path.to_path_buf(),
        });
    }

    /// Takes in one segment; returns true when no later segment may be replayed.
    fn segment(
        &mut self,
        mode: WalRecoveryMode,
        id: u64,
        path: &Path,
        data: &[u8],
        is_newest: bool,
    ) -> Result<bool> {
        let refuse = |offset: usize, reason: &str| Error::WalCorruption {
            segment: path.to_path_buf(),
            offset: offset as u64,
            reason: reason.to_string(),
            tables: Vec::new(),
        };
        if data.len() < HEADER_LEN {
            let reason = format!("header cut after {} of {HEADER_LEN} bytes", data.len());
            if mode == WalRecoveryMode::TolerateCorruptedTail && !is_newest {
                return Err(refuse(0, &format!("{reason}, in a closed segment")));
            }
            // The segment holds nothing: a crash while it was created, or damage that left
            // no record to lose.
            self.damage.push(WalDamage {
                segment: path.to_path_buf(),
                offset: 0,
                reason,
                action: DamageAction::Removed,
                moved_to: None,
            });
            self.actions.push(Action::Remove {
                path: path.to_path_buf(),
            });
            // The newest segment's header and opening marker are synced before any record
            // goes in: cut short, it is a crash while it was created, and it lost nothing.
            // Any other segment lost whatever it held: replay ends here.
            if mode == WalRecoveryMode::Salvage || is_newest {
                return Ok(false);
            }
            self.set_cut(path, 0);
            return Ok(true);
        }
        let header_bad = segment::check_header(data, id).err();
        if let Some(reason) = &header_bad {
            match mode {
                WalRecoveryMode::TolerateCorruptedTail => {
                    return Err(refuse(0, &format!("corrupt segment header: {reason}")));
                }
                WalRecoveryMode::PointInTime => {
                    self.set_cut(path, 0);
                    self.damage.push(WalDamage {
                        segment: path.to_path_buf(),
                        offset: 0,
                        reason: format!("corrupt segment header: {reason}"),
                        action: DamageAction::SetAside {
                            bytes: data.len() as u64,
                        },
                        moved_to: None,
                    });
                    self.actions.push(Action::MoveAside {
                        path: path.to_path_buf(),
                    });
                    return Ok(true);
                }
                WalRecoveryMode::Salvage => {}
            }
        }
        let read = read_segment(data, self.max_seq, mode == WalRecoveryMode::Salvage);
        let mut info = SegmentInfo {
            id,
            path: path.to_path_buf(),
            max_seq: None,
            size: data.len() as u64,
        };
        let keep =
            |out: &mut Recovered, info: &mut SegmentInfo, good: Vec<(Range<usize>, WalRecord)>| {
                for (_, rec) in good {
                    out.max_seq = out.max_seq.max(rec.seq);
                    out.saw_marker |= rec.edits.is_empty();
                    if !rec.edits.is_empty() {
                        info.max_seq = info.max_seq.max(Some(rec.seq));
                        out.records.push(rec);
                    }
                }
            };
        match mode {
            WalRecoveryMode::Salvage => {
                let mut bads: Vec<(Bad, usize)> = Vec::new();
                if let Some(reason) = header_bad {
                    bads.push((
                        Bad {
                            offset: 0,
                            reason: format!("corrupt segment header: {reason}"),
                        },
                        HEADER_LEN,
                    ));
                }
                if let Some((bad, next)) = read.bad {
                    let skipped = next.unwrap_or(read.len) - bad.offset;
                    bads.push((bad, skipped));
                }
                bads.extend(read.more_bad);
                if bads.is_empty() {
                    let frames = !read.good.is_empty();
                    keep(self, &mut info, read.good);
                    self.finish(info, frames, true);
                    return Ok(false);
                }
                let mut frames = Vec::new();
                for (range, _) in &read.good {
                    frames.extend_from_slice(data.get(range.clone()).unwrap_or_default());
                }
                for (bad, skipped) in bads {
                    self.damage.push(WalDamage {
                        segment: path.to_path_buf(),
                        offset: bad.offset as u64,
                        reason: bad.reason,
                        action: DamageAction::Skipped {
                            bytes: skipped as u64,
                        },
                        moved_to: None,
                    });
                }
                info.size = (HEADER_LEN + frames.len()) as u64;
                keep(self, &mut info, read.good);
                if !frames.is_empty() {
                    self.actions.push(Action::Rewrite {
                        path: path.to_path_buf(),
                        id,
                        frames,
                    });
                    self.segments.push(info);
                } else {
                    self.actions.push(Action::MoveAside {
                        path: path.to_path_buf(),
                    });
                }
                Ok(false)
            }
            _ => {
                let Some((bad, next)) = read.bad else {
                    let frames = !read.good.is_empty();
                    keep(self, &mut info, read.good);
                    self.finish(info, frames, true);
                    return Ok(false);
                };
                // The newest segment's opening marker torn, nothing after it: a crash while
                // the segment was created (header and marker are synced before any record).
                if is_newest
                    && bad.offset == HEADER_LEN
                    && next.is_none()
                    && bad.reason.starts_with("torn")
                {
                    self.damage.push(WalDamage {
                        segment: path.to_path_buf(),
                        offset: bad.offset as u64,
                        reason: bad.reason,
                        action: DamageAction::Removed,
                        moved_to: None,
                    });
                    self.actions.push(Action::Remove {
                        path: path.to_path_buf(),
                    });
                    return Ok(false);
                }
                if mode == WalRecoveryMode::TolerateCorruptedTail {
                    if !is_newest {
                        return Err(refuse(
                            bad.offset,
                            &format!("{}, in a closed segment", bad.reason),
                        ));
                    }
                    if let Some(next) = next {
                        return Err(refuse(
                            bad.offset,
                            &format!("{}, and a good record follows at offset {next}", bad.reason),
                        ));
                    }
                }
                info.size = bad.offset as u64;
                let frames = !read.good.is_empty();
                keep(self, &mut info, read.good);
                self.set_cut(path, bad.offset);
                self.damage.push(WalDamage {
                    segment: path.to_path_buf(),
                    offset: bad.offset as u64,
                    reason: bad.reason,
                    action: DamageAction::Cut {
                        bytes: (read.len - bad.offset) as u64,
                    },
                    moved_to: None,
                });
                self.actions.push(Action::Truncate {
                    path: path.to_path_buf(),
                    len: bad.offset as u64,
                });
                self.finish(info, frames, false);
                Ok(true)
            }
        }
    }

    /// Segment `path` ends (at `len`, largest seq `max`) before the seq `opens_at` the next
    /// segment opens with: records at its end were lost though no frame is bad (a cut at a
    /// frame boundary, or a segment removed). Returns true when replay must stop there.
    fn chain_broken(
        &mut self,
        mode: WalRecoveryMode,
        path: &Path,
        len: usize,
        max: u64,
        opens_at: u64,
    ) -> Result<bool> {
        let reason = format!(
            "records lost at the end of the segment: it ends at seq {max}, the next one opens at \
             seq {opens_at}"
        );
        if mode == WalRecoveryMode::TolerateCorruptedTail {
            return Err(Error::WalCorruption {
                segment: path.to_path_buf(),
                offset: len as u64,
                reason,
                tables: Vec::new(),
            });
        }
        self.damage.push(WalDamage {
            segment: path.to_path_buf(),
            offset: len as u64,
            reason,
            action: DamageAction::Lost,
            moved_to: None,
        });
        if mode == WalRecoveryMode::PointInTime {
            self.set_cut(path, len);
            return Ok(true);
        }
        // Salvage: a marker bridging the gap, so that the next open finds the chain whole.
        self.actions.push(Action::AppendMarker {
            path: path.to_path_buf(),
            seq: opens_at,
        });
        Ok(false)
    }

    /// Salvage found store files past the WAL's end (at `seq`): a marker appended to the
    /// last kept segment carries the chain up to the new segment's opening marker.
    pub(crate) fn bridge_to(&mut self, seq: u64) {
        if let Some(last) = self.segments.last() {
            self.actions.push(Action::AppendMarker {
                path: last.path.clone(),
                seq,
            });
        }
        self.max_seq = self.max_seq.max(seq);
    }

    /// Records the cut at `offset` of `path`: replay ends with the records read so far.
    fn set_cut(&mut self, path: &Path, offset: usize) {
        self.cut = Some(WalCut {
            segment: path.to_path_buf(),
            offset: offset as u64,
            last_seq: self.max_seq,
        });
    }

    /// Keeps `info` if it holds a record (else removes it); `sync` asks for an fsync of a
    /// segment read to its end.
    fn finish(&mut self, info: SegmentInfo, frames: bool, sync: bool) {
        if frames {
            if sync {
                self.actions.push(Action::Sync {
                    path: info.path.clone(),
                });
            }
            self.segments.push(info);
        } else {
            self.actions.push(Action::Remove { path: info.path });
        }
    }

    /// Makes the planned changes: cuts, removals, moves aside and rewrites, then syncs the
    /// directory. Each damage entry set aside learns where its file went.
    pub(crate) fn apply(&mut self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        let mut changed = false;
        for action in std::mem::take(&mut self.actions) {
            match action {
                Action::Sync { path } => fs.open_append(&path)?.sync_all()?,
                Action::AppendMarker { path, seq } => {
                    if fs.exists(&path)? {
                        let file = fs.open_append(&path)?;
                        file.write_all(&marker_frame(seq)?)?;
                        file.sync_all()?;
                        tracing::warn!(file = %path.display(), seq, "WAL segment ends early; a marker bridges the gap");
                    }
                }
                Action::Truncate { path, len } => {
                    let file = fs.open_append(&path)?;
                    file.set_len(len)?;
                    file.sync_all()?;
                    tracing::warn!(file = %path.display(), offset = len, "WAL segment cut at a bad record");
                    changed = true;
                }
                Action::Remove { path } => {
                    fs.remove_file(&path)?;
                    tracing::debug!(file = %path.display(), "removed WAL segment without records");
                    changed = true;
                }
                Action::MoveAside { path } => {
                    let to = segment::move_aside(fs, &path)?;
                    tracing::warn!(file = %path.display(), moved_to = %to.display(), "WAL segment moved aside; its records are not replayed");
                    self.note_moved(&path, &to);
                    changed = true;
                }
                Action::Rewrite { path, id, frames } => {
                    // A copy of the original aside, the new segment beside it, then one
                    // rename: a crash leaves the original or the rewrite in place.
                    let to = copy_aside(fs, &path)?;
                    let mut tmp = path.as_os_str().to_owned();
                    tmp.push(".tmp");
                    let tmp = PathBuf::from(tmp);
                    if fs.exists(&tmp)? {
                        fs.remove_file(&tmp)?;
                    }
                    let mut bytes = segment::encode_header(id).to_vec();
                    bytes.extend_from_slice(&frames);
                    let file = fs.create_new(&tmp)?;
                    file.write_all(&bytes)?;
                    file.sync_all()?;
                    fs.rename(&tmp, &path)?;
                    tracing::warn!(file = %path.display(), moved_to = %to.display(), "WAL segment salvaged: bad bytes skipped, the original moved aside");
                    self.note_moved(&path, &to);
                    changed = true;
                }
            }
        }
        if changed {
            segment::sync_dir(fs, dir)?;
        }
        Ok(())
    }

    fn note_moved(&mut self, from: &Path, to: &Path) {
        for d in &mut self.damage {
            if d.segment == from {
                d.moved_to = Some(to.to_path_buf());
            }
        }
    }
}

/// Copies `path` to a free `<name>.corrupt` name and fsyncs the copy; returns its path.
fn copy_aside(fs: &dyn FileSystem, path: &Path) -> Result<PathBuf> {
    let bytes = fs.read(path)?;
    let target = segment::aside_name(fs, path)?;
    let file = fs.create_new(&target)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    Ok(target)
}

/// Reads the frames of one segment after its header. Reading stops at the first bad
/// frame, unless `salvage`, which skips to the next good frame each time.
fn read_segment(data: &[u8], mut last_seq: u64, salvage: bool) -> Read {
    let mut out = Read {
        good: Vec::new(),
        bad: None,
        more_bad: Vec::new(),
        len: data.len(),
    };
    let mut offset = HEADER_LEN.min(data.len());
    loop {
        let rest = data.get(offset..).unwrap_or_default();
        let reason = match read_frame(rest) {
            Frame::End => return out,
            Frame::Record { record, len } => {
                last_seq = last_seq.max(record.seq);
                out.good.push((offset..offset + len, record));
                offset += len;
                continue;
            }
            Frame::Torn(reason) => format!("torn record: {reason}"),
            Frame::Corrupt(reason) => format!("corrupt record: {reason}"),
        };
        let next = next_good_frame(data, offset, last_seq);
        let bad = Bad { offset, reason };
        if out.bad.is_none() {
            out.bad = Some((bad, next));
        } else {
            out.more_bad
                .push((bad, next.unwrap_or(data.len()).saturating_sub(offset)));
        }
        match next {
            Some(next) if salvage => offset = next,
            _ => return out,
        }
    }
}

/// The most bytes [`next_good_frame`] checksums while searching byte by byte: past it the
/// search gives up (as if no good frame followed), so a long torn tail costs bounded time.
const SEARCH_BUDGET: usize = 64 << 20;

/// Where the next good frame after a bad one at `bad` starts: first where the bad frame's
/// own length says, then at the first later offset holding a frame whose checksum and
/// decoding hold, whose seq is at least `last_seq`, and which ends the file or is followed
/// by another good frame (so a frame-shaped value inside a torn record is not taken for
/// one). The byte-by-byte search checksums at most [`SEARCH_BUDGET`] bytes.
fn next_good_frame(data: &[u8], bad: usize, last_seq: u64) -> Option<usize> {
    let frame_at = |at: usize| match read_frame(data.get(at..).unwrap_or_default()) {
        Frame::Record { record, len } if record.seq >= last_seq => Some((record.seq, len)),
        _ => None,
    };
    let good_at = |at: usize| match frame_at(at) {
        Some((seq, len)) => {
            let next = at + len;
            next == data.len()
                || matches!(read_frame(data.get(next..).unwrap_or_default()),
                    Frame::Record { record, .. } if record.seq >= seq)
        }
        None => false,
    };
    let be32 = |at: usize| -> Option<usize> {
        let b = data.get(at..at + 4)?;
        Some(b.iter().fold(0usize, |a, &x| (a << 8) | usize::from(x)))
    };
    if let Some(len) = be32(bad) {
        let at = bad + FRAME_HEADER_LEN + len;
        if len <= MAX_PAYLOAD_LEN && at < data.len() && good_at(at) {
            return Some(at);
        }
    }
    let end = data.len().checked_sub(FRAME_HEADER_LEN + 2)?;
    let mut budget = SEARCH_BUDGET;
    for at in bad + 1..=end {
        // Cheap tests first: the length fits, the payload's seq varint is plausible.
        let Some(len) = be32(at) else { continue };
        if len < 2 || at + FRAME_HEADER_LEN + len > data.len() {
            continue;
        }
        let payload = data.get(at + FRAME_HEADER_LEN..).unwrap_or_default();
        if leading_varint(payload).is_none_or(|seq| seq < last_seq) {
            continue;
        }
        budget = budget.checked_sub(len)?;
        if good_at(at) {
            return Some(at);
        }
    }
    None
}

/// The varint at the start of `b`, if it is well formed.
fn leading_varint(b: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().take(10).enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The seq of the marker a segment opens with (its first frame, right after the header),
/// if it opens with one: segments written before markers existed do not.
fn opening_marker(data: &[u8]) -> Option<u64> {
    match read_frame(data.get(HEADER_LEN..)?) {
        Frame::Record { record, .. } if record.edits.is_empty() => Some(record.seq),
        _ => None,
    }
}

/// The frame of a marker: a record with no edits carrying `seq`.
pub(crate) fn marker_frame(seq: u64) -> Result<Vec<u8>> {
    let mut frame = UnsealedFrame::encode(std::iter::empty())?;
    Ok(frame.seal(seq).to_vec())
}
