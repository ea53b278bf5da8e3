//! The filter language (HBase's ParseFilter): the examples of HBase's reference guide
//! ("Thrift API and Filter Language"), each parsed to the filter it means and run against an
//! engine; malformed inputs that give an `Error::FilterParse` pointing at the problem; and a
//! fuzz-style proptest that feeds random strings to the parser, which must never panic.

use basalt::client::{CompareOp, Put, RowResult, Scan, Table};
use basalt::filter::{ColumnValueCondition, Comparator, Filter, ListOp, MAX_FILTER_DEPTH};
use basalt::{ColumnFamilyDescriptor, Connection, Error, TableDescriptor, TableName};
use bytes::Bytes;
use futures::TryStreamExt;
use proptest::prelude::*;
use tempfile::TempDir;

fn b(x: &str) -> Bytes {
    Bytes::copy_from_slice(x.as_bytes())
}

fn p(text: &str) -> Filter {
    match Filter::parse(text) {
        Ok(f) => f,
        Err(e) => panic!("{text}: {e}"),
    }
}

/// A table with rows "Row", "Row 1", "Row 2", "abc" and columns in families `FamilyA`, `conf`.
async fn table() -> (TempDir, Connection, Table) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    conn.admin()
        .create_table(
            TableDescriptor::new(TableName::parse("t").unwrap())
                .family(ColumnFamilyDescriptor::new("FamilyA").max_versions(3))
                .family(ColumnFamilyDescriptor::new("FamilyB"))
                .family(ColumnFamilyDescriptor::new("conf")),
        )
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    let cells = [
        ("Row", "FamilyA", "Column1", 74689, "abc"),
        ("Row", "FamilyB", "Col", 1, "Value"),
        ("Row 1", "FamilyA", "Column1", 74689, "aaa"),
        ("Row 1", "FamilyA", "abd", 89734, "x"),
        ("Row 1", "FamilyA", "xyz", 5, "Value"),
        ("Row 2", "FamilyA", "Col2", 48895495, "zz"),
        ("Row 2", "conf", "blacklist", 48895495, "zebra"),
        ("abc", "conf", "blacklist", 5, "zebra"),
        ("abc", "FamilyA", "Column1", 5, "abc"),
    ];
    for (r, f, q, ts, v) in cells {
        t.put(Put::new(r).add_column_ts(f, q, ts, v)).await.unwrap();
    }
    (dir, conn, t)
}

async fn rows(t: &Table, f: Filter) -> Vec<String> {
    let got: Vec<RowResult> = t
        .scan(Scan::new().filter(f))
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    got.iter()
        .map(|r| String::from_utf8_lossy(&r.row).into_owned())
        .collect()
}

#[tokio::test]
async fn guide_compound_example_prefix_page_first_key() {
    let f = p("PrefixFilter ('Row') AND PageFilter (1) AND FirstKeyOnlyFilter ()");
    assert_eq!(
        f,
        Filter::all([Filter::prefix("Row"), Filter::Page(1), Filter::FirstKeyOnly])
    );
    let (_d, _c, t) = table().await;
    assert_eq!(rows(&t, f).await, vec!["Row"]);
}

#[tokio::test]
async fn guide_compound_example_row_timestamps_or_column_range() {
    let f = p("(RowFilter (=, 'binary:Row 1') AND TimeStampsFilter (74689, 89734)) OR ColumnRangeFilter ('abc', true, 'xyz', false)");
    let want = Filter::any([
        Filter::all([
            Filter::Row(CompareOp::Equal, Comparator::binary("Row 1")),
            Filter::Timestamps(vec![74689, 89734]),
        ]),
        Filter::ColumnRange {
            min: Some(b("abc")),
            min_inclusive: true,
            max: Some(b("xyz")),
            max_inclusive: false,
        },
    ]);
    assert_eq!(f, want);
    let (_d, _c, t) = table().await;
    // "Row 1" by its row and timestamps (and its column abd); "Row 2" and "abc" by their
    // column conf:blacklist, inside ['abc', 'xyz') ("Col..." sorts before 'a').
    assert_eq!(rows(&t, f).await, vec!["Row 1", "Row 2", "abc"]);
}

