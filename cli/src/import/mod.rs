//! `basalt import DIR TABLE FILE`: bulk load of a TSV or CSV file into an existing table,
//! in HBase ImportTsv's column syntax and with its rules ([`spec`] for the columns, [`mod@line`]
//! for the lines), written in batches through the table's API (the salted API when the
//! table's descriptor has a salt, so rows land in their buckets), with a progress bar by
//! bytes of the file and a summary: rows imported, bad lines with their numbers and reasons,
//! rows per second.
//!
//! As ImportTsv without `importtsv.bulk.output`, the table must exist and hold every family
//! the columns name; bad lines are skipped and counted by default
//! (`importtsv.skip.bad.lines=true`), and with `--skip-bad-lines=false` the import stops at
//! the first one (the lines before it are imported). Every cell of a run gets one timestamp,
//! the time the import started (`importtsv.timestamp` overrides it), unless the line has an
//! `HBASE_TS_KEY` column.
//!
//! Invariants: a batch is written whole before the next line is read past it, so when the
//! import stops (a bad line, Ctrl-C between batches, an engine error), every line up to
//! [`ImportSummary::last_line`] has been dealt with (imported or counted bad) and none after
//! it was written; a table the tool opened read-only (unknown coprocessors) is refused
//! before anything is read.

pub mod line;
mod run;
pub mod spec;

pub use line::BadLineKind;
pub use run::{import_file, run_import};
pub use spec::{ColumnSpec, InputColumn};

use crate::error::ToolError;
use std::path::PathBuf;
use std::time::Duration;

/// How many bad lines a summary lists (the count covers them all).
pub const LISTED_BAD_LINES: usize = 20;

/// The command line of `basalt import`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ImportArgs {
    /// The data directory (it must exist).
    pub dir: PathBuf,
    /// The table (`name` or `namespace:name`); it must exist with every family named.
    pub table: String,
    /// The TSV or CSV file.
    pub file: PathBuf,
    /// ImportTsv's column specification, e.g. `HBASE_ROW_KEY,cf:a,cf:b` (also
    /// `-Dimporttsv.columns=...`).
    #[arg(long, value_name = "SPEC")]
    pub columns: Option<String>,
    /// The field separator: one byte, or `\t`, `\\`, `\xNN` (default tab; `,` with --csv).
    #[arg(long, value_name = "SEP")]
    pub separator: Option<String>,
    /// Reads RFC 4180 CSV: quoted fields may hold separators, quotes and line ends.
    #[arg(long)]
    pub csv: bool,
    /// Checks that the table is salted into N buckets (the salt itself always comes from
    /// the table's descriptor).
    #[arg(long, value_name = "N")]
    pub salt_buckets: Option<u32>,
    /// Skips and counts bad lines (true, ImportTsv's default) or stops at the first (false).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub skip_bad_lines: Option<bool>,
    /// Writes no cell for an empty field (ImportTsv's importtsv.skip.empty.columns).
    #[arg(long)]
    pub skip_empty_columns: bool,
    /// The timestamp of every cell, in milliseconds (default: when the import starts).
    #[arg(long, value_name = "MS")]
    pub timestamp: Option<u64>,
    /// Rows per write batch.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub batch: usize,
    /// ImportTsv's settings: importtsv.columns, importtsv.separator,
    /// importtsv.skip.bad.lines, importtsv.skip.empty.columns, importtsv.timestamp.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub define: Vec<String>,
}

/// The import's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// The table.
    pub table: String,
    /// The input file.
    pub file: PathBuf,
    /// What each column holds.
    pub columns: ColumnSpec,
    /// The field separator.
    pub separator: u8,
    /// RFC 4180 CSV instead of ImportTsv's plain split.
    pub csv: bool,
    /// The salt buckets the table must have, if given.
    pub salt_buckets: Option<u32>,
    /// Skip bad lines (true) or stop at the first (false).
    pub skip_bad_lines: bool,
    /// Write no cell for an empty field.
    pub skip_empty_columns: bool,
    /// The timestamp of cells on lines without one (`None`: the import's start).
    pub timestamp: Option<u64>,
    /// Rows per batch (at least 1).
    pub batch: usize,
}

/// Sets `slot` to `value` unless it holds a different one already (a flag and a `-D`
/// setting saying two things).
fn merge<T: PartialEq + std::fmt::Debug>(
    slot: &mut Option<T>,
    value: T,
    what: &str,
) -> Result<(), ToolError> {
    match slot {
        Some(old) if *old != value => Err(ToolError::Usage(format!(
            "{what} is given twice, as {old:?} and {value:?}"
        ))),
        _ => {
            *slot = Some(value);
            Ok(())
        }
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, ToolError> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" => Ok(true),
        "false" | "no" => Ok(false),
        _ => Err(ToolError::Usage(format!(
            "-D{key}={v}: expected true or false"
        ))),
    }
}

