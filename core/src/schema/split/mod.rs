//! Pre-split algorithms: the split keys a table is created with, so that it starts life as
//! `n` regions instead of one.
//!
//! Three algorithms reproduce HBase's `org.apache.hadoop.hbase.util.RegionSplitter`:
//!
//! * [`SplitAlgorithm::HexString`] (`HexStringSplit`): rows are lowercase hexadecimal
//!   strings, by default over `"00000000"..="ffffffff"`;
//! * [`SplitAlgorithm::DecimalString`] (`DecimalStringSplit`): rows are decimal strings, by
//!   default over `"00000000"..="99999999"`;
//! * [`SplitAlgorithm::Uniform`] (`UniformSplit`): rows are raw bytes, by default over the
//!   empty row up to eight `0xFF` bytes.
//!
//! The arithmetic is HBase's, to the digit: the string splits divide the inclusive range
//! `last - first + 1` by `n` with truncating integer division and place key `i` at
//! `first + i * (range / n)` (the last region gets the slop), left-padding each key with `'0'`
//! to the length of the last row. The uniform split follows `Bytes.split` /
//! `Bytes.iterateOnSplits`: both rows are right-padded with zero bytes to a common length,
//! read as big-endian unsigned integers, a zero byte is appended to both while the inclusive
//! range is smaller than `n`, and key `i` is `first + i * (range / n)` written back at that
//! length. Integers of any size are handled exactly (no overflow, no floating point), so a
//! table pre-split here has the same region boundaries as the same table pre-split by HBase.
//!
//! Invariant: every list of split keys returned by this module is non-empty per key and
//! strictly increasing in byte order, and holds exactly `n - 1` keys for `n` regions.

mod policy;

pub use policy::{choose_split_row, SplitPolicy};

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// The most regions a pre-split may ask for: HBase takes the region count as a Java `int`.
pub const MAX_PRESPLIT_REGIONS: usize = i32::MAX as usize;

/// HBase's default first row for both string splits (`DEFAULT_MIN_HEX`, `DEFAULT_MIN_DEC`).
const DEFAULT_FIRST_NUMBER_ROW: &[u8] = b"00000000";
/// HBase's default last row for `HexStringSplit` (`DEFAULT_MAX_HEX`).
const DEFAULT_LAST_HEX_ROW: &[u8] = b"ffffffff";
/// HBase's default last row for `DecimalStringSplit` (`DEFAULT_MAX_DEC`).
const DEFAULT_LAST_DECIMAL_ROW: &[u8] = b"99999999";
/// HBase's default last row for `UniformSplit`; its default first row is empty.
const DEFAULT_LAST_UNIFORM_ROW: [u8; 8] = [0xFF; 8];

/// A pre-split algorithm, as HBase's RegionSplitter.SplitAlgorithm.
///
/// ```
/// use basalt_core::SplitAlgorithm;
/// let keys = SplitAlgorithm::HexString.split(4).unwrap();
/// assert_eq!(keys, vec![b"40000000".to_vec(), b"80000000".to_vec(), b"c0000000".to_vec()]);
/// assert!(SplitAlgorithm::Uniform.split(1).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SplitAlgorithm {
    /// HBase's `HexStringSplit`: rows are hexadecimal strings (keys are written lowercase),
    /// by default over `"00000000"..="ffffffff"`. Suits row keys prefixed with a hex hash.
    HexString,
    /// HBase's `DecimalStringSplit`: rows are decimal strings, by default over
    /// `"00000000"..="99999999"`. Suits row keys prefixed with a decimal number.
    DecimalString,
    /// HBase's `UniformSplit`: rows are raw bytes, by default from the empty row to eight
    /// `0xFF` bytes. Suits row keys that start with uniformly random bytes.
    Uniform,
}

impl SplitAlgorithm {
    /// n-1 split keys for n regions over the algorithm's default range.
    ///
    /// The same as [`SplitAlgorithm::split_range`] over [`SplitAlgorithm::default_rows`].
    /// Fails with [`Error::BadArgument`] if `n < 2`, if `n` exceeds
    /// `MAX_PRESPLIT_REGIONS`, or if the key space holds fewer than `n` rows
    /// (`HexString`: 2^32, `DecimalString`: 10^8).
    pub fn split(&self, n: usize) -> Result<Vec<Vec<u8>>> {
        let (first, last) = self.default_rows();
        self.split_range(n, &first, &last)
    }

