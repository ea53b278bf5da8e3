//! The import's loop: checks the table, then reads records, parses them into puts, writes
//! them in batches and keeps the summary's counts (see the parent module for the rules).

use super::line::{parse_fields, split_fields, CsvRecords, Lines, ParsedRow};
use super::spec::InputColumn;
use super::{
    BadLine, BadLineKind, ImportArgs, ImportOptions, ImportStop, ImportSummary, LISTED_BAD_LINES,
};
use crate::datadir::DataDir;
use crate::error::{require_data_dir, ToolError};
use crate::progress::{bytes_bar, Interrupt};
use basalt_core::client::{BatchOp, Put};
use basalt_core::{Error, SaltedTable, Table, TableName};
use indicatif::ProgressBar;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::time::Instant;

/// Where the rows go: the table, or its salted view (logical row keys).
enum Writer {
    Plain(Table),
    Salted(SaltedTable),
}

impl Writer {
    async fn batch(&self, ops: Vec<BatchOp>) -> basalt_core::Result<Vec<basalt_core::Result<()>>> {
        let out = match self {
            Writer::Plain(t) => t.batch(ops).await?,
            Writer::Salted(t) => t.batch(ops).await?,
        };
        Ok(out.into_iter().map(|r| r.map(|_| ())).collect())
    }
}

/// True for an engine error about the row itself (the line is bad), false for one about the
/// table or the engine (the import cannot go on).
fn refuses_the_row(e: &Error) -> bool {
    matches!(
        e,
        Error::InvalidRow(_)
            | Error::ValueTooLarge { .. }
            | Error::FamilyNotFound { .. }
            | Error::UniqueViolation { .. }
            | Error::Coprocessor { .. }
            | Error::InvalidAddedMutation { .. }
    )
}

/// Checks the table against the options and picks the writer.
async fn writer_for(data: &DataDir, opts: &ImportOptions) -> Result<Writer, ToolError> {
    let name = TableName::parse(&opts.table)?;
    let admin = data.conn.admin();
    let desc = admin.describe_table(name.clone()).await?;
    let missing = data.missing_coprocessors(&name).await?;
    if !missing.is_empty() {
        return Err(Error::ReadOnlyTable {
            table: name.to_string(),
            missing,
        }
        .into());
    }
    let have: Vec<&[u8]> = desc.families.iter().map(|f| f.name.as_ref()).collect();
    let absent: Vec<String> = opts
        .columns
        .families()
        .into_iter()
        .filter(|f| !have.contains(&f.as_slice()))
        .map(|f| String::from_utf8_lossy(&f).into_owned())
        .collect();
    if !absent.is_empty() {
        let names: Vec<String> = have
            .iter()
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        return Err(ToolError::Usage(format!(
            "column families {absent:?} do not exist in table {name} (its families: {names:?})"
        )));
    }
    match (&desc.salt, opts.salt_buckets) {
        (Some(s), Some(n)) if s.buckets != n => Err(ToolError::Usage(format!(
            "table {name} is salted into {} buckets, not {n}",
            s.buckets
        ))),
        (None, Some(n)) => Err(ToolError::Usage(format!(
            "table {name} is not salted, yet --salt-buckets {n} was given: create it salted \
             first, or leave the flag out to import into it unsalted"
        ))),
        (Some(_), _) => Ok(Writer::Salted(data.conn.salted_table(name)?)),
        (None, None) => Ok(Writer::Plain(data.conn.table(name)?)),
    }
}

/// The input, as TSV lines or CSV records.
enum Source {
    Tsv(Lines<BufReader<File>>),
    Csv(CsvRecords<BufReader<File>>),
}

impl Source {
    fn bytes_read(&self) -> u64 {
        match self {
            Source::Tsv(l) => l.bytes_read(),
            Source::Csv(c) => c.bytes_read(),
        }
    }
}