impl ImportOptions {
    /// Checks the command line: the flags and the `-D` settings together.
    pub fn from_args(a: &ImportArgs) -> Result<ImportOptions, ToolError> {
        let (mut columns, mut separator) = (a.columns.clone(), a.separator.clone());
        let (mut skip_bad, mut timestamp) = (a.skip_bad_lines, a.timestamp);
        let mut skip_empty = a.skip_empty_columns.then_some(true);
        for d in &a.define {
            let (key, value) = d
                .split_once('=')
                .ok_or_else(|| ToolError::Usage(format!("-D{d}: expected -DKEY=VALUE")))?;
            match key {
                "importtsv.columns" => merge(
                    &mut columns,
                    value.to_string(),
                    "importtsv.columns (--columns)",
                )?,
                "importtsv.separator" => merge(
                    &mut separator,
                    value.to_string(),
                    "importtsv.separator (--separator)",
                )?,
                "importtsv.skip.bad.lines" => merge(
                    &mut skip_bad,
                    parse_bool(key, value)?,
                    "importtsv.skip.bad.lines (--skip-bad-lines)",
                )?,
                "importtsv.skip.empty.columns" => merge(
                    &mut skip_empty,
                    parse_bool(key, value)?,
                    "importtsv.skip.empty.columns (--skip-empty-columns)",
                )?,
                "importtsv.timestamp" => {
                    let ts = value.parse::<u64>().map_err(|_| {
                        ToolError::Usage(format!("-D{d}: the timestamp must be milliseconds"))
                    })?;
                    merge(&mut timestamp, ts, "importtsv.timestamp (--timestamp)")?
                }
                other => {
                    return Err(ToolError::Usage(format!(
                        "-D{other} is not supported; supported: importtsv.columns, \
                         importtsv.separator, importtsv.skip.bad.lines, \
                         importtsv.skip.empty.columns, importtsv.timestamp"
                    )))
                }
            }
        }
        let columns = columns.ok_or_else(|| {
            ToolError::Usage(
                "no columns: give --columns HBASE_ROW_KEY,cf:a,... (or \
                 -Dimporttsv.columns=...)"
                    .to_string(),
            )
        })?;
        let separator = match separator {
            Some(s) => spec::parse_separator(&s).map_err(ToolError::Usage)?,
            None if a.csv => b',',
            None => b'\t',
        };
        if a.batch == 0 {
            return Err(ToolError::Usage("--batch must be at least 1".to_string()));
        }
        Ok(ImportOptions {
            table: a.table.clone(),
            file: a.file.clone(),
            columns: ColumnSpec::parse(&columns)?,
            separator,
            csv: a.csv,
            salt_buckets: a.salt_buckets,
            skip_bad_lines: skip_bad.unwrap_or(true),
            skip_empty_columns: skip_empty.unwrap_or(false),
            timestamp,
            batch: a.batch,
        })
    }
}

/// One bad line: its number (the first line of a CSV record) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// The line number, from 1.
    pub line: u64,
    /// Why it was not imported.
    pub reason: BadLineKind,
}

/// Why an import stopped before the end of its file.
#[derive(Debug)]
pub enum ImportStop {
    /// A bad line, with bad lines not skipped.
    BadLine(BadLine),
    /// Ctrl-C, seen between two batches.
    Interrupted,
    /// The engine failed a batch; the lines before the batch are imported.
    Failed(ToolError),
}

/// What an import did.
#[derive(Debug)]
pub struct ImportSummary {
    /// The table.
    pub table: String,
    /// Its salt buckets, when it is salted.
    pub salt_buckets: Option<u32>,
    /// The input was CSV (records, which may span lines) rather than TSV lines.
    pub csv: bool,
    /// Rows written and acknowledged.
    pub rows_imported: u64,
    /// Lines (CSV: records) read.
    pub records_read: u64,
    /// Bad lines (skipped, or the one that stopped the import).
    pub bad_lines: u64,
    /// The first `LISTED_BAD_LINES` bad lines.
    pub listed_bad_lines: Vec<BadLine>,
    /// The last line dealt with: every line up to it is imported or counted bad.
    pub last_line: u64,
    /// Bytes of the file read.
    pub bytes_read: u64,
    /// Bytes of the file.
    pub bytes_total: u64,
    /// How long the import ran.
    pub elapsed: Duration,
    /// Why it stopped early, if it did.
    pub stop: Option<ImportStop>,
}

impl ImportSummary {
    /// The process exit code: 0 when the whole file was read, 1 after a bad line stopped
    /// it, 130 after Ctrl-C, 2 after an engine error.
    pub fn exit_code(&self) -> u8 {
        match self.stop {
            None => 0,
            Some(ImportStop::BadLine(_)) => 1,
            Some(ImportStop::Interrupted) => 130,
            Some(ImportStop::Failed(_)) => 2,
        }
    }

