//! Tests of the integrity check: healthy files of every format version report nothing, and
//! each kind of damage (crafted so checksums still hold, or flipped bytes) is reported.

use super::super::block::Framer;
use super::super::codec::put_entry;
use super::super::meta::{encode_index, encode_info};
use super::super::{FileInfo, StoreFileReader, StoreFileWriter, WriterOptions};
use super::*;
use crate::cell::{CellType, StoreCell};
use crate::schema::Compression;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn cell(row: &str, q: &str, ts: u64, seq: u64) -> StoreCell {
    StoreCell {
        key: StoreKey {
            row: Bytes::copy_from_slice(row.as_bytes()),
            qualifier: Bytes::copy_from_slice(q.as_bytes()),
            ts,
            kind: CellType::Put,
            seq,
        },
        value: Bytes::from(format!("value of {row}/{q}/{ts}")),
    }
}

/// `rows` rows of two columns, written by the real writer with small blocks.
fn write_real(path: &Path, rows: usize, compression: Compression, bloom: BloomType) {
    let opts = WriterOptions {
        block_size: 200,
        compression,
        bloom,
        ..Default::default()
    };
    let mut w = StoreFileWriter::create_file(&crate::fs::StdFs::shared(), path, opts).unwrap();
    for r in 0..rows {
        for q in ["a", "b"] {
            w.append(&cell(&format!("row{r:04}"), q, 5, r as u64 + 1))
                .unwrap();
        }
    }
    w.finish().unwrap();
}

/// Writes a file block by block from `blocks`, with correct checksums everywhere, after
/// letting `tweak` change the index, the file info and the bloom filter's row hashes:
/// so the file is damaged only in ways a checksum cannot see.
fn write_crafted(
    path: &Path,
    blocks: &[Vec<StoreCell>],
    tweak: impl FnOnce(&mut Vec<IndexEntry>, &mut FileInfo, &mut Vec<u64>),
) {
    write_crafted_as(path, blocks, None, false, tweak)
}

/// [`write_crafted`], as format version 3 when `offsets` is given (version 4 with
/// `flags`: index entries with their true starts-a-row flags, before `tweak`): each data
/// block ends with the offsets table `offsets` makes of the block's number and its true
/// offsets.
#[allow(clippy::type_complexity)]
fn write_crafted_as(
    path: &Path,
    blocks: &[Vec<StoreCell>],
    offsets: Option<&dyn Fn(usize, Vec<u32>) -> Vec<u32>>,
    flags: bool,
    tweak: impl FnOnce(&mut Vec<IndexEntry>, &mut FileInfo, &mut Vec<u64>),
) {
    let mut framer = Framer::new(Compression::None).unwrap();
    let (mut out, mut framed, mut index) = (Vec::new(), Vec::new(), Vec::new());
    let mut info = FileInfo {
        first_key: None,
        last_key: None,
        max_seq: 0,
        min_ts: u64::MAX,
        max_ts: 0,
        entry_count: 0,
        file_size: 0,
    };
    let mut hashes = Vec::new();
    for (n, b) in blocks.iter().enumerate() {
        let mut payload = Vec::new();
        let mut at = Vec::new();
        for c in b {
            at.push(payload.len() as u32);
            put_entry(&mut payload, &crate::cell::CellRef::of(c));
            info.first_key.get_or_insert(c.key.clone());
            info.last_key = Some(c.key.clone());
            info.max_seq = info.max_seq.max(c.key.seq);
            info.min_ts = info.min_ts.min(c.key.ts);
            info.max_ts = info.max_ts.max(c.key.ts);
            info.entry_count += 1;
            hashes.push(bloom::row_hash(&c.key.row));
        }
        if let Some(f) = offsets {
            super::super::data::put_offsets(&mut payload, &f(n, at));
        }
        framer
            .frame(&payload, Compression::None, &mut framed)
            .unwrap();
        let starts_row = n == 0 || blocks[n - 1].last().map(|c| &c.key.row) != Some(&b[0].key.row);
        index.push(IndexEntry {
            first_key: b[0].key.clone(),
            offset: out.len() as u64,
            len: framed.len() as u32,
            starts_row,
        });
        out.extend_from_slice(&framed);
    }
    tweak(&mut index, &mut info, &mut hashes);
    let mut block = |payload: &[u8], out: &mut Vec<u8>| {
        let at = out.len() as u64;
        framer
            .frame(payload, Compression::None, &mut framed)
            .unwrap();
        out.extend_from_slice(&framed);
        (at, framed.len() as u32)
    };
    let mut payload = Vec::new();
    let flags = flags && offsets.is_some();
    encode_index(&index, flags, &mut payload);
    let (index_offset, index_len) = block(&payload, &mut out);
    payload.clear();
    encode_info(&info, &mut payload);
    let (info_offset, info_len) = block(&payload, &mut out);
    bloom::encode(BloomType::Row, &hashes, 0.01, &mut payload);
    let (bloom_offset, bloom_len) = block(&payload, &mut out);
    let trailer = Trailer {
        index_offset,
        index_len,
        info_offset,
        info_len,
        bloom_offset,
        bloom_len,
        entry_count: info.entry_count,
        version: match (offsets, flags) {
            (Some(_), true) => super::super::meta::VERSION,
            (Some(_), false) => super::super::meta::VERSION_3,
            // Blocks of entries only, as version 2 wrote them: old files stay checkable.
            (None, _) => super::super::meta::VERSION_2,
        },
    };
    out.extend_from_slice(&trailer.encode());
    std::fs::write(path, out).unwrap();
}

