//! The lexer of HBase's shell language: one command line into tokens, each with the column
//! (1-based, in characters) where it starts.
//!
//! Strings follow Ruby: in single quotes only `\'` and `\\` are escapes; in double quotes
//! `\"`, `\\`, `\n`, `\t`, `\r`, `\0` are, `\xNN` is kept as written (the `toBytesBinary`
//! step decodes it where bytes are meant) and any other `\c` is `c`. A `#` outside a
//! string starts a comment that runs to the end of the line.

use std::fmt;

/// A parse or lex error: where (1-based column) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The column (1-based, in characters) of the problem.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "syntax error at column {}: {}",
            self.column, self.message
        )
    }
}

impl std::error::Error for ParseError {}

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A bare word: a command name, `true`, `false`, `nil` or a constant such as `VERSIONS`.
    Word(String),
    /// A quoted string, escapes applied.
    Str(String),
    /// An integer.
    Int(i64),
    /// `,`
    Comma,
    /// `=>`
    Arrow,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
}

/// Splits `line` into tokens with their columns.
pub fn lex(line: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |column: usize, message: String| ParseError { column, message };
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        match c {
            ' ' | '\t' | '\r' | '\n' => i += 1,
            '#' => break,
            ',' => {
                out.push((Tok::Comma, col));
                i += 1;
            }
            '[' | ']' | '{' | '}' => {
                out.push((
                    match c {
                        '[' => Tok::LBracket,
                        ']' => Tok::RBracket,
                        '{' => Tok::LBrace,
                        _ => Tok::RBrace,
                    },
                    col,
                ));
                i += 1;
            }
            '=' => {
                if chars.get(i + 1) == Some(&'>') {
                    out.push((Tok::Arrow, col));
                    i += 2;
                } else {
                    return Err(err(col, "expected '=>' after '='".into()));
                }
            }
            '\'' | '"' => {
                let (s, next) = string(&chars, i)?;
                out.push((Tok::Str(s), col));
                i = next;
            }
            '-' | '0'..='9' => {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '_') {
                    i += 1;
                }
                let text: String = chars[start..i].iter().filter(|c| **c != '_').collect();
                if i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                    return Err(err(i + 1, format!("unexpected '{}' in a number", chars[i])));
                }
                let n = text
                    .parse::<i64>()
                    .map_err(|_| err(col, format!("'{text}' is not an integer (64-bit signed)")))?;
                out.push((Tok::Int(n), col));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push((Tok::Word(chars[start..i].iter().collect()), col));
            }
            other => {
                return Err(err(col, format!("unexpected character '{other}'")));
            }
        }
    }
    Ok(out)
}

/// Reads the string starting at the quote `chars[start]`; returns it and the index after
/// its closing quote.
fn string(chars: &[char], start: usize) -> Result<(String, usize), ParseError> {
    let quote = chars[start];
    let mut s = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        if c == quote {
            return Ok((s, i + 1));
        }
        if c == '\\' && i + 1 < chars.len() {
            let n = chars[i + 1];
            if quote == '\'' {
                match n {
                    '\'' | '\\' => s.push(n),
                    _ => {
                        s.push('\\');
                        s.push(n);
                    }
                }
            } else {
                match n {
                    'n' => s.push('\n'),
                    't' => s.push('\t'),
                    'r' => s.push('\r'),
                    '0' => s.push('\0'),
                    'x' => s.push_str("\\x"),
                    other => s.push(other),
                }
            }
            i += 2;
            continue;
        }
        s.push(c);
        i += 1;
    }
    Err(ParseError {
        column: start + 1,
        message: format!("string opened with {quote} is not closed"),
    })
}
