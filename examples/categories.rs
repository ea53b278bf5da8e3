//! Categories (seed 003): a tree in one table, `category`, each row naming its parent in
//! family `parent` (`parent:<parent id>`) and its children in family `child`
//! (`child:<child id>`). The client writes only the parent link; a `TreeLinks` observer
//! keeps the child links symmetric in the same atomic batch: setting a category's parent
//! adds `child:<row>` on the new parent, deletes it from the old one and deletes the old
//! `parent:` cell. It refuses a parent that would make a category its own ancestor, and user
//! writes to `child`. Names live in `info:name`.
//!
//! The seed stores every ancestor in `parent:` (a dog has `parent:2` and `parent:1`), which
//! a move would have to rewrite in the whole subtree; here a row holds its one parent, and
//! "ancestors of a category" walks up with one get per level (bounded, see below), while
//! "children of a category" is one get of the `child` family.
//!
//! The example builds the seed's tree, moves a subtree, shows a refused cycle, then loads
//! `--categories` generated categories (default 20000; each under a random earlier one)
//! from several tasks, times both queries, runs `--moves` random moves (default 2000)
//! from several tasks and checks, over a scan of the whole table, that the parent and child
//! links are exact mirrors, no row has two parents and there is no cycle (exit code 1 if
//! not): the observer also refuses concurrent moves that would close a cycle together.
//! Walks up the tree are bounded all the same.
//! Run with `cargo run --release --example categories [-- --categories N --moves M]`.

use basalt::client::{Get, Put, RowResult, Scan};
use basalt::coprocessors::relations::{register_relations, tree_links};
use basalt::coprocessors::Registry;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, Result, Table, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TASKS: usize = 4;
const QUERIES: usize = 2000;
/// The longest walk up the tree.
const MAX_DEPTH: usize = 256;

struct Scale {
    categories: usize,
    moves: usize,
}

fn parse_args() -> std::result::Result<Scale, String> {
    let mut scale = Scale {
        categories: 20_000,
        moves: 2000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let slot = match flag.as_str() {
            "--categories" => &mut scale.categories,
            "--moves" => &mut scale.moves,
            _ => return Err(format!("unknown flag {flag} (--categories, --moves)")),
        };
        *slot = args
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} needs a number"))?;
    }
    if scale.categories < 2 {
        return Err("need --categories >= 2".into());
    }
    Ok(scale)
}

