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
/// use basalt_core::schema::split::SplitAlgorithm;
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
    /// [`MAX_PRESPLIT_REGIONS`], or if the key space holds fewer than `n` rows
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
mod tests {
    //! Expected values come from HBase itself: `TestRegionSplitter` in
    //! `hbase-server/src/test/java/org/apache/hadoop/hbase/util/` (`unitTestHexStringSplit`,
    //! `unitTestUniformSplit`, `testCreatePresplitTableHex`, `testCreatePresplitTableUniform`,
    //! `testUserInput`), and otherwise are worked by hand from the arithmetic of
    //! `RegionSplitter.NumberStringSplit.split(int)` and `Bytes.iterateOnSplits` (the
    //! worked steps are in the comments).
    //!
    //! Note: HBase before the "last row is inclusive" change computed `range = last - first`
    //! (no +1) and so gave "3fffffff", "7ffffffe", "bffffffd" for four hex regions; current
    //! HBase (and this module) computes `range = last - first + 1` and gives "40000000",
    //! "80000000", "c0000000", which is what `testCreatePresplitTableHex` expects today
    //! ("10000000" .. "f0000000" for 16 regions).

    use super::*;
    use proptest::prelude::*;

    fn strs(keys: &[Vec<u8>]) -> Vec<&str> {
        keys.iter()
            .map(|k| std::str::from_utf8(k).unwrap_or("<not utf-8>"))
            .collect()
    }

