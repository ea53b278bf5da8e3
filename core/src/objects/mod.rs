//! The object-store seam: the engine's durable files (store files, the catalog, and later WAL
//! segments and manifests) are objects written and read through [`Objects`], whose contract is
//! an object store's, so one engine runs on a local directory or on shared storage.
//!
//! # The contract
//!
//! Checked by the conformance suite in `tests/objects.rs` against every backend (a model
//! proptest, crash tests on [`crate::fs::FaultFs`]):
//!
//! - An object is immutable once stored: it is written whole ([`Objects::put`] or an
//!   [`ObjectWriter`] that is [`ObjectWriter::finish`]ed) and never changed in place.
//!   Nothing of an unfinished writer is visible under the object's name, to readers or to
//!   [`Objects::list`]; a writer dropped unfinished leaves nothing behind.
//! - [`PutMode::Create`] stores the object only if no object has its name
//!   (create-if-absent): of two parties creating one name, exactly one succeeds, the other
//!   gets `AlreadyExists` and the object is the winner's, whole. [`PutMode::Overwrite`]
//!   replaces an existing object atomically: readers see the old bytes or the new, never a
//!   mix.
//! - A stored object is durable when `put` or `finish` returns `Ok`: a machine crash
//!   afterwards keeps it whole. An error means it may or may not be stored (whole).
//! - [`Objects::open`] gives whole-object and range reads ([`ReadFile`]); a read past the end
//!   is `UnexpectedEof`; a missing object is `NotFound`.
//! - [`Objects::list`] names every stored object under a folder (the names beginning with
//!   `folder/`), at any depth, sorted.
//! - [`Objects::delete`] removes an object; deleting a missing object succeeds (object
//!   stores do not tell the two apart).
//!
//! Names are `/`-separated relative paths whose segments are made of ASCII letters, digits
//! and `.`, `_`, `-`, `=`, never `.` or `..`, and never ending in `.tmp` (the local
//! backend's unfinished objects); anything else is an `InvalidInput` error. Errors are
//! [`std::io::Error`]s, so the engine's I/O error handling covers every backend.
//!
//! # Backends
//!
//! - [`LocalObjects`]: a directory through a [`FileSystem`] (so [`crate::fs::FaultFs`]
//!   injects faults and crashes under it), the embedded engine's default. An object is
//!   written to a temporary file, synced, then renamed into place (overwrite) or hard-linked
//!   (create-if-absent), and the directory synced.
//! - [`StoreObjects`]: any [`object_store::ObjectStore`]: its `InMemory` store and its
//!   `LocalFileSystem` (with fsync) are tested; its S3 client speaks to stores with
//!   conditional PUTs.

mod local;
mod store;

pub use local::LocalObjects;
/// The `object_store` crate [`StoreObjects`] runs on, re-exported so a caller builds its store
/// with the same version.
pub use object_store;
pub use store::StoreObjects;

use crate::fs::{FileSystem, ReadFile};
use std::fmt::Debug;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// How a stored object meets an existing one of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// Store only if the name is free; otherwise fail with `AlreadyExists`.
    Create,
    /// Replace any existing object atomically.
    Overwrite,
}

/// An object being written; nothing is visible under its name until [`ObjectWriter::finish`].
/// Dropping it unfinished discards what was written.
pub trait ObjectWriter: Send + Debug {
    /// Appends all of `buf` to the object, or fails.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// The bytes written so far.
    fn written(&self) -> u64;
    /// Stores the object durably under its name, as `mode` says.
    fn finish(self: Box<Self>, mode: PutMode) -> io::Result<()>;
}

/// The object-store operations the engine uses; see the module doc for the contract.
pub trait Objects: Send + Sync + Debug {
    /// Starts writing object `name`.
    fn writer(&self, name: &str) -> io::Result<Box<dyn ObjectWriter>>;
    /// Opens object `name` for whole and range reads.
    fn open(&self, name: &str) -> io::Result<Arc<dyn ReadFile>>;
    /// The names of every object under `folder` (beginning with `folder/`), sorted.
    fn list(&self, folder: &str) -> io::Result<Vec<String>>;
    /// Removes object `name`; a missing object is not an error.
    fn delete(&self, name: &str) -> io::Result<()>;
    /// Where object `name` lives, for messages and reports (a path for a local directory).
    fn locate(&self, name: &str) -> PathBuf;
    /// Whether the objects are files of a local directory ([`LocalObjects`]): an engine
    /// then keeps its WAL as appended segment files beside them rather than as objects.
    fn is_local(&self) -> bool {
        false
    }
    /// Removes what unfinished writers of a crashed process left under `folder`; the
    /// caller must be the folder's only writer. Object stores leave nothing: `Ok(0)`.
    fn sweep_unfinished(&self, folder: &str) -> io::Result<usize> {
        let _ = folder;
        Ok(0)
    }

    /// Stores `bytes` as object `name`, as `mode` says.
    fn put(&self, name: &str, bytes: &[u8], mode: PutMode) -> io::Result<()> {
        let mut w = self.writer(name)?;
        w.write_all(bytes)?;
        w.finish(mode)
    }

    /// Reads a whole object.
    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        self.open(name)?.read_all()
    }

    /// Whether object `name` exists.
    fn exists(&self, name: &str) -> io::Result<bool> {
        match self.open(name) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The suffix of the local backend's unfinished objects, never a stored object's.
pub(crate) const UNFINISHED: &str = ".tmp";

/// Checks an object name against the module doc's rules.
pub fn check_name(name: &str) -> io::Result<()> {
    let bad = |why: &str| {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("object name {name:?}: {why}"),
        ))
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.ends_with(UNFINISHED) {
        return bad("ends in .tmp, the suffix of unfinished objects");
    }
    for segment in name.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return bad("empty, `.` or `..` segment");
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'='))
        {
            return bad("segments are ASCII letters, digits, `.`, `_`, `-` and `=`");
        }
    }
    Ok(())
}

/// Checks a folder name: an object name, or `""` for every object.
pub(crate) fn check_folder(folder: &str) -> io::Result<()> {
    match folder {
        "" => Ok(()),
        _ => check_name(folder),
    }
}

/// The default backend over a filesystem: a [`LocalObjects`] rooted at `root`.
pub fn local(fs: Arc<dyn FileSystem>, root: impl Into<PathBuf>) -> Arc<dyn Objects> {
    Arc::new(LocalObjects::new(fs, root))
}
