//! The global MemStore budget: with per-region flush sizes far above the budget, concurrent
//! writers to many regions keep the engine's MemStores near the budget (forced flushes of the
//! largest MemStores, writers waiting), and every acknowledged write reads back.

use basalt::client::{Get, Put, Scan};
use basalt::{ColumnFamilyDescriptor, Config, Connection, PreSplit, TableDescriptor, TableName};
use futures::TryStreamExt;

const BUDGET: u64 = 512 << 10;
const WRITERS: usize = 8;
const ROWS_PER_WRITER: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_wait_and_memstores_stay_near_the_budget() -> basalt::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = Config::new(dir.path())
        .memstore_flush_size(1 << 30)
        .global_memstore_size(BUDGET);
    let conn = Connection::open_with(config).await?;
    let name = TableName::parse("t")?;
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(name.clone()).family(ColumnFamilyDescriptor::new("f")),
            PreSplit::Keys(vec![b"w2".to_vec(), b"w4".to_vec(), b"w6".to_vec()]),
        )
        .await?;
    let t = conn.table("t")?;
    let value = vec![7u8; 1000];
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (t, conn, value) = (t.clone(), conn.clone(), value.clone());
        tasks.push(tokio::spawn(async move {
            let mut peak = 0u64;
            for i in 0..ROWS_PER_WRITER {
                t.put(Put::new(format!("w{w}-{i:05}")).add_column("f", "q", &value))
                    .await?;
                peak = peak.max(conn.engine().global_memstore_size());
            }
            Ok::<_, basalt::Error>(peak)
        }));
    }
    let mut peak = 0;
    for task in tasks {
        peak = peak.max(
            task.await
                .map_err(|e| std::io::Error::other(e.to_string()))??,
        );
    }
    // 3.2 MB were written into regions that never reach their own flush size.
    let written = (WRITERS * ROWS_PER_WRITER * value.len()) as u64;
    assert!(written > 6 * BUDGET);
    // The budget, plus the step between checks (1/16), plus the writes in flight when
    // writers start to wait (each about 1.1 KB), plus one more step of slack.
    let bound = BUDGET + BUDGET / 8 + (WRITERS as u64) * 2048;
    eprintln!("MemStores peaked at {peak} bytes (budget {BUDGET}, bound {bound})");
    assert!(
        peak <= bound,
        "MemStores peaked at {peak} bytes, bound {bound}"
    );
    assert!(conn.engine().memstore_blocked_writes() > 0);
    let files: usize = conn
        .admin()
        .regions(&name)
        .await?
        .iter()
        .map(|r| r.store_files)
        .sum();
    assert!(files >= 4, "forced flushes wrote only {files} files");

    for w in 0..WRITERS {
        for i in (0..ROWS_PER_WRITER).step_by(37) {
            let row = t.get(Get::new(format!("w{w}-{i:05}"))).await?;
            assert_eq!(row.cells.len(), 1, "row w{w}-{i:05}");
            assert_eq!(row.cells[0].value.as_ref(), &value[..]);
        }
    }
    let n = t.scan(Scan::new())?.try_collect::<Vec<_>>().await?.len();
    assert_eq!(n, WRITERS * ROWS_PER_WRITER);
    conn.close().await?;
    Ok(())
}

#[tokio::test]
async fn under_the_budget_nothing_waits_or_flushes() -> basalt::Result<()> {
    let dir = tempfile::tempdir()?;
    let conn = Connection::open_with(Config::new(dir.path())).await?;
    let name = TableName::parse("t")?;
    conn.admin()
        .create_table(TableDescriptor::new(name.clone()).family(ColumnFamilyDescriptor::new("f")))
        .await?;
    let t = conn.table("t")?;
    for i in 0..2000 {
        t.put(Put::new(format!("r{i:05}")).add_column("f", "q", "v"))
            .await?;
    }
    assert_eq!(conn.engine().memstore_blocked_writes(), 0);
    let regions = conn.admin().regions(&name).await?;
    assert_eq!(regions[0].store_files, 0);
    assert!(conn.engine().global_memstore_size() > 0);
    conn.close().await?;
    Ok(())
}