/// The format version in `path`'s trailer (bytes 8..12 of the last 60).
fn stored_version(path: &Path) -> u32 {
    let raw = std::fs::read(path).unwrap();
    let at = raw.len() - super::super::meta::TRAILER_LEN + 8;
    u32::from_be_bytes(raw[at..at + 4].try_into().unwrap())
}

fn three_blocks() -> Vec<Vec<StoreCell>> {
    vec![
        vec![cell("a", "q", 9, 1), cell("b", "q", 9, 2)],
        vec![cell("c", "q", 9, 3), cell("d", "q", 8, 4)],
        vec![cell("e", "q", 7, 5)],
    ]
}

fn kinds(c: &FileCheck) -> Vec<FindingKind> {
    c.findings.iter().map(|f| f.kind).collect()
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.sf");
    (dir, path)
}

#[test]
fn healthy_files_report_nothing() {
    let (_dir, path) = tmp();
    for compression in [
        Compression::None,
        Compression::Lz4,
        Compression::Zstd,
        Compression::Snappy,
    ] {
        for bloom in [BloomType::None, BloomType::Row, BloomType::RowCol] {
            for rows in [0, 1, 40] {
                write_real(&path, rows, compression, bloom);
                let c = verify_path(&crate::fs::StdFs::shared(), &path);
                assert!(c.is_healthy(), "{compression:?} {bloom:?} {rows}: {c:?}");
                assert_eq!(c.cells, rows as u64 * 2);
                let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None)
                    .unwrap();
                assert_eq!(c.data_blocks, r.block_count() as u64);
                assert_eq!(c.file_size, r.info().file_size);
            }
        }
    }
    write_crafted(&path, &three_blocks(), |_, _, _| {});
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert!(c.is_healthy(), "{c:?}");
    assert_eq!((c.data_blocks, c.cells), (3, 5));
}

#[test]
fn version_2_files_are_read_scanned_and_searched() {
    // `write_crafted` writes version-2 files: data blocks of entries only.
    let (_dir, path) = tmp();
    let blocks = three_blocks();
    write_crafted(&path, &blocks, |_, _, _| {});
    assert_eq!(stored_version(&path), super::super::meta::VERSION_2);
    let all: Vec<StoreCell> = blocks.iter().flatten().cloned().collect();
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    let first = StoreKey::first_on_row(Bytes::new());
    let scanned: Vec<StoreCell> = r.scan_from(&first).map(|c| c.unwrap()).collect();
    assert_eq!(scanned, all);
    for (i, want) in all.iter().enumerate() {
        let from: Vec<StoreCell> = r.scan_from(&want.key).map(|c| c.unwrap()).collect();
        assert_eq!(from, all[i..], "seek to {:?}", want.key);
    }
}

/// Rows that straddle blocks (`b`, `d`) and a row that starts one (`d` starts block 2).
fn straddling_blocks() -> Vec<Vec<StoreCell>> {
    vec![
        vec![cell("a", "q", 9, 1), cell("b", "q", 9, 2)],
        vec![cell("b", "r", 9, 3), cell("c", "q", 9, 4)],
        vec![cell("d", "q", 9, 5)],
        vec![cell("d", "r", 9, 6), cell("e", "q", 9, 7)],
    ]
}

