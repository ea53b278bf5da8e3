//! Recovery from damaged directories: torn tails at every offset, flipped bytes, torn and
//! corrupt headers, garbage tails, and many reopens.

use super::super::segment::file_name;
use super::super::Durability;
use super::super::WalRecoveryMode;
use super::{copy_dir, files_ending, frames, open, open_in, rec, seqs};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes records `seqs` (each fully written) and closes; returns the live segment files.
async fn write_session(
    dir: &Path,
    segment_size: u64,
    seqs: impl Iterator<Item = u64>,
) -> Vec<PathBuf> {
    let (wal, _) = open(dir, segment_size);
    for seq in seqs {
        wal.append(rec(seq, 3), Durability::SyncWal)
            .unwrap()
            .wait()
            .await
            .unwrap();
    }
    wal.close().unwrap();
    files_ending(dir, ".log")
}

fn corrupt_paths(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .map(|p| PathBuf::from(format!("{}.corrupt", p.display())))
        .collect()
}

#[tokio::test]
async fn torn_tail_at_every_offset_of_the_last_record() {
    let base = tempfile::tempdir().unwrap();
    let segs = write_session(base.path(), 1 << 20, 1..=5).await;
    assert_eq!(segs.len(), 1);
    let (start, end, seq) = *frames(&segs[0]).last().unwrap();
    assert_eq!(seq, 5);
    for cut in start..end {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("wal");
        copy_dir(base.path(), &dir);
        let seg = dir.join(segs[0].file_name().unwrap());
        OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(cut as u64)
            .unwrap();

        let (wal, got) = open(&dir, 1 << 20);
        assert_eq!(seqs(&got), vec![1, 2, 3, 4], "cut at {cut}");
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), start as u64);
        wal.append(rec(9, 2), Durability::SyncWal)
            .unwrap()
            .wait()
            .await
            .unwrap();
        wal.close().unwrap();
        drop(wal);

        let (_wal, got) = open(&dir, 1 << 20);
        assert_eq!(seqs(&got), vec![1, 2, 3, 4, 9], "cut at {cut}");
        assert_eq!(got[4], rec(9, 2));
        assert!(files_ending(&dir, ".corrupt").is_empty());
    }
}

#[tokio::test]
async fn flipped_byte_in_a_middle_record_drops_it_and_everything_after() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 700, 1..=40).await;
    assert!(segs.len() >= 4, "{} segments", segs.len());
    let m = segs.len() / 2;
    let victim = frames(&segs[m]);
    assert!(victim.len() >= 3);
    let (start, end, bad_seq) = victim[1];
    let mut data = std::fs::read(&segs[m]).unwrap();
    data[(start + end) / 2] ^= 0x01;
    std::fs::write(&segs[m], &data).unwrap();

    let (wal, got) = open(dir.path(), 700);
    assert_eq!(seqs(&got), (1..bad_seq).collect::<Vec<_>>());
    assert_eq!(std::fs::metadata(&segs[m]).unwrap().len(), start as u64);
    let later = &segs[m + 1..];
    assert!(later.iter().all(|p| !p.exists()));
    assert!(corrupt_paths(later).iter().all(|p| p.exists()));
    wal.append(rec(100, 1), Durability::FsyncWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
    wal.close().unwrap();
    drop(wal);

    let (_wal, got) = open(dir.path(), 700);
    let mut expected: Vec<u64> = (1..bad_seq).collect();
    expected.push(100);
    assert_eq!(seqs(&got), expected);
}

#[tokio::test]
async fn torn_header_of_the_newest_segment_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 1 << 20, 1..=3).await;
    let torn = dir.path().join(file_name(1000));
    std::fs::write(&torn, b"BSLTWAL1\0\0").unwrap();
    let (wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), vec![1, 2, 3]);
    assert!(!torn.exists());
    assert!(files_ending(dir.path(), ".corrupt").is_empty());
    // The new segment's id is past the removed one's.
    assert_eq!(wal.segments().last().unwrap().id, 1001);
    assert_eq!(wal.segments()[0].path, segs[0]);
}

#[tokio::test]
async fn corrupt_header_moves_the_segment_and_later_ones_aside() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 500, 1..=30).await;
    assert!(segs.len() >= 3);
    let mut data = std::fs::read(&segs[1]).unwrap();
    data[3] = b'X';
    std::fs::write(&segs[1], &data).unwrap();
    let first = frames(&segs[0]);
    let (wal, got) = open(dir.path(), 500);
    assert_eq!(seqs(&got), first.iter().map(|f| f.2).collect::<Vec<_>>());
    assert!(corrupt_paths(&segs[1..]).iter().all(|p| p.exists()));
    let ids: Vec<u64> = wal.segments().iter().map(|s| s.id).collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids[1] > segs.len() as u64,
        "new id past the moved-aside ones"
    );
}

