//! `basalt check DIR` and `basalt repair DIR`: the offline integrity check and repair of a
//! closed data directory ([`basalt_core::repair`]), printed table by table and file by file.
//!
//! The check reads the catalog, every store file it lists and the WAL, and changes nothing.
//! The repair runs the check, moves every damaged or missing store file out of the way
//! (into `DIR/damaged/`, never deleted) and drops it from the catalog, then checks again and
//! prints what may have been lost: for each file set aside, its table, regions, row range,
//! cells and largest sequence id.
//!
//! Invariants: both refuse a directory an engine holds open (they take its lock); the check
//! never writes; [`run_check`] and [`run_repair`] return `Ok(true)` exactly when the
//! directory is healthy at the end (the binary's exit code 0), `Ok(false)` when damage
//! remains (exit code 1), and an error when they could not run (exit code 2).

use crate::error::ToolError;
use crate::progress::spinner;
use basalt_core::client::report::key_to_string;
use basalt_core::repair::{check_dir, repair_dir, DirectoryCheck, RepairReport};
use basalt_core::{Config, DamageAction, IntegrityReport};
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

/// Fails unless `dir` looks like a data directory (a catalog, store files or a WAL): the
/// offline tools never work on an arbitrary folder.
fn require_dir(dir: &Path) -> Result<(), ToolError> {
    if !dir.is_dir() {
        return Err(ToolError::NotADataDir {
            path: dir.to_path_buf(),
            why: "no such directory",
        });
    }
    if ["catalog", "data", "wal"]
        .iter()
        .all(|part| !dir.join(part).exists())
    {
        return Err(ToolError::NotADataDir {
            path: dir.to_path_buf(),
            why: "it has no catalog, no data/ and no wal/",
        });
    }
    Ok(())
}

/// Checks the closed data directory `dir`, changing nothing.
pub fn check_offline(dir: &Path) -> Result<DirectoryCheck, ToolError> {
    require_dir(dir)?;
    Ok(check_dir(&Config::new(dir))?)
}

/// Repairs the closed data directory `dir` (see the module doc), then checks it again.
pub fn repair_offline(dir: &Path) -> Result<(RepairReport, DirectoryCheck), ToolError> {
    require_dir(dir)?;
    let report = repair_dir(&Config::new(dir))?;
    let after = check_dir(&Config::new(dir))?;
    Ok((report, after))
}

/// Runs [`check_offline`] with a spinner on standard error and prints `render_check` to `out`;
/// true when the directory is healthy.
pub fn run_check(dir: &Path, out: &mut dyn Write) -> Result<bool, ToolError> {
    let bar = spinner("checking every store file and the WAL");
    let result = check_offline(dir);
    bar.finish_and_clear();
    let c = result?;
    write_out(out, &render_check(&c))?;
    Ok(c.is_healthy())
}

/// Runs `repair_offline` with a spinner on standard error and prints `render_repair` to `out`;
/// true when the directory is healthy after the repair.
pub fn run_repair(dir: &Path, out: &mut dyn Write) -> Result<bool, ToolError> {
    let bar = spinner("checking and repairing");
    let result = repair_offline(dir);
    bar.finish_and_clear();
    let (report, after) = result?;
    write_out(out, &render_repair(&report, &after))?;
    Ok(after.is_healthy())
}

fn write_out(out: &mut dyn Write, text: &str) -> Result<(), ToolError> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| ToolError::io("write", Path::new("standard output"), e))
}

