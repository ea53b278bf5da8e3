//! The backup manifest: what a backup holds ([`BackupManifest`], [`BackupFile`]) and its
//! encoding (see the module doc of `crate::backup`: magic `BSLTBAK1`, version, length,
//! CRC32, postcard payload).
//!
//! Invariant: every byte of a manifest is checked when it is read: header, length (nothing
//! may follow the payload) and checksum.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"BSLTBAK1";
const VERSION: u32 = 1;
const HEADER: usize = 20;

/// One store file of a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupFile {
    /// Its object name in a data directory (`data/...`).
    pub name: String,
    /// Its object name in the backup target (`files/...`).
    pub stored: String,
    /// Its size in bytes.
    pub size: u64,
    /// CRC32 (IEEE) of its bytes.
    pub crc32: u32,
}

/// What a backup holds: its catalog and the files it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupManifest {
    /// Its number in the target (the newest is the largest).
    pub id: u64,
    /// When it was completed, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The engine-wide read point its tables were taken at.
    pub read_point: u64,
    /// Its tables (`ns:name`).
    pub tables: Vec<String>,
    /// The catalog of the restored directory, as catalog file bytes.
    pub catalog: Vec<u8>,
    /// Every store file the catalog lists.
    pub files: Vec<BackupFile>,
}

/// The manifest's bytes (see the module doc).
pub(crate) fn encode(m: &BackupManifest) -> Result<Vec<u8>> {
    let payload = postcard::to_stdvec(m)
        .map_err(|e| Error::bad_argument(format!("backup manifest encoding failed: {e}")))?;
    let len = u32::try_from(payload.len())
        .map_err(|_| Error::bad_argument("backup manifest larger than 4 GiB"))?;
    let mut buf = Vec::with_capacity(HEADER + payload.len());
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&VERSION.to_be_bytes());
    buf.extend_from_slice(&len.to_be_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&buf);
    h.update(&payload);
    buf.extend_from_slice(&h.finalize().to_be_bytes());
    buf.extend_from_slice(&payload);
    Ok(buf)
}

/// The manifest in `bytes`, every byte checked.
pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<BackupManifest> {
    let corrupt =
        |offset: usize, why: &str| Error::corruption(PathBuf::from(path), offset as u64, why);
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err(corrupt(0, "not a backup manifest"));
    }
    let word = |at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&bytes[at..at + 4]);
        u32::from_be_bytes(w)
    };
    if word(8) != VERSION {
        return Err(corrupt(8, "unsupported backup manifest version"));
    }
    let len = word(12) as usize;
    if bytes.len() != HEADER + len {
        return Err(corrupt(12, "backup manifest length mismatch"));
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&bytes[..16]);
    h.update(&bytes[HEADER..]);
    if h.finalize() != word(16) {
        return Err(corrupt(16, "backup manifest checksum mismatch"));
    }
    postcard::from_bytes(&bytes[HEADER..])
        .map_err(|e| corrupt(HEADER, &format!("backup manifest decode: {e}")))
}
