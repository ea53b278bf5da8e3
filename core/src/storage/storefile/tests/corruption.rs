//! Damaged files: every failure must be `Error::Corruption` naming the file, never a panic.

use super::*;

/// Opens `path` and runs a full forward and reverse scan plus a seek, returning the first
/// error (or the number of cells seen).
fn read_everything(path: &Path, probe: Option<&StoreKey>) -> Result<usize> {
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), path, 1, None)?;
    let mut n = collect(r.scan_from(&min_key()))?.len();
    n += collect(r.scan_rev_from(None))?.len();
    if let Some(p) = probe {
        n += collect(r.scan_from(p))?.len();
        n += collect(r.scan_rev_from(Some(p)))?.len();
    }
    Ok(n)
}

fn sample_file(compression: Compression) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let (dir, path) = tmp();
    write(&path, &sample_model(12), 128, compression).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (dir, path, bytes)
}

#[test]
fn every_flipped_byte_is_detected() {
    for c in COMPRESSIONS {
        let (_dir, path, good) = sample_file(c);
        assert!(read_everything(&path, None).is_ok());
        for pos in 0..good.len() {
            let mut bad = good.clone();
            bad[pos] ^= 0x5a;
            std::fs::write(&path, &bad).unwrap();
            let err = read_everything(&path, None).expect_err(&format!(
                "{c:?}: flip at {pos} of {} not detected",
                good.len()
            ));
            let offset = expect_corruption(&err, &path);
            assert!(
                offset <= pos as u64,
                "{c:?}: flip at {pos} reported at {offset}: {err}"
            );
        }
    }
}

#[test]
fn a_flip_in_a_data_block_is_reported_at_that_block() {
    let (_dir, path, good) = sample_file(Compression::None);
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    assert!(r.block_count() > 3);
    drop(r);
    // The second block starts right after the first: its framed length is 9 + stored length.
    let first_len = 9 + u32::from_be_bytes(good[1..5].try_into().unwrap()) as usize;
    let mut bad = good.clone();
    bad[first_len + 7] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    let mut scan = r.scan_from(&min_key());
    let err = loop {
        match scan.next().unwrap() {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    assert_eq!(expect_corruption(&err, &path), first_len as u64);
    assert!(
        scan.next().is_none(),
        "a scanner yields None after an error"
    );
}

#[test]
fn a_corrupt_block_is_never_cached() {
    let (_dir, path, mut bytes) = sample_file(Compression::Lz4);
    bytes[6] ^= 1; // inside the first data block
    std::fs::write(&path, &bytes).unwrap();
    let cache = Arc::new(crate::storage::storefile::BlockCache::new(1 << 20));
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, Some(cache.clone()))
        .unwrap();
    for attempt in 1..=2 {
        let err = r.scan_from(&min_key()).next().unwrap().unwrap_err();
        assert_eq!(expect_corruption(&err, &path), 0);
        assert_eq!((cache.hits(), cache.misses()), (0, attempt));
    }
    assert_eq!(cache.used_bytes(), 0);
}

#[test]
fn every_truncation_is_detected_at_open() {
    for c in [Compression::None, Compression::Zstd] {
        let (_dir, path, good) = sample_file(c);
        for len in 0..good.len() {
            std::fs::write(&path, &good[..len]).unwrap();
            let err = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None)
                .expect_err("truncated file opened");
            expect_corruption(&err, &path);
        }
        let mut longer = good.clone();
        longer.extend_from_slice(b"garbage");
        std::fs::write(&path, &longer).unwrap();
        let err = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None)
            .expect_err("extended file opened");
        expect_corruption(&err, &path);
    }
}

/// The framed blocks of a file, as `(offset, framed length)`: data, index, info, bloom.
fn blocks(file: &[u8]) -> Vec<(usize, usize)> {
    let trailer = file.len() - super::super::meta::TRAILER_LEN;
    let mut out = Vec::new();
    let mut at = 0;
    while at < trailer {
        let len = 9 + u32::from_be_bytes(file[at + 1..at + 5].try_into().unwrap()) as usize;
        out.push((at, len));
        at += len;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_flips_never_panic(
        compression in arb_compression(),
        flips in proptest::collection::vec((any::<proptest::sample::Index>(), 1u8..=255), 1..4),
        probe in arb_key(),
    ) {
        let (_dir, path, mut bytes) = sample_file(compression);
        for (pos, x) in flips {
            let i = pos.index(bytes.len());
            bytes[i] ^= x;
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Err(e) = read_everything(&path, Some(&probe)) {
            expect_corruption(&e, &path);
        }
    }

    /// Garbage behind a valid checksum reaches the decompressors and decoders.
    #[test]
    fn garbage_with_valid_checksums_never_panics(
        compression in arb_compression(),
        block in any::<proptest::sample::Index>(),
        edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 1..6),
        probe in arb_key(),
    ) {
        let (_dir, path, mut bytes) = sample_file(compression);
        let all = blocks(&bytes);
        let (at, len) = *block.get(&all);
        for (pos, b) in edits {
            // Leave code and length alone so the frame stays parseable.
            let i = at + 5 + pos.index(len - 9);
            bytes[i] = b;
        }
        let crc = crc32fast::hash(&bytes[at..at + len - 4]);
        bytes[at + len - 4..at + len].copy_from_slice(&crc.to_be_bytes());
        std::fs::write(&path, &bytes).unwrap();
        if let Err(e) = read_everything(&path, Some(&probe)) {
            expect_corruption(&e, &path);
        }
    }

    #[test]
    fn random_files_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let (_dir, path) = tmp();
        std::fs::write(&path, &bytes).unwrap();
        if let Err(e) = read_everything(&path, None) {
            expect_corruption(&e, &path);
        }
    }
}

/// A flipped byte deep inside a read-ahead run is reported at its own block's offset, and
/// the cells before it are returned intact.
#[test]
fn a_flip_inside_a_read_ahead_run_is_reported_at_its_block() {
    for c in [Compression::None, Compression::Lz4] {
        let (_dir, path) = tmp();
        let model = sample_model(2000);
        write(&path, &model, 256, c).unwrap();
        let good = std::fs::read(&path).unwrap();
        let data = blocks(&good);
        let (victim, victim_len) = data[700];
        let mut bad = good.clone();
        bad[victim + victim_len / 2] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
        let mut scan = r.scan_from(&min_key());
        let mut seen = 0usize;
        let err = loop {
            match scan.next().expect("the scan must fail before its end") {
                Ok(_) => seen += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(expect_corruption(&err, &path), victim as u64, "{c:?}");
        assert!(
            seen > 0 && seen < model.len(),
            "{c:?}: {seen} cells before the error"
        );
        assert!(scan.next().is_none());
    }
}
