//! Applying a recovery plan: the changes [`Recovered::apply`] makes to the WAL directory
//! once the engine accepted the plan (cuts, removals, moves aside, salvage rewrites, bridging
//! markers), then a sync of the directory when anything changed.
//!
//! Invariants kept: nothing here decides what to keep (the scan did); every file written or
//! cut is fsynced before the next change; a salvage rewrite keeps a copy of the original
//! aside and replaces the segment with one rename, so a crash leaves the original or the
//! rewrite in place; each damage entry set aside learns where its file went.

use super::super::record::marker_frame;
use super::super::segment::{self, SegmentStore};
use super::{Action, Recovered};
use crate::error::Result;
use crate::fs::FileSystem;
use std::path::{Path, PathBuf};

impl Recovered {
    /// Makes the planned changes to `store`: cuts, removals, moves aside and rewrites, then
    /// syncs the directory. Each damage entry set aside learns where its file went.
    pub(crate) fn apply(&mut self, store: &SegmentStore) -> Result<()> {
        match store {
            SegmentStore::Dir { fs, dir } => self.apply_in_dir(&**fs, dir),
            SegmentStore::Objects { .. } => self.apply_to_objects(store),
        }
    }

    /// [`Recovered::apply`] on an object store: an object is never changed in place but
    /// replaced whole (cuts, bridging markers, rewrites) or copied aside and deleted.
    fn apply_to_objects(&mut self, store: &SegmentStore) -> Result<()> {
        for action in std::mem::take(&mut self.actions) {
            match action {
                Action::Sync { .. } => {}
                Action::AppendMarker { path, seq } => {
                    let mut bytes = store.read(&path)?;
                    bytes.extend_from_slice(&marker_frame(seq)?);
                    store.replace(&path, &bytes)?;
                    tracing::warn!(object = %path.display(), seq, "WAL segment ends early; a marker bridges the gap");
                }
                Action::Truncate { path, len } => {
                    let mut bytes = store.read(&path)?;
                    bytes.truncate(usize::try_from(len).unwrap_or(usize::MAX));
                    store.replace(&path, &bytes)?;
                    tracing::warn!(object = %path.display(), offset = len, "WAL segment cut at a bad record");
                }
                Action::Remove { path } => {
                    store.remove(&path)?;
                    tracing::debug!(object = %path.display(), "removed WAL segment without records");
                }
                Action::MoveAside { path } => {
                    let to = store.move_aside(&path)?;
                    tracing::warn!(object = %path.display(), moved_to = %to.display(), "WAL segment moved aside; its records are not replayed");
                    self.note_moved(&path, &to);
                }
                Action::Rewrite { path, id, frames } => {
                    let to = store.copy_aside(&path)?;
                    let mut bytes = segment::encode_header(id).to_vec();
                    bytes.extend_from_slice(&frames);
                    store.replace(&path, &bytes)?;
                    tracing::warn!(object = %path.display(), moved_to = %to.display(), "WAL segment salvaged: bad bytes skipped, the original moved aside");
                    self.note_moved(&path, &to);
                }
            }
        }
        Ok(())
    }

    fn apply_in_dir(&mut self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
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
