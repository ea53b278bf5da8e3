//! Hot swap under eight writers: a counting plugin swapped back and forth between two
//! versions (each counting into its own column) while eight tasks write batches. Every
//! acknowledged write is there, and the two columns add up to exactly the writes: no batch
//! ran without a version, and none ran both.

use crate::common;

use basalt::client::{BatchOp, Get, Put};
use basalt::{
    plugin_coprocessor_name, ColumnFamilyDescriptor, CoprocessorDescriptor, TableDescriptor,
    TableName,
};
use basalt_plugins::PluginLimits;
use common::{counter, open};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

const WRITERS: usize = 8;
const BATCHES: usize = 60;

fn count(r: &basalt::client::RowResult, q: &str) -> i64 {
    r.value("f", q).map_or(0, |v| {
        i64::from_be_bytes(<[u8; 8]>::try_from(v.as_ref()).unwrap())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn swaps_under_eight_writers_lose_nothing_and_count_every_batch_once() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, _registry) = open(dir.path(), PluginLimits::default()).await;
    let admin = conn.admin();
    let v1 = admin
        .upload_plugin(counter("v1").component())
        .await
        .unwrap()
        .id;
    let v2 = admin
        .upload_plugin(counter("v2").component())
        .await
        .unwrap()
        .id;
    assert_ne!(v1, v2);
    let (n1, n2) = (plugin_coprocessor_name(&v1), plugin_coprocessor_name(&v2));
    for name in ["stats", "t"] {
        let mut d = TableDescriptor::new(TableName::parse(name).unwrap())
            .family(ColumnFamilyDescriptor::new("f"));
        if name == "t" {
            d = d.coprocessor(CoprocessorDescriptor::new(&n1));
        }
        admin.create_table(d).await.unwrap();
    }

    let done = Arc::new(AtomicBool::new(false));
    // Batches done, and swaps done: writers wait at half way for the first swap, and the
    // swapper lets 16 batches finish after it (at most 8 were in flight), so both versions
    // surely run.
    let progress = Arc::new(AtomicUsize::new(0));
    let swapped = Arc::new(AtomicUsize::new(0));
    let wait_until = |n: &Arc<AtomicUsize>, at_least: usize| {
        let n = n.clone();
        async move {
            while n.load(Ordering::Acquire) < at_least {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    };
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let t = conn.table("t").unwrap();
        let (progress, first_swap) = (progress.clone(), wait_until(&swapped, 1));
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut first_swap = Some(first_swap);
            for b in 0..BATCHES {
                if b == BATCHES / 2 {
                    if let Some(f) = first_swap.take() {
                        f.await;
                    }
                }
                let rows: Vec<String> = (0..1 + (w + b) % 7)
                    .map(|i| format!("w{w}-b{b:03}-{i}"))
                    .collect();
                let ops = rows
                    .iter()
                    .map(|r| BatchOp::Put(Put::new(r).add_column("f", "q", "x")))
                    .collect();
                for (r, out) in rows.into_iter().zip(t.batch(ops).await.unwrap()) {
                    out.unwrap();
                    acked.push(r);
                }
                progress.fetch_add(1, Ordering::AcqRel);
            }
            acked
        }));
    }
    let swapper = {
        let conn = conn.clone();
        let done = done.clone();
        let swapped = swapped.clone();
        let started = wait_until(&progress, 8);
        let progress = progress.clone();
        tokio::spawn(async move {
            let admin = conn.admin();
            let (mut from, mut to) = (n1, n2);
            started.await;
            while !done.load(Ordering::Acquire) {
                let next = CoprocessorDescriptor::new(&to);
                admin.swap_coprocessor("t", &from, next).await.unwrap();
                std::mem::swap(&mut from, &mut to);
                if swapped.fetch_add(1, Ordering::AcqRel) == 0 {
                    let at = progress.load(Ordering::Acquire) + 16;
                    while progress.load(Ordering::Acquire) < at && !done.load(Ordering::Acquire) {
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            swapped.load(Ordering::Acquire)
        })
    };
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    done.store(true, Ordering::Release);
    let swaps = swapper.await.unwrap();
    assert!(swaps >= 1, "no swap ran");

    let t = conn.table("t").unwrap();
    for r in &acked {
        assert!(
            t.exists(Get::new(r)).await.unwrap(),
            "acknowledged {r} lost"
        );
    }
    let stats = conn
        .table("stats")
        .unwrap()
        .get(Get::new("n"))
        .await
        .unwrap();
    let (c1, c2) = (count(&stats, "v1"), count(&stats, "v2"));
    assert!(c1 > 0 && c2 > 0, "both versions ran: {c1} + {c2}");
    assert_eq!(
        c1 + c2,
        acked.len() as i64,
        "{c1} + {c2} after {swaps} swaps"
    );
    conn.close().await.unwrap();
}