    /// Same over [first, last] given as the algorithm's textual/byte rows.
    ///
    /// This is HBase's `setFirstRow(String)` / `setLastRow(String)` followed by
    /// `split(n)`. For the string algorithms `first` and `last` are digit strings in the
    /// algorithm's radix (hex digits may be either case; no sign, no spaces), and every key
    /// is padded to `last.len()` digits. For `Uniform` they are raw row bytes (HBase's
    /// `setFirstRow(byte[])`); `first` may be empty.
    ///
    /// Fails with [`Error::BadArgument`] if `n < 2` or `n > MAX_PRESPLIT_REGIONS`, if a row
    /// is not a number in the radix, if `last` is not greater than `first`, or (string
    /// algorithms) if the inclusive range holds fewer than `n` values. `Uniform` never runs
    /// out of keys: like HBase it lengthens the keys instead.
    pub fn split_range(&self, n: usize, first: &[u8], last: &[u8]) -> Result<Vec<Vec<u8>>> {
        if n < 2 {
            return Err(Error::bad_argument(format!(
                "a pre-split needs at least 2 regions, got {n}"
            )));
        }
        if n > MAX_PRESPLIT_REGIONS {
            return Err(Error::bad_argument(format!(
                "a pre-split takes at most {MAX_PRESPLIT_REGIONS} regions, got {n}"
            )));
        }
        let regions = u64::try_from(n).map_err(|_| {
            Error::bad_argument(format!("region count {n} does not fit in 64 bits"))
        })?;
        match self {
            SplitAlgorithm::HexString => number_string_split(regions, first, last, 16),
            SplitAlgorithm::DecimalString => number_string_split(regions, first, last, 10),
            SplitAlgorithm::Uniform => uniform_split(regions, first, last),
        }
    }

    /// The algorithm's default first and last rows, as HBase's `firstRow()` and `lastRow()`
    /// return them: `("00000000", "ffffffff")`, `("00000000", "99999999")`, and
    /// `([], [0xFF; 8])`.
    pub fn default_rows(&self) -> (Vec<u8>, Vec<u8>) {
        match self {
            SplitAlgorithm::HexString => (
                DEFAULT_FIRST_NUMBER_ROW.to_vec(),
                DEFAULT_LAST_HEX_ROW.to_vec(),
            ),
            SplitAlgorithm::DecimalString => (
                DEFAULT_FIRST_NUMBER_ROW.to_vec(),
                DEFAULT_LAST_DECIMAL_ROW.to_vec(),
            ),
            SplitAlgorithm::Uniform => (Vec::new(), DEFAULT_LAST_UNIFORM_ROW.to_vec()),
        }
    }
}

/// Checks explicit split keys: non-empty keys, strictly increasing after sorting, no duplicates; returns them sorted.
///
/// As HBase's `createTable(desc, splitKeys)`: the keys may be given in any order; an empty
/// key or a key given twice is an [`Error::BadArgument`]. No keys at all is valid (one
/// region).
pub fn validate_split_keys(mut keys: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>> {
    if keys.iter().any(|k| k.is_empty()) {
        return Err(Error::bad_argument("split keys must not be empty"));
    }
    keys.sort_unstable();
    if let Some(pair) = keys.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(Error::bad_argument(format!(
            "split keys must be unique, found {} more than once",
            binary_string(&pair[0])
        )));
    }
    Ok(keys)
}

