//! The observers that keep index tables in sync: [`Maintainer`] on the data table and
//! [`Guard`] on each index table.
//!
//! The maintainer runs in `pre_batch_mutate`, under the locks of the batch's data rows. For
//! each data row of the batch it reads the row as committed (every visible cell) and as it
//! will be once the batch commits ([`ObserverContext::get_before_after`], one read: the same
//! read rules, delete markers, versions and TTL, applied to the committed and the pending
//! cells), derives
//! the old and the new index row of every index ([`Layout::entry`]) and adds the delete of
//! the old one and the put of the new one to the batch ([`MiniBatch::add_mutation_to`]), so
//! data and index rows commit as one WAL record with one sequence id. Every write kind comes
//! through here: puts, every delete kind, increments and appends (as a put of their new
//! values), check-and-mutates that pass, row mutations and batches.
//!
//! Invariant kept: after every commit, each index holds exactly the index rows derived from
//! the data rows' newest visible values. Index row timestamps come from the engine's clock
//! for added writes (strictly increasing), so the delete marker of an old index row never
//! hides a later put of the same row.
//!
//! A unique index requires its new row absent ([`MiniBatch::require_absent_in`], checked
//! under that row's lock at commit): of two writers racing for one value exactly one wins,
//! the other fails with [`Error::UniqueViolation`] having written nothing. Two rows of one
//! region's batch taking the same value fail the batch the same way; a batch in which one
//! row gives a value up and another takes it is refused too (the check reads the committed
//! index).
//!
//! Cell TTLs: an index row written for a put with a cell TTL (`Put::ttl_ms`) that writes an
//! indexed column takes what is left of that TTL, so it expires with the data it points to
//! rather than outliving it until a repair.
//!
//! Durability: the index rows share the durability of the data write that caused them (the
//! strongest of the row's operations in the batch, [`MiniBatch::durability`]), and the
//! batch is one WAL record, so an `AsyncWal` write to an indexed table stays one, and a
//! crash that loses it loses its index rows with it: index == data still holds. A
//! `SkipWal` write with index rows is logged as `AsyncWal` by the engine (the data and
//! index regions flush apart, so without a record a crash could keep one and lose the
//! other).
//!
//! A local index ([`IndexDef::local`]) writes its rows into the data table's reserved
//! family, keyed with the start of the region the hook runs in; the commit re-keys them if a
//! split or merge replaced that region meanwhile. A unique local index (led by the data
//! row's key prefix, on a table whose split restriction keeps that prefix in one region)
//! requires its new row absent with [`MiniBatch::require_local_absent`]: the commit checks
//! it in the region that then holds the row's group, under a lock every racer takes. Its deletes name the family (a whole-row
//! delete skips it). A local index being dropped (`IndexState::Dropping`) adds no row and
//! deletes the one each write finds.
//!
//! A touch ([`basalt_core::Table::touch`]) rewrites a row's index rows from its current
//! values (online build and repair); repair also hands the maintainer index rows to delete
//! for a data row through [`Runtime`], deleted under the data row's lock.

use crate::def::IndexDef;
use crate::layout::{Entry, Layout, META};
use async_trait::async_trait;
use basalt_coprocessors::{MiniBatch, ObserverContext, RegionObserver, RowOwner};
use basalt_core::client::{Delete, Get, Mutation, Put};
use basalt_core::{Durability, Error, Result, TableName};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// The registered name of the maintaining coprocessor.
pub const MAINTAINER: &str = "basalt.index";
/// The registered name of the index tables' guard.
pub const GUARD: &str = "basalt.index.guard";
/// The prefix of the maintainer's argument keys (`index.<name>` = the definition).
pub const ARG_PREFIX: &str = "index.";

/// Index rows to delete, by (data table, data row): (index name, index row) pairs.
type Repairs = HashMap<(String, Bytes), Vec<(String, Bytes)>>;

/// State shared by the observers of one registry and the [`crate::IndexAdmin`]s using it:
/// index rows repair asked to delete, by data table and data row.
#[derive(Debug, Default)]
pub struct Runtime {
    repairs: Mutex<Repairs>,
}

impl Runtime {
    /// Asks the maintainer of `table` to delete index row `index_row` of index `index` at
    /// the next touch of `data_row` (unless the row is that data row's current index row).
    pub fn schedule_delete(&self, table: &str, data_row: Bytes, index: &str, index_row: Bytes) {
        self.repairs
            .lock()
            .entry((table.to_string(), data_row))
            .or_default()
            .push((index.to_string(), index_row));
    }

