//! Cluster administration as HBase's shell knows it: the cluster's status (the master,
//! the live servers and what each serves, the regions in transition), where each region
//! is, and the requests the master acts on: `move` a region (with its table group when
//! the group is placed whole), switch the balancer, run one balancing pass; and how a
//! table is placed ([`Placement`]).
//!
//! Only the master writes assignments, so a client does not move a region itself: it
//! writes a request (`P/moves/<table>/<region>`, `P/balance`) or the switch
//! (`P/balancer`), and the master's next reconciliation acts on it and deletes the
//! request (`master`). [`ClusterAdmin::wait_settled`] waits until the master has done so
//! and every region is served where it is assigned.
//!
//! Invariants: a request is validated before it is written (the region exists, the target
//! is a live server other than the current one), so the master drops only requests that
//! went stale meanwhile; reading the status changes nothing.

use crate::assignment::Assignments;
use crate::coordination::put;
use crate::election::LiveServer;
use crate::placement::Placement;
use crate::proto::TxnRequest;
use crate::{EtcdConfig, EtcdCoordination};
use basalt_core::coord::RegionKey;
use basalt_core::{Error, Result, TableName};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One region server as the status lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its process name.
    pub name: String,
    /// Where its RPC service listens.
    pub rpc_address: String,
    /// The port of its status page (0: none).
    pub info_port: u16,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// Regions the master assigned to it.
    pub assigned: usize,
    /// Regions it serves now (it owns them in etcd).
    pub serving: usize,
}

/// The cluster's state, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// The master's process name, if one is elected.
    pub master: Option<String>,
    /// The live region servers, by name.
    pub servers: Vec<ServerStatus>,
    /// Regions the catalog lists.
    pub regions: usize,
    /// Regions not served where they are assigned (moving, or waiting for a server).
    pub in_transition: Vec<RegionKey>,
    /// Whether the balancer is on.
    pub balancer_on: bool,
    /// Move requests the master has not acted on yet.
    pub pending_moves: usize,
    /// Tables a client's schema change holds now, whole or (a merge) two of their
    /// regions, gathered on one server until it releases them or its lease ends; each
    /// table once.
    pub held: Vec<TableName>,
}

/// Where one region is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionPlacement {
    /// The region.
    pub key: RegionKey,
    /// Its first row (empty: the table's start).
    pub start: Bytes,
    /// Its end row, exclusive (empty: the table's end).
    pub end: Bytes,
    /// The server the master assigned it to.
    pub assigned: Option<String>,
    /// The live server serving it now.
    pub serving: Option<String>,
}

/// A split or merge procedure in etcd (`procedures`), as the master's page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcedureStatus {
    /// Its id.
    pub id: u64,
    /// `split_region`, `merge_regions`, `create_table` or `delete_table`.
    pub kind: &'static str,
    /// The table it acts on.
    pub table: TableName,
    /// The regions it acts on.
    pub regions: Vec<u64>,
    /// `requested`, `running`, `done` or `failed`.
    pub state: &'static str,
}

/// Administration of a cluster through its etcd (see the module doc).
#[derive(Debug, Clone)]
pub struct ClusterAdmin {
    coord: EtcdCoordination,
}

impl ClusterAdmin {
    /// Connects to the cluster whose etcd `etcd` names.
    pub async fn connect(etcd: EtcdConfig) -> Result<Self> {
        Ok(ClusterAdmin {
            coord: EtcdCoordination::connect(etcd).await?,
        })
    }

    /// Administration through an existing connection to etcd.
    pub fn new(coord: EtcdCoordination) -> Self {
        ClusterAdmin { coord }
    }

