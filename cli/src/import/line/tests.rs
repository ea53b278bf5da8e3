//! The line reader, the CSV reader and the field parser, each against a simple model.

use super::*;
use proptest::prelude::*;

fn spec(text: &str) -> ColumnSpec {
    ColumnSpec::parse(text).unwrap()
}

fn parse<'a>(s: &ColumnSpec, line: &'a [u8]) -> Result<ParsedRow<'a>, BadLineKind> {
    parse_fields(s, &split_fields(line, b'\t'), false)
}

#[test]
fn importtsv_bad_lines() {
    let s = spec("HBASE_ROW_KEY,f:a,HBASE_TS_KEY,f:b");
    assert_eq!(parse(&s, b""), Err(BadLineKind::NoDelimiter));
    assert_eq!(parse(&s, b"k"), Err(BadLineKind::NoDelimiter));
    assert_eq!(
        parse(&s, b"k\ta\t1\tb\tc"),
        Err(BadLineKind::ExcessiveColumns {
            found: 5,
            expected: 4
        })
    );
    assert_eq!(
        parse(&s, b"k\ta"),
        Err(BadLineKind::NoTimestamp {
            found: 2,
            column: 3
        })
    );
    assert_eq!(
        parse(&s, b"k\ta\tsoon\tb"),
        Err(BadLineKind::InvalidTimestamp("soon".into()))
    );
    assert_eq!(
        parse(&s, b"k\ta\t-5\tb"),
        Err(BadLineKind::InvalidTimestamp("-5".into()))
    );
    assert_eq!(parse(&s, b"\ta\t5\tb"), Err(BadLineKind::EmptyRowKey));
    let long = [b'k'; MAX_ROW_LENGTH + 1];
    let line = [&long[..], b"\ta\t5\tb"].concat();
    assert_eq!(
        parse(&s, &line),
        Err(BadLineKind::RowKeyTooLong(MAX_ROW_LENGTH + 1))
    );
    let late_key = spec("f:a,f:b,HBASE_ROW_KEY");
    assert_eq!(
        parse(&late_key, b"a\tb"),
        Err(BadLineKind::NoRowKey {
            found: 2,
            column: 3
        })
    );
}

#[test]
fn good_lines_fewer_columns_and_empty_values() {
    let s = spec("HBASE_ROW_KEY,f:a,HBASE_TS_KEY,f:b");
    let row = parse(&s, b"k\t\t7").unwrap();
    assert_eq!(row.row, b"k");
    assert_eq!(row.timestamp, Some(7));
    assert_eq!(
        row.cells,
        vec![(1, &b""[..])],
        "f:b is missing: not written"
    );
    let skipped = parse_fields(&s, &split_fields(b"k\t\t7\tx", b'\t'), true).unwrap();
    assert_eq!(skipped.cells, vec![(3, &b"x"[..])]);
    assert_eq!(
        parse_fields(&s, &split_fields(b"k\t\t7\t", b'\t'), true),
        Err(BadLineKind::NoCells)
    );
    assert_eq!(parse(&s, b"k\t\xff\t+9").unwrap().timestamp, Some(9));
}

#[test]
fn csv_quotes_separators_and_newlines() {
    let text = "k1,\"a,b\",\"x\"\"y\"\n\nk2,\"multi\nline\",z\r\nk3,plain,\n";
    let mut r = CsvRecords::new(text.as_bytes(), b',');
    let r1 = r.next_record().unwrap().unwrap();
    assert_eq!((r1.first_line, r1.last_line), (1, 1));
    assert_eq!(r1.fields, vec![&b"k1"[..], b"a,b", b"x\"y"]);
    let r2 = r.next_record().unwrap().unwrap();
    assert_eq!(
        (r2.first_line, r2.last_line),
        (3, 4),
        "the blank line 2 is skipped"
    );
    assert_eq!(r2.fields, vec![&b"k2"[..], b"multi\nline", b"z"]);
    let r3 = r.next_record().unwrap().unwrap();
    assert_eq!(r3.first_line, 5);
    assert_eq!(r3.fields, vec![&b"k3"[..], b"plain", b""]);
    assert!(r.next_record().unwrap().is_none());
    assert_eq!(r.bytes_read(), text.len() as u64);
}

/// The model of the line reader: split at `\n`, no empty last line after a final `\n`,
/// one `\r` before each line end (or at the end of the text) dropped.
fn model_lines(text: &[u8]) -> Vec<Vec<u8>> {
    let mut pieces: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if text.ends_with(b"\n") || text.is_empty() {
        pieces.pop();
    }
    pieces
        .into_iter()
        .map(|p| p.strip_suffix(b"\r").unwrap_or(p).to_vec())
        .collect()
}

/// The model of a timestamp field: an optional sign and decimal digits, a value in
/// 0..=i64::MAX (`-0` is 0, as Java's `Long.parseLong` reads it).
fn model_timestamp(field: &[u8]) -> Option<u64> {
    let (neg, digits) = match field.first() {
        Some(b'+') => (false, &field[1..]),
        Some(b'-') => (true, &field[1..]),
        _ => (false, field),
    };
    if digits.is_empty() || digits.len() > 30 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0u128, |v, d| v * 10 + u128::from(d - b'0'));
    match (neg, v) {
        (true, 0) => Some(0),
        (true, _) => None,
        (false, v) if v <= i64::MAX as u128 => u64::try_from(v).ok(),
        _ => None,
    }
}

