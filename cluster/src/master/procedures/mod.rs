//! The master's side of splits and merges as procedures (`crate::procedures`): each
//! procedure etcd holds that is not finished runs as a task of the master's term, until
//! it writes the procedure's outcome or the term ends (a new master starts it again from
//! the record).
//!
//! One attempt of a procedure reads its table's region list:
//! - its regions are all listed: once one live server is assigned every one of them and
//!   owns it (a merge's two regions are held, so the master gathers them), the record is
//!   marked running and the split or merge is sent to that server; its reply, or its
//!   refusal, is the outcome. A refusal that says the region moved or the server is
//!   unreachable, or a deadline passed, is tried again;
//! - a region is not listed: a procedure never sent fails with `RegionNotFound`
//!   (`TableNotFound` when the table lists none); one that was sent is done once the list
//!   shows what replaced its regions (`procedures::outcome_from_list`), and fails when it
//!   does not within [`REPLACED_GRACE`] (another change took the regions).
//!
//! A create or delete of a table runs as `tables` says.
//!
//! A term runs one task per procedure, and none for a procedure whose regions another
//! running one acts on, or of a table another running one creates or deletes.
//!
//! Invariants: every change of a record is the master's, fenced by its term and by the
//! record's revision as its task last wrote or read it (a task on a stale record changes
//! nothing and stops); a procedure is marked running before anything is sent for it, sent
//! only while its regions are listed and its master's term lasts; a finished one is never run again, and one its client did not delete is deleted
//! [`PROCEDURE_KEEP`] after the master first saw it finished.

use crate::election::{Leadership, LiveServer};
use crate::procedures::{
    self, outcome_from_list, Outcome, ProcedureKind, ProcedureState, StoredProcedure,
};
use crate::rpc::client::{unexpected, RpcClient};
use crate::rpc::messages::{Reply, Request};
use crate::EtcdCoordination;
use basalt_core::coord::{Coordination, RegionKey, RegionRecord};
use basalt_core::{Error, ErrorWire, Result};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How long a finished procedure its client did not delete (the client gave up or died)
/// stays in etcd.
pub const PROCEDURE_KEEP: Duration = Duration::from_secs(300);

/// The pause between two attempts of a waiting procedure.
const ATTEMPT_PAUSE: Duration = Duration::from_millis(200);

/// How long a server may take over one split or merge.
pub(super) const CALL_DEADLINE: Duration = Duration::from_secs(60);

/// The procedures of one master's term: the tasks running them (with their regions), and
/// when each finished one was first seen. Dropping it (the term ended) stops the tasks.
#[derive(Debug, Default)]
pub(crate) struct Procedures {
    running: BTreeMap<u64, (JoinHandle<()>, ProcedureKind)>,
    finished: BTreeMap<u64, Instant>,
}

impl Drop for Procedures {
    fn drop(&mut self) {
        for (task, _) in self.running.values() {
            task.abort();
        }
    }
}

impl Procedures {
    /// Forgets the tasks that ended: called before the procedures are read for
    /// [`Procedures::step`], so that a record read after its task ended shows what the task
    /// wrote (and a procedure that just finished is not started again).
    pub(crate) fn forget_ended(&mut self) {
        self.running.retain(|_, (task, _)| !task.is_finished());
    }

    /// Given the procedures as read after [`Procedures::forget_ended`]: stops the tasks
    /// whose record is gone, starts a task for each unfinished procedure none of this term
    /// runs and whose regions no running one acts on, and deletes the finished ones kept
    /// past [`PROCEDURE_KEEP`].
    pub(crate) async fn step(
        &mut self,
        coord: &EtcdCoordination,
        term: &Leadership,
        stored: Vec<StoredProcedure>,
    ) -> Result<()> {
        self.running.retain(|id, (task, _)| {
            let present = stored.iter().any(|p| p.id == *id);
            if !present {
                task.abort();
            }
            present
        });
        self.finished
            .retain(|id, _| stored.iter().any(|p| p.id == *id));
        for p in stored {
            if p.record.finished() {
                let seen = *self.finished.entry(p.id).or_insert_with(Instant::now);
                if seen.elapsed() >= PROCEDURE_KEEP {
                    procedures::forget_procedure(coord, term, p.id, p.revision).await?;
                }
                continue;
            }
            let kind = p.record.kind.clone();
            let busy = self
                .running
                .iter()
                .any(|(id, (_, theirs))| *id == p.id || theirs.conflicts(&kind));
            if busy {
                continue;
            }
            let id = p.id;
            tracing::info!(procedure = %format!("{id:016x}"), kind = kind.name(), "running a procedure");
            let (coord, term) = (coord.clone(), term.clone());
            let task = tokio::spawn(async move { run(coord, term, p).await });
            self.running.insert(id, (task, kind));
        }
        Ok(())
    }
}

