//! The master: the one process that decides where regions are served, elected through
//! etcd (`election`); every region server is a candidate ([`master_duty`]), as HBase's
//! backup masters are. While its term lasts it reconciles, every [`MASTER_TICK`], the
//! regions the catalog lists with the live servers ([`reconcile`]):
//!
//! - a region with no assignment, or assigned to a server that is not live (its lease
//!   ended: killed, paused, cut off), is assigned to a live server: its live owner if it
//!   has one (the server that created it), else the server of its table group, else the
//!   server with the fewest table groups. The new server's open fences the dead server's
//!   WAL and replays the region's edits (`basalt_core`'s `server/open/runtime.rs`): that is
//!   HBase's server-crash procedure, the fence being the storage half of it;
//! - the assignment of a region the catalog no longer lists (a dropped table, a split's
//!   parent) is forgotten;
//! - when no region is in transition (every region's live owner is its assigned server),
//!   a table group spread over servers is gathered on the server holding most of it, and
//!   then one group moves from the server with the most groups to the one with the fewest
//!   when they differ by two or more (the balancer): a graceful move, the old server
//!   closing the region with a flush before the new one opens it without replay.
//!
//! A table group is a table with its global index tables (`<table>.idx.<index>`, in the
//! table's namespace): they are written together, so they are served together, and a
//! batch of an order row, its index rows and a counter commits on one server. Schema
//! changes need every region of a table on one engine, which the groups also give.
//!
//! Invariants: every assignment is written in a transaction that compares the term (a
//! deposed master changes nothing); the assignments are the whole persisted state (a new
//! master reads them and goes on: each step is idempotent); a region moves only to a live
//! server; nothing moves while a region is in transition, except regions of dead servers.

use crate::assignment::Assignments;
use crate::election::{Leadership, LiveServer};
use crate::EtcdCoordination;
use basalt_core::coord::{Coordination, RegionKey};
use basalt_core::{Result, TableName};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often a master reconciles assignments with the live servers.
pub const MASTER_TICK: Duration = Duration::from_millis(250);
/// How often a candidate looks whether the master key is free.
pub const CAMPAIGN_POLL: Duration = Duration::from_millis(250);

/// The group of `table`: its namespace and the table it indexes (itself when it is not an
/// index table).
pub fn table_group(table: &TableName) -> (String, String) {
    let qualifier = table.qualifier();
    let base = qualifier
        .split_once(".idx.")
        .map_or(qualifier, |(base, _)| base);
    (table.namespace().to_string(), base.to_string())
}

/// What one reconciliation did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reconciled {
    /// Regions assigned, with their server and why.
    pub assigned: Vec<(RegionKey, String, &'static str)>,
    /// Assignments forgotten (their regions are gone).
    pub forgotten: Vec<RegionKey>,
    /// Regions whose live owner is not their assigned server (after this pass's writes:
    /// the ones it assigned count).
    pub in_transition: usize,
}

