//! Seed 001's SMS records: row key = reverse(mobile) + reverse timestamp (19 decimal digits,
//! `Long.MAX_VALUE - t`), in a table pre-split with the seed's SPLITS on the first two
//! digits (`'05','10',...,'95'`). Reversing the mobile number puts its fast-changing last
//! digits first, so writes spread over the 20 regions; the reverse timestamp makes a
//! number's newest records come first.
//!
//! Queries: all records of one number (newest first) and one number's records in a time
//! range, each a single range scan; the region report shows the spread.
//!
//! The seed also keeps a second, hand-maintained table indexing the records by date and
//! account, written by the client next to each record (and out of step after any crash or
//! failed second write). Here it is a secondary index instead: `by_day` on `d:day` (the
//! record's UTC date) then `d:account` (the number), covering `d:text`, kept by the index
//! maintainer in the same atomic batch as the record. "All records of a day, by account"
//! and "one account's records of a day" are index queries answered from the index alone.
//! Every answer is checked against what was written; a wrong one exits non-zero.
//!
//! Run with `cargo run --release --example sms_records`.

use basalt::client::{Put, RowResult, Scan};
use basalt::index::val;
use basalt::index::{IndexAdmin, IndexDef, Query};
use basalt::keys::{reverse_decimal, reverse_str};
use basalt::{ColumnFamilyDescriptor, Config, Connection, PreSplit, TableDescriptor, TableName};
use futures::TryStreamExt;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn check(ok: bool, what: &str) -> Res<()> {
    if ok {
        println!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("WRONG: {what}").into())
    }
}

/// The UTC date (`YYYY-MM-DD`) of a time in milliseconds (days to civil date, H. Hinnant's
/// algorithm).
fn day(ts_ms: u64) -> String {
    let z = (ts_ms / 86_400_000) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn row_key(mobile: &str, ts: u64) -> Res<String> {
    Ok(format!("{}{}", reverse_str(mobile), reverse_decimal(ts)?))
}

#[tokio::main]
async fn main() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let registry = Arc::new(basalt::coprocessors::Registry::new());
    let runtime = basalt::index::register(&registry)?;
    let conn = Connection::open_with(Config::new(dir.path()).coprocessor_loader(registry)).await?;
    println!("{}", conn.recovery_report());
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
    let indexes = IndexAdmin::new(&conn, runtime);
    indexes
        .create(
            IndexDef::new("by_day", "sms")
                .column("d", "day")
                .column("d", "account")
                .cover("d", "text"),
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
        // One record every 30 s or so: a week of records.
        let ts = base + i * 30_000 + rng.random_range(0..1_000);
        sms.put(
            Put::new(row_key(mobile, ts)?)
                .add_column("d", "to", "10086")
                .add_column("d", "text", format!("message {i}"))
                .add_column("d", "day", day(ts))
                .add_column("d", "account", mobile),
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
    let (t1, t2) = (base + 2 * 86_400_000, base + 4 * 86_400_000);
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

    // The index by date + account.
    let by_day = indexes.index("sms", "by_day").await?;
    let date = day(base + 86_400_000);
    let mut want_day: Vec<(String, String)> = Vec::new();
    for (m, ts) in &written {
        if day(*ts) == date {
            want_day.push((m.clone(), row_key(m, *ts)?));
        }
    }
    want_day.sort();
    let hits = by_day.hits(&Query::prefix(vec![val(&date)])).await?;
    let got_day: Vec<(String, String)> = hits
        .iter()
        .map(|h| {
            let account = h.values[1].as_deref().unwrap_or_default();
            (
                String::from_utf8_lossy(account).into_owned(),
                String::from_utf8_lossy(&h.row).into_owned(),
            )
        })
        .collect();
    println!(
        "records of {date} (index by_day, by account): {}",
        hits.len()
    );
    check(
        got_day == want_day,
        "a day's records, by account then record key, from the index",
    )?;
    check(
        hits.iter().all(|h| h.covered.len() == 1),
        "each hit carries its covered text without reading the records",
    )?;
    let one = &want_day[want_day.len() / 2].0;
    let keys = by_day.keys(&Query::eq(vec![val(&date), val(one)])).await?;
    let want_one: Vec<String> = want_day
        .iter()
        .filter(|(m, _)| m == one)
        .map(|(_, k)| k.clone())
        .collect();
    println!("records of {one} on {date}: {}", keys.len());
    check(
        keys.iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect::<Vec<_>>()
            == want_one,
        "one account's records of a day, from the index",
    )?;
    check(
        indexes.verify("sms", "by_day").await?.is_consistent(),
        "the index verifies against the records",
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
