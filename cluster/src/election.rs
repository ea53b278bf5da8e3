//! Region servers' registration and the master's election, on the etcd of an
//! [`EtcdCoordination`] (both are methods of it, under its prefix `P`; the keys are in
//! `keys`).
//!
//! - **Registration** ([`EtcdCoordination::register_server`]): a region server writes
//!   `P/servers/<process>` under its lease: its RPC address, status port, node generation
//!   and start time ([`ServerInfo`]). etcd deletes the key with the lease, so
//!   [`EtcdCoordination::live_servers`] lists exactly the servers whose lease lives. etcd
//!   refuses a put under a lease that ended, so a server whose lease expired registers again
//!   only with a new lease, as a new node generation (HBase's new start code); a
//!   registration never replaces one of a newer node generation.
//! - **Election** ([`EtcdCoordination::campaign`]): etcd's election recipe on one key. A
//!   candidate creates `P/master` under its lease only if the key is absent (a transaction
//!   comparing its creation revision with 0, and the candidate's lease key with its own),
//!   otherwise it polls until the key is gone and tries again. The key's creation revision
//!   names the term ([`Leadership::revision`]). [`EtcdCoordination::resign`] deletes the
//!   key only if it still holds that term; a master whose lease ends loses the key with it
//!   (etcd deletes it), and [`EtcdCoordination::is_leader`] tells it so.
//!
//! **Leadership is a liveness signal, not a guarantee.** A master paused past its lease (a
//! long pause, SIGSTOP, a cut link) still believes it leads while another is elected, and
//! `is_leader` answered true a moment ago proves nothing now (Jepsen found the same of
//! etcd's own locks). So a master never writes assignment state (catalog, procedures,
//! region assignments) on the strength of `is_leader`: each of its writes is one etcd
//! transaction that carries the term's fence, `EtcdCoordination::fence` (a compare that
//! `P/master`'s creation revision is still the term's). A deposed master's write then
//! changes nothing, however late it arrives.
//!
//! Invariants: at most one `P/master` key exists, bound to the lease of the candidate that
//! created it, which was alive and whose lease key named the same process and node
//! generation; etcd revisions only grow, so a term's revision is never reused and a fenced
//! write of an ended term always fails; a server key is written only under the lease whose
//! lease key names the same process and node generation as the record, and only over a
//! record of the same or an older node generation.

use crate::coordination::{
    compare, delete, get, present, put, read_at, to_i64, to_u64, unchanged, EtcdCoordination,
};
use crate::keys::{decode_lease, encode_lease, ServerRecord};
use crate::proto::{Compare, CompareResult, CompareTarget, TargetUnion, TxnRequest};
use basalt_core::coord::Lease;
use basalt_core::{Error, Result};
use std::time::Duration;

/// How many times a registration re-reads and tries again after losing a race.
const RETRIES: usize = 16;

/// The shortest interval at which a waiting candidate polls the master key.
const MIN_POLL: Duration = Duration::from_millis(10);

/// Where a region server can be reached, as it registers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// Where its RPC service listens (`host:port`, not empty).
    pub rpc_address: String,
    /// The port of its status page and `/metrics`.
    pub info_port: u16,
    /// When the process started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
}

/// A registered region server whose lease was alive when it was listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveServer {
    /// Its process name.
    pub process: String,
    /// The lease its registration is bound to.
    pub lease: u64,
    /// The node generation of that lease (a restarted process has a larger one).
    pub node_generation: u64,
    /// What it registered.
    pub info: ServerInfo,
}

/// One master's term: who won, under which lease, and the term's revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    /// The master's process name.
    pub process: String,
    /// The node generation of the master's lease.
    pub node_generation: u64,
    /// The master's lease (the master key dies with it).
    pub lease: u64,
    /// The master key's creation revision: the term's name, never reused.
    pub revision: u64,
}

/// `key`'s lease is `lease`.
fn leased(key: Vec<u8>, lease: i64) -> Compare {
    compare(
        key,
        CompareTarget::Lease,
        CompareResult::Equal,
        TargetUnion::Lease(lease),
    )
}

/// `key`'s value is `value` (false when `key` does not exist).
fn holds(key: Vec<u8>, value: Vec<u8>) -> Compare {
    compare(
        key,
        CompareTarget::Value,
        CompareResult::Equal,
        TargetUnion::Value(value),
    )
}

