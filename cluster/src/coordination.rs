//! [`EtcdCoordination`]: the [`Coordination`] trait on etcd v3. The key layout is in
//! `keys`; the mapping of the trait's model onto etcd:
//!
//! - A lease is an etcd lease ([`Coordination::grant_lease`] rounds the time to live up to
//!   whole seconds, and etcd may raise it to its minimum; [`Lease::ttl`] is what etcd
//!   granted). Its node generation is the process name's counter key, raised by a
//!   transaction that compares the counter's revision, which also writes the lease key (the
//!   lease's process and node generation) under the lease. A renewal is one request on the
//!   `LeaseKeepAlive` stream.
//! - A lease is alive until etcd revokes it: at [`Coordination::revoke_lease`], or when
//!   etcd's lessor finds it past its time to live (it looks every 500 ms, so a lease dies up
//!   to about half a second after its time to live ends). Keys under a lease vanish with it.
//! - Ownership of a region is its owner key, under the owner's lease, plus its generation
//!   key, not under any lease, which names the last owner and whether it released the
//!   region. A claim is one transaction: the owner key absent, the generation key at the
//!   revision read, the claimant's lease key present; it writes both keys. So an owner whose
//!   lease ended loses its owner key with the lease, the region can be claimed, and
//!   [`Coordination::owner`] still names it (`alive: false`) from the generation key.
//! - Catalog records compare their key's modification revision ([`RegionRecord::revision`]
//!   is etcd's `mod_revision`); manifest pointers compare the owner key's lease and
//!   generation and the pointer's value, in the transaction that writes the pointer.
//!
//! Invariants: every change is one etcd transaction whose compares cover everything the
//! change was decided on, so a lost race changes nothing (it retries from a fresh read, or
//! fails with [`Error::CoordinationConflict`]); a region's generation key is written only
//! with a larger generation or a release; etcd's answers that do not parse are errors.

use crate::client::{lease_not_found, status_error, EtcdClient};
use crate::keys::{
    decode_lease, decode_record, encode_lease, encode_record, parse_u64, prefix_end,
    GenerationRecord, Keys,
};
use crate::proto::{
    Compare, CompareResult, CompareTarget, DeleteRangeRequest, KeyValue, PutRequest, RangeRequest,
    Request, RequestOp, Response, TargetUnion, TxnRequest, TxnResponse,
};
use async_trait::async_trait;
use basalt_core::coord::{Coordination, Lease, Ownership, RegionKey, RegionRecord};
use basalt_core::{Error, Result, TableName};
use bytes::Bytes;
use std::time::Duration;

/// How many times a change re-reads and tries again after losing a race before it gives
/// up with [`Error::CoordinationConflict`] (each lost race means another change landed).
const RETRIES: usize = 64;

/// Where and how to reach etcd.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    endpoints: Vec<String>,
    prefix: String,
    timeout: Duration,
}

impl EtcdConfig {
    /// The members at `endpoints` (`http://host:port`, or `host:port`), keys under
    /// `/basalt`, each request bounded by 5 seconds.
    pub fn new<S: AsRef<str>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        let endpoints = endpoints
            .into_iter()
            .map(|e| {
                let e = e.as_ref();
                if e.contains("://") {
                    e.to_string()
                } else {
                    format!("http://{e}")
                }
            })
            .collect();
        EtcdConfig {
            endpoints,
            prefix: "/basalt".to_string(),
            timeout: Duration::from_secs(5),
        }
    }

    /// Keeps every key under `prefix` (so that several stores share one etcd).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Bounds each request (and each connection attempt) by `timeout`.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// The [`Coordination`] store of a cluster, on etcd v3: leases are etcd leases, a region's