    fn assert_strictly_increasing(keys: &[Vec<u8>]) {
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1], "{:?} !< {:?}", pair[0], pair[1]);
        }
    }

    #[test]
    fn hex_string_split_matches_hbase() {
        let hex = SplitAlgorithm::HexString;
        // unitTestHexStringSplit.
        assert_eq!(strs(&hex.split(2).unwrap()), ["80000000"]);
        assert_eq!(strs(&hex.split(3).unwrap()), ["55555555", "aaaaaaaa"]);
        // range = 0xffffffff + 1 = 2^32; 2^32 / 4 = 0x40000000.
        assert_eq!(
            strs(&hex.split(4).unwrap()),
            ["40000000", "80000000", "c0000000"]
        );
        // testCreatePresplitTableHex: 16 regions.
        let expected: Vec<String> = (1..16u32).map(|i| format!("{:x}0000000", i)).collect();
        assert_eq!(strs(&hex.split(16).unwrap()), expected);
        // 2^32 / 5 = 858993459 = 0x33333333: multiples of it.
        assert_eq!(
            strs(&hex.split(5).unwrap()),
            ["33333333", "66666666", "99999999", "cccccccc"]
        );
        // 2^32 / 1000 = 4294967 = 0x418937; key 1 is padded to 8 digits.
        let keys = hex.split(1000).unwrap();
        assert_eq!(keys.len(), 999);
        assert_eq!(keys[0], b"00418937");
        assert_eq!(keys[998], format!("{:08x}", 4_294_967u64 * 999).as_bytes());
    }

    #[test]
    fn decimal_string_split_matches_hbase_arithmetic() {
        let dec = SplitAlgorithm::DecimalString;
        // range = 99999999 + 1 = 10^8.
        assert_eq!(strs(&dec.split(2).unwrap()), ["50000000"]);
        assert_eq!(strs(&dec.split(3).unwrap()), ["33333333", "66666666"]);
        assert_eq!(
            strs(&dec.split(4).unwrap()),
            ["25000000", "50000000", "75000000"]
        );
        // 10^8 / 7 = 14285714.
        assert_eq!(
            strs(&dec.split(7).unwrap()),
            ["14285714", "28571428", "42857142", "57142856", "71428570", "85714284"]
        );
        // 10^8 / 300 = 333333; the first keys are zero-padded.
        let keys = dec.split(300).unwrap();
        assert_eq!(keys[0], b"00333333");
        assert_eq!(keys[298], b"99666567");
        // The whole key space: 10^8 regions would be allowed, 10^8 + 1 is not.
        assert!(matches!(dec.split(100_000_001), Err(Error::BadArgument(_))));
    }

    #[test]
    fn uniform_split_matches_hbase() {
        let uni = SplitAlgorithm::Uniform;
        // unitTestUniformSplit.
        assert_eq!(uni.split(2).unwrap(), [vec![0x80, 0, 0, 0, 0, 0, 0, 0]]);
        assert_eq!(uni.split(3).unwrap(), [vec![0x55; 8], vec![0xAA; 8]]);
        // testCreatePresplitTableUniform: 16 regions at 0x10, 0x20, .., 0xf0.
        let expected: Vec<Vec<u8>> = (1..16u8)
            .map(|i| {
                let mut k = vec![0u8; 8];
                k[0] = i << 4;
                k
            })
            .collect();
        assert_eq!(uni.split(16).unwrap(), expected);
        // range = 2^64; 2^64 / 4 = 2^62.
        assert_eq!(
            uni.split(4).unwrap(),
            [
                vec![0x40, 0, 0, 0, 0, 0, 0, 0],
                vec![0x80, 0, 0, 0, 0, 0, 0, 0],
                vec![0xC0, 0, 0, 0, 0, 0, 0, 0],
            ]
        );
        // 2^64 / 5 = 0x3333333333333333.
        let keys = uni.split(5).unwrap();
        assert_eq!(keys[0], vec![0x33; 8]);
        assert_eq!(keys[3], vec![0xCC; 8]);
    }

    #[test]
    fn user_given_rows_match_hbase() {
        let hex = SplitAlgorithm::HexString;
        // testUserInput: ("00", "AA") is fine; keys are padded to 2 digits, lowercase.
        // range = 0xAA + 1 = 171; 171 / 4 = 42 = 0x2a.
        assert_eq!(
            strs(&hex.split_range(4, b"00", b"AA").unwrap()),
            ["2a", "54", "7e"]
        );
        assert!(hex.split_range(100, b"00", b"AA").is_ok());
        assert!(hex.split_range(100, b"AA", b"00").is_err());
        assert!(hex.split_range(100, b"AA", b"AA").is_err());
        // ("0", "2", 3) is fine: range 3, step 1.
        assert_eq!(strs(&hex.split_range(3, b"0", b"2").unwrap()), ["1", "2"]);
        // ("0", "A", 11) is fine, ("0", "A", 12) is too granular.
        assert_eq!(
            strs(&hex.split_range(11, b"0", b"A").unwrap()),
            ["1", "2", "3", "4", "5", "6", "7", "8", "9", "a"]
        );
        assert!(matches!(
            hex.split_range(12, b"0", b"A"),
            Err(Error::BadArgument(_))
        ));
        // The first row's value, not its length, matters; the last row sets the width.
        // first = 0x10, last = 0x2f: range 32, step 16, key 0x20 padded to 2 digits.
        assert_eq!(
            strs(&hex.split_range(2, b"0000000000000010", b"2f").unwrap()),
            ["20"]
        );
        // Hashes longer than u128: 40-digit hex rows.
        let keys = hex
            .split_range(2, b"0000000000000000000000000000000000000000", &[b'f'; 40])
            .unwrap();
        assert_eq!(keys, [[b"8".as_slice(), &[b'0'; 39]].concat()]);

        let dec = SplitAlgorithm::DecimalString;
        // range = 1000 - 100 + 1 = 901; 901 / 3 = 300.
        assert_eq!(
            strs(&dec.split_range(3, b"100", b"1000").unwrap()),
            ["0400", "0700"]
        );
        assert!(dec.split_range(3, b"1a", b"99").is_err());
        assert!(dec.split_range(3, b"", b"99").is_err());
        assert!(hex.split_range(3, b"-1", b"ff").is_err());
        assert!(hex.split_range(3, b"+0", b"ff").is_err());

        let uni = SplitAlgorithm::Uniform;
        // testUserInput: ("\x00", "\x0A", 12) is fine. range 11 < 12 parts, so a zero byte
        // is appended: range = 0x0A00 + 1 = 2561, step 2561 / 12 = 213 = 0x00d5.
        let keys = uni.split_range(12, &[0x00], &[0x0A]).unwrap();
        assert_eq!(keys.len(), 11);
        assert_eq!(keys[0], [0x00, 0xD5]);
        assert_eq!(keys[10], (213u16 * 11).to_be_bytes());
        // ("\x00", "\x02", 3): range 3, step 1.
        assert_eq!(uni.split_range(3, &[0], &[2]).unwrap(), [vec![1], vec![2]]);
        assert!(uni.split_range(100, &[0xAA], &[0x00]).is_err());
        assert!(uni.split_range(100, &[0xAA], &[0xAA]).is_err());
        // Rows of different lengths are zero-padded on the right: [1] vs [1, 0] are equal.
        assert!(uni.split_range(2, &[1], &[1, 0]).is_err());
        // "aaa" .. "aab": range 2, 2 parts, step 1.
        assert_eq!(
            uni.split_range(2, b"aaa", b"aab").unwrap(),
            [b"aab".to_vec()]
        );
        // 3 parts: range 2 < 3, append a byte: "aaa\0" .. "aab\0", range 257, step 85.
        assert_eq!(
            uni.split_range(3, b"aaa", b"aab").unwrap(),
            [b"aaa\x55".to_vec(), b"aaa\xAA".to_vec()]
        );
        // Default rows given explicitly give the default split.
        for algo in [
            SplitAlgorithm::HexString,
            SplitAlgorithm::DecimalString,
            SplitAlgorithm::Uniform,
        ] {
            let (first, last) = algo.default_rows();
            assert_eq!(
                algo.split_range(10, &first, &last).unwrap(),
                algo.split(10).unwrap()
            );
        }
        // HBase's spelling of the default last hex row ("FFFFFFFF") gives the same keys.
        assert_eq!(
            hex.split_range(7, b"00000000", b"FFFFFFFF").unwrap(),
            hex.split(7).unwrap()
        );
    }

    #[test]
    fn bad_region_counts_are_rejected() {
        for algo in [
            SplitAlgorithm::HexString,
            SplitAlgorithm::DecimalString,
            SplitAlgorithm::Uniform,
        ] {
            for n in [0, 1] {
                let err = algo.split(n).unwrap_err();
                assert!(matches!(&err, Error::BadArgument(m) if m.contains("at least 2 regions")));
            }
            assert!(matches!(
                algo.split(MAX_PRESPLIT_REGIONS + 1),
                Err(Error::BadArgument(_))
            ));
        }
        // More regions than hex values.
        let err = SplitAlgorithm::HexString
            .split_range(17, b"0", b"f")
            .unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)));
        assert_eq!(
            SplitAlgorithm::HexString
                .split_range(16, b"0", b"f")
                .unwrap()
                .len(),
            15
        );
    }

    #[test]
    fn split_keys_are_validated_and_sorted() {
        let sorted =
            validate_split_keys(vec![b"m".to_vec(), b"c".to_vec(), b"x".to_vec()]).unwrap();
        assert_eq!(sorted, [b"c".to_vec(), b"m".to_vec(), b"x".to_vec()]);
        assert!(validate_split_keys(Vec::new()).unwrap().is_empty());
        assert!(matches!(
            validate_split_keys(vec![b"a".to_vec(), Vec::new()]),
            Err(Error::BadArgument(_))
        ));
        let err =
            validate_split_keys(vec![b"b".to_vec(), b"a".to_vec(), b"b".to_vec()]).unwrap_err();
        assert!(matches!(&err, Error::BadArgument(m) if m.contains("\"b\"")));
        // Byte order, not string order: 0xFF sorts after 'z'.
        let sorted = validate_split_keys(vec![vec![0xFF], b"z".to_vec(), vec![0x00]]).unwrap();
        assert_eq!(sorted, [vec![0x00], b"z".to_vec(), vec![0xFF]]);
        // Generated splits pass validation unchanged.
        let keys = SplitAlgorithm::Uniform.split(50).unwrap();
        assert_eq!(validate_split_keys(keys.clone()).unwrap(), keys);
    }

    #[test]
    fn nat_arithmetic() {
        let big = Nat::parse_digits(b"123456789012345678901234567890123456789012", 10).unwrap();
        assert_eq!(
            big.to_digits(10),
            b"123456789012345678901234567890123456789012"
        );
        assert_eq!(Nat::parse_digits(b"0", 16).unwrap().to_digits(16), b"0");
        assert_eq!(Nat::parse_digits(b"00ff", 16).unwrap().to_digits(16), b"ff");
        let (q, r) = big.div_rem_small(7);
        assert_eq!(q.mul_add_small(7, r), big);
        assert_eq!(big.add(&big).sub(&big), big);
        assert_eq!(
            Nat::from_be_bytes(&[0, 0, 1, 2]).to_be_bytes(4),
            [0, 0, 1, 2]
        );
        assert_eq!(Nat::from_be_bytes(&[0xFF; 17]).to_be_bytes(17), [0xFF; 17]);
        assert!(Nat::from_be_bytes(&[1, 0]) > Nat::from_be_bytes(&[0xFF]));
    }

    /// Independent u128 model of `NumberStringSplit.split(n)` for ranges that fit.
    fn model_number_split(
        n: u64,
        first: u128,
        last: u128,
        radix: u32,
        width: usize,
    ) -> Vec<Vec<u8>> {
        let step = (last - first + 1) / u128::from(n);
        (1..u128::from(n))
            .map(|i| {
                let v = first + step * i;
                let s = if radix == 16 {
                    format!("{v:x}")
                } else {
                    format!("{v}")
                };
                format!("{s:0>width$}").into_bytes()
            })
            .collect()
    }

    /// Independent u128 model of `Bytes.split(a, b, true, n - 1)` for rows of <= 8 bytes.
    fn model_uniform_split(n: u64, first: &[u8], last: &[u8]) -> Vec<Vec<u8>> {
        let mut width = first.len().max(last.len());
        let value = |row: &[u8], width: usize| {
            let mut v = 0u128;
            for i in 0..width {
                v = (v << 8) | u128::from(row.get(i).copied().unwrap_or(0));
            }
            v
        };
        let (mut a, mut b) = (value(first, width), value(last, width));
        while b - a + 1 < u128::from(n) {
            a <<= 8;
            b <<= 8;
            width += 1;
        }
        let step = (b - a + 1) / u128::from(n);
        (1..u128::from(n))
            .map(|i| (a + step * i).to_be_bytes()[16 - width..].to_vec())
            .collect()
    }

    proptest! {
        #[test]
        fn default_splits_are_strictly_increasing_with_right_count_and_width(n in 2usize..2000) {
            for algo in [SplitAlgorithm::HexString, SplitAlgorithm::DecimalString, SplitAlgorithm::Uniform] {
                let keys = algo.split(n).unwrap();
                prop_assert_eq!(keys.len(), n - 1);
                for k in &keys {
                    prop_assert_eq!(k.len(), 8);
                }
                for pair in keys.windows(2) {
                    prop_assert!(pair[0] < pair[1]);
                }
                let (first, last) = algo.default_rows();
                prop_assert!(keys[0] > first);
                prop_assert!(keys[n - 2] <= last);
            }
            prop_assert_eq!(
                SplitAlgorithm::HexString.split(n).unwrap(),
                model_number_split(n as u64, 0, 0xffff_ffff, 16, 8)
            );
            prop_assert_eq!(
                SplitAlgorithm::DecimalString.split(n).unwrap(),
                model_number_split(n as u64, 0, 99_999_999, 10, 8)
            );
            prop_assert_eq!(
                SplitAlgorithm::Uniform.split(n).unwrap(),
                model_uniform_split(n as u64, &[], &[0xFF; 8])
            );
        }

        #[test]
        fn string_splits_over_user_rows_match_the_model(
            n in 2u64..300,
            a in any::<u64>(),
            b in any::<u64>(),
            extra_width in 0usize..4,
        ) {
            let (first, last) = (u128::from(a.min(b)), u128::from(a.max(b)));
            for radix in [16u32, 10] {
                let algo = if radix == 16 { SplitAlgorithm::HexString } else { SplitAlgorithm::DecimalString };
                let fmt = |v: u128| if radix == 16 { format!("{v:X}") } else { format!("{v}") };
                let first_row = fmt(first);
                let last_row = format!("{}{}", "0".repeat(extra_width), fmt(last));
                let got = algo.split_range(n as usize, first_row.as_bytes(), last_row.as_bytes());
                if last <= first || last - first + 1 < u128::from(n) {
                    prop_assert!(got.is_err());
                } else {
                    let keys = got.unwrap();
                    prop_assert_eq!(&keys, &model_number_split(n, first, last, radix, last_row.len()));
                    assert_strictly_increasing(&keys);
                }
            }
        }

        #[test]
        fn uniform_split_over_user_rows_matches_the_model(
            n in 2u64..3000,
            first in proptest::collection::vec(any::<u8>(), 0..6),
            last in proptest::collection::vec(any::<u8>(), 1..6),
        ) {
            let got = SplitAlgorithm::Uniform.split_range(n as usize, &first, &last);
            let width = first.len().max(last.len());
            let mut padded_first = first.clone();
            padded_first.resize(width, 0);
            let mut padded_last = last.clone();
            padded_last.resize(width, 0);
            if padded_last <= padded_first {
                prop_assert!(got.is_err());
            } else {
                let keys = got.unwrap();
                prop_assert_eq!(keys.len() as u64, n - 1);
                prop_assert_eq!(&keys, &model_uniform_split(n, &first, &last));
                assert_strictly_increasing(&keys);
                prop_assert!(keys[0] > first);
                prop_assert!(keys[keys.len() - 1] <= last || keys[keys.len() - 1].starts_with(&last));
            }
        }
    }
}
