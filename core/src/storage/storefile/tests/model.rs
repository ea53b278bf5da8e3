//! Round trips against a `BTreeMap` model, plus writer and cache edge cases.

use super::*;
use crate::storage::storefile::BlockCache;

fn check_against_model(
    reader: &Arc<StoreFileReader>,
    model: &Model,
    probes: &[StoreKey],
) -> std::result::Result<(), TestCaseError> {
    let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    prop_assert_eq!(&collect(reader.scan_from(&min_key())).unwrap(), &all);
    let rev: Vec<_> = all.iter().rev().cloned().collect();
    prop_assert_eq!(&collect(reader.scan_rev_from(None)).unwrap(), &rev);
    for p in probes {
        let want: Vec<_> = model
            .range(p..)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        prop_assert_eq!(
            &collect(reader.scan_from(p)).unwrap(),
            &want,
            "scan_from {:?}",
            p
        );
        // A point read's scanner (ending at the probe's row) returns a prefix of the same
        // cells that holds every cell of that row.
        let point = collect(reader.scan_from(p).end_at_row(p.row.clone())).unwrap();
        prop_assert!(want.starts_with(&point), "end_at_row {:?}", p);
        let of_row = want.iter().take_while(|(k, _)| k.row <= p.row).count();
        prop_assert!(
            point.len() >= of_row,
            "end_at_row {:?} lost cells of its row",
            p
        );
        let want: Vec<_> = model
            .range(..=p)
            .rev()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        prop_assert_eq!(
            &collect(reader.scan_rev_from(Some(p))).unwrap(),
            &want,
            "scan_rev_from {:?}",
            p
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn round_trip_matches_model(
        model in arb_model(200),
        block_size in 64usize..2048,
        compression in arb_compression(),
        mut probes in proptest::collection::vec(arb_key(), 0..10),
        picks in proptest::collection::vec(any::<proptest::sample::Index>(), 0..6),
        cached in any::<bool>(),
    ) {
        let (_dir, path) = tmp();
        write(&path, &model, block_size, compression).unwrap();
        let keys: Vec<_> = model.keys().cloned().collect();
        if !keys.is_empty() {
            for pick in picks {
                let k = pick.get(&keys).clone();
                probes.push(StoreKey::first_on_row(k.row.clone()));
                probes.push(k);
            }
        }
        let cache = cached.then(|| Arc::new(BlockCache::new(1 << 20)));
        let reader = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 7, cache.clone()).unwrap();

        let info = reader.info();
        prop_assert_eq!(info.entry_count, model.len() as u64);
        prop_assert_eq!(info.first_key.as_ref(), model.keys().next());
        prop_assert_eq!(info.last_key.as_ref(), model.keys().next_back());
        prop_assert_eq!(info.max_seq, model.keys().map(|k| k.seq).max().unwrap_or(0));
        prop_assert_eq!(info.min_ts, model.keys().map(|k| k.ts).min().unwrap_or(u64::MAX));
        prop_assert_eq!(info.max_ts, model.keys().map(|k| k.ts).max().unwrap_or(0));
        prop_assert_eq!(info.file_size, std::fs::metadata(&path).unwrap().len());

        check_against_model(&reader, &model, &probes)?;
        if let Some(cache) = &cache {
            // A second pass is served from the cache.
            let misses = cache.misses();
            check_against_model(&reader, &model, &probes)?;
            prop_assert_eq!(cache.misses(), misses);
        }
    }
}

#[test]
fn out_of_order_append_is_bad_argument_and_poisons() {
    let (_dir, path) = tmp();
    let mut w =
        StoreFileWriter::create_file(&crate::fs::StdFs::shared(), &path, WriterOptions::default())
            .unwrap();
    let k1 = key(b"b", b"q", 5, CellType::Put, 1);
    let v = Bytes::from_static(b"v");
    w.append(&cell(&k1, &v)).unwrap();
    let err = w.append(&cell(&k1, &v)).unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    // Still unusable, even for a cell that would have been in order.
    let k2 = key(b"c", b"q", 5, CellType::Put, 1);
    assert!(matches!(
        w.append(&cell(&k2, &v)),
        Err(Error::BadArgument(_))
    ));
    assert!(matches!(w.finish(), Err(Error::BadArgument(_))));
    assert!(!path.exists());
    // The temporary file is gone too.
    assert_eq!(
        std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
        0
    );

    let mut w =
        StoreFileWriter::create_file(&crate::fs::StdFs::shared(), &path, WriterOptions::default())
            .unwrap();
    w.append(&cell(&k2, &v)).unwrap();
    let err = w.append(&cell(&k1, &v)).unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
}

#[test]
fn nothing_appears_before_finish() {
    let (_dir, path) = tmp();
    let mut w =
        StoreFileWriter::create_file(&crate::fs::StdFs::shared(), &path, WriterOptions::default())
            .unwrap();
    w.append(&cell(&key(b"r", b"", 1, CellType::Put, 1), &Bytes::new()))
        .unwrap();
    assert!(!path.exists());
    let info = w.finish().unwrap();
    assert!(path.exists());
    assert_eq!(info.entry_count, 1);
    assert_eq!(info.file_size, std::fs::metadata(&path).unwrap().len());
    assert_eq!(
        std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
        1
    );
}

#[test]
fn empty_file_scans_empty() {
    for c in COMPRESSIONS {
        let (_dir, path) = tmp();
        let w = StoreFileWriter::create_file(
            &crate::fs::StdFs::shared(),
            &path,
            WriterOptions {
                block_size: 64,
                compression: c,
                ..Default::default()
            },
        )
        .unwrap();
        let info = w.finish().unwrap();
        assert_eq!(info.entry_count, 0);
        assert_eq!(info.first_key, None);
        let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
        assert_eq!(r.info().entry_count, 0);
        assert_eq!(r.block_count(), 0);
        assert_eq!(r.middle_key(), None);
        assert_eq!(r.scan_from(&min_key()).count(), 0);
        assert_eq!(r.scan_rev_from(None).count(), 0);
        let k = key(b"x", b"", 0, CellType::Put, 0);
        assert_eq!(r.scan_rev_from(Some(&k)).count(), 0);
    }
}

#[test]
fn large_cells_exceed_the_block_size() {
    let (_dir, path) = tmp();
    let mut model = Model::new();
    for (i, len) in [10usize, 300_000, 5, 1_000_000, 0].into_iter().enumerate() {
        let row = format!("r{i}");
        model.insert(
            key(row.as_bytes(), b"q", 1, CellType::Put, 1),
            Bytes::from(vec![i as u8; len]),
        );
    }
    write(&path, &model, 1024, Compression::Lz4).unwrap();
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    // A block closes at the next row once it reaches the block size: [r0 r1] [r2 r3] [r4].
    assert_eq!(r.block_count(), 3);
    let got = collect(r.scan_from(&min_key())).unwrap();
    assert_eq!(got, model.into_iter().collect::<Vec<_>>());
}

#[test]
fn zero_block_size_is_rejected() {
    let (_dir, path) = tmp();
    let opts = WriterOptions {
        block_size: 0,
        compression: Compression::None,
        ..Default::default()
    };
    assert!(matches!(
        StoreFileWriter::create_file(&crate::fs::StdFs::shared(), &path, opts),
        Err(Error::BadArgument(_))
    ));
}

#[test]
fn cache_counts_hits_and_misses() {
    let (_dir, path) = tmp();
    let model = sample_model(200);
    write(&path, &model, 512, Compression::Snappy).unwrap();
    let cache = Arc::new(BlockCache::new(64 << 20));
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 3, Some(cache.clone()))
        .unwrap();
    let blocks = r.block_count() as u64;
    assert!(blocks > 10);
    assert_eq!((cache.hits(), cache.misses()), (0, 0));

    // A full scan misses once per block.
    assert_eq!(r.scan_from(&min_key()).count(), model.len());
    assert_eq!((cache.hits(), cache.misses()), (0, blocks));
    assert!(cache.used_bytes() > 0);

    // A point read of a cached block is one hit.
    let k = model.keys().nth(300).unwrap();
    let got = r
        .scan_from(&StoreKey::first_on_row(k.row.clone()))
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(got.key.row, k.row);
    assert_eq!((cache.hits(), cache.misses()), (1, blocks));

    // A second reader of the same file id shares the cached blocks.
    let r2 = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 3, Some(cache.clone()))
        .unwrap();
    assert_eq!(r2.scan_rev_from(None).count(), model.len());
    assert_eq!((cache.hits(), cache.misses()), (1 + blocks, blocks));

    // Another file id does not.
    let r3 = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 4, Some(cache.clone()))
        .unwrap();
    r3.scan_from(&min_key()).next().unwrap().unwrap();
    assert_eq!(cache.misses(), blocks + 1);
}

