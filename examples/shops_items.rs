//! Shops and items (seed 003): table `shops` lists each shop's items in family `item`
//! (`item:<item id> = <relation type>`), table `items` lists each item's shops in family
//! `shop` (`shop:<shop id> = <relation type>`). The seed keeps both tables by hand; here the
//! client writes only `shops`, and an `InverseRelation` observer on it writes the reverse
//! links into `items` in the same atomic batch (one WAL record, one MVCC step), so a reader
//! never sees one side without the other, not even after a crash. A `RelationGuard` on
//! `items` refuses user writes to its `shop` family.
//!
//! The example loads `--shops` shops (default 500) with `--links` items each (default 20)
//! out of `--items` items (default 2000), from several tasks at once; runs "items of a shop"
//! and "shops of an item" (one get each) and prints their mean times; unlinks, relinks and
//! deletes shops; then scans both tables and checks each is the exact reverse of the other
//! (exit code 1 if not). Run with `cargo run --release --example shops_items [-- --shops N
//! --links K --items M]`.

use basalt::client::{Delete, Get, Put, RowResult, Scan};
use basalt::coprocessors::relations::{inverse_relation, register_relations, relation_guard};
use basalt::coprocessors::Registry;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, Result, Table, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes retried after a row lock timeout.
static RETRIES: AtomicUsize = AtomicUsize::new(0);

const TASKS: usize = 4;
const QUERIES: usize = 2000;
const TYPES: [&str; 3] = ["sells", "stocks", "promotes"];

/// The scale, from the command line.
struct Scale {
    shops: usize,
    links: usize,
    items: usize,
}

fn parse_args() -> std::result::Result<Scale, String> {
    let mut scale = Scale {
        shops: 500,
        links: 20,
        items: 2000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let slot = match flag.as_str() {
            "--shops" => &mut scale.shops,
            "--links" => &mut scale.links,
            "--items" => &mut scale.items,
            _ => return Err(format!("unknown flag {flag} (--shops, --links, --items)")),
        };
        *slot = args
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} needs a number"))?;
    }
    if scale.items == 0 || scale.links > scale.items {
        return Err("need --items >= 1 and --links <= --items".into());
    }
    Ok(scale)
}

fn shop_id(n: usize) -> String {
    format!("shop{n:06}")
}

