//! [`FaultFs`]: an in-memory [`FileSystem`] that injects faults and simulates crashes, in
//! the manner of redb's crash-consistency backend and sled's fault injection.
//!
//! # Model
//!
//! Every file (inode) has a *live* image, what reads see, and a *durable* image, what
//! survives a machine crash. Writes change the live image; `sync_data`/`sync_all` copy live
//! to durable for that file. The namespace (path -> inode) likewise has a live and a durable
//! version: creating, renaming and removing change the live one, and
//! [`FileSystem::sync_dir`] copies the live entries of that directory to the durable one.
//! Directories themselves are durable once created (the engine creates them once, at first
//! open; the model does not lose them).
//!
//! [`FaultFs::crash`] simulates a crash and returns the handle to use afterwards:
//!
//! - [`CrashKind::Process`]: the process died, the OS did not: live images and the live
//!   namespace survive (the page cache is the OS's).
//! - [`CrashKind::Machine`]: power loss: every file reverts to its durable image and the
//!   namespace to its durable version. This is the most conservative reading of POSIX: no
//!   unsynced byte and no unsynced directory change survives.
//!
//! Every handle carries the epoch it was made in; after a crash every operation through an
//! older handle (the dead engine's files and its `Arc<dyn FileSystem>`) fails, so a
//! background thread of the crashed engine cannot write into the recovered world. Locks are
//! released by a crash.
//!
//! # Faults
//!
//! All deterministic: the test picks the numbers (from its seed). Counters count from the
//! moment the fault is armed; the first matching operation is 1.
//!
//! - [`FaultFs::crash_at_sync`]: the Nth sync (file or directory) "stops the world": it
//!   fails without making anything durable and every later operation fails, until
//!   [`FaultFs::crash`].
//! - [`FaultFs::fail_sync`]: the Nth sync fails (nothing made durable); later ones work.
//! - [`FaultFs::tear_write`]: the Nth `write_all` writes the first half of its buffer, then
//!   fails.
//! - [`FaultFs::disk_full_after`]: after N more bytes written, writes fail with
//!   `StorageFull` (having written what fit).
//! - [`FaultFs::flip_read`]: the Nth positioned read returns its data with one byte flipped.
//! - [`FaultFs::corrupt`]: flips one byte of a stored file (live and durable images).

use super::{FileLock, FileSystem, ReadFile, WriteFile};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a simulated crash keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashKind {
    /// The process died; the OS page cache survives (everything written is kept).
    Process,
    /// The machine lost power; only what was synced survives.
    Machine,
}

#[derive(Debug, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    epoch: u64,
    stopped: bool,
    next_ino: u64,
    inodes: HashMap<u64, Inode>,
    live_ns: BTreeMap<PathBuf, u64>,
    durable_ns: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    locks: BTreeSet<PathBuf>,
    syncs: u64,
    writes: u64,
    reads: u64,
    crash_at_sync: Option<u64>,
    fail_sync_at: Option<u64>,
    tear_write_at: Option<u64>,
    flip_read_at: Option<u64>,
    space_left: Option<u64>,
}

impl State {
    fn file(&self, path: &Path) -> io::Result<u64> {
        self.live_ns
            .get(path)
            .copied()
            .ok_or_else(|| not_found(path))
    }

    fn check_parent(&self, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() && !self.dirs.contains(p) => Err(not_found(p)),
            _ => Ok(()),
        }
    }

    fn new_file(&mut self, path: &Path) -> io::Result<u64> {
        self.check_parent(path)?;
        if self.dirs.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", path.display()),
            ));
        }
        self.next_ino += 1;
        let ino = self.next_ino;
        self.inodes.insert(ino, Inode::default());
        self.live_ns.insert(path.to_path_buf(), ino);
        Ok(ino)
    }

    /// Counts a sync; returns the error it must fail with, if any.
    fn sync_point(&mut self) -> io::Result<()> {
        self.syncs += 1;
        if self.crash_at_sync == Some(self.syncs) {
            self.stopped = true;
            return Err(stopped());
        }
        if self.fail_sync_at == Some(self.syncs) {
            return Err(io::Error::other("injected fsync failure"));
        }
        Ok(())
    }

    fn inode(&mut self, ino: u64) -> io::Result<&mut Inode> {
        self.inodes
            .get_mut(&ino)
            .ok_or_else(|| io::Error::other("FaultFs: inode vanished"))
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file or directory", path.display()),
    )
}