#[test]
fn tiny_cache_still_reads_correctly() {
    let (_dir, path) = tmp();
    let model = sample_model(100);
    write(&path, &model, 256, Compression::Zstd).unwrap();
    let cache = Arc::new(BlockCache::new(1));
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, Some(cache)).unwrap();
    let got = collect(r.scan_from(&min_key())).unwrap();
    assert_eq!(got, model.into_iter().collect::<Vec<_>>());
}

#[test]
fn concurrent_readers_agree() {
    let (_dir, path) = tmp();
    let model = Arc::new(sample_model(500));
    write(&path, &model, 1024, Compression::Lz4).unwrap();
    let cache = Arc::new(BlockCache::new(256 << 10));
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, Some(cache)).unwrap();
    let keys: Vec<_> = model.keys().cloned().collect();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (r, keys, model) = (r.clone(), &keys, model.clone());
            s.spawn(move || {
                for i in (t..keys.len()).step_by(7) {
                    let k = &keys[i];
                    let c = r.scan_from(k).next().unwrap().unwrap();
                    assert_eq!(&c.key, k);
                    assert_eq!(&c.value, &model[k]);
                    let c = r.scan_rev_from(Some(k)).next().unwrap().unwrap();
                    assert_eq!(&c.key, k);
                }
            });
        }
    });
}

