//! The master: the one process that decides where regions are served, elected through
//! etcd (`election`); every region server is a candidate ([`master_duty`]), as HBase's
//! backup masters are. While its term lasts it reconciles, every [`MASTER_TICK`], the
//! regions the catalog lists with the live servers (`reconcile`), placing each region
//! alone or with its table group as `placement` decides (a table group with global
//! indexes, a table marked grouped, or one a schema change holds, goes whole to one
//! server, and a merge's two held regions together; any other table is spread region by
//! region):
//!
//! - a region with no assignment, or assigned to a server that is not live (its lease
//!   ended: killed, paused, cut off), is assigned to a live server: its live owner if it
//!   has one (the server that created it), else the server of its group if grouped, else
//!   the server with the fewest regions of its table. The new server's open fences the
//!   dead server's WAL and replays the region's edits (`basalt_core`'s
//!   `server/open/runtime.rs`): that is HBase's server-crash procedure, the fence being the
//!   storage half of it;
//! - the assignment of a region the catalog no longer lists (a dropped table, a split's
//!   parent) is forgotten;
//! - an operator's move request moves the region (with its group when grouped);
//! - a table a schema change or a drop waiting to run holds (`holds`), or the two regions
//!   of a merge waiting to run, are gathered on one server at once;
//! - a split, merge, create or drop a client (or, for a split, a region's server) asked
//!   for runs as a procedure persisted in etcd (`procedures`: sent to the server of its
//!   regions, or any for a create, its outcome written back), and a new master runs on the
//!   ones it finds unfinished;
//! - when no region is in transition (every region's live owner is its assigned server),
//!   a grouped group spread over servers is gathered on the server holding most of it,
//!   and then, when the balancer is on, spread tables are balanced region by region and
//!   grouped groups by load: graceful moves, the old server closing the region with a
//!   flush before the new one opens it without replay. A region an operator moved stays
//!   where it was put for [`BALANCER_PERIOD`] (HBase's balancer runs every five minutes,
//!   so a manual move stands until then): the balancer balances the others around it,
//!   until a requested balance (`ClusterAdmin::balance`, the shell's `balancer`) or the
//!   period's end. The master of a term remembers these moves ([`OperatorMoves`]); a new
//!   master does not.
//!
//! Invariants: every assignment is written in a transaction that compares the term (a
//! deposed master changes nothing); the assignments, placements, holds and procedures are
//! the whole persisted state (a new master reads them and goes on: each step is idempotent); a
//! region moves only to a live server; nothing moves while a region is in transition,
//! except regions of dead servers.

use crate::assignment::Assignments;
use crate::election::{Leadership, LiveServer};
use crate::holds;
use crate::placement::{least_loaded, HoldTarget, Policy};
use crate::procedures::{ProcedureKind, StoredProcedure};
use crate::EtcdCoordination;
use basalt_core::coord::{Coordination, RegionKey};
use basalt_core::Result;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often a master reconciles assignments with the live servers.
pub const MASTER_TICK: Duration = Duration::from_millis(250);
/// How often a candidate looks whether the master key is free.
pub const CAMPAIGN_POLL: Duration = Duration::from_millis(250);

pub use crate::placement::table_group;
pub use procedures::PROCEDURE_KEEP;

mod procedures;

/// The most assignments one of the master's transactions writes.
const MOVES_PER_TRANSACTION: usize = 100;

/// How long the balancer leaves a region an operator moved where it was put (HBase's
/// `hbase.balancer.period`).
pub const BALANCER_PERIOD: Duration = Duration::from_secs(300);

/// The regions operators moved during a master's term, with when: the balancer leaves
/// each where it was put for [`BALANCER_PERIOD`], or until a balance is requested.
#[derive(Debug, Default, Clone)]
pub struct OperatorMoves {
    at: BTreeMap<RegionKey, Instant>,
}

