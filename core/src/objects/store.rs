//! [`StoreObjects`]: [`Objects`] on any [`object_store::ObjectStore`].
//!
//! The engine's I/O is synchronous, so each call waits for the store's future on the
//! calling thread (`futures::executor::block_on`, outside tokio's cooperative budget; the
//! `LocalFileSystem` store moves its own blocking work to tokio's blocking pool when called
//! inside a runtime). A writer keeps the
//! object in memory and stores it with one conditional PUT at `finish` (`PutMode::Create`
//! maps to the store's create-if-absent, which `InMemory`, `LocalFileSystem` and S3 stores
//! with conditional PUTs provide). A reader learns the object's size once (objects are
//! immutable) and turns each positioned read into a ranged GET.

use super::{check_folder, check_name, ObjectWriter, Objects, PutMode};
use crate::fs::ReadFile;
use futures::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutOptions, PutPayload};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Objects in an [`ObjectStore`], under an optional folder of it; see the module doc.
#[derive(Clone)]
pub struct StoreObjects {
    store: Arc<dyn ObjectStore>,
    /// The folder of the store holding the objects, `""` for its root.
    folder: String,
}

impl fmt::Debug for StoreObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreObjects")
            .field("store", &self.store.to_string())
            .field("folder", &self.folder)
            .finish()
    }
}

impl StoreObjects {
    /// Objects at the root of `store`.
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        StoreObjects {
            store,
            folder: String::new(),
        }
    }

    /// Objects under `folder` of `store` (several engines can share one store); the folder
    /// follows the object-name rules.
    pub fn in_folder(store: Arc<dyn ObjectStore>, folder: &str) -> io::Result<Self> {
        check_name(folder)?;
        Ok(StoreObjects {
            store,
            folder: folder.to_string(),
        })
    }

    /// A fresh in-memory store (`object_store::memory::InMemory`), for tests.
    pub fn in_memory() -> Self {
        Self::new(Arc::new(object_store::memory::InMemory::new()))
    }

    /// The `object_store` crate's store of a local directory (`LocalFileSystem`), with
    /// fsync of every written file and its directory, so a stored object is durable.
    pub fn local_directory(dir: &std::path::Path) -> io::Result<Self> {
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir)
            .map_err(io_error)?
            .with_fsync(true);
        Ok(Self::new(Arc::new(store)))
    }

    /// The store's path of object `name`.
    fn path(&self, name: &str) -> io::Result<StorePath> {
        check_name(name)?;
        Ok(StorePath::from(self.full(name)))
    }

    fn full(&self, name: &str) -> String {
        match self.folder.as_str() {
            "" => name.to_string(),
            folder => format!("{folder}/{name}"),
        }
    }
}

/// Waits for one of the store's futures on the calling thread. Outside tokio's cooperative
/// budget: called inside a runtime's task whose budget ran out, a tokio future (the
/// `LocalFileSystem` store's blocking-pool work) would otherwise answer `Pending` and wake
/// itself forever.
fn wait<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(tokio::task::unconstrained(future))
}

/// The store's error as an I/O error of the matching kind.
fn io_error(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::AlreadyExists { .. } => {
            io::Error::new(io::ErrorKind::AlreadyExists, e)
        }
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        other => io::Error::other(other),
    }
}

impl Objects for StoreObjects {
    fn writer(&self, name: &str) -> io::Result<Box<dyn ObjectWriter>> {
        Ok(Box::new(StoreWriter {
            store: Arc::clone(&self.store),
            path: self.path(name)?,
            bytes: Vec::new(),
        }))
    }

    fn open(&self, name: &str) -> io::Result<Arc<dyn ReadFile>> {
        let path = self.path(name)?;
        let meta = wait(self.store.head(&path)).map_err(io_error)?;
        Ok(Arc::new(StoreReader {
            store: Arc::clone(&self.store),
            path,
            size: meta.size,
        }))
    }

    fn list(&self, folder: &str) -> io::Result<Vec<String>> {
        check_folder(folder)?;
        let under = match folder {
            "" => self.folder.clone(),
            _ => self.full(folder),
        };
        let prefix = (!under.is_empty()).then(|| StorePath::from(under.as_str()));
        let metas: Vec<_> =
            wait(self.store.list(prefix.as_ref()).try_collect()).map_err(io_error)?;
        let strip = match self.folder.as_str() {
            "" => String::new(),
            folder => format!("{folder}/"),
        };
        let mut names: Vec<String> = metas
            .into_iter()
            .filter_map(|m| {
                let full = m.location.to_string();
                full.strip_prefix(strip.as_str()).map(str::to_string)
            })
            .filter(|n| check_name(n).is_ok())
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    fn delete(&self, name: &str) -> io::Result<()> {
        let path = self.path(name)?;
        match wait(self.store.delete(&path)) {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            other => other.map_err(io_error),
        }
    }

    fn locate(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("{}/{}", self.store, self.full(name)))
    }
}

/// A [`StoreObjects`] writer: the object's bytes until `finish` PUTs them.
#[derive(Debug)]
struct StoreWriter {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    bytes: Vec<u8>,
}

impl ObjectWriter for StoreWriter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.bytes.extend_from_slice(buf);
        Ok(())
    }

    fn written(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn finish(self: Box<Self>, mode: PutMode) -> io::Result<()> {
        let mode = match mode {
            PutMode::Create => object_store::PutMode::Create,
            PutMode::Overwrite => object_store::PutMode::Overwrite,
        };
        let StoreWriter { store, path, bytes } = *self;
        let put = store.put_opts(&path, PutPayload::from(bytes), PutOptions::from(mode));
        wait(put).map_err(io_error)?;
        Ok(())
    }
}

/// A stored object open for ranged reads.
#[derive(Debug)]
struct StoreReader {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    size: u64,
}

impl ReadFile for StoreReader {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= self.size)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("read past the end of {} ({} bytes)", self.path, self.size),
                )
            })?;
        if buf.is_empty() {
            return Ok(());
        }
        let got = wait(self.store.get_range(&self.path, offset..end)).map_err(io_error)?;
        if got.len() != buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{} returned {} of {} bytes",
                    self.path,
                    got.len(),
                    buf.len()
                ),
            ));
        }
        buf.copy_from_slice(&got);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.size)
    }
}