/// HBase's `NumberStringSplit.split(n)` over user-given rows, in `radix` 16 or 10.
fn number_string_split(n: u64, first: &[u8], last: &[u8], radix: u32) -> Result<Vec<Vec<u8>>> {
    let first_value = parse_number_row(first, radix, "first")?;
    let last_value = parse_number_row(last, radix, "last")?;
    if last_value <= first_value {
        return Err(Error::bad_argument(format!(
            "last row {} is not greater than first row {}",
            binary_string(last),
            binary_string(first)
        )));
    }
    // The last row is inclusive, hence the +1.
    let range = last_value.sub(&first_value).add(&Nat::from_u64(1));
    if range < Nat::from_u64(n) {
        return Err(Error::bad_argument(format!(
            "cannot split {}..={} into {n} regions: the range holds only {} rows",
            binary_string(first),
            binary_string(last),
            range.to_digits(10).escape_ascii()
        )));
    }
    let (step, _slop) = range.div_rem_small(n);
    // HBase pads to the last row's length (`rowComparisonLength`).
    let width = last.len();
    let mut keys = Vec::new();
    let mut key = first_value;
    for _ in 1..n {
        key = key.add(&step);
        keys.push(pad_left(key.to_digits(radix), width, b'0'));
    }
    Ok(keys)
}

/// Parses a string-split row as `new BigInteger(row, radix)` does, minus signs and
/// non-ASCII digits.
fn parse_number_row(row: &[u8], radix: u32, which: &str) -> Result<Nat> {
    Nat::parse_digits(row, radix).ok_or_else(|| {
        let kind = if radix == 16 {
            "hexadecimal"
        } else {
            "decimal"
        };
        Error::bad_argument(format!(
            "{which} row {} is not a {kind} number",
            binary_string(row)
        ))
    })
}

/// HBase's `UniformSplit.split(n)`: `Bytes.split(first, last, inclusive = true, n - 1)`
/// without its two endpoints.
fn uniform_split(n: u64, first: &[u8], last: &[u8]) -> Result<Vec<Vec<u8>>> {
    if last <= first {
        return Err(Error::bad_argument(format!(
            "last row {} is not greater than first row {}",
            binary_string(last),
            binary_string(first)
        )));
    }
    // Right-pad the shorter row with zero bytes (`Bytes.padTail`).
    let mut width = first.len().max(last.len());
    let mut low = first.to_vec();
    low.resize(width, 0);
    let mut high = last.to_vec();
    high.resize(width, 0);
    if high <= low {
        return Err(Error::bad_argument(format!(
            "last row {} is not greater than first row {} once both are zero-padded to \
             {width} bytes",
            binary_string(last),
            binary_string(first)
        )));
    }
    let mut start = Nat::from_be_bytes(&low);
    let mut stop = Nat::from_be_bytes(&high);
    let parts = Nat::from_u64(n);
    // `inclusive`: the last row counts, hence the +1.
    let mut range = stop.sub(&start).add(&Nat::from_u64(1));
    // While the range is smaller than the number of parts, HBase appends a zero byte to
    // both (padded) rows and tries again. `stop > start`, so each round multiplies the
    // range by about 256 and the loop ends after at most eight rounds.
    while range < parts {
        start = start.mul_small(256);
        stop = stop.mul_small(256);
        width += 1;
        range = stop.sub(&start).add(&Nat::from_u64(1));
    }
    let (step, _slop) = range.div_rem_small(n);
    let mut keys = Vec::new();
    let mut key = start;
    for _ in 1..n {
        key = key.add(&step);
        // key <= stop < 256^width, so the bytes always fit in `width`.
        keys.push(key.to_be_bytes(width));
    }
    Ok(keys)
}

/// Left-pads `s` with `fill` to `width` bytes, leaving a longer `s` alone (`StringUtils.leftPad`).
fn pad_left(s: Vec<u8>, width: usize, fill: u8) -> Vec<u8> {
    if s.len() >= width {
        return s;
    }
    let mut out = vec![fill; width - s.len()];
    out.extend_from_slice(&s);
    out
}