#[tokio::test]
async fn guide_skip_example() {
    // The guide writes "SKIP ValueFilter (0)"; a ValueFilter takes an operator and a
    // comparator, so that text is an error, and the intended filter parses.
    assert!(matches!(
        Filter::parse("SKIP ValueFilter (0)"),
        Err(Error::FilterParse { .. })
    ));
    let f = p("SKIP ValueFilter (!=, 'binary:Value')");
    let (_d, _c, t) = table().await;
    assert_eq!(rows(&t, f).await, vec!["Row 2", "abc"]);
}

#[test]
fn guide_precedence_examples() {
    let f = p("KeyOnlyFilter () AND FirstKeyOnlyFilter () OR PageFilter (1)");
    assert_eq!(
        f,
        Filter::any([
            Filter::all([
                Filter::KeyOnly {
                    len_as_value: false
                },
                Filter::FirstKeyOnly
            ]),
            Filter::Page(1)
        ])
    );
    let f = p("KeyOnlyFilter () AND SKIP FirstKeyOnlyFilter () OR PageFilter (1)");
    assert_eq!(
        f,
        Filter::any([
            Filter::all([
                Filter::KeyOnly {
                    len_as_value: false
                },
                Filter::Skip(Box::new(Filter::FirstKeyOnly))
            ]),
            Filter::Page(1)
        ])
    );
    let f = p("WHILE PrefixFilter ('a') AND (PageFilter (1) OR PageFilter (2))");
    assert_eq!(
        f,
        Filter::all([
            Filter::WhileMatch(Box::new(Filter::prefix("a"))),
            Filter::any([Filter::Page(1), Filter::Page(2)])
        ])
    );
}

