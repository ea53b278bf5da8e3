//! Per-file bloom filters: which rows (or row + column pairs) a file may hold.
//!
//! The writer collects one 64-bit hash per distinct row ([`BloomType::Row`]) or per distinct
//! (row, qualifier) ([`BloomType::RowCol`]) and builds the bit array once, at finish; the
//! reader loads it at open and keeps it in memory. The hash, the probe sequence and the
//! payload layout are specified in the `storefile` module doc and must never change without a
//! new hash id or format version: a filter that answers "absent" for a key the file holds
//! loses data.

use super::codec::{Cursor, Dec};
use super::MAX_BLOCK_LEN;
use crate::schema::BloomType;
use bytes::Bytes;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// The hash id of XXH3-64 (seed 0) with the Murmur3 `fmix64` step for the probe stride.
pub(crate) const HASH_XXH3: u32 = 1;
/// Bytes of the payload before the bits: kind, k, hash id, m.
pub(crate) const HEADER_LEN: usize = 1 + 1 + 4 + 8;
/// The smallest number of bits a filter has.
pub(crate) const MIN_BITS: u64 = 64;
/// The largest number of probes.
pub(crate) const MAX_K: u8 = 30;
/// The largest number of bits: the payload must fit in one block.
const MAX_BITS: u64 = ((MAX_BLOCK_LEN - HEADER_LEN) as u64) * 8;

/// The kind byte of a filter type.
pub(crate) fn kind_code(kind: BloomType) -> u8 {
    match kind {
        BloomType::None => 0,
        BloomType::Row => 1,
        BloomType::RowCol => 2,
    }
}

/// The hash of a row, for a ROW filter: XXH3-64 of the row bytes.
pub(crate) fn row_hash(row: &[u8]) -> u64 {
    xxh3_64(row)
}

/// The hash of a (row, qualifier) pair, for a ROWCOL filter: XXH3-64 of the row length as
/// u64 BE, the row, then the qualifier.
pub(crate) fn row_col_hash(row: &[u8], qualifier: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(&(row.len() as u64).to_be_bytes());
    h.update(row);
    h.update(qualifier);
    h.digest()
}

/// MurmurHash3's 64-bit finalizer.
fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// The `k` bit positions of hash `h` in a filter of `m` bits:
/// `(h + i * (fmix64(h) | 1) mod 2^64) mod m` for `i` in `0..k`.
fn probes(h: u64, k: u8, m: u64) -> impl Iterator<Item = u64> {
    let stride = fmix64(h) | 1;
    (0..u64::from(k)).map(move |i| h.wrapping_add(i.wrapping_mul(stride)) % m)
}

/// Filter size for `n` keys at false-positive rate `p`: `m` bits (a multiple of 8, at least
/// [`MIN_BITS`]) and `k` probes (1 ..= [`MAX_K`]).
pub(crate) fn dimensions(n: u64, p: f64) -> (u64, u8) {
    let ln2 = std::f64::consts::LN_2;
    let n_f = n.max(1) as f64;
    let raw = (-n_f * p.ln() / (ln2 * ln2)).ceil();
    // `as` saturates; NaN becomes 0 and is lifted to the minimum.
    let m = (raw as u64)
        .clamp(MIN_BITS, MAX_BITS)
        .div_ceil(8)
        .saturating_mul(8)
        .min(MAX_BITS);
    let k = ((m as f64 / n_f) * ln2).round();
    let k = (k as u64).clamp(1, u64::from(MAX_K)) as u8;
    (m, k)
}

/// Encodes the bloom payload of a `kind` filter (not `None`) over `hashes` at rate `p`.
pub(crate) fn encode(kind: BloomType, hashes: &[u64], p: f64, out: &mut Vec<u8>) {
    let (m, k) = dimensions(hashes.len() as u64, p);
    out.clear();
    out.push(kind_code(kind));
    out.push(k);
    out.extend_from_slice(&HASH_XXH3.to_be_bytes());
    out.extend_from_slice(&m.to_be_bytes());
    let start = out.len();
    out.resize(start + (m / 8) as usize, 0);
    let bits = &mut out[start..];
    for &h in hashes {
        for bit in probes(h, k, m) {
            bits[(bit / 8) as usize] |= 1 << (bit % 8);
        }
    }
}

/// A loaded filter.
#[derive(Debug, Clone)]
pub(crate) struct Bloom {
    kind: BloomType,
    k: u8,
    m: u64,
    bits: Bytes,
}

impl Bloom {
    /// Decodes and checks a bloom payload; the bits are a zero-copy slice of `buf`.
    pub(crate) fn decode(buf: &Bytes) -> Dec<Self> {
        let mut c = Cursor::at(buf, 0);
        let kind = match c.u8()? {
            1 => BloomType::Row,
            2 => BloomType::RowCol,
            other => return Err(format!("bad bloom kind {other}").into()),
        };
        let k = c.u8()?;
        if !(1..=MAX_K).contains(&k) {
            return Err(format!("bad bloom probe count {k}").into());
        }
        let hash = c.u32()?;
        if hash != HASH_XXH3 {
            return Err(format!("unknown bloom hash id {hash}").into());
        }
        let m = c.u64()?;
        if m < MIN_BITS || !m.is_multiple_of(8) || m > MAX_BITS {
            return Err(format!("bad bloom size of {m} bits").into());
        }
        if (c.remaining() as u64) != m / 8 {
            return Err(format!(
                "bloom of {m} bits needs {} bytes, block holds {}",
                m / 8,
                c.remaining()
            )
            .into());
        }
        Ok(Bloom {
            kind,
            k,
            m,
            bits: buf.slice(HEADER_LEN..),
        })
    }

    /// The filter's type.
    pub(crate) fn kind(&self) -> BloomType {
        self.kind
    }

    /// False only if no key with hash `h` was added.
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        probes(h, self.k, self.m).all(|bit| self.bits[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_follow_the_formula() {
        // n = 10 000, p = 0.01: m = ceil(95850.58...) = 95851 -> 95856, k = round(6.64) = 7.
        assert_eq!(dimensions(10_000, 0.01), (95_856, 7));
        assert_eq!(dimensions(1, 0.01), (64, 30));
        assert_eq!(dimensions(0, 0.5), (64, 30));
        let (m, k) = dimensions(u64::MAX, 1e-9);
        assert_eq!((m, k), (MAX_BITS, 1));
        assert!(MAX_BITS.is_multiple_of(8));
    }

    #[test]
    fn row_col_hash_is_xxh3_of_the_documented_bytes() {
        let mut buf = 2u64.to_be_bytes().to_vec();
        buf.extend_from_slice(b"abc");
        assert_eq!(row_col_hash(b"ab", b"c"), xxh3_64(&buf));
        assert_ne!(row_col_hash(b"ab", b"c"), row_col_hash(b"a", b"bc"));
    }

    /// Pins the hash and probe sequence: a change here breaks every existing file.
    #[test]
    fn hash_and_probes_are_stable() {
        assert_eq!(row_hash(b""), 0x2d06_8005_38d3_94c2);
        let mut out = Vec::new();
        encode(BloomType::Row, &[row_hash(b"row1")], 0.01, &mut out);
        assert_eq!(
            &out[..HEADER_LEN],
            &[1, 30, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 64]
        );
        let b = Bloom::decode(&Bytes::from(out)).unwrap();
        assert!(b.may_contain(row_hash(b"row1")));
    }
}