#[tokio::test]
async fn garbage_and_zeroes_after_the_last_record_are_cut() {
    for tail in [
        vec![0u8; 64],
        vec![0xA5; 3],
        b"not a wal record at all".to_vec(),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let segs = write_session(dir.path(), 1 << 20, 1..=4).await;
        let len = std::fs::metadata(&segs[0]).unwrap().len();
        OpenOptions::new()
            .append(true)
            .open(&segs[0])
            .unwrap()
            .write_all(&tail)
            .unwrap();
        let (_wal, got) = open(dir.path(), 1 << 20);
        assert_eq!(seqs(&got), vec![1, 2, 3, 4]);
        assert_eq!(std::fs::metadata(&segs[0]).unwrap().len(), len);
    }
}

#[tokio::test]
async fn many_reopens_keep_every_record_and_purge_marker_only_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for round in 0..8u64 {
        let (wal, got) = open(dir.path(), 600);
        assert_eq!(seqs(&got), expected);
        if round % 2 == 0 {
            for seq in round * 10 + 1..=round * 10 + 7 {
                wal.append(rec(seq, 2), Durability::AsyncWal).unwrap();
                expected.push(seq);
            }
        }
        wal.close().unwrap();
    }
    let (wal, _) = open(dir.path(), 600);
    let segs = wal.segments();
    // Every reopen leaves a segment holding its opening marker; the files match the list.
    assert_eq!(files_ending(dir.path(), ".log").len(), segs.len());
    assert!(segs.iter().any(|s| s.max_seq.is_none()));
    // Purging up to the last record removes every closed segment, oldest first.
    let closed = segs.len() - 1;
    assert_eq!(wal.purge_up_to(*expected.last().unwrap()).unwrap(), closed);
    assert_eq!(files_ending(dir.path(), ".log").len(), 1);
    drop(wal);
    let (_wal, got) = open(dir.path(), 600);
    assert!(got.is_empty());
}

#[tokio::test]
async fn a_segment_cut_at_a_frame_boundary_breaks_the_marker_chain() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 700, 1..=40).await;
    assert!(segs.len() >= 4);
    let victim = frames(&segs[1]);
    let (start, _, first_lost) = victim[1];
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segs[1])
        .unwrap()
        .set_len(start as u64)
        .unwrap();
    let before = dir_state(dir.path());
    let err = open_in(dir.path(), 700, WalRecoveryMode::TolerateCorruptedTail).unwrap_err();
    assert!(
        matches!(&err, crate::Error::WalCorruption { segment, offset, .. } if *segment == segs[1] && *offset == start as u64),
        "{err:?}"
    );
    assert_eq!(dir_state(dir.path()), before);
    // Point in time stops at the gap; salvage replays both sides and bridges it.
    let copy = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), copy.path());
    let (_w, got) = open(copy.path(), 700);
    assert_eq!(seqs(&got), (1..first_lost).collect::<Vec<_>>());
    let (w, got) = open_in(dir.path(), 700, WalRecoveryMode::Salvage).unwrap();
    let last_of_segment = frames(&segs[2])[0].2;
    let expected: Vec<u64> = (1..first_lost).chain(last_of_segment..=40).collect();
    assert_eq!(seqs(&got), expected);
    drop(w);
    let (_w, again) = open_in(dir.path(), 700, WalRecoveryMode::TolerateCorruptedTail).unwrap();
    assert_eq!(seqs(&again), expected);
}

/// Every file of `dir` with its bytes, to show that a refused open changed nothing.
fn dir_state(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    v.sort();
    v
}

/// Flips one byte in the middle of frame `index` (markers not counted) of `segment`;
/// returns the frame's `(start, end, seq)`.
fn flip_frame(segment: &Path, index: usize) -> (usize, usize, u64) {
    let victim = frames(segment)[index];
    let mut data = std::fs::read(segment).unwrap();
    data[(victim.0 + victim.1) / 2] ^= 0x10;
    std::fs::write(segment, &data).unwrap();
    victim
}