fn item_id(n: usize) -> String {
    format!("item{n:06}")
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// The links of one row in `family`: (qualifier, value) as text.
fn links(r: &RowResult, family: &str) -> Vec<(String, String)> {
    r.cells
        .iter()
        .filter(|c| c.family.as_ref() == family.as_bytes())
        .map(|c| {
            (
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

/// Puts `p`, again while it fails with a row lock timeout: a put locks its shop row, then
/// the item rows it links, and row locks are striped, so two puts can each hold a stripe
/// the other needs; the engine relocks in order and retries, and after 16 retries fails
/// the put after `Config::row_lock_wait_ms`, having written nothing.
async fn put(t: &Table, p: Put) -> Result<()> {
    loop {
        match t.put(p.clone()).await {
            Err(Error::RowLockTimeout { .. }) => RETRIES.fetch_add(1, Ordering::Relaxed),
            other => return other,
        };
    }
}

/// [`put`] for a delete.
async fn delete(t: &Table, d: Delete) -> Result<()> {
    loop {
        match t.delete(d.clone()).await {
            Err(Error::RowLockTimeout { .. }) => RETRIES.fetch_add(1, Ordering::Relaxed),
            other => return other,
        };
    }
}

/// Loads shops `n` with `n % TASKS == task`: name and `links` items each, one put per shop.
async fn load(shops: Table, scale: Arc<Scale>, task: usize) -> Result<usize> {
    let mut rng = Rng::new(task as u64 + 1);
    let mut written = 0;
    for n in (task..scale.shops).step_by(TASKS) {
        let mut p = Put::new(shop_id(n)).add_column("info", "name", format!("shop {n}"));
        let mut chosen = BTreeSet::new();
        while chosen.len() < scale.links {
            chosen.insert(rng.below(scale.items));
        }
        for i in chosen {
            p = p.add_column("item", item_id(i), TYPES[rng.below(TYPES.len())]);
        }
        put(&shops, p).await?;
        written += scale.links;
    }
    Ok(written)
}

/// Mean time of `QUERIES` gets of random rows of `table`'s `family`; and the mean number
/// of links found.
async fn time_gets(
    table: &Table,
    family: &str,
    rows: usize,
    id: fn(usize) -> String,
) -> Result<(Duration, f64)> {
    let mut rng = Rng::new(99);
    let mut found = 0;
    let started = Instant::now();
    for _ in 0..QUERIES {
        let r = table
            .get(Get::new(id(rng.below(rows))).add_family(family))
            .await?;
        found += r.cells.len();
    }
    Ok((
        started.elapsed() / QUERIES as u32,
        found as f64 / QUERIES as f64,
    ))
}

/// Every link of `family` in `table`, as (row, qualifier, value).
async fn all_links(table: &Table, family: &str) -> Result<BTreeSet<(String, String, String)>> {
    let rows: Vec<RowResult> = table
        .scan(Scan::new().add_family(family))?
        .try_collect()
        .await?;
    Ok(rows
        .iter()
        .flat_map(|r| {
            let row = String::from_utf8_lossy(&r.row).into_owned();
            links(r, family)
                .into_iter()
                .map(move |(q, v)| (row.clone(), q, v))
        })
        .collect())
}

async fn run(dir: &std::path::Path, scale: Scale) -> Result<bool> {
    let registry = Arc::new(Registry::new());
    register_relations(&registry)?;
    let config = Config::new(dir)
        .coprocessor_loader(registry)
        .row_lock_wait_ms(100);
    let conn = Connection::open_with(config).await?;
    println!("{}", conn.recovery_report());
    let admin = conn.admin();
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("items")?)
                .family(ColumnFamilyDescriptor::new("info"))
                .family(ColumnFamilyDescriptor::new("shop"))
                .coprocessor(relation_guard(&["shop"])),
        )
        .await?;
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("shops")?)
                .family(ColumnFamilyDescriptor::new("info"))
                .family(ColumnFamilyDescriptor::new("item"))
                .coprocessor(inverse_relation("item", "items", "shop")),
        )
        .await?;
    let (shops, items) = (conn.table("shops")?, conn.table("items")?);

    // The seed's example, written on one side only.
    shops
        .put(
            Put::new("s-corner")
                .add_column("info", "name", "corner shop")
                .add_column("item", "i-tea", "sells")
                .add_column("item", "i-rice", "stocks"),
        )
        .await?;
    shops
        .put(Put::new("s-market").add_column("item", "i-tea", "promotes"))
        .await?;
    let tea = items.get(Get::new("i-tea").add_family("shop")).await?;
    println!(
        "shops of i-tea (kept by the observer): {:?}",
        links(&tea, "shop")
    );
    let forged = items
        .put(Put::new("i-tea").add_column("shop", "s-fake", "sells"))
        .await;
    println!(
        "a user write to items/shop: {}",
        forged
            .err()
            .map_or("accepted (wrong)".into(), |e| e.to_string())
    );
    shops
        .delete(Delete::new("s-corner").add_columns("item", "i-tea"))
        .await?;
    let tea = items.get(Get::new("i-tea").add_family("shop")).await?;
    println!("after s-corner drops i-tea: {:?}", links(&tea, "shop"));

    // Load.
    let scale = Arc::new(scale);
    println!(
        "loading {} shops x {} links over {} items from {TASKS} tasks",
        scale.shops, scale.links, scale.items
    );
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        tasks.push(tokio::spawn(load(shops.clone(), scale.clone(), task)));
    }
    let mut written = 0;
    for t in tasks {
        written += t
            .await
            .map_err(|e| Error::bad_argument(format!("task failed: {e}")))??;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{written} links (and as many reverse links) in {secs:.2} s: {:.0} links/s \
         ({} puts retried after a row lock timeout)",
        written as f64 / secs,
        RETRIES.load(Ordering::Relaxed)
    );

    // Queries both ways.
    let (t, n) = time_gets(&shops, "item", scale.shops, shop_id).await?;
    println!("items of a shop: {t:?} per query, {n:.1} items each ({QUERIES} queries)");
    let (t, n) = time_gets(&items, "shop", scale.items, item_id).await?;
    println!("shops of an item: {t:?} per query, {n:.1} shops each ({QUERIES} queries)");

    // Changes on the shop side only.
    let mut rng = Rng::new(7);
    let started = Instant::now();
    let changes = scale.shops.min(500);
    for _ in 0..changes {
        let s = shop_id(rng.below(scale.shops));
        let r = shops.get(Get::new(&s).add_family("item")).await?;
        let current = links(&r, "item");
        if let Some((q, _)) = current.first() {
            shops.delete(Delete::new(&s).add_columns("item", q)).await?;
        }
        shops
            .put(Put::new(&s).add_column("item", item_id(rng.below(scale.items)), "sells"))
            .await?;
    }
    let dropped = shop_id(0);
    delete(&shops, Delete::new(&dropped)).await?;
    println!(
        "{changes} unlink+link changes and a shop deleted ({dropped}) in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    // Check: each table is the reverse of the other.
    let forward = all_links(&shops, "item").await?;
    let backward = all_links(&items, "shop").await?;
    let reversed: BTreeSet<_> = backward.into_iter().map(|(i, s, v)| (s, i, v)).collect();
    let ok = forward == reversed;
    println!(
        "{} links in shops, {} in items: {}",
        forward.len(),
        reversed.len(),
        if ok {
            "each the exact reverse of the other"
        } else {
            "NOT SYMMETRIC"
        }
    );
    conn.close().await?;
    Ok(ok)
}

#[tokio::main]
async fn main() -> ExitCode {
    let scale = match parse_args() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("no temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(tmp.path(), scale).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