/// The put of one parsed line.
fn put_of(opts: &ImportOptions, row: &ParsedRow<'_>, default_ts: u64) -> Put {
    let ts = row.timestamp.unwrap_or(default_ts);
    let mut put = Put::new(row.row);
    for (i, value) in &row.cells {
        if let Some(InputColumn::Cell { family, qualifier }) = opts.columns.columns().get(*i) {
            put = put.add_column_ts(family, qualifier, ts, value);
        }
    }
    put
}

/// The state of one run.
struct Progress {
    summary: ImportSummary,
    bar: ProgressBar,
}

impl Progress {
    fn bad(&mut self, line: u64, reason: BadLineKind) {
        self.summary.bad_lines += 1;
        if self.summary.listed_bad_lines.len() < LISTED_BAD_LINES {
            self.summary.listed_bad_lines.push(BadLine { line, reason });
        }
    }
}

/// Writes `pending` (puts with their first and last lines); false when the import must
/// stop (the stop is recorded in the summary).
async fn flush(
    writer: &Writer,
    pending: &mut Vec<(u64, u64, Put)>,
    opts: &ImportOptions,
    p: &mut Progress,
) -> bool {
    if pending.is_empty() {
        return true;
    }
    let lines: Vec<(u64, u64)> = pending.iter().map(|(a, b, _)| (*a, *b)).collect();
    let ops = pending
        .drain(..)
        .map(|(_, _, put)| BatchOp::Put(put))
        .collect();
    let results = match writer.batch(ops).await {
        Ok(r) => r,
        Err(e) => {
            p.summary.stop = Some(ImportStop::Failed(e.into()));
            return false;
        }
    };
    let mut first_refused = None;
    for ((first, _), r) in lines.iter().zip(results) {
        match r {
            Ok(()) => p.summary.rows_imported += 1,
            Err(e) if refuses_the_row(&e) => {
                let reason = BadLineKind::Refused(e.to_string());
                first_refused.get_or_insert(BadLine {
                    line: *first,
                    reason: reason.clone(),
                });
                p.bad(*first, reason);
            }
            Err(e) => {
                p.summary.stop = Some(ImportStop::Failed(e.into()));
                return false;
            }
        }
    }
    p.bar
        .set_prefix(format!("{} rows", p.summary.rows_imported));
    match first_refused {
        Some(b) if !opts.skip_bad_lines => {
            p.summary.stop = Some(ImportStop::BadLine(b));
            false
        }
        _ => true,
    }
}

