//! What the integrity check reports: a [`FileCheck`] per file, holding every [`Finding`] (the
//! file, the offset at fault, its [`FindingKind`] and the reason in words).
//!
//! Invariants kept: a finding always names the file its check is about ([`FileCheck::add`]);
//! a file is healthy exactly when its check holds no finding. (A report decoded with serde,
//! from a peer, is taken as it was sent: nothing relies on these for safety.)

use std::fmt;
use std::path::PathBuf;

/// What kind of problem a [`Finding`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum FindingKind {
    /// The file does not exist (the catalog lists it).
    Missing,
    /// The file could not be read (an I/O error other than its end).
    Unreadable,
    /// The trailer is short, has a bad magic, version or CRC, or places the metadata blocks
    /// where they cannot be; nothing else can be checked.
    Trailer,
    /// A block's CRC does not match its bytes.
    Checksum,
    /// A block's framing is bad: an absurd length, a block running past its section or the
    /// file, an unknown compression code, or stored bytes that do not decompress.
    Framing,
    /// A data block's payload does not decode into entries.
    DataBlock,
    /// Keys are not strictly ascending, within a block or across blocks.
    KeyOrder,
    /// The block index disagrees with itself or with the data blocks.
    Index,
    /// The file-info block is malformed or disagrees with the trailer or the blocks.
    FileInfo,
    /// The bloom block is malformed, or its filter rules out a key the file holds.
    Bloom,
    /// The catalog's record of the file (size, cell count, largest sequence id) disagrees
    /// with the file.
    Catalog,
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            FindingKind::Missing => "missing",
            FindingKind::Unreadable => "unreadable",
            FindingKind::Trailer => "trailer",
            FindingKind::Checksum => "checksum",
            FindingKind::Framing => "framing",
            FindingKind::DataBlock => "data block",
            FindingKind::KeyOrder => "key order",
            FindingKind::Index => "index",
            FindingKind::FileInfo => "file info",
            FindingKind::Bloom => "bloom",
            FindingKind::Catalog => "catalog",
        };
        f.write_str(name)
    }
}

/// One problem found in one file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Finding {
    /// The file.
    pub file: PathBuf,
    /// The offset of the block (or trailer) at fault; 0 for a problem of the whole file.
    pub offset: u64,
    /// What kind of problem it is.
    pub kind: FindingKind,
    /// What is wrong, in words.
    pub reason: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at offset {}: {}: {}",
            self.file.display(),
            self.offset,
            self.kind,
            self.reason
        )
    }
}

/// The result of checking one store file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileCheck {
    /// The file checked.
    pub path: PathBuf,
    /// Its size in bytes (0 if it could not be opened).
    pub file_size: u64,
    /// Data blocks read and checked.
    pub data_blocks: u64,
    /// Cells found in the data blocks that decoded.
    pub cells: u64,
    /// Every problem found, in file order as far as possible; empty for a healthy file.
    pub findings: Vec<Finding>,
}

impl FileCheck {
    /// True when nothing is wrong.
    pub fn is_healthy(&self) -> bool {
        self.findings.is_empty()
    }

    /// Adds a finding about this file.
    pub fn add(&mut self, offset: u64, kind: FindingKind, reason: impl Into<String>) {
        self.findings.push(Finding {
            file: self.path.clone(),
            offset,
            kind,
            reason: reason.into(),
        });
    }
}
