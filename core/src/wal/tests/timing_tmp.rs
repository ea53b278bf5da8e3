//! TEMPORARY timing check; deleted after measuring.

use super::super::{Durability, Wal, WalEdit, WalOptions, WalRecord};
use crate::cell::{CellType, StoreCell, StoreKey};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Instant;

fn kb_rec(seq: u64) -> WalRecord {
    WalRecord {
        seq,
        edits: vec![WalEdit {
            region_id: 1,
            family: Bytes::from_static(b"cf"),
            cell: StoreCell {
                key: StoreKey {
                    row: Bytes::from(format!("row-{seq:012}")),
                    qualifier: Bytes::from_static(b"q"),
                    ts: seq,
                    kind: CellType::Put,
                    seq,
                },
                value: Bytes::from(vec![7u8; 1000]),
            },
        }],
    }
}

async fn run(d: Durability, tasks: usize, per: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), WalOptions::default()).unwrap();
    let wal = Arc::new(wal);
    let commit = Arc::new(parking_lot::Mutex::new(1u64));
    let start = Instant::now();
    let mut hs = Vec::new();
    for _ in 0..tasks {
        let (wal, commit) = (Arc::clone(&wal), Arc::clone(&commit));
        hs.push(tokio::spawn(async move {
            for _ in 0..per {
                let ticket = {
                    let mut c = commit.lock();
                    let seq = *c;
                    *c += 1;
                    wal.append(kb_rec(seq), d).unwrap()
                };
                if d != Durability::AsyncWal {
                    ticket.wait().await.unwrap();
                }
            }
        }));
    }
    for h in hs {
        h.await.unwrap();
    }
    let el = start.elapsed();
    let n = tasks * per;
    println!(
        "TIMING {d:?}: {tasks} tasks x {per} = {n} appends in {:.3} s = {:.0} appends/s ({:.1} us/append)",
        el.as_secs_f64(),
        n as f64 / el.as_secs_f64(),
        el.as_secs_f64() * 1e6 / n as f64
    );
    wal.close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_tmp() {
    for _ in 0..3 {
        run(Durability::SyncWal, 8, 20_000).await;
    }
    run(Durability::AsyncWal, 8, 20_000).await;
    run(Durability::FsyncWal, 8, 500).await;
}