/// `key` was created at `revision` (0: it does not exist).
fn created_at(key: Vec<u8>, revision: i64) -> Compare {
    compare(
        key,
        CompareTarget::Create,
        CompareResult::Equal,
        TargetUnion::CreateRevision(revision),
    )
}

impl EtcdCoordination {
    /// The lease key of `lease`, the value it must hold, and the lease's id for etcd.
    fn lease_check(&self, lease: &Lease) -> Result<(Vec<u8>, Vec<u8>, i64)> {
        let id = to_i64(lease.id).ok_or(Error::LeaseExpired { lease: lease.id })?;
        Ok((
            self.keys.lease(lease.id),
            encode_lease(lease.node_generation, &lease.process),
            id,
        ))
    }

    /// Why a read of `lease`'s lease key that did not find `expected` failed.
    fn lease_mismatch(lease: &Lease, found: Option<&[u8]>, expected: &[u8]) -> Option<Error> {
        match found {
            None => Some(Error::LeaseExpired { lease: lease.id }),
            Some(v) if v != expected => Some(Error::bad_argument(format!(
                "lease {} is not node generation {} of {}",
                lease.id, lease.node_generation, lease.process
            ))),
            Some(_) => None,
        }
    }

    /// Registers the region server holding `lease` (a lease from
    /// [`grant_lease`](basalt_core::coord::Coordination::grant_lease) of this store) as
    /// `P/servers/<process>`, bound to the lease: the registration vanishes when the lease
    /// ends. Registering again under the same lease replaces the record. Fails with
    /// [`Error::LeaseExpired`] when the lease ended (register a new lease, a new node
    /// generation), and with [`Error::CoordinationConflict`] when a newer node generation
    /// of the same process is registered (this process is an earlier life).
    pub async fn register_server(&self, lease: &Lease, info: &ServerInfo) -> Result<LiveServer> {
        if info.rpc_address.trim().is_empty() {
            return Err(Error::bad_argument(
                "a server registers a non-empty RPC address",
            ));
        }
        let (lease_key, mine, lease_id) = self.lease_check(lease)?;
        let key = self.keys.server(&lease.process);
        let record = ServerRecord {
            node_generation: lease.node_generation,
            started_ms: info.started_ms,
            info_port: info.info_port,
            rpc_address: info.rpc_address.clone(),
        };
        for _ in 0..RETRIES {
            let resp = self
                .read("register", vec![lease_key.clone(), key.clone()])
                .await?;
            let found = read_at(&resp, 0).map(|kv| kv.value.as_slice());
            if let Some(e) = Self::lease_mismatch(lease, found, &mine) {
                return Err(e);
            }
            let revision = match read_at(&resp, 1) {
                Some(kv) => {
                    let old = ServerRecord::decode(&key, &kv.value)?;
                    if old.node_generation > lease.node_generation {
                        return Err(Error::CoordinationConflict(format!(
                            "{} is registered as node generation {}, newer than {}",
                            lease.process, old.node_generation, lease.node_generation
                        )));
                    }
                    kv.mod_revision
                }
                None => 0,
            };
            let req = TxnRequest {
                compare: vec![
                    holds(lease_key.clone(), mine.clone()),
                    unchanged(key.clone(), revision),
                ],
                success: vec![put(key.clone(), record.encode(), lease_id)],
                failure: Vec::new(),
            };
            if self.txn("register", req, lease.id).await?.succeeded {
                return Ok(LiveServer {
                    process: lease.process.clone(),
                    lease: lease.id,
                    node_generation: lease.node_generation,
                    info: info.clone(),
                });
            }
        }
        Err(Error::CoordinationConflict(format!(
            "the registration of {} kept moving",
            lease.process
        )))
    }

    /// Removes `lease`'s registration (a server shutting down cleanly), if it is still that
    /// lease's; returns whether it was.
    pub async fn unregister_server(&self, lease: &Lease) -> Result<bool> {
        let (_, _, lease_id) = self.lease_check(lease)?;
        let key = self.keys.server(&lease.process);
        let req = TxnRequest {
            compare: vec![present(key.clone()), leased(key.clone(), lease_id)],
            success: vec![delete(key)],
            failure: Vec::new(),
        };
        Ok(self.txn("unregister", req, 0).await?.succeeded)
    }

