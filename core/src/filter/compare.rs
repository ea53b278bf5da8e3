//! Comparators: what a compare filter tests a row key, family, qualifier or value against.
//!
//! Semantics are HBase's, written the way Basalt's [`CompareOp`] reads: the cell's bytes are
//! the left operand. For the binary comparators `op` orders the cell's bytes against the
//! comparator's (binary-prefix first cuts the cell's bytes to the prefix's length); the
//! others only say "matches" (equal) or "does not match" (unequal), so only `=` and `!=`
//! are useful with them, as in HBase:
//!
//! - substring: the cell's bytes, read as lossy UTF-8, contain the substring, ignoring case;
//! - regex: the regular expression (the `regex` crate's syntax) finds a match in the cell's
//!   bytes;
//! - null: matches nothing (a cell's bytes are never null; HBase's NullComparator);
//! - bit: the cell has the comparator's length and `cell op_bits mask` has a bit set.

use crate::error::{Error, Result};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// A comparison of a stored value with a given one. The stored value is the left operand:
/// `Less` passes when the stored value sorts before the given bytes. (HBase's checkAndMutate
/// puts the given value on the left; Basalt reads the way the condition is written.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CompareOp {
    /// stored < given
    Less,
    /// stored <= given
    LessOrEqual,
    /// stored == given
    Equal,
    /// stored != given
    NotEqual,
    /// stored >= given
    GreaterOrEqual,
    /// stored > given
    Greater,
}

impl CompareOp {
    /// Applies the operator to `stored` and `given` in unsigned lexicographic byte order.
    pub fn test(self, stored: &[u8], given: &[u8]) -> bool {
        self.holds(stored.cmp(given))
    }

    /// Whether the operator accepts `o`, the order of the left operand to the right one.
    pub fn holds(self, o: Ordering) -> bool {
        match self {
            CompareOp::Less => o.is_lt(),
            CompareOp::LessOrEqual => o.is_le(),
            CompareOp::Equal => o.is_eq(),
            CompareOp::NotEqual => o.is_ne(),
            CompareOp::GreaterOrEqual => o.is_ge(),
            CompareOp::Greater => o.is_gt(),
        }
    }
}

/// The bitwise operation of a [`Comparator::Bit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BitOp {
    /// and
    And,
    /// or
    Or,
    /// xor
    Xor,
}

/// What a compare filter tests bytes against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Comparator {
    /// BinaryComparator: lexicographic order of the bytes.
    Binary(Bytes),
    /// BinaryPrefixComparator: lexicographic order of the cell's first `len` bytes.
    BinaryPrefix(Bytes),
    /// SubstringComparator: contains the text, case-insensitively.
    Substring(String),
    /// RegexStringComparator: the expression finds a match.
    Regex(String),
    /// NullComparator: matches nothing.
    Null,
    /// BitComparator: same length and the bitwise operation leaves a bit set.
    Bit(Bytes, BitOp),
}

impl Comparator {
    /// BinaryComparator of `v`.
    pub fn binary(v: impl AsRef<[u8]>) -> Self {
        Comparator::Binary(Bytes::copy_from_slice(v.as_ref()))
    }

    /// BinaryPrefixComparator of `v`.
    pub fn binary_prefix(v: impl AsRef<[u8]>) -> Self {
        Comparator::BinaryPrefix(Bytes::copy_from_slice(v.as_ref()))
    }

    /// SubstringComparator of `s`.
    pub fn substring(s: impl Into<String>) -> Self {
        Comparator::Substring(s.into())
    }

    /// RegexStringComparator of `re`.
    pub fn regex(re: impl Into<String>) -> Self {
        Comparator::Regex(re.into())
    }
}

/// A comparator ready to run (regex compiled, substring lower-cased).
#[derive(Debug, Clone)]
pub(crate) enum Compiled {
    Binary(Bytes),
    BinaryPrefix(Bytes),
    Substring(String),
    Regex(Box<regex::bytes::Regex>),
    Null,
    Bit(Bytes, BitOp),
}

impl Compiled {
    pub(crate) fn new(c: &Comparator) -> Result<Self> {
        Ok(match c {
            Comparator::Binary(v) => Compiled::Binary(v.clone()),
            Comparator::BinaryPrefix(v) => Compiled::BinaryPrefix(v.clone()),
            Comparator::Substring(s) => Compiled::Substring(s.to_lowercase()),
            Comparator::Regex(re) => {
                Compiled::Regex(Box::new(regex::bytes::Regex::new(re).map_err(|e| {
                    Error::bad_argument(format!("bad regular expression: {e}"))
                })?))
            }
            Comparator::Null => Compiled::Null,
            Comparator::Bit(v, op) => Compiled::Bit(v.clone(), *op),
        })
    }

    /// The cell's bytes against the comparator: `Equal` means "matches". A match-style
    /// comparator (substring, regex, null, bit) that does not match orders the cell below
    /// it, as HBase's comparators answer 1 (comparator above the cell) for a non-match: so
    /// `<` and `<=` keep non-matching cells and `>` keeps none.
    fn order(&self, cell: &[u8]) -> Ordering {
        let matched = |m: bool| {
            if m {
                Ordering::Equal
            } else {
                Ordering::Less
            }
        };
        match self {
            Compiled::Binary(v) => cell.cmp(v.as_ref()),
            Compiled::BinaryPrefix(v) => cell[..cell.len().min(v.len())].cmp(v.as_ref()),
            Compiled::Substring(s) => matched(
                String::from_utf8_lossy(cell)
                    .to_lowercase()
                    .contains(s.as_str()),
            ),
            Compiled::Regex(re) => matched(re.is_match(cell)),
            Compiled::Null => Ordering::Less,
            Compiled::Bit(v, op) => matched(
                v.len() == cell.len()
                    && v.iter().zip(cell).any(|(a, c)| match op {
                        BitOp::And => a & c != 0,
                        BitOp::Or => a | c != 0,
                        BitOp::Xor => a ^ c != 0,
                    }),
            ),
        }
    }

    /// True when `cell op comparator` holds.
    pub(crate) fn test(&self, op: CompareOp, cell: &[u8]) -> bool {
        op.holds(self.order(cell))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(c: Comparator, op: CompareOp, v: &str) -> bool {
        Compiled::new(&c).unwrap().test(op, v.as_bytes())
    }

    #[test]
    fn comparators_follow_hbase() {
        assert!(t(Comparator::binary("b"), CompareOp::Less, "a"));
        assert!(!t(Comparator::binary("b"), CompareOp::Less, "b"));
        assert!(t(Comparator::binary_prefix("ab"), CompareOp::Equal, "abc"));
        assert!(t(Comparator::binary_prefix("ab"), CompareOp::Greater, "b"));
        assert!(t(Comparator::substring("LUE"), CompareOp::Equal, "value"));
        assert!(t(Comparator::regex("^v.l"), CompareOp::Equal, "value"));
        assert!(!t(Comparator::regex("^x"), CompareOp::Equal, "value"));
        assert!(!t(Comparator::Null, CompareOp::Equal, ""));
        assert!(t(Comparator::Null, CompareOp::NotEqual, ""));
        let bit = Comparator::Bit(Bytes::from_static(&[0x0F]), BitOp::And);
        assert!(Compiled::new(&bit).unwrap().test(CompareOp::Equal, &[0x01]));
        assert!(!Compiled::new(&bit).unwrap().test(CompareOp::Equal, &[0x10]));
        assert!(!Compiled::new(&bit)
            .unwrap()
            .test(CompareOp::Equal, &[0x01, 0]));
        assert!(Compiled::new(&Comparator::regex("(")).is_err());
    }
}