fn cat_id(n: usize) -> String {
    format!("c{n:07}")
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

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The qualifiers of `family` in `r`.
fn qualifiers(r: &RowResult, family: &str) -> Vec<String> {
    r.cells
        .iter()
        .filter(|c| c.family.as_ref() == family.as_bytes())
        .map(|c| text(&c.qualifier))
        .collect()
}

/// Sets `row`'s parent (a move when it had one).
fn parent_put(row: &str, parent: &str) -> Put {
    Put::new(row).add_column("parent", parent, "")
}

/// The parent of `row`, if any.
async fn parent_of(t: &Table, row: &str) -> Result<Option<String>> {
    let r = t.get(Get::new(row).add_family("parent")).await?;
    Ok(qualifiers(&r, "parent").into_iter().next())
}

/// Ancestors of `row`, nearest first; stops at a root, a cycle or [`MAX_DEPTH`].
async fn ancestors(t: &Table, row: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = row.to_owned();
    while out.len() < MAX_DEPTH {
        match parent_of(t, &cur).await? {
            Some(p) if p != row && !out.contains(&p) => {
                out.push(p.clone());
                cur = p;
            }
            _ => break,
        }
    }
    Ok(out)
}

/// Children of `row`.
async fn children(t: &Table, row: &str) -> Result<Vec<String>> {
    let r = t.get(Get::new(row).add_family("child")).await?;
    Ok(qualifiers(&r, "child"))
}

/// Names of `rows`, for printing.
async fn names(t: &Table, rows: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for r in rows {
        let got = t.get(Get::new(r).add_column("info", "name")).await?;
        out.push(
            got.value("info", "name")
                .map_or_else(|| r.clone(), |v| text(v)),
        );
    }
    Ok(out)
}

/// The seed's tree, then a subtree moved and a cycle refused.
async fn seed_tree(t: &Table) -> Result<()> {
    let rows = [
        ("1", "生物 organism", None),
        ("2", "动物 animal", Some("1")),
        ("3", "狗 dog", Some("2")),
        ("4", "猪 pig", Some("2")),
        ("5", "牛 cow", Some("2")),
        ("6", "植物 plant", Some("1")),
        ("7", "家畜 livestock", Some("1")),
    ];
    for (id, name, parent) in rows {
        let mut p = Put::new(id).add_column("info", "name", name);
        if let Some(parent) = parent {
            p = p.add_column("parent", parent, "");
        }
        t.put(p).await?;
    }
    let show = |label: &'static str| async move {
        let anc = ancestors(t, "5").await?;
        println!(
            "{label}: ancestors of 牛 cow: {:?}; children of 动物 animal: {:?}; of 家畜 \
             livestock: {:?}",
            names(t, &anc).await?,
            names(t, &children(t, "2").await?).await?,
            names(t, &children(t, "7").await?).await?,
        );
        Ok::<(), Error>(())
    };
    show("seed tree").await?;
    // Move the pig and the cow under livestock, then livestock (with them) under animal.
    t.put(parent_put("4", "7")).await?;
    t.put(parent_put("5", "7")).await?;
    t.put(parent_put("7", "2")).await?;
    show("after the moves").await?;
    match t.put(parent_put("2", "5")).await {
        Err(e) => println!("animal under cow: refused ({e})"),
        Ok(()) => println!("animal under cow: accepted (WRONG)"),
    }
    match t.put(Put::new("1").add_column("child", "9", "")).await {
        Err(e) => println!("a user write to child: refused ({e})"),
        Ok(()) => println!("a user write to child: accepted (WRONG)"),
    }
    Ok(())
}

/// Loads categories `n` (`n >= 1`, `n % TASKS == task`), each under a random earlier one.
async fn load(t: Table, total: usize, task: usize) -> Result<usize> {
    let mut rng = Rng::new(task as u64 + 11);
    let mut written = 0;
    for n in (task.max(1)..total).filter(|n| n % TASKS == task) {
        let parent = cat_id(rng.below(n));
        t.put(
            Put::new(cat_id(n))
                .add_column("info", "name", format!("category {n}"))
                .add_column("parent", parent, ""),
        )
        .await?;
        written += 1;
    }
    Ok(written)
}

/// Random moves; returns (done, refused as cycles, lock timeouts retried).
async fn moves(t: Table, total: usize, count: usize, task: usize) -> Result<(usize, usize, usize)> {
    let mut rng = Rng::new(task as u64 + 101);
    let (mut done, mut refused, mut retried) = (0, 0, 0);
    for _ in 0..count {
        let (row, parent) = (cat_id(1 + rng.below(total - 1)), cat_id(rng.below(total)));
        loop {
            match t.put(parent_put(&row, &parent)).await {
                Ok(()) => done += 1,
                Err(Error::BadArgument(m)) if m.contains("cycle") => refused += 1,
                // Two moves locking each other's rows: nothing written, try again.
                Err(Error::RowLockTimeout { .. }) => {
                    retried += 1;
                    continue;
                }
                Err(e) => return Err(e),
            }
            break;
        }
    }
    Ok((done, refused, retried))
}

/// Mean time of `f` over `QUERIES` random categories, and the mean size of its answers.
async fn time_query<F, Fut>(total: usize, f: F) -> Result<(Duration, f64)>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<String>>>,
{
    let mut rng = Rng::new(5);
    let mut found = 0;
    let started = Instant::now();
    for _ in 0..QUERIES {
        found += f(cat_id(rng.below(total))).await?.len();
    }
    Ok((
        started.elapsed() / QUERIES as u32,
        found as f64 / QUERIES as f64,
    ))
}