fn stopped() -> io::Error {
    io::Error::other("FaultFs: simulated crash, the filesystem is stopped")
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

/// An in-memory, fault-injecting filesystem; see the module doc. Clones share one disk.
#[derive(Debug, Clone, Default)]
pub struct FaultFs {
    shared: Arc<Shared>,
    epoch: u64,
}

impl FaultFs {
    /// An empty filesystem.
    pub fn new() -> Self {
        Self::default()
    }

    /// This handle as the engine's filesystem.
    pub fn as_dyn(&self) -> Arc<dyn FileSystem> {
        Arc::new(self.clone())
    }

    /// Runs `f` on the state if this handle is current and the world is not stopped.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> io::Result<T>) -> io::Result<T> {
        let mut s = self.shared.state.lock();
        if s.epoch != self.epoch || s.stopped {
            return Err(stopped());
        }
        f(&mut s)
    }

    /// Simulates a crash (see the module doc) and returns the handle to reopen with. Every
    /// older handle, and every file opened through one, fails from now on. Armed faults are
    /// disarmed and the counters reset.
    pub fn crash(&self, kind: CrashKind) -> FaultFs {
        let mut s = self.shared.state.lock();
        if kind == CrashKind::Machine {
            s.live_ns = s.durable_ns.clone();
            for inode in s.inodes.values_mut() {
                inode.live = inode.durable.clone();
            }
        }
        let keep: BTreeSet<u64> = s
            .live_ns
            .values()
            .chain(s.durable_ns.values())
            .copied()
            .collect();
        s.inodes.retain(|ino, _| keep.contains(ino));
        s.epoch += 1;
        s.stopped = false;
        s.locks.clear();
        s.syncs = 0;
        s.writes = 0;
        s.reads = 0;
        s.crash_at_sync = None;
        s.fail_sync_at = None;
        s.tear_write_at = None;
        s.flip_read_at = None;
        s.space_left = None;
        FaultFs {
            shared: Arc::clone(&self.shared),
            epoch: s.epoch,
        }
    }

    /// Whether a [`crash_at_sync`](Self::crash_at_sync) point was reached.
    pub fn is_stopped(&self) -> bool {
        self.shared.state.lock().stopped
    }

    /// Syncs counted since the last crash (or creation).
    pub fn syncs(&self) -> u64 {
        self.shared.state.lock().syncs
    }

    /// Stops the world at the `n`th sync from now (`n >= 1`).
    pub fn crash_at_sync(&self, n: u64) {
        let mut s = self.shared.state.lock();
        s.crash_at_sync = Some(s.syncs + n);
    }

    /// Fails the `n`th sync from now (`n >= 1`).
    pub fn fail_sync(&self, n: u64) {
        let mut s = self.shared.state.lock();
        s.fail_sync_at = Some(s.syncs + n);
    }

    /// Tears the `n`th `write_all` from now (`n >= 1`): half its buffer, then an error.
    pub fn tear_write(&self, n: u64) {
        let mut s = self.shared.state.lock();
        s.tear_write_at = Some(s.writes + n);
    }

    /// Reports a full disk once `bytes` more bytes have been written; `None` lifts it.
    pub fn disk_full_after(&self, bytes: Option<u64>) {
        self.shared.state.lock().space_left = bytes;
    }

    /// Flips one byte in what the `n`th positioned read from now (`n >= 1`) returns.
    pub fn flip_read(&self, n: u64) {
        let mut s = self.shared.state.lock();
        s.flip_read_at = Some(s.reads + n);
    }

    /// Flips (xor 0xff) the byte at `offset` of `path`, in its live and durable images.
    pub fn corrupt(&self, path: &Path, offset: u64) -> io::Result<()> {
        self.with(|s| {
            let ino = s.file(path)?;
            let inode = s.inode(ino)?;
            let at = usize::try_from(offset).map_err(io::Error::other)?;
            for image in [&mut inode.live, &mut inode.durable] {
                if let Some(b) = image.get_mut(at) {
                    *b ^= 0xff;
                }
            }
            Ok(())
        })
    }

    fn handle(&self, ino: u64) -> FaultFile {
        FaultFile {
            fs: self.clone(),
            ino,
        }
    }
}

/// A file handle of [`FaultFs`].
#[derive(Debug)]
struct FaultFile {
    fs: FaultFs,
    ino: u64,
}

impl ReadFile for FaultFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.fs.with(|s| {
            s.reads += 1;
            let flip = s.flip_read_at == Some(s.reads);
            let data = &s.inode(self.ino)?.live;
            let start = usize::try_from(offset).map_err(io::Error::other)?;
            let src = start
                .checked_add(buf.len())
                .and_then(|end| data.get(start..end))
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end"))?;
            buf.copy_from_slice(src);
            if flip {
                if let Some(b) = buf.get_mut(buf.len() / 2) {
                    *b ^= 0x01;
                }
            }
            Ok(())
        })
    }

    fn size(&self) -> io::Result<u64> {
        self.fs.with(|s| Ok(s.inode(self.ino)?.live.len() as u64))
    }
}