/// The guide's one-line example of each filter, parsed, checked and run.
#[tokio::test]
async fn guide_individual_filter_examples() {
    let (_d, _c, t) = table().await;
    let cases: Vec<(&str, Filter, Vec<&str>)> = vec![
        (
            "KeyOnlyFilter ()",
            Filter::KeyOnly {
                len_as_value: false,
            },
            vec!["Row", "Row 1", "Row 2", "abc"],
        ),
        (
            "FirstKeyOnlyFilter ()",
            Filter::FirstKeyOnly,
            vec!["Row", "Row 1", "Row 2", "abc"],
        ),
        (
            "PrefixFilter ('Row')",
            Filter::prefix("Row"),
            vec!["Row", "Row 1", "Row 2"],
        ),
        (
            "ColumnPrefixFilter ('Col')",
            Filter::column_prefix("Col"),
            vec!["Row", "Row 1", "Row 2", "abc"],
        ),
        (
            "MultipleColumnPrefixFilter ('Col1', 'Col2')",
            Filter::MultipleColumnPrefix(vec![b("Col1"), b("Col2")]),
            vec!["Row 2"],
        ),
        (
            "ColumnCountGetFilter (4)",
            Filter::ColumnCountGet(4),
            vec!["Row", "Row 1", "Row 2", "abc"],
        ),
        ("PageFilter (2)", Filter::Page(2), vec!["Row", "Row 1"]),
        (
            "ColumnPaginationFilter (3, 5)",
            Filter::ColumnPagination {
                limit: 3,
                offset: 5,
                column_offset: None,
            },
            vec![],
        ),
        (
            "InclusiveStopFilter ('Row 1')",
            Filter::inclusive_stop("Row 1"),
            vec!["Row", "Row 1"],
        ),
        (
            "TimeStampsFilter (5985489, 48895495, 58489845945)",
            Filter::Timestamps(vec![5985489, 48895495, 58489845945]),
            vec!["Row 2"],
        ),
        (
            "RowFilter (<=, 'binary:Row 1')",
            Filter::Row(CompareOp::LessOrEqual, Comparator::binary("Row 1")),
            vec!["Row", "Row 1"],
        ),
        (
            "FamilyFilter (>=, 'binaryprefix:FamilyB')",
            Filter::Family(
                CompareOp::GreaterOrEqual,
                Comparator::binary_prefix("FamilyB"),
            ),
            vec!["Row", "Row 2", "abc"],
        ),
        (
            "QualifierFilter (=, 'substring:Column1')",
            Filter::Qualifier(CompareOp::Equal, Comparator::substring("Column1")),
            vec!["Row", "Row 1", "abc"],
        ),
        (
            "ValueFilter (!=, 'binary:Value')",
            Filter::Value(CompareOp::NotEqual, Comparator::binary("Value")),
            vec!["Row", "Row 1", "Row 2", "abc"],
        ),
        (
            "ValueFilter (=, 'regexstring:^z')",
            Filter::Value(CompareOp::Equal, Comparator::regex("^z")),
            vec!["Row 2", "abc"],
        ),
        (
            "DependentColumnFilter ('conf', 'blacklist', false, >=, 'zebra')",
            Filter::DependentColumn {
                family: b("conf"),
                qualifier: b("blacklist"),
                drop_dependent_column: false,
                condition: Some((CompareOp::GreaterOrEqual, Comparator::binary("zebra"))),
            },
            vec!["Row 2", "abc"],
        ),
        (
            "DependentColumnFilter ('conf', 'blacklist', true)",
            Filter::DependentColumn {
                family: b("conf"),
                qualifier: b("blacklist"),
                drop_dependent_column: true,
                condition: None,
            },
            vec!["Row 2", "abc"],
        ),
        (
            "DependentColumnFilter ('conf', 'blacklist')",
            Filter::DependentColumn {
                family: b("conf"),
                qualifier: b("blacklist"),
                drop_dependent_column: false,
                condition: None,
            },
            vec!["Row 2", "abc"],
        ),
        (
            "SingleColumnValueFilter ('FamilyA', 'Column1', <=, 'abc', true, false)",
            Filter::SingleColumnValue(
                ColumnValueCondition::new(
                    "FamilyA",
                    "Column1",
                    CompareOp::LessOrEqual,
                    Comparator::binary("abc"),
                )
                .filter_if_missing(true)
                .latest_version_only(false),
            ),
            vec!["Row", "Row 1", "abc"],
        ),
        (
            "SingleColumnValueFilter ('FamilyA', 'Column1', <=, 'abc')",
            Filter::SingleColumnValue(ColumnValueCondition::new(
                "FamilyA",
                "Column1",
                CompareOp::LessOrEqual,
                Comparator::binary("abc"),
            )),
            vec!["Row", "Row 1", "Row 2", "abc"],
        ),
        (
            "SingleColumnValueExcludeFilter ('FamilyA', 'Column1', <=, 'abc', 'false', 'true')",
            Filter::SingleColumnValueExclude(ColumnValueCondition::new(
                "FamilyA",
                "Column1",
                CompareOp::LessOrEqual,
                Comparator::binary("abc"),
            )),
            vec!["Row", "Row 1", "Row 2", "abc"],
        ),
        (
            "ColumnRangeFilter ('abc', true, 'xyz', false)",
            Filter::ColumnRange {
                min: Some(b("abc")),
                min_inclusive: true,
                max: Some(b("xyz")),
                max_inclusive: false,
            },
            vec!["Row 1", "Row 2", "abc"],
        ),
        (
            "FuzzyRowFilter ('Row ?', '00001')",
            Filter::fuzzy_row([("Row ?", [0u8, 0, 0, 0, 1])]),
            vec!["Row 1", "Row 2"],
        ),
        (
            "MultiRowRangeFilter ('Row 1', true, 'Row 2', false, 'abc', true, '', false)",
            Filter::MultiRowRange(vec![
                basalt::filter::RowRangeSpec::new("Row 1", "Row 2"),
                basalt::filter::RowRangeSpec::new("abc", ""),
            ]),
            vec!["Row 1", "abc"],
        ),
        (
            "RandomRowFilter (1.0, 7)",
            Filter::RandomRow {
                chance: 1.0,
                seed: 7,
            },
            vec!["Row", "Row 1", "Row 2", "abc"],
        ),
    ];
    for (text, want, want_rows) in cases {
        let f = p(text);
        assert_eq!(f, want, "{text}");
        assert_eq!(rows(&t, f).await, want_rows, "{text}");
    }
}

