//! The data directory before an open or an offline tool touches it: its exclusive lock
//! (one engine or tool at a time) and the catalog's presence (an open without a catalog
//! would delete every store file as an orphan).
//!
//! Invariant: neither check changes anything in the directory.
//!
//! A lock found held is tried again for up to [`LOCK_WAIT`] before the directory is called
//! open elsewhere: a child process spawned by this process at the moment an engine closes
//! holds a copy of the lock file's descriptor from its fork until its exec, which keeps the
//! `flock` taken for that instant after the engine let it go.

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::objects::Objects;
use crate::server::config::Config;
use std::time::{Duration, Instant};

/// How long a held directory lock is tried again before the open fails (see the module doc).
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(2);

/// How long the open waits between two tries of a held lock.
const LOCK_RETRY: Duration = Duration::from_millis(10);

/// Takes the exclusive lock of `config.dir` (`LOCK`): one engine or offline tool at a time.
/// Fails with `BadArgument` when the lock is still held after [`LOCK_WAIT`].
pub(crate) fn lock_data_dir(config: &Config) -> Result<Box<dyn crate::fs::FileLock>> {
    let path = config.dir.join("LOCK");
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match config.fs.lock(&path) {
            Ok(lock) => return Ok(lock),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(Error::bad_argument(format!(
                        "{} is already open in another engine",
                        config.dir.display()
                    )));
                }
                std::thread::sleep(LOCK_RETRY);
            }
            Err(e) => return Err(Error::Io(e)),
        }
    }
}

/// Why the engine's objects cannot be opened for want of their catalog: there is none, yet
/// `data/` holds store files (an open would delete them all as orphans). `None` when a
/// catalog exists or `data/` holds no store file (a new directory).
pub(crate) fn missing_catalog(objects: &dyn Objects) -> Result<Option<String>> {
    if Catalog::exists(objects)? {
        return Ok(None);
    }
    let files = objects
        .list("data")?
        .iter()
        .filter(|n| n.ends_with(".sf"))
        .count();
    Ok((files > 0).then(|| {
        format!(
            "the catalog is missing, yet data/ holds {files} store files; restore the catalog \
             from a backup (nothing was changed)"
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine closed (its descriptor is gone) while a child process spawned at that
    /// moment still holds a copy of it between fork and exec (a `dup` here: the same open
    /// file description, so the same `flock`). The next open waits the copy out.
    #[test]
    fn a_lock_kept_for_a_moment_by_a_copied_descriptor_is_waited_for() {
        let tmp = tempfile::tempdir().unwrap();
        let config = Config::new(tmp.path());
        let engine = std::fs::File::create(tmp.path().join("LOCK")).unwrap();
        engine.try_lock().unwrap();
        let child = engine.try_clone().unwrap();
        drop(engine);
        let exec = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(child);
        });
        let reopened = lock_data_dir(&config);
        exec.join().unwrap();
        assert!(reopened.is_ok(), "{:?}", reopened.err());
    }

    #[test]
    fn a_lock_held_past_the_wait_means_the_directory_is_open() {
        let tmp = tempfile::tempdir().unwrap();
        let config = Config::new(tmp.path());
        let _engine = lock_data_dir(&config).unwrap();
        let started = Instant::now();
        let err = match lock_data_dir(&config) {
            Ok(_) => panic!("a held lock was taken twice"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("is already open in another engine"), "{err}");
        assert!(started.elapsed() >= LOCK_WAIT);
    }
}
