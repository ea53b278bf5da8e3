//! [`ToolError`]: why `basalt check`, `repair`, `report` or `import` could not do its work
//! (as opposed to what it found: damage and bad lines are results, not errors).
//!
//! Invariant: every message says what went wrong and, where there is one, what to do; the
//! binary prints it as one `ERROR: ...` line and exits with code 2.

use std::path::{Path, PathBuf};

/// Why a command could not run.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The engine refused (a directory open in another engine, a missing table, ...).
    #[error("{0}")]
    Engine(#[from] basalt_core::Error),
    /// The path is not a Basalt data directory.
    #[error("{} is not a Basalt data directory: {why}", .path.display())]
    NotADataDir {
        /// The path given.
        path: PathBuf,
        /// What is missing.
        why: &'static str,
    },
    /// A file could not be read or written.
    #[error("cannot {what} {}: {source}", .path.display())]
    Io {
        /// What the tool was doing (`read`, `write`, ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The command line is inconsistent (the message says how).
    #[error("{0}")]
    Usage(String),
    /// The chart could not be drawn.
    #[error("cannot draw the chart: {0}")]
    Plot(String),
    /// The import's column specification is malformed.
    #[error("bad --columns (importtsv.columns): {0}")]
    Columns(#[from] ColumnSpecError),
}

impl ToolError {
    /// An I/O error on `path` while doing `what`.
    pub fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        ToolError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Fails unless `dir` is an existing data directory (one with a catalog): the commands that
/// open an engine would otherwise create an empty one.
pub fn require_data_dir(dir: &Path) -> Result<(), ToolError> {
    if !dir.is_dir() {
        return Err(ToolError::NotADataDir {
            path: dir.to_path_buf(),
            why: "no such directory",
        });
    }
    if !dir.join("catalog").exists() {
        return Err(ToolError::NotADataDir {
            path: dir.to_path_buf(),
            why: "it has no catalog",
        });
    }
    Ok(())
}

/// Why a column specification is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnSpecError {
    /// `HBASE_ROW_KEY` appears `found` times instead of once.
    #[error("must specify exactly one column as HBASE_ROW_KEY (found {found})")]
    RowKeyCount {
        /// How many times it appears.
        found: usize,
    },
    /// `HBASE_TS_KEY` appears more than once.
    #[error("must specify at most one column as HBASE_TS_KEY (found {found})")]
    TimestampCount {
        /// How many times it appears.
        found: usize,
    },
    /// No `family:qualifier` entry.
    #[error("one or more columns in addition to the row key and timestamp are required")]
    NoCellColumn,
    /// Entry `position` (1-based) is empty.
    #[error("entry {position} is empty")]
    EmptyEntry {
        /// The entry's position, from 1.
        position: usize,
    },
    /// Entry `position` (1-based) has an empty family.
    #[error("entry {position} ({entry:?}) has an empty column family")]
    EmptyFamily {
        /// The entry's position, from 1.
        position: usize,
        /// The entry.
        entry: String,
    },
    /// An ImportTsv special column Basalt does not support.
    #[error("{0} is not supported by Basalt's import (no operation attributes, visibility labels or per-cell TTL columns)")]
    Unsupported(String),
}