impl WriteFile for FaultFile {
    fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        self.fs.with(|s| {
            s.writes += 1;
            let mut n = buf.len();
            let mut err = None;
            if s.tear_write_at == Some(s.writes) {
                n /= 2;
                err = Some(io::Error::other("injected torn write"));
            }
            if let Some(left) = s.space_left {
                if (n as u64) > left {
                    n = usize::try_from(left).unwrap_or(0);
                    err = Some(io::Error::new(
                        io::ErrorKind::StorageFull,
                        "injected full disk",
                    ));
                }
                s.space_left = Some(left - n as u64);
            }
            s.inode(self.ino)?.live.extend_from_slice(&buf[..n]);
            err.map_or(Ok(()), Err)
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.fs.with(|s| {
            let len = usize::try_from(len).map_err(io::Error::other)?;
            s.inode(self.ino)?.live.resize(len, 0);
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.fs.with(|s| {
            s.sync_point()?;
            let inode = s.inode(self.ino)?;
            inode.durable = inode.live.clone();
            Ok(())
        })
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync_data()
    }
}

/// A lock held in memory; released on drop (unless a crash released it already).
#[derive(Debug)]
struct FaultLock {
    fs: FaultFs,
    path: PathBuf,
}

impl FileLock for FaultLock {}

impl Drop for FaultLock {
    fn drop(&mut self) {
        let mut s = self.fs.shared.state.lock();
        if s.epoch == self.fs.epoch {
            s.locks.remove(&self.path);
        }
    }
}

impl FileSystem for FaultFs {
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadFile>> {
        let ino = self.with(|s| s.file(path))?;
        Ok(Arc::new(self.handle(ino)))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let ino = self.with(|s| match s.live_ns.get(path) {
            Some(&ino) => {
                s.inode(ino)?.live.clear();
                Ok(ino)
            }
            None => s.new_file(path),
        })?;
        Ok(Box::new(self.handle(ino)))
    }

    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let ino = self.with(|s| {
            if s.live_ns.contains_key(path) || s.dirs.contains(path) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists", path.display()),
                ));
            }
            s.new_file(path)
        })?;
        Ok(Box::new(self.handle(ino)))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let ino = self.with(|s| s.file(path))?;
        Ok(Box::new(self.handle(ino)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.with(|s| {
            let ino = s.file(from)?;
            s.check_parent(to)?;
            s.live_ns.remove(from);
            s.live_ns.insert(to.to_path_buf(), ino);
            Ok(())
        })
    }

    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.with(|s| {
            let ino = s.file(from)?;
            s.check_parent(to)?;
            if s.live_ns.contains_key(to) || s.dirs.contains(to) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists", to.display()),
                ));
            }
            s.live_ns.insert(to.to_path_buf(), ino);
            Ok(())
        })
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.with(|s| {
            s.file(path)?;
            s.live_ns.remove(path);
            Ok(())
        })
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.with(|s| {
            for dir in path.ancestors() {
                if dir.as_os_str().is_empty() {
                    break;
                }
                if s.live_ns.contains_key(dir) {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} is a file", dir.display()),
                    ));
                }
                s.dirs.insert(dir.to_path_buf());
            }
            Ok(())
        })
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<OsString>> {
        self.with(|s| {
            if !s.dirs.contains(path) {
                return Err(not_found(path));
            }
            let files = s.live_ns.keys();
            let dirs = s.dirs.iter();
            Ok(files
                .chain(dirs)
                .filter(|p| p.parent() == Some(path))
                .filter_map(|p| p.file_name().map(|n| n.to_os_string()))
                .collect())
        })
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.with(|s| Ok(s.live_ns.contains_key(path) || s.dirs.contains(path)))
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.with(|s| {
            if !s.dirs.contains(path) {
                return Err(not_found(path));
            }
            s.sync_point()?;
            let in_dir = |p: &PathBuf| p.parent() == Some(path);
            s.durable_ns.retain(|p, _| !in_dir(p));
            let live: Vec<(PathBuf, u64)> = s
                .live_ns
                .iter()
                .filter(|(p, _)| in_dir(p))
                .map(|(p, i)| (p.clone(), *i))
                .collect();
            s.durable_ns.extend(live);
            Ok(())
        })
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.with(|s| {
            if !s.live_ns.contains_key(path) {
                s.new_file(path)?;
            }
            if !s.locks.insert(path.to_path_buf()) {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("{} is locked", path.display()),
                ));
            }
            Ok(())
        })?;
        Ok(Box::new(FaultLock {
            fs: self.clone(),
            path: path.to_path_buf(),
        }))
    }
}