    /// The registered servers whose lease is alive, by process name.
    pub async fn live_servers(&self) -> Result<Vec<LiveServer>> {
        let kvs = self.read_prefix(self.keys.servers_prefix()).await?;
        let mut out = Vec::with_capacity(kvs.len());
        for kv in kvs {
            let record = ServerRecord::decode(&kv.key, &kv.value)?;
            out.push(LiveServer {
                process: self.keys.server_of(&kv.key)?,
                lease: to_u64(kv.lease),
                node_generation: record.node_generation,
                info: ServerInfo {
                    rpc_address: record.rpc_address,
                    info_port: record.info_port,
                    started_ms: record.started_ms,
                },
            });
        }
        Ok(out)
    }

    /// One try at becoming master with `lease`: the new term when the master key was
    /// absent, the current term when `lease` already holds it, `None` when another lease
    /// does. Fails with [`Error::LeaseExpired`] when the lease ended.
    pub async fn try_campaign(&self, lease: &Lease) -> Result<Option<Leadership>> {
        let (lease_key, mine, lease_id) = self.lease_check(lease)?;
        let master = self.keys.master();
        let req = TxnRequest {
            compare: vec![
                created_at(master.clone(), 0),
                holds(lease_key.clone(), mine.clone()),
            ],
            success: vec![put(master.clone(), mine.clone(), lease_id)],
            failure: vec![get(master.clone()), get(lease_key)],
        };
        let resp = self.txn("campaign", req, lease.id).await?;
        if resp.succeeded {
            let revision = resp.header.as_ref().map_or(0, |h| h.revision);
            return Ok(Some(Leadership {
                process: lease.process.clone(),
                node_generation: lease.node_generation,
                lease: lease.id,
                revision: to_u64(revision),
            }));
        }
        let found = read_at(&resp, 1).map(|kv| kv.value.as_slice());
        if let Some(e) = Self::lease_mismatch(lease, found, &mine) {
            return Err(e);
        }
        match read_at(&resp, 0) {
            Some(kv) if kv.lease == lease_id => self.term(&master, kv).map(Some),
            _ => Ok(None),
        }
    }

    /// Becomes master with `lease`, waiting as long as another lease holds the master key
    /// (looking every `poll`, at least 10 ms); returns the term won. Fails with
    /// [`Error::LeaseExpired`] when `lease` ends first: the caller keeps it alive while it
    /// waits, and stops waiting by dropping the future.
    pub async fn campaign(&self, lease: &Lease, poll: Duration) -> Result<Leadership> {
        let poll = poll.max(MIN_POLL);
        let (lease_key, mine, _) = self.lease_check(lease)?;
        let master = self.keys.master();
        loop {
            if let Some(term) = self.try_campaign(lease).await? {
                return Ok(term);
            }
            // Wait for the master key's deletion (reads only), watching our own lease.
            loop {
                tokio::time::sleep(poll).await;
                let keys = vec![master.clone(), lease_key.clone()];
                let resp = self.read("campaign", keys).await?;
                let found = read_at(&resp, 1).map(|kv| kv.value.as_slice());
                if let Some(e) = Self::lease_mismatch(lease, found, &mine) {
                    return Err(e);
                }
                if read_at(&resp, 0).is_none() {
                    break;
                }
            }
        }
    }

    /// The term a master key's key-value describes.
    fn term(&self, master: &[u8], kv: &crate::proto::KeyValue) -> Result<Leadership> {
        let (node_generation, process) = decode_lease(master, &kv.value)?;
        Ok(Leadership {
            process,
            node_generation,
            lease: to_u64(kv.lease),
            revision: to_u64(kv.create_revision),
        })
    }

    /// The current master's term, `None` when there is no master.
    pub async fn leader(&self) -> Result<Option<Leadership>> {
        let master = self.keys.master();
        let resp = self.read("leader", vec![master.clone()]).await?;
        read_at(&resp, 0)
            .map(|kv| self.term(&master, kv))
            .transpose()
    }

