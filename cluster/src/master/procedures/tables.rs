//! The master's side of a table's create and delete as procedures (HBase 2's
//! `CreateTableProcedure` and `DeleteTableProcedure`).
//!
//! - A create is sent to any live server (the catalog is in the shared store; the server
//!   lists the new regions in etcd and the master assigns them). A create that a server
//!   may have run (a master marked it running) and finds its table existing is done: that
//!   server made it. One never sent that finds its table existing fails with
//!   `TableExists`.
//! - A delete holds its table (`master` gathers the table's regions on one server, as for
//!   a schema change) and is sent to the server serving them all. One that a server may
//!   have run and finds its table gone is done; one never sent fails with
//!   `TableNotFound`.
//!
//! Invariants: as for splits and merges (the parent module): the record is marked running
//! before anything is sent, every change is fenced by the term and the record's revision,
//! and a deposed master sends nothing.

use super::{finish, mark_running, serving_all, worth_another_attempt, CALL_DEADLINE};
use crate::election::Leadership;
use crate::procedures::{Outcome, ProcedureKind, ProcedureState, StoredProcedure};
use crate::rpc::client::{unexpected, RpcClient};
use crate::rpc::messages::{Reply, Request};
use crate::EtcdCoordination;
use basalt_core::coord::{Coordination, RegionKey};
use basalt_core::{Error, ErrorWire, Result};

/// One attempt of a create or delete; `Ok(true)` once the outcome is written. `sent`
/// says whether a server may have acted on the procedure (this attempt sets it).
pub(super) async fn attempt(
    coord: &EtcdCoordination,
    term: &Leadership,
    p: &mut StoredProcedure,
    sent: &mut bool,
) -> Result<bool> {
    let (request, gathered) = match &p.record.kind {
        ProcedureKind::CreateTable { desc, split } => {
            (Request::CreateTable(desc.clone(), split.clone()), None)
        }
        ProcedureKind::DeleteTable { table } => {
            let listed = coord.regions(table).await?;
            let keys: Vec<RegionKey> = listed.into_iter().map(|r| r.key).collect();
            (Request::DeleteTable(table.clone()), Some(keys))
        }
        ProcedureKind::Split { .. } | ProcedureKind::Merge { .. } => {
            return Err(Error::bad_argument("a region's procedure is not a table's"))
        }
    };
    let server = match &gathered {
        // A table etcd lists no region of: any server answers for the catalog.
        Some(keys) if !keys.is_empty() => match serving_all(coord, keys).await? {
            Some(server) => server,
            None => return Ok(false), // being gathered on one server
        },
        _ => match coord.live_servers().await?.into_iter().next() {
            Some(server) => server,
            None => return Ok(false),
        },
    };
    mark_running(coord, term, p).await?;
    let name = p.record.kind.name();
    let client = RpcClient::new(&server.info.rpc_address)?;
    let was_sent = *sent;
    *sent = true;
    let state = match client.call(request, CALL_DEADLINE).await {
        Ok(Reply::Done) => ProcedureState::Done(Outcome::Table),
        Ok(other) => ProcedureState::Failed(ErrorWire::from(&unexpected(name, &other))),
        // An earlier sending did it (its reply lost with a master or a deadline).
        Err(Error::TableExists(_)) if was_sent && gathered.is_none() => {
            ProcedureState::Done(Outcome::Table)
        }
        Err(Error::TableNotFound(_)) if was_sent && gathered.is_some() => {
            ProcedureState::Done(Outcome::Table)
        }
        Err(e @ (Error::TableExists(_) | Error::TableNotFound(_))) => {
            ProcedureState::Failed(ErrorWire::from(&e))
        }
        Err(e) if worth_another_attempt(&e) => {
            tracing::debug!(procedure = %format!("{:016x}", p.id), error = %e, "procedure sent again soon");
            return Ok(false);
        }
        Err(e) => ProcedureState::Failed(ErrorWire::from(&e)),
    };
    finish(coord, term, p, state).await
}