    fn take(&self, table: &str, data_row: &Bytes) -> Vec<(String, Bytes)> {
        self.repairs
            .lock()
            .remove(&(table.to_string(), data_row.clone()))
            .unwrap_or_default()
    }
}

/// The maintaining observer of one data table: every index defined on it.
pub struct Maintainer {
    table: String,
    indexes: Vec<(Layout, TableName)>,
    runtime: Arc<Runtime>,
}

impl Maintainer {
    /// The maintainer of these definitions (all on one table).
    pub fn new(defs: Vec<IndexDef>, runtime: Arc<Runtime>) -> Result<Self> {
        let table = defs.first().map(|d| d.table.clone()).unwrap_or_default();
        let mut indexes = Vec::with_capacity(defs.len());
        for d in defs {
            d.validate()?;
            // A local index writes its rows into the data table itself.
            let t = if d.local {
                d.data_table()?
            } else {
                d.index_table()?
            };
            indexes.push((Layout::new(d), t));
        }
        Ok(Maintainer {
            table,
            indexes,
            runtime,
        })
    }

    /// The definitions in a maintainer's arguments.
    pub fn defs_from_args(args: &basalt_coprocessors::Args) -> Result<Vec<IndexDef>> {
        args.iter()
            .filter(|(k, _)| k.starts_with(ARG_PREFIX))
            .map(|(_, v)| IndexDef::from_arg(v))
            .collect()
    }
}

fn put_of(e: &Entry, family: &[u8], durability: Durability, ttl: Option<u64>) -> Mutation {
    let mut p = Put::new(&e.row).durability(durability);
    for (q, v) in &e.cells {
        p = p.add_column(family, q, v);
    }
    match ttl {
        Some(ttl) => p.ttl_ms(ttl).into(),
        None => p.into(),
    }
}

/// The strongest of `ds` ([`Durability`] is ordered weakest first), as the engine folds a
/// batch's durability; the default when there is none.
fn strongest(ds: impl IntoIterator<Item = Durability>) -> Durability {
    ds.into_iter().max().unwrap_or_default()
}

