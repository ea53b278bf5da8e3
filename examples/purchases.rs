//! Seed 003's purchase records: row key = user id + reverse timestamp
//! (`Long.MAX_VALUE - t`, 19 digits) + product id. A user's rows sit together, newest first,
//! so "the latest purchases of a user" and "a user's purchases in a time window" are single
//! range scans whose start and stop rows come from the reverse timestamps.
//!
//! Every answer is checked against what was written; a wrong one exits non-zero.
//!
//! Run with `cargo run --release --example purchases`.

use basalt::client::{Put, RowResult, Scan};
use basalt::keys::{parse_reverse_decimal, reverse_decimal};
use basalt::{ColumnFamilyDescriptor, Connection, TableDescriptor, TableName};
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

/// `user` as 8 digits, the reverse timestamp, the product as 6 digits.
fn row_key(user: u32, ts: u64, product: u32) -> Res<String> {
    Ok(format!("{user:08}{}{product:06}", reverse_decimal(ts)?))
}

fn parse(row: &[u8]) -> Res<(u64, u32)> {
    let text = std::str::from_utf8(row)?;
    let ts = parse_reverse_decimal(text.get(8..27).ok_or("short key")?)?;
    let product = text.get(27..).ok_or("short key")?.parse()?;
    Ok((ts, product))
}

#[tokio::main]
async fn main() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let conn = Connection::open(dir.path()).await?;
    println!("{}", conn.recovery_report());
    conn.admin()
        .create_table(
            TableDescriptor::new(TableName::parse("purchases")?)
                .family(ColumnFamilyDescriptor::new("p")),
        )
        .await?;
    let t = conn.table("purchases")?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let base = 1_600_000_000_000u64;
    let mut written: Vec<(u32, u64, u32)> = Vec::new();
    for i in 0..5_000u64 {
        let user = rng.random_range(0..100u32);
        let ts = base + i * 60_000;
        let product = rng.random_range(0..1_000_000u32);
        t.put(
            Put::new(row_key(user, ts, product)?)
                .add_column("p", "name", format!("product {product}"))
                .add_column("p", "price", format!("{}", rng.random_range(1..500u32))),
        )
        .await?;
        written.push((user, ts, product));
    }
    println!("wrote {} purchases of 100 users", written.len());

    let user = 42u32;
    let mut mine: Vec<(u64, u32)> = written
        .iter()
        .filter(|(u, _, _)| *u == user)
        .map(|(_, ts, p)| (*ts, *p))
        .collect();
    mine.sort_unstable_by_key(|x| std::cmp::Reverse(*x));

    // The latest 10: a prefix scan from the user's newest row.
    let rows: Vec<RowResult> = t
        .scan(Scan::new().with_prefix(format!("{user:08}")).limit(10))?
        .try_collect()
        .await?;
    let got: Vec<(u64, u32)> = rows.iter().map(|r| parse(&r.row)).collect::<Res<_>>()?;
    println!("latest 10 purchases of user {user}:");
    for (ts, p) in &got {
        println!("  at {ts}: product {p:06}");
    }
    check(
        got == mine[..10.min(mine.len())],
        "latest purchases of a user, newest first",
    )?;

    // A window [t1, t2): start row = user + reverse(t2 - 1), stop row = user + reverse(t1 - 1).
    let (t1, t2) = (base + 1_000 * 60_000, base + 3_000 * 60_000);
    let start = format!("{user:08}{}", reverse_decimal(t2 - 1)?);
    let stop = format!("{user:08}{}", reverse_decimal(t1 - 1)?);
    println!("window [{t1}, {t2}): start row {start}, stop row {stop}");
    let rows: Vec<RowResult> = t
        .scan(Scan::new().start_row(&start).stop_row(&stop))?
        .try_collect()
        .await?;
    let got: Vec<(u64, u32)> = rows.iter().map(|r| parse(&r.row)).collect::<Res<_>>()?;
    let want: Vec<(u64, u32)> = mine
        .iter()
        .copied()
        .filter(|(ts, _)| (t1..t2).contains(ts))
        .collect();
    println!("{} purchases in the window", got.len());
    check(
        got == want,
        "a user's purchases in a time window, one range scan",
    )?;
    conn.close().await?;
    Ok(())
}
