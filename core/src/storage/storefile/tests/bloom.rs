//! Bloom filters: no false negatives, a bounded false-positive rate, checked at open.

use super::*;
use crate::schema::BloomType;
use rand::{Rng, SeedableRng};

const BLOOMS: [BloomType; 3] = [BloomType::None, BloomType::Row, BloomType::RowCol];

fn write_with(path: &Path, model: &Model, opts: WriterOptions) -> Result<()> {
    let mut w = StoreFileWriter::create_file(&crate::fs::StdFs::shared(), path, opts)?;
    for (k, v) in model {
        w.append(&cell(k, v))?;
    }
    w.finish()?;
    Ok(())
}

fn opts(bloom: BloomType, compression: Compression, block_size: usize) -> WriterOptions {
    WriterOptions {
        block_size,
        compression,
        bloom,
        ..Default::default()
    }
}

/// A file of `n` distinct rows `row{i}`, one cell each, with `bloom` at rate `p`.
fn rows_file(path: &Path, n: usize, bloom: BloomType, p: f64) {
    let model: Model = (0..n)
        .map(|i| {
            let k = key(format!("row{i:08}").as_bytes(), b"q", 1, CellType::Put, 1);
            (k, Bytes::from_static(b"v"))
        })
        .collect();
    let o = WriterOptions {
        bloom_fp_rate: p,
        ..opts(bloom, Compression::None, 4096)
    };
    write_with(path, &model, o).unwrap();
}

fn arb_bloom() -> impl Strategy<Value = BloomType> {
    proptest::sample::select(BLOOMS.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn no_false_negatives(
        model in arb_model(200),
        bloom in arb_bloom(),
        compression in arb_compression(),
        block_size in 64usize..2048,
        p in prop_oneof![Just(0.01), 0.0001f64..0.9],
    ) {
        let (_dir, path) = tmp();
        let o = WriterOptions { bloom_fp_rate: p, ..opts(bloom, compression, block_size) };
        write_with(&path, &model, o).unwrap();
        let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
        let expected = if model.is_empty() { BloomType::None } else { bloom };
        prop_assert_eq!(r.bloom_kind(), expected);
        for k in model.keys() {
            prop_assert!(r.may_contain_row(&k.row));
            prop_assert!(r.may_contain_row_col(&k.row, &k.qualifier));
        }
        // Scans are unaffected by the filter.
        let all = collect(r.scan_from(&min_key())).unwrap();
        prop_assert_eq!(all.len(), model.len());
    }
}

#[test]
fn false_positive_rate_is_near_target() {
    for bloom in [BloomType::Row, BloomType::RowCol] {
        let (_dir, path) = tmp();
        rows_file(&path, 10_000, bloom, 0.01);
        let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
        assert_eq!(r.bloom_kind(), bloom);
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x0b10_0f11);
        let trials = 100_000;
        let mut hits = 0;
        for _ in 0..trials {
            // Absent: present rows are `row` + 8 digits; these are `absent` + random.
            let row = format!("absent{:016x}", rng.random::<u64>());
            let present = match bloom {
                BloomType::Row => r.may_contain_row(row.as_bytes()),
                _ => r.may_contain_row_col(row.as_bytes(), b"q"),
            };
            hits += usize::from(present);
        }
        let rate = hits as f64 / trials as f64;
        assert!(rate < 0.03, "{bloom:?}: false-positive rate {rate}");
        // And every present key answers true.
        for i in 0..10_000 {
            let row = format!("row{i:08}");
            assert!(r.may_contain_row(row.as_bytes()));
            assert!(r.may_contain_row_col(row.as_bytes(), b"q"));
        }
    }
}