/// Scans the table (one snapshot): true when parent and child links mirror each other, no
/// row has two parents and no row is on a cycle. Prints the counts.
async fn check(t: &Table) -> Result<bool> {
    let rows: Vec<RowResult> = t.scan(Scan::new())?.try_collect().await?;
    let mut up = BTreeSet::new();
    let mut down = BTreeSet::new();
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut ok = true;
    for r in &rows {
        let row = text(&r.row);
        for p in qualifiers(r, "parent") {
            up.insert((row.clone(), p.clone()));
            if parent.insert(row.clone(), p).is_some() {
                println!("row {row} has two parents");
                ok = false;
            }
        }
        for c in qualifiers(r, "child") {
            down.insert((c, row.clone()));
        }
    }
    let symmetric = up == down;
    // Rows on a cycle: walking up never reaches a root.
    let mut cyclic = 0;
    for start in parent.keys() {
        let mut cur = start;
        let mut steps = 0;
        while let Some(p) = parent.get(cur) {
            cur = p;
            steps += 1;
            if steps > parent.len() {
                cyclic += 1;
                break;
            }
        }
    }
    println!(
        "{} rows, {} parent links, {} child links: {}; {cyclic} rows on a cycle",
        rows.len(),
        up.len(),
        down.len(),
        if symmetric {
            "exact mirrors"
        } else {
            "NOT SYMMETRIC"
        },
    );
    Ok(ok && symmetric && cyclic == 0)
}

async fn run(dir: &std::path::Path, scale: Scale) -> Result<bool> {
    let registry = Arc::new(Registry::new());
    register_relations(&registry)?;
    let config = Config::new(dir)
        .coprocessor_loader(registry)
        .row_lock_wait_ms(200);
    let conn = Connection::open_with(config).await?;
    println!("{}", conn.recovery_report());
    conn.admin()
        .create_table(
            TableDescriptor::new(TableName::parse("category")?)
                .family(ColumnFamilyDescriptor::new("info"))
                .family(ColumnFamilyDescriptor::new("parent"))
                .family(ColumnFamilyDescriptor::new("child"))
                .coprocessor(tree_links("parent", "child")),
        )
        .await?;
    let t = conn.table("category")?;
    seed_tree(&t).await?;

    let total = scale.categories;
    println!("loading {total} categories (each under a random earlier one) from {TASKS} tasks");
    let started = Instant::now();
    t.put(Put::new(cat_id(0)).add_column("info", "name", "category 0"))
        .await?;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        tasks.push(tokio::spawn(load(t.clone(), total, task)));
    }
    let mut written = 1;
    for task in tasks {
        written += task
            .await
            .map_err(|e| Error::bad_argument(format!("task failed: {e}")))??;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{written} categories in {secs:.2} s: {:.0} per s",
        written as f64 / secs
    );

    let (d, n) = time_query(total, |row| {
        let t = t.clone();
        async move { ancestors(&t, &row).await }
    })
    .await?;
    println!("ancestors of a category: {d:?} per query, {n:.1} levels on average");
    let (d, n) = time_query(total, |row| {
        let t = t.clone();
        async move { children(&t, &row).await }
    })
    .await?;
    println!("children of a category: {d:?} per query, {n:.1} children on average");

    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        tasks.push(tokio::spawn(moves(
            t.clone(),
            total,
            scale.moves / TASKS,
            task,
        )));
    }
    let (mut done, mut refused, mut retried) = (0, 0, 0);
    for task in tasks {
        let (d, r, x) = task
            .await
            .map_err(|e| Error::bad_argument(format!("task failed: {e}")))??;
        done += d;
        refused += r;
        retried += x;
    }
    println!(
        "{done} moves done, {refused} refused as cycles, {retried} lock timeouts retried, in \
         {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let ok = check(&t).await?;
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
