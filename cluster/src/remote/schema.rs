//! Schema changes through a cluster: "gather, change, release". A schema change (a table
//! created or dropped, enabled or disabled, a family or coprocessor changed), a snapshot
//! and a restore need every region of their tables on one engine, and a merge its two
//! regions, while a spread table's regions live on several servers. So the client holds
//! the tables or regions (`holds`: the master then gathers them on one server), waits
//! until one live server is assigned and owns every region held, sends the change there,
//! and releases the hold (the balancer spreads the tables again).
//!
//! Invariants: the change is sent only to a server that owned every region when the
//! client looked, and the engine checks again (a region lost meanwhile refuses the change
//! with `RegionNotServed` before anything changed, and the client waits and sends it
//! again); a change that may have reached its server (a timeout, a broken connection) is
//! never sent twice; a table the change needs but the client did not hold (a snapshot's
//! companion tables) is added to the hold when the engine names it; the hold ends with the
//! call, whatever its outcome, or with the client's lease.

use super::route::{retryable, Router};
use super::RetryPolicy;
use crate::holds::{hold_tables, SchemaHold};
use crate::placement::HoldTarget;
use crate::rpc::client::RpcClient;
use crate::rpc::messages::{Reply, Request};
use basalt_core::coord::RegionKey;
use basalt_core::{Error, Result, TableName};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The first pause while waiting for a gather; it doubles up to [`MAX_GATHER_PAUSE`].
const GATHER_PAUSE: Duration = Duration::from_millis(20);
/// The longest pause while waiting for a gather.
const MAX_GATHER_PAUSE: Duration = Duration::from_millis(250);

/// Sends `request`, a change of the tables or regions `targets`, as the module doc says.
pub(crate) async fn call(
    router: &Router,
    policy: RetryPolicy,
    targets: Vec<HoldTarget>,
    request: Request,
) -> Result<Reply> {
    let mut held: BTreeSet<HoldTarget> = targets.into_iter().collect();
    let mut hold = hold_tables(&router.coord, &list(&held), request.name()).await?;
    let deadline = Instant::now() + policy.operation_timeout;
    let mut pause = GATHER_PAUSE;
    let outcome = loop {
        if let Err(e) = hold.check() {
            break Err(e);
        }
        let tried = match gathered_server(router, &held).await {
            Ok(Some(server)) => server.call(request.clone(), policy.operation_timeout).await,
            Ok(None) => Err(Error::Busy(format!(
                "waiting for the regions of {} to gather on one server",
                names(&held)
            ))),
            Err(e) => Err(e),
        };
        match tried {
            Ok(reply) => break Ok(reply),
            Err(Error::RegionNotServed { table, region }) => {
                // A table the change needs beyond the ones held: hold it too. (A region
                // of a table held in part moved meanwhile: wait for the gather.)
                let more = TableName::parse(&table)
                    .ok()
                    .filter(|t| !held.iter().any(|h| h.table == *t))
                    .map(HoldTarget::table);
                if let Some(t) = more {
                    held.insert(t);
                    let wider = hold_tables(&router.coord, &list(&held), request.name()).await;
                    match wider {
                        Ok(h) => {
                            let narrow = std::mem::replace(&mut hold, h);
                            let _ = narrow.release().await;
                        }
                        Err(e) => break Err(e),
                    }
                    continue;
                }
                if Instant::now() + pause >= deadline {
                    break Err(Error::RegionNotServed { table, region });
                }
            }
            Err(e) if retryable(&e, false) => {
                if Instant::now() + pause >= deadline {
                    break Err(e);
                }
            }
            Err(e) => break Err(e),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_GATHER_PAUSE);
    };
    release(hold).await;
    outcome
}

/// Releases `hold`; a failure only delays the spreading until its lease ends.
async fn release(hold: SchemaHold) {
    let lease = hold.lease();
    if let Err(e) = hold.release().await {
        tracing::warn!(lease, error = %e, "a schema hold was not released; it ends with its lease");
    }
}

/// The one live server assigned and owning every region `targets` hold, if there is one
/// now (any live server when they hold no region: the engine answers for tables and
/// regions that do not exist).
async fn gathered_server(
    router: &Router,
    targets: &BTreeSet<HoldTarget>,
) -> Result<Option<RpcClient>> {
    let coord = &router.coord;
    let regions: Vec<RegionKey> = coord
        .all_regions()
        .await?
        .into_iter()
        .map(|r| r.key)
        .filter(|k| targets.iter().any(|t| t.covers(&k.table, k.region)))
        .collect();
    if regions.is_empty() {
        return router.any().await.map(Some);
    }
    let live = coord.live_servers().await?;
    let by_lease: BTreeMap<u64, _> = live.iter().map(|s| (s.lease, s)).collect();
    let assigned = coord.assignments().await?;
    let owners = coord.live_owners().await?;
    let mut server = None;
    for k in &regions {
        let Some(owner) = owners.get(k).and_then(|l| by_lease.get(l)) else {
            return Ok(None);
        };
        if assigned.get(k) != Some(&owner.process) {
            return Ok(None);
        }
        match server {
            None => server = Some(*owner),
            Some(s) if s.process != owner.process => return Ok(None),
            Some(_) => {}
        }
    }
    server
        .map(|s| router.client(&s.info.rpc_address))
        .transpose()
}

fn list(targets: &BTreeSet<HoldTarget>) -> Vec<HoldTarget> {
    targets.iter().cloned().collect()
}

fn names(targets: &BTreeSet<HoldTarget>) -> String {
    let names: Vec<String> = targets
        .iter()
        .map(|t| match t.region {
            None => t.table.to_string(),
            Some(r) => format!("{} region {r}", t.table),
        })
        .collect();
    names.join(", ")
}