/// How long a procedure that was sent may find its regions gone without the list showing
/// what replaced them before it fails: longer than a list takes to be mended
/// (`listing::LISTING_GRACE` and a check).
const REPLACED_GRACE: Duration = Duration::from_secs(30);

/// Runs procedure `p` until its outcome is written or the term ends (or the record
/// changed under it: another term's master, or its client deleted it).
async fn run(coord: EtcdCoordination, term: Leadership, mut p: StoredProcedure) {
    let id = p.id;
    let mut gone_since = None;
    // Whether a server may have acted on it: a master did mark it running.
    let mut sent = p.record.state == ProcedureState::Running;
    loop {
        let tried = if p.record.kind.whole_table() {
            tables::attempt(&coord, &term, &mut p, &mut sent).await
        } else {
            attempt(&coord, &term, &mut p, &mut gone_since).await
        };
        match tried {
            Ok(true) => {
                tracing::info!(procedure = %format!("{id:016x}"), state = ?p.record.state, "procedure finished");
                return;
            }
            Ok(false) => {}
            Err(Error::CoordinationConflict(_)) => return, // the term is over
            Err(e) => {
                tracing::debug!(procedure = %format!("{id:016x}"), error = %e, "procedure waits")
            }
        }
        tokio::time::sleep(ATTEMPT_PAUSE).await;
    }
}

/// Writes `state` into `p`'s record; `Ok(true)`.
pub(super) async fn finish(
    coord: &EtcdCoordination,
    term: &Leadership,
    p: &mut StoredProcedure,
    state: ProcedureState,
) -> Result<bool> {
    p.record.state = state;
    p.revision = procedures::update_procedure(coord, term, p.id, &p.record, p.revision).await?;
    Ok(true)
}

/// One attempt (see the module doc); `Ok(true)` once the outcome is written.
/// `gone_since` is when a procedure that was sent first found its regions gone.
async fn attempt(
    coord: &EtcdCoordination,
    term: &Leadership,
    p: &mut StoredProcedure,
    gone_since: &mut Option<Instant>,
) -> Result<bool> {
    let table = p.record.kind.table().clone();
    let listed = coord.regions(&table).await?;
    if listed.is_empty() {
        let state =
            ProcedureState::Failed(ErrorWire::from(&Error::TableNotFound(table.to_string())));
        return finish(coord, term, p, state).await;
    }
    let wanted = p.record.kind.region_keys();
    let present: Vec<&RegionRecord> = listed.iter().filter(|r| wanted.contains(&r.key)).collect();
    if present.len() < wanted.len() {
        if p.record.state == ProcedureState::Requested {
            let gone = wanted
                .iter()
                .find(|k| !present.iter().any(|r| r.key == **k))
                .map_or(0, |k| k.region);
            let state = ProcedureState::Failed(ErrorWire::from(&Error::RegionNotFound {
                table: table.to_string(),
                id: gone,
            }));
            return finish(coord, term, p, state).await;
        }
        if let Some(outcome) = outcome_from_list(&p.record.kind, &listed) {
            return finish(coord, term, p, ProcedureState::Done(outcome)).await;
        }
        let since = *gone_since.get_or_insert_with(Instant::now);
        if since.elapsed() < REPLACED_GRACE {
            return Ok(false);
        }
        let e = Error::CoordinationConflict(format!(
            "{}: the regions of {table} were replaced by another change meanwhile",
            p.record.kind.name()
        ));
        return finish(coord, term, p, ProcedureState::Failed(ErrorWire::from(&e))).await;
    }
    *gone_since = None;
    let Some(server) = serving_all(coord, &wanted).await? else {
        return Ok(false); // in transition, or a merge's regions not gathered yet
    };
    mark_running(coord, term, p).await?;
    let request = match &p.record.kind {
        ProcedureKind::Split {
            table, region, at, ..
        } => Request::SplitRegion(table.clone(), *region, at.clone().map(Bytes::from)),
        ProcedureKind::Merge {
            table,
            first,
            second,
            ..
        } => Request::MergeRegions(table.clone(), *first, *second),
        ProcedureKind::CreateTable { .. } | ProcedureKind::DeleteTable { .. } => {
            return Err(Error::bad_argument("a table's procedure has no regions"))
        }
    };
    let name = p.record.kind.name();
    let client = RpcClient::new(&server.info.rpc_address)?;
    let state = match client.call(request, CALL_DEADLINE).await {
        Ok(Reply::Split(daughters)) => ProcedureState::Done(Outcome::Split(daughters)),
        Ok(Reply::Region(merged)) => ProcedureState::Done(Outcome::Merged(merged)),
        Ok(other) => ProcedureState::Failed(ErrorWire::from(&unexpected(name, &other))),
        Err(e) if worth_another_attempt(&e) => {
            tracing::debug!(procedure = %format!("{:016x}", p.id), error = %e, "procedure sent again soon");
            return Ok(false);
        }
        Err(e) => ProcedureState::Failed(ErrorWire::from(&e)),
    };
    finish(coord, term, p, state).await
}