/// A byte count as people read it (`12.3 KiB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `n word`, with an `s` unless `n` is 1 (`1 region`, `3 regions`).
pub fn plural(n: impl Into<u64>, word: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `path` relative to `dir` when it is inside it.
fn short(dir: &Path, path: &Path) -> String {
    path.strip_prefix(dir).unwrap_or(path).display().to_string()
}

fn render_table(dir: &Path, t: &IntegrityReport, s: &mut String) {
    let verdict = if t.is_healthy() {
        "ok".to_string()
    } else {
        format!(
            "DAMAGED: {} of {} ({} missing), {}",
            t.files_damaged,
            plural(t.files_checked as u64, "store file"),
            t.files_missing,
            plural(t.problems as u64, "finding")
        )
    };
    let _ = writeln!(
        s,
        "table {}: {}, {}, {} in {}: {verdict}",
        t.table,
        plural(t.regions as u64, "region"),
        plural(t.files_checked as u64, "store file"),
        plural(t.cells, "cell"),
        plural(t.data_blocks, "data block")
    );
    let rows: Vec<[String; 6]> = t
        .files
        .iter()
        .map(|f| {
            let state = if f.check.is_healthy() {
                "ok"
            } else if f.is_missing() {
                "MISSING"
            } else {
                "DAMAGED"
            };
            [
                state.to_string(),
                short(dir, &f.check.path),
                format!("region {}", f.region),
                format!("family {}", key_to_string(&f.family)),
                human_bytes(f.check.file_size),
                plural(f.check.cells, "cell"),
            ]
        })
        .collect();
    let mut widths = [0usize; 6];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for (f, row) in t.files.iter().zip(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i >= 4 {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        let _ = writeln!(s, "  {}", cells.join("  "));
        for finding in &f.check.findings {
            let _ = writeln!(
                s,
                "      {} at offset {}: {}",
                finding.kind, finding.offset, finding.reason
            );
        }
    }
}

fn action_words(a: &DamageAction) -> String {
    match a {
        DamageAction::Cut { bytes } => {
            format!("an open would cut the segment here ({bytes} bytes)")
        }
        DamageAction::Skipped { bytes } => format!("a salvage would skip {bytes} bytes"),
        DamageAction::SetAside { .. } => "an open would set the segment aside".to_string(),
        DamageAction::Removed => "an open would remove the empty segment".to_string(),
        DamageAction::Lost => "records are missing here".to_string(),
    }
}

/// The check as text: the catalog, each table with one line per store file and one per
/// finding, the WAL, and a last `result:` line.
pub fn render_check(c: &DirectoryCheck) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "data directory {}", c.dir.display());
    match &c.catalog_problem {
        Some(p) => {
            let _ = writeln!(s, "catalog: DAMAGED: {p}");
        }
        None => {
            let _ = writeln!(
                s,
                "catalog: ok ({})",
                plural(c.tables.len() as u64, "table")
            );
        }
    }
    for t in &c.tables {
        render_table(&c.dir, t, &mut s);
    }
    if c.wal_damage.is_empty() {
        let _ = writeln!(s, "WAL: {}: ok", plural(c.wal_segments as u64, "segment"));
    } else {
        let _ = writeln!(
            s,
            "WAL: {}: DAMAGED at {}",
            plural(c.wal_segments as u64, "segment"),
            plural(c.wal_damage.len() as u64, "spot")
        );
        for d in &c.wal_damage {
            let _ = writeln!(
                s,
                "  {} at offset {}: {}; {}",
                short(&c.dir, &d.segment),
                d.offset,
                d.reason,
                action_words(&d.action)
            );
        }
    }
    let files: usize = c.tables.iter().map(|t| t.files_checked).sum();
    if c.is_healthy() {
        let _ = writeln!(
            s,
            "result: healthy ({}, {}, {} checked)",
            plural(c.tables.len() as u64, "table"),
            plural(files as u64, "store file"),
            plural(c.wal_segments as u64, "WAL segment")
        );
    } else {
        let mut what = Vec::new();
        if c.catalog_problem.is_some() {
            what.push("the catalog (restore it from a backup)".to_string());
        }
        if c.damaged_files() > 0 {
            what.push(format!(
                "{} of {} (`basalt repair` sets them aside)",
                c.damaged_files(),
                plural(files as u64, "store file")
            ));
        }
        if !c.wal_damage.is_empty() {
            what.push(format!(
                "{} in the WAL (the next open's WAL recovery mode decides; see \
                 docs/recovery.md)",
                plural(c.wal_damage.len() as u64, "spot")
            ));
        }
        let _ = writeln!(s, "result: DAMAGED: {}", what.join("; "));
    }
    s
}

/// Start and end rows as a range, with the table's ends named.
fn row_range(start: &[u8], end: &[u8]) -> String {
    let start = if start.is_empty() {
        "(table start)".to_string()
    } else {
        format!("'{}'", key_to_string(start))
    };
    let end = if end.is_empty() {
        "(table end)".to_string()
    } else {
        format!("'{}'", key_to_string(end))
    };
    format!("[{start}, {end})")
}

/// The repair as text: the check it acted on, each file set aside with what may have been
/// lost, the tables the next open verifies, then the check after the repair (its verdict
/// alone when it is healthy, all of it otherwise).
pub fn render_repair(r: &RepairReport, after: &DirectoryCheck) -> String {
    let mut s = render_check(&r.check);
    if r.set_aside.is_empty() {
        let _ = writeln!(s, "repair: no store file to set aside");
    } else {
        let _ = writeln!(
            s,
            "repair: {} set aside",
            plural(r.set_aside.len() as u64, "store file")
        );
    }
    for f in &r.set_aside {
        let moved = match &f.moved_to {
            Some(p) => format!("moved to {}", short(&r.check.dir, p)),
            None => "was missing".to_string(),
        };
        let _ = writeln!(
            s,
            "  table {} family {} file {} (regions {:?}): {moved}",
            f.table,
            key_to_string(&f.family),
            f.file_id,
            f.regions
        );
        let _ = writeln!(
            s,
            "    may have lost: up to {} of rows {}, written at sequence ids <= {} \
             (and delete markers: cells they hid may show again)",
            plural(f.cells, "cell"),
            row_range(&f.start_row, &f.end_row),
            f.max_seq
        );
        let _ = writeln!(s, "    why: {}", f.reason);
    }
    if !r.tables_to_verify.is_empty() {
        let names: Vec<String> = r.tables_to_verify.iter().map(|t| t.to_string()).collect();
        let _ = writeln!(
            s,
            "  the next open verifies and repairs what derives from: {}",
            names.join(", ")
        );
    }
    let again = render_check(after);
    if after.is_healthy() {
        // Only the verdict: the files are those above, less the ones set aside.
        let verdict = again.lines().last().unwrap_or_default();
        let _ = writeln!(s, "after the repair: {verdict}");
    } else {
        let _ = writeln!(s, "after the repair:");
        s.push_str(&again);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_picks_the_unit() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
    }

    #[test]
    fn plurals() {
        assert_eq!(plural(0u64, "cell"), "0 cells");
        assert_eq!(plural(1u64, "store file"), "1 store file");
        assert_eq!(plural(2u64, "region"), "2 regions");
    }

    #[test]
    fn row_ranges_name_the_table_ends() {
        assert_eq!(row_range(b"", b""), "[(table start), (table end))");
        assert_eq!(row_range(b"a\x00", b"b"), "['a\\x00', 'b')");
    }

    #[test]
    fn refuses_a_folder_that_is_no_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_offline(dir.path()).unwrap_err();
        assert!(
            err.to_string().contains("not a Basalt data directory"),
            "{err}"
        );
        let err = check_offline(&dir.path().join("nope")).unwrap_err();
        assert!(err.to_string().contains("no such directory"), "{err}");
    }
}
