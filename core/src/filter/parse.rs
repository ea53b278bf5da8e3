//! HBase's filter language (ParseFilter): text such as
//! `(RowFilter (=, 'binary:Row 1') AND TimestampsFilter (74689, 89734)) OR
//! ColumnRangeFilter ('abc', true, 'xyz', false)` turned into a [`Filter`].
//!
//! Grammar, as in HBase's reference guide ("Thrift API and Filter Language"):
//!
//! - a filter is `Name (arg, arg, ...)`; strings are single-quoted, a quote inside a string
//!   is doubled (`'it''s'`); numbers, booleans (`true`/`false`, any case) and compare
//!   operators (`<`, `<=`, `=`, `!=`, `>=`, `>`) are bare;
//! - a comparator is a string `'type:value'` with type `binary`, `binaryprefix`,
//!   `regexstring`, `substring` (HBase's), or Basalt's `null`, `bitand`, `bitor`, `bitxor`; a
//!   string without a colon is a binary value (as in the guide's own examples);
//! - `SKIP f` and `WHILE f` (unary, tightest), then `AND`, then `OR` (loosest); parentheses
//!   group. Operators are upper case, as in HBase.
//!
//! Filter names: HBase's (`KeyOnlyFilter`, `FirstKeyOnlyFilter`, `PrefixFilter`,
//! `ColumnPrefixFilter`, `MultipleColumnPrefixFilter`, `ColumnCountGetFilter`, `PageFilter`,
//! `ColumnPaginationFilter`, `InclusiveStopFilter`, `TimestampsFilter` (also spelt
//! `TimeStampsFilter`), `RowFilter`, `FamilyFilter`, `QualifierFilter`, `ValueFilter`,
//! `ColumnRangeFilter`, `SingleColumnValueFilter`, `SingleColumnValueExcludeFilter`,
//! `DependentColumnFilter`, `MultiRowRangeFilter`) plus `RandomRowFilter (chance[, seed])` and
//! `FuzzyRowFilter ('key', 'mask', ...)` whose mask is one `0` (fixed) or `1` (any) per key
//! byte. Every error is an [`Error::FilterParse`] with the byte position of the offending
//! token; no input panics (a proptest feeds random strings). A filter nested deeper than
//! [`MAX_FILTER_DEPTH`] levels (what [`Filter::from_bytes`] decodes) is refused, and so are
//! parentheses and `SKIP`/`WHILE` nested more than [`MAX_NESTING`] deep, which bounds the
//! parser's recursion whatever the text.

use super::compare::CompareOp;
use super::{ColumnValueCondition, Comparator, Filter, ListOp, RowRangeSpec, MAX_FILTER_DEPTH};
use crate::error::{Error, Result};
use bytes::Bytes;

/// Parentheses and unary operators nested deeper than this are refused, so hostile input
/// cannot exhaust the stack. Every filter of at most [`MAX_FILTER_DEPTH`] levels can be
/// written within it (a level needs at most one parenthesis or one operator), with room to
/// spare for parentheses that add no level.
pub const MAX_NESTING: usize = 2 * MAX_FILTER_DEPTH;

/// A parsed filter and its depth ([`Filter::depth`]), kept as the parser builds it.
type Parsed = (Filter, usize);

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    Comma,
    Str(Vec<u8>),
    Word(String),
}

fn err(pos: usize, msg: impl Into<String>) -> Error {
    Error::FilterParse {
        pos,
        msg: msg.into(),
    }
}

fn lex(text: &str) -> Result<Vec<(usize, Tok)>> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' => {
                out.push((i, Tok::Open));
                i += 1;
            }
            b')' => {
                out.push((i, Tok::Close));
                i += 1;
            }
            b',' => {
                out.push((i, Tok::Comma));
                i += 1;
            }
            b'\'' => {
                let start = i;
                i += 1;
                let mut v = Vec::new();
                loop {
                    match s.get(i) {
                        None => return Err(err(start, "unterminated string")),
                        Some(b'\'') if s.get(i + 1) == Some(&b'\'') => {
                            v.push(b'\'');
                            i += 2;
                        }
                        Some(b'\'') => {
                            i += 1;
                            break;
                        }
                        Some(x) => {
                            v.push(*x);
                            i += 1;
                        }
                    }
                }
                out.push((start, Tok::Str(v)));
            }
            _ => {
                let start = i;
                while i < s.len()
                    && !matches!(
                        s[i],
                        b' ' | b'\t' | b'\n' | b'\r' | b'(' | b')' | b',' | b'\''
                    )
                {
                    i += 1;
                }
                // Splitting at ASCII bytes keeps UTF-8 boundaries.
                let w = text.get(start..i).unwrap_or_default().to_string();
                out.push((start, Tok::Word(w)));
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
    end: usize,
}