/// One reconciliation as master of `term` (see the module doc).
pub async fn reconcile(coord: &EtcdCoordination, term: &Leadership) -> Result<Reconciled> {
    let live = coord.live_servers().await?;
    let mut out = Reconciled::default();
    if live.is_empty() {
        return Ok(out);
    }
    let regions = coord.all_regions().await?;
    let mut assigned = coord.assignments().await?;
    let owners = live_owner_names(&live, &coord.live_owners().await?);
    let names: BTreeSet<String> = live.iter().map(|s| s.process.clone()).collect();
    let listed: BTreeSet<RegionKey> = regions.iter().map(|r| r.key.clone()).collect();
    for region in assigned
        .keys()
        .filter(|r| !listed.contains(r))
        .cloned()
        .collect::<Vec<_>>()
    {
        coord.unassign(term, &region).await?;
        assigned.remove(&region);
        out.forgotten.push(region);
    }
    // Regions with no live server assigned.
    let orphans: Vec<RegionKey> = regions
        .iter()
        .map(|r| r.key.clone())
        .filter(|k| assigned.get(k).is_none_or(|p| !names.contains(p)))
        .collect();
    for (key, server) in requested_moves(coord, term, &listed, &mut assigned, &names).await? {
        out.assigned.push((key, server, "moved by request"));
    }
    let mut homes = group_homes(&assigned, &names);
    for key in orphans {
        let group = table_group(&key.table);
        let (server, why) = match owners.get(&key) {
            Some(owner) => (owner.clone(), "its live owner"),
            None => match homes.get(&group) {
                Some(s) => (s.clone(), "its table group's server"),
                None => (least_loaded(&assigned, &names), "the least loaded server"),
            },
        };
        homes.entry(group).or_insert_with(|| server.clone());
        coord.assign(term, &key, &server).await?;
        assigned.insert(key.clone(), server.clone());
        out.assigned.push((key, server, why));
    }
    let in_transition = |assigned: &Assignments| {
        assigned
            .iter()
            .filter(|(k, p)| owners.get(*k) != Some(*p))
            .count()
    };
    if out.assigned.is_empty() && in_transition(&assigned) == 0 {
        let requested = coord.balance_requested().await?;
        let balance = requested || coord.balancer_on().await?;
        for (key, server, why) in rebalance(&assigned, &names, balance) {
            coord.assign(term, &key, &server).await?;
            assigned.insert(key.clone(), server.clone());
            out.assigned.push((key, server, why));
        }
        if requested {
            let done = coord.request_done(None);
            coord.as_master(term, "balance", vec![done]).await?;
        }
    }
    out.in_transition = in_transition(&assigned);
    for (key, server, why) in &out.assigned {
        tracing::info!(region = %key, %server, reason = why, "assigned region");
    }
    Ok(out)
}

/// Each region's live owner by process name (owners whose lease is a live server's).
fn live_owner_names(
    live: &[LiveServer],
    owners: &BTreeMap<RegionKey, u64>,
) -> BTreeMap<RegionKey, String> {
    let by_lease: BTreeMap<u64, &str> =
        live.iter().map(|s| (s.lease, s.process.as_str())).collect();
    owners
        .iter()
        .filter_map(|(k, lease)| by_lease.get(lease).map(|p| (k.clone(), p.to_string())))
        .collect()
}

/// A table group: its namespace and the table it is named after ([`table_group`]).
type Group = (String, String);

/// The live server holding most regions of each table group (ties: the first by name);
/// groups with no region on a live server have none.
fn group_homes(assigned: &Assignments, live: &BTreeSet<String>) -> BTreeMap<Group, String> {
    let mut counts: BTreeMap<Group, BTreeMap<&str, usize>> = BTreeMap::new();
    for (k, p) in assigned.iter().filter(|(_, p)| live.contains(*p)) {
        *counts
            .entry(table_group(&k.table))
            .or_default()
            .entry(p.as_str())
            .or_default() += 1;
    }
    counts
        .into_iter()
        .filter_map(|(group, servers)| {
            let home = servers
                .into_iter()
                .max_by_key(|(p, n)| (*n, std::cmp::Reverse(*p)))?;
            Some((group, home.0.to_string()))
        })
        .collect()
}

/// The table groups each live server is assigned (a group spread over several counts for
/// each).
fn groups_by_server(
    assigned: &Assignments,
    live: &BTreeSet<String>,
) -> BTreeMap<String, BTreeSet<Group>> {
    let mut out: BTreeMap<String, BTreeSet<Group>> =
        live.iter().map(|p| (p.clone(), BTreeSet::new())).collect();
    for (k, p) in assigned {
        if let Some(groups) = out.get_mut(p) {
            groups.insert(table_group(&k.table));
        }
    }
    out
}

/// The live server with the fewest table groups (ties: the first by name).
fn least_loaded(assigned: &Assignments, live: &BTreeSet<String>) -> String {
    groups_by_server(assigned, live)
        .into_iter()
        .min_by_key(|(p, g)| (g.len(), p.clone()))
        .map(|(p, _)| p)
        .unwrap_or_default()
}