#[test]
fn quotes_are_doubled_inside_strings() {
    assert_eq!(p("PrefixFilter ('it''s')"), Filter::prefix("it's"));
    assert_eq!(p("PrefixFilter ('''')"), Filter::prefix("'"));
    assert_eq!(p("PrefixFilter ('')"), Filter::prefix(""));
    assert_eq!(
        p("ValueFilter (=, 'binary:a:b')"),
        Filter::Value(CompareOp::Equal, Comparator::binary("a:b"))
    );
    assert_eq!(
        p("ValueFilter(=,'substring:x')"),
        Filter::Value(CompareOp::Equal, Comparator::substring("x"))
    );
    assert_eq!(p("(((PageFilter (1))))"), Filter::Page(1));
    assert_eq!(
        p("PageFilter (1) OR PageFilter (2) OR PageFilter (3)"),
        Filter::List(
            ListOp::MustPassOne,
            vec![Filter::Page(1), Filter::Page(2), Filter::Page(3)]
        )
    );
}

fn parse_error(text: &str) -> (usize, String) {
    match Filter::parse(text) {
        Err(Error::FilterParse { pos, msg }) => (pos, msg),
        other => panic!("{text}: expected a parse error, got {other:?}"),
    }
}

#[test]
fn malformed_inputs_point_at_the_problem() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 0, "expected a filter"),
        ("PrefixFilter", 12, "expected '('"),
        ("PrefixFilter ('abc'", 19, "expected ',' or ')'"),
        ("PrefixFilter ('abc)", 14, "unterminated string"),
        ("PrefixFilter (abc)", 14, "quoted string"),
        ("NoSuchFilter ()", 0, "unknown filter"),
        ("PageFilter ('1')", 12, "bare word"),
        ("PageFilter (-1)", 12, "number"),
        ("PageFilter (1, 2)", 0, "takes 1 arguments"),
        ("RowFilter (~, 'binary:a')", 11, "compare operator"),
        ("RowFilter (=, 'nosuch:a')", 14, "unknown comparator type"),
        ("RowFilter (=, 'regexstring:(')", 14, "regular expression"),
        ("PageFilter (1) AND", 18, "expected a filter"),
        ("PageFilter (1) PageFilter (2)", 15, "unexpected text"),
        ("(PageFilter (1)", 15, "expected ')'"),
        ("PageFilter (1))", 14, "unexpected text"),
        ("AND PageFilter (1)", 0, "expected a filter name"),
        ("SKIP", 4, "expected a filter"),
        (
            "ColumnRangeFilter ('a', maybe, 'b', true)",
            24,
            "true or false",
        ),
        ("FuzzyRowFilter ('ab', '012')", 22, "only 0 and 1"),
        ("FuzzyRowFilter ('ab', '0')", 22, "as long as its key"),
        ("PageFilter (1,)", 14, "expected an argument"),
    ];
    for (text, pos, msg) in cases {
        let (got_pos, got_msg) = parse_error(text);
        assert_eq!(
            (got_pos, got_msg.contains(msg)),
            (*pos, true),
            "{text}: {got_msg}"
        );
    }
    let deep = format!("{}PageFilter (1){}", "(".repeat(500), ")".repeat(500));
    assert!(parse_error(&deep).1.contains("nested too deeply"));
    let display = Filter::parse("PageFilter (x)").unwrap_err().to_string();
    assert!(display.contains("byte 12"), "{display}");
}

