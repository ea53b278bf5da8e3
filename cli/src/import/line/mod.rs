//! Reading the import's input: lines of a TSV file ([`Lines`]), records of a CSV file
//! ([`CsvRecords`]), and turning one line's fields into a row ([`parse_fields`]) or a bad
//! line ([`BadLineKind`]) by ImportTsv's rules.
//!
//! ImportTsv's rules, kept here (`ImportTsv.TsvParser.parse` and `TsvImporterMapper.map`):
//! a line is split at every separator byte, with no quoting or escaping; a line without a
//! separator is bad ("No delimiter", so an empty line is bad too); more fields than the
//! specification has columns is bad ("Excessive columns"); fewer is fine as long as the
//! row key (and the timestamp, when the specification has one) is there, and the missing
//! trailing columns are simply not written; a timestamp that is not a non-negative decimal
//! `long` is bad; an empty row key, or one longer than 32,767 bytes, is bad. Every other
//! field becomes a cell, an empty one an empty value (unless empty columns are skipped,
//! ImportTsv's `importtsv.skip.empty.columns`). Lines end at `\n` or `\r\n` (and a `\r`
//! ending the file); bytes are taken as they are (no UTF-8 needed).
//!
//! Invariant: a line gives either a row with at least one cell or exactly one bad-line
//! reason; nothing in the input can make these functions panic.

use super::spec::{ColumnSpec, InputColumn};
use basalt_core::MAX_ROW_LENGTH;
use std::collections::VecDeque;
use std::io::{self, BufRead, Read};

/// Why a line is not imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadLineKind {
    /// The line has no separator (ImportTsv: "No delimiter").
    #[error("No delimiter")]
    NoDelimiter,
    /// More fields than the specification has columns.
    #[error("Excessive columns: {found} fields, the column specification has {expected}")]
    ExcessiveColumns {
        /// Fields on the line.
        found: usize,
        /// Columns of the specification.
        expected: usize,
    },
    /// Too few fields to reach the row key column.
    #[error("No row key: {found} fields, the row key is column {column}")]
    NoRowKey {
        /// Fields on the line.
        found: usize,
        /// The row key's column, from 1.
        column: usize,
    },
    /// Too few fields to reach the timestamp column.
    #[error("No timestamp: {found} fields, the timestamp is column {column}")]
    NoTimestamp {
        /// Fields on the line.
        found: usize,
        /// The timestamp's column, from 1.
        column: usize,
    },
    /// The timestamp field is not a non-negative decimal 64-bit integer.
    #[error("Invalid timestamp {0:?}")]
    InvalidTimestamp(String),
    /// The row key field is empty.
    #[error("Empty value for ROW KEY")]
    EmptyRowKey,
    /// The row key is longer than HBase and Basalt allow.
    #[error("Row key of {0} bytes is longer than 32767")]
    RowKeyTooLong(usize),
    /// Every cell field was empty and empty columns are skipped: nothing to write.
    #[error("No cell to write: every column is empty")]
    NoCells,
    /// The engine refused the row (a value too large, a coprocessor's veto, ...).
    #[error("Refused by the table: {0}")]
    Refused(String),
}

/// One line's row: its key, timestamp and cells (column index, value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRow<'a> {
    /// The row key.
    pub row: &'a [u8],
    /// The line's timestamp, when the specification has an `HBASE_TS_KEY` column.
    pub timestamp: Option<u64>,
    /// The cells: the index of the column in the specification and the value.
    pub cells: Vec<(usize, &'a [u8])>,
}

/// The fields of `line`, split at every `sep` byte (no quoting: ImportTsv has none).
pub fn split_fields(line: &[u8], sep: u8) -> Vec<&[u8]> {
    line.split(|&b| b == sep).collect()
}

/// A line's fields as a row, or why the line is bad (see the module doc for the rules).
pub fn parse_fields<'a>(
    spec: &ColumnSpec,
    fields: &[&'a [u8]],
    skip_empty: bool,
) -> Result<ParsedRow<'a>, BadLineKind> {
    let found = fields.len();
    if found < 2 {
        return Err(BadLineKind::NoDelimiter);
    }
    if found > spec.len() {
        return Err(BadLineKind::ExcessiveColumns {
            found,
            expected: spec.len(),
        });
    }
    let row = *fields.get(spec.row_key()).ok_or(BadLineKind::NoRowKey {
        found,
        column: spec.row_key() + 1,
    })?;
    let timestamp = match spec.timestamp() {
        None => None,
        Some(i) => {
            let field = *fields.get(i).ok_or(BadLineKind::NoTimestamp {
                found,
                column: i + 1,
            })?;
            let text = String::from_utf8_lossy(field);
            match text.parse::<i64>() {
                Ok(ts) if ts >= 0 => Some(ts.unsigned_abs()),
                _ => return Err(BadLineKind::InvalidTimestamp(text.into_owned())),
            }
        }
    };
    if row.is_empty() {
        return Err(BadLineKind::EmptyRowKey);
    }
    if row.len() > MAX_ROW_LENGTH {
        return Err(BadLineKind::RowKeyTooLong(row.len()));
    }
    let cells: Vec<(usize, &[u8])> = fields
        .iter()
        .enumerate()
        .filter(|(i, v)| {
            matches!(spec.columns().get(*i), Some(InputColumn::Cell { .. }))
                && !(skip_empty && v.is_empty())
        })
        .map(|(i, v)| (i, *v))
        .collect();
    if cells.is_empty() {
        return Err(BadLineKind::NoCells);
    }
    Ok(ParsedRow {
        row,
        timestamp,
        cells,
    })
}

