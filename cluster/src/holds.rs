//! Placement preferences and schema holds in etcd: what the master reads, besides the
//! catalog and the live servers, to decide where regions go (`placement`).
//!
//! - `P/placement/<table>`: an operator's [`Placement`] for a table (`ClusterAdmin`).
//! - `P/holds/<lease>/<table>`: a client's hold on a table while it changes the table's
//!   schema (or snapshots it): the master gathers a held table's group on one server, and
//!   the tables held under one lease on one server. `P/holds/<lease>/<table>/<region>`: a
//!   hold on one region (a merge holds its two): the regions held under one lease are
//!   gathered on one server, the rest of their table stays where it is. The keys live
//!   under the client's own lease ([`HOLD_TTL`], renewed every third of it), so a client
//!   that dies releases its holds within the TTL.
//!
//! Invariants: a hold only affects where regions go, never whether a change is correct:
//! the engine refuses a schema change unless it serves every region of the table
//! (`RegionNotServed`), and its catalog compare-and-swap refuses one made with a region
//! lost meanwhile; a hold's keys are written in one transaction and deleted with its lease.

use crate::coordination::{delete, put, to_i64, to_u64};
use crate::placement::{HoldTarget, Placement};
use crate::proto::TxnRequest;
use crate::EtcdCoordination;
use basalt_core::{Error, Result, TableName};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a hold outlives the client that took it.
pub const HOLD_TTL: Duration = Duration::from_secs(10);

/// Everything a schema change holds, with the lease holding it. A key of another shape is
/// skipped with a warning (it steers placement only; the master's other duties go on).
pub(crate) async fn holds(coord: &EtcdCoordination) -> Result<Vec<(HoldTarget, u64)>> {
    let mut out = Vec::new();
    for kv in coord.read_prefix(coord.keys.kind_prefix("holds")).await? {
        match coord.keys.hold_of(&kv.key) {
            Ok((lease, table, region)) => out.push((HoldTarget { table, region }, lease)),
            Err(e) => tracing::warn!(error = %e, "skipped a malformed hold"),
        }
    }
    Ok(out)
}

/// Every table's placement other than the default ([`Placement::Spread`]); a key or
/// value of another shape is skipped with a warning.
pub(crate) async fn placements(coord: &EtcdCoordination) -> Result<BTreeMap<TableName, Placement>> {
    let mut out = BTreeMap::new();
    for kv in coord
        .read_prefix(coord.keys.kind_prefix("placement"))
        .await?
    {
        let table = coord.keys.placement_table(&kv.key);
        let placement = std::str::from_utf8(&kv.value)
            .ok()
            .and_then(Placement::parse)
            .ok_or_else(|| crate::keys::corrupt(&kv.key, "grouped or spread"));
        match (table, placement) {
            (Ok(t), Ok(p)) => {
                out.insert(t, p);
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "skipped a malformed placement")
            }
        }
    }
    Ok(out)
}

/// Records `table`'s placement (the default one by deleting the key).
pub(crate) async fn write_placement(
    coord: &EtcdCoordination,
    table: &TableName,
    placement: Placement,
) -> Result<()> {
    let key = coord.keys.placement(table);
    let op = match placement {
        Placement::Spread => delete(key),
        Placement::Grouped => put(key, placement.as_str().as_bytes().to_vec(), 0),
    };
    let req = TxnRequest {
        compare: Vec::new(),
        success: vec![op],
        failure: Vec::new(),
    };
    coord.txn("placement", req, 0).await.map(|_| ())
}

/// Holds `tables` for `operation` under a new lease of this client, renewed until the
/// hold is released or dropped.
pub(crate) async fn hold_tables(
    coord: &EtcdCoordination,
    tables: &[HoldTarget],
    operation: &str,
) -> Result<SchemaHold> {
    let granted = coord
        .client
        .lease_grant(to_i64(HOLD_TTL.as_secs()).unwrap_or(10))
        .await?;
    let lease = to_u64(granted.id);
    let value = format!("{operation} pid-{}", std::process::id()).into_bytes();
    let keys: Vec<Vec<u8>> = tables
        .iter()
        .map(|t| coord.keys.hold(lease, &t.table, t.region))
        .collect();
    let req = TxnRequest {
        compare: Vec::new(),
        success: keys
            .iter()
            .map(|k| put(k.clone(), value.clone(), granted.id))
            .collect(),
        failure: Vec::new(),
    };
    let lost = Arc::new(AtomicBool::new(false));
    let hold = SchemaHold {
        coord: coord.clone(),
        lease,
        renewal: {
            let (coord, lost) = (coord.clone(), Arc::clone(&lost));
            tokio::spawn(async move {
                // A failed renewal is tried again until the lease may have ended.
                let mut renewed = std::time::Instant::now();
                loop {
                    tokio::time::sleep(HOLD_TTL / 10).await;
                    if renewed.elapsed() < HOLD_TTL / 3 {
                        continue;
                    }
                    match basalt_core::coord::Coordination::keep_alive(&coord, lease).await {
                        Ok(()) => renewed = std::time::Instant::now(),
                        Err(_) if renewed.elapsed() < HOLD_TTL => {}
                        Err(_) => {
                            lost.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            })
        },
        lost,
        released: false,
    };
    coord.txn("hold", req, lease).await?;
    Ok(hold)
}

/// A schema change's hold on its tables (see the module doc): released by
/// [`SchemaHold::release`], or when dropped (its lease revoked in the background).
#[derive(Debug)]
pub(crate) struct SchemaHold {
    coord: EtcdCoordination,
    lease: u64,
    renewal: tokio::task::JoinHandle<()>,
    lost: Arc<AtomicBool>,
    released: bool,
}

impl SchemaHold {
    /// The lease the hold's keys live under.
    pub(crate) fn lease(&self) -> u64 {
        self.lease
    }

    /// Fails with [`Error::LeaseExpired`] once the hold's lease could not be renewed (the
    /// master may spread the tables again).
    pub(crate) fn check(&self) -> Result<()> {
        if self.lost.load(Ordering::SeqCst) {
            Err(Error::LeaseExpired { lease: self.lease })
        } else {
            Ok(())
        }
    }

    /// Releases the hold now: its lease is revoked, which deletes its keys.
    pub(crate) async fn release(mut self) -> Result<()> {
        self.released = true;
        self.renewal.abort();
        basalt_core::coord::Coordination::revoke_lease(&self.coord, self.lease).await
    }
}

impl Drop for SchemaHold {
    fn drop(&mut self) {
        self.renewal.abort();
        if self.released {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (coord, lease) = (self.coord.clone(), self.lease);
            runtime.spawn(async move {
                let _ = basalt_core::coord::Coordination::revoke_lease(&coord, lease).await;
            });
        }
    }
}
