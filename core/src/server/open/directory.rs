//! The data directory before an open or an offline tool touches it: its exclusive lock
//! (one engine or tool at a time) and the catalog's presence (an open without a catalog
//! would delete every store file as an orphan).
//!
//! Invariant: neither check changes anything in the directory.

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::objects::Objects;
use crate::server::config::Config;

/// Takes the exclusive lock of `config.dir` (`LOCK`): one engine or offline tool at a time.
pub(crate) fn lock_data_dir(config: &Config) -> Result<Box<dyn crate::fs::FileLock>> {
    match config.fs.lock(&config.dir.join("LOCK")) {
        Ok(lock) => Ok(lock),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(Error::bad_argument(format!(
            "{} is already open in another engine",
            config.dir.display()
        ))),
        Err(e) => Err(Error::Io(e)),
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