/// A row for error messages: printable ASCII as is, other bytes as `\xNN`
/// (HBase's `Bytes.toStringBinary`).
fn binary_string(row: &[u8]) -> String {
    let mut out = String::with_capacity(row.len() + 2);
    out.push('"');
    for &b in row {
        if (0x20..0x7F).contains(&b) && b != b'\\' && b != b'"' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out.push('"');
    out
}

/// An unsigned integer of any size: little-endian 64-bit limbs with no zero limb at the
/// top (zero is no limbs). Just enough arithmetic for the splits, all of it exact.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Nat(Vec<u64>);

impl Nat {
    fn from_u64(v: u64) -> Self {
        let mut n = Nat(vec![v]);
        n.trim();
        n
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    /// `self * mul + add`.
    fn mul_add_small(&self, mul: u64, add: u64) -> Self {
        let mut limbs = Vec::with_capacity(self.0.len() + 1);
        let mut carry = u128::from(add);
        for &limb in &self.0 {
            let t = u128::from(limb) * u128::from(mul) + carry;
            limbs.push(t as u64);
            carry = t >> 64;
        }
        limbs.push(carry as u64);
        let mut n = Nat(limbs);
        n.trim();
        n
    }

    fn mul_small(&self, mul: u64) -> Self {
        self.mul_add_small(mul, 0)
    }

    fn add(&self, other: &Nat) -> Self {
        let len = self.0.len().max(other.0.len());
        let mut limbs = Vec::with_capacity(len + 1);
        let mut carry = false;
        for i in 0..len {
            let a = self.0.get(i).copied().unwrap_or(0);
            let b = other.0.get(i).copied().unwrap_or(0);
            let (s1, c1) = a.overflowing_add(b);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            limbs.push(s2);
            carry = c1 || c2;
        }
        limbs.push(u64::from(carry));
        let mut n = Nat(limbs);
        n.trim();
        n
    }

    /// `self - other`; callers guarantee `self >= other`.
    fn sub(&self, other: &Nat) -> Self {
        debug_assert!(*self >= *other, "Nat::sub would go negative");
        let mut limbs = Vec::with_capacity(self.0.len());
        let mut borrow = false;
        for (i, &a) in self.0.iter().enumerate() {
            let b = other.0.get(i).copied().unwrap_or(0);
            let (d1, b1) = a.overflowing_sub(b);
            let (d2, b2) = d1.overflowing_sub(u64::from(borrow));
            limbs.push(d2);
            borrow = b1 || b2;
        }
        let mut n = Nat(limbs);
        n.trim();
        n
    }

    /// Truncating division by a non-zero `d`: `(self / d, self % d)`.
    fn div_rem_small(&self, d: u64) -> (Self, u64) {
        debug_assert!(d != 0, "Nat::div_rem_small by zero");
        let d = u128::from(d.max(1));
        let mut limbs = vec![0u64; self.0.len()];
        let mut rem: u128 = 0;
        for (q, &limb) in limbs.iter_mut().zip(&self.0).rev() {
            let cur = (rem << 64) | u128::from(limb);
            *q = (cur / d) as u64;
            rem = cur % d;
        }
        let mut q = Nat(limbs);
        q.trim();
        (q, rem as u64)
    }

    /// Reads big-endian unsigned bytes.
    fn from_be_bytes(bytes: &[u8]) -> Self {
        let limbs = bytes
            .rchunks(8)
            .map(|chunk| chunk.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
            .collect();
        let mut n = Nat(limbs);
        n.trim();
        n
    }

    /// Big-endian unsigned bytes, left-padded with zero bytes to at least `width`.
    fn to_be_bytes(&self, width: usize) -> Vec<u8> {
        let mut bytes: Vec<u8> = self.0.iter().rev().flat_map(|l| l.to_be_bytes()).collect();
        let significant = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
        bytes.drain(..significant);
        pad_left(bytes, width, 0)
    }

    /// Parses ASCII digits in `radix` (either case); `None` if empty or not all digits.
    fn parse_digits(s: &[u8], radix: u32) -> Option<Self> {
        if s.is_empty() {
            return None;
        }
        let mut n = Nat(Vec::new());
        for &c in s {
            let digit = char::from(c).to_digit(radix)?;
            n = n.mul_add_small(u64::from(radix), u64::from(digit));
        }
        Some(n)
    }

    /// The shortest lowercase digit string in `radix` (Java's `BigInteger.toString(radix)`).
    fn to_digits(&self, radix: u32) -> Vec<u8> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = Vec::new();
        let mut n = self.clone();
        while !n.0.is_empty() {
            let (q, r) = n.div_rem_small(u64::from(radix));
            out.push(DIGITS[r as usize]);
            n = q;
        }
        if out.is_empty() {
            out.push(b'0');
        }
        out.reverse();
        out
    }
}

impl Ord for Nat {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}

impl PartialOrd for Nat {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests may panic; only library code must not.
mod tests;
