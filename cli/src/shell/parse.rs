//! The parser of HBase's shell language: a command line is a command name, then arguments
//! separated by commas: strings, integers, `true`/`false`, `nil`, constants (`VERSIONS`),
//! arrays `[a, b]` and hashes `{K => V}` (nested to any depth).
//!
//! Invariant: for every [`Value`] `v`, parsing `v.to_string()` gives `v` back (the printer
//! writes strings single-quoted with `\'` and `\\` escaped; the property test checks it).

use super::lex::{lex, ParseError, Tok};
use std::fmt;

/// An argument value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string (`\xNN` still as typed: [`super::binary::to_bytes_binary`] decodes it).
    Str(String),
    /// An integer.
    Int(i64),
    /// `true` or `false`.
    Bool(bool),
    /// `nil`.
    Nil,
    /// A bare constant such as `VERSIONS` (starts with an upper-case letter).
    Const(String),
    /// `[a, b, ...]`.
    Array(Vec<Value>),
    /// `{k => v, ...}`, in the order written.
    Hash(Vec<(Value, Value)>),
}

impl Value {
    /// What kind of value this is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Bool(_) => "a boolean",
            Value::Nil => "nil",
            Value::Const(_) => "a constant",
            Value::Array(_) => "an array",
            Value::Hash(_) => "a hash",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => {
                f.write_str("'")?;
                for c in s.chars() {
                    match c {
                        '\'' => f.write_str("\\'")?,
                        '\\' => f.write_str("\\\\")?,
                        c => write!(f, "{c}")?,
                    }
                }
                f.write_str("'")
            }
            Value::Int(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Nil => f.write_str("nil"),
            Value::Const(c) => f.write_str(c),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Hash(pairs) => {
                f.write_str("{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k} => {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The command's name.
    pub name: String,
    /// Its arguments in order.
    pub args: Vec<Value>,
}

/// Deepest nesting of arrays and hashes accepted (bounds the parser's recursion).
const MAX_DEPTH: usize = 32;

/// Parses one command line; `Ok(None)` for a blank line or a comment.
pub fn parse_line(line: &str) -> Result<Option<CommandLine>, ParseError> {
    let toks = lex(line)?;
    let end_col = line.chars().count() + 1;
    let mut p = Parser {
        toks,
        pos: 0,
        end_col,
    };
    let (name, col) = match p.next() {
        None => return Ok(None),
        Some((Tok::Word(w), col)) => (w, col),
        Some((t, col)) => {
            return Err(ParseError {
                column: col,
                message: format!("expected a command name, found {}", describe(&t)),
            })
        }
    };
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(ParseError {
            column: col,
            message: format!("'{name}' is not a command name (commands are lower case)"),
        });
    }
    let mut args = Vec::new();
    if p.peek().is_some() {
        loop {
            let v = p.value(0)?;
            if p.peek() == Some(&Tok::Arrow) {
                // Ruby's trailing hash without braces: `get 't', 'r', COLUMN => 'f:q'`.
                args.push(p.bare_hash(v)?);
                break;
            }
            args.push(v);
            match p.next() {
                None => break,
                Some((Tok::Comma, _)) => {}
                Some((t, col)) => {
                    return Err(ParseError {
                        column: col,
                        message: format!("expected ',' between arguments, found {}", describe(&t)),
                    })
                }
            }
        }
    }
    Ok(Some(CommandLine { name, args }))
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("'{w}'"),
        Tok::Str(_) => "a string".into(),
        Tok::Int(n) => format!("{n}"),
        Tok::Comma => "','".into(),
        Tok::Arrow => "'=>'".into(),
        Tok::LBracket => "'['".into(),
        Tok::RBracket => "']'".into(),
        Tok::LBrace => "'{'".into(),
        Tok::RBrace => "'}'".into(),
    }
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    end_col: usize,
}

impl Parser {
    fn next(&mut self) -> Option<(Tok, usize)> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn err_here(&self, message: String) -> ParseError {
        let column = self
            .toks
            .get(self.pos)
            .map(|(_, c)| *c)
            .unwrap_or(self.end_col);
        ParseError { column, message }
    }

