//! Region assignment in etcd: the master's record of which server each region is to be
//! served by (`P/assign/<table>/<region>`), and the cluster-wide views the master and the
//! servers decide on (every region of the catalog, every live owner).
//!
//! The assignment is the persisted state of HBase's assignment procedures (AMv2): the
//! master writes where a region is to go, the servers converge to it (a server closes a
//! region assigned elsewhere and opens one assigned to it), and a new master reads it and
//! goes on from there. A region "in transition" is one whose live owner is not its
//! assigned server.
//!
//! Invariants: only a master writes assignments, each write in a transaction that compares
//! the master key's creation revision with its term (a deposed master's write fails, see
//! `election`); an assignment names a process, never an address (servers re-register at
//! new addresses).

use crate::coordination::{delete, put, read_at};
use crate::election::Leadership;
use crate::keys::decode_record;
use crate::proto::TxnRequest;
use crate::EtcdCoordination;
use basalt_core::coord::{RegionKey, RegionRecord};
use basalt_core::{Error, Result};
use std::collections::BTreeMap;

/// Where each region is assigned, by region.
pub type Assignments = BTreeMap<RegionKey, String>;

impl EtcdCoordination {
    /// Assigns `region` to server `process`, as master of `term`. Fails with
    /// [`Error::CoordinationConflict`] when `term` is over.
    pub async fn assign(&self, term: &Leadership, region: &RegionKey, process: &str) -> Result<()> {
        if process.is_empty() || process.contains(char::is_whitespace) {
            return Err(Error::bad_argument(format!(
                "a server name has no spaces and is not empty: {process:?}"
            )));
        }
        let op = self.assignment_op(term, region, process);
        self.as_master(term, "assign", vec![op]).await
    }

    /// The write of `region`'s assignment to `process` in `term`.
    pub(crate) fn assignment_op(
        &self,
        term: &Leadership,
        region: &RegionKey,
        process: &str,
    ) -> crate::proto::RequestOp {
        let value = format!("{} {process}", term.revision).into_bytes();
        put(self.keys.assignment(region), value, 0)
    }

    /// Forgets the assignment of `region` (its table was dropped, a split or merge
    /// replaced it), as master of `term`.
    pub async fn unassign(&self, term: &Leadership, region: &RegionKey) -> Result<()> {
        self.as_master(term, "unassign", vec![delete(self.keys.assignment(region))])
            .await
    }

    /// Runs `ops` if `term` is still the master's.
    pub(crate) async fn as_master(
        &self,
        term: &Leadership,
        what: &str,
        ops: Vec<crate::proto::RequestOp>,
    ) -> Result<()> {
        let req = TxnRequest {
            compare: vec![self.fence(term)],
            success: ops,
            failure: Vec::new(),
        };
        if self.txn(what, req, 0).await?.succeeded {
            Ok(())
        } else {
            Err(Error::CoordinationConflict(format!(
                "{what}: the master's term {} is over",
                term.revision
            )))
        }
    }

    /// Every assignment.
    pub async fn assignments(&self) -> Result<Assignments> {
        let mut out = BTreeMap::new();
        for kv in self.read_prefix(self.keys.kind_prefix("assign")).await? {
            let region = self.keys.region_key_of("assign", &kv.key)?;
            let text = std::str::from_utf8(&kv.value)
                .map_err(|_| crate::keys::corrupt(&kv.key, "an assignment is text"))?;
            let process = text
                .split_once(' ')
                .map(|(_, p)| p)
                .filter(|p| !p.is_empty())
                .ok_or_else(|| {
                    crate::keys::corrupt(&kv.key, "an assignment is <term> <process>")
                })?;
            out.insert(region, process.to_string());
        }
        Ok(out)
    }

    /// Every region of every table the catalog in etcd lists.
    pub async fn all_regions(&self) -> Result<Vec<RegionRecord>> {
        let mut out = Vec::new();
        for kv in self.read_prefix(self.keys.kind_prefix("catalog")).await? {
            let (start, end) = decode_record(&kv.key, &kv.value)?;
            out.push(RegionRecord {
                key: self.keys.region_key_of("catalog", &kv.key)?,
                start,
                end,
                revision: crate::coordination::to_u64(kv.mod_revision),
            });
        }
        Ok(out)
    }

    /// The lease of each region's live owner (regions whose owner's lease ended are not
    /// listed).
    pub async fn live_owners(&self) -> Result<BTreeMap<RegionKey, u64>> {
        let mut out = BTreeMap::new();
        for kv in self.read_prefix(self.keys.kind_prefix("owners")).await? {
            let region = self.keys.region_key_of("owners", &kv.key)?;
            out.insert(region, crate::coordination::to_u64(kv.lease));
        }
        Ok(out)
    }

    /// The assignment of `region`, if it has one.
    pub async fn assignment(&self, region: &RegionKey) -> Result<Option<String>> {
        let resp = self
            .read("assignment", vec![self.keys.assignment(region)])
            .await?;
        Ok(read_at(&resp, 0).and_then(|kv| {
            std::str::from_utf8(&kv.value)
                .ok()
                .and_then(|t| t.split_once(' '))
                .map(|(_, p)| p.to_string())
        }))
    }
}

/// The operators' requests (`admin`), read and retired by the master.
impl EtcdCoordination {
    /// Whether the balancer is on (`P/balancer` absent or `on`).
    pub(crate) async fn balancer_on(&self) -> Result<bool> {
        let resp = self.read("balancer", vec![self.keys.balancer()]).await?;
        Ok(read_at(&resp, 0).is_none_or(|kv| kv.value != b"off"))
    }

    /// Whether a balancing pass was requested (`P/balance`).
    pub(crate) async fn balance_requested(&self) -> Result<bool> {
        let resp = self
            .read("balance", vec![self.keys.balance_request()])
            .await?;
        Ok(read_at(&resp, 0).is_some())
    }

    /// The move requests not acted on yet: each region with its target (`None`: any
    /// other server).
    pub(crate) async fn move_requests(&self) -> Result<Vec<(RegionKey, Option<String>)>> {
        let mut out = Vec::new();
        for kv in self.read_prefix(self.keys.kind_prefix("moves")).await? {
            let region = self.keys.region_key_of("moves", &kv.key)?;
            let target = String::from_utf8(kv.value)
                .map_err(|_| crate::keys::corrupt(&kv.key, "a move's target is text"))?;
            out.push((region, Some(target).filter(|t| !t.is_empty())));
        }
        Ok(out)
    }

    /// The ops that delete a move request and the balance request (the master's, in its
    /// fenced transaction).
    pub(crate) fn request_done(&self, region: Option<&RegionKey>) -> crate::proto::RequestOp {
        match region {
            Some(r) => delete(self.keys.move_request(r)),
            None => delete(self.keys.balance_request()),
        }
    }
}
