//! Seed 001's SMS records: row key = reverse(mobile) + reverse timestamp (19 decimal digits,
//! `Long.MAX_VALUE - t`), in a table pre-split with the seed's SPLITS on the first two
//! digits (`'05','10',...,'95'`). Reversing the mobile number puts its fast-changing last
//! digits first, so writes spread over the 20 regions; the reverse timestamp makes a
//! number's newest records come first.
//!
//! Queries: all records of one number (newest first) and one number's records in a time
//! range, each a single range scan; the region report shows the spread. Every answer is
//! checked against what was written; a wrong one exits non-zero.
//!
//! Run with `cargo run --release --example sms_records`.

use basalt::client::{Put, RowResult, Scan};
use basalt::keys::{reverse_decimal, reverse_str};
use basalt::{ColumnFamilyDescriptor, Connection, PreSplit, TableDescriptor, TableName};
use futures::TryStreamExt;
use rand::{Rng, SeedableRng};

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn check(ok: bool, what: &str) -> Res<()> {
    if ok {
        println!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("WRONG: {what}").into())
    }
}

fn row_key(mobile: &str, ts: u64) -> Res<String> {
    Ok(format!("{}{}", reverse_str(mobile), reverse_decimal(ts)?))
}

#[tokio::main]
async fn main() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let conn = Connection::open(dir.path()).await?;
    let admin = conn.admin();
    let name = TableName::parse("sms")?;
    // SPLITS => ['05','10','15',...,'95'] from the seed.
    let splits: Vec<Vec<u8>> = (1..20)
        .map(|i| format!("{:02}", i * 5).into_bytes())
        .collect();
    admin
        .create_table_with_splits(
            TableDescriptor::new(name.clone()).family(ColumnFamilyDescriptor::new("d")),
            PreSplit::Keys(splits),
        )
        .await?;
    let sms = conn.table("sms")?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mobiles: Vec<String> = (0..500)
        .map(|_| format!("13{:09}", rng.random_range(0..1_000_000_000u64)))
        .collect();
    let base = 1_500_000_000_000u64; // July 2017, in milliseconds
    let mut written: Vec<(String, u64)> = Vec::new();
    for i in 0..20_000u64 {
        let mobile = &mobiles[rng.random_range(0..mobiles.len())];
        let ts = base + i * 1_000 + rng.random_range(0..1_000);
        sms.put(
            Put::new(row_key(mobile, ts)?)
                .add_column("d", "to", "10086")
                .add_column("d", "text", format!("message {i}")),
        )
        .await?;
        written.push((mobile.clone(), ts));
    }
    println!(
        "wrote {} SMS records for {} numbers",
        written.len(),
        mobiles.len()
    );

    let mobile = &mobiles[0];
    let mut want: Vec<u64> = written
        .iter()
        .filter(|(m, _)| m == mobile)
        .map(|(_, t)| *t)
        .collect();
    want.sort_unstable_by_key(|x| std::cmp::Reverse(*x));
    let rows: Vec<RowResult> = sms
        .scan(Scan::new().with_prefix(reverse_str(mobile)))?
        .try_collect()
        .await?;
    let times = |rows: &[RowResult]| -> Res<Vec<u64>> {
        rows.iter()
            .map(|r| {
                let text = std::str::from_utf8(&r.row[11..])?;
                Ok(basalt::keys::parse_reverse_decimal(text)?)
            })
            .collect()
    };
    println!(
        "records of {mobile} (key prefix {}): {}",
        reverse_str(mobile),
        rows.len()
    );
    check(
        times(&rows)? == want,
        "all records of one number, newest first",
    )?;

    // Records in [t1, t2): start at the reverse of the newest time wanted, stop before the
    // reverse of the time just older than the range, as the seed describes.
    let (t1, t2) = (base + 5_000_000, base + 15_000_000);
    let scan = Scan::new()
        .start_row(row_key(mobile, t2 - 1)?)
        .stop_row(row_key(mobile, t1 - 1)?);
    let rows: Vec<RowResult> = sms.scan(scan)?.try_collect().await?;
    let want_range: Vec<u64> = want
        .iter()
        .copied()
        .filter(|t| (t1..t2).contains(t))
        .collect();
    println!("records of {mobile} in [{t1}, {t2}): {}", rows.len());
    check(
        times(&rows)? == want_range,
        "one number's records in a time range",
    )?;

    let report = sms.region_report().await?;
    println!("\n{report}");
    let max = report.write_shares().into_iter().fold(0.0f64, f64::max);
    check(
        max < 0.1,
        "reversed numbers spread writes: no region of 20 takes 10% of them",
    )?;
    conn.close().await?;
    Ok(())
}
