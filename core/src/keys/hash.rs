//! Fixed-length hash prefixes for row keys: MD5, as seeds 001, 003 and 004 use, and XXH3-64,
//! a fast non-cryptographic hash.
//!
//! Why these crates: `md-5` (RustCrypto) is the maintained pure-Rust MD5, whose output is
//! fixed by RFC 1321. `xxhash-rust`'s `xxh3_64` implements XXH3, whose output has been frozen
//! since xxHash 0.8.0 (2020) and is specified in the xxHash repository's format document; a
//! key hashed today hashes the same in every later version and in every other XXH3
//! implementation (e.g. Python's `xxhash.xxh3_64`). Rust's `DefaultHasher` is not used: its
//! output may change between Rust releases.
//!
//! Invariant: each function's output depends only on its input bytes and length argument.

use crate::error::{Error, Result};
use md5::{Digest, Md5};

/// The MD5 digest of `data`.
pub fn md5(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// XXH3-64 of `data` with seed 0.
pub fn xxh3(data: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(data)
}

/// The first `len` bytes (1..=16) of MD5(`data`).
pub fn md5_prefix(data: &[u8], len: usize) -> Result<Vec<u8>> {
    check_len(len, 16)?;
    Ok(md5(data)[..len].to_vec())
}

/// The first `len` lowercase hex digits (1..=32) of MD5(`data`) (seed 003: "MD5, first six
/// characters as the user id prefix").
///
/// ```
/// use basalt_core::keys::md5_hex_prefix;
/// assert_eq!(md5_hex_prefix(b"", 8).unwrap(), "d41d8cd9");
/// ```
pub fn md5_hex_prefix(data: &[u8], len: usize) -> Result<String> {
    check_len(len, 32)?;
    Ok(hex(&md5(data))[..len].to_string())
}

/// The first `len` bytes (1..=8) of XXH3-64(`data`), big-endian.
pub fn xxh3_prefix(data: &[u8], len: usize) -> Result<Vec<u8>> {
    check_len(len, 8)?;
    Ok(xxh3(data).to_be_bytes()[..len].to_vec())
}

/// The first `len` lowercase hex digits (1..=16) of XXH3-64(`data`), big-endian.
pub fn xxh3_hex_prefix(data: &[u8], len: usize) -> Result<String> {
    check_len(len, 16)?;
    Ok(hex(&xxh3(data).to_be_bytes())[..len].to_string())
}

fn check_len(len: usize, max: usize) -> Result<()> {
    if len == 0 || len > max {
        return Err(Error::bad_argument(format!(
            "hash prefix length {len} is outside 1..={max}"
        )));
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers_never_change() {
        // RFC 1321 test suite.
        assert_eq!(
            md5_hex_prefix(b"abc", 32).unwrap(),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(md5_prefix(b"abc", 2).unwrap(), vec![0x90, 0x01]);
        // XXH3-64, seed 0: the reference implementation's answers.
        assert_eq!(xxh3(b""), 0x2d06800538d394c2);
        assert_eq!(xxh3_hex_prefix(b"", 16).unwrap(), "2d06800538d394c2");
        assert_eq!(xxh3_prefix(b"", 1).unwrap(), vec![0x2d]);
    }

    #[test]
    fn bad_lengths_are_errors() {
        assert!(md5_prefix(b"x", 0).is_err());
        assert!(md5_prefix(b"x", 17).is_err());
        assert!(md5_hex_prefix(b"x", 33).is_err());
        assert!(xxh3_prefix(b"x", 9).is_err());
        assert!(xxh3_hex_prefix(b"x", 17).is_err());
    }
}
