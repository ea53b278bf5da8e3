//! The relation observers of `basalt_coprocessors::relations` (seed 003's two-way shop/item
//! tables and its category tree) against a model, under concurrency and across crashes.
//!
//! Schema: `shops` (families `info`, `item`; links `shops[s]/item:i = v`) with an
//! `InverseRelation` into `items` (`items[i]/shop:s = v`, guarded by a `RelationGuard`), and
//! `cat` (families `parent`, `child`) with `TreeLinks`.
//!
//! - `random_operations_match_the_model`: proptest; random links, unlinks, row mutations,
//!   shop deletes, moves (single and two in one batch), roots and refused writes, applied one
//!   at a time; after every operation both tables equal the model (a `BTreeMap` of links and
//!   of parents), so the reverse side and the child links are always the exact mirror, and
//!   every refusal the model predicts (cycles, writes to derived families) happens.
//! - `concurrent_writers_keep_both_sides_symmetric`: tasks link and unlink the same shops
//!   and items and move the same categories at once; readers scan `cat` meanwhile and every
//!   scan (one snapshot) is symmetric; at the end both relations are symmetric.
//! - `simulated_crashes_recover_a_symmetric_prefix`: over `FaultFs`, a seeded workload
//!   (with flushes) is stopped at a random sync, the filesystem crashes (process or
//!   machine) and the engine reopens: both tables equal the model after a prefix of the
//!   operations that holds every acknowledged one (all writes are `FsyncWal`), hence are
//!   symmetric. `BASALT_REL_CRASH_SEEDS` (default 40) sets the seed count,
//!   `BASALT_REL_CRASH_SEED=N` runs one.

#[path = "common/coprocessor_setup.rs"]
mod coprocessor_setup;

use basalt::client::{BatchOp, Delete, Put, RowMutations, RowResult, Scan};
use basalt::coprocessors::relations::{
    inverse_relation, register_relations, relation_guard, tree_links,
};
use basalt::coprocessors::Registry;
use basalt::fs::{CrashKind, FaultFs};
use basalt::{
    ColumnFamilyDescriptor, Connection, Durability, Error, Result, TableDescriptor, TableName,
};
use coprocessor_setup::{fault_config, open_dir, registry, scan_family, text};
use futures::TryStreamExt;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

/// (row, qualifier) -> value.
type Links = BTreeMap<(String, String), String>;

const SHOPS: u8 = 4;
const ITEMS: u8 = 5;
const CATS: u8 = 7;
const VALUES: u8 = 3;

fn shop(s: u8) -> String {
    format!("s{s}")
}
fn item(i: u8) -> String {
    format!("i{i}")
}
fn cat(c: u8) -> String {
    format!("c{c}")
}
fn value(v: u8) -> String {
    format!("v{v}")
}

/// One client operation.
#[derive(Debug, Clone)]
enum Op {
    /// `shops[s]/item:i = v`.
    Link(u8, u8, u8),
    /// Deletes `shops[s]/item:i` (all versions).
    Unlink(u8, u8),
    /// One row mutation of shop `s`: unlink `from`, link `to = v` (the unlink hides the
    /// link when `from == to`: one timestamp).
    Relink(u8, u8, u8, u8),
    /// Deletes shop `s`'s row.
    DropShop(u8),
    /// Deletes shop `s`'s `item` family.
    ClearShop(u8),
    /// A user write to the derived side, `items[i]/shop:s`: refused.
    WriteDerived(u8, u8),
    /// `cat[c]/parent:p = v`.
    Move(u8, u8, u8),
    /// Two moves in one (non-atomic) batch.
    MoveTwo((u8, u8), (u8, u8)),
    /// Deletes `cat[c]`'s `parent` family.
    Root(u8),
    /// Deletes `cat[c]`'s row: refused (it would delete the child links).
    DropCat(u8),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let s = 0..SHOPS;
    let i = 0..ITEMS;
    let c = 0..CATS;
    let v = 0..VALUES;
    prop_oneof![
        5 => (s.clone(), i.clone(), v.clone()).prop_map(|(s, i, v)| Op::Link(s, i, v)),
        2 => (s.clone(), i.clone()).prop_map(|(s, i)| Op::Unlink(s, i)),
        2 => (s.clone(), i.clone(), i.clone(), v.clone())
            .prop_map(|(s, a, b, v)| Op::Relink(s, a, b, v)),
        1 => s.clone().prop_map(Op::DropShop),
        1 => s.clone().prop_map(Op::ClearShop),
        1 => (i, s).prop_map(|(i, s)| Op::WriteDerived(i, s)),
        5 => (c.clone(), c.clone(), v.clone()).prop_map(|(c, p, v)| Op::Move(c, p, v)),
        2 => (c.clone(), c.clone(), c.clone(), c.clone())
            .prop_map(|(a, p, b, q)| Op::MoveTwo((a, p), (b, q))),
        1 => c.clone().prop_map(Op::Root),
        1 => c.prop_map(Op::DropCat),
    ]
}

