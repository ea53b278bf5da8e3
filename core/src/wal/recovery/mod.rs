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

mod apply;
mod read;

use super::segment::{self, SegmentStore, HEADER_LEN};
use super::{DamageAction, SegmentInfo, WalCut, WalDamage, WalRecord, WalRecoveryMode};
use crate::error::{Error, Result};
use read::{opening_marker, read_segment};
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
pub(crate) fn scan(store: &SegmentStore, mode: WalRecoveryMode) -> Result<Recovered> {
    let listing = store.list()?;
    let next_id = segment::next_id(&store.describe(), &listing)?;
    let mut out = Recovered::empty(next_id);
    let newest = listing.live.last().map(|(id, _)| *id);
    let mut rest = listing.live.iter();
    // The previous segment read, if it opened with a marker: its path, length and the
    // largest seq read up to its end.
    let mut prev: Option<(PathBuf, usize, u64)> = None;
    for (id, path) in rest.by_ref() {
        let is_newest = Some(*id) == newest;
        let data = store.read(path)?;
        if data.is_empty() && is_newest && matches!(store, SegmentStore::Objects { .. }) {
            // The fence another party created at the writer's next id: the log ends here.
            break;
        }
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

/// Fences and reads the folders of `writers` of the WAL on an object store, oldest writer
/// first, under `mode`; changes nothing else. A writer without a folder is fenced too (its
/// fence is its first object), so that it never begins.
pub(crate) fn scan_writers(
    objects: &std::sync::Arc<dyn crate::objects::Objects>,
    mode: WalRecoveryMode,
    writers: &std::collections::BTreeSet<u64>,
) -> Result<Recovered> {
    let mut out = Recovered::empty(1);
    for &writer in writers {
        let folder = segment::writer_folder(writer);
        let fence = segment::fence(&**objects, &folder)?;
        tracing::info!(%folder, fence, "WAL writer fenced for recovery");
        let store = SegmentStore::Objects {
            objects: std::sync::Arc::clone(objects),
            folder,
        };
        out.absorb(scan(&store, mode)?);
    }
    Ok(out)
}

impl Recovered {
    /// Nothing read yet; a new segment would take `next_id`.
    fn empty(next_id: u64) -> Self {
        Recovered {
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
        }
    }

    /// Keeps only the edits of `regions` (an engine opening some regions of a shared
    /// store), and forgets the segments read and the changes planned to them: they are
    /// other writers', whose other regions other engines may still have to replay, so this
    /// engine neither purges, cuts, rewrites nor sets aside any of them.
    pub(crate) fn keep_regions(&mut self, regions: &std::collections::BTreeSet<u64>) {
        for rec in &mut self.records {
            rec.edits.retain(|e| regions.contains(&e.region_id));
        }
        self.records.retain(|r| !r.edits.is_empty());
        self.segments.clear();
        self.actions.clear();
    }

    /// Takes in what a later writer's log holds (object stores: one log per writer).
    fn absorb(&mut self, later: Recovered) {
        self.segments.extend(later.segments);
        self.records.extend(later.records);
        self.max_seq = self.max_seq.max(later.max_seq);
        self.next_id = self.next_id.max(later.next_id);
        if self.cut.is_none() {
            self.cut = later.cut;
        }
        self.damage.extend(later.damage);
        self.segments_read += later.segments_read;
        self.saw_marker |= later.saw_marker;
        if later.last_segment.is_some() {
            self.last_segment = later.last_segment;
        }
        self.actions.extend(later.actions);
    }

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
}
