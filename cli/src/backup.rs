//! `basalt backup DIR TARGET`, `basalt backup --verify TARGET` and `basalt restore TARGET
//! DIR`: backups of a data directory to another directory, with progress bars and a rate
//! limit, checked and restored (the format and its guarantees: `basalt_core::backup`'s
//! module doc and `docs/backup.md`).
//!
//! Invariants: a backup interrupted (Ctrl-C, a full disk, a dead target) leaves no backup
//! that looks complete (its manifest is written last); `restore` writes nothing before it
//! has verified every file of the backup, and writes only into a missing or empty
//! directory; `--verify` reads every byte of the backup.

use crate::datadir::DataDir;
use crate::error::{require_data_dir, ToolError};
use crate::offline::{human_bytes, plural};
use crate::progress::bytes_bar;
use basalt_core::objects::{self, Objects};
use basalt_core::{
    restore_backup, verify_backup, BackupOptions, BackupProgress, BackupSource, BackupSummary,
};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A backup target given on the command line: a directory, or a `file://` URL of one.
fn target_dir(target: &Path) -> Result<PathBuf, ToolError> {
    let text = target.to_string_lossy();
    if let Some(path) = text.strip_prefix("file://") {
        return Ok(PathBuf::from(path));
    }
    if text.contains("://") {
        return Err(ToolError::Usage(format!(
            "{text}: the tool backs up to directories (or file:// URLs); other object stores \
             are reached through the library (Connection::backup with an object_store target)"
        )));
    }
    Ok(target.to_path_buf())
}

/// The objects of a backup target directory.
fn target_objects(dir: &Path) -> Arc<dyn Objects> {
    objects::local(basalt_core::fs::StdFs::shared(), dir)
}

fn write(out: &mut dyn Write, text: &str) -> Result<(), ToolError> {
    out.write_all(text.as_bytes())
        .map_err(|e| ToolError::io("write", Path::new("standard output"), e))
}

/// A progress callback drawing a byte bar labelled `what`.
fn bar_progress(
    what: &str,
) -> (
    indicatif::ProgressBar,
    impl Fn(&BackupProgress) + Sync + Send,
) {
    let bar = bytes_bar(0, what);
    let b = bar.clone();
    let update = move |p: &BackupProgress| {
        b.set_length(p.bytes_total);
        b.set_position(p.bytes_done);
        b.set_prefix(format!("{}/{} files", p.files_done, p.files_total));
    };
    (bar, update)
}

/// `basalt backup DIR TARGET [--snapshot NAME] [--max-bytes-per-sec N]`: backs the data
/// directory `dir` (closed, or opened here) up to `target`, a directory created if missing.
pub async fn run_backup(
    dir: &Path,
    target: &Path,
    snapshot: Option<String>,
    max_bytes_per_sec: Option<u64>,
    out: &mut dyn Write,
) -> Result<BackupSummary, ToolError> {
    require_data_dir(dir)?;
    let target = target_dir(target)?;
    fs::create_dir_all(&target).map_err(|e| ToolError::io("create", &target, e))?;
    let (bar, update) = bar_progress("backup");
    let options = BackupOptions {
        max_bytes_per_sec,
        progress: Some(Arc::new(update)),
    };
    let source = match snapshot {
        Some(name) => BackupSource::Snapshot(name),
        None => BackupSource::AllTables,
    };
    let data = DataDir::open(dir).await?;
    let done = data
        .conn
        .backup(target_objects(&target), source, options)
        .await;
    bar.finish_and_clear();
    data.close().await?;
    let done = done?;
    write(
        out,
        &format!(
            "backup {} of {} at read point {}: {} ({}), copied {} ({}) to {}\n",
            done.id,
            plural(done.tables.len() as u64, "table"),
            done.read_point,
            plural(done.files as u64, "file"),
            human_bytes(done.bytes),
            plural(done.copied_files as u64, "file"),
            human_bytes(done.copied_bytes),
            target.display()
        ),
    )?;
    Ok(done)
}

/// `basalt backup --verify TARGET [--id N]`: re-reads backup `id` (the newest when `None`)
/// and prints what is damaged; true when it is whole.
pub fn run_verify_backup(
    target: &Path,
    id: Option<u64>,
    out: &mut dyn Write,
) -> Result<bool, ToolError> {
    let target = target_dir(target)?;
    let objects = target_objects(&target);
    let (bar, update) = bar_progress("verify");
    let check = verify_backup(&*objects, id, Some(&update));
    bar.finish_and_clear();
    let check = check?;
    let mut text = format!(
        "backup {} in {}: {} ({})\n",
        check.id,
        target.display(),
        plural(check.files as u64, "file"),
        human_bytes(check.bytes)
    );
    for (file, why) in &check.damaged {
        text.push_str(&format!("DAMAGED {file}: {why}\n"));
    }
    text.push_str(match check.is_whole() {
        true => "every file present with its size and checksum\n",
        false => "the backup is damaged: restore refuses it\n",
    });
    write(out, &text)?;
    Ok(check.is_whole())
}

/// `basalt restore TARGET DIR [--id N]`: rebuilds a data directory at `dir` (missing or
/// empty) from backup `id` of `target` (the newest when `None`), verified first.
pub fn run_restore(
    target: &Path,
    dir: &Path,
    id: Option<u64>,
    out: &mut dyn Write,
) -> Result<BackupSummary, ToolError> {
    let target = target_dir(target)?;
    if !target.is_dir() {
        return Err(ToolError::Usage(format!(
            "{}: no such backup directory",
            target.display()
        )));
    }
    let objects = target_objects(&target);
    let (bar, update) = bar_progress("restore");
    let done = restore_backup(
        &*objects,
        id,
        basalt_core::fs::StdFs::shared(),
        dir,
        Some(&update),
    );
    bar.finish_and_clear();
    let done = done?;
    write(
        out,
        &format!(
            "restored backup {} ({}, read point {}, {}, {}) into {}\n",
            done.id,
            plural(done.tables.len() as u64, "table"),
            done.read_point,
            plural(done.files as u64, "file"),
            human_bytes(done.bytes),
            dir.display()
        ),
    )?;
    Ok(done)
}
