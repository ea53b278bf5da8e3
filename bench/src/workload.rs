//! The YCSB-style data both engines get: row keys, field values, the read order, and the
//! one-value row encoding fjall stores.
//!
//! Keys are `user` + a 19-digit zero-padded number, YCSB's FNV-64 hash of the insert index
//! (its "hashed" insert order), so consecutive inserts land all over the key space. A row has
//! [`FIELDS`] fields `field0..field9` of [`FIELD_LEN`] pseudo-random bytes, taken from a
//! pre-generated pool at an offset derived from (row, field), so every value is known in
//! advance and a read can check the bytes it got back.

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

/// Fields per row (YCSB's `fieldcount`).
pub const FIELDS: usize = 10;
/// Bytes per field (YCSB's `fieldlength`).
pub const FIELD_LEN: usize = 100;
/// Bytes in a row key: `user` + 19 digits.
pub const KEY_LEN: usize = 23;
/// The field names, which are Basalt's column qualifiers.
pub const FIELD_NAMES: [&str; FIELDS] = [
    "field0", "field1", "field2", "field3", "field4", "field5", "field6", "field7", "field8",
    "field9",
];
/// Size of the pool field values are cut from.
const POOL_LEN: usize = 1 << 20;
/// Seed of every pseudo-random choice, so runs are repeatable.
const SEED: u64 = 0x00BA_5A17;

/// A row key.
pub type Key = [u8; KEY_LEN];

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 bytes of `val`, low byte first, made
/// non-negative as Java's `Math.abs` of a `long` would (our unsigned result also covers
/// `i64::MIN`, which still has 19 digits).
pub fn fnv_hash64(mut val: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= val & 0xff;
        h = h.wrapping_mul(1_099_511_628_211);
        val >>= 8;
    }
    (h as i64).unsigned_abs()
}

/// The key of the row inserted `index`-th.
pub fn key_of(index: u64) -> Key {
    key_with_number(fnv_hash64(index))
}

/// `user` + `n` zero-padded to 19 digits.
pub fn key_with_number(n: u64) -> Key {
    let mut k = [0u8; KEY_LEN];
    k.copy_from_slice(format!("user{n:019}").as_bytes());
    k
}

/// `regions - 1` split keys evenly spaced over the key numbers (`0..=2^63`).
pub fn split_keys(regions: u64) -> Vec<Key> {
    let step = (1u64 << 63) / regions;
    (1..regions).map(|i| key_with_number(step * i)).collect()
}

fn mix(mut x: u64) -> u64 {
    // SplitMix64's finaliser.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Everything a suite run needs, generated once and shared by both engines.
pub struct Workload {
    /// Rows loaded.
    pub rows: u64,
    /// Row keys by insert index.
    pub keys: Vec<Key>,
    /// Insert indexes to read, in order (uniform random, with repeats).
    pub read_order: Vec<u32>,
    pool: Vec<u8>,
}

impl Workload {
    /// Generates keys for `rows` rows and `reads` random reads of them.
    pub fn new(rows: u64, reads: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(SEED);
        let mut pool = vec![0u8; POOL_LEN];
        rng.fill_bytes(&mut pool);
        let keys = (0..rows).map(key_of).collect();
        let read_order = (0..reads)
            .map(|_| rng.random_range(0..rows) as u32)
            .collect();
        Workload {
            rows,
            keys,
            read_order,
            pool,
        }
    }

    /// The value of field `field` of row `row`.
    pub fn field(&self, row: u64, field: usize) -> &[u8] {
        let off =
            (mix(row * FIELDS as u64 + field as u64) % (POOL_LEN - FIELD_LEN + 1) as u64) as usize;
        &self.pool[off..off + FIELD_LEN]
    }

    /// `0..rows` cut into `parts` contiguous ranges, one per writer.
    pub fn shares(&self, parts: usize) -> Vec<std::ops::Range<u64>> {
        let n = self.rows;
        let p = parts as u64;
        (0..p).map(|i| n * i / p..n * (i + 1) / p).collect()
    }

    /// The read order cut into `parts` slices, one per reader.
    pub fn read_shares(&self, parts: usize) -> Vec<&[u32]> {
        let n = self.read_order.len();
        (0..parts)
            .map(|i| &self.read_order[n * i / parts..n * (i + 1) / parts])
            .collect()
    }

    /// Row `row` as the single value fjall stores: for each field, a 1-byte name length,
    /// the name, a 2-byte little-endian value length, the value.
    pub fn encode_row(&self, row: u64) -> Vec<u8> {
        encode_fields(
            FIELD_NAMES
                .iter()
                .enumerate()
                .map(|(j, name)| (name.as_bytes(), self.field(row, j))),
        )
    }

    /// True when `fields` (name, value) are exactly row `row`'s fields in order.
    pub fn check_row<'a>(
        &self,
        row: u64,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> bool {
        let mut n = 0;
        for (j, (name, value)) in fields.into_iter().enumerate() {
            if j >= FIELDS || name != FIELD_NAMES[j].as_bytes() || value != self.field(row, j) {
                return false;
            }
            n += 1;
        }
        n == FIELDS
    }
}

/// (name, value) fields as one value (see [`Workload::encode_row`]); names up to 255 bytes,
/// values up to 64 KiB.
pub fn encode_fields<'a>(fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIELDS * (1 + 6 + 2 + FIELD_LEN));
    for (name, v) in fields {
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.extend_from_slice(&(v.len() as u16).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// Splits an encoded fjall row into (name, value) fields; `None` if it is malformed.
pub fn decode_row(mut buf: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut out = Vec::with_capacity(FIELDS);
    while !buf.is_empty() {
        let nlen = *buf.first()? as usize;
        let name = buf.get(1..1 + nlen)?;
        let lenb = buf.get(1 + nlen..3 + nlen)?;
        let vlen = u16::from_le_bytes([lenb[0], lenb[1]]) as usize;
        let value = buf.get(3 + nlen..3 + nlen + vlen)?;
        out.push((name, value));
        buf = &buf[3 + nlen + vlen..];
    }
    Some(out)
}

/// A cheap fold over a value, so scans really read the bytes they return.
pub fn touch(acc: u64, value: &[u8]) -> u64 {
    let first = value.first().copied().unwrap_or(0) as u64;
    let last = value.last().copied().unwrap_or(0) as u64;
    acc.wrapping_mul(31)
        .wrapping_add(first ^ (last << 8) ^ value.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_and_spread() {
        let w = Workload::new(1000, 10);
        assert!(w.keys.iter().all(|k| k.starts_with(b"user")));
        let mut sorted = w.keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 1000);
        let splits = split_keys(8);
        assert_eq!(splits.len(), 7);
        let first_region = w.keys.iter().filter(|k| **k < splits[0]).count();
        assert!((60..190).contains(&first_region), "{first_region}");
    }

    #[test]
    fn row_encoding_round_trips() {
        let w = Workload::new(10, 10);
        let enc = w.encode_row(7);
        let fields = decode_row(&enc).unwrap();
        assert!(w.check_row(7, fields.iter().copied()));
        assert!(!w.check_row(6, fields.iter().copied()));
        assert!(!w.check_row(7, fields.iter().copied().take(9)));
    }
}
