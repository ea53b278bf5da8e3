//! [`LocalObjects`]: objects as files of a directory, through a [`FileSystem`].
//!
//! An object `a/b` is the file `<root>/a/b`. A writer writes `<root>/a/b.<process>-<n>.tmp`
//! (unique per writer, so concurrent writers of one name never share a file), and
//! `finish` syncs it (`sync_all`), then renames it over the name (overwrite) or hard-links
//! it to the name and removes it (create-if-absent: the link fails if the name is taken),
//! then syncs the directory: the object is durable and whole before `finish` returns.
//! Temporary files never show in [`Objects::list`]; a crashed process's are removed by
//! [`Objects::sweep_unfinished`].

use super::{check_folder, check_name, ObjectWriter, Objects, PutMode, UNFINISHED};
use crate::fs::{FileSystem, ReadFile, WriteFile};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Objects stored as files under a root directory; see the module doc.
#[derive(Debug, Clone)]
pub struct LocalObjects {
    fs: Arc<dyn FileSystem>,
    root: PathBuf,
}

/// Numbers this process's temporary files.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

impl LocalObjects {
    /// Objects under `root`, through `fs`. The root is created at the first write.
    pub fn new(fs: Arc<dyn FileSystem>, root: impl Into<PathBuf>) -> Self {
        LocalObjects {
            fs,
            root: root.into(),
        }
    }

    /// The objects of the directory holding `path`, and the file's name among them.
    pub fn of_file(
        fs: &Arc<dyn FileSystem>,
        path: &Path,
    ) -> io::Result<(Arc<dyn Objects>, String)> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} has no file name", path.display()),
                )
            })?
            .to_string();
        let dir = path.parent().unwrap_or(Path::new("."));
        let objects: Arc<dyn Objects> = Arc::new(LocalObjects::new(Arc::clone(fs), dir));
        Ok((objects, name))
    }

    /// The directory holding the objects.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, name: &str) -> io::Result<PathBuf> {
        check_name(name)?;
        Ok(self.root.join(name))
    }

    /// Every file under `dir` (relative to the root, `/`-separated), at any depth.
    fn walk(&self, dir: &Path, prefix: &str, out: &mut Vec<String>) -> io::Result<()> {
        let names = match self.fs.list_dir(dir) {
            Ok(names) => names,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for name in names {
            let Some(name) = name.to_str() else { continue };
            let full = match prefix {
                "" => name.to_string(),
                _ => format!("{prefix}/{name}"),
            };
            let path = dir.join(name);
            // A directory lists; a file does not (NotADirectory or similar).
            match self.fs.list_dir(&path) {
                Ok(_) => self.walk(&path, &full, out)?,
                Err(_) => out.push(full),
            }
        }
        Ok(())
    }
}

impl Objects for LocalObjects {
    fn writer(&self, name: &str) -> io::Result<Box<dyn ObjectWriter>> {
        let path = self.path(name)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        self.fs.create_dir_all(&dir)?;
        let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
        let mut temp = path.clone().into_os_string();
        temp.push(format!(".{}-{n}{UNFINISHED}", std::process::id()));
        let temp = PathBuf::from(temp);
        let file = self.fs.create_new(&temp)?;
        Ok(Box::new(LocalWriter {
            fs: Arc::clone(&self.fs),
            file: Some(file),
            temp,
            path,
            dir,
            written: 0,
        }))
    }

    fn open(&self, name: &str) -> io::Result<Arc<dyn ReadFile>> {
        self.fs.open_read(&self.path(name)?)
    }

    fn list(&self, folder: &str) -> io::Result<Vec<String>> {
        check_folder(folder)?;
        let mut out = Vec::new();
        self.walk(&self.root.join(folder), folder, &mut out)?;
        out.retain(|n| !n.ends_with(UNFINISHED) && check_name(n).is_ok());
        out.sort_unstable();
        Ok(out)
    }

    fn delete(&self, name: &str) -> io::Result<()> {
        match self.fs.remove_file(&self.path(name)?) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn locate(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn is_local(&self) -> bool {
        true
    }

    fn sweep_unfinished(&self, folder: &str) -> io::Result<usize> {
        check_folder(folder)?;
        let mut out = Vec::new();
        self.walk(&self.root.join(folder), folder, &mut out)?;
        let mut removed = 0;
        for name in out.iter().filter(|n| n.ends_with(UNFINISHED)) {
            match self.fs.remove_file(&self.root.join(name)) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }
}

/// A [`LocalObjects`] writer: the temporary file and where it goes.
#[derive(Debug)]
struct LocalWriter {
    fs: Arc<dyn FileSystem>,
    /// `None` once finished.
    file: Option<Box<dyn WriteFile>>,
    temp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
    written: u64,
}

impl LocalWriter {
    fn publish(&mut self, mode: PutMode) -> io::Result<()> {
        let file = self
            .file
            .take()
            .ok_or_else(|| io::Error::other("object writer already finished"))?;
        file.sync_all()?;
        drop(file);
        match mode {
            PutMode::Overwrite => self.fs.rename(&self.temp, &self.path)?,
            PutMode::Create => {
                self.fs.link(&self.temp, &self.path)?;
                self.fs.remove_file(&self.temp)?;
            }
        }
        self.fs.sync_dir(&self.dir)
    }
}

impl ObjectWriter for LocalWriter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| io::Error::other("object writer already finished"))?;
        file.write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(())
    }

    fn written(&self) -> u64 {
        self.written
    }

    fn finish(mut self: Box<Self>, mode: PutMode) -> io::Result<()> {
        let out = self.publish(mode);
        if out.is_err() {
            // The temporary file is removed on drop; a rename that happened stays.
            self.file = None;
        }
        out
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        // Unfinished (or failed before the rename): the temporary file goes. After a rename
        // the temporary name is gone, after a link it was removed: NotFound, ignored.
        if let Err(e) = self.fs.remove_file(&self.temp) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(file = %self.temp.display(), error = %e, "could not remove an unfinished object");
            }
        }
    }
}
