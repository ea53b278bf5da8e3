//! Reverse timestamps and reversed strings, the seeds' tools for "newest first" keys and for
//! moving the fast-changing end of an identifier to the front.
//!
//! Invariants: every reversal is an involution on its domain (`reverse(reverse(x)) == x`)
//! and reverses order: `a < b` implies `reverse_ts(a) > reverse_ts(b)`, and the same for
//! the 19-digit decimal form, whose fixed width makes byte order numeric order.

use crate::error::{Error, Result};

/// `u64::MAX - t`: larger (newer) times give smaller values.
pub fn reverse_ts(t: u64) -> u64 {
    u64::MAX - t
}

/// [`reverse_ts`] as 8 big-endian bytes, so that newer times sort first in a row key.
pub fn reverse_ts_bytes(t: u64) -> [u8; 8] {
    reverse_ts(t).to_be_bytes()
}

/// `Long.MAX_VALUE - t` as the seeds write it: 19 decimal digits, zero-padded, so that
/// newer times sort first as text. `t` must lie in `0..=i64::MAX`.
///
/// ```
/// use basalt_core::keys::{parse_reverse_decimal, reverse_decimal};
/// // seed 000's reversed message id
/// assert_eq!(reverse_decimal(327139894897401900).unwrap(), "8896232141957373907");
/// assert_eq!(reverse_decimal(i64::MAX as u64).unwrap(), "0000000000000000000");
/// assert_eq!(parse_reverse_decimal("8896232141957373907").unwrap(), 327139894897401900);
/// assert!(reverse_decimal(u64::MAX).is_err());
/// ```
pub fn reverse_decimal(t: u64) -> Result<String> {
    let max = i64::MAX as u64;
    if t > max {
        return Err(Error::bad_argument(format!(
            "{t} is above Long.MAX_VALUE and has no decimal reverse timestamp"
        )));
    }
    Ok(format!("{:019}", max - t))
}

/// The time a [`reverse_decimal`] text stands for.
pub fn parse_reverse_decimal(s: &str) -> Result<u64> {
    if s.len() != 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::bad_argument(format!(
            "{s:?} is not a 19-digit reverse timestamp"
        )));
    }
    let v: u64 = s
        .parse()
        .map_err(|_| Error::bad_argument(format!("{s:?} is not a number")))?;
    let max = i64::MAX as u64;
    if v > max {
        return Err(Error::bad_argument(format!(
            "{s:?} is above Long.MAX_VALUE"
        )));
    }
    Ok(max - v)
}

/// The characters of `s` in reverse order (seed 001: `reverse(mobile)`).
///
/// ```
/// assert_eq!(basalt_core::keys::reverse_str("13512345678"), "87654321531");
/// ```
pub fn reverse_str(s: &str) -> String {
    s.chars().rev().collect()
}

/// The bytes of `b` in reverse order.
pub fn reverse_bytes(b: &[u8]) -> Vec<u8> {
    b.iter().rev().copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn reversals_invert_order_and_round_trip(a in 0..=i64::MAX as u64, b in 0..=i64::MAX as u64, s in ".{0,12}") {
            prop_assert_eq!(reverse_ts(a).cmp(&reverse_ts(b)), b.cmp(&a));
            prop_assert_eq!(reverse_ts_bytes(a).cmp(&reverse_ts_bytes(b)), b.cmp(&a));
            let (da, db) = (reverse_decimal(a).unwrap(), reverse_decimal(b).unwrap());
            prop_assert_eq!(da.len(), 19);
            prop_assert_eq!(da.as_bytes().cmp(db.as_bytes()), b.cmp(&a));
            prop_assert_eq!(parse_reverse_decimal(&da).unwrap(), a);
            prop_assert_eq!(reverse_str(&reverse_str(&s)), s.clone());
            prop_assert_eq!(reverse_bytes(&reverse_bytes(s.as_bytes())), s.as_bytes().to_vec());
        }
    }

    #[test]
    fn bad_decimal_texts_are_errors() {
        assert!(parse_reverse_decimal("123").is_err());
        assert!(parse_reverse_decimal("922337203685477580x").is_err());
        assert!(parse_reverse_decimal("9999999999999999999").is_err());
        assert_eq!(reverse_ts(0), u64::MAX);
    }
}