/// One argument of a filter, with its position.
enum Arg {
    Str(usize, Vec<u8>),
    Word(usize, String),
}

impl Arg {
    fn pos(&self) -> usize {
        match self {
            Arg::Str(p, _) | Arg::Word(p, _) => *p,
        }
    }
    fn bytes(&self) -> Result<Bytes> {
        match self {
            Arg::Str(_, v) => Ok(Bytes::copy_from_slice(v)),
            Arg::Word(p, w) => Err(err(*p, format!("expected a quoted string, found {w}"))),
        }
    }
    fn word(&self) -> Result<&str> {
        match self {
            Arg::Word(_, w) => Ok(w),
            Arg::Str(p, _) => Err(err(*p, "expected a bare word, found a quoted string")),
        }
    }
    fn boolean(&self) -> Result<bool> {
        let w = match self {
            Arg::Word(_, w) => w.clone(),
            Arg::Str(_, v) => String::from_utf8_lossy(v).into_owned(),
        };
        match w.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(err(
                self.pos(),
                format!("expected true or false, found {w}"),
            )),
        }
    }
    fn number<T: std::str::FromStr>(&self) -> Result<T> {
        let w = self.word()?;
        w.parse()
            .map_err(|_| err(self.pos(), format!("expected a number in range, found {w}")))
    }
    fn op(&self) -> Result<CompareOp> {
        Ok(match self.word()? {
            "<" => CompareOp::Less,
            "<=" => CompareOp::LessOrEqual,
            "=" => CompareOp::Equal,
            "!=" => CompareOp::NotEqual,
            ">=" => CompareOp::GreaterOrEqual,
            ">" => CompareOp::Greater,
            w => {
                return Err(err(
                    self.pos(),
                    format!("expected a compare operator, found {w}"),
                ))
            }
        })
    }
    fn comparator(&self) -> Result<Comparator> {
        let v = match self {
            Arg::Str(_, v) => v,
            Arg::Word(p, w) => {
                return Err(err(*p, format!("expected a quoted comparator, found {w}")))
            }
        };
        let Some(colon) = v.iter().position(|c| *c == b':') else {
            return Ok(Comparator::Binary(Bytes::copy_from_slice(v)));
        };
        let (kind, value) = (&v[..colon], &v[colon + 1..]);
        let text = || String::from_utf8_lossy(value).into_owned();
        Ok(match kind.to_ascii_lowercase().as_slice() {
            b"binary" => Comparator::binary(value),
            b"binaryprefix" => Comparator::binary_prefix(value),
            b"regexstring" => {
                let re = std::str::from_utf8(value)
                    .map_err(|_| err(self.pos(), "regular expression is not UTF-8"))?;
                regex::bytes::Regex::new(re)
                    .map_err(|e| err(self.pos(), format!("bad regular expression: {e}")))?;
                Comparator::Regex(re.to_string())
            }
            b"substring" => Comparator::Substring(text()),
            b"null" => Comparator::Null,
            b"bitand" => Comparator::Bit(Bytes::copy_from_slice(value), super::BitOp::And),
            b"bitor" => Comparator::Bit(Bytes::copy_from_slice(value), super::BitOp::Or),
            b"bitxor" => Comparator::Bit(Bytes::copy_from_slice(value), super::BitOp::Xor),
            k => {
                return Err(err(
                    self.pos(),
                    format!("unknown comparator type {}", String::from_utf8_lossy(k)),
                ))
            }
        })
    }
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(_, t)| t)
    }
    fn pos(&self) -> usize {
        self.toks.get(self.at).map_or(self.end, |(p, _)| *p)
    }
    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(x)) if x == w)
    }

    fn or(&mut self, nesting: usize) -> Result<Parsed> {
        let pos = self.pos();
        let first = self.and(nesting)?;
        let mut more = Vec::new();
        while self.is_word("OR") {
            self.at += 1;
            more.push(self.and(nesting)?);
        }
        join(ListOp::MustPassOne, first, more, pos)
    }

    fn and(&mut self, nesting: usize) -> Result<Parsed> {
        let pos = self.pos();
        let first = self.unary(nesting)?;
        let mut more = Vec::new();
        while self.is_word("AND") {
            self.at += 1;
            more.push(self.unary(nesting)?);
        }
        join(ListOp::MustPassAll, first, more, pos)
    }

    fn unary(&mut self, nesting: usize) -> Result<Parsed> {
        if nesting > MAX_NESTING {
            return Err(err(self.pos(), "filter nested too deeply"));
        }
        let pos = self.pos();
        let wrap: fn(Box<Filter>) -> Filter = if self.is_word("SKIP") {
            Filter::Skip
        } else if self.is_word("WHILE") {
            Filter::WhileMatch
        } else {
            return self.primary(nesting);
        };
        self.at += 1;
        let (inner, depth) = self.unary(nesting + 1)?;
        deeper(pos, depth)?;
        Ok((wrap(Box::new(inner)), depth + 1))
    }

    fn expect(&mut self, t: Tok, what: &str) -> Result<()> {
        if self.peek() == Some(&t) {
            self.at += 1;
            Ok(())
        } else {
            Err(err(self.pos(), format!("expected {what}")))
        }
    }

    fn primary(&mut self, nesting: usize) -> Result<Parsed> {
        let pos = self.pos();
        match self.peek().cloned() {
            Some(Tok::Open) => {
                self.at += 1;
                let f = self.or(nesting + 1)?;
                self.expect(Tok::Close, "')'")?;
                Ok(f)
            }
            Some(Tok::Word(name)) if !matches!(name.as_str(), "AND" | "OR") => {
                self.at += 1;
                self.expect(Tok::Open, &format!("'(' after filter name {name}"))?;
                let mut args = Vec::new();
                if self.peek() == Some(&Tok::Close) {
                    self.at += 1;
                } else {
                    loop {
                        let p = self.pos();
                        match self.peek().cloned() {
                            Some(Tok::Str(v)) => args.push(Arg::Str(p, v)),
                            Some(Tok::Word(w)) => args.push(Arg::Word(p, w)),
                            _ => return Err(err(p, "expected an argument")),
                        }
                        self.at += 1;
                        match self.peek() {
                            Some(Tok::Comma) => self.at += 1,
                            Some(Tok::Close) => {
                                self.at += 1;
                                break;
                            }
                            _ => {
                                return Err(err(
                                    self.pos(),
                                    "expected ',' or ')' after an argument",
                                ))
                            }
                        }
                    }
                }
                Ok((build(&name, pos, &args)?, 1))
            }
            None => Err(err(pos, "expected a filter, found the end")),
            Some(_) => Err(err(pos, "expected a filter name or '('")),
        }
    }
}

