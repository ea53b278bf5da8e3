//! The import's column specification, in HBase ImportTsv's syntax
//! (`-Dimporttsv.columns=HBASE_ROW_KEY,cf:a,cf:b`), and its field separator.
//!
//! ImportTsv's rules, kept here: entries are separated by commas and trimmed;
//! `HBASE_ROW_KEY` names the row key column and must appear exactly once; `HBASE_TS_KEY`
//! names a column holding each row's timestamp (milliseconds) and may appear at most once;
//! every other entry is `family:qualifier` (split at the first colon) or `family` alone (the
//! empty qualifier), and at least one such entry is required. Basalt refuses ImportTsv's
//! `HBASE_ATTRIBUTES_KEY`, `HBASE_CELL_VISIBILITY` and `HBASE_CELL_TTL` (it has no operation
//! attributes or visibility labels) with a clear error, and an empty entry or family (HBase
//! would fail later, on the family check).

use crate::error::ColumnSpecError;
use std::collections::BTreeSet;

/// ImportTsv's name of the row key column.
pub const ROW_KEY: &str = "HBASE_ROW_KEY";
/// ImportTsv's name of the timestamp column.
pub const TS_KEY: &str = "HBASE_TS_KEY";
/// ImportTsv's special columns Basalt does not support.
const UNSUPPORTED: [&str; 3] = [
    "HBASE_ATTRIBUTES_KEY",
    "HBASE_CELL_VISIBILITY",
    "HBASE_CELL_TTL",
];

/// What one column of the input holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputColumn {
    /// The row key (`HBASE_ROW_KEY`).
    RowKey,
    /// The cell timestamp in milliseconds (`HBASE_TS_KEY`).
    Timestamp,
    /// A cell's value for `family:qualifier`.
    Cell {
        /// The column family.
        family: Vec<u8>,
        /// The qualifier (empty for an entry naming only the family).
        qualifier: Vec<u8>,
    },
}

/// A parsed column specification: what each input column holds, in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    columns: Vec<InputColumn>,
    row_key: usize,
    timestamp: Option<usize>,
}

impl ColumnSpec {
    /// Parses `spec` by ImportTsv's rules (see the module doc).
    pub fn parse(spec: &str) -> Result<ColumnSpec, ColumnSpecError> {
        let mut columns = Vec::new();
        for (i, raw) in spec.split(',').enumerate() {
            let entry = raw.trim();
            let position = i + 1;
            let column = match entry {
                "" => return Err(ColumnSpecError::EmptyEntry { position }),
                ROW_KEY => InputColumn::RowKey,
                TS_KEY => InputColumn::Timestamp,
                e if UNSUPPORTED.contains(&e) => {
                    return Err(ColumnSpecError::Unsupported(e.to_string()))
                }
                e => {
                    let (family, qualifier) = e.split_once(':').unwrap_or((e, ""));
                    if family.is_empty() {
                        return Err(ColumnSpecError::EmptyFamily {
                            position,
                            entry: e.to_string(),
                        });
                    }
                    InputColumn::Cell {
                        family: family.as_bytes().to_vec(),
                        qualifier: qualifier.as_bytes().to_vec(),
                    }
                }
            };
            columns.push(column);
        }
        let positions = |want: &InputColumn| -> Vec<usize> {
            columns
                .iter()
                .enumerate()
                .filter(|(_, c)| *c == want)
                .map(|(i, _)| i)
                .collect()
        };
        let keys = positions(&InputColumn::RowKey);
        let [row_key] = keys[..] else {
            return Err(ColumnSpecError::RowKeyCount { found: keys.len() });
        };
        let stamps = positions(&InputColumn::Timestamp);
        if stamps.len() > 1 {
            return Err(ColumnSpecError::TimestampCount {
                found: stamps.len(),
            });
        }
        if !columns
            .iter()
            .any(|c| matches!(c, InputColumn::Cell { .. }))
        {
            return Err(ColumnSpecError::NoCellColumn);
        }
        Ok(ColumnSpec {
            columns,
            row_key,
            timestamp: stamps.first().copied(),
        })
    }