/// owner is a key under its owner's lease beside a generation key that only grows, and every
/// change is one etcd transaction that compares what it was decided on (the key layout and
/// the transactions are documented in `cluster/src/keys.rs` and
/// `cluster/src/coordination.rs`). Cheap to clone: clones share one connection.
///
/// A lease lives in whole seconds (etcd rounds the time to live up, to at least its own
/// minimum) and dies when etcd revokes it, up to about half a second after its time to
/// live ends; until then it still owns its regions.
#[derive(Debug, Clone)]
pub struct EtcdCoordination {
    pub(crate) client: EtcdClient,
    pub(crate) keys: Keys,
}

fn op(request: Request) -> RequestOp {
    RequestOp {
        request: Some(request),
    }
}

pub(crate) fn get(key: Vec<u8>) -> RequestOp {
    op(Request::Range(RangeRequest {
        key,
        range_end: Vec::new(),
    }))
}

pub(crate) fn put(key: Vec<u8>, value: Vec<u8>, lease: i64) -> RequestOp {
    op(Request::Put(PutRequest { key, value, lease }))
}

pub(crate) fn delete(key: Vec<u8>) -> RequestOp {
    op(Request::DeleteRange(DeleteRangeRequest {
        key,
        range_end: Vec::new(),
    }))
}

pub(crate) fn compare(
    key: Vec<u8>,
    target: CompareTarget,
    result: CompareResult,
    v: TargetUnion,
) -> Compare {
    Compare {
        result: result as i32,
        target: target as i32,
        key,
        target_union: Some(v),
    }
}

/// `key` does not exist.
pub(crate) fn absent(key: Vec<u8>) -> Compare {
    let v = TargetUnion::Version(0);
    compare(key, CompareTarget::Version, CompareResult::Equal, v)
}

/// `key` exists.
pub(crate) fn present(key: Vec<u8>) -> Compare {
    let v = TargetUnion::Version(0);
    compare(key, CompareTarget::Version, CompareResult::Greater, v)
}

/// `key` was last changed at `revision` (0: it does not exist).
pub(crate) fn unchanged(key: Vec<u8>, revision: i64) -> Compare {
    let v = TargetUnion::ModRevision(revision);
    compare(key, CompareTarget::Mod, CompareResult::Equal, v)
}

/// The key-values a transaction's `i`-th operation read (none when it was not a read).
pub(crate) fn read_at(resp: &TxnResponse, i: usize) -> Option<&KeyValue> {
    match resp.responses.get(i).and_then(|r| r.response.as_ref()) {
        Some(Response::Range(r)) => r.kvs.first(),
        _ => None,
    }
}

pub(crate) fn to_i64(n: u64) -> Option<i64> {
    i64::try_from(n).ok()
}

pub(crate) fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// What a region's owner and generation keys held at one revision.
struct RegionState {
    owner: Option<KeyValue>,
    generation: Option<(GenerationRecord, i64)>,
}

impl EtcdCoordination {
    /// Connects to etcd as `config` says and checks that it answers (one read).
    pub async fn connect(config: EtcdConfig) -> Result<Self> {
        let client = EtcdClient::new(&config.endpoints, config.timeout)?;
        let store = EtcdCoordination {
            client,
            keys: Keys::new(&config.prefix),
        };
        let probe = RangeRequest {
            key: store.keys.node(""),
            range_end: Vec::new(),
        };
        store.client.range(probe).await?;
        Ok(store)
    }

    /// The prefix every key of this store starts with.
    pub fn prefix(&self) -> &str {
        self.keys.prefix()
    }

    /// Runs a transaction; "lease not found" (a put under a dead lease) becomes
    /// [`Error::LeaseExpired`] of `lease`.
    pub(crate) async fn txn(&self, what: &str, req: TxnRequest, lease: u64) -> Result<TxnResponse> {
        self.client.txn(req).await.map_err(|s| {
            if lease_not_found(&s) {
                Error::LeaseExpired { lease }
            } else {
                status_error(what, &s)
            }
        })
    }

