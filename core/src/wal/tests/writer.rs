//! Writer behaviour: concurrent appends with every durability, rolling, purging, closing and
//! the failed state.

use super::super::{Durability, Wal};
use super::{files_ending, open, rec, seqs};
use crate::error::Error;
use std::sync::Arc;

const DURABILITIES: [Durability; 4] = [
    Durability::SkipWal,
    Durability::AsyncWal,
    Durability::SyncWal,
    Durability::FsyncWal,
];

#[test]
fn wal_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Wal>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_come_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, old) = open(dir.path(), 4096);
    assert!(old.is_empty());
    let wal = Arc::new(wal);
    // The engine's commit lock: seq assignment and append happen under it.
    let commit = Arc::new(parking_lot::Mutex::new((1u64, Vec::new())));
    let mut tasks = Vec::new();
    for t in 0..4usize {
        let (wal, commit) = (Arc::clone(&wal), Arc::clone(&commit));
        tasks.push(tokio::spawn(async move {
            for i in 0..60usize {
                let durability = DURABILITIES[(t + i) % 4];
                let ticket = {
                    let mut c = commit.lock();
                    let seq = c.0;
                    c.0 += 1;
                    if durability != Durability::SkipWal {
                        c.1.push(seq);
                    }
                    wal.append(rec(seq, 1 + i % 3), durability).unwrap()
                };
                if durability != Durability::AsyncWal {
                    ticket.wait().await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    wal.sync(false).await.unwrap();
    assert!(
        wal.segments().len() > 1,
        "4 KiB segments should have rolled"
    );
    wal.close().unwrap();
    let expected = commit.lock().1.clone();
    drop(wal);
    let (wal, got) = open(dir.path(), 4096);
    assert_eq!(seqs(&got), expected);
    for r in &got {
        assert_eq!(*r, rec(r.seq, r.edits.len()));
    }
    wal.close().unwrap();
}

#[tokio::test]
async fn roll_by_size_and_purge() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 512);
    for seq in 1..=100 {
        wal.append(rec(seq, 2), Durability::SyncWal)
            .unwrap()
            .wait()
            .await
            .unwrap();
    }
    let segs = wal.segments();
    assert!(segs.len() > 4, "{} segments", segs.len());
    let (closed, current) = segs.split_at(segs.len() - 1);
    for pair in closed.windows(2) {
        assert!(pair[0].id < pair[1].id && pair[0].max_seq < pair[1].max_seq);
    }
    assert!(closed.iter().all(|s| s.max_seq.is_some() && s.size >= 512));
    // Purge at a seq in the middle of a segment: only segments fully <= 50 go.
    let purged: Vec<_> = closed.iter().filter(|s| s.max_seq <= Some(50)).collect();
    assert_eq!(wal.purge_up_to(50).unwrap(), purged.len());
    assert!(purged.iter().all(|s| !s.path.exists()));
    let left = wal.segments();
    assert_eq!(left.len(), segs.len() - purged.len());
    assert_eq!(left.last().unwrap().id, current[0].id);
    assert!(left[0].max_seq.unwrap() > 50);
    // The current segment is never purged, whatever the seq.
    assert_eq!(wal.purge_up_to(u64::MAX).unwrap(), left.len() - 1);
    assert_eq!(wal.segments().len(), 1);
    let last_closed = closed.last().unwrap().max_seq.unwrap();
    wal.close().unwrap();
    drop(wal);
    let (wal, got) = open(dir.path(), 512);
    // Only the current segment's records are left.
    assert_eq!(seqs(&got), (last_closed + 1..=100).collect::<Vec<_>>());
    wal.close().unwrap();
}

#[tokio::test]
async fn reopen_after_partial_purge_returns_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 400);
    // One group commit per record (a drained group is written whole before a roll).
    for seq in 1..=60 {
        wal.append(rec(seq, 2), Durability::AsyncWal).unwrap();
        wal.sync(seq % 10 == 0).await.unwrap();
    }
    let before = wal.segments();
    let cut = before[before.len() / 2].max_seq.unwrap();
    let n = wal.purge_up_to(cut).unwrap();
    assert!(n >= 2);
    wal.close().unwrap();
    drop(wal);
    let (wal, got) = open(dir.path(), 400);
    assert_eq!(seqs(&got), (cut + 1..=60).collect::<Vec<_>>());
    wal.close().unwrap();
}

#[tokio::test]
async fn explicit_roll() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    wal.roll().unwrap(); // empty current segment: nothing to close
    assert_eq!(wal.segments().len(), 1);
    wal.append(rec(1, 1), Durability::AsyncWal).unwrap();
    wal.roll().unwrap();
    let segs = wal.segments();
    assert_eq!(segs.len(), 2);
    assert_eq!((segs[0].max_seq, segs[1].max_seq), (Some(1), None));
    assert_eq!(wal.purge_up_to(1).unwrap(), 1);
    wal.append(rec(2, 1), Durability::SyncWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
    wal.close().unwrap();
    drop(wal);
    let (_wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), vec![2]);
}

