//! The part of etcd's v3 gRPC API that Basalt speaks, as prost messages: `KV.Range`,
//! `KV.Txn`, and the `Lease` service's grant, revoke and keep-alive. Field numbers and enum
//! values are etcd's (`api/etcdserverpb/rpc.proto` and `api/mvccpb/kv.proto`, the same in
//! etcd 3.4 and later); fields Basalt does not use are left out, which protobuf allows: a
//! request without them means their defaults, and a response's unknown fields are skipped.
//!
//! Written by hand rather than generated at build time, so that building the workspace
//! needs no `protoc`. The invariant: every tag below is the tag of the same field in etcd's
//! proto files (checked against them when a field is added).

/// `etcdserverpb.ResponseHeader`: the store's revision when the request was served.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResponseHeader {
    /// The key-value store's revision after the request.
    #[prost(int64, tag = "3")]
    pub(crate) revision: i64,
}

/// `mvccpb.KeyValue`: a key, its value and its revisions.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeyValue {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    /// The revision of the key's last creation.
    #[prost(int64, tag = "2")]
    pub(crate) create_revision: i64,
    /// The revision of the key's last change.
    #[prost(int64, tag = "3")]
    pub(crate) mod_revision: i64,
    /// The value.
    #[prost(bytes = "vec", tag = "5")]
    pub(crate) value: Vec<u8>,
    /// The lease the key is attached to (0: none).
    #[prost(int64, tag = "6")]
    pub(crate) lease: i64,
}

/// `etcdserverpb.RangeRequest`: the keys in `[key, range_end)` (`range_end` empty: `key`
/// alone).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RangeRequest {
    /// The first key.
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    /// The end of the range, exclusive.
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) range_end: Vec<u8>,
}

/// `etcdserverpb.RangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RangeResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    /// The keys found, in key order.
    #[prost(message, repeated, tag = "2")]
    pub(crate) kvs: Vec<KeyValue>,
}

/// `etcdserverpb.PutRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PutRequest {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    /// The value.
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) value: Vec<u8>,
    /// The lease to attach the key to (0: none; the key then outlives every lease).
    #[prost(int64, tag = "3")]
    pub(crate) lease: i64,
}

/// `etcdserverpb.PutResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PutResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
}

/// `etcdserverpb.DeleteRangeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DeleteRangeRequest {
    /// The first key.
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    /// The end of the range, exclusive (empty: `key` alone).
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) range_end: Vec<u8>,
}

/// `etcdserverpb.DeleteRangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DeleteRangeResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    /// How many keys were deleted.
    #[prost(int64, tag = "2")]
    pub(crate) deleted: i64,
}

/// `etcdserverpb.RequestOp`: one operation of a transaction's branch.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RequestOp {
    /// The operation.
    #[prost(oneof = "Request", tags = "1, 2, 3")]
    pub(crate) request: Option<Request>,
}

/// The operations a [`RequestOp`] carries.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Request {
    /// A read.
    #[prost(message, tag = "1")]
    Range(RangeRequest),
    /// A write.
    #[prost(message, tag = "2")]
    Put(PutRequest),
    /// A delete.
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeRequest),
}

/// `etcdserverpb.ResponseOp`: the answer to one [`RequestOp`], in the same place.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResponseOp {
    /// The answer.
    #[prost(oneof = "Response", tags = "1, 2, 3")]
    pub(crate) response: Option<Response>,
}

/// The answers a [`ResponseOp`] carries.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Response {
    /// A read's.
    #[prost(message, tag = "1")]
    Range(RangeResponse),
    /// A write's.
    #[prost(message, tag = "2")]
    Put(PutResponse),
    /// A delete's.
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeResponse),
}

/// `etcdserverpb.Compare.CompareResult`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub(crate) enum CompareResult {
    /// Equal.
    Equal = 0,
    /// Greater.
    Greater = 1,
}