fn field() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'\xfe'), Just(b' ')], 0..4),
        1 => "[+-]?[0-9]{0,20}".prop_map(String::into_bytes),
        1 => Just(Vec::new()),
    ]
}

/// Specifications: a row key, maybe a timestamp, and 1 to 4 cells, in any order.
fn column_spec() -> impl Strategy<Value = ColumnSpec> {
    (1usize..5, any::<bool>(), any::<u64>()).prop_map(|(cells, ts, shuffle)| {
        let mut entries: Vec<String> = (0..cells).map(|i| format!("f:c{i}")).collect();
        entries.push("HBASE_ROW_KEY".into());
        if ts {
            entries.push("HBASE_TS_KEY".into());
        }
        let n = entries.len();
        entries.rotate_left((shuffle as usize) % n);
        entries.swap(0, (shuffle as usize / 7) % n);
        ColumnSpec::parse(&entries.join(",")).unwrap()
    })
}

proptest! {
    #[test]
    fn lines_match_the_model(
        text in proptest::collection::vec(
            prop_oneof![Just(b'a'), Just(b'\t'), Just(b'\r'), Just(b'\n')], 0..40),
        capacity in 1usize..8,
    ) {
        let mut lines = Lines::new(std::io::BufReader::with_capacity(capacity, &text[..]));
        let mut got = Vec::new();
        while let Some((n, line)) = lines.next_line().unwrap() {
            prop_assert_eq!(n, got.len() as u64 + 1);
            got.push(line.to_vec());
        }
        prop_assert_eq!(got, model_lines(&text));
        prop_assert_eq!(lines.bytes_read(), text.len() as u64);
    }

    #[test]
    fn fields_match_the_model(
        s in column_spec(),
        fields in proptest::collection::vec(field(), 1..7),
        skip_empty in any::<bool>(),
    ) {
        let line = fields.join(&b'\t');
        let split = split_fields(&line, b'\t');
        prop_assert_eq!(&split, &fields.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let got = parse_fields(&s, &split, skip_empty);
        let n = fields.len();
        let want = if n == 1 {
            Err(BadLineKind::NoDelimiter)
        } else if n > s.len() {
            Err(BadLineKind::ExcessiveColumns { found: n, expected: s.len() })
        } else if n <= s.row_key() {
            Err(BadLineKind::NoRowKey { found: n, column: s.row_key() + 1 })
        } else if s.timestamp().is_some_and(|t| n <= t) {
            Err(BadLineKind::NoTimestamp { found: n, column: s.timestamp().unwrap_or(0) + 1 })
        } else {
            let ts = s.timestamp().map(|t| (model_timestamp(&fields[t]), &fields[t]));
            let key = &fields[s.row_key()];
            let cells: Vec<(usize, &[u8])> = (0..n)
                .filter(|&i| i != s.row_key() && Some(i) != s.timestamp())
                .filter(|&i| !(skip_empty && fields[i].is_empty()))
                .map(|i| (i, fields[i].as_slice()))
                .collect();
            match ts {
                Some((None, raw)) => Err(BadLineKind::InvalidTimestamp(
                    String::from_utf8_lossy(raw).into_owned(),
                )),
                _ if key.is_empty() => Err(BadLineKind::EmptyRowKey),
                _ if cells.is_empty() => Err(BadLineKind::NoCells),
                _ => Ok(ParsedRow {
                    row: key.as_slice(),
                    timestamp: ts.and_then(|(t, _)| t),
                    cells,
                }),
            }
        };
        prop_assert_eq!(got, want);
    }

    /// CSV records written with every field quoted (quotes doubled) read back as written,
    /// with the line each starts on.
    #[test]
    fn csv_matches_the_model(
        records in proptest::collection::vec(
            proptest::collection::vec(
                proptest::collection::vec(
                    prop_oneof![Just(b'a'), Just(b','), Just(b'"'), Just(b'\n'), Just(b' ')],
                    0..5),
                1..4),
            0..6),
        crlf in any::<bool>(),
    ) {
        let end: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        let mut text = Vec::new();
        for r in &records {
            let quoted: Vec<Vec<u8>> = r
                .iter()
                .map(|f| {
                    let mut q = vec![b'"'];
                    for &b in f {
                        q.push(b);
                        if b == b'"' {
                            q.push(b'"');
                        }
                    }
                    q.push(b'"');
                    q
                })
                .collect();
            text.extend(quoted.join(&b","[..]));
            text.extend_from_slice(end);
        }
        let mut reader = CsvRecords::new(&text[..], b',');
        let mut line = 1u64;
        for r in &records {
            let rec = reader.next_record().unwrap().unwrap();
            let (first, last, fields) = (rec.first_line, rec.last_line, rec.fields);
            let newlines: u64 = r.iter().map(|f| f.iter().filter(|&&b| b == b'\n').count() as u64).sum();
            prop_assert_eq!((first, last), (line, line + newlines));
            prop_assert_eq!(fields, r.iter().map(Vec::as_slice).collect::<Vec<_>>());
            line += newlines + 1;
        }
        prop_assert!(reader.next_record().unwrap().is_none());
    }
}
