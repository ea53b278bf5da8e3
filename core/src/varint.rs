//! Unsigned LEB128 varints, shared by every on-disk format (WAL records, store files).
//!
//! Seven bits per byte, least significant group first, the high bit set on every byte but the
//! last; at most 10 bytes, and the value must fit in 64 bits. Decoding never panics and rejects
//! a cut, over-long or overflowing varint.

/// Appends `v`.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The encoded length of `v` (1 to 10 bytes).
pub fn len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Decodes a varint at the start of `buf`: the value and how many bytes it took.
#[inline(always)]
pub fn decode(buf: &[u8]) -> Result<(u64, usize), &'static str> {
    // Lengths are almost always one byte, sequence ids up to three.
    match buf {
        [b0, ..] if *b0 < 0x80 => Ok((u64::from(*b0), 1)),
        [b0, b1, ..] if *b1 < 0x80 => Ok((u64::from(*b0 & 0x7f) | u64::from(*b1) << 7, 2)),
        [b0, b1, b2, ..] if *b2 < 0x80 => Ok((
            u64::from(*b0 & 0x7f) | u64::from(*b1 & 0x7f) << 7 | u64::from(*b2) << 14,
            3,
        )),
        _ => decode_long(buf),
    }
}

/// [`decode`] for varints of four bytes or more, and for errors.
fn decode_long(buf: &[u8]) -> Result<(u64, usize), &'static str> {
    let mut v = 0u64;
    for i in 0..10 {
        let Some(&b) = buf.get(i) else {
            return Err("varint cut short");
        };
        if i == 9 && b > 1 {
            return Err("varint overflows 64 bits");
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((v, i + 1));
        }
    }
    Err("varint longer than 10 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(v in any::<u64>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = Vec::new();
            put(&mut out, v);
            prop_assert_eq!(out.len(), len(v));
            let n = out.len();
            out.extend_from_slice(&tail);
            prop_assert_eq!(decode(&out), Ok((v, n)));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn rejects_cut_long_and_overflowing() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[0x80]).is_err());
        assert!(decode(&[0xff; 10]).is_err());
        let mut max = vec![0xffu8; 9];
        max.push(1);
        assert_eq!(decode(&max), Ok((u64::MAX, 10)));
        let mut over = vec![0xffu8; 9];
        over.push(2);
        assert!(decode(&over).is_err());
    }
}