#[tokio::test]
async fn closed_wal_refuses_everything() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    let t = wal.append(rec(1, 1), Durability::AsyncWal).unwrap();
    wal.append(rec(2, 1), Durability::SkipWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
    wal.close().unwrap();
    t.wait().await.unwrap(); // drained by close
    for d in DURABILITIES {
        assert!(matches!(wal.append(rec(3, 1), d), Err(Error::Closed)));
    }
    assert!(matches!(wal.sync(true).await, Err(Error::Closed)));
    assert!(matches!(wal.roll(), Err(Error::Closed)));
    wal.close().unwrap();
    drop(wal);
    let (_wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), vec![1], "SkipWal writes nothing");
}

#[tokio::test]
async fn bad_records_are_refused_before_queueing() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    let mut r = rec(7, 2);
    r.edits[1].cell.key.seq = 6;
    assert!(matches!(
        wal.append(r, Durability::SyncWal),
        Err(Error::BadArgument(_))
    ));
    wal.append(rec(8, 1), Durability::SyncWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
}

#[tokio::test]
async fn failed_write_refuses_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    wal.append(rec(1, 1), Durability::FsyncWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
    wal.shared
        .inject_failure
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let t = wal.append(rec(2, 1), Durability::SyncWal).unwrap();
    assert!(matches!(t.wait().await, Err(Error::Io(_))));
    assert!(matches!(
        wal.append(rec(3, 1), Durability::SyncWal),
        Err(Error::WritesRefused(_))
    ));
    assert!(matches!(
        wal.sync(false).await,
        Err(Error::WritesRefused(_))
    ));
    assert!(matches!(wal.roll(), Err(Error::WritesRefused(_))));
    assert!(matches!(wal.close(), Err(Error::WritesRefused(_))));
    drop(wal);
    let (_wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), vec![1]);
    assert!(files_ending(dir.path(), ".corrupt").is_empty());
}

#[tokio::test]
async fn a_failed_marker_write_fails_its_flush_but_not_the_wal() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    wal.append(rec(1, 2), Durability::SyncWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
    let before = std::fs::metadata(&wal.segments()[0].path).unwrap().len();
    // The write that carries the marker alone fails in another caller's hands: the flush
    // that queued the marker still learns it.
    let marker = wal.mark(5).unwrap();
    wal.shared
        .inject_failure
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(wal.sync(false).await.is_err());
    assert!(wal.sync_marker(marker).await.is_err());
    assert_eq!(
        std::fs::metadata(&wal.segments()[0].path).unwrap().len(),
        before,
        "the failed bytes are cut off"
    );
    // The WAL goes on: a record and a later marker are written and come back.
    wal.append(rec(2, 2), Durability::SyncWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
    let marker = wal.mark(6).unwrap();
    wal.sync_marker(marker).await.unwrap();
    wal.close().unwrap();
    drop(wal);
    let (_wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), vec![1, 2]);
}
