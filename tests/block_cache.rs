//! The block cache honours the family's BLOCKCACHE and IN_MEMORY settings and the scan's
//! `cache_blocks`, and counts hits and misses: a family with the cache off never fills it; a
//! scan with `cache_blocks(false)` uses cached blocks but adds none; blocks of an in-memory
//! family live in their own partition, which scans of other families cannot evict.

use basalt::client::{Get, Put, Scan};
use basalt::{ColumnFamilyDescriptor, Config, Connection, TableDescriptor, TableName};
use futures::TryStreamExt;

const ROWS: usize = 400;

async fn setup(cache_bytes: u64) -> basalt::Result<(tempfile::TempDir, Connection)> {
    let dir = tempfile::tempdir()?;
    let conn = Connection::open_with(Config::new(dir.path()).block_cache_size(cache_bytes)).await?;
    let name = TableName::parse("t")?;
    conn.admin()
        .create_table(
            TableDescriptor::new(name.clone())
                .family(ColumnFamilyDescriptor::new("hot").block_size(1024))
                .family(
                    ColumnFamilyDescriptor::new("cold")
                        .block_size(1024)
                        .block_cache(false),
                )
                .family(
                    ColumnFamilyDescriptor::new("mem")
                        .block_size(1024)
                        .in_memory(true),
                ),
        )
        .await?;
    let t = conn.table("t")?;
    for i in 0..ROWS {
        let v = vec![b'x'; 200];
        t.put(
            Put::new(format!("r{i:04}"))
                .add_column("hot", "q", vec![b'h'; 1000])
                .add_column("cold", "q", &v)
                .add_column("mem", "q", &v[..20]),
        )
        .await?;
    }
    conn.admin().flush(&name).await?;
    Ok((dir, conn))
}

async fn scan_family(conn: &Connection, family: &str, cache: bool) -> basalt::Result<usize> {
    let t = conn.table("t")?;
    let s = Scan::new().add_family(family).cache_blocks(cache);
    Ok(t.scan(s)?.try_collect::<Vec<_>>().await?.len())
}

#[tokio::test]
async fn a_family_with_the_cache_off_never_fills_it() -> basalt::Result<()> {
    let (_dir, conn) = setup(64 << 20).await?;
    let cache = conn.engine().block_cache().clone();
    assert_eq!(cache.used_bytes(), 0);
    assert_eq!(scan_family(&conn, "cold", true).await?, ROWS);
    let t = conn.table("t")?;
    t.get(Get::new("r0007").add_family("cold")).await?;
    assert_eq!(cache.used_bytes(), 0, "cold blocks were cached");
    let misses = cache.misses();
    assert!(misses > 0);
    assert_eq!(scan_family(&conn, "hot", true).await?, ROWS);
    assert!(cache.used_bytes() > 0, "hot blocks were not cached");
    // A second scan of the hot family is served from the cache.
    let (hits, misses) = (cache.hits(), cache.misses());
    assert_eq!(scan_family(&conn, "hot", true).await?, ROWS);
    assert!(cache.hits() > hits);
    assert_eq!(cache.misses(), misses);
    conn.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_scan_without_cache_blocks_uses_the_cache_but_adds_nothing() -> basalt::Result<()> {
    let (_dir, conn) = setup(64 << 20).await?;
    let cache = conn.engine().block_cache().clone();
    assert_eq!(scan_family(&conn, "hot", false).await?, ROWS);
    assert_eq!(cache.used_bytes(), 0);
    let misses = cache.misses();
    assert!(misses > 0);
    assert_eq!(scan_family(&conn, "hot", true).await?, ROWS);
    let used = cache.used_bytes();
    assert!(used > 0);
    let (hits, misses) = (cache.hits(), cache.misses());
    assert_eq!(scan_family(&conn, "hot", false).await?, ROWS);
    assert_eq!(cache.used_bytes(), used);
    assert!(cache.hits() > hits);
    assert_eq!(cache.misses(), misses, "cached blocks were read again");
    conn.close().await?;
    Ok(())
}

#[tokio::test]
async fn in_memory_blocks_survive_scans_of_other_families() -> basalt::Result<()> {
    // 256 KiB: the hot family (about 400 KiB of values) churns the 192 KiB main partition
    // on every scan; the in-memory family (about 12 KiB) fits in its 64 KiB quarter.
    let (_dir, conn) = setup(256 << 10).await?;
    let cache = conn.engine().block_cache().clone();
    assert_eq!(scan_family(&conn, "mem", true).await?, ROWS);
    let in_memory = cache.in_memory_bytes();
    assert!(in_memory > 0, "in-memory blocks went elsewhere");
    for _ in 0..3 {
        let misses = cache.misses();
        assert_eq!(scan_family(&conn, "hot", true).await?, ROWS);
        assert!(
            cache.misses() > misses,
            "the hot family fits: nothing was evicted"
        );
    }
    assert_eq!(cache.in_memory_bytes(), in_memory);
    let misses = cache.misses();
    assert_eq!(scan_family(&conn, "mem", true).await?, ROWS);
    assert_eq!(cache.misses(), misses, "in-memory blocks were evicted");
    conn.close().await?;
    Ok(())
}

#[tokio::test]
async fn the_in_memory_quarter_is_reserved_only_once_an_in_memory_family_reads(
) -> basalt::Result<()> {
    // 256 KiB: the hot family's blocks (about 400 KiB) fill whatever the main partition has.
    let cap = 256u64 << 10;
    let (_dir, conn) = setup(cap).await?;
    let cache = conn.engine().block_cache().clone();
    assert_eq!(scan_family(&conn, "hot", true).await?, ROWS);
    let used = cache.used_bytes();
    assert!(
        used > cap * 3 / 4 && used <= cap,
        "no in-memory family read yet: the main partition may use it all ({used} of {cap})"
    );
    assert_eq!(scan_family(&conn, "mem", true).await?, ROWS);
    assert!(cache.in_memory_bytes() > 0);
    assert_eq!(scan_family(&conn, "hot", true).await?, ROWS);
    let main = cache.used_bytes() - cache.in_memory_bytes();
    assert!(
        main <= cap - cap / 4,
        "the main partition gave up the quarter ({main} of {cap})"
    );
    assert!(cache.used_bytes() <= cap);
    conn.close().await?;
    Ok(())
}