#[test]
fn versions_2_3_and_4_read_alike_and_version_4_seeks_skip_the_block_before_a_row() {
    let blocks = straddling_blocks();
    let all: Vec<StoreCell> = blocks.iter().flatten().cloned().collect();
    type Offsets<'a> = Option<&'a dyn Fn(usize, Vec<u32>) -> Vec<u32>>;
    let layouts: [(Offsets, bool, u32); 3] = [
        (None, false, super::super::meta::VERSION_2),
        (Some(&|_, at| at), false, super::super::meta::VERSION_3),
        (Some(&|_, at| at), true, super::super::meta::VERSION),
    ];
    for (offsets, flags, version) in layouts {
        let (_dir, path) = tmp();
        write_crafted_as(&path, &blocks, offsets, flags, |_, _, _| {});
        assert_eq!(stored_version(&path), version);
        assert!(
            verify_path(&crate::fs::StdFs::shared(), &path).is_healthy(),
            "v{version}"
        );
        let cache = std::sync::Arc::new(super::super::BlockCache::new(1 << 20));
        let fs = crate::fs::StdFs::shared();
        let r = StoreFileReader::open_file(&fs, &path, 1, Some(cache.clone())).unwrap();
        for row in ["a", "b", "c", "d", "e", "bb", "z"] {
            let start = StoreKey::first_on_row(Bytes::from(row));
            let want: Vec<&StoreCell> = all.iter().filter(|c| c.key >= start).collect();
            let got: Vec<StoreCell> = r.scan_from(&start).map(|c| c.unwrap()).collect();
            assert_eq!(
                got.iter().collect::<Vec<_>>(),
                want,
                "v{version} from {row}"
            );
        }
        // A point read of `d` (which starts block 2): version 4 reads block 2 alone,
        // older versions read block 1 first (the last block starting before `d`).
        let d = Bytes::from("d");
        let before = cache.hits() + cache.misses();
        let got: Vec<StoreCell> = r
            .scan_from(&StoreKey::first_on_row(d.clone()))
            .end_at_row(d.clone())
            .map(|c| c.unwrap())
            .filter(|c| c.key.row == d)
            .collect();
        assert_eq!(got.len(), 2, "v{version}");
        let blocks_read = cache.hits() + cache.misses() - before;
        let expected = if flags { 2 } else { 3 };
        assert_eq!(blocks_read, expected, "v{version}: blocks read for row d");
    }
}

#[test]
fn a_starts_row_flag_that_hides_cells_is_reported() {
    let (_dir, path) = tmp();
    let mut at = 0;
    // Block 1 starts with row `b`, whose first cell is in block 0.
    write_crafted_as(
        &path,
        &straddling_blocks(),
        Some(&|_, at| at),
        true,
        |index, _, _| {
            index[1].starts_row = true;
            at = index[1].offset;
        },
    );
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::Index], "{c:?}");
    assert_eq!(c.findings[0].offset, at);
    assert!(c.findings[0].reason.contains("starts row"), "{c:?}");
}

#[test]
fn new_files_end_each_data_block_with_its_offsets() {
    let (_dir, path) = tmp();
    write_real(&path, 40, Compression::None, BloomType::Row);
    assert_eq!(stored_version(&path), super::super::meta::VERSION);
    let raw = std::fs::read(&path).unwrap();
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    let cells = r.info().entry_count as usize;
    // The first block, uncompressed: stored length at 1..5, payload from 5.
    let len = u32::from_be_bytes(raw[1..5].try_into().unwrap()) as usize;
    let payload = &raw[5..5 + len];
    let width = payload[len - 1];
    let count = u32::from_be_bytes(payload[len - 5..len - 1].try_into().unwrap()) as usize;
    assert_eq!(width, 2);
    assert!(count >= 1 && count <= cells, "{count} of {cells}");
    assert_eq!(
        &payload[len - 5 - 2 * count..len - 5 - 2 * count + 2],
        &[0, 0]
    );
}