/// Refuses, at `pos`, to put a filter `depth` levels deep inside another: the result would
/// be deeper than [`MAX_FILTER_DEPTH`].
fn deeper(pos: usize, depth: usize) -> Result<()> {
    if depth >= MAX_FILTER_DEPTH {
        return Err(err(
            pos,
            format!("filter nested too deeply: more than {MAX_FILTER_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// `first op more...` (starting at `pos`), flattening a chain of one operator into one
/// list.
fn join(op: ListOp, first: Parsed, more: Vec<Parsed>, pos: usize) -> Result<Parsed> {
    if more.is_empty() {
        return Ok(first);
    }
    let mut v = Vec::with_capacity(1 + more.len());
    let mut depth = first.1;
    v.push(first.0);
    for (f, d) in more {
        depth = depth.max(d);
        v.push(f);
    }
    deeper(pos, depth)?;
    Ok((Filter::List(op, v), depth + 1))
}

fn arity(name: &str, pos: usize, args: &[Arg], allowed: &[usize]) -> Result<()> {
    if allowed.contains(&args.len()) {
        Ok(())
    } else {
        let want: Vec<String> = allowed.iter().map(|n| n.to_string()).collect();
        Err(err(
            pos,
            format!(
                "{name} takes {} arguments, found {}",
                want.join(" or "),
                args.len()
            ),
        ))
    }
}

/// The `i`-th argument (callers check the arity first).
fn arg(args: &[Arg], i: usize, pos: usize) -> Result<&Arg> {
    args.get(i).ok_or_else(|| err(pos, "missing argument"))
}

fn build(name: &str, pos: usize, args: &[Arg]) -> Result<Filter> {
    let a = |i: usize| arg(args, i, pos);
    let compare = |f: fn(CompareOp, Comparator) -> Filter| -> Result<Filter> {
        arity(name, pos, args, &[2])?;
        Ok(f(a(0)?.op()?, a(1)?.comparator()?))
    };
    let column_value = || -> Result<ColumnValueCondition> {
        arity(name, pos, args, &[4, 6])?;
        let mut c = ColumnValueCondition::new(
            a(0)?.bytes()?,
            a(1)?.bytes()?,
            a(2)?.op()?,
            a(3)?.comparator()?,
        );
        if args.len() == 6 {
            c = c
                .filter_if_missing(a(4)?.boolean()?)
                .latest_version_only(a(5)?.boolean()?);
        }
        Ok(c)
    };
    Ok(match name {
        "KeyOnlyFilter" => {
            arity(name, pos, args, &[0, 1])?;
            Filter::KeyOnly {
                len_as_value: args.first().map(Arg::boolean).transpose()?.unwrap_or(false),
            }
        }
        "FirstKeyOnlyFilter" => {
            arity(name, pos, args, &[0])?;
            Filter::FirstKeyOnly
        }
        "PrefixFilter" => {
            arity(name, pos, args, &[1])?;
            Filter::Prefix(a(0)?.bytes()?)
        }
        "ColumnPrefixFilter" => {
            arity(name, pos, args, &[1])?;
            Filter::ColumnPrefix(a(0)?.bytes()?)
        }
        "MultipleColumnPrefixFilter" => {
            if args.is_empty() {
                return Err(err(
                    pos,
                    "MultipleColumnPrefixFilter takes at least one prefix",
                ));
            }
            Filter::MultipleColumnPrefix(args.iter().map(Arg::bytes).collect::<Result<_>>()?)
        }
        "ColumnCountGetFilter" => {
            arity(name, pos, args, &[1])?;
            Filter::ColumnCountGet(a(0)?.number()?)
        }
        "PageFilter" => {
            arity(name, pos, args, &[1])?;
            Filter::Page(a(0)?.number()?)
        }
        "ColumnPaginationFilter" => {
            arity(name, pos, args, &[2])?;
            let limit = a(0)?.number()?;
            match a(1)? {
                Arg::Str(_, v) => Filter::ColumnPagination {
                    limit,
                    offset: 0,
                    column_offset: Some(Bytes::copy_from_slice(v)),
                },
                w => Filter::ColumnPagination {
                    limit,
                    offset: w.number()?,
                    column_offset: None,
                },
            }
        }
        "InclusiveStopFilter" => {
            arity(name, pos, args, &[1])?;
            Filter::InclusiveStop(a(0)?.bytes()?)
        }
        "TimestampsFilter" | "TimeStampsFilter" => {
            Filter::Timestamps(args.iter().map(Arg::number).collect::<Result<_>>()?)
        }
        "RowFilter" => compare(Filter::Row)?,
        "FamilyFilter" => compare(Filter::Family)?,
        "QualifierFilter" => compare(Filter::Qualifier)?,
        "ValueFilter" => compare(Filter::Value)?,
        "ColumnRangeFilter" => {
            arity(name, pos, args, &[4])?;
            let min = a(0)?.bytes()?;
            let max = a(2)?.bytes()?;
            Filter::ColumnRange {
                min: (!min.is_empty()).then_some(min),
                min_inclusive: a(1)?.boolean()?,
                max: (!max.is_empty()).then_some(max),
                max_inclusive: a(3)?.boolean()?,
            }
        }
        "SingleColumnValueFilter" => Filter::SingleColumnValue(column_value()?),
        "SingleColumnValueExcludeFilter" => Filter::SingleColumnValueExclude(column_value()?),
        "DependentColumnFilter" => {
            arity(name, pos, args, &[2, 3, 5])?;
            Filter::DependentColumn {
                family: a(0)?.bytes()?,
                qualifier: a(1)?.bytes()?,
                drop_dependent_column: if args.len() >= 3 {
                    a(2)?.boolean()?
                } else {
                    false
                },
                condition: if args.len() == 5 {
                    Some((a(3)?.op()?, a(4)?.comparator()?))
                } else {
                    None
                },
            }
        }
        "RandomRowFilter" => {
            arity(name, pos, args, &[1, 2])?;
            let chance: f32 = a(0)?.number()?;
            if chance.is_nan() {
                return Err(err(a(0)?.pos(), "chance is not a number"));
            }
            let seed = if args.len() == 2 { a(1)?.number()? } else { 0 };
            Filter::RandomRow { chance, seed }
        }
        "FuzzyRowFilter" => {
            if args.is_empty() || !args.len().is_multiple_of(2) {
                return Err(err(pos, "FuzzyRowFilter takes pairs of 'key', 'mask'"));
            }
            let mut pairs = Vec::new();
            for pair in args.chunks(2) {
                let (k, m) = (&pair[0], &pair[1]);
                let key = k.bytes()?;
                let mask: Vec<u8> = m
                    .bytes()?
                    .iter()
                    .map(|c| match c {
                        b'0' | 0 => Ok(0),
                        b'1' | 1 => Ok(1),
                        _ => Err(err(m.pos(), "a fuzzy mask holds only 0 and 1")),
                    })
                    .collect::<Result<_>>()?;
                if mask.len() != key.len() {
                    return Err(err(m.pos(), "a fuzzy mask must be as long as its key"));
                }
                pairs.push((key, Bytes::from(mask)));
            }
            Filter::FuzzyRow(pairs)
        }
        "MultiRowRangeFilter" => {
            if args.is_empty() || !args.len().is_multiple_of(4) {
                return Err(err(
                    pos,
                    "MultiRowRangeFilter takes groups of 'start', bool, 'stop', bool",
                ));
            }
            let mut ranges = Vec::new();
            for g in args.chunks(4) {
                ranges.push(RowRangeSpec {
                    start: g[0].bytes()?,
                    start_inclusive: g[1].boolean()?,
                    stop: g[2].bytes()?,
                    stop_inclusive: g[3].boolean()?,
                });
            }
            Filter::MultiRowRange(ranges)
        }
        _ => return Err(err(pos, format!("unknown filter {name}"))),
    })
}

/// Parses a filter string; see the module doc.
pub fn parse(text: &str) -> Result<Filter> {
    let toks = lex(text)?;
    let mut p = Parser {
        toks,
        at: 0,
        end: text.len(),
    };
    let (f, _) = p.or(0)?;
    if p.at < p.toks.len() {
        return Err(err(p.pos(), "unexpected text after the filter"));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_and_quotes() {
        let f = parse("PrefixFilter ('a') AND SKIP ValueFilter (=, 'it''s') OR KeyOnlyFilter ()")
            .unwrap();
        let want = Filter::any([
            Filter::all([
                Filter::prefix("a"),
                Filter::Skip(Box::new(Filter::Value(
                    CompareOp::Equal,
                    Comparator::binary("it's"),
                ))),
            ]),
            Filter::KeyOnly {
                len_as_value: false,
            },
        ]);
        assert_eq!(f, want);
    }

    #[test]
    fn errors_point_at_the_token() {
        match parse("PrefixFilter ('a') AND Bogus (1)") {
            Err(Error::FilterParse { pos, .. }) => assert_eq!(pos, 23),
            other => panic!("{other:?}"),
        }
        match parse("PageFilter (x)") {
            Err(Error::FilterParse { pos, .. }) => assert_eq!(pos, 12),
            other => panic!("{other:?}"),
        }
        let deep = "(".repeat(10_000);
        assert!(parse(&deep).is_err());
    }
}