    /// Reads `keys` at one revision (a transaction of reads only).
    /// Every key under `prefix`, with its value, in key order.
    pub(crate) async fn read_prefix(&self, prefix: Vec<u8>) -> Result<Vec<KeyValue>> {
        let range_end = prefix_end(&prefix);
        let resp = self
            .client
            .range(RangeRequest {
                key: prefix,
                range_end,
            })
            .await?;
        Ok(resp.kvs)
    }

    pub(crate) async fn read(&self, what: &str, keys: Vec<Vec<u8>>) -> Result<TxnResponse> {
        let req = TxnRequest {
            compare: Vec::new(),
            success: keys.into_iter().map(get).collect(),
            failure: Vec::new(),
        };
        self.txn(what, req, 0).await
    }

    async fn region_state(&self, region: &RegionKey) -> Result<RegionState> {
        let owner_key = self.keys.owner(region);
        let gen_key = self.keys.generation(region);
        let resp = self.read("owner", vec![owner_key, gen_key.clone()]).await?;
        let generation = match read_at(&resp, 1) {
            Some(kv) => Some((
                GenerationRecord::decode(&gen_key, &kv.value)?,
                kv.mod_revision,
            )),
            None => None,
        };
        Ok(RegionState {
            owner: read_at(&resp, 0).cloned(),
            generation,
        })
    }
}

#[async_trait]
impl Coordination for EtcdCoordination {
    async fn grant_lease(&self, process: &str, ttl: Duration) -> Result<Lease> {
        if ttl.is_zero() {
            return Err(Error::bad_argument(
                "a lease needs a time to live of 1 ms or more",
            ));
        }
        let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        let granted = self
            .client
            .lease_grant(to_i64(secs).unwrap_or(i64::MAX))
            .await?;
        let id = to_u64(granted.id);
        let node_key = self.keys.node(process);
        let lease_key = self.keys.lease(id);
        let mut seen = self.read("node generation", vec![node_key.clone()]).await?;
        for _ in 0..RETRIES {
            let (last, revision) = match read_at(&seen, 0) {
                Some(kv) => (parse_u64(&node_key, &kv.value)?, kv.mod_revision),
                None => (0, 0),
            };
            let node_generation = last + 1;
            let req = TxnRequest {
                compare: vec![unchanged(node_key.clone(), revision)],
                success: vec![
                    put(
                        node_key.clone(),
                        node_generation.to_string().into_bytes(),
                        0,
                    ),
                    put(
                        lease_key.clone(),
                        encode_lease(node_generation, process),
                        granted.id,
                    ),
                ],
                failure: vec![get(node_key.clone())],
            };
            let resp = self.txn("lease grant", req, id).await?;
            if resp.succeeded {
                return Ok(Lease {
                    id,
                    process: process.to_string(),
                    node_generation,
                    ttl: Duration::from_secs(to_u64(granted.ttl)),
                });
            }
            seen = resp;
        }
        // Best effort: the lease would expire by itself.
        let _ = self.client.lease_revoke(granted.id).await;
        Err(Error::CoordinationConflict(format!(
            "the node generation of {process} kept moving"
        )))
    }

    async fn keep_alive(&self, lease: u64) -> Result<()> {
        let Some(id) = to_i64(lease) else {
            return Err(Error::LeaseExpired { lease });
        };
        let resp = self.client.lease_keep_alive(id).await?;
        if resp.ttl <= 0 {
            return Err(Error::LeaseExpired { lease });
        }
        Ok(())
    }

    async fn revoke_lease(&self, lease: u64) -> Result<()> {
        let Some(id) = to_i64(lease) else {
            return Ok(()); // etcd never grants such an id
        };
        match self.client.lease_revoke(id).await {
            Ok(_) => Ok(()),
            Err(s) if lease_not_found(&s) => Ok(()),
            Err(s) => Err(status_error("lease revoke", &s)),
        }
    }