#[test]
fn each_kind_answers_only_its_own_queries() {
    let (_dir, path) = tmp();
    rows_file(&path, 1000, BloomType::Row, 0.01);
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    let absent_rows = (0..1000)
        .filter(|i| !r.may_contain_row(format!("nope{i}").as_bytes()))
        .count();
    assert!(absent_rows > 900, "row bloom rejects absent rows");
    assert!(
        r.may_contain_row_col(b"nope", b"q"),
        "row bloom says unknown"
    );

    rows_file(&path, 1000, BloomType::RowCol, 0.01);
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    assert!(
        r.may_contain_row(b"nope"),
        "rowcol bloom says unknown for rows"
    );
    let absent = (0..1000)
        .filter(|i| !r.may_contain_row_col(b"row00000001", format!("x{i}").as_bytes()))
        .count();
    assert!(absent > 900, "rowcol bloom rejects absent columns");
    // Length prefix: ("row0000000", "1q") is not ("row00000001", "q").
    let shifted = (0..1000)
        .filter(|i| {
            let row = format!("row{i:08}");
            let (a, b) = row.split_at(row.len() - 1);
            !r.may_contain_row_col(a.as_bytes(), format!("{b}q").as_bytes())
        })
        .count();
    assert!(shifted > 900);

    rows_file(&path, 1000, BloomType::None, 0.01);
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    assert_eq!(r.bloom_kind(), BloomType::None);
    assert!(r.may_contain_row(b"nope") && r.may_contain_row_col(b"nope", b"q"));
}

#[test]
fn no_bloom_block_without_bloom_or_cells() {
    let (_dir, path) = tmp();
    // Empty file with a bloom type: no block, trailer fields 0/0.
    write_with(
        &path,
        &Model::new(),
        opts(BloomType::Row, Compression::None, 64),
    )
    .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let t = trailer_fields(&bytes);
    assert_eq!((t.0, t.1), (0, 0));
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    assert_eq!(r.bloom_kind(), BloomType::None);
    // Non-empty file without a bloom: also 0/0; with one: the block ends at the trailer.
    rows_file(&path, 10, BloomType::None, 0.01);
    let t = trailer_fields(&std::fs::read(&path).unwrap());
    assert_eq!((t.0, t.1), (0, 0));
    rows_file(&path, 10, BloomType::Row, 0.01);
    let bytes = std::fs::read(&path).unwrap();
    let (off, len) = trailer_fields(&bytes);
    assert_eq!(off + u64::from(len), (bytes.len() - TRAILER_LEN) as u64);
    // Stored uncompressed, payload header as specified.
    let at = off as usize;
    assert_eq!(bytes[at], 0);
    let payload = &bytes[at + 5..at + len as usize - 4];
    assert_eq!(payload[0], 1);
    assert_eq!(u32::from_be_bytes(payload[2..6].try_into().unwrap()), 1);
    let m = u64::from_be_bytes(payload[6..14].try_into().unwrap());
    assert_eq!(payload.len() as u64, 14 + m / 8);
}

#[test]
fn bad_fp_rate_is_rejected() {
    let (_dir, path) = tmp();
    for p in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY] {
        let o = WriterOptions {
            bloom_fp_rate: p,
            ..Default::default()
        };
        assert!(matches!(
            StoreFileWriter::create_file(&crate::fs::StdFs::shared(), &path, o),
            Err(Error::BadArgument(_))
        ));
    }
    // Irrelevant without a bloom.
    let o = WriterOptions {
        bloom: BloomType::None,
        bloom_fp_rate: 0.0,
        ..Default::default()
    };
    assert!(StoreFileWriter::create_file(&crate::fs::StdFs::shared(), &path, o).is_ok());
}

use super::super::meta::TRAILER_LEN;

/// The trailer's bloom offset and length.
fn trailer_fields(file: &[u8]) -> (u64, u32) {
    let t = &file[file.len() - TRAILER_LEN..];
    (
        u64::from_be_bytes(t[36..44].try_into().unwrap()),
        u32::from_be_bytes(t[44..48].try_into().unwrap()),
    )
}