#[tokio::test]
async fn tolerate_tail_refuses_damage_in_a_closed_segment_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 700, 1..=40).await;
    assert!(segs.len() >= 4);
    let (start, _, _) = flip_frame(&segs[1], 1);
    let before = dir_state(dir.path());
    let err = open_in(dir.path(), 700, WalRecoveryMode::TolerateCorruptedTail).unwrap_err();
    match err {
        crate::Error::WalCorruption {
            segment, offset, ..
        } => {
            assert_eq!(segment, segs[1]);
            assert_eq!(offset, start as u64);
        }
        other => panic!("expected WalCorruption, got {other:?}"),
    }
    assert_eq!(dir_state(dir.path()), before);
}

#[tokio::test]
async fn tolerate_tail_refuses_a_bad_record_followed_by_good_ones_in_the_newest_segment() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 1 << 20, 1..=10).await;
    let newest = segs.last().unwrap();
    flip_frame(newest, 4);
    let before = dir_state(dir.path());
    let err = open_in(dir.path(), 1 << 20, WalRecoveryMode::TolerateCorruptedTail).unwrap_err();
    assert!(
        matches!(&err, crate::Error::WalCorruption { reason, .. } if reason.contains("good record follows")),
        "{err:?}"
    );
    assert_eq!(dir_state(dir.path()), before);
}

#[tokio::test]
async fn tolerate_tail_cuts_a_bad_last_record_of_the_newest_segment() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 1 << 20, 1..=10).await;
    let newest = segs.last().unwrap();
    let (start, _, seq) = flip_frame(newest, 9);
    assert_eq!(seq, 10);
    let (_wal, got) = open_in(dir.path(), 1 << 20, WalRecoveryMode::TolerateCorruptedTail).unwrap();
    assert_eq!(seqs(&got), (1..=9).collect::<Vec<_>>());
    assert_eq!(std::fs::metadata(newest).unwrap().len(), start as u64);
}

#[tokio::test]
async fn salvage_skips_bad_records_replays_the_rest_and_leaves_a_clean_log() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 700, 1..=40).await;
    assert!(segs.len() >= 4);
    // A flipped payload byte (the frame's length intact) in one segment, a flipped length
    // (found again by searching) in another.
    let (_, _, lost_a) = flip_frame(&segs[1], 1);
    let victim = frames(&segs[2])[0];
    let lost_b = victim.2;
    let mut data = std::fs::read(&segs[2]).unwrap();
    data[victim.0 + 1] ^= 0x40;
    std::fs::write(&segs[2], &data).unwrap();
    let (wal, got) = open_in(dir.path(), 700, WalRecoveryMode::Salvage).unwrap();
    let expected: Vec<u64> = (1..=40).filter(|s| *s != lost_a && *s != lost_b).collect();
    assert_eq!(seqs(&got), expected);
    // The originals are kept aside; the rewritten segments hold only good frames.
    assert!(corrupt_paths(&segs[1..3]).iter().all(|p| p.exists()));
    drop(wal);
    let (_wal, again) = open_in(dir.path(), 700, WalRecoveryMode::TolerateCorruptedTail).unwrap();
    assert_eq!(seqs(&again), expected);
}

#[tokio::test]
async fn point_in_time_stops_at_a_torn_header_of_a_closed_segment() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_session(dir.path(), 500, 1..=30).await;
    assert!(segs.len() >= 3);
    std::fs::write(&segs[1], b"BSLTWAL1").unwrap();
    let first = frames(&segs[0]);
    assert!(open_in(dir.path(), 500, WalRecoveryMode::TolerateCorruptedTail).is_err());
    let (_wal, got) = open(dir.path(), 500);
    assert_eq!(seqs(&got), first.iter().map(|f| f.2).collect::<Vec<_>>());
    assert!(corrupt_paths(&segs[2..]).iter().all(|p| p.exists()));
}

#[tokio::test]
async fn read_only_sessions_do_not_pile_up_segments() {
    let dir = tempfile::tempdir().unwrap();
    write_session(dir.path(), 1 << 20, 1..=3).await;
    let (wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), vec![1, 2, 3]);
    assert_eq!(wal.purge_up_to(3).unwrap(), 1);
    wal.close().unwrap();
    drop(wal);
    for _ in 0..6 {
        let (wal, got) = open(dir.path(), 1 << 20);
        assert!(got.is_empty());
        wal.close().unwrap();
    }
    // Each open removed the marker-only segments before it: one is left, the last one's.
    assert_eq!(files_ending(dir.path(), ".log").len(), 1);
}