    async fn claim_region(&self, region: &RegionKey, lease: u64) -> Result<u64> {
        let lease_id = to_i64(lease).ok_or(Error::LeaseExpired { lease })?;
        let lease_key = self.keys.lease(lease);
        let owner_key = self.keys.owner(region);
        let gen_key = self.keys.generation(region);
        for _ in 0..RETRIES {
            let keys = vec![lease_key.clone(), owner_key.clone(), gen_key.clone()];
            let resp = self.read("claim", keys).await?;
            let Some(mine) = read_at(&resp, 0) else {
                return Err(Error::LeaseExpired { lease });
            };
            let (_, process) = decode_lease(&lease_key, &mine.value)?;
            let last = match read_at(&resp, 2) {
                Some(kv) => Some((GenerationRecord::decode(&gen_key, &kv.value)?, kv)),
                None => None,
            };
            if let Some(owner) = read_at(&resp, 1) {
                if owner.lease == lease_id {
                    return parse_u64(&owner_key, &owner.value);
                }
                let owner = last.map(|(g, _)| g.process).unwrap_or_default();
                return Err(Error::RegionOwned {
                    region: region.to_string(),
                    owner,
                });
            }
            let (generation, revision) = match &last {
                Some((g, kv)) => (g.generation + 1, kv.mod_revision),
                None => (1, 0),
            };
            let record = GenerationRecord {
                generation,
                lease,
                released: false,
                process,
            };
            let req = TxnRequest {
                compare: vec![
                    present(lease_key.clone()),
                    absent(owner_key.clone()),
                    unchanged(gen_key.clone(), revision),
                ],
                success: vec![
                    put(
                        owner_key.clone(),
                        generation.to_string().into_bytes(),
                        lease_id,
                    ),
                    put(gen_key.clone(), record.encode(), 0),
                ],
                failure: Vec::new(),
            };
            if self.txn("claim", req, lease).await?.succeeded {
                return Ok(generation);
            }
        }
        Err(Error::CoordinationConflict(format!(
            "region {region}: its ownership kept moving"
        )))
    }

    async fn release_region(&self, region: &RegionKey, lease: u64, generation: u64) -> Result<()> {
        let gen_key = self.keys.generation(region);
        for _ in 0..RETRIES {
            let state = self.region_state(region).await?;
            let Some((mut record, revision)) = state.generation else {
                return Ok(());
            };
            if record.lease != lease || record.generation != generation || record.released {
                return Ok(()); // not this owner's any more: nothing to give up
            }
            record.released = true;
            let req = TxnRequest {
                compare: vec![unchanged(gen_key.clone(), revision)],
                success: vec![
                    delete(self.keys.owner(region)),
                    put(gen_key.clone(), record.encode(), 0),
                ],
                failure: Vec::new(),
            };
            if self.txn("release", req, lease).await?.succeeded {
                return Ok(());
            }
        }
        Err(Error::CoordinationConflict(format!(
            "region {region}: its ownership kept moving"
        )))
    }

    async fn owner(&self, region: &RegionKey) -> Result<Option<Ownership>> {
        let state = self.region_state(region).await?;
        let Some((record, _)) = state.generation else {
            return Ok(None);
        };
        let alive = state.owner.is_some();
        if record.released && !alive {
            return Ok(None);
        }
        Ok(Some(Ownership {
            lease: record.lease,
            process: record.process,
            generation: record.generation,
            alive,
        }))
    }