#[async_trait]
impl RegionObserver for Maintainer {
    fn companion_tables(&self) -> Vec<TableName> {
        // A local index's rows are the data table's own.
        let data = TableName::parse(&self.table).ok();
        let mut tables: Vec<TableName> = Vec::new();
        for (_, t) in &self.indexes {
            if data.as_ref() != Some(t) && !tables.contains(t) {
                tables.push(t.clone());
            }
        }
        tables
    }

    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        let mut rows: Vec<Bytes> = Vec::new();
        let mut touched: BTreeSet<Bytes> = BTreeSet::new();
        let region_start = ctx.region_start().clone();
        for m in batch.operations() {
            if !rows.contains(m.row()) {
                rows.push(m.row().clone());
            }
            if let Mutation::Put(p) = m {
                if p.is_touch() {
                    touched.insert(p.row().clone());
                }
            }
        }
        let mut taken: BTreeSet<(usize, Bytes)> = BTreeSet::new();
        for row in rows {
            let mine: Vec<usize> = batch
                .operations()
                .enumerate()
                .filter(|(_, m)| *m.row() == row)
                .map(|(k, _)| k)
                .collect();
            if mine.iter().all(|k| batch.is_vetoed(*k)) {
                // Nothing of this row is written (an earlier coprocessor refused it).
                continue;
            }
            // The index rows share the fate of the data write: its durability.
            let durability = strongest(
                mine.iter()
                    .filter(|k| !batch.is_vetoed(**k))
                    .filter_map(|k| batch.durability(*k)),
            );
            let (before, after) = ctx.get_before_after(batch, &Get::new(&row))?;
            let touch = touched.contains(&row);
            let repairs = if touch {
                self.runtime.take(&self.table, &row)
            } else {
                Vec::new()
            };
            let puts: Vec<&Put> = mine
                .iter()
                .filter(|k| !batch.is_vetoed(**k))
                .filter_map(|k| match batch.operations().nth(*k) {
                    Some(Mutation::Put(p)) if !p.is_touch() => Some(p),
                    _ => None,
                })
                .collect();
            let change = Change {
                region_start: &region_start,
                row: &row,
                before: &before,
                after: &after,
                touch,
                durability,
                puts: &puts,
                now: batch.now(),
            };
            match self.changes(&change, &repairs, &mut taken)? {
                Ok(plan) => {
                    for (t, m, owned) in plan.writes {
                        if owned {
                            batch.add_owned_mutation_to(t, m);
                        } else {
                            batch.add_mutation_to(t, m);
                        }
                    }
                    for (t, r, owner) in plan.absent {
                        batch.require_absent_or_owned_in(t, r, owner);
                    }
                    for (r, owner) in plan.local_absent {
                        batch.require_local_absent_or_owned(r, owner);
                    }
                }
                Err(violation) => {
                    // A veto carries the typed error as it is (a hook error would be
                    // wrapped); it fails an atomic write whole.
                    for k in mine {
                        batch.veto(k, copy(&violation));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The index writes one data row's change needs.
#[derive(Default)]
struct RowPlan {
    /// Each write's index table, the write, and whether its row belongs to the data row:
    /// a non-unique index row's key ends with the data row's key, so only the data row's
    /// writes (under its lock) ever touch it, and it needs no lock of its own
    /// ([`MiniBatch::add_owned_mutation_to`]). A unique index row is keyed by the values
    /// alone and any data row may race for it.
    writes: Vec<(TableName, Mutation, bool)>,
    /// Unique index rows that must be absent or already the data row's.
    absent: Vec<(TableName, Bytes, RowOwner)>,
    /// Local rows of a unique local index that must be absent or already the data row's
    /// (checked where their owner's region is at commit).
    local_absent: Vec<(Bytes, RowOwner)>,
}

fn copy(e: &Error) -> Error {
    match e {
        Error::UniqueViolation { table, row } => Error::UniqueViolation {
            table: table.clone(),
            row: row.clone(),
        },
        other => Error::bad_argument(other.to_string()),
    }
}

/// One data row's change in a batch.
struct Change<'a> {
    /// The start of the data row's region (where a local index row of it lives).
    region_start: &'a Bytes,
    row: &'a Bytes,
    /// The row as committed.
    before: &'a basalt_core::client::RowResult,
    /// The row as the batch leaves it.
    after: &'a basalt_core::client::RowResult,
    /// A touch: rewrite the index rows even if nothing changed.
    touch: bool,
    /// The durability of the row's writes, which its index writes take.
    durability: Durability,
    /// The row's puts in the batch (their cell TTLs pass to the index rows).
    puts: &'a [&'a Put],
    /// The batch's timestamp (the index rows').
    now: u64,
}

/// The time to live an index row written by the batch takes (issue 44: index rows do not
/// outlive their data): when the row's puts of the batch that write an indexed column all
/// carry a cell TTL, what is left of the shortest of them at `now` (a put with its own
/// timestamp expires from it), at least a millisecond; otherwise none (a put without a TTL
/// keeps its value, and an index row rewritten for its covered columns alone keeps none).
/// Plus [`basalt_core::MAX_CLOCK_LEAD_MS`]: the data and index regions may stamp the two
/// apart by up to that, and an index row must never expire first (a unique value would be
/// free while its row still holds it); it outlives its data by at most that.
fn index_ttl(layout: &Layout, puts: &[&Put], now: u64) -> Option<u64> {
    let writes_indexed = |p: &Put| {
        p.cells().any(|(f, q, _, _)| {
            layout
                .def
                .columns
                .iter()
                .any(|(c, _)| c.family == f && c.qualifier == q)
        })
    };
    let mut ttl: Option<u64> = None;
    for p in puts.iter().filter(|p| writes_indexed(p)) {
        let own = p.get_ttl_ms()?;
        let left = match p.get_timestamp() {
            basalt_core::cell::LATEST_TIMESTAMP => own,
            ts => ts.saturating_add(own).saturating_sub(now),
        };
        ttl = Some(ttl.map_or(left, |t| t.min(left)).max(1));
    }
    ttl.map(|t| t.saturating_add(basalt_core::MAX_CLOCK_LEAD_MS))
}

impl Maintainer {
    /// The index writes that take `c.row` from `c.before` to `c.after` (or rewrite it, for a
    /// touch), with the row's durability; `Ok(Err(_))` when the row would take a unique
    /// value another row of the batch took.
    fn changes(
        &self,
        c: &Change<'_>,
        repairs: &[(String, Bytes)],
        taken: &mut BTreeSet<(usize, Bytes)>,
    ) -> Result<std::result::Result<RowPlan, Error>> {
        let Change {
            region_start,
            row,
            before,
            after,
            touch,
            durability,
            puts,
            now,
        } = *c;
        let mut plan = RowPlan::default();
        for (i, (layout, itable)) in self.indexes.iter().enumerate() {
            let owned = !layout.def.unique;
            let family = layout.family();
            // A local row shares its key space with data rows: its delete names its family
            // (a whole-row delete skips that family).
            let delete = |r: &Bytes| {
                let d = Delete::new(r).durability(durability);
                if layout.def.local {
                    d.add_family(family)
                } else {
                    d
                }
            };
            let old = entry_in(layout, region_start, row, before)?;
            let new = match layout.def.state {
                // A dropping index adds no row: every write deletes the one it finds.
                crate::def::IndexState::Dropping => None,
                _ => entry_in(layout, region_start, row, after)?,
            };
            for (_, r) in repairs.iter().filter(|(n, r)| {
                *n == layout.def.name
                    && old.as_ref().is_none_or(|o| o.row != *r)
                    && new.as_ref().is_none_or(|e| e.row != *r)
            }) {
                plan.writes.push((itable.clone(), delete(r).into(), owned));
            }
            if old == new && !touch {
                continue;
            }
            let same_row = match (&old, &new) {
                (Some(o), Some(n)) => o.row == n.row,
                _ => false,
            };
            if let Some(o) = &old {
                if !same_row {
                    plan.writes
                        .push((itable.clone(), delete(&o.row).into(), owned));
                }
            }
            let Some(n) = &new else { continue };
            if layout.def.unique {
                if !taken.insert((i, n.row.clone())) {
                    return Ok(Err(Error::UniqueViolation {
                        table: itable.to_string(),
                        row: String::from_utf8_lossy(&n.row).into_owned(),
                    }));
                }
                // Checked at commit even when the data row's old values gave the same index
                // row (a touch, a build): the row must be absent or this data row's, never
                // another's (two rows holding one value in different build batches).
                let owner = RowOwner {
                    family: Bytes::from_static(family),
                    qualifier: Bytes::from_static(META),
                    skip: layout.def.columns.len() * 8,
                    owner: row.clone(),
                };
                if layout.def.local {
                    plan.local_absent.push((n.row.clone(), owner));
                } else {
                    plan.absent.push((itable.clone(), n.row.clone(), owner));
                }
            }
            if let (true, Some(o)) = (same_row, &old) {
                // Covered columns the row no longer has.
                let gone: Vec<&Bytes> = o
                    .cells
                    .keys()
                    .filter(|q| !n.cells.contains_key(*q))
                    .collect();
                if !gone.is_empty() {
                    let mut d = Delete::new(&n.row).durability(durability);
                    for q in gone {
                        d = d.add_columns(family, q);
                    }
                    plan.writes.push((itable.clone(), d.into(), owned));
                }
            }
            let ttl = index_ttl(layout, puts, now);
            plan.writes
                .push((itable.clone(), put_of(n, family, durability, ttl), owned));
        }
        Ok(Ok(plan))
    }
}

/// The index row of data row `row` in state `state`, keyed where the index keeps it: the
/// index table's key, or for a local index the local row key in the region starting at
/// `region_start`.
fn entry_in(
    layout: &Layout,
    region_start: &[u8],
    row: &[u8],
    state: &basalt_core::client::RowResult,
) -> Result<Option<Entry>> {
    let Some(mut e) = layout.entry(row, state)? else {
        return Ok(None);
    };
    if layout.def.local {
        e.row = layout.local_key(region_start, &e.row, row)?;
    }
    Ok(Some(e))
}

/// The observer of an index table: refuses every user write with
/// [`Error::IndexTableWrite`]. The maintainer's writes are added to data-table batches and
/// run no hooks of the index table, so they pass.
pub struct Guard;

#[async_trait]
impl RegionObserver for Guard {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        // Vetoes carry the typed error as it is (a hook error would be wrapped).
        for k in 0..batch.len() {
            batch.veto(k, Error::IndexTableWrite(ctx.table().to_string()));
        }
        Ok(())
    }
}

/// Registers the maintainer and the guard in `registry`, sharing `runtime`.
pub fn register(registry: &basalt_coprocessors::Registry, runtime: Arc<Runtime>) -> Result<()> {
    registry.register(MAINTAINER, move |args| {
        let defs = Maintainer::defs_from_args(args)?;
        Ok(Arc::new(Maintainer::new(defs, runtime.clone())?) as Arc<dyn RegionObserver>)
    })?;
    registry.register(GUARD, |_| Ok(Arc::new(Guard) as Arc<dyn RegionObserver>))
}