/// Marks `p` running (if it was only requested) before anything is sent for it, and
/// fails with [`Error::CoordinationConflict`] when the master's term is over: a deposed
/// master sends nothing.
pub(super) async fn mark_running(
    coord: &EtcdCoordination,
    term: &Leadership,
    p: &mut StoredProcedure,
) -> Result<()> {
    if p.record.state == ProcedureState::Requested {
        p.record.state = ProcedureState::Running;
        p.revision = procedures::update_procedure(coord, term, p.id, &p.record, p.revision).await?;
    }
    if !coord.is_leader(term).await? {
        return Err(Error::CoordinationConflict(
            "the master's term is over".into(),
        ));
    }
    Ok(())
}

/// The live server assigned every region of `regions` that also owns each, if one is.
pub(super) async fn serving_all(
    coord: &EtcdCoordination,
    regions: &[RegionKey],
) -> Result<Option<LiveServer>> {
    let assigned = coord.assignments().await?;
    let owners = coord.live_owners().await?;
    let live = coord.live_servers().await?;
    let mut serving: Option<&LiveServer> = None;
    for key in regions {
        let server = live
            .iter()
            .find(|s| assigned.get(key) == Some(&s.process) && owners.get(key) == Some(&s.lease));
        match (server, serving) {
            (None, _) => return Ok(None),
            (Some(s), Some(prev)) if s.process != prev.process => return Ok(None),
            (Some(s), _) => serving = Some(s),
        }
    }
    Ok(serving.cloned())
}

/// Whether a failed call is tried again rather than taken for the outcome: the region
/// moved or is not served yet, the server is unreachable or busy, or the call's deadline
/// passed (the next attempt finds the regions gone if it was done).
pub(super) fn worth_another_attempt(e: &Error) -> bool {
    match e {
        Error::RegionNotServed { .. }
        | Error::RegionNotFound { .. }
        | Error::TableNotFound(_)
        | Error::Closed
        | Error::Busy(_)
        | Error::Fenced { .. }
        | Error::LeaseExpired { .. }
        | Error::RegionOwned { .. }
        | Error::CoordinationConflict(_) => true,
        Error::Io(io) => matches!(
            io.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::NotConnected
                | ErrorKind::NotFound
                | ErrorKind::TimedOut
                | ErrorKind::ConnectionAborted
                | ErrorKind::ConnectionReset
                | ErrorKind::BrokenPipe
        ),
        _ => false,
    }
}

mod tables;
#[cfg(test)]
mod tests;