#[test]
fn an_offsets_table_pointing_inside_an_entry_is_reported() {
    let (_dir, path) = tmp();
    let blocks = three_blocks();
    write_crafted_as(&path, &blocks, Some(&|_, at| at), true, |_, _, _| {});
    assert!(verify_path(&crate::fs::StdFs::shared(), &path).is_healthy());
    // Block 1's second offset moved 3 bytes into its first entry, under a valid CRC.
    let inside = |n: usize, mut at: Vec<u32>| {
        if n == 1 {
            at[1] -= 3;
        }
        at
    };
    write_crafted_as(&path, &blocks, Some(&inside), true, |_, _, _| {});
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::DataBlock], "{c:?}");
    let block_1 = c.findings[0].offset;
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    let first = StoreKey::first_on_row(Bytes::new());
    let err = r.scan_from(&first).find_map(|c| c.err()).unwrap();
    assert!(
        matches!(&err, crate::Error::Corruption { offset, .. } if *offset == block_1),
        "{err:?}"
    );
}

#[test]
fn keys_out_of_order_within_a_block_are_reported() {
    let (_dir, path) = tmp();
    let mut blocks = three_blocks();
    blocks[1] = vec![cell("d", "q", 9, 3), cell("c", "q", 8, 4)];
    write_crafted(&path, &blocks, |_, _, _| {});
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::KeyOrder], "{c:?}");
    assert!(
        StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).is_ok(),
        "open does not read data blocks, so only the check sees this"
    );
    assert!(c.findings[0].reason.contains("entry 1"), "{c:?}");
}

#[test]
fn keys_out_of_order_across_blocks_are_reported() {
    let (_dir, path) = tmp();
    let mut blocks = three_blocks();
    // Block 1 starts above block 0's first key but below its last key.
    blocks[1] = vec![cell("a", "r", 9, 3), cell("d", "q", 8, 4)];
    let mut at = 0;
    write_crafted(&path, &blocks, |index, _, _| at = index[1].offset);
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::KeyOrder], "{c:?}");
    assert_eq!(c.findings[0].offset, at);
}

#[test]
fn an_index_key_that_differs_from_its_block_is_reported() {
    let (_dir, path) = tmp();
    let mut at = 0;
    write_crafted(&path, &three_blocks(), |index, _, _| {
        index[2].first_key = cell("dd", "q", 9, 9).key;
        at = index[2].offset;
    });
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::Index], "{c:?}");
    assert_eq!(c.findings[0].offset, at);
}

#[test]
fn an_index_that_does_not_tile_the_data_is_reported_and_the_blocks_still_checked() {
    let (_dir, path) = tmp();
    write_crafted(&path, &three_blocks(), |index, _, _| {
        index[1].offset += 1;
    });
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::Index], "{c:?}");
    assert!(c.findings[0].reason.contains("index entry 1"), "{c:?}");
    assert_eq!((c.data_blocks, c.cells), (3, 5));
}

#[test]
fn file_info_that_disagrees_with_the_blocks_is_reported() {
    let (_dir, path) = tmp();
    write_crafted(&path, &three_blocks(), |_, info, _| {
        info.max_seq = 4;
        info.max_ts = 10;
    });
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::FileInfo; 2], "{c:?}");
    assert!(c.findings[0].reason.contains("largest sequence id is 4"));
    assert!(c.findings[1].reason.contains("largest timestamp is 10"));

    write_crafted(&path, &three_blocks(), |_, info, _| info.entry_count = 6);
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(
        kinds(&c),
        [FindingKind::Trailer, FindingKind::FileInfo],
        "{c:?}"
    );
}

#[test]
fn a_bloom_filter_that_rules_out_a_present_row_is_reported() {
    let (_dir, path) = tmp();
    write_crafted(&path, &three_blocks(), |_, _, hashes| hashes.truncate(1));
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::Bloom], "{c:?}");
    assert!(c.findings[0].reason.contains("of the 5 rows"), "{c:?}");
}

#[test]
fn a_flipped_data_byte_is_one_finding_at_its_block() {
    let (_dir, path) = tmp();
    write_real(&path, 40, Compression::Lz4, BloomType::Row);
    let good = std::fs::read(&path).unwrap();
    let blocks = verify_path(&crate::fs::StdFs::shared(), &path).data_blocks;
    let first_len = 9 + u64::from(u32::from_be_bytes(good[1..5].try_into().unwrap()));
    let mut bad = good.clone();
    bad[first_len as usize + 7] ^= 0x10;
    std::fs::write(&path, &bad).unwrap();
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::Checksum], "{c:?}");
    assert_eq!(c.findings[0].offset, first_len);
    assert_eq!(c.findings[0].file, path);
    assert_eq!(c.data_blocks, blocks, "every other block is still checked");
}

