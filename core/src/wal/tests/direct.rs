//! Caller-thread writes: `SyncWal` records are written by their waiters, sharing writes, group
//! commit for `FsyncWal`, the `AsyncWal` flusher, and file order across durabilities.

use super::super::{Durability, Wal, WalEdit, WalRecord};
use super::{frames, open, rec, seqs};
use crate::cell::{CellType, StoreCell, StoreKey};
use crate::error::Error;
use bytes::Bytes;
use rand::{Rng, SeedableRng};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The seqs of every record in the WAL's live segments, in file order, read from the files
/// while the WAL is open.
fn file_seqs(wal: &Wal) -> Vec<u64> {
    wal.segments()
        .iter()
        .flat_map(|s| frames(&s.path))
        .map(|(_, _, seq)| seq)
        .collect()
}

/// The engine's commit lock: hands out seqs and records the append order.
#[derive(Default)]
struct Commit {
    next: u64,
    order: Vec<u64>,
}

/// Appends one record of `n` edits under the commit lock, as the engine does; returns the
/// ticket and the seq.
fn commit_append(
    wal: &Wal,
    commit: &parking_lot::Mutex<Commit>,
    n: usize,
    durability: Durability,
) -> (super::super::WalTicket, u64) {
    let mut c = commit.lock();
    c.next += 1;
    let seq = c.next;
    if durability != Durability::SkipWal {
        c.order.push(seq);
    }
    (wal.append(rec(seq, n), durability).unwrap(), seq)
}

#[tokio::test]
async fn sync_ticket_writes_its_record_after_queued_async_records() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    let t1 = wal.append(rec(1, 2), Durability::SyncWal).unwrap();
    // Written by its waiter at the latest (the flusher, woken only for AsyncWal records,
    // may find it queued when it starts and write it first).
    t1.wait().await.unwrap();
    assert_eq!(file_seqs(&wal), vec![1]);
    let a2 = wal.append(rec(2, 1), Durability::AsyncWal).unwrap();
    let a3 = wal.append(rec(3, 3), Durability::AsyncWal).unwrap();
    let f4 = wal.append(rec(4, 1), Durability::FsyncWal).unwrap();
    f4.wait().await.unwrap();
    // Whoever wrote them (flusher or waiter), the AsyncWal records went first.
    assert_eq!(file_seqs(&wal), vec![1, 2, 3, 4]);
    a3.wait().await.unwrap();
    a2.wait().await.unwrap();
    let seg = &wal.segments()[0];
    assert_eq!(seg.max_seq, Some(4));
    assert_eq!(seg.size, std::fs::metadata(&seg.path).unwrap().len());
}

#[tokio::test]
async fn sync_waiters_share_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    let writes = || wal.shared.writes.load(Ordering::Relaxed);
    // An AsyncWal record first, written by the flusher or by its waiter: the flusher has
    // been woken for it and usually gone back to waiting before the SyncWal records below.
    wal.append(rec(1, 1), Durability::AsyncWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
    let tickets: Vec<_> = (2..=21)
        .map(|seq| wal.append(rec(seq, 2), Durability::SyncWal).unwrap())
        .collect();
    let before = writes();
    let results = futures::future::join_all(tickets.into_iter().map(|t| t.wait())).await;
    assert!(results.iter().all(Result::is_ok));
    // The first waiter wrote the whole queue; the others found themselves written. (A
    // flusher that woke late for the AsyncWal record may have taken part of the queue
    // already, and the rest then goes in a second write: never one write per waiter.)
    assert!(
        writes() <= before + 2,
        "{} writes for 20 waiters",
        writes() - before
    );
    assert_eq!(file_seqs(&wal), (1..=21).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_finds_the_writer_busy_resolves_when_it_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    let wal = Arc::new(wal);
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let wal = Arc::clone(&wal);
        std::thread::spawn(move || {
            let _writer = wal.shared.writer();
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        })
    };
    held_rx.recv().unwrap();
    let ticket = wal.append(rec(1, 1), Durability::SyncWal).unwrap();
    let waiter = tokio::spawn(ticket.wait());
    tokio::time::sleep(Duration::from_millis(30)).await;
    // The waiter yields instead of blocking: the runtime still runs other tasks.
    assert!(!waiter.is_finished());
    assert_eq!(tokio::spawn(async { 7 }).await.unwrap(), 7);
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter was not woken by the release")
        .unwrap()
        .unwrap();
    assert_eq!(file_seqs(&wal), vec![1]);
}

