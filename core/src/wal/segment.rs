//! WAL segment files: naming, the header, creation and directory bookkeeping.
//!
//! This comment is the specification of a segment file; it is stable.
//!
//! # Name
//!
//! `wal-{id:020}.log`: the segment id as 20 decimal digits, so names sort like ids. Ids only
//! grow: a new segment takes one more than the largest id of any `wal-` file in the directory,
//! including segments moved aside as `wal-{id:020}.log.corrupt` (or `.corrupt.N`).
//!
//! # Header (24 bytes)
//!
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 8    | magic, ASCII `BSLTWAL1`                           |
//! | 8      | 4    | format version, u32 big-endian, currently 1       |
//! | 12     | 8    | segment id, u64 big-endian, equal to the name's   |
//! | 20     | 4    | CRC-32 of bytes 0..20, u32 big-endian             |
//!
//! Records (see `record.rs`) follow from offset 24 to the end of the file.
//!
//! # Invariants
//!
//! A segment is created with `create_new`, its header and opening marker written and
//! synced, then the directory synced, before any record goes into it. A segment is closed (never written again) only
//! after an fsync, so at most the newest segment can have a torn tail or a torn header.
//!
//! # On an object store
//!
//! A WAL on an object store ([`SegmentStore::Objects`]) has a folder per writer,
//! `wal/w{writer:010}`, and one object per write, `wal/w{writer:010}/{id:020}`: a whole
//! segment (the header above, an opening marker carrying the largest seq written before
//! it, then the write's records), created create-if-absent, so it is durable and never
//! torn once stored. Ids are contiguous from 1 within a folder. An empty object is a
//! fence: whoever took the writer's regions over created it at the writer's next id, so
//! the writer's next create fails and it stops ([`crate::Error::Fenced`]). An object set
//! aside by recovery is renamed `{id:020}.corrupt` (`.corrupt.N` if taken).

use crate::error::{Error, Result};
use crate::fs::{FileSystem, WriteFile};
use crate::objects::{Objects, PutMode};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a WAL's segments live.
#[derive(Debug, Clone)]
pub(crate) enum SegmentStore {
    /// Appended segment files `wal-{id:020}.log` in a directory.
    Dir {
        /// The filesystem.
        fs: Arc<dyn FileSystem>,
        /// The directory.
        dir: PathBuf,
    },
    /// One object per write in a writer's folder (see the module doc); a segment's path
    /// is its object name.
    Objects {
        /// The store.
        objects: Arc<dyn Objects>,
        /// The writer's folder, `wal/w{writer:010}`.
        folder: String,
    },
}

/// The folder of the object-store WALs.
pub(crate) const OBJECT_ROOT: &str = "wal";

/// The folder of writer `n` on an object store.
pub(crate) fn writer_folder(n: u64) -> String {
    format!("{OBJECT_ROOT}/w{n:010}")
}

/// The writer of an object under [`OBJECT_ROOT`] (`wal/w{n}/...`), with the segment id
/// its name carries when it is exactly `{id:020}` (a segment or a fence; `None` for any
/// other object of the folder).
pub(crate) fn writer_of_object(name: &str) -> Option<(u64, Option<u64>)> {
    let (folder, file) = name.rsplit_once('/')?;
    let writer = writer_of(folder)?;
    let id = parse_object_id(file)
        .filter(|(_, tail)| tail.is_empty())
        .map(|(id, _)| id);
    Some((writer, id))
}