fn random_op(rng: &mut StdRng) -> Op {
    let s = rng.random_range(0..SHOPS);
    let i = rng.random_range(0..ITEMS);
    let j = rng.random_range(0..ITEMS);
    let c = rng.random_range(0..CATS);
    let p = rng.random_range(0..CATS);
    let v = rng.random_range(0..VALUES);
    match rng.random_range(0..20) {
        0..5 => Op::Link(s, i, v),
        5..7 => Op::Unlink(s, i),
        7..9 => Op::Relink(s, i, j, v),
        9 => Op::DropShop(s),
        10 => Op::ClearShop(s),
        11..16 => Op::Move(c, p, v),
        16..18 => Op::MoveTwo(
            (c, p),
            (rng.random_range(0..CATS), rng.random_range(0..CATS)),
        ),
        _ => Op::Root(c),
    }
}

/// What the engine must hold: the links of the shops, and every category's parent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Model {
    /// (shop, item) -> value.
    links: Links,
    /// category -> (parent, value).
    parents: BTreeMap<String, (String, String)>,
}

/// Which parts of an operation the engine must accept (true) or refuse (false).
type Verdict = Vec<bool>;

impl Model {
    /// True when `parent` is `row` or one of its descendants in `parents`.
    fn closes_cycle(parents: &BTreeMap<String, (String, String)>, row: &str, parent: &str) -> bool {
        let mut cur = Some(parent.to_owned());
        let mut steps = 0;
        while let Some(c) = cur {
            if c == row || steps > parents.len() {
                return true;
            }
            steps += 1;
            cur = parents.get(&c).map(|(p, _)| p.clone());
        }
        false
    }

    /// Applies `op`; returns which of its parts are accepted.
    fn apply(&mut self, op: &Op) -> Verdict {
        match op {
            Op::Link(s, i, v) => {
                self.links.insert((shop(*s), item(*i)), value(*v));
                vec![true]
            }
            Op::Unlink(s, i) => {
                self.links.remove(&(shop(*s), item(*i)));
                vec![true]
            }
            Op::Relink(s, from, to, v) => {
                self.links.remove(&(shop(*s), item(*from)));
                if from != to {
                    self.links.insert((shop(*s), item(*to)), value(*v));
                }
                vec![true]
            }
            Op::DropShop(s) | Op::ClearShop(s) => {
                self.links.retain(|(x, _), _| *x != shop(*s));
                vec![true]
            }
            Op::WriteDerived(..) | Op::DropCat(_) => vec![false],
            Op::Move(c, p, v) => {
                let (row, parent) = (cat(*c), cat(*p));
                let same = self.parents.get(&row).is_some_and(|(x, _)| *x == parent);
                if !same && Self::closes_cycle(&self.parents, &row, &parent) {
                    return vec![false];
                }
                self.parents.insert(row, (parent, value(*v)));
                vec![true]
            }
            Op::MoveTwo((a, p), (b, q)) if a == b => {
                if p != q {
                    // One row given two parents: both refused.
                    return vec![false, false];
                }
                let ok = self.apply(&Op::Move(*a, *p, 0))[0];
                vec![ok, ok]
            }
            Op::MoveTwo(first, second) => {
                // Each move is checked against the tree with both moves planned.
                let mut planned = self.parents.clone();
                for (c, p) in [first, second] {
                    planned.insert(cat(*c), (cat(*p), value(0)));
                }
                let verdict: Verdict = [first, second]
                    .iter()
                    .map(|(c, p)| {
                        let (row, parent) = (cat(*c), cat(*p));
                        self.parents.get(&row).is_some_and(|(x, _)| *x == parent)
                            || !Self::closes_cycle(&planned, &row, &parent)
                    })
                    .collect();
                for ((c, p), ok) in [first, second].into_iter().zip(&verdict) {
                    if *ok {
                        self.parents.insert(cat(*c), (cat(*p), value(0)));
                    }
                }
                verdict
            }
            Op::Root(c) => {
                self.parents.remove(&cat(*c));
                vec![true]
            }
        }
    }
}