    /// The cluster's state now.
    pub async fn status(&self) -> Result<ClusterStatus> {
        // The requests first: the master deletes a request in the transaction that writes
        // its assignments, so none read later predates it.
        let pending_moves = self.coord.move_requests().await?.len();
        let live = self.coord.live_servers().await?;
        let assigned = self.coord.assignments().await?;
        let serving = self.serving(&live).await?;
        let regions = self.coord.all_regions().await?;
        let servers = live
            .iter()
            .map(|s| ServerStatus {
                name: s.process.clone(),
                rpc_address: s.info.rpc_address.clone(),
                info_port: s.info.info_port,
                started_ms: s.info.started_ms,
                assigned: assigned.values().filter(|p| **p == s.process).count(),
                serving: serving.values().filter(|p| **p == s.process).count(),
            })
            .collect();
        let in_transition = regions
            .iter()
            .map(|r| &r.key)
            .filter(|k| !assigned.contains_key(*k) || assigned.get(*k) != serving.get(*k))
            .cloned()
            .collect();
        Ok(ClusterStatus {
            // The master campaigns under a lease named `<process>.master`.
            master: self.coord.leader().await?.map(|t| {
                t.process
                    .strip_suffix(".master")
                    .map_or(t.process.clone(), str::to_string)
            }),
            servers,
            regions: regions.len(),
            in_transition,
            balancer_on: self.coord.balancer_on().await?,
            pending_moves,
            held: crate::holds::holds(&self.coord)
                .await?
                .into_iter()
                .map(|(t, _)| t.table)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
        })
    }

    /// The move requests the master has not acted on yet: each region with the server
    /// asked for (`None`: any other).
    pub async fn pending_moves(&self) -> Result<Vec<(RegionKey, Option<String>)>> {
        self.coord.move_requests().await
    }

    /// Every region of `table` (of every table when `None`) with where it is assigned and
    /// served, in table and key order.
    pub async fn regions(&self, table: Option<&TableName>) -> Result<Vec<RegionPlacement>> {
        let live = self.coord.live_servers().await?;
        let assigned = self.coord.assignments().await?;
        let serving = self.serving(&live).await?;
        let mut out: Vec<RegionPlacement> = self
            .coord
            .all_regions()
            .await?
            .into_iter()
            .filter(|r| table.is_none_or(|t| r.key.table == *t))
            .map(|r| RegionPlacement {
                assigned: assigned.get(&r.key).cloned(),
                serving: serving.get(&r.key).cloned(),
                key: r.key,
                start: r.start,
                end: r.end,
            })
            .collect();
        if let (Some(t), true) = (table, out.is_empty()) {
            return Err(Error::TableNotFound(t.to_string()));
        }
        out.sort_by(|a, b| {
            (a.key.table.to_string(), &a.start).cmp(&(b.key.table.to_string(), &b.start))
        });
        Ok(out)
    }

    /// Asks the master to move region `region` of `table` (with the rest of its table
    /// group when the group is placed whole, see [`Placement`]) to server `to` (any other live server when `None`): a graceful move, closed
    /// with a flush and opened without replay. Fails when the region does not exist, `to`
    /// is not a live server, or `to` already serves the group.
    pub async fn move_region(
        &self,
        table: &TableName,
        region: u64,
        to: Option<&str>,
    ) -> Result<()> {
        let key = RegionKey::new(table.clone(), region);
        if !self.coord.all_regions().await?.iter().any(|r| r.key == key) {
            return Err(Error::bad_argument(format!(
                "no region {key} in the catalog"
            )));
        }
        let live = self.coord.live_servers().await?;
        if let Some(target) = to {
            if !live.iter().any(|s| s.process == target) {
                return Err(Error::bad_argument(format!(
                    "{target} is not a live region server (status lists them)"
                )));
            }
            if self.coord.assignment(&key).await?.as_deref() == Some(target) {
                return Err(Error::bad_argument(format!(
                    "region {key} is already assigned to {target}"
                )));
            }
        } else if live.len() < 2 {
            return Err(Error::bad_argument(
                "a move needs another live region server",
            ));
        }
        let value = to.unwrap_or_default().as_bytes().to_vec();
        self.write(
            "move",
            vec![put(self.coord.keys.move_request(&key), value, 0)],
        )
        .await
    }

