//! Where the master wants each region served: the pure half of its reconciliation (no
//! etcd here), decided on the assignments, the live servers and the placement policy.
//!
//! The unit of placement is a region, except for a *grouped* table group, which is placed
//! whole on one server. A table group is a table with its global index tables
//! (`<table>.idx.<index>`, [`table_group`]): they are written together by one batch, so
//! they are served together. A group is grouped when
//!
//! - it has more than one table (a global index: its maintainer writes the index rows in
//!   the data batch, on the data's server);
//! - one of its tables is marked [`Placement::Grouped`] (`ClusterAdmin::set_placement`:
//!   batches over several of its rows, an order row and a counter row, stay atomic);
//! - a schema change holds one of its tables (`holds`): the change needs every region of
//!   the table on one engine. Tables held under one client lease (a snapshot of several
//!   tables) join one group, gathered on one server.
//!
//! Regions held alone (a merge's two, under one client lease) of a spread table are a unit
//! of their own, gathered on one server while the rest of their table stays where it is;
//! those of a grouped table hold its group where it is (it is on one server already).
//!
//! Every other table is *spread*: each region placed alone, and balanced table by table
//! (HBase's by-table balancing) so a table's regions differ by at most one per server.
//!
//! Invariants: every decision is recomputed from its inputs on each pass (a new master
//! decides the same); moves only go to live servers; each balancing move strictly lowers
//! an imbalance, so balancing ends.

use crate::assignment::Assignments;
use basalt_core::coord::RegionKey;
use basalt_core::TableName;
use std::collections::{BTreeMap, BTreeSet};

/// How a table's regions are placed over the region servers (`P/placement/<table>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Each region placed alone and balanced with the table's other regions (the default
    /// for a table without global indexes).
    #[default]
    Spread,
    /// Every region of the table group on one server: a batch over any of its rows is
    /// atomic.
    Grouped,
}

impl Placement {
    /// The value stored in etcd.
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Spread => "spread",
            Placement::Grouped => "grouped",
        }
    }

    /// Parses a stored value or a shell argument.
    pub fn parse(text: &str) -> Option<Placement> {
        match text {
            "spread" => Some(Placement::Spread),
            "grouped" => Some(Placement::Grouped),
            _ => None,
        }
    }
}

/// What a schema hold holds: a whole table, or one region of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HoldTarget {
    /// The table.
    pub table: TableName,
    /// The region held alone (`None`: every region of the table).
    pub region: Option<u64>,
}

impl HoldTarget {
    /// The whole of `table`.
    pub fn table(table: TableName) -> Self {
        HoldTarget {
            table,
            region: None,
        }
    }

    /// Region `region` of `table`.
    pub fn region(table: TableName, region: u64) -> Self {
        HoldTarget {
            table,
            region: Some(region),
        }
    }

    /// Whether region `region` of `table` is held by this.
    pub fn covers(&self, table: &TableName, region: u64) -> bool {
        self.table == *table && self.region.is_none_or(|r| r == region)
    }
}

/// A table group: its namespace and the table it is named after.
pub(crate) type Group = (String, String);

/// The group of `table`: its namespace and the table it indexes (itself when it is not an
/// index table).
pub fn table_group(table: &TableName) -> Group {
    let qualifier = table.qualifier();
    let base = qualifier
        .split_once(".idx.")
        .map_or(qualifier, |(base, _)| base);
    (table.namespace().to_string(), base.to_string())
}

/// What moves together.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Unit {
    /// Every region of a grouped group (named by its representative group).
    Group(Group),
    /// One region of a spread table.
    Region(RegionKey),
}

/// The placement policy of one pass: which groups are grouped, and which are joined by a
/// hold.
#[derive(Debug, Default)]
pub(crate) struct Policy {
    /// Each group joined to another by a hold, with its representative.
    joined: BTreeMap<Group, Group>,
    /// The representatives of grouped groups.
    grouped: BTreeSet<Group>,
    /// The representatives of held groups (a subset of `grouped`).
    held: BTreeSet<Group>,
    /// Regions held alone, each with the unit of the regions held under its lease (a
    /// group named after its table and the lease, which no table can be called).
    held_regions: BTreeMap<RegionKey, Group>,
}