#[test]
fn a_damaged_index_is_reported_and_the_blocks_are_walked() {
    let (_dir, path) = tmp();
    write_real(&path, 40, Compression::None, BloomType::Row);
    let r = StoreFileReader::open_file(&crate::fs::StdFs::shared(), &path, 1, None).unwrap();
    let (blocks, cells) = (r.block_count() as u64, r.info().entry_count);
    drop(r);
    let mut bytes = std::fs::read(&path).unwrap();
    let trailer_at = bytes.len() - TRAILER_LEN;
    let index_at = u64::from_be_bytes(bytes[trailer_at + 12..trailer_at + 20].try_into().unwrap());
    bytes[index_at as usize + 6] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::Checksum], "{c:?}");
    assert_eq!(c.findings[0].offset, index_at);
    assert_eq!((c.data_blocks, c.cells), (blocks, cells));
}

#[test]
fn short_damaged_and_missing_files_are_reported() {
    let (dir, path) = tmp();
    write_real(&path, 10, Compression::None, BloomType::Row);
    let good = std::fs::read(&path).unwrap();
    std::fs::write(&path, &good[..good.len() - 1]).unwrap();
    assert_eq!(
        kinds(&verify_path(&crate::fs::StdFs::shared(), &path)),
        [FindingKind::Trailer]
    );
    std::fs::write(&path, &good[..10]).unwrap();
    assert_eq!(
        kinds(&verify_path(&crate::fs::StdFs::shared(), &path)),
        [FindingKind::Trailer]
    );
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 50] ^= 1; // the trailer's version
    std::fs::write(&path, &bad).unwrap();
    let c = verify_path(&crate::fs::StdFs::shared(), &path);
    assert_eq!(kinds(&c), [FindingKind::Trailer]);
    assert_eq!(c.findings[0].offset, (n - TRAILER_LEN) as u64);
    let c = verify_path(&crate::fs::StdFs::shared(), &dir.path().join("nope.sf"));
    assert_eq!(kinds(&c), [FindingKind::Missing]);
}

fn arb_rows() -> impl Strategy<Value = Vec<(String, u64, usize)>> {
    proptest::collection::btree_map("[a-d]{0,3}", (1u64..5, 0usize..300), 0..30)
        .prop_map(|m| m.into_iter().map(|(r, (ts, len))| (r, ts, len)).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A healthy file reports nothing; any single flipped byte is reported, with every
    /// finding naming the file and one at or before the flipped byte; nothing panics.
    #[test]
    fn a_single_flipped_byte_is_always_reported(
        rows in arb_rows(),
        compression in proptest::sample::select(vec![
            Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy,
        ]),
        bloom in proptest::sample::select(vec![BloomType::None, BloomType::Row, BloomType::RowCol]),
        block_size in 16usize..400,
        pos in any::<proptest::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let (_dir, path) = tmp();
        let opts = WriterOptions { block_size, compression, bloom, ..Default::default() };
        let mut w = StoreFileWriter::create_file(&crate::fs::StdFs::shared(), &path, opts).unwrap();
        for (i, (row, ts, len)) in rows.iter().enumerate() {
            let mut c = cell(row, "q", *ts, i as u64);
            c.value = Bytes::from(vec![b'x'; *len]);
            w.append(&c).unwrap();
        }
        w.finish().unwrap();
        let healthy = verify_path(&crate::fs::StdFs::shared(), &path);
        prop_assert!(healthy.is_healthy(), "{:?}", healthy);
        prop_assert_eq!(healthy.cells, rows.len() as u64);

        let mut bytes = std::fs::read(&path).unwrap();
        let at = pos.index(bytes.len());
        bytes[at] ^= mask;
        std::fs::write(&path, &bytes).unwrap();
        let c = verify_path(&crate::fs::StdFs::shared(), &path);
        prop_assert!(!c.is_healthy(), "flip at {} of {} not reported", at, bytes.len());
        prop_assert!(c.findings.iter().all(|f| f.file == path));
        prop_assert!(c.findings.iter().any(|f| f.offset <= at as u64), "{:?}", c);
    }
}