    /// The rest of the line as a hash without braces, `first` being its first key (the
    /// parser stands on the `=>` after it); it must end the line.
    fn bare_hash(&mut self, first: Value) -> Result<Value, ParseError> {
        let mut pairs = Vec::new();
        let mut key = first;
        loop {
            match self.next() {
                Some((Tok::Arrow, _)) => {}
                _ => {
                    self.pos -= 1;
                    return Err(self.err_here("expected '=>' after a hash key".into()));
                }
            }
            let v = self.value(1)?;
            pairs.push((key, v));
            match self.next() {
                None => return Ok(Value::Hash(pairs)),
                Some((Tok::Comma, _)) => key = self.value(1)?,
                Some(_) => {
                    self.pos -= 1;
                    return Err(self.err_here(
                        "expected ',' or the end of the line after a hash entry".into(),
                    ));
                }
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.err_here(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let Some((t, col)) = self.next() else {
            return Err(ParseError {
                column: self.end_col,
                message: "expected a value, found the end of the line".into(),
            });
        };
        match t {
            Tok::Str(s) => Ok(Value::Str(s)),
            Tok::Int(n) => Ok(Value::Int(n)),
            Tok::Word(w) => match w.as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                "nil" => Ok(Value::Nil),
                _ if w.starts_with(|c: char| c.is_ascii_uppercase()) => Ok(Value::Const(w)),
                _ => Err(ParseError {
                    column: col,
                    message: format!("unknown word '{w}' (quote strings: '{w}')"),
                }),
            },
            Tok::LBracket => {
                let mut items = Vec::new();
                if self.peek() == Some(&Tok::RBracket) {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    match self.next() {
                        Some((Tok::Comma, _)) => {}
                        Some((Tok::RBracket, _)) => return Ok(Value::Array(items)),
                        _ => {
                            self.pos -= 1;
                            return Err(self.err_here("expected ',' or ']' in an array".into()));
                        }
                    }
                }
            }
            Tok::LBrace => {
                let mut pairs = Vec::new();
                if self.peek() == Some(&Tok::RBrace) {
                    self.pos += 1;
                    return Ok(Value::Hash(pairs));
                }
                loop {
                    let k = self.value(depth + 1)?;
                    match self.next() {
                        Some((Tok::Arrow, _)) => {}
                        _ => {
                            self.pos -= 1;
                            return Err(self.err_here("expected '=>' after a hash key".into()));
                        }
                    }
                    let v = self.value(depth + 1)?;
                    pairs.push((k, v));
                    match self.next() {
                        Some((Tok::Comma, _)) => {}
                        Some((Tok::RBrace, _)) => return Ok(Value::Hash(pairs)),
                        _ => {
                            self.pos -= 1;
                            return Err(self.err_here("expected ',' or '}' in a hash".into()));
                        }
                    }
                }
            }
            other => Err(ParseError {
                column: col,
                message: format!("expected a value, found {}", describe(&other)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seed_002_create() {
        let c = parse_line("create 'testtable', 'common', 'data', {SPLITS => ['1','2','3']}")
            .unwrap()
            .unwrap();
        assert_eq!(c.name, "create");
        assert_eq!(c.args.len(), 4);
        assert_eq!(
            c.args[3],
            Value::Hash(vec![(
                Value::Const("SPLITS".into()),
                Value::Array(vec![
                    Value::Str("1".into()),
                    Value::Str("2".into()),
                    Value::Str("3".into())
                ])
            )])
        );
    }

    #[test]
    fn escapes_and_errors() {
        let c = parse_line(r#"put 't', "a\"b\\x41\n", 'c\'d\x', -5, nil, true"#)
            .unwrap()
            .unwrap();
        assert_eq!(c.args[1], Value::Str("a\"b\\x41\n".into()));
        assert_eq!(c.args[2], Value::Str("c'd\\x".into()));
        assert_eq!(c.args[3], Value::Int(-5));
        assert_eq!(c.args[4], Value::Nil);
        assert_eq!(parse_line("  # comment").unwrap(), None);
        let e = parse_line("get 't', 'r'  'x'").unwrap_err();
        assert_eq!(e.column, 15);
        let e = parse_line("get 't', {A => 1").unwrap_err();
        assert_eq!(e.column, 17);
        assert!(parse_line("get 't', 'r").unwrap_err().column == 10);
        assert!(parse_line("get 't',").is_err());
        let c = parse_line("get 't', 'r', COLUMN => 'f:q', VERSIONS => 2")
            .unwrap()
            .unwrap();
        assert_eq!(
            c.args[2],
            Value::Hash(vec![
                (Value::Const("COLUMN".into()), Value::Str("f:q".into())),
                (Value::Const("VERSIONS".into()), Value::Int(2)),
            ])
        );
        assert!(parse_line("get 't', A => 1, 'x'").is_err());
        assert!(parse_line("get 't', A => 1 B").is_err());
        assert!(parse_line(&"[".repeat(100)).is_err());
        assert!(parse_line(&format!("x {}", "[".repeat(100))).is_err());
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<String>().prop_map(Value::Str),
            any::<i64>().prop_map(Value::Int),
            any::<bool>().prop_map(Value::Bool),
            Just(Value::Nil),
            "[A-Z][A-Z0-9_]{0,12}".prop_map(Value::Const),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec((inner.clone(), inner), 0..5).prop_map(Value::Hash),
            ]
        })
    }

    proptest! {
        #[test]
        fn print_then_parse(args in proptest::collection::vec(value(), 0..5)) {
            let line = format!(
                "cmd {}",
                args.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
            );
            let parsed = parse_line(&line).unwrap().unwrap();
            prop_assert_eq!(parsed.name, "cmd");
            prop_assert_eq!(parsed.args, args);
        }

        #[test]
        fn never_panics(line in any::<String>()) {
            let _ = parse_line(&line);
        }
    }
}