impl Policy {
    /// The policy for the tables of `regions`, the tables marked in `placements` and the
    /// schema holds `holds` (each held table or region with the lease holding it).
    pub(crate) fn new<'a>(
        regions: impl IntoIterator<Item = &'a RegionKey>,
        placements: &BTreeMap<TableName, Placement>,
        holds: &[(HoldTarget, u64)],
    ) -> Self {
        let mut policy = Policy::default();
        let mut by_lease: BTreeMap<u64, Vec<Group>> = BTreeMap::new();
        let mut region_holds = Vec::new();
        for (target, lease) in holds {
            match target.region {
                None => by_lease
                    .entry(*lease)
                    .or_default()
                    .push(table_group(&target.table)),
                Some(region) => region_holds.push((target.table.clone(), region, *lease)),
            }
        }
        for groups in by_lease.values() {
            let mut reps: Vec<Group> = groups.iter().map(|g| policy.representative(g)).collect();
            reps.sort();
            reps.dedup();
            if let Some((first, rest)) = reps.split_first() {
                for r in rest {
                    policy.joined.insert(r.clone(), first.clone());
                }
                policy.grouped.insert(first.clone());
                policy.held.insert(first.clone());
            }
        }
        let mut tables: BTreeMap<Group, BTreeSet<&TableName>> = BTreeMap::new();
        for k in regions {
            tables
                .entry(table_group(&k.table))
                .or_default()
                .insert(&k.table);
        }
        for (group, members) in &tables {
            if members.len() > 1 {
                let rep = policy.representative(group);
                policy.grouped.insert(rep);
            }
        }
        for (table, placement) in placements {
            if *placement == Placement::Grouped {
                let rep = policy.representative(&table_group(table));
                policy.grouped.insert(rep);
            }
        }
        // A representative that later joined another carries its grouping over.
        let late: Vec<Group> = policy.grouped.iter().cloned().collect();
        policy.grouped = late.iter().map(|g| policy.representative(g)).collect();
        let late: Vec<Group> = policy.held.iter().cloned().collect();
        policy.held = late.iter().map(|g| policy.representative(g)).collect();
        // Held regions: a grouped table is whole on one server already, so its group is
        // held as it stands; a spread table's held regions are a unit of their own.
        for (table, region, lease) in region_holds {
            let rep = policy.representative(&table_group(&table));
            if policy.grouped.contains(&rep) {
                policy.held.insert(rep);
                continue;
            }
            let unit = (rep.0, format!("{}#{lease:016x}", table.qualifier()));
            policy
                .held_regions
                .insert(RegionKey::new(table, region), unit.clone());
            policy.grouped.insert(unit.clone());
            policy.held.insert(unit);
        }
        policy
    }

    /// Whether a schema change holds `region`, or its table (or a table joined to it).
    pub(crate) fn held(&self, region: &RegionKey) -> bool {
        self.held_regions.contains_key(region)
            || self
                .held
                .contains(&self.representative(&table_group(&region.table)))
    }

    /// The moves that gather every held unit on its home: made on every pass, whatever
    /// else is in transition (a schema change waits for them).
    pub(crate) fn gather_held(
        &self,
        assigned: &Assignments,
        live: &BTreeSet<String>,
    ) -> Vec<(RegionKey, String, &'static str)> {
        if self.held.is_empty() {
            return Vec::new();
        }
        let homes = self.homes(assigned, live);
        assigned
            .iter()
            .filter(|(k, _)| self.held(k))
            .filter_map(|(k, p)| {
                let home = homes.get(&self.unit(k))?;
                (p != home).then(|| (k.clone(), home.clone(), "gathering what a change holds"))
            })
            .collect()
    }

    /// The group standing for `group`'s joined groups.
    fn representative(&self, group: &Group) -> Group {
        let mut g = group;
        // Joins point to smaller names, so the chain ends.
        while let Some(next) = self.joined.get(g) {
            g = next;
        }
        g.clone()
    }

    /// What `region` moves with.
    pub(crate) fn unit(&self, region: &RegionKey) -> Unit {
        if let Some(unit) = self.held_regions.get(region) {
            return Unit::Group(unit.clone());
        }
        let rep = self.representative(&table_group(&region.table));
        if self.grouped.contains(&rep) {
            Unit::Group(rep)
        } else {
            Unit::Region(region.clone())
        }
    }

    /// The regions of `listed` that move with `region` (itself included).
    pub(crate) fn members<'a>(
        &self,
        region: &RegionKey,
        listed: impl IntoIterator<Item = &'a RegionKey>,
    ) -> Vec<RegionKey> {
        let unit = self.unit(region);
        listed
            .into_iter()
            .filter(|k| self.unit(k) == unit)
            .cloned()
            .collect()
    }

    /// The live server holding most regions of each grouped unit (ties: the first by
    /// name); units with no region on a live server have none.
    pub(crate) fn homes(
        &self,
        assigned: &Assignments,
        live: &BTreeSet<String>,
    ) -> BTreeMap<Unit, String> {
        let mut counts: BTreeMap<Unit, BTreeMap<&str, usize>> = BTreeMap::new();
        for (k, p) in assigned.iter().filter(|(_, p)| live.contains(*p)) {
            let unit = self.unit(k);
            if matches!(unit, Unit::Group(_)) {
                *counts
                    .entry(unit)
                    .or_default()
                    .entry(p.as_str())
                    .or_default() += 1;
            }
        }
        counts
            .into_iter()
            .filter_map(|(unit, servers)| {
                let home = servers
                    .into_iter()
                    .max_by_key(|(p, n)| (*n, std::cmp::Reverse(*p)))?;
                Some((unit, home.0.to_string()))
            })
            .collect()
    }

    /// The placer of one pass's orphans over `assigned` (see [`Placer`]).
    pub(crate) fn placer<'p>(
        &'p self,
        assigned: &Assignments,
        live: &'p BTreeSet<String>,
    ) -> Placer<'p> {
        let mut of_table: BTreeMap<(TableName, String), usize> = BTreeMap::new();
        for (k, p) in assigned.iter().filter(|(_, p)| live.contains(*p)) {
            *of_table.entry((k.table.clone(), p.clone())).or_default() += 1;
        }
        Placer {
            policy: self,
            live,
            homes: self.homes(assigned, live),
            load: load(assigned, live),
            of_table,
        }
    }

    /// The moves of one pass once no region is in transition: grouped units spread over
    /// servers are gathered on their homes first; then, when `balance`, each spread table
    /// is balanced region by region and, when none needs it, one unit (a grouped group, or
    /// a spread region its table can spare) moves from the most loaded server to the
    /// least loaded when that lowers the difference. Balancing leaves the `pinned`
    /// regions (and the grouped units they belong to) where they are, and balances the
    /// others around them.
    pub(crate) fn rebalance(
        &self,
        assigned: &Assignments,
        live: &BTreeSet<String>,
        balance: bool,
        pinned: &BTreeSet<RegionKey>,
    ) -> Vec<(RegionKey, String, &'static str)> {
        let homes = self.homes(assigned, live);
        let mut moves = Vec::new();
        for (k, p) in assigned {
            if let Some(home) = homes.get(&self.unit(k)) {
                if p != home {
                    moves.push((k.clone(), home.clone(), "gathering its table group"));
                }
            }
        }
        // While a schema change holds tables, nothing is balanced: the held tables stay
        // where they were gathered, and the others where they are.
        if !moves.is_empty() || !balance || live.is_empty() || !self.held.is_empty() {
            return moves;
        }
        let mut load = load(assigned, live);
        // Spread tables, one at a time: from the server with most of the table's regions
        // (and one that is not pinned) to the one with fewest (ties: the least loaded)
        // until they differ by one. Per server: its count of the table's regions, and the
        // ones balancing may move.
        let mut tables: BTreeMap<&TableName, BTreeMap<&str, (usize, Vec<&RegionKey>)>> =
            BTreeMap::new();
        for (k, p) in assigned.iter().filter(|(_, p)| live.contains(*p)) {
            if matches!(self.unit(k), Unit::Region(_)) {
                let servers = tables.entry(&k.table).or_insert_with(|| {
                    live.iter().map(|s| (s.as_str(), (0, Vec::new()))).collect()
                });
                let (count, movable) = servers.entry(p.as_str()).or_default();
                *count += 1;
                if !pinned.contains(k) {
                    movable.push(k);
                }
            }
        }
        for servers in tables.values_mut() {
            while moves.len() < MAX_MOVES_PER_PASS {
                let busiest = servers
                    .iter()
                    .filter(|(_, (_, movable))| !movable.is_empty())
                    .map(|(p, (n, _))| (*n, load.get(*p).copied().unwrap_or(0), *p))
                    .max();
                let idlest = servers
                    .iter()
                    .map(|(p, (n, _))| (*n, load.get(*p).copied().unwrap_or(0), *p))
                    .min();
                let (Some((most, _, from)), Some((fewest, _, to))) = (busiest, idlest) else {
                    break;
                };
                if most < fewest + 2 {
                    break;
                }
                let Some(region) = servers.get_mut(from).and_then(|(n, movable)| {
                    *n -= 1;
                    movable.pop()
                }) else {
                    break;
                };
                let (n, movable) = servers.entry(to).or_default();
                *n += 1;
                movable.push(region);
                *load.entry(from.to_string()).or_default() -= 1;
                *load.entry(to.to_string()).or_default() += 1;
                moves.push((region.clone(), to.to_string(), "balancing its table"));
            }
        }
        if !moves.is_empty() {
            return moves;
        }
        // By load: the smallest unit on the busiest server moves to the idlest when it is
        // smaller than their difference (a spread region only when its table has more
        // regions there than on the idlest, so its table stays balanced).
        let busiest = load
            .iter()
            .max_by_key(|(p, n)| (**n, std::cmp::Reverse(*p)));
        let idlest = load.iter().min_by_key(|(p, n)| (**n, (*p).clone()));
        let (Some((from, most)), Some((to, fewest))) = (busiest, idlest) else {
            return moves;
        };
        let mut of_table: BTreeMap<(&TableName, &String), usize> = BTreeMap::new();
        for (k, p) in assigned {
            *of_table.entry((&k.table, p)).or_default() += 1;
        }
        let count = |t: &TableName, p: &String| of_table.get(&(t, p)).copied().unwrap_or(0);
        let stay: BTreeSet<Unit> = pinned.iter().map(|k| self.unit(k)).collect();
        let mut sizes: BTreeMap<Unit, usize> = BTreeMap::new();
        for (k, _) in assigned.iter().filter(|(_, p)| *p == from) {
            let unit = self.unit(k);
            if stay.contains(&unit) {
                continue;
            }
            if matches!(unit, Unit::Group(_)) || count(&k.table, from) > count(&k.table, to) {
                *sizes.entry(unit).or_default() += 1;
            }
        }
        let candidate = sizes
            .into_iter()
            .filter(|(_, n)| *n < most - fewest)
            .min_by_key(|(u, n)| (*n, u.clone()));
        if let Some((unit, _)) = candidate {
            for (k, p) in assigned {
                if p == from && self.unit(k) == unit {
                    moves.push((k.clone(), to.clone(), "balancing the servers' load"));
                }
            }
        }
        moves
    }
}