/// Acts on the operators' move requests (`admin`): each request's region moves with its
/// table group to the requested server (any other live server when none was named), in
/// one fenced transaction with the request's deletion; a request for a region that is
/// gone, or a server that is not live or already holds it, is dropped. Returns the regions
/// assigned, with their server.
async fn requested_moves(
    coord: &EtcdCoordination,
    term: &Leadership,
    listed: &BTreeSet<RegionKey>,
    assigned: &mut Assignments,
    live: &BTreeSet<String>,
) -> Result<Vec<(RegionKey, String)>> {
    let mut out = Vec::new();
    for (key, target) in coord.move_requests().await? {
        let done = coord.request_done(Some(&key));
        let current = assigned.get(&key).cloned();
        let to = match target {
            _ if !listed.contains(&key) => None,
            Some(t) => Some(t).filter(|t| live.contains(t) && current.as_ref() != Some(t)),
            None => groups_by_server(assigned, live)
                .into_iter()
                .filter(|(p, _)| current.as_ref() != Some(p))
                .min_by_key(|(p, g)| (g.len(), p.clone()))
                .map(|(p, _)| p),
        };
        let Some(to) = to else {
            tracing::warn!(region = %key, "dropped a move request that no longer applies");
            coord.as_master(term, "move", vec![done]).await?;
            continue;
        };
        let group = table_group(&key.table);
        let members: Vec<RegionKey> = listed
            .iter()
            .filter(|k| table_group(&k.table) == group)
            .cloned()
            .collect();
        let mut ops: Vec<_> = members
            .iter()
            .map(|k| coord.assignment_op(term, k, &to))
            .collect();
        ops.push(done);
        coord.as_master(term, "move", ops).await?;
        for k in members {
            assigned.insert(k.clone(), to.clone());
            out.push((k, to.clone()));
        }
    }
    Ok(out)
}

/// The moves that gather a spread table group, or else, when `balance`, balance groups
/// over servers (one group per pass): each region with its new server and why.
fn rebalance(
    assigned: &Assignments,
    live: &BTreeSet<String>,
    balance: bool,
) -> Vec<(RegionKey, String, &'static str)> {
    // Gather: every region of a group to the group's server.
    let homes = group_homes(assigned, live);
    let mut moves = Vec::new();
    for (k, p) in assigned {
        if let Some(home) = homes.get(&table_group(&k.table)) {
            if p != home {
                moves.push((k.clone(), home.clone(), "gathering its table group"));
            }
        }
    }
    if !moves.is_empty() || !balance {
        return moves;
    }
    let by_server = groups_by_server(assigned, live);
    let most = by_server
        .iter()
        .max_by_key(|(p, g)| (g.len(), (*p).clone()));
    let fewest = by_server
        .iter()
        .min_by_key(|(p, g)| (g.len(), std::cmp::Reverse((*p).clone())));
    let (Some((from, groups)), Some((to, few))) = (most, fewest) else {
        return moves;
    };
    if groups.len() < few.len() + 2 {
        return moves;
    }
    // The group with the fewest regions moves: the cheapest.
    let size = |g: &Group| {
        assigned
            .keys()
            .filter(|k| table_group(&k.table) == *g)
            .count()
    };
    if let Some(group) = groups.iter().min_by_key(|g| (size(g), (*g).clone())) {
        for (k, p) in assigned {
            if p == from && table_group(&k.table) == *group {
                moves.push((k.clone(), to.clone(), "balancing table groups"));
            }
        }
    }
    moves
}

/// A region server's candidacy for master, until `stopped`: campaigns under a lease of
/// its own (renewed every third of `ttl`), reconciles every [`MASTER_TICK`] while its term
/// lasts, and campaigns again when the term or the lease is lost.
pub async fn master_duty(
    coord: EtcdCoordination,
    process: String,
    ttl: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    while !*stopped.borrow() {
        let served = tokio::select! {
            r = one_term(&coord, &process, ttl) => r,
            _ = stopped.wait_for(|s| *s) => return,
        };
        if let Err(e) = served {
            tracing::warn!(%process, error = %e, "master candidacy failed; campaigning again");
            tokio::select! {
                _ = tokio::time::sleep(CAMPAIGN_POLL) => {}
                _ = stopped.wait_for(|s| *s) => return,
            }
        }
    }
}