fn tn(s: &str) -> TableName {
    TableName::parse(s).unwrap()
}

fn relations_registry() -> Arc<Registry> {
    registry(register_relations)
}

/// Creates `shops`, `items` and `cat` with their observers.
async fn create_tables(conn: &Connection) -> Result<()> {
    let admin = conn.admin();
    admin
        .create_table(
            TableDescriptor::new(tn("items"))
                .family(ColumnFamilyDescriptor::new("info"))
                .family(ColumnFamilyDescriptor::new("shop"))
                .coprocessor(relation_guard(&["shop"])),
        )
        .await?;
    admin
        .create_table(
            TableDescriptor::new(tn("shops"))
                .family(ColumnFamilyDescriptor::new("info"))
                .family(ColumnFamilyDescriptor::new("item"))
                .coprocessor(inverse_relation("item", "items", "shop")),
        )
        .await?;
    admin
        .create_table(
            TableDescriptor::new(tn("cat"))
                .family(ColumnFamilyDescriptor::new("parent"))
                .family(ColumnFamilyDescriptor::new("child"))
                .coprocessor(tree_links("parent", "child")),
        )
        .await
}

fn put(d: Durability, row: &str, family: &str, q: &str, v: &str) -> Put {
    Put::new(row).add_column(family, q, v).durability(d)
}

fn delete(d: Durability, row: &str) -> Delete {
    Delete::new(row).durability(d)
}

/// Runs `op` with durability `d`; returns the outcome of each of its parts.
async fn run(conn: &Connection, op: &Op, d: Durability) -> Result<Vec<Result<()>>> {
    let shops = conn.table("shops")?;
    let cats = conn.table("cat")?;
    Ok(match op {
        Op::Link(s, i, v) => vec![
            shops
                .put(put(d, &shop(*s), "item", &item(*i), &value(*v)))
                .await,
        ],
        Op::Unlink(s, i) => vec![
            shops
                .delete(delete(d, &shop(*s)).add_columns("item", item(*i)))
                .await,
        ],
        Op::Relink(s, from, to, v) => {
            let row = shop(*s);
            let rm = RowMutations::new(&row)
                .add(delete(d, &row).add_columns("item", item(*from)))
                .add(put(d, &row, "item", &item(*to), &value(*v)));
            vec![shops.mutate_row(rm).await]
        }
        Op::DropShop(s) => vec![shops.delete(delete(d, &shop(*s))).await],
        Op::ClearShop(s) => vec![shops.delete(delete(d, &shop(*s)).add_family("item")).await],
        Op::WriteDerived(i, s) => vec![
            conn.table("items")?
                .put(put(d, &item(*i), "shop", &shop(*s), "forged"))
                .await,
        ],
        Op::Move(c, p, v) => vec![
            cats.put(put(d, &cat(*c), "parent", &cat(*p), &value(*v)))
                .await,
        ],
        Op::MoveTwo((a, p), (b, q)) => {
            // A move of one row twice carries the first value (the model's).
            let out = cats
                .batch(vec![
                    BatchOp::Put(put(d, &cat(*a), "parent", &cat(*p), &value(0))),
                    BatchOp::Put(put(d, &cat(*b), "parent", &cat(*q), &value(0))),
                ])
                .await?;
            out.into_iter().map(|r| r.map(|_| ())).collect()
        }
        Op::Root(c) => vec![cats.delete(delete(d, &cat(*c)).add_family("parent")).await],
        Op::DropCat(c) => vec![cats.delete(delete(d, &cat(*c))).await],
    })
}

/// A refusal of the relation observers (a veto, or a hook's error outside the batch).
fn is_refusal(e: &Error) -> bool {
    matches!(e, Error::BadArgument(_) | Error::Coprocessor { .. })
}

/// (row, qualifier) -> value of every cell of `family` in `table`, at one snapshot.
async fn cells(conn: &Connection, table: &str, family: &str) -> Result<Links> {
    let rows = scan_family(&conn.table(table)?, family).await?;
    Ok(rows
        .iter()
        .flat_map(|r| r.cells.iter())
        .map(|c| ((text(&c.row), text(&c.qualifier)), text(&c.value)))
        .collect())
}

/// Swaps row and qualifier: the reverse of a link map.
fn reverse(m: &Links) -> Links {
    m.iter()
        .map(|((a, b), v)| ((b.clone(), a.clone()), v.clone()))
        .collect()
}

