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

use crate::error::{Error, Result};
use crate::fs::{FileSystem, WriteFile};
use std::io;
use std::path::{Path, PathBuf};

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
        &super::recovery::marker_frame(marker_seq).map_err(|e| io::Error::other(e.to_string()))?,
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