    /// The split and merge procedures in etcd: those the master runs, and finished ones
    /// their clients have not deleted yet.
    pub async fn procedures(&self) -> Result<Vec<ProcedureStatus>> {
        use crate::procedures::ProcedureState as S;
        Ok(crate::procedures::procedures(&self.coord)
            .await?
            .into_iter()
            .map(|p| ProcedureStatus {
                id: p.id,
                kind: p.record.kind.name(),
                table: p.record.kind.table().clone(),
                regions: p.record.kind.regions(),
                state: match p.record.state {
                    S::Requested => "requested",
                    S::Running => "running",
                    S::Done(_) => "done",
                    S::Failed(_) => "failed",
                },
            })
            .collect())
    }

    /// Sets how `table`'s regions are placed over the servers: [`Placement::Grouped`] keeps
    /// every region of its table group on one server (a batch over any of its rows is then
    /// atomic), [`Placement::Spread`] (the default) places each region alone. A table with
    /// global indexes is always grouped. The table need not exist yet: set it before
    /// creating a table whose batches span regions.
    pub async fn set_placement(&self, table: &TableName, placement: Placement) -> Result<()> {
        crate::holds::write_placement(&self.coord, table, placement).await
    }

    /// The placement of `table` as set ([`Placement::Spread`] unless set otherwise).
    pub async fn placement(&self, table: &TableName) -> Result<Placement> {
        let placements = crate::holds::placements(&self.coord).await?;
        Ok(placements.get(table).copied().unwrap_or_default())
    }

    /// Turns the balancer on or off; returns whether it was on. Off, the master still
    /// gathers a table group spread over servers and moves the regions of dead servers;
    /// it only stops spreading groups over servers.
    pub async fn balancer(&self, on: bool) -> Result<bool> {
        let was = self.coord.balancer_on().await?;
        let value = if on { b"on".to_vec() } else { b"off".to_vec() };
        self.write("balancer", vec![put(self.coord.keys.balancer(), value, 0)])
            .await?;
        Ok(was)
    }

    /// Asks the master for one balancing pass, whether the balancer is on or not.
    pub async fn balance(&self) -> Result<()> {
        let key = self.coord.keys.balance_request();
        self.write("balance", vec![put(key, b"1".to_vec(), 0)])
            .await
    }

    /// Waits until the master has acted on every request and every region is served
    /// where it is assigned; fails with [`Error::Busy`] past `timeout`.
    pub async fn wait_settled(&self, timeout: Duration) -> Result<ClusterStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            // The request before the status it is checked against (see `status`).
            let balance_pending = self.coord.balance_requested().await?;
            let status = self.status().await?;
            if status.in_transition.is_empty() && status.pending_moves == 0 && !balance_pending {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(Error::Busy(format!(
                    "the cluster did not settle within {} ms: {} regions in transition, {} \
                     move requests pending",
                    timeout.as_millis(),
                    status.in_transition.len(),
                    status.pending_moves
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Each region's serving server, by its live owner's lease.
    async fn serving(&self, live: &[LiveServer]) -> Result<Assignments> {
        let by_lease: BTreeMap<u64, &str> =
            live.iter().map(|s| (s.lease, s.process.as_str())).collect();
        Ok(self
            .coord
            .live_owners()
            .await?
            .into_iter()
            .filter_map(|(k, lease)| by_lease.get(&lease).map(|p| (k, p.to_string())))
            .collect())
    }

    async fn write(&self, what: &str, ops: Vec<crate::proto::RequestOp>) -> Result<()> {
        let req = TxnRequest {
            compare: Vec::new(),
            success: ops,
            failure: Vec::new(),
        };
        self.coord.txn(what, req, 0).await.map(|_| ())
    }
}