    async fn put_region(&self, record: RegionRecord, expected: Option<u64>) -> Result<u64> {
        let key = self.keys.catalog(&record.key);
        let compare = match expected {
            None => vec![absent(key.clone())],
            Some(r) => vec![
                present(key.clone()),
                unchanged(key.clone(), to_i64(r).unwrap_or(-1)),
            ],
        };
        let req = TxnRequest {
            compare,
            success: vec![put(
                key.clone(),
                encode_record(&record.start, &record.end)?,
                0,
            )],
            failure: vec![get(key)],
        };
        let resp = self.txn("catalog put", req, 0).await?;
        if !resp.succeeded {
            let current = read_at(&resp, 0).map(|kv| kv.mod_revision);
            return Err(Error::CoordinationConflict(format!(
                "region {} is at revision {current:?}, not {expected:?}",
                record.key
            )));
        }
        let revision = resp.header.as_ref().map(|h| h.revision).unwrap_or(0);
        Ok(to_u64(revision))
    }

    async fn remove_region(&self, region: &RegionKey, expected: u64) -> Result<()> {
        let key = self.keys.catalog(region);
        let req = TxnRequest {
            compare: vec![
                present(key.clone()),
                unchanged(key.clone(), to_i64(expected).unwrap_or(-1)),
            ],
            success: vec![delete(key.clone())],
            failure: vec![get(key)],
        };
        let resp = self.txn("catalog remove", req, 0).await?;
        if !resp.succeeded {
            let current = read_at(&resp, 0).map(|kv| kv.mod_revision);
            return Err(Error::CoordinationConflict(format!(
                "region {region} is at revision {current:?}, not {expected}"
            )));
        }
        Ok(())
    }

    async fn regions(&self, table: &TableName) -> Result<Vec<RegionRecord>> {
        let kvs = self.read_prefix(self.keys.catalog_prefix(table)).await?;
        let mut out = Vec::with_capacity(kvs.len());
        for kv in kvs {
            let (start, end) = decode_record(&kv.key, &kv.value)?;
            out.push(RegionRecord {
                key: RegionKey::new(table.clone(), self.keys.region_of(&kv.key)?),
                start,
                end,
                revision: to_u64(kv.mod_revision),
            });
        }
        out.sort_by(|a, b| a.start.cmp(&b.start));
        Ok(out)
    }

    async fn swap_manifest(
        &self,
        region: &RegionKey,
        lease: u64,
        generation: u64,
        expected: Option<&[u8]>,
        new: Bytes,
    ) -> Result<()> {
        let owner_key = self.keys.owner(region);
        let key = self.keys.manifest(region);
        let lease_id = to_i64(lease).unwrap_or(-1);
        let pointer = match expected {
            None => absent(key.clone()),
            Some(v) => compare(
                key.clone(),
                CompareTarget::Value,
                CompareResult::Equal,
                TargetUnion::Value(v.to_vec()),
            ),
        };
        let req = TxnRequest {
            compare: vec![
                compare(
                    owner_key.clone(),
                    CompareTarget::Lease,
                    CompareResult::Equal,
                    TargetUnion::Lease(lease_id),
                ),
                compare(
                    owner_key.clone(),
                    CompareTarget::Value,
                    CompareResult::Equal,
                    TargetUnion::Value(generation.to_string().into_bytes()),
                ),
                pointer,
            ],
            success: vec![put(key.clone(), new.to_vec(), 0)],
            failure: vec![get(owner_key.clone())],
        };
        let resp = self.txn("manifest swap", req, 0).await?;
        if resp.succeeded {
            return Ok(());
        }
        let owned = match read_at(&resp, 0) {
            Some(kv) => kv.lease == lease_id && parse_u64(&owner_key, &kv.value)? == generation,
            None => false,
        };
        Err(Error::CoordinationConflict(if owned {
            format!("the manifest pointer of {region} moved")
        } else {
            format!("region {region} is not owned by lease {lease} at generation {generation}")
        }))
    }

    async fn manifest(&self, region: &RegionKey) -> Result<Option<Bytes>> {
        let key = self.keys.manifest(region);
        let resp = self.client.range(RangeRequest {
            key,
            range_end: Vec::new(),
        });
        Ok(resp
            .await?
            .kvs
            .into_iter()
            .next()
            .map(|kv| Bytes::from(kv.value)))
    }
}
