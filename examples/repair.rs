//! Offline check and repair of a closed data directory, then an open that shows its
//! recovery report.
//!
//!     cargo run --release --example repair -- <dir>             # check only, changes nothing
//!     cargo run --release --example repair -- <dir> --repair    # set damaged store files aside
//!     cargo run --release --example repair -- <dir> --open point-in-time   # or salvage
//!
//! Without a directory it makes a demonstration one: a table written and flushed, one of
//! its store files deleted, then the engine opened (the region is offline, the other
//! table serves), checked, repaired and reopened.

use basalt::client::{Get, Put};
use basalt::repair::{check_dir, repair_dir};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, PreSplit, SplitAlgorithm, TableDescriptor,
    TableName, WalRecoveryMode,
};
use std::path::{Path, PathBuf};

#[tokio::main]
async fn main() -> basalt::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = match args.iter().position(|a| a == "--open") {
        Some(i) => match args.get(i + 1).map(String::as_str) {
            Some("point-in-time") => WalRecoveryMode::PointInTime,
            Some("salvage") => WalRecoveryMode::Salvage,
            Some("tail") | None => WalRecoveryMode::TolerateCorruptedTail,
            Some(other) => {
                return Err(basalt::Error::bad_argument(format!(
                    "unknown recovery mode {other}: tail, point-in-time or salvage"
                )))
            }
        },
        None => WalRecoveryMode::default(),
    };
    match args.first().filter(|a| !a.starts_with("--")) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            let config = Config::new(&dir);
            if args.iter().any(|a| a == "--repair") {
                println!("{}", repair_dir(&config)?);
            } else {
                println!("{}", check_dir(&config)?);
            }
            let conn = Connection::open_with(Config::new(&dir).wal_recovery(mode)).await?;
            println!("{}", conn.recovery_report());
            conn.close().await
        }
        None => demonstration().await,
    }
}

async fn demonstration() -> basalt::Result<()> {
    let tmp = std::env::temp_dir().join(format!("basalt-repair-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let conn = Connection::open(&tmp).await?;
    let admin = conn.admin();
    for name in ["users", "orders"] {
        admin
            .create_table_with_splits(
                TableDescriptor::new(TableName::parse(name)?)
                    .family(ColumnFamilyDescriptor::new("f")),
                PreSplit::Algorithm(SplitAlgorithm::HexString, 2),
            )
            .await?;
        let t = conn.table(name)?;
        for i in 0..100u32 {
            let row = format!("{:08x}", i.wrapping_mul(2_654_435_761));
            t.put(Put::new(row).add_column("f", "n", i.to_string()))
                .await?;
        }
        admin.flush(&TableName::parse(name)?).await?;
    }
    conn.close().await?;
    println!("1. two tables written and flushed in {}", tmp.display());

    let victim = first_store_file(&tmp)?;
    std::fs::remove_file(&victim)?;
    println!("2. deleted {}", victim.display());

    let conn = Connection::open(&tmp).await?;
    println!("3. opened anyway: {}", conn.recovery_report());
    for r in conn.admin().offline_regions().await? {
        println!(
            "   offline: region {} of {}: {}",
            r.region_id, r.table, r.reason
        );
    }
    for name in ["users", "orders"] {
        let t = conn.table(name)?;
        for row in ["00000000", "ffffffff"] {
            match t.get(Get::new(row)).await {
                Ok(r) => println!("   {name} get {row}: ok ({} cells)", r.cells.len()),
                Err(e) => println!("   {name} get {row}: {e}"),
            }
        }
    }
    conn.close().await?;

    println!("4. offline check:\n{}", check_dir(&Config::new(&tmp))?);
    println!("5. offline repair:\n{}", repair_dir(&Config::new(&tmp))?);
    let conn = Connection::open(&tmp).await?;
    println!(
        "6. reopened: {} offline regions; {}",
        conn.admin().offline_regions().await?.len(),
        conn.recovery_report()
    );
    conn.close().await?;
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}

fn first_store_file(dir: &Path) -> basalt::Result<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("data"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sf"))
        .collect();
    files.sort();
    files
        .into_iter()
        .next()
        .ok_or_else(|| basalt::Error::bad_argument("no store file was written"))
}
