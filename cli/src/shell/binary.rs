//! HBase's `Bytes.toBytesBinary` and `Bytes.toStringBinary`: how the shell turns typed text
//! into row keys, values and split keys, and bytes back into text.
//!
//! Invariant: [`to_bytes_binary`]`(`[`to_string_binary`]`(b)) == b` for every byte string
//! `b` (the printer escapes the backslash itself, so every `\` it writes starts a `\xNN`).

/// Bytes as HBase's `Bytes.toStringBinary` prints them: printable ASCII (space to `~`)
/// other than `\` kept, every other byte as `\xNN` with upper-case hex digits.
pub fn to_string_binary(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if (0x20..=0x7E).contains(&b) && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02X}"));
        }
    }
    s
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Text decoded as HBase's `Bytes.toBytesBinary` does: `\xNN` (two hex digits, either case)
/// is the byte `0xNN`; anything else is kept as its UTF-8 bytes (a `\` not starting a valid
/// escape stays a backslash, where HBase would drop or fail on it).
pub fn to_bytes_binary(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') {
            if let (Some(h), Some(l)) = (
                b.get(i + 2).copied().and_then(hex),
                b.get(i + 3).copied().and_then(hex),
            ) {
                out.push((h << 4) | l);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(to_string_binary(b"ab\x00\xff\\"), "ab\\x00\\xFF\\x5C");
        assert_eq!(to_bytes_binary("a\\x41\\xfF"), b"aA\xff");
        assert_eq!(to_bytes_binary("\\x4"), b"\\x4");
        assert_eq!(to_bytes_binary("\\xZZ"), b"\\xZZ");
        assert_eq!(to_bytes_binary("\\"), b"\\");
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let s = to_string_binary(&bytes);
            prop_assert!(s.bytes().all(|c| (0x20..=0x7E).contains(&c)));
            prop_assert_eq!(to_bytes_binary(&s), bytes);
        }

        #[test]
        fn printable_text_is_kept(s in "[ -\\[\\]-~]{0,40}") {
            prop_assert_eq!(to_string_binary(s.as_bytes()), s.clone());
            prop_assert_eq!(to_bytes_binary(&s), s.as_bytes().to_vec());
        }
    }
}