/// The text of a filter `levels` deep of kind `kind`: SKIPs, WHILEs or nested ANDs.
fn nested_text(kind: usize, levels: usize) -> String {
    let leaf = "PageFilter (1)";
    let n = levels - 1;
    match kind {
        0 => format!("{}{leaf}", "SKIP ".repeat(n)),
        1 => format!("{}{leaf}", "WHILE ".repeat(n)),
        _ => format!(
            "{}{leaf}{}",
            "KeyOnlyFilter () AND (".repeat(n),
            ")".repeat(n)
        ),
    }
}

#[test]
fn a_million_nested_levels_are_a_parse_error_not_a_stack_overflow() {
    for kind in 0..3 {
        let text = nested_text(kind, 1_000_000);
        let (_, msg) = parse_error(&text);
        assert!(msg.contains("nested too deeply"), "{msg}");
    }
    let parens = format!(
        "{}PageFilter (1){}",
        "(".repeat(1_000_000),
        ")".repeat(1_000_000)
    );
    assert!(parse_error(&parens).1.contains("nested too deeply"));
}

#[test]
fn a_filter_at_the_depth_limit_parses_and_round_trips_and_one_level_more_does_not() {
    for kind in 0..3 {
        let f = p(&nested_text(kind, MAX_FILTER_DEPTH));
        assert_eq!(f.depth(), MAX_FILTER_DEPTH, "kind {kind}");
        assert_eq!(Filter::from_bytes(&f.to_bytes().unwrap()).unwrap(), f);
        // One level more: what the decoder would refuse, the parser refuses, at the operator
        // (or the chain) that went too deep.
        let text = nested_text(kind, MAX_FILTER_DEPTH + 1);
        let (pos, msg) = parse_error(&text);
        assert!(
            msg.contains(&format!("more than {MAX_FILTER_DEPTH} levels")),
            "kind {kind}: {msg}"
        );
        assert!(pos < text.len(), "kind {kind}: {pos}");
    }
    // Parentheses that add no level do not count against the filter's depth, only against
    // the parser's own nesting bound.
    let f = p(&format!("(({}))", nested_text(0, MAX_FILTER_DEPTH)));
    assert_eq!(f.depth(), MAX_FILTER_DEPTH);
}

proptest! {
    /// Random text never panics the parser; an error always points inside the text (or at
    /// its end).
    #[test]
    fn random_strings_never_panic(text in "\\PC{0,60}") {
        if let Err(Error::FilterParse { pos, .. }) = Filter::parse(&text) {
            prop_assert!(pos <= text.len());
        }
    }

    /// Random sequences of the language's own tokens: deeper into the grammar.
    #[test]
    fn random_token_soup_never_panics(
        toks in prop::collection::vec(prop::sample::select(vec![
            "(", ")", ",", "AND", "OR", "SKIP", "WHILE", "PageFilter", "PrefixFilter",
            "ValueFilter", "SingleColumnValueFilter", "FuzzyRowFilter", "'a'", "'binary:x'",
            "'regexstring:['", "=", "<=", "1", "-3", "true", "'", "''", "ColumnRangeFilter",
            "MultiRowRangeFilter", "RandomRowFilter", "0.5", "NaN",
        ]), 0..24)
    ) {
        let text = toks.join(" ");
        match Filter::parse(&text) {
            Ok(f) => {
                // Whatever parses compiles or gives a typed error.
                let _ = f.compile(false);
            }
            Err(Error::FilterParse { pos, .. }) => prop_assert!(pos <= text.len()),
            Err(e) => prop_assert!(false, "unexpected error kind: {e}"),
        }
    }
}