#[tokio::test]
async fn async_records_reach_the_file_without_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    for seq in 1..=5 {
        wal.append(rec(seq, 1), Durability::AsyncWal).unwrap();
    }
    // The flusher writes them promptly on its own.
    let deadline = Instant::now() + Duration::from_secs(10);
    while file_seqs(&wal) != vec![1, 2, 3, 4, 5] {
        assert!(Instant::now() < deadline, "flusher did not write");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(wal.segments()[0].max_seq, Some(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sync_appenders_recover_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 16 << 10);
    let wal = Arc::new(wal);
    let commit = Arc::new(parking_lot::Mutex::new(Commit::default()));
    let mut tasks = Vec::new();
    for t in 0..16usize {
        let (wal, commit) = (Arc::clone(&wal), Arc::clone(&commit));
        tasks.push(tokio::spawn(async move {
            for i in 0..250usize {
                let (ticket, _) =
                    commit_append(&wal, &commit, 1 + (t + i) % 4, Durability::SyncWal);
                ticket.wait().await.unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let expected = commit.lock().order.clone();
    assert_eq!(expected, (1..=4000).collect::<Vec<_>>());
    assert!(
        wal.segments().len() > 3,
        "16 KiB segments should have rolled"
    );
    // Everything acknowledged is in the files already, in append order.
    assert_eq!(file_seqs(&wal), expected);
    wal.close().unwrap();
    drop(wal);
    let (wal, got) = open(dir.path(), 16 << 10);
    assert_eq!(seqs(&got), expected);
    for r in &got {
        assert_eq!(*r, rec(r.seq, r.edits.len()));
    }
    wal.close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_group_commit_from_many_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 64 << 10);
    let wal = Arc::new(wal);
    let commit = Arc::new(parking_lot::Mutex::new(Commit::default()));
    let mut tasks = Vec::new();
    for _ in 0..16usize {
        let (wal, commit) = (Arc::clone(&wal), Arc::clone(&commit));
        tasks.push(tokio::spawn(async move {
            for i in 0..40usize {
                let (ticket, _) = commit_append(&wal, &commit, 1 + i % 3, Durability::FsyncWal);
                ticket.wait().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let expected = commit.lock().order.clone();
    assert_eq!(expected.len(), 640);
    let fsyncs = wal.shared.fsyncs.load(Ordering::Relaxed);
    assert!(fsyncs <= 640, "{fsyncs} fsyncs for 640 records");
    assert_eq!(file_seqs(&wal), expected);
    drop(wal); // closes
    let (_wal, got) = open(dir.path(), 64 << 10);
    assert_eq!(seqs(&got), expected);
}

#[tokio::test]
async fn fsync_waiters_share_one_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    let fsyncs = || wal.shared.fsyncs.load(Ordering::Relaxed);
    let tickets: Vec<_> = (1..=20)
        .map(|seq| wal.append(rec(seq, 2), Durability::FsyncWal).unwrap())
        .collect();
    let results = futures::future::join_all(tickets.into_iter().map(|t| t.wait())).await;
    assert!(results.iter().all(Result::is_ok));
    // The first waiter led one fsync covering everything written; the rest found it done.
    assert_eq!(fsyncs(), 1);
    // Already covered: no new fsync.
    wal.sync(true).await.unwrap();
    assert_eq!(fsyncs(), 1);
    wal.append(rec(21, 1), Durability::FsyncWal)
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(fsyncs(), 2);
    // A record that a roll fsynced counts as synced.
    let t = wal.append(rec(22, 1), Durability::FsyncWal).unwrap();
    wal.roll().unwrap();
    t.wait().await.unwrap();
    assert_eq!(fsyncs(), 2);
}

#[tokio::test]
async fn async_records_survive_close_and_drop() {
    let big = |seq: u64| WalRecord {
        seq,
        edits: vec![WalEdit {
            region_id: 7,
            family: Bytes::from_static(b"f"),
            cell: StoreCell {
                key: StoreKey {
                    row: Bytes::from(format!("big-{seq}")),
                    qualifier: Bytes::new(),
                    ts: seq,
                    kind: CellType::Put,
                    seq,
                },
                value: Bytes::from(vec![seq as u8; 100 << 10]),
            },
        }],
    };
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    // 100 KiB records: past the pending limit unless the flusher keeps up.
    for seq in 1..=60 {
        wal.append(big(seq), Durability::AsyncWal).unwrap();
    }
    for seq in 61..=300 {
        wal.append(rec(seq, 2), Durability::AsyncWal).unwrap();
    }
    wal.close().unwrap();
    drop(wal);
    let (wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), (1..=300).collect::<Vec<_>>());
    assert_eq!(got[0], big(1));
    assert_eq!(got[299], rec(300, 2));
    for seq in 301..=400 {
        wal.append(rec(seq, 1), Durability::AsyncWal).unwrap();
    }
    drop(wal); // Drop closes, writing what is pending.
    let (_wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), (1..=400).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_durabilities_keep_file_order_equal_to_append_order() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 8 << 10);
    let wal = Arc::new(wal);
    let commit = Arc::new(parking_lot::Mutex::new(Commit::default()));
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let (wal, commit) = (Arc::clone(&wal), Arc::clone(&commit));
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(t);
            for i in 0..300usize {
                let durability = match rng.random_range(0..10) {
                    0 => Durability::SkipWal,
                    1..=4 => Durability::AsyncWal,
                    5..=8 => Durability::SyncWal,
                    _ => Durability::FsyncWal,
                };
                let (ticket, _) = commit_append(&wal, &commit, 1 + i % 3, durability);
                if durability != Durability::AsyncWal || i % 7 == 0 {
                    ticket.wait().await.unwrap();
                }
                if (t + i as u64).is_multiple_of(97) {
                    wal.sync(i % 2 == 0).await.unwrap();
                }
            }
        }));
    }
    // Explicit rolls race with the appends.
    let roller = {
        let wal = Arc::clone(&wal);
        tokio::spawn(async move {
            for _ in 0..20 {
                wal.roll().unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    for t in tasks {
        t.await.unwrap();
    }
    roller.await.unwrap();
    wal.sync(false).await.unwrap();
    let expected = commit.lock().order.clone();
    assert_eq!(file_seqs(&wal), expected);
    let segs = wal.segments();
    for s in &segs {
        assert_eq!(s.size, std::fs::metadata(&s.path).unwrap().len());
        let in_file = frames(&s.path).iter().map(|f| f.2).max();
        assert_eq!(s.max_seq, in_file, "segment {}", s.id);
    }
    wal.close().unwrap();
    drop(wal);
    let (_wal, got) = open(dir.path(), 8 << 10);
    assert_eq!(seqs(&got), expected);
}

#[tokio::test]
async fn failed_fsync_fails_its_waiters_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    let t1 = wal.append(rec(1, 1), Durability::FsyncWal).unwrap();
    let t2 = wal.append(rec(2, 1), Durability::FsyncWal).unwrap();
    wal.shared
        .inject_fsync_failure
        .store(true, Ordering::SeqCst);
    assert!(matches!(t1.wait().await, Err(Error::Io(_))));
    // Not covered by an fsync, and the WAL will not fsync again.
    assert!(matches!(t2.wait().await, Err(Error::Io(_))));
    for d in [
        Durability::SkipWal,
        Durability::AsyncWal,
        Durability::SyncWal,
    ] {
        assert!(matches!(
            wal.append(rec(3, 1), d),
            Err(Error::WritesRefused(_))
        ));
    }
    assert!(matches!(wal.sync(true).await, Err(Error::WritesRefused(_))));
    assert!(matches!(wal.roll(), Err(Error::WritesRefused(_))));
    assert!(matches!(wal.close(), Err(Error::WritesRefused(_))));
    drop(wal);
    // Both records reached the OS before the (injected) fsync failure.
    let (_wal, got) = open(dir.path(), 1 << 20);
    assert_eq!(seqs(&got), vec![1, 2]);
}

#[tokio::test]
async fn failed_write_fails_pending_async_tickets() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), 1 << 20);
    wal.shared.inject_failure.store(true, Ordering::SeqCst);
    // Whichever write comes first (the flusher's or this append's) fails, and takes the
    // pending record with it.
    let t1 = wal.append(rec(1, 1), Durability::AsyncWal).unwrap();
    let t2 = wal.append(rec(2, 1), Durability::SyncWal);
    assert!(matches!(t1.wait().await, Err(Error::Io(_))));
    match t2 {
        Ok(t) => assert!(matches!(t.wait().await, Err(Error::Io(_)))),
        Err(e) => assert!(matches!(e, Error::WritesRefused(_)), "{e}"),
    }
    assert!(matches!(
        wal.append(rec(3, 1), Durability::AsyncWal),
        Err(Error::WritesRefused(_))
    ));
    drop(wal);
    let (_wal, got) = open(dir.path(), 1 << 20);
    assert!(got.is_empty());
}