    /// Rows imported per second.
    pub fn rows_per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.rows_imported as f64 / secs
        } else {
            0.0
        }
    }

    /// The summary as text.
    pub fn render(&self) -> String {
        let mut s = format!(
            "imported {} rows into {}{} from {} {} ({} of {} bytes) in {:.2} s: {:.0} rows/s\n",
            self.rows_imported,
            self.table,
            match self.salt_buckets {
                Some(n) => format!(" (salted, {n} buckets)"),
                None => String::new(),
            },
            self.records_read,
            if self.csv { "records" } else { "lines" },
            self.bytes_read,
            self.bytes_total,
            self.elapsed.as_secs_f64(),
            self.rows_per_second()
        );
        if self.bad_lines > 0 {
            s.push_str(&format!("bad lines: {}", self.bad_lines));
            if self.bad_lines > self.listed_bad_lines.len() as u64 {
                s.push_str(&format!(
                    " (the first {} listed)",
                    self.listed_bad_lines.len()
                ));
            }
            s.push('\n');
            for b in &self.listed_bad_lines {
                s.push_str(&format!("  line {}: {}\n", b.line, b.reason));
            }
        }
        let next = self.last_line + 1;
        match &self.stop {
            None => s.push_str("done: the whole file was read\n"),
            Some(ImportStop::BadLine(b)) if matches!(b.reason, BadLineKind::Refused(_)) => s
                .push_str(&format!(
                    "stopped at line {}, refused by the table (--skip-bad-lines=false): the \
                     other lines of its batch, up to line {}, are imported, none after them\n",
                    b.line, self.last_line
                )),
            Some(ImportStop::BadLine(b)) => s.push_str(&format!(
                "stopped at bad line {} (--skip-bad-lines=false): the lines before it are \
                 imported, none after it\n",
                b.line
            )),
            Some(ImportStop::Interrupted) => s.push_str(&format!(
                "interrupted by Ctrl-C after line {}: every line up to it is imported, none \
                 after it; resume from line {next}\n",
                self.last_line
            )),
            Some(ImportStop::Failed(e)) => s.push_str(&format!(
                "failed after line {}: {e}; every line up to it is imported, the batch from \
                 line {next} may be in part\n",
                self.last_line
            )),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(define: &[&str]) -> ImportArgs {
        ImportArgs {
            table: "t".into(),
            batch: 10,
            define: define.iter().map(|d| d.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_and_importtsv_settings() {
        let o = ImportOptions::from_args(&args(&["importtsv.columns=HBASE_ROW_KEY,f:a"])).unwrap();
        assert_eq!(
            (o.separator, o.skip_bad_lines, o.skip_empty_columns),
            (b'\t', true, false)
        );
        assert_eq!(o.timestamp, None);
        let o = ImportOptions::from_args(&args(&[
            "importtsv.columns=HBASE_ROW_KEY,f:a",
            "importtsv.separator=|",
            "importtsv.skip.bad.lines=false",
            "importtsv.skip.empty.columns=TRUE",
            "importtsv.timestamp=42",
        ]))
        .unwrap();
        assert_eq!(
            (
                o.separator,
                o.skip_bad_lines,
                o.skip_empty_columns,
                o.timestamp
            ),
            (b'|', false, true, Some(42))
        );
        let mut csv = args(&[]);
        csv.columns = Some("HBASE_ROW_KEY,f:a".into());
        csv.csv = true;
        csv.skip_bad_lines = Some(false);
        let o = ImportOptions::from_args(&csv).unwrap();
        assert_eq!((o.separator, o.skip_bad_lines), (b',', false));
        // The same setting twice with one value is fine; with two it is not.
        csv.define = vec!["importtsv.skip.bad.lines=no".into()];
        assert!(ImportOptions::from_args(&csv).is_ok());
        csv.define = vec!["importtsv.skip.bad.lines=yes".into()];
        let e = ImportOptions::from_args(&csv).unwrap_err().to_string();
        assert!(e.contains("given twice, as false and true"), "{e}");
        for bad in [
            "importtsv.skip.bad.lines=maybe",
            "importtsv.timestamp=-1",
            "no-equals-sign",
        ] {
            let mut a = csv.clone();
            a.define = vec![bad.into()];
            assert!(ImportOptions::from_args(&a).is_err(), "{bad}");
        }
        let mut zero = csv.clone();
        zero.define.clear();
        zero.batch = 0;
        assert!(ImportOptions::from_args(&zero).is_err());
    }

    #[test]
    fn exit_codes_follow_the_stop() {
        let mut s = ImportSummary {
            table: "t".into(),
            salt_buckets: None,
            csv: false,
            rows_imported: 5,
            records_read: 6,
            bad_lines: 1,
            listed_bad_lines: vec![BadLine {
                line: 6,
                reason: BadLineKind::NoDelimiter,
            }],
            last_line: 6,
            bytes_read: 60,
            bytes_total: 60,
            elapsed: Duration::from_secs(1),
            stop: None,
        };
        assert_eq!((s.exit_code(), s.rows_per_second()), (0, 5.0));
        assert!(s
            .render()
            .contains("bad lines: 1\n  line 6: No delimiter\n"));
        s.stop = Some(ImportStop::BadLine(s.listed_bad_lines[0].clone()));
        assert_eq!(s.exit_code(), 1);
        s.stop = Some(ImportStop::Interrupted);
        assert_eq!(s.exit_code(), 130);
        s.stop = Some(ImportStop::Failed(ToolError::Usage("x".into())));
        assert_eq!(s.exit_code(), 2);
        assert!(s.render().contains("failed after line 6: x"));
    }
}
