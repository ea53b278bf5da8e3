//! Tests of the WAL: codec properties, writer behaviour, and recovery from damaged files.
//!
//! Helpers here build deterministic records and inspect segment files through the codec.

mod codec;
mod direct;
mod recovery;
mod writer;

use super::record::{read_frame, Frame};
use super::segment::HEADER_LEN;
use super::{Wal, WalEdit, WalOptions, WalRecord, WalRecoveryMode};
use crate::cell::{CellType, StoreCell, StoreKey};
use bytes::Bytes;
use std::path::{Path, PathBuf};

/// A record with `n` edits whose contents derive from `seq`.
fn rec(seq: u64, n: usize) -> WalRecord {
    let edits = (0..n)
        .map(|i| WalEdit {
            region_id: seq % 3 + i as u64,
            family: Bytes::from(format!("f{}", i % 2)),
            cell: StoreCell {
                key: StoreKey {
                    row: Bytes::from(format!("row-{seq}-{i}")),
                    qualifier: Bytes::from(format!("q{i}")),
                    ts: 1_700_000_000_000 + seq,
                    kind: if i % 3 == 2 {
                        CellType::Delete
                    } else {
                        CellType::Put
                    },
                    seq,
                },
                value: Bytes::from(vec![seq as u8; (seq % 7) as usize * 3]),
            },
        })
        .collect();
    WalRecord { seq, edits }
}

/// Opens in point-in-time mode: recovery stops at the first damage anywhere.
fn open(dir: &Path, segment_size: u64) -> (Wal, Vec<WalRecord>) {
    open_in(dir, segment_size, WalRecoveryMode::PointInTime).unwrap()
}

fn open_in(
    dir: &Path,
    segment_size: u64,
    recovery: WalRecoveryMode,
) -> crate::error::Result<(Wal, Vec<WalRecord>)> {
    Wal::open(
        &crate::fs::StdFs::shared(),
        dir,
        WalOptions {
            segment_size,
            recovery,
        },
    )
}

fn seqs(records: &[WalRecord]) -> Vec<u64> {
    records.iter().map(|r| r.seq).collect()
}

/// `(start, end, seq)` of every good frame of a segment file but its markers (records
/// without edits).
fn frames(path: &Path) -> Vec<(usize, usize, u64)> {
    let data = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut off = HEADER_LEN;
    while let Frame::Record { record, len } = read_frame(&data[off..]) {
        if !record.edits.is_empty() {
            out.push((off, off + len, record.seq));
        }
        off += len;
    }
    out
}

/// Files in `dir` whose names end with `suffix`, sorted.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// Copies every file of `from` into the fresh directory `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

/// `Durability` is ordered weakest first: the strongest of a batch is the maximum.
#[test]
fn durabilities_order_weakest_first() {
    use super::Durability::{AsyncWal, FsyncWal, SkipWal, SyncWal};
    assert!(SkipWal < AsyncWal && AsyncWal < SyncWal && SyncWal < FsyncWal);
    assert_eq!([AsyncWal, SkipWal].into_iter().max(), Some(AsyncWal));
    assert_eq!(
        [SyncWal, FsyncWal, SkipWal].into_iter().max(),
        Some(FsyncWal)
    );
}