impl OperatorMoves {
    /// The regions moved less than [`BALANCER_PERIOD`] ago (older ones are forgotten).
    fn pinned(&mut self) -> BTreeSet<RegionKey> {
        self.at.retain(|_, at| at.elapsed() < BALANCER_PERIOD);
        self.at.keys().cloned().collect()
    }
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

/// One reconciliation as master of `term` (see the module doc); `operator_moves` are the
/// regions operators moved during the term, which this pass adds to.
pub(crate) async fn reconcile(
    coord: &EtcdCoordination,
    term: &Leadership,
    operator_moves: &mut OperatorMoves,
    procedures: &[StoredProcedure],
) -> Result<Reconciled> {
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
    // A merge waiting to run holds its two regions, grouped by its procedure's id.
    let mut held = holds::holds(coord).await?;
    for p in procedures.iter().filter(|p| !p.record.finished()) {
        let table = p.record.kind.table();
        match &p.record.kind {
            ProcedureKind::Merge { .. } => {
                for region in p.record.kind.regions() {
                    held.push((HoldTarget::region(table.clone(), region), p.id));
                }
            }
            // A delete waiting to run holds its table.
            ProcedureKind::DeleteTable { .. } => {
                held.push((HoldTarget::table(table.clone()), p.id));
            }
            ProcedureKind::Split { .. } | ProcedureKind::CreateTable { .. } => {}
        }
    }
    let policy = Policy::new(&listed, &holds::placements(coord).await?, &held);
    let moved = requested_moves(coord, term, &policy, &listed, &mut assigned, &names).await?;
    for (key, server) in moved {
        operator_moves.at.insert(key.clone(), Instant::now());
        out.assigned.push((key, server, "moved by request"));
    }
    // Counted as they stand with the orphans placed so far.
    let mut placer = policy.placer(&assigned, &names);
    for key in orphans {
        let (server, why) = match owners.get(&key) {
            Some(owner) => (owner.clone(), "its live owner"),
            None => match placer.target(&key) {
                Some(target) => target,
                None => continue,
            },
        };
        coord.assign(term, &key, &server).await?;
        placer.placed(&key, &server);
        assigned.insert(key.clone(), server.clone());
        out.assigned.push((key, server, why));
    }
    // Held tables are gathered at once, whatever else is in transition: a schema change
    // waits for them.
    let gather = policy.gather_held(&assigned, &names);
    write_moves(coord, term, &gather).await?;
    for (key, server, why) in gather {
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
        if requested {
            operator_moves.at.clear();
        }
        let pinned = operator_moves.pinned();
        let moves = policy.rebalance(&assigned, &names, balance, &pinned);
        write_moves(coord, term, &moves).await?;
        for (key, server, why) in moves {
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

/// Writes `moves` as master of `term`, up to [`MOVES_PER_TRANSACTION`] in one transaction
/// (etcd takes 128 operations in one): a group of that size or less is never seen half
/// assigned elsewhere.
async fn write_moves(
    coord: &EtcdCoordination,
    term: &Leadership,
    moves: &[(RegionKey, String, &'static str)],
) -> Result<()> {
    for chunk in moves.chunks(MOVES_PER_TRANSACTION) {
        let ops = chunk
            .iter()
            .map(|(key, server, _)| coord.assignment_op(term, key, server))
            .collect();
        coord.as_master(term, "assign", ops).await?;
    }
    Ok(())
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

/// Acts on the operators' move requests (`admin`): each request's region moves (with its
/// group when grouped, see `placement`) to the requested server (the least loaded other
/// live server when none was named), in fenced transactions the last of which deletes
/// the request (one for a group of up to [`MOVES_PER_TRANSACTION`] regions); a request
/// for a region that is gone, or a server that is not live or already holds it, is
/// dropped; one for a held region (of a held table, or held by a merge) waits until the
/// hold ends. Returns the regions assigned,
/// with their server.
async fn requested_moves(
    coord: &EtcdCoordination,
    term: &Leadership,
    policy: &Policy,
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
            None => least_loaded(assigned, live, current.as_deref()),
        };
        let Some(to) = to else {
            tracing::warn!(region = %key, "dropped a move request that no longer applies");
            coord.as_master(term, "move", vec![done]).await?;
            continue;
        };
        if policy.held(&key) {
            continue; // acted on once the schema change releases its table
        }
        let members = policy.members(&key, listed);
        // The last of a large group's moves with the request's deletion.
        let moves: Vec<_> = members
            .iter()
            .map(|k| (k.clone(), to.clone(), "moved by request"))
            .collect();
        let split = moves.len().saturating_sub(MOVES_PER_TRANSACTION - 1);
        write_moves(coord, term, &moves[..split]).await?;
        let mut ops: Vec<_> = moves[split..]
            .iter()
            .map(|(k, to, _)| coord.assignment_op(term, k, to))
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
    let mut operator_moves = OperatorMoves::default();
    let mut procedures = procedures::Procedures::default();
    let ended = loop {
        tokio::time::sleep(MASTER_TICK).await;
        if lost.load(Ordering::SeqCst) || !coord.is_leader(&term).await.unwrap_or(false) {
            break Ok(());
        }
        // One read of the procedures serves the pass and the procedures' step.
        procedures.forget_ended();
        let stored = crate::procedures::procedures(coord).await;
        let listed = match &stored {
            Ok(stored) => stored.as_slice(),
            Err(e) => {
                tracing::warn!(error = %e, "procedures could not be read: none gathers or runs this pass");
                &[]
            }
        };
        match reconcile(coord, &term, &mut operator_moves, listed).await {
            Ok(_) => {}
            Err(e @ basalt_core::Error::CoordinationConflict(_)) => break Err(e),
            Err(e) => tracing::warn!(error = %e, "reconciliation failed; trying again"),
        }
        if let Ok(stored) = stored {
            match procedures.step(coord, &term, stored).await {
                Ok(()) => {}
                Err(e @ basalt_core::Error::CoordinationConflict(_)) => break Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "procedures could not be stepped; trying again")
                }
            }
        }
    };
    drop(procedures); // its tasks stop before another master's may start
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