/// Imports `opts.file` into the open directory `data` (see the parent module), drawing
/// progress on `bar` and stopping between batches once `interrupt` is raised. Fails before
/// anything is written (no table, a missing family, a read-only table, an unreadable
/// file); once writing, a failure ends the run with [`ImportStop::Failed`] in the summary.
pub async fn import_file(
    data: &DataDir,
    opts: &ImportOptions,
    interrupt: &Interrupt,
    bar: ProgressBar,
) -> Result<ImportSummary, ToolError> {
    let writer = writer_for(data, opts).await?;
    let file = File::open(&opts.file).map_err(|e| ToolError::io("read", &opts.file, e))?;
    let bytes_total = file
        .metadata()
        .map_err(|e| ToolError::io("read", &opts.file, e))?
        .len();
    bar.set_length(bytes_total);
    let reader = BufReader::with_capacity(256 * 1024, file);
    let mut source = if opts.csv {
        Source::Csv(CsvRecords::new(reader, opts.separator))
    } else {
        Source::Tsv(Lines::new(reader))
    };
    let started = Instant::now();
    let default_ts = opts.timestamp.unwrap_or_else(basalt_core::now_ms);
    let salt_buckets = match &writer {
        Writer::Salted(t) => Some(t.spec().buckets),
        Writer::Plain(_) => None,
    };
    let mut p = Progress {
        summary: ImportSummary {
            table: opts.table.clone(),
            salt_buckets,
            csv: opts.csv,
            rows_imported: 0,
            records_read: 0,
            bad_lines: 0,
            listed_bad_lines: Vec::new(),
            last_line: 0,
            bytes_read: 0,
            bytes_total,
            elapsed: Default::default(),
            stop: None,
        },
        bar,
    };
    let mut pending: Vec<(u64, u64, Put)> = Vec::with_capacity(opts.batch);
    // The last line of the last record read: once the pending puts are written, every
    // line up to it is dealt with.
    let mut read_line = 0;
    loop {
        // One record: its lines and either a put or why it is bad.
        let (first, last, parsed) = match &mut source {
            Source::Tsv(lines) => match lines.next_line() {
                Ok(None) => break,
                Ok(Some((n, line))) => {
                    let fields = split_fields(line, opts.separator);
                    let parsed = parse_fields(&opts.columns, &fields, opts.skip_empty_columns)
                        .map(|row| put_of(opts, &row, default_ts));
                    (n, n, parsed)
                }
                Err(e) => {
                    p.summary.stop = Some(ImportStop::Failed(ToolError::io("read", &opts.file, e)));
                    break;
                }
            },
            Source::Csv(records) => match records.next_record() {
                Ok(None) => break,
                Ok(Some(r)) => {
                    let parsed = parse_fields(&opts.columns, &r.fields, opts.skip_empty_columns)
                        .map(|row| put_of(opts, &row, default_ts));
                    (r.first_line, r.last_line, parsed)
                }
                Err(e) => {
                    let io = std::io::Error::other(e.to_string());
                    p.summary.stop =
                        Some(ImportStop::Failed(ToolError::io("read", &opts.file, io)));
                    break;
                }
            },
        };
        p.summary.records_read += 1;
        read_line = last;
        match parsed {
            Ok(put) => pending.push((first, last, put)),
            Err(reason) => {
                p.bad(first, reason.clone());
                if !opts.skip_bad_lines {
                    if flush(&writer, &mut pending, opts, &mut p).await {
                        p.summary.last_line = last;
                        p.summary.stop = Some(ImportStop::BadLine(BadLine {
                            line: first,
                            reason,
                        }));
                    }
                    break;
                }
                if pending.is_empty() {
                    p.summary.last_line = last;
                }
            }
        }
        if pending.len() >= opts.batch {
            p.summary.bytes_read = source.bytes_read();
            let go_on = flush(&writer, &mut pending, opts, &mut p).await;
            if !matches!(p.summary.stop, Some(ImportStop::Failed(_))) {
                p.summary.last_line = read_line;
            }
            p.bar.set_position(p.summary.bytes_read);
            if !go_on {
                break;
            }
            if interrupt.is_raised() {
                p.summary.stop = Some(ImportStop::Interrupted);
                break;
            }
        }
    }
    if p.summary.stop.is_none() && flush(&writer, &mut pending, opts, &mut p).await {
        p.summary.last_line = read_line;
    }
    p.summary.bytes_read = source.bytes_read();
    p.bar.set_position(p.summary.bytes_read);
    p.bar.finish_and_clear();
    p.summary.elapsed = started.elapsed();
    Ok(p.summary)
}

/// `basalt import`: checks the arguments, opens the existing directory `args.dir`, runs the
/// import with a progress bar on standard error and Ctrl-C handling, prints the summary to
/// `out`, and closes the directory.
pub async fn run_import(
    args: &ImportArgs,
    out: &mut dyn std::io::Write,
) -> Result<ImportSummary, ToolError> {
    let opts = ImportOptions::from_args(args)?;
    require_data_dir(&args.dir)?;
    let data = DataDir::open(&args.dir).await?;
    let interrupt = Interrupt::on_ctrl_c("the import stops after the batch being written");
    let bar = bytes_bar(0, &format!("importing into {}", opts.table));
    let result = import_file(&data, &opts, &interrupt, bar).await;
    let closed = data.close().await;
    let summary = result?;
    closed?;
    out.write_all(summary.render().as_bytes())
        .map_err(|e| ToolError::io("write", Path::new("standard output"), e))?;
    Ok(summary)
}