/// The tree's parent links, checked against its child links (one snapshot): symmetric and
/// at most one parent per row.
fn tree_from(
    parent: &Links,
    child: &Links,
) -> std::result::Result<BTreeMap<String, (String, String)>, String> {
    if reverse(parent) != *child {
        return Err(format!(
            "tree not symmetric: parent links {parent:?}, child links {child:?}"
        ));
    }
    let mut parents = BTreeMap::new();
    for ((row, p), v) in parent {
        if parents
            .insert(row.clone(), (p.clone(), v.clone()))
            .is_some()
        {
            return Err(format!("row {row} has two parents: {parent:?}"));
        }
    }
    Ok(parents)
}

/// The parent and child links of `cat`, from one scan (one snapshot).
async fn tree_cells(conn: &Connection) -> Result<(Links, Links)> {
    let rows: Vec<RowResult> = conn.table("cat")?.scan(Scan::new())?.try_collect().await?;
    let (mut parent, mut child) = (Links::new(), Links::new());
    for c in rows.iter().flat_map(|r| r.cells.iter()) {
        let key = (text(&c.row), text(&c.qualifier));
        match c.family.as_ref() {
            b"parent" => parent.insert(key, text(&c.value)),
            _ => child.insert(key, text(&c.value)),
        };
    }
    Ok((parent, child))
}

/// Reads the engine's state, checking both relations are symmetric.
async fn read_state(conn: &Connection) -> std::result::Result<Model, String> {
    let e = |e: Error| e.to_string();
    let links = cells(conn, "shops", "item").await.map_err(e)?;
    let back = cells(conn, "items", "shop").await.map_err(e)?;
    if reverse(&back) != links {
        return Err(format!(
            "shops/items not symmetric: links {links:?}, reverse links {back:?}"
        ));
    }
    let (parent, child) = tree_cells(conn).await.map_err(e)?;
    let parents = tree_from(&parent, &child)?;
    Ok(Model { links, parents })
}

/// Runs `ops` one at a time against a fresh engine, comparing with the model after each.
async fn check_against_model(ops: Vec<Op>) -> std::result::Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let reg = relations_registry();
    let conn = open_dir(dir.path(), &reg).await;
    create_tables(&conn).await.map_err(|e| e.to_string())?;
    let mut model = Model::default();
    for (n, op) in ops.iter().enumerate() {
        let want = model.apply(op);
        let got = run(&conn, op, Durability::SyncWal)
            .await
            .map_err(|e| format!("op {n} {op:?}: {e}"))?;
        for (ok, r) in want.iter().zip(&got) {
            match (ok, r) {
                (true, Ok(())) => {}
                (false, Err(e)) if is_refusal(e) => {}
                _ => {
                    return Err(format!(
                        "op {n} {op:?}: model says {want:?}, engine {got:?}"
                    ))
                }
            }
        }
        let state = read_state(&conn).await?;
        if state != model {
            return Err(format!(
                "after op {n} {op:?}: engine {state:?}, model {model:?}"
            ));
        }
    }
    conn.close().await.map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    #[test]
    fn random_operations_match_the_model(ops in proptest::collection::vec(op_strategy(), 1..40)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let outcome = rt.block_on(check_against_model(ops));
        prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_keep_both_sides_symmetric() {
    let dir = tempfile::tempdir().unwrap();
    let reg = relations_registry();
    let conn = Connection::open_with(
        coprocessor_setup::dir_config(dir.path(), &reg).row_lock_wait_ms(300),
    )
    .await
    .unwrap();
    create_tables(&conn).await.unwrap();
    let conn = Arc::new(conn);

    let mut writers = Vec::new();
    for task in 0..6u64 {
        let conn = conn.clone();
        writers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(task);
            let (mut refused, mut timeouts) = (0, 0);
            for _ in 0..120 {
                let op = random_op(&mut rng);
                // A lock timeout writes nothing and may be retried (rows locked out of
                // order, e.g. two moves of a row and its parent in opposite directions).
                let mut tries = 0;
                let out = loop {
                    let out = run(&conn, &op, Durability::SyncWal).await.unwrap();
                    let timed_out = out
                        .iter()
                        .any(|r| matches!(r, Err(Error::RowLockTimeout { .. })));
                    if !timed_out || tries == 50 {
                        break out;
                    }
                    tries += 1;
                    timeouts += 1;
                };
                for r in out {
                    match r {
                        Ok(()) => {}
                        // Cycles, checked against the tree each batch sees.
                        Err(e)
                            if is_refusal(&e) && matches!(op, Op::Move(..) | Op::MoveTwo(..)) =>
                        {
                            refused += 1;
                        }
                        Err(e) => panic!("{op:?} failed: {e}"),
                    }
                }
            }
            (refused, timeouts)
        }));
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (conn, stop) = (conn.clone(), stop.clone());
        tokio::spawn(async move {
            let mut checks = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Acquire) || checks == 0 {
                let (parent, child) = tree_cells(&conn).await.unwrap();
                tree_from(&parent, &child).unwrap();
                checks += 1;
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            checks
        })
    };
    let (mut refused, mut timeouts) = (0, 0);
    for w in writers {
        let (r, t) = w.await.unwrap();
        refused += r;
        timeouts += t;
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    let checks = reader.await.unwrap();
    let state = read_state(&conn).await.unwrap();
    eprintln!(
        "{} links, {} parents at the end; {refused} moves refused; {timeouts} lock timeouts retried; {checks} snapshots of the \
         tree checked during the run",
        state.links.len(),
        state.parents.len()
    );
    assert!(checks > 0);
}