/// Rewrites the bloom payload with `edit` and fixes the block CRC, so that only the payload
/// checks can catch it; the open must fail with corruption at the bloom block.
fn corrupt_payload(edit: impl Fn(&mut Vec<u8>)) {
    let (_dir, path) = tmp();
    rows_file(&path, 100, BloomType::Row, 0.01);
    let good = std::fs::read(&path).unwrap();
    let (off, len) = trailer_fields(&good);
    let (at, len) = (off as usize, len as usize);
    let mut payload = good[at + 5..at + len - 4].to_vec();
    edit(&mut payload);
    let mut block = vec![0u8];
    block.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    block.extend_from_slice(&payload);
    let crc = crc32fast::hash(&block);
    block.extend_from_slice(&crc.to_be_bytes());
    // Rebuild the trailer around the new block length.
    let mut trailer = good[good.len() - TRAILER_LEN..].to_vec();
    trailer[44..48].copy_from_slice(&(block.len() as u32).to_be_bytes());
    let crc = crc32fast::hash(&trailer[..TRAILER_LEN - 4]);
    trailer[TRAILER_LEN - 4..].copy_from_slice(&crc.to_be_bytes());
    let mut bad = good[..at].to_vec();
    bad.extend_from_slice(&block);
    bad.extend_from_slice(&trailer);
    std::fs::write(&path, &bad).unwrap();
    let err = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None)
        .expect_err("corrupt bloom opened");
    assert_eq!(expect_corruption(&err, &path), off, "{err}");
}

#[test]
fn corrupt_bloom_payloads_are_rejected_at_open() {
    corrupt_payload(|p| p[0] = 0); // kind none
    corrupt_payload(|p| p[0] = 3); // unknown kind
    corrupt_payload(|p| p[1] = 0); // k = 0
    corrupt_payload(|p| p[1] = 31); // k too large
    corrupt_payload(|p| p[5] = 2); // unknown hash id
    corrupt_payload(|p| p[13] ^= 1); // m not a multiple of 8
    corrupt_payload(|p| p[13] = p[13].wrapping_add(8)); // m disagrees with the length
    corrupt_payload(|p| p[6..14].copy_from_slice(&u64::MAX.to_be_bytes())); // absurd m
    corrupt_payload(|p| p[6..14].copy_from_slice(&0u64.to_be_bytes())); // m = 0
    corrupt_payload(|p| p.push(0)); // trailing byte
    corrupt_payload(|p| {
        p.pop();
    }); // missing byte
    corrupt_payload(|p| p.truncate(10)); // header cut short
}

#[test]
fn flipped_bloom_bytes_are_corruption_at_the_bloom_block() {
    let (_dir, path) = tmp();
    rows_file(&path, 100, BloomType::RowCol, 0.01);
    let good = std::fs::read(&path).unwrap();
    let (off, len) = trailer_fields(&good);
    for pos in off as usize..(off + u64::from(len)) as usize {
        let mut bad = good.clone();
        bad[pos] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        let err = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None)
            .expect_err("flipped bloom opened");
        assert_eq!(expect_corruption(&err, &path), off, "flip at {pos}: {err}");
    }
}

#[test]
fn a_bloom_block_in_an_empty_file_is_corruption() {
    // Take an empty file and splice in the bloom block of another file.
    let (_dir, path) = tmp();
    rows_file(&path, 10, BloomType::Row, 0.01);
    let full = std::fs::read(&path).unwrap();
    let (off, len) = trailer_fields(&full);
    let block = &full[off as usize..(off + u64::from(len)) as usize];
    write_with(
        &path,
        &Model::new(),
        opts(BloomType::Row, Compression::None, 64),
    )
    .unwrap();
    let empty = std::fs::read(&path).unwrap();
    let body_end = empty.len() - TRAILER_LEN;
    let mut bad = empty[..body_end].to_vec();
    bad.extend_from_slice(block);
    let mut trailer = empty[body_end..].to_vec();
    trailer[36..44].copy_from_slice(&(body_end as u64).to_be_bytes());
    trailer[44..48].copy_from_slice(&len.to_be_bytes());
    let crc = crc32fast::hash(&trailer[..TRAILER_LEN - 4]);
    trailer[TRAILER_LEN - 4..].copy_from_slice(&crc.to_be_bytes());
    bad.extend_from_slice(&trailer);
    std::fs::write(&path, &bad).unwrap();
    let err = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None)
        .expect_err("opened");
    assert_eq!(expect_corruption(&err, &path), body_end as u64);
}
