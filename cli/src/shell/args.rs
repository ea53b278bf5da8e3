//! Reading typed arguments out of parsed [`Value`]s, with errors that name the command and
//! say what was expected.

use super::binary::to_bytes_binary;
use super::parse::Value;
use super::ShellError;

/// The arguments of one command, with its name for errors.
pub struct Args<'a> {
    /// The command's name.
    pub cmd: &'a str,
    /// Its arguments.
    pub vals: &'a [Value],
}

impl<'a> Args<'a> {
    /// A usage error for this command.
    pub fn usage(&self, message: impl Into<String>) -> ShellError {
        ShellError::Usage {
            command: self.cmd.to_string(),
            message: message.into(),
        }
    }

    /// Fails unless there are between `min` and `max` arguments.
    pub fn count(&self, min: usize, max: usize) -> Result<(), ShellError> {
        let n = self.vals.len();
        if n < min || n > max {
            let want = if min == max {
                format!("{min}")
            } else {
                format!("{min} to {max}")
            };
            return Err(self.usage(format!("wrong number of arguments ({n} for {want})")));
        }
        Ok(())
    }

    /// The `i`-th argument as a string.
    pub fn string(&self, i: usize, what: &str) -> Result<String, ShellError> {
        match self.vals.get(i) {
            Some(v) => as_string(v)
                .ok_or_else(|| self.usage(format!("{what} must be a string, not {}", v.kind()))),
            None => Err(self.usage(format!("missing {what}"))),
        }
    }

    /// The `i`-th argument as bytes (`\xNN` decoded).
    pub fn bytes(&self, i: usize, what: &str) -> Result<Vec<u8>, ShellError> {
        Ok(to_bytes_binary(&self.string(i, what)?))
    }

    /// The `i`-th argument as an integer, if present.
    pub fn opt_int(&self, i: usize, what: &str) -> Result<Option<i64>, ShellError> {
        match self.vals.get(i) {
            None => Ok(None),
            Some(v) => as_int(v)
                .map(Some)
                .ok_or_else(|| self.usage(format!("{what} must be an integer, not {}", v.kind()))),
        }
    }
}

/// A string value (strings and constants).
pub fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) | Value::Const(s) => Some(s.clone()),
        _ => None,
    }
}

/// An integer value (or a string of digits, as `TTL => '18000'`).
pub fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A boolean value (or `'true'`/`'false'` in any case).
pub fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Str(s) | Value::Const(s) => match s.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The key of a hash entry as an upper-case name (`VERSIONS` or `'VERSIONS'`).
pub fn key_name(k: &Value) -> Option<String> {
    as_string(k).map(|s| s.to_ascii_uppercase())
}

/// `f:q` split into family and qualifier bytes (no `:`: the family, empty qualifier).
pub fn column(spec: &str) -> (Vec<u8>, Option<Vec<u8>>) {
    match spec.split_once(':') {
        Some((f, q)) => (to_bytes_binary(f), Some(to_bytes_binary(q))),
        None => (to_bytes_binary(spec), None),
    }
}

/// A list of column specs from a string or an array of strings.
pub fn columns(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Str(s) => Some(vec![s.clone()]),
        Value::Array(items) => items.iter().map(as_string).collect(),
        _ => None,
    }
}