/// The lines of a TSV input, numbered from 1, without their line ends.
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    line: u64,
    bytes: u64,
}

impl<R: BufRead> Lines<R> {
    /// Lines read from `reader`.
    pub fn new(reader: R) -> Self {
        Lines {
            reader,
            buf: Vec::new(),
            line: 0,
            bytes: 0,
        }
    }

    /// Bytes consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// The next line and its number; `None` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        self.buf.clear();
        let n = self.reader.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.bytes += n as u64;
        self.line += 1;
        let mut end = self.buf.len();
        if self.buf.ends_with(b"\n") {
            end -= 1;
        }
        if self.buf[..end].ends_with(b"\r") {
            end -= 1;
        }
        Ok(Some((self.line, &self.buf[..end])))
    }
}

/// One CSV record: its fields and the lines it spans (a quoted field may hold line ends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// The line it starts on, from 1.
    pub first_line: u64,
    /// The line it ends on.
    pub last_line: u64,
    /// Its fields.
    pub fields: Vec<&'a [u8]>,
}

/// A reader that notes where the line ends (`\n`) it hands out lie, so that a CSV record's
/// line numbers can be told from its byte position (the CSV reader's own line count skips
/// blank lines and counts `\r\n` by halves).
struct LineCounter<R> {
    inner: R,
    /// Bytes handed out so far.
    offset: u64,
    /// Offsets of the line ends handed out and not yet passed by [`LineCounter::lines_before`].
    ahead: VecDeque<u64>,
    /// Line ends passed.
    passed: u64,
    /// The offset of the last line end passed.
    last_passed: Option<u64>,
}

impl<R: Read> Read for LineCounter<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for (i, b) in buf.iter().take(n).enumerate() {
            if *b == b'\n' {
                self.ahead.push_back(self.offset + i as u64);
            }
        }
        self.offset += n as u64;
        Ok(n)
    }
}

impl<R> LineCounter<R> {
    /// The line ends before byte `end`, and whether the byte just before it is one. Calls
    /// come with growing `end`s.
    fn lines_before(&mut self, end: u64) -> (u64, bool) {
        while let Some(&at) = self.ahead.front() {
            if at >= end {
                break;
            }
            self.ahead.pop_front();
            self.passed += 1;
            self.last_passed = Some(at);
        }
        (self.passed, end > 0 && self.last_passed == Some(end - 1))
    }
}

/// The records of a CSV input (RFC 4180: fields in double quotes may hold separators,
/// doubled quotes and line ends; blank lines are skipped), as byte fields.
pub struct CsvRecords<R> {
    reader: csv::Reader<LineCounter<R>>,
    record: csv::ByteRecord,
}

impl<R: Read> CsvRecords<R> {
    /// Records read from `reader`, fields separated by `sep`.
    pub fn new(reader: R, sep: u8) -> Self {
        let counter = LineCounter {
            inner: reader,
            offset: 0,
            ahead: VecDeque::new(),
            passed: 0,
            last_passed: None,
        };
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(sep)
            .from_reader(counter);
        CsvRecords {
            reader,
            record: csv::ByteRecord::new(),
        }
    }

    /// Bytes consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.reader.position().byte()
    }

    /// The next record; `None` at the end.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, csv::Error> {
        if !self.reader.read_byte_record(&mut self.record)? {
            return Ok(None);
        }
        // The record ends where the reader stands: after its `\n` (then that line end is
        // its last line's), or after a `\r` or at the end of the input (then not).
        let end = self.reader.position().byte();
        let (ends, after_line_end) = self.reader.get_mut().lines_before(end);
        let last = if after_line_end { ends } else { ends + 1 };
        let fields: Vec<&[u8]> = self.record.iter().collect();
        let inner_line_ends = fields
            .iter()
            .map(|f| f.iter().filter(|&&b| b == b'\n').count() as u64)
            .sum::<u64>();
        Ok(Some(Record {
            first_line: last.saturating_sub(inner_line_ends),
            last_line: last,
            fields,
        }))
    }
}

#[cfg(test)]
mod tests;