    /// The columns in input order.
    pub fn columns(&self) -> &[InputColumn] {
        &self.columns
    }

    /// How many columns a line may have at most.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Never true: a specification has at least the row key and one cell column.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The index of the row key column.
    pub fn row_key(&self) -> usize {
        self.row_key
    }

    /// The index of the timestamp column, if any.
    pub fn timestamp(&self) -> Option<usize> {
        self.timestamp
    }

    /// The column families the cell columns name.
    pub fn families(&self) -> BTreeSet<Vec<u8>> {
        self.columns
            .iter()
            .filter_map(|c| match c {
                InputColumn::Cell { family, .. } => Some(family.clone()),
                _ => None,
            })
            .collect()
    }
}

/// A separator as typed: one byte, or the escapes `\t`, `\\` and `\xNN` (so `'\t'` works
/// unquoted by the shell's `$'...'`). ImportTsv only supports single-byte separators.
pub fn parse_separator(text: &str) -> Result<u8, String> {
    let bytes = text.as_bytes();
    let sep = match bytes {
        [b] => Some(*b),
        [b'\\', b't'] => Some(b'\t'),
        [b'\\', b'\\'] => Some(b'\\'),
        [b'\\', b'x', h, l] => std::str::from_utf8(&[*h, *l])
            .ok()
            .and_then(|s| u8::from_str_radix(s, 16).ok()),
        _ => None,
    };
    match sep {
        Some(b'\n') | Some(b'\r') => {
            Err(format!("separator {text:?} ends lines; pick another one"))
        }
        Some(b) => Ok(b),
        None => Err(format!(
            "separator {text:?} is not one byte (ImportTsv only supports single-byte \
             separators; escapes: \\t, \\\\, \\xNN)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cell(f: &str, q: &str) -> InputColumn {
        InputColumn::Cell {
            family: f.as_bytes().to_vec(),
            qualifier: q.as_bytes().to_vec(),
        }
    }

    #[test]
    fn importtsv_examples() {
        let s = ColumnSpec::parse("HBASE_ROW_KEY, cf:a ,cf:b,HBASE_TS_KEY,d,e:x:y").unwrap();
        assert_eq!(
            s.columns(),
            &[
                InputColumn::RowKey,
                cell("cf", "a"),
                cell("cf", "b"),
                InputColumn::Timestamp,
                cell("d", ""),
                cell("e", "x:y"),
            ]
        );
        assert_eq!((s.row_key(), s.timestamp(), s.len()), (0, Some(3), 6));
        assert_eq!(s.families().len(), 3);
        let err = |spec: &str| ColumnSpec::parse(spec).unwrap_err();
        assert_eq!(err("cf:a,cf:b"), ColumnSpecError::RowKeyCount { found: 0 });
        assert_eq!(
            err("HBASE_ROW_KEY,cf:a,HBASE_ROW_KEY"),
            ColumnSpecError::RowKeyCount { found: 2 }
        );
        assert_eq!(
            err("HBASE_ROW_KEY,HBASE_TS_KEY,cf:a,HBASE_TS_KEY"),
            ColumnSpecError::TimestampCount { found: 2 }
        );
        assert_eq!(
            err("HBASE_ROW_KEY,HBASE_TS_KEY"),
            ColumnSpecError::NoCellColumn
        );
        assert_eq!(
            err("HBASE_ROW_KEY,,cf:a"),
            ColumnSpecError::EmptyEntry { position: 2 }
        );
        assert!(matches!(
            err("HBASE_ROW_KEY,:q"),
            ColumnSpecError::EmptyFamily { .. }
        ));
        assert!(err("HBASE_ROW_KEY,cf:a,HBASE_CELL_TTL")
            .to_string()
            .contains("HBASE_CELL_TTL is not supported"));
    }

    #[test]
    fn separators() {
        assert_eq!(parse_separator("\\t"), Ok(b'\t'));
        assert_eq!(parse_separator("\t"), Ok(b'\t'));
        assert_eq!(parse_separator(","), Ok(b','));
        assert_eq!(parse_separator("\\x1f"), Ok(0x1f));
        assert_eq!(parse_separator("\\\\"), Ok(b'\\'));
        assert!(parse_separator("ab").is_err());
        assert!(parse_separator("").is_err());
        assert!(parse_separator("\\n").is_err());
        assert!(parse_separator("\n").is_err());
        assert!(parse_separator("é").is_err(), "two bytes in UTF-8");
    }

    /// One entry of a generated specification, and what the model expects of it.
    #[derive(Debug, Clone)]
    enum Entry {
        Key,
        Ts,
        Cell(String, Option<String>),
    }

    fn entry() -> impl Strategy<Value = Entry> {
        prop_oneof![
            1 => Just(Entry::Key),
            1 => Just(Entry::Ts),
            4 => ("[a-z]{1,4}", proptest::option::of("[a-z0-9:]{0,4}"))
                .prop_map(|(f, q)| Entry::Cell(f, q)),
        ]
    }

    proptest! {
        /// Separators against a model: a one-character ASCII string or `\xNN` is that byte
        /// (line ends refused), anything longer that is not an escape is refused.
        #[test]
        fn separators_match_the_model(b in any::<u8>(), text in "[a-z\\\\,;|]{2,4}") {
            let want = if b == b'\n' || b == b'\r' { None } else { Some(b) };
            prop_assert_eq!(parse_separator(&format!("\\x{b:02x}")).ok(), want);
            prop_assert_eq!(parse_separator(&format!("\\x{b:02X}")).ok(), want);
            if b.is_ascii() {
                prop_assert_eq!(parse_separator(&char::from(b).to_string()).ok(), want);
            }
            let escape = match text.as_str() {
                "\\t" => Some(b'\t'),
                "\\\\" => Some(b'\\'),
                t => t
                    .strip_prefix("\\x")
                    .filter(|h| h.len() == 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok()),
            };
            prop_assert_eq!(parse_separator(&text).ok(), escape);
        }

        /// The parser against a model of ImportTsv's rules, over specifications written with
        /// random spaces around the entries.
        #[test]
        fn parser_matches_the_model(
            entries in proptest::collection::vec(entry(), 0..7),
            pads in proptest::collection::vec((0usize..2, 0usize..2), 7),
        ) {
            let text: Vec<String> = entries
                .iter()
                .zip(&pads)
                .map(|(e, (l, r))| {
                    let body = match e {
                        Entry::Key => ROW_KEY.to_string(),
                        Entry::Ts => TS_KEY.to_string(),
                        Entry::Cell(f, None) => f.clone(),
                        Entry::Cell(f, Some(q)) => format!("{f}:{q}"),
                    };
                    format!("{}{body}{}", " ".repeat(*l), " ".repeat(*r))
                })
                .collect();
            let got = ColumnSpec::parse(&text.join(","));
            let keys = entries.iter().filter(|e| matches!(e, Entry::Key)).count();
            let stamps = entries.iter().filter(|e| matches!(e, Entry::Ts)).count();
            let cells = entries.len() - keys - stamps;
            if entries.is_empty() {
                prop_assert_eq!(got, Err(ColumnSpecError::EmptyEntry { position: 1 }));
            } else if keys != 1 {
                prop_assert_eq!(got, Err(ColumnSpecError::RowKeyCount { found: keys }));
            } else if stamps > 1 {
                prop_assert_eq!(got, Err(ColumnSpecError::TimestampCount { found: stamps }));
            } else if cells == 0 {
                prop_assert_eq!(got, Err(ColumnSpecError::NoCellColumn));
            } else {
                let spec = got.unwrap();
                prop_assert_eq!(spec.len(), entries.len());
                for (e, c) in entries.iter().zip(spec.columns()) {
                    let want = match e {
                        Entry::Key => InputColumn::RowKey,
                        Entry::Ts => InputColumn::Timestamp,
                        Entry::Cell(f, None) => cell(f, ""),
                        Entry::Cell(f, Some(q)) => cell(f, q),
                    };
                    prop_assert_eq!(c, &want);
                }
                prop_assert!(matches!(spec.columns()[spec.row_key()], InputColumn::RowKey));
                prop_assert_eq!(spec.timestamp().is_some(), stamps == 1);
            }
        }
    }
}