#[test]
fn middle_key_is_the_first_key_of_the_middle_block() {
    let (_dir, path) = tmp();
    let model = sample_model(100);
    write(&path, &model, 512, Compression::None).unwrap();
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    let mid = r.middle_key().unwrap();
    assert!(model.contains_key(&mid));
    assert!(Some(&mid) > r.info().first_key.as_ref());
}

/// Long forward scans read runs of blocks ahead (one read per run); whatever the cache mode
/// and codec, they return exactly the file's cells, also when they start mid-file, and a
/// run never lets a cached block keep the whole run alive (cached blocks weigh what they
/// hold).
#[test]
fn read_ahead_runs_return_every_cell_in_every_cache_mode() {
    use super::super::CacheMode;
    let model = sample_model(3000);
    let all: Vec<_> = model.clone().into_iter().collect();
    for c in COMPRESSIONS {
        let (_dir, path) = tmp();
        write(&path, &model, 256, c).unwrap();
        for mode in [None, Some(CacheMode::Normal), Some(CacheMode::Bypass)] {
            let cache = mode.map(|_| Arc::new(BlockCache::new(64 << 20)));
            let fs = crate::fs::StdFs::shared();
            let r = StoreFileReader::open_file(&fs, &path, 9, cache.clone()).unwrap();
            assert!(r.block_count() > 1000, "{c:?}: runs must span many blocks");
            let scan = |from: &StoreKey| {
                let scan = r.scan_from(from);
                match mode {
                    Some(m) => scan.cache_mode(m),
                    None => scan,
                }
            };
            assert_eq!(collect(scan(&min_key())).unwrap(), all, "{c:?} {mode:?}");
            let mid = &all[all.len() / 3].0;
            let from_mid = collect(scan(mid)).unwrap();
            assert_eq!(from_mid, all[all.len() / 3..].to_vec(), "{c:?} {mode:?}");
            if mode == Some(CacheMode::Bypass) {
                assert_eq!(cache.as_ref().unwrap().used_bytes(), 0);
            }
        }
    }
}

