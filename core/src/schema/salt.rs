//! Salt specifications: how a salted table turns a logical row key into a physical one.
//!
//! physical key = salt ++ logical key, where salt = the bucket `hash(hashed part) mod N`
//! written in a fixed width. The specification is part of the table descriptor (and so of
//! the catalog), so every client that opens the table salts the same way.
//!
//! * Buckets: `N` in `1..=65_536`.
//! * Format of the salt: [`SaltFormat::Binary`] (1 byte when `N <= 256`, else 2 bytes,
//!   big-endian), [`SaltFormat::Decimal`] (zero-padded to the digits of `N - 1`, as seed 002's
//!   `hashCode % 1000` written as `"000"`..`"999"`), or [`SaltFormat::Hex`] (lowercase,
//!   zero-padded to the hex digits of `N - 1`). The text forms keep keys readable in a shell.
//! * Hash (stable by contract: a key's bucket never changes between Basalt versions, since
//!   data written by one version must be found by the next):
//!   [`SaltHash::Xxh3`] = XXH3-64 with seed 0 of the hashed bytes, mod `N`;
//!   [`SaltHash::Md5`] = the first 8 bytes of MD5 of the hashed bytes read as a big-endian
//!   `u64`, mod `N`. Both outputs are fixed by published specifications (see
//!   [`crate::keys::hash`]).
//! * Hashed part: the whole logical key; its first `n` bytes (keys shorter than `n` are
//!   refused); or one component of a [`KeySchema`] composite key (seed 000 hashes the
//!   conversation id, so a conversation lives in one bucket).
//!
//! Invariants: every bucket's salt has the same width and salts sort in bucket order, so
//! bucket `b` owns exactly the physical keys in `[salt(b), salt(b + 1))`; the table's split
//! keys are `salt(1)..salt(N - 1)`; [`SaltSpec::bucket`] is a pure function of the spec and
//! the logical key.

use crate::error::{Error, Result};
use crate::keys::hash::{md5, xxh3};
use crate::keys::KeySchema;
use serde::{Deserialize, Serialize};

/// The most buckets a salted table may have.
pub const MAX_BUCKETS: u32 = 65_536;

/// How a bucket number is written at the front of the physical key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SaltFormat {
    /// Raw big-endian bytes: 1 byte for up to 256 buckets, else 2.
    #[default]
    Binary,
    /// Zero-padded decimal text.
    Decimal,
    /// Zero-padded lowercase hexadecimal text.
    Hex,
}

/// The stable hash that picks a key's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SaltHash {
    /// XXH3-64, seed 0, mod N.
    #[default]
    Xxh3,
    /// The first 8 bytes of MD5 as a big-endian u64, mod N.
    Md5,
}

/// Which part of the logical key is hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum HashedPart {
    /// The whole key.
    #[default]
    WholeKey,
    /// The first `n` bytes.
    Prefix(u32),
    /// The encoded bytes of component `index` of keys laid out by `schema`.
    Component {
        /// The key layout.
        schema: KeySchema,
        /// The hashed component.
        index: u32,
    },
}

/// A salted table's salt: bucket count, format, hash and hashed part.
///
/// ```
/// use basalt_core::{SaltFormat, SaltSpec};
/// let s = SaltSpec::new(1000).format(SaltFormat::Decimal);
/// let physical = s.physical_key(b"user42").unwrap();
/// assert_eq!(&physical[3..], b"user42");
/// assert_eq!(s.logical_key(&physical).unwrap(), b"user42");
/// assert_eq!(s.split_keys().len(), 999);
/// assert_eq!(s.salt(7), b"007".to_vec());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaltSpec {
    /// Number of buckets, 1..=65_536.
    pub buckets: u32,
    /// How the bucket is written.
    pub format: SaltFormat,
    /// Which hash picks the bucket.
    pub hash: SaltHash,
    /// Which part of the key is hashed.
    pub part: HashedPart,
}

impl SaltSpec {
    /// `buckets` buckets, binary salt, XXH3 of the whole key.
    pub fn new(buckets: u32) -> Self {
        SaltSpec {
            buckets,
            format: SaltFormat::Binary,
            hash: SaltHash::Xxh3,
            part: HashedPart::WholeKey,
        }
    }
    /// Sets the salt format.
    pub fn format(mut self, f: SaltFormat) -> Self {
        self.format = f;
        self
    }
    /// Sets the hash.
    pub fn hash(mut self, h: SaltHash) -> Self {
        self.hash = h;
        self
    }
    /// Hashes the first `n` bytes of every key.
    pub fn hash_prefix(mut self, n: u32) -> Self {
        self.part = HashedPart::Prefix(n);
        self
    }
    /// Hashes component `index` of keys laid out by `schema`.
    pub fn hash_component(mut self, schema: KeySchema, index: u32) -> Self {
        self.part = HashedPart::Component { schema, index };
        self
    }