/// One candidacy: a lease, the campaign, and the term's reconciliations until it ends.
async fn one_term(coord: &EtcdCoordination, process: &str, ttl: Duration) -> Result<()> {
    let lease = coord.grant_lease(&format!("{process}.master"), ttl).await?;
    let lost = Arc::new(AtomicBool::new(false));
    let renewal = {
        let (coord, id, lost) = (coord.clone(), lease.id, Arc::clone(&lost));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(ttl / 3).await;
                if coord.keep_alive(id).await.is_err() {
                    lost.store(true, Ordering::SeqCst);
                    return;
                }
            }
        })
    };
    let _stop_renewal = AbortOnDrop(renewal);
    let term = coord.campaign(&lease, CAMPAIGN_POLL).await?;
    tracing::info!(%process, term = term.revision, "became master");
    let ended = loop {
        tokio::time::sleep(MASTER_TICK).await;
        if lost.load(Ordering::SeqCst) || !coord.is_leader(&term).await.unwrap_or(false) {
            break Ok(());
        }
        match reconcile(coord, &term).await {
            Ok(_) => {}
            Err(e @ basalt_core::Error::CoordinationConflict(_)) => break Err(e),
            Err(e) => tracing::warn!(error = %e, "reconciliation failed; trying again"),
        }
    };
    tracing::info!(%process, term = term.revision, "master term ended");
    let _ = coord.resign(&term).await;
    let _ = coord.revoke_lease(lease.id).await;
    ended
}

/// Aborts a task when dropped (a cancelled candidacy stops renewing its lease).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(table: &str, id: u64) -> RegionKey {
        RegionKey::new(TableName::parse(table).unwrap(), id)
    }

    fn live(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn index_tables_join_their_data_tables_group() {
        let t = |n: &str| TableName::parse(n).unwrap();
        assert_eq!(
            table_group(&t("orders")),
            table_group(&t("orders.idx.by_user"))
        );
        assert_ne!(table_group(&t("orders")), table_group(&t("users")));
        assert_ne!(
            table_group(&t("a:orders")),
            table_group(&t("b:orders.idx.x"))
        );
    }

    #[test]
    fn a_spread_group_is_gathered_before_anything_is_balanced() {
        let mut assigned = Assignments::new();
        assigned.insert(key("orders", 1), "rs1".into());
        assigned.insert(key("orders", 2), "rs1".into());
        assigned.insert(key("orders.idx.u", 3), "rs2".into());
        let moves = rebalance(&assigned, &live(&["rs1", "rs2"]), false);
        assert_eq!(
            moves,
            vec![(
                key("orders.idx.u", 3),
                "rs1".to_string(),
                "gathering its table group"
            )]
        );
    }

    #[test]
    fn groups_spread_over_servers_until_they_differ_by_at_most_one() {
        let mut assigned = Assignments::new();
        for (i, t) in ["a", "b", "c", "d"].iter().enumerate() {
            assigned.insert(key(t, i as u64 * 2), "rs1".into());
            assigned.insert(key(t, i as u64 * 2 + 1), "rs1".into());
        }
        let servers = live(&["rs1", "rs2", "rs3"]);
        let mut passes = 0;
        loop {
            let moves = rebalance(&assigned, &servers, true);
            if moves.is_empty() {
                break;
            }
            // A group moves whole, to one server.
            let targets: BTreeSet<&String> = moves.iter().map(|(_, s, _)| s).collect();
            assert_eq!(targets.len(), 1);
            for (k, s, _) in moves {
                assigned.insert(k, s);
            }
            passes += 1;
            assert!(passes < 10, "balancing does not converge");
        }
        let counts: Vec<usize> = groups_by_server(&assigned, &servers)
            .values()
            .map(|g| g.len())
            .collect();
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(max - min <= 1, "{counts:?}");
        assert_eq!(counts.iter().sum::<usize>(), 4);
    }
}