/// Rows of `cells` cells of `value_len`-byte values each, `rows` of them.
fn rows_model(rows: usize, cells: usize, value_len: usize) -> Model {
    let mut model = Model::new();
    for r in 0..rows {
        for q in 0..cells {
            let k = key(
                format!("row{r:05}").as_bytes(),
                format!("q{q}").as_bytes(),
                1,
                CellType::Put,
                1,
            );
            model.insert(k, Bytes::from(vec![r as u8; value_len]));
        }
    }
    model
}

#[test]
fn blocks_end_at_row_boundaries_when_rows_fit_the_slack() {
    // Rows of about 5 x 60 bytes in 256-byte blocks: each fits the 128-byte slack.
    let model = rows_model(200, 5, 40);
    let (_dir, r) = written_in_256_byte_blocks(&model, None);
    assert!(r.block_count() > 20, "{} blocks", r.block_count());
    for i in 0..r.block_count() {
        let first = r.block_first_key(i).unwrap();
        // Every block starts with a row's first cell.
        let row_first = model.keys().find(|k| k.row == first.row).unwrap();
        assert_eq!(&first, row_first, "block {i} starts inside a row");
    }
    assert_scans_as(&r, model);
}

/// `model` written with 256-byte blocks, uncompressed, and opened (with `cache`).
fn written_in_256_byte_blocks(
    model: &Model,
    cache: Option<Arc<BlockCache>>,
) -> (tempfile::TempDir, Arc<StoreFileReader>) {
    let (dir, path) = tmp();
    write(&path, model, 256, Compression::None).unwrap();
    let fs = crate::fs::StdFs::shared();
    (
        dir,
        StoreFileReader::open_file(&fs, &path, 1, cache).unwrap(),
    )
}

/// A full scan of `r` gives exactly `model`.
fn assert_scans_as(r: &Arc<StoreFileReader>, model: Model) {
    assert_eq!(
        collect(r.scan_from(&min_key())).unwrap(),
        model.into_iter().collect::<Vec<_>>()
    );
}

#[test]
fn rows_larger_than_the_slack_are_cut_inside() {
    // One row of 40 cells x ~60 bytes in 256-byte blocks: cut once a block reaches 384 bytes.
    let model = rows_model(1, 40, 40);
    let (_dir, r) = written_in_256_byte_blocks(&model, None);
    assert!(r.block_count() >= 5, "{} blocks", r.block_count());
    assert_scans_as(&r, model);
}

#[test]
fn a_point_read_of_a_row_ending_its_block_reads_no_further_block() {
    let model = rows_model(100, 5, 40);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let (_dir, r) = written_in_256_byte_blocks(&model, Some(cache.clone()));
    // The last row of block 0 ends where block 0 does (rows fit the slack).
    let second = r.block_first_key(1).unwrap();
    let last_row = model
        .keys()
        .take_while(|k| k.row < second.row)
        .last()
        .unwrap()
        .row
        .clone();
    let before = cache.hits() + cache.misses();
    let got = collect(
        r.scan_from(&StoreKey::first_on_row(last_row.clone()))
            .end_at_row(last_row.clone()),
    )
    .unwrap();
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|(k, _)| k.row == last_row));
    assert_eq!(cache.hits() + cache.misses() - before, 1, "one block read");
    // Without the end row, the scanner goes on into block 1.
    let all = collect(r.scan_from(&StoreKey::first_on_row(last_row.clone()))).unwrap();
    assert!(all.len() > 5);
    // The row that starts block 1: its seek goes straight to block 1 (the index flags it
    // as starting a row), not to block 0 first.
    let before = cache.hits() + cache.misses();
    let got = collect(
        r.scan_from(&StoreKey::first_on_row(second.row.clone()))
            .end_at_row(second.row.clone()),
    )
    .unwrap();
    assert_eq!(got.iter().filter(|(k, _)| k.row == second.row).count(), 5);
    assert_eq!(cache.hits() + cache.misses() - before, 1, "one block read");
}