/// Where the orphans of one pass go, one after another: the homes of grouped units, the
/// servers' loads and each table's regions per server, kept up to date as each orphan is
/// placed (a pass is linear in the regions, not quadratic).
pub(crate) struct Placer<'p> {
    policy: &'p Policy,
    live: &'p BTreeSet<String>,
    homes: BTreeMap<Unit, String>,
    load: BTreeMap<String, usize>,
    of_table: BTreeMap<(TableName, String), usize>,
}

impl Placer<'_> {
    /// Where a region with no live server goes when it has no live owner either: its
    /// group's home for a grouped one, else the live server with the fewest regions of its
    /// table (ties: the fewest regions, then the first by name).
    pub(crate) fn target(&self, region: &RegionKey) -> Option<(String, &'static str)> {
        let unit = self.policy.unit(region);
        if let Some(home) = self.homes.get(&unit) {
            return Some((home.clone(), "its table group's server"));
        }
        let server = self.live.iter().min_by_key(|p| {
            let of_table = self.of_table.get(&(region.table.clone(), (*p).clone()));
            (
                of_table.copied().unwrap_or(0),
                self.load.get(*p).copied().unwrap_or(0),
                (*p).clone(),
            )
        })?;
        let why = match unit {
            Unit::Group(_) => "the least loaded server",
            Unit::Region(_) => "the server with the fewest of its table's regions",
        };
        Some((server.clone(), why))
    }

    /// Counts `region` as placed on `server` (its group's home from now on, when it has
    /// none yet).
    pub(crate) fn placed(&mut self, region: &RegionKey, server: &str) {
        if !self.live.contains(server) {
            return;
        }
        *self.load.entry(server.to_string()).or_default() += 1;
        *self
            .of_table
            .entry((region.table.clone(), server.to_string()))
            .or_default() += 1;
        let unit = self.policy.unit(region);
        if matches!(unit, Unit::Group(_)) {
            self.homes.entry(unit).or_insert_with(|| server.to_string());
        }
    }
}

/// The most regions one balancing pass moves.
const MAX_MOVES_PER_PASS: usize = 32;

/// The number of regions assigned to each live server (every live server listed).
pub(crate) fn load(assigned: &Assignments, live: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = live.iter().map(|p| (p.clone(), 0)).collect();
    for p in assigned.values() {
        if let Some(n) = out.get_mut(p) {
            *n += 1;
        }
    }
    out
}

/// The live server other than `not` with the fewest regions (ties: the first by name).
pub(crate) fn least_loaded(
    assigned: &Assignments,
    live: &BTreeSet<String>,
    not: Option<&str>,
) -> Option<String> {
    load(assigned, live)
        .into_iter()
        .filter(|(p, _)| Some(p.as_str()) != not)
        .min_by_key(|(p, n)| (*n, p.clone()))
        .map(|(p, _)| p)
}

#[cfg(test)]
mod tests;