/// `etcdserverpb.Compare.CompareTarget`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub(crate) enum CompareTarget {
    /// The key's version (0: the key does not exist).
    Version = 0,
    /// The key's creation revision (0: the key does not exist).
    Create = 1,
    /// The key's modification revision (0: the key does not exist).
    Mod = 2,
    /// The key's value (a compare on a missing key's value is always false).
    Value = 3,
    /// The key's lease (0: none, or the key does not exist).
    Lease = 4,
}

/// `etcdserverpb.Compare`: one condition of a transaction.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Compare {
    /// How the key's target compares with the operand.
    #[prost(enumeration = "CompareResult", tag = "1")]
    pub(crate) result: i32,
    /// What of the key is compared.
    #[prost(enumeration = "CompareTarget", tag = "2")]
    pub(crate) target: i32,
    /// The key.
    #[prost(bytes = "vec", tag = "3")]
    pub(crate) key: Vec<u8>,
    /// The operand, of the target's kind.
    #[prost(oneof = "TargetUnion", tags = "4, 5, 6, 7, 8")]
    pub(crate) target_union: Option<TargetUnion>,
}

/// The operand of a [`Compare`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum TargetUnion {
    /// A version.
    #[prost(int64, tag = "4")]
    Version(i64),
    /// A creation revision.
    #[prost(int64, tag = "5")]
    CreateRevision(i64),
    /// A modification revision.
    #[prost(int64, tag = "6")]
    ModRevision(i64),
    /// A value.
    #[prost(bytes = "vec", tag = "7")]
    Value(Vec<u8>),
    /// A lease.
    #[prost(int64, tag = "8")]
    Lease(i64),
}

/// `etcdserverpb.TxnRequest`: if every compare holds, the success branch runs, else the
/// failure branch; atomically, at one revision.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TxnRequest {
    /// The conditions.
    #[prost(message, repeated, tag = "1")]
    pub(crate) compare: Vec<Compare>,
    /// The operations when they all hold.
    #[prost(message, repeated, tag = "2")]
    pub(crate) success: Vec<RequestOp>,
    /// The operations otherwise.
    #[prost(message, repeated, tag = "3")]
    pub(crate) failure: Vec<RequestOp>,
}

/// `etcdserverpb.TxnResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TxnResponse {
    /// The header (its revision is the one the transaction's writes got).
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    /// Whether the compares held (the success branch ran).
    #[prost(bool, tag = "2")]
    pub(crate) succeeded: bool,
    /// The answers of the branch that ran, in order.
    #[prost(message, repeated, tag = "3")]
    pub(crate) responses: Vec<ResponseOp>,
}

/// `etcdserverpb.LeaseGrantRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseGrantRequest {
    /// The time to live asked for, in seconds.
    #[prost(int64, tag = "1")]
    pub(crate) ttl: i64,
    /// The lease id asked for (0: the server picks one).
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
}

/// `etcdserverpb.LeaseGrantResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseGrantResponse {
    /// The lease's id.
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
    /// The time to live granted, in seconds (at least the server's minimum).
    #[prost(int64, tag = "3")]
    pub(crate) ttl: i64,
    /// Why the grant failed, if it did.
    #[prost(string, tag = "4")]
    pub(crate) error: String,
}

/// `etcdserverpb.LeaseRevokeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseRevokeRequest {
    /// The lease's id.
    #[prost(int64, tag = "1")]
    pub(crate) id: i64,
}

/// `etcdserverpb.LeaseRevokeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseRevokeResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
}

/// `etcdserverpb.LeaseKeepAliveRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseKeepAliveRequest {
    /// The lease's id.
    #[prost(int64, tag = "1")]
    pub(crate) id: i64,
}

/// `etcdserverpb.LeaseKeepAliveResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseKeepAliveResponse {
    /// The lease's id.
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
    /// The time to live from now, in seconds; 0 or less: the lease is gone.
    #[prost(int64, tag = "3")]
    pub(crate) ttl: i64,
}