/// The writer number of a folder name `wal/w{n}`.
pub(crate) fn writer_of(folder: &str) -> Option<u64> {
    let digits = folder.strip_prefix(OBJECT_ROOT)?.strip_prefix("/w")?;
    (digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The name of path `path` of a segment object.
fn object_name(path: &Path) -> io::Result<&str> {
    path.to_str()
        .ok_or_else(|| io::Error::other(format!("{} is no object name", path.display())))
}

impl SegmentStore {
    /// Where the segments are, for messages.
    pub fn describe(&self) -> PathBuf {
        match self {
            SegmentStore::Dir { dir, .. } => dir.clone(),
            SegmentStore::Objects { folder, .. } => PathBuf::from(folder),
        }
    }

    /// The whole segment at `path`.
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        match self {
            SegmentStore::Dir { fs, .. } => fs.read(path),
            SegmentStore::Objects { objects, .. } => objects.read(object_name(path)?),
        }
    }

    /// Deletes the segment at `path`.
    pub fn remove(&self, path: &Path) -> io::Result<()> {
        match self {
            SegmentStore::Dir { fs, .. } => fs.remove_file(path),
            SegmentStore::Objects { objects, .. } => objects.delete(object_name(path)?),
        }
    }

    /// Makes removals and creations durable (a directory sync; objects are at once).
    pub fn sync(&self) -> io::Result<()> {
        match self {
            SegmentStore::Dir { fs, dir } => fs.sync_dir(dir),
            SegmentStore::Objects { .. } => Ok(()),
        }
    }

    /// Replaces the segment object at `path` with `bytes` (recovery's cuts and bridges).
    pub fn replace(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        match self {
            SegmentStore::Dir { fs, .. } => {
                let file = fs.create(path)?;
                file.write_all(bytes)?;
                file.sync_all()
            }
            SegmentStore::Objects { objects, .. } => {
                objects.put(object_name(path)?, bytes, PutMode::Overwrite)
            }
        }
    }

    /// Copies the segment at `path` to a free `.corrupt` name; returns it.
    pub fn copy_aside(&self, path: &Path) -> io::Result<PathBuf> {
        let bytes = self.read(path)?;
        match self {
            SegmentStore::Dir { fs, .. } => {
                let target = aside_name(&**fs, path)?;
                let file = fs.create_new(&target)?;
                file.write_all(&bytes)?;
                file.sync_all()?;
                Ok(target)
            }
            SegmentStore::Objects { objects, .. } => {
                let name = object_name(path)?;
                for n in 0u32.. {
                    let target = match n {
                        0 => format!("{name}.corrupt"),
                        _ => format!("{name}.corrupt.{n}"),
                    };
                    match objects.put(&target, &bytes, PutMode::Create) {
                        Ok(()) => return Ok(PathBuf::from(target)),
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(io::Error::other("no free .corrupt name"))
            }
        }
    }

    /// Moves the segment at `path` aside to a free `.corrupt` name; returns it.
    pub fn move_aside(&self, path: &Path) -> io::Result<PathBuf> {
        match self {
            SegmentStore::Dir { fs, .. } => move_aside(&**fs, path),
            SegmentStore::Objects { .. } => {
                let target = self.copy_aside(path)?;
                self.remove(path)?;
                Ok(target)
            }
        }
    }

    /// Lists the segments; other names are ignored. An empty object last in a writer's
    /// folder is its fence, not a segment: it is returned apart.
    pub fn list(&self) -> Result<Listing> {
        match self {
            SegmentStore::Dir { fs, dir } => list(&**fs, dir),
            SegmentStore::Objects { objects, folder } => {
                let mut live = Vec::new();
                let mut max_id = None;
                for name in objects.list(folder)? {
                    let Some(rest) = name.strip_prefix(folder.as_str()) else {
                        continue;
                    };
                    let Some((id, tail)) = rest.strip_prefix('/').and_then(parse_object_id) else {
                        continue;
                    };
                    max_id = max_id.max(Some(id));
                    if tail.is_empty() {
                        live.push((id, PathBuf::from(&name)));
                    }
                }
                live.sort_unstable_by_key(|(id, _)| *id);
                Ok(Listing { live, max_id })
            }
        }
    }
}

/// The id in an object-store segment name `{id:020}` followed by anything.
fn parse_object_id(name: &str) -> Option<(u64, &str)> {
    let digits = name.get(..ID_DIGITS)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) || name.contains('/') {
        return None;
    }
    Some((digits.parse().ok()?, name.get(ID_DIGITS..)?))
}

/// Stores segment object `id` of `store` holding its header, an opening marker carrying
/// `marker_seq` and `frames`, create-if-absent; returns its path and size. `AlreadyExists`
/// means the writer was fenced.
pub(crate) fn put_object(
    objects: &dyn Objects,
    folder: &str,
    id: u64,
    marker_seq: u64,
    frames: &[u8],
) -> io::Result<(PathBuf, u64)> {
    let marker =
        super::record::marker_frame(marker_seq).map_err(|e| io::Error::other(e.to_string()))?;
    let mut bytes = Vec::with_capacity(HEADER_LEN + marker.len() + frames.len());
    bytes.extend_from_slice(&encode_header(id));
    bytes.extend_from_slice(&marker);
    bytes.extend_from_slice(frames);
    let name = format!("{folder}/{id:020}");
    objects.put(&name, &bytes, PutMode::Create)?;
    Ok((PathBuf::from(name), bytes.len() as u64))
}

/// Fences the writer of `folder`: creates an empty object at its next id (past every
/// object there), create-if-absent, trying the following id each time the writer took
/// one meanwhile (one failed create per id, cheaper than the writer's write, so the fence
/// catches up with a writer still writing). Returns the fence's id. A folder whose last
/// object is empty is fenced already.
pub(crate) fn fence(objects: &dyn Objects, folder: &str) -> Result<u64> {
    {
        let names = objects.list(folder)?;
        let mut last: Option<(u64, String)> = None;
        for name in names {
            let id = name
                .strip_prefix(folder)
                .and_then(|r| r.strip_prefix('/'))
                .and_then(parse_object_id)
                .filter(|(_, tail)| tail.is_empty())
                .map(|(id, _)| id);
            if let Some(id) = id {
                if last.as_ref().is_none_or(|(l, _)| id > *l) {
                    last = Some((id, name));
                }
            }
        }
        if let Some((id, name)) = &last {
            if objects.open(name)?.size()? == 0 {
                return Ok(*id);
            }
        }
        let mut next = last.map_or(1, |(id, _)| id + 1);
        loop {
            let name = format!("{folder}/{next:020}");
            match objects.put(&name, b"", PutMode::Create) {
                Ok(()) => return Ok(next),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if objects.open(&name)?.size()? == 0 {
                        return Ok(next); // another party fenced it first
                    }
                    next = next
                        .checked_add(1)
                        .ok_or_else(|| io::Error::other("WAL segment ids exhausted"))?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The magic at the start of every segment.
pub(crate) const MAGIC: &[u8; 8] = b"BSLTWAL1";
/// The format version this code writes and reads.
pub(crate) const VERSION: u32 = 1;
/// The size of the segment header.
pub(crate) const HEADER_LEN: usize = 24;

const PREFIX: &str = "wal-";
const SUFFIX: &str = ".log";
const ID_DIGITS: usize = 20;

/// The file name of segment `id`.
pub(crate) fn file_name(id: u64) -> String {
    format!("{PREFIX}{id:0ID_DIGITS$}{SUFFIX}")
}

/// The id in a `wal-{id}` name followed by anything (a live or a moved-aside segment).
fn parse_any_id(name: &str) -> Option<(u64, &str)> {
    let rest = name.strip_prefix(PREFIX)?;
    let digits = rest.get(..ID_DIGITS)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, rest.get(ID_DIGITS..)?))
}

/// The 24-byte header of segment `id`.
pub(crate) fn encode_header(id: u64) -> [u8; HEADER_LEN] {
    let mut h = [0; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_be_bytes());
    h[12..20].copy_from_slice(&id.to_be_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..].copy_from_slice(&crc.to_be_bytes());
    h
}

/// Checks a header read from the file of segment `id`; the error says what is wrong.
pub(crate) fn check_header(h: &[u8], id: u64) -> std::result::Result<(), String> {
    let Some(h) = h.get(..HEADER_LEN) else {
        return Err(format!(
            "header cut after {} of {HEADER_LEN} bytes",
            h.len()
        ));
    };
    let be32 = |b: &[u8]| b.iter().fold(0u32, |a, &x| (a << 8) | u32::from(x));
    let stored_crc = be32(&h[20..24]);
    if crc32fast::hash(&h[..20]) != stored_crc {
        return Err("header checksum mismatch".into());
    }
    if &h[..8] != MAGIC {
        return Err("bad magic".into());
    }
    let version = be32(&h[8..12]);
    if version != VERSION {
        return Err(format!("unsupported version {version}"));
    }
    let stored_id = h[12..20].iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
    if stored_id != id {
        return Err(format!("header names segment {stored_id}, file name {id}"));
    }
    Ok(())
}

/// Creates segment `id` in `dir`: writes and syncs its header and its opening marker (a
/// record without edits carrying `marker_seq`, see the `recovery` module), then syncs the
/// directory. Returns the file, its path and its size.
pub(crate) fn create(
    fs: &dyn FileSystem,
    dir: &Path,
    id: u64,
    marker_seq: u64,
) -> io::Result<(Box<dyn WriteFile>, PathBuf, u64)> {
    let path = dir.join(file_name(id));
    let file = fs.create_new(&path)?;
    let mut bytes = encode_header(id).to_vec();
    bytes.extend_from_slice(
        &super::record::marker_frame(marker_seq).map_err(|e| io::Error::other(e.to_string()))?,
    );
    file.write_all(&bytes)?;
    file.sync_data()?;
    sync_dir(fs, dir)?;
    Ok((file, path, bytes.len() as u64))
}

/// Makes renames, creations and removals in `dir` durable.
pub(crate) fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> io::Result<()> {
    fs.sync_dir(dir)
}

/// Renames `path` to `<path>.corrupt` (or `.corrupt.N` if taken); returns the new path.
pub(crate) fn move_aside(fs: &dyn FileSystem, path: &Path) -> io::Result<PathBuf> {
    let target = aside_name(fs, path)?;
    fs.rename(path, &target)?;
    Ok(target)
}

/// The first free name of `<path>.corrupt`, `<path>.corrupt.1`, ...
pub(crate) fn aside_name(fs: &dyn FileSystem, path: &Path) -> io::Result<PathBuf> {
    let base = path.as_os_str().to_owned();
    for n in 0u32.. {
        let mut target = base.clone();
        match n {
            0 => target.push(".corrupt"),
            _ => target.push(format!(".corrupt.{n}")),
        }
        let target = PathBuf::from(target);
        if !fs.exists(&target)? {
            return Ok(target);
        }
    }
    Err(io::Error::other("no free .corrupt name"))
}

/// The segments found in a directory.
pub(crate) struct Listing {
    /// Live segments (`wal-{id}.log`), by increasing id.
    pub live: Vec<(u64, PathBuf)>,
    /// The largest id of any `wal-` file, live or moved aside.
    pub max_id: Option<u64>,
}

/// Lists the segments in `dir`; other files are ignored.
pub(crate) fn list(fs: &dyn FileSystem, dir: &Path) -> Result<Listing> {
    let mut live = Vec::new();
    let mut max_id = None;
    for name in fs.list_dir(dir)? {
        let Some((id, rest)) = name.to_str().and_then(parse_any_id) else {
            continue;
        };
        max_id = max_id.max(Some(id));
        if rest == SUFFIX {
            live.push((id, dir.join(&name)));
        }
    }
    live.sort_unstable_by_key(|(id, _)| *id);
    Ok(Listing { live, max_id })
}

/// The id for the next new segment after `listing`.
pub(crate) fn next_id(dir: &Path, listing: &Listing) -> Result<u64> {
    match listing.max_id {
        None => Ok(1),
        Some(id) => id
            .checked_add(1)
            .ok_or_else(|| Error::corruption(dir, 0, "WAL segment ids exhausted")),
    }
}