    /// Whether `term` is still the current one (its master key exists, created at the
    /// term's revision, under its lease). A liveness signal only: fence writes with the
    /// term's compare instead of acting on this answer.
    pub async fn is_leader(&self, term: &Leadership) -> Result<bool> {
        Ok(self
            .leader()
            .await?
            .is_some_and(|now| now.revision == term.revision && now.lease == term.lease))
    }

    /// Ends `term` by deleting the master key, only if it still holds `term`; returns
    /// whether it did (false: the term had already ended).
    pub async fn resign(&self, term: &Leadership) -> Result<bool> {
        let master = self.keys.master();
        let lease = to_i64(term.lease).unwrap_or(-1);
        let req = TxnRequest {
            compare: vec![self.fence(term), leased(master.clone(), lease)],
            success: vec![delete(master)],
            failure: Vec::new(),
        };
        Ok(self.txn("resign", req, 0).await?.succeeded)
    }

    /// The compare a master adds to every transaction that writes assignment state in
    /// `term`: the master key still exists and was created at the term's revision. It
    /// fails once the term ended (resigned, or the master's lease ended), even if the same
    /// process was elected again since, so a deposed master's write changes nothing.
    pub(crate) fn fence(&self, term: &Leadership) -> Compare {
        let revision = to_i64(term.revision).unwrap_or(-1);
        created_at(self.keys.master(), revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EtcdConfig, LocalEtcd};
    use basalt_core::coord::Coordination;

    /// A deposed master's write, fenced by its term, changes nothing; the new master's
    /// does; a term ended by resigning fences too, even if the same lease wins again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_masters_fenced_write_is_refused() {
        let etcd = LocalEtcd::start().unwrap();
        let coord = EtcdCoordination::connect(EtcdConfig::new([etcd.endpoint()]))
            .await
            .unwrap();
        let ttl = Duration::from_secs(3);
        let a = coord.grant_lease("master-a", ttl).await.unwrap();
        let b = coord.grant_lease("master-b", ttl).await.unwrap();
        let key = format!("{}/assignments/r1", coord.prefix()).into_bytes();
        let write = |term: &Leadership, value: &str| TxnRequest {
            compare: vec![coord.fence(term)],
            success: vec![put(key.clone(), value.as_bytes().to_vec(), 0)],
            failure: Vec::new(),
        };
        let value = || async {
            let resp = coord.read("t", vec![key.clone()]).await.unwrap();
            read_at(&resp, 0).map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
        };

        let term_a = coord.try_campaign(&a).await.unwrap().unwrap();
        assert!(coord.try_campaign(&b).await.unwrap().is_none());
        assert!(
            coord
                .txn("t", write(&term_a, "a1"), 0)
                .await
                .unwrap()
                .succeeded
        );

        // A's lease ends (as if it paused past its lease): B is elected; A, still
        // believing itself master, writes with its old fence and is refused.
        coord.revoke_lease(a.id).await.unwrap();
        let term_b = coord.campaign(&b, Duration::from_millis(20)).await.unwrap();
        assert!(!coord.is_leader(&term_a).await.unwrap());
        assert!(
            !coord
                .txn("t", write(&term_a, "a2"), 0)
                .await
                .unwrap()
                .succeeded
        );
        assert!(
            coord
                .txn("t", write(&term_b, "b1"), 0)
                .await
                .unwrap()
                .succeeded
        );
        assert_eq!(value().await.as_deref(), Some("b1"));

        // B resigns and wins again with the same lease: a new term, the old one fenced.
        assert!(coord.resign(&term_b).await.unwrap());
        assert!(!coord.resign(&term_b).await.unwrap());
        let term_b2 = coord.try_campaign(&b).await.unwrap().unwrap();
        assert!(term_b2.revision > term_b.revision);
        assert!(
            !coord
                .txn("t", write(&term_b, "b2"), 0)
                .await
                .unwrap()
                .succeeded
        );
        assert!(
            coord
                .txn("t", write(&term_b2, "b3"), 0)
                .await
                .unwrap()
                .succeeded
        );
        assert_eq!(value().await.as_deref(), Some("b3"));
        // A dead lease cannot campaign.
        assert!(matches!(
            coord.try_campaign(&a).await,
            Err(Error::LeaseExpired { .. })
        ));
        drop(etcd);
    }
}