    /// Checks the bucket count and hashed part.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_BUCKETS).contains(&self.buckets) {
            return Err(Error::bad_argument(format!(
                "salt bucket count {} is outside 1..={MAX_BUCKETS}",
                self.buckets
            )));
        }
        match &self.part {
            HashedPart::WholeKey => Ok(()),
            HashedPart::Prefix(0) => Err(Error::bad_argument("hashed prefix must not be empty")),
            HashedPart::Prefix(_) => Ok(()),
            HashedPart::Component { schema, index } => {
                if (*index as usize) < schema.fields.len() {
                    Ok(())
                } else {
                    Err(Error::bad_argument(format!(
                        "hashed component {index} is outside a key schema of {} fields",
                        schema.fields.len()
                    )))
                }
            }
        }
    }

    /// The width of every salt in bytes.
    pub fn width(&self) -> usize {
        let max = self.buckets.saturating_sub(1).max(1);
        match self.format {
            SaltFormat::Binary => {
                if self.buckets <= 256 {
                    1
                } else {
                    2
                }
            }
            SaltFormat::Decimal => max.to_string().len(),
            SaltFormat::Hex => format!("{max:x}").len(),
        }
    }

    /// The salt of `bucket` (the first bytes of every physical key in it).
    pub fn salt(&self, bucket: u32) -> Vec<u8> {
        let w = self.width();
        match self.format {
            SaltFormat::Binary => bucket.to_be_bytes()[4 - w..].to_vec(),
            SaltFormat::Decimal => format!("{bucket:0w$}").into_bytes(),
            SaltFormat::Hex => format!("{bucket:0w$x}").into_bytes(),
        }
    }

    /// The split keys a salted table is created with: the salts of buckets 1..N.
    pub fn split_keys(&self) -> Vec<Vec<u8>> {
        (1..self.buckets).map(|b| self.salt(b)).collect()
    }

    /// The bytes of `logical` that are hashed.
    pub fn hashed_bytes<'a>(&self, logical: &'a [u8]) -> Result<&'a [u8]> {
        match &self.part {
            HashedPart::WholeKey => Ok(logical),
            HashedPart::Prefix(n) => logical.get(..*n as usize).ok_or_else(|| {
                Error::bad_argument(format!(
                    "row key of {} bytes is shorter than the salt's hashed prefix of {n}",
                    logical.len()
                ))
            }),
            HashedPart::Component { schema, index } => schema
                .component_span(logical, *index as usize)
                .and_then(|r| logical.get(r))
                .ok_or_else(|| {
                    Error::bad_argument(format!(
                        "row key does not hold the salt's hashed component {index}"
                    ))
                }),
        }
    }

    /// The bucket of the hashed bytes `h`.
    fn bucket_of_hashed(&self, h: &[u8]) -> u32 {
        let n = u64::from(self.buckets.max(1));
        let v = match self.hash {
            SaltHash::Xxh3 => xxh3(h),
            SaltHash::Md5 => {
                let d = md5(h);
                let mut w = [0u8; 8];
                w.copy_from_slice(&d[..8]);
                u64::from_be_bytes(w)
            }
        };
        (v % n) as u32
    }

    /// The bucket of a logical key.
    pub fn bucket(&self, logical: &[u8]) -> Result<u32> {
        Ok(self.bucket_of_hashed(self.hashed_bytes(logical)?))
    }

    /// The physical key of a logical key.
    pub fn physical_key(&self, logical: &[u8]) -> Result<Vec<u8>> {
        if logical.is_empty() {
            return Err(Error::bad_argument("row key must not be empty"));
        }
        let mut k = self.salt(self.bucket(logical)?);
        k.extend_from_slice(logical);
        Ok(k)
    }

    /// The logical key of a physical key (the salt stripped).
    pub fn logical_key<'a>(&self, physical: &'a [u8]) -> Result<&'a [u8]> {
        physical
            .get(self.width()..)
            .ok_or_else(|| Error::bad_argument("physical row key shorter than its salt"))
    }

    /// The end offset of the hashed part in `key` when `key` (a key or a key prefix) holds
    /// it completely; `None` for whole-key hashing, where no prefix fixes the bucket.
    fn hashed_end(&self, key: &[u8]) -> Option<usize> {
        match &self.part {
            HashedPart::WholeKey => None,
            HashedPart::Prefix(n) => (key.len() >= *n as usize).then_some(*n as usize),
            HashedPart::Component { schema, index } => {
                schema.component_span(key, *index as usize).map(|r| r.end)
            }
        }
    }

    /// The only bucket that can hold keys starting with `prefix`, when the prefix fixes
    /// the hashed part.
    pub fn bucket_for_prefix(&self, prefix: &[u8]) -> Option<u32> {
        let end = self.hashed_end(prefix)?;
        let h = self.hashed_bytes(prefix.get(..end)?).ok()?;
        Some(self.bucket_of_hashed(h))
    }

    /// The only bucket that can hold keys in `[lo, hi)` (both bounds given), when both
    /// share the bytes up to the end of the hashed part: every key between them then
    /// shares them too.
    pub fn bucket_for_range(&self, lo: &[u8], hi: &[u8]) -> Option<u32> {
        let end = self.hashed_end(lo)?;
        if hi.get(..end)? != lo.get(..end)? {
            return None;
        }
        self.bucket_for_prefix(lo)
    }

    /// The bucket whose physical key range holds physical row `row` (the number of
    /// bucket boundaries at or below it).
    pub fn bucket_of_physical(&self, row: &[u8]) -> u32 {
        let (mut lo, mut hi) = (1u32, self.buckets);
        // Boundaries salt(1) < ... < salt(N-1); find how many are <= row.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.salt(mid).as_slice() <= row {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo - 1
    }

    /// True when the physical range `[start, end)` (empty `end` = unbounded) lies inside
    /// one bucket: no bucket boundary falls strictly inside it.
    pub fn within_one_bucket(&self, start: &[u8], end: &[u8]) -> bool {
        let b = self.bucket_of_physical(start);
        if b + 1 >= self.buckets {
            return true;
        }
        !end.is_empty() && end <= self.salt(b + 1).as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Field, Kind};
    use proptest::prelude::*;

    #[test]
    fn widths_and_salts() {
        assert_eq!(SaltSpec::new(256).width(), 1);
        assert_eq!(SaltSpec::new(257).salt(256), vec![1, 0]);
        assert_eq!(SaltSpec::new(1).width(), 1);
        let d = SaltSpec::new(128).format(SaltFormat::Decimal);
        assert_eq!((d.width(), d.salt(5)), (3, b"005".to_vec()));
        let h = SaltSpec::new(65_536).format(SaltFormat::Hex);
        assert_eq!((h.width(), h.salt(255)), (4, b"00ff".to_vec()));
        assert!(SaltSpec::new(0).validate().is_err());
        assert!(SaltSpec::new(65_537).validate().is_err());
        assert!(SaltSpec::new(2).hash_prefix(0).validate().is_err());
        let schema = KeySchema::new(vec![Field::new(Kind::U64)]);
        assert!(SaltSpec::new(2)
            .hash_component(schema, 1)
            .validate()
            .is_err());
    }

    #[test]
    fn buckets_never_change_between_versions() {
        // Pinned answers: if one of these changes, data written before can no longer be found.
        let x = SaltSpec::new(1000);
        let m = SaltSpec::new(1000).hash(SaltHash::Md5);
        assert_eq!(
            x.bucket(b"").unwrap(),
            (0x2d06800538d394c2u64 % 1000) as u32
        );
        // MD5("abc") = 900150983cd24fb0...
        assert_eq!(
            m.bucket(b"abc").unwrap(),
            (0x900150983cd24fb0u64 % 1000) as u32
        );
    }

    #[test]
    fn narrowing_by_prefix_and_range() {
        let schema = KeySchema::new(vec![Field::new(Kind::U64), Field::new(Kind::U64).desc()]);
        let s = SaltSpec::new(128).hash_component(schema.clone(), 0);
        let conv = 42u64.to_be_bytes();
        let b = s.bucket_for_prefix(&conv).unwrap();
        assert_eq!(b, s.bucket(&[&conv[..], &[0; 8]].concat()).unwrap());
        assert_eq!(s.bucket_for_prefix(&conv[..4]), None);
        let lo = [&conv[..], &[1; 8]].concat();
        let hi = [&conv[..], &[9; 8]].concat();
        assert_eq!(s.bucket_for_range(&lo, &hi), Some(b));
        assert_eq!(s.bucket_for_range(&lo, &43u64.to_be_bytes()), None);
        assert_eq!(SaltSpec::new(8).bucket_for_prefix(b"abc"), None);
        assert!(s.physical_key(b"short").is_err());
        assert!(SaltSpec::new(4)
            .hash_prefix(4)
            .physical_key(b"abc")
            .is_err());
    }

    proptest! {
        #[test]
        fn physical_keys_land_in_their_buckets_range(
            n in 1u32..=70_000, fmt in 0..3u8, key in proptest::collection::vec(any::<u8>(), 1..12)
        ) {
            let f = [SaltFormat::Binary, SaltFormat::Decimal, SaltFormat::Hex][fmt as usize];
            let s = SaltSpec::new(n.min(MAX_BUCKETS)).format(f);
            let b = s.bucket(&key).unwrap();
            prop_assert!(b < s.buckets);
            let p = s.physical_key(&key).unwrap();
            prop_assert_eq!(s.bucket_of_physical(&p), b);
            prop_assert_eq!(s.logical_key(&p).unwrap(), &key[..]);
            prop_assert!(p.starts_with(&s.salt(b)));
            if b + 1 < s.buckets {
                prop_assert!(p < s.salt(b + 1));
                prop_assert!(s.salt(b) < s.salt(b + 1));
            }
            prop_assert!(s.within_one_bucket(&s.salt(b), &p));
        }
    }
}
