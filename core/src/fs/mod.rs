//! The filesystem interface: every byte the engine reads or writes goes through
//! [`FileSystem`], so tests can swap the disk for [`FaultFs`], which injects faults and
//! simulates crashes.
//!
//! # What an implementation must guarantee
//!
//! The engine's crash safety rests on these rules (POSIX semantics with the ext4/xfs
//! durability model), checked by the conformance suite in `tests/fs_conformance.rs` against
//! [`StdFs`] and [`FaultFs`]:
//!
//! - Reads see every completed write (`write_all` that returned `Ok`) at once, from any
//!   handle, whether or not it was synced.
//! - [`WriteFile::write_all`] either writes the whole buffer or returns an error; after an
//!   error any prefix of the buffer may be in the file (a torn write).
//! - [`WriteFile::sync_data`] / [`WriteFile::sync_all`] make the file's contents durable: a
//!   machine crash afterwards keeps them. Bytes written after the last sync may be lost (all,
//!   none or a prefix) in a machine crash, never in a process crash. An error from a sync
//!   means the contents are in an unknown state; callers must not retry the sync and then
//!   trust the data (Linux may drop the dirty pages and report success next time).
//! - Creating, renaming or removing a directory entry is durable only after
//!   [`FileSystem::sync_dir`] of the directory holding it. [`FileSystem::rename`] is atomic:
//!   after any crash the target names either the old or the new file. [`FileSystem::link`]
//!   fails with `AlreadyExists` when the new name is taken, so it publishes a file
//!   create-if-absent.
//! - [`FileSystem::lock`] gives one holder at a time per path (per process for [`StdFs`]'s
//!   `flock`); the lock is released when the returned guard drops.
//!
//! The engine does not rely on anything else: no `O_APPEND` atomicity across handles, no
//! ordering between files without a sync, no durability of `create_dir_all` (the engine's
//! directories are created once, at first open).
//!
//! # Engine behaviour under faults
//!
//! Every failed operation returns an error to its caller; nothing acknowledged is lost.
//!
//! | fault | where | engine behaviour |
//! |---|---|---|
//! | failed or torn WAL write | `SyncWal`/`FsyncWal` append, `AsyncWal` flusher | that write fails (not acknowledged); the WAL is poisoned: later writes fail with `WritesRefused` until the engine is reopened; recovery cuts the torn tail |
//! | failed WAL fsync | `FsyncWal` group commit, roll, close | the waiting `FsyncWal` writes fail; the WAL is poisoned as above (the fsync is never retried) |
//! | full disk (`StorageFull`) | any write | as a failed write of that component |
//! | failed store-file write or sync | flush | the flush fails, the MemStore keeps its cells and the WAL keeps the segments; the temporary file is removed; the flush is retried by the next trigger. While flushes keep failing and the MemStores are over the global budget, a write waits at most `Config::memstore_wait_ms`, then fails with `Busy` having written nothing |
//! | failed store-file write or sync | compaction | the compaction fails; its inputs stay live and the output's temporary file is removed (an output already renamed into place is kept until the next open, which removes it unless the catalog lists it) |
//! | failed catalog write | any catalog update | the update fails and the in-memory catalog stays the old one. Before the rename the on-disk catalog is the old one (the temporary file is removed at the next open); if only the directory sync after the rename failed, the next open may read either, so no file either lists is deleted before then (a failed compaction keeps its output; open removes the files the catalog it reads does not list) |
//! | machine crash | anywhere | reopen replays the WAL: every `FsyncWal` write acknowledged survives; later bytes may be lost; a torn tail is cut |
//! | process crash | anywhere | as a machine crash, and every `SyncWal` write acknowledged survives too |
//! | flipped byte in a store file | read | the read fails with `Corruption` naming file and offset; `Admin::check_table` reports it |
//! | flipped byte in a WAL segment | recovery | the segment is cut at the bad record and later segments are moved aside (see `wal::recovery`) |

