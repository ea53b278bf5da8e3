//! Tests of the store-file format: model-based round trips, edge cases and corruption.
//!
//! `model` checks scans against a `BTreeMap<StoreKey, Bytes>`; `corruption` flips and cuts
//! bytes and checks that every failure is a corruption error naming the file; `bloom` checks
//! the bloom filters.

mod bloom;
mod corruption;
mod model;

use super::{StoreFileReader, StoreFileWriter, WriterOptions};
use crate::cell::{CellType, StoreCell, StoreKey};
use crate::error::{Error, Result};
use crate::schema::Compression;
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The model of a file's contents.
type Model = BTreeMap<StoreKey, Bytes>;

const COMPRESSIONS: [Compression; 4] = [
    Compression::None,
    Compression::Lz4,
    Compression::Zstd,
    Compression::Snappy,
];

const KINDS: [CellType; 5] = [
    CellType::Put,
    CellType::Delete,
    CellType::DeleteFamilyVersion,
    CellType::DeleteColumn,
    CellType::DeleteFamily,
];

fn key(row: &[u8], q: &[u8], ts: u64, kind: CellType, seq: u64) -> StoreKey {
    StoreKey {
        row: Bytes::copy_from_slice(row),
        qualifier: Bytes::copy_from_slice(q),
        ts,
        kind,
        seq,
    }
}

fn cell(k: &StoreKey, v: &Bytes) -> StoreCell {
    StoreCell {
        key: k.clone(),
        value: v.clone(),
    }
}

/// The smallest possible key: every cell sorts at or after it.
fn min_key() -> StoreKey {
    StoreKey::first_on_row(Bytes::new())
}

fn write(path: &Path, model: &Model, block_size: usize, compression: Compression) -> Result<()> {
    let opts = WriterOptions {
        block_size,
        compression,
        ..Default::default()
    };
    let mut w = StoreFileWriter::create_file(&crate::fs::StdFs::shared(), path, opts)?;
    for (k, v) in model {
        w.append(&cell(k, v))?;
    }
    w.finish()?;
    Ok(())
}

/// A small deterministic model: `n` rows, a few columns and versions each.
fn sample_model(n: usize) -> Model {
    let mut m = Model::new();
    for r in 0..n {
        let row = format!("row{r:05}");
        for (q, kind) in [
            ("", CellType::DeleteFamily),
            ("a", CellType::Put),
            ("b", CellType::Put),
        ] {
            for ts in [7u64, 3] {
                let value = Bytes::from(format!("value-{r}-{q}-{ts}").repeat(r % 3 + 1));
                m.insert(key(row.as_bytes(), q.as_bytes(), ts, kind, r as u64), value);
            }
        }
    }
    m
}

fn collect(it: impl Iterator<Item = Result<StoreCell>>) -> Result<Vec<(StoreKey, Bytes)>> {
    it.map(|c| c.map(|c| (c.key, c.value))).collect()
}

fn expect_corruption(err: &Error, path: &Path) -> u64 {
    match err {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, path, "corruption names the wrong file: {err}");
            *offset
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.sf");
    (dir, path)
}

fn arb_kind() -> impl Strategy<Value = CellType> {
    proptest::sample::select(KINDS.to_vec())
}

fn arb_key() -> impl Strategy<Value = StoreKey> {
    (
        proptest::collection::vec(b'a'..b'e', 0..4),
        proptest::collection::vec(b'p'..b's', 0..3),
        prop_oneof![0u64..4, Just(u64::MAX), any::<u64>()],
        arb_kind(),
        prop_oneof![0u64..4, any::<u64>()],
    )
        .prop_map(|(r, q, ts, kind, seq)| key(&r, &q, ts, kind, seq))
}

fn arb_value() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..24),
        1 => proptest::collection::vec(any::<u8>(), 0..3000),
        1 => (any::<u8>(), 0usize..5000).prop_map(|(b, n)| vec![b; n]),
    ]
    .prop_map(Bytes::from)
}

fn arb_model(max: usize) -> impl Strategy<Value = Model> {
    proptest::collection::btree_map(arb_key(), arb_value(), 0..max)
}

fn arb_compression() -> impl Strategy<Value = Compression> {
    proptest::sample::select(COMPRESSIONS.to_vec())
}

#[test]
fn reader_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<StoreFileReader>();
    check::<Arc<StoreFileReader>>();
    check::<super::BlockCache>();
    fn check_send<T: Send>() {}
    check_send::<super::StoreFileScanner>();
    check_send::<super::StoreFileRevScanner>();
    check_send::<StoreFileWriter>();
}
