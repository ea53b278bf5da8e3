//! Scans longer than one chunk, with the engine reading ahead (prefetch, the default) and
//! without: both return exactly the same rows in the same order, forward and reverse, with
//! limits, batches and column selections; a stream dropped while a chunk is being read ahead
//! leaves the engine usable and closable.

use basalt::client::{Put, Scan};
use basalt::{ColumnFamilyDescriptor, Connection, PreSplit, TableDescriptor, TableName};
use futures::{StreamExt, TryStreamExt};

const ROWS: usize = 1500;

async fn setup(dir: &std::path::Path) -> basalt::Result<(Connection, basalt::Table)> {
    let conn = Connection::open(dir).await?;
    let name = TableName::parse("t")?;
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(name.clone())
                .family(ColumnFamilyDescriptor::new("a"))
                .family(ColumnFamilyDescriptor::new("b")),
            PreSplit::Keys(vec![b"r0400".to_vec(), b"r0900".to_vec()]),
        )
        .await?;
    let t = conn.table("t")?;
    for i in 0..ROWS {
        let mut p = Put::new(format!("r{i:04}")).add_column("a", "q", format!("v{i}"));
        if i % 3 == 0 {
            p = p.add_column("b", "x", "1").add_column("b", "y", "2");
        }
        t.put(p).await?;
        if i == ROWS / 2 {
            conn.admin().flush(&name).await?;
        }
    }
    Ok((conn, t))
}

fn render(rows: &[basalt::client::RowResult]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .cells
                .iter()
                .map(|c| {
                    format!(
                        "{}:{}={}",
                        String::from_utf8_lossy(&c.family),
                        String::from_utf8_lossy(&c.qualifier),
                        String::from_utf8_lossy(&c.value)
                    )
                })
                .collect();
            format!("{} {}", String::from_utf8_lossy(&r.row), cells.join(","))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_returns_the_same_rows_as_inline_reading() -> basalt::Result<()> {
    let dir = tempfile::tempdir()?;
    let (conn, t) = setup(dir.path()).await?;
    let scans = [
        Scan::new(),
        Scan::new().reversed(true),
        Scan::new().start_row("r0100").stop_row("r1300"),
        Scan::new().limit(700),
        Scan::new().reversed(true).limit(300),
        Scan::new().batch(1),
        Scan::new().add_family("b"),
    ];
    for (i, s) in scans.into_iter().enumerate() {
        let ahead: Vec<_> = t.scan(s.clone().prefetch(true))?.try_collect().await?;
        let inline: Vec<_> = t.scan(s.prefetch(false))?.try_collect().await?;
        assert_eq!(render(&ahead), render(&inline), "scan #{i}");
        assert!(!ahead.is_empty(), "scan #{i} returned nothing");
    }
    let all: Vec<_> = t.scan(Scan::new())?.try_collect().await?;
    assert_eq!(all.len(), ROWS);
    let rows: Vec<_> = all.iter().map(|r| r.row.clone()).collect();
    let mut sorted = rows.clone();
    sorted.sort();
    assert_eq!(rows, sorted);
    conn.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_prefetching_stream_leaves_the_engine_usable() -> basalt::Result<()> {
    let dir = tempfile::tempdir()?;
    let (conn, t) = setup(dir.path()).await?;
    for take in [1, 256, 257, 600] {
        let mut s = t.scan(Scan::new())?;
        for _ in 0..take {
            assert!(s.next().await.transpose()?.is_some());
        }
        drop(s);
    }
    t.put(Put::new("zzz").add_column("a", "q", "after")).await?;
    let n = t.scan(Scan::new())?.try_collect::<Vec<_>>().await?.len();
    assert_eq!(n, ROWS + 1);
    conn.close().await?;
    Ok(())
}

#[test]
fn a_scan_polled_outside_tokio_reads_inline() -> basalt::Result<()> {
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Runtime::new()?;
    let (conn, t) = rt.block_on(setup(dir.path()))?;
    let stream = t.scan(Scan::new())?;
    // A plain executor: no tokio runtime is current while the stream is polled.
    let rows: Vec<_> = futures::executor::block_on(stream.try_collect::<Vec<_>>())?;
    assert_eq!(rows.len(), ROWS);
    rt.block_on(conn.close())?;
    Ok(())
}

/// A region long enough that its scans move their merges to helper threads (after 512 rows):
/// every row a scan returns equals what a point read (never pipelined) returns, forward and
/// reverse, across MemStore and two files with overwrites and deletes between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_pipelined_scans_match_point_reads() -> basalt::Result<()> {
    use basalt::client::{Delete, Get};
    let dir = tempfile::tempdir()?;
    let conn = Connection::open(dir.path()).await?;
    let name = TableName::parse("long")?;
    conn.admin()
        .create_table(
            TableDescriptor::new(name.clone())
                .family(ColumnFamilyDescriptor::new("a"))
                .family(ColumnFamilyDescriptor::new("b")),
        )
        .await?;
    let t = conn.table("long")?;
    const N: usize = 3000;
    for round in 0..3 {
        for i in (round..N).step_by(2) {
            let mut p = Put::new(format!("r{i:05}")).add_column("a", "q", format!("v{i}.{round}"));
            if i % 5 == 0 {
                p = p.add_column("b", "x", format!("b{round}"));
            }
            t.put(p).await?;
        }
        for i in (round..N).step_by(7) {
            t.delete(Delete::new(format!("r{i:05}"))).await?;
        }
        if round < 2 {
            conn.admin().flush(&name).await?;
        }
    }
    let mut want = Vec::new();
    for i in 0..N {
        let row = t.get(Get::new(format!("r{i:05}"))).await?;
        if !row.is_empty() {
            want.push(row);
        }
    }
    assert!(want.len() > 1000, "only {} rows survive", want.len());
    let forward: Vec<_> = t.scan(Scan::new())?.try_collect().await?;
    assert_eq!(render(&forward), render(&want));
    let mut reverse: Vec<_> = t.scan(Scan::new().reversed(true))?.try_collect().await?;
    reverse.reverse();
    assert_eq!(render(&reverse), render(&want));
    let only_b: Vec<_> = t.scan(Scan::new().add_family("b"))?.try_collect().await?;
    let want_b: Vec<_> = want
        .iter()
        .filter_map(|r| {
            let cells: Vec<_> = r
                .cells
                .iter()
                .filter(|c| &c.family[..] == b"b")
                .cloned()
                .collect();
            (!cells.is_empty()).then(|| basalt::client::RowResult {
                row: r.row.clone(),
                cells,
            })
        })
        .collect();
    assert_eq!(render(&only_b), render(&want_b));
    conn.close().await?;
    Ok(())
}