pub mod fault;

pub use fault::{CrashKind, FaultFs};

use std::ffi::OsString;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// A file open for positioned reads; shared freely between threads.
pub trait ReadFile: Send + Sync + Debug {
    /// Fills `buf` from `offset`; a file that ends first is an `UnexpectedEof` error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// The file's length in bytes.
    fn size(&self) -> io::Result<u64>;

    /// Reads exactly `len` bytes at `offset` into a new vector, as
    /// [`ReadFile::read_exact_at`] does (a file that ends first is an `UnexpectedEof`
    /// error). An implementation may read straight into the vector's spare capacity instead
    /// of zeroing it first, as [`StdFs`]'s files do: a block-cache miss reads a whole block.
    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    /// Reads the whole file.
    fn read_all(&self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.size()?).map_err(io::Error::other)?;
        self.read_vec_at(len, 0)
    }
}

/// A file open for appending writes. Writes go to the end of the file.
pub trait WriteFile: Send + Sync + Debug {
    /// Appends all of `buf`, or fails having appended some prefix of it.
    fn write_all(&self, buf: &[u8]) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes; later writes append after `len`.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file's contents durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Makes the file's contents and metadata durable (`fsync`).
    fn sync_all(&self) -> io::Result<()>;
}

/// An exclusive lock on a path, released on drop.
pub trait FileLock: Send + Sync + Debug {}

/// The filesystem operations the engine uses; see the module doc for the guarantees.
pub trait FileSystem: Send + Sync + Debug {
    /// Opens an existing file for positioned reads.
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadFile>>;
    /// Creates `path`, truncating any existing file, for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Creates `path` for writing; fails with `AlreadyExists` if it exists.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Opens an existing file for appending writes (and `set_len`, syncs).
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Renames `from` to `to`, atomically replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Gives `from`'s file a second name `to` (a hard link); fails with `AlreadyExists` if
    /// `to` exists, so publishing a finished file under a name is create-if-absent. The new
    /// name is durable after [`FileSystem::sync_dir`] of its directory.
    fn link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Creates a directory and its missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The names of the entries of a directory, in no particular order.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<OsString>>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Makes creations, renames and removals in directory `path` durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (creating the file); `WouldBlock` if held.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;

    /// Reads a whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.open_read(path)?.read_all()
    }
}

/// The real filesystem, through `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

impl StdFs {
    /// A shared handle, the engine's default filesystem.
    pub fn shared() -> Arc<dyn FileSystem> {
        Arc::new(StdFs)
    }
}

#[derive(Debug)]
struct StdFile(File);

impl ReadFile for StdFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.0, buf, offset)
    }
    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        // `pread` into the spare capacity: the kernel writes the bytes, nothing zeroes them
        // first (rustix's `spare_capacity` grows the length by what was read).
        let mut buf = Vec::with_capacity(len);
        while buf.len() < len {
            let at = offset + buf.len() as u64;
            let spare = rustix::buffer::spare_capacity(&mut buf);
            match rustix::io::pread(&self.0, spare, at) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "failed to fill whole buffer",
                    ))
                }
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(buf)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl WriteFile for StdFile {
    fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        (&self.0).write_all(buf)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)?;
        // A file opened without `append` writes at its cursor: move it to the new end.
        std::io::Seek::seek(&mut &self.0, std::io::SeekFrom::Start(len))?;
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }
}

impl FileLock for StdFile {}

impl FileSystem for StdFs {
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadFile>> {
        Ok(Arc::new(StdFile(File::open(path)?)))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        Ok(Box::new(StdFile(File::create(path)?)))
    }
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let f = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Box::new(StdFile(f)))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        Ok(Box::new(StdFile(
            OpenOptions::new().append(true).open(path)?,
        )))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect()
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        match f.try_lock() {
            Ok(()) => Ok(Box::new(StdFile(f))),
            Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked", path.display()),
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}
