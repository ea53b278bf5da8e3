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
    let sorted = validate_split_keys(vec![b"m".to_vec(), b"c".to_vec(), b"x".to_vec()]).unwrap();
    assert_eq!(sorted, [b"c".to_vec(), b"m".to_vec(), b"x".to_vec()]);
    assert!(validate_split_keys(Vec::new()).unwrap().is_empty());
    assert!(matches!(
        validate_split_keys(vec![b"a".to_vec(), Vec::new()]),
        Err(Error::BadArgument(_))
    ));
    let err = validate_split_keys(vec![b"b".to_vec(), b"a".to_vec(), b"b".to_vec()]).unwrap_err();
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
fn model_number_split(n: u64, first: u128, last: u128, radix: u32, width: usize) -> Vec<Vec<u8>> {
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