/// How one crash seed went.
struct Outcome {
    stopped: bool,
    acked: usize,
}

async fn crash_seed(seed: u64) -> std::result::Result<Outcome, String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5e1a_7105);
    let kind = if rng.random_bool(0.5) {
        CrashKind::Process
    } else {
        CrashKind::Machine
    };
    let reg = relations_registry();
    let fs = FaultFs::new();
    let conn = Connection::open_with(fault_config(&fs, &reg))
        .await
        .map_err(|e| format!("open: {e}"))?;
    create_tables(&conn)
        .await
        .map_err(|e| format!("create tables: {e}"))?;
    let crash_at = rng.random_range(1..=120);
    fs.crash_at_sync(crash_at);

    // states[k]: the model after the first k operations.
    let mut model = Model::default();
    let mut states = vec![model.clone()];
    let mut acked = 0;
    let mut may = 0;
    for n in 0..40 {
        if rng.random_range(0..10) == 0 {
            let admin = conn.admin();
            let flushed = match admin.flush(&tn("shops")).await {
                Ok(()) => admin.flush(&tn("cat")).await,
                Err(e) => Err(e),
            };
            if flushed.is_err() && fs.is_stopped() {
                break;
            }
            continue;
        }
        let op = random_op(&mut rng);
        let want = model.apply(&op);
        let got = run(&conn, &op, Durability::FsyncWal)
            .await
            .map_err(|e| format!("op {n}: {e}"))?;
        states.push(model.clone());
        may = states.len() - 1;
        let mut failed = false;
        for (ok, r) in want.iter().zip(&got) {
            match (ok, r) {
                (true, Ok(())) => {}
                (false, Err(e)) if is_refusal(e) => {}
                (_, Err(_)) if fs.is_stopped() => failed = true,
                _ => {
                    return Err(format!(
                        "op {n} {op:?} before the crash: model says {want:?}, engine {got:?}"
                    ))
                }
            }
        }
        if failed {
            break;
        }
        acked = may;
    }
    let stopped = fs.is_stopped();
    drop(conn);
    let fs = fs.crash(kind);
    let conn = Connection::open_with(fault_config(&fs, &reg))
        .await
        .map_err(|e| format!("reopen after a {kind:?} crash at sync {crash_at}: {e}"))?;
    let got = read_state(&conn)
        .await
        .map_err(|e| format!("{kind:?} crash at sync {crash_at}: {e}"))?;
    let _ = conn.close().await;
    if !states[acked..=may].contains(&got) {
        return Err(format!(
            "{kind:?} crash at sync {crash_at}: recovered {got:?} is not the state after \
             {acked}..={may} operations"
        ));
    }
    Ok(Outcome { stopped, acked })
}

#[test]
fn simulated_crashes_recover_a_symmetric_prefix() {
    let seeds: Vec<u64> = match std::env::var("BASALT_REL_CRASH_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (0..std::env::var("BASALT_REL_CRASH_SEEDS")
            .ok()
            .map_or(40, |s| s.parse().unwrap()))
            .collect(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut failures = Vec::new();
    let (mut stopped, mut acked) = (0, 0);
    for &seed in &seeds {
        match rt.block_on(crash_seed(seed)) {
            Ok(o) => {
                stopped += usize::from(o.stopped);
                acked += o.acked;
            }
            Err(e) => {
                eprintln!("seed {seed}: {e}; rerun with BASALT_REL_CRASH_SEED={seed}");
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{} seeds, {stopped} stopped at their sync point, {acked} acknowledged operations \
         recovered",
        seeds.len()
    );
    assert!(stopped > 0, "no seed reached its crash point");
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}
