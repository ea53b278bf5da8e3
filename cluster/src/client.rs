//! A small etcd v3 client on tonic: one HTTP/2 channel to the cluster's members, and the
//! calls [`crate::coordination`] needs (`Range`, `Txn`, lease grant, revoke and keep-alive),
//! each bounded by the channel's request timeout.
//!
//! Invariants: every call either returns etcd's answer or an [`Error`]: a gRPC failure is
//! mapped once, here ([`status_error`]), to an I/O error naming the call; the channel is
//! shared by clones, so a client is cheap to copy into tasks.

use crate::proto::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseRevokeRequest, LeaseRevokeResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use basalt_core::{Error, Result};
use std::time::Duration;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};
use tonic_prost::ProstCodec;

/// A connection to an etcd cluster (lazy: it connects on the first call, and reconnects
/// after a failure).
#[derive(Clone, Debug)]
pub(crate) struct EtcdClient {
    channel: Channel,
}

/// Maps a gRPC failure of call `what` to an I/O error of a matching kind.
pub(crate) fn status_error(what: &str, status: &Status) -> Error {
    use std::io::ErrorKind;
    let kind = match status.code() {
        Code::Unavailable => ErrorKind::ConnectionRefused,
        Code::DeadlineExceeded => ErrorKind::TimedOut,
        Code::Cancelled | Code::Aborted => ErrorKind::Interrupted,
        Code::InvalidArgument | Code::OutOfRange => ErrorKind::InvalidInput,
        Code::NotFound => ErrorKind::NotFound,
        Code::PermissionDenied | Code::Unauthenticated => ErrorKind::PermissionDenied,
        _ => ErrorKind::Other,
    };
    Error::Io(std::io::Error::new(
        kind,
        format!("etcd {what}: {:?}: {}", status.code(), status.message()),
    ))
}

/// Whether `status` is etcd's "requested lease not found" (the lease expired, was revoked,
/// or never existed).
pub(crate) fn lease_not_found(status: &Status) -> bool {
    status.code() == Code::NotFound && status.message().contains("lease not found")
}

impl EtcdClient {
    /// A client of the members at `endpoints` (`http://host:port`), each call bounded by
    /// `timeout`. Needs a tokio runtime (the channel's tasks run on it).
    pub(crate) fn new(endpoints: &[String], timeout: Duration) -> Result<Self> {
        let mut list = Vec::with_capacity(endpoints.len());
        for url in endpoints {
            let endpoint = Endpoint::from_shared(url.clone())
                .map_err(|e| Error::bad_argument(format!("etcd endpoint {url:?}: {e}")))?
                .connect_timeout(timeout)
                .timeout(timeout)
                .tcp_nodelay(true);
            list.push(endpoint);
        }
        let channel = match list.as_slice() {
            [] => return Err(Error::bad_argument("no etcd endpoint given")),
            [one] => one.connect_lazy(),
            _ => Channel::balance_list(list.into_iter()),
        };
        Ok(EtcdClient { channel })
    }

    async fn unary<Req, Resp>(&self, path: &'static str, req: Req) -> Result<Resp, Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = Grpc::new(self.channel.clone());
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(format!("channel not ready: {e}")))?;
        let codec = ProstCodec::<Req, Resp>::default();
        grpc.unary(Request::new(req), PathAndQuery::from_static(path), codec)
            .await
            .map(tonic::Response::into_inner)
    }

    /// `KV.Range`.
    pub(crate) async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        self.unary("/etcdserverpb.KV/Range", req)
            .await
            .map_err(|s| status_error("range", &s))
    }

    /// `KV.Txn`, with etcd's own status kept (a transaction whose put names a dead lease
    /// fails with "lease not found", which callers turn into `LeaseExpired`).
    pub(crate) async fn txn(&self, req: TxnRequest) -> Result<TxnResponse, Status> {
        self.unary("/etcdserverpb.KV/Txn", req).await
    }

    /// `Lease.LeaseGrant`.
    pub(crate) async fn lease_grant(&self, ttl_secs: i64) -> Result<LeaseGrantResponse> {
        let req = LeaseGrantRequest {
            ttl: ttl_secs,
            id: 0,
        };
        let resp: LeaseGrantResponse = self
            .unary("/etcdserverpb.Lease/LeaseGrant", req)
            .await
            .map_err(|s| status_error("lease grant", &s))?;
        if !resp.error.is_empty() {
            return Err(Error::Io(std::io::Error::other(format!(
                "etcd lease grant: {}",
                resp.error
            ))));
        }
        Ok(resp)
    }

    /// `Lease.LeaseRevoke`, with etcd's own status kept (revoking a lease that is gone
    /// fails with "lease not found").
    pub(crate) async fn lease_revoke(&self, id: i64) -> Result<LeaseRevokeResponse, Status> {
        self.unary("/etcdserverpb.Lease/LeaseRevoke", LeaseRevokeRequest { id })
            .await
    }

    /// One renewal through `Lease.LeaseKeepAlive` (a stream of one request): the lease's new
    /// time to live in seconds, 0 or less when the lease is gone. A lease past its time to
    /// live that etcd has not revoked yet is answered once etcd revoked it (etcd's renewal
    /// waits for that), so a renewal never revives an expired lease.
    pub(crate) async fn lease_keep_alive(&self, id: i64) -> Result<LeaseKeepAliveResponse> {
        let mut grpc = Grpc::new(self.channel.clone());
        let fail = |s: Status| status_error("lease keep-alive", &s);
        grpc.ready()
            .await
            .map_err(|e| fail(Status::unavailable(format!("channel not ready: {e}"))))?;
        let codec = ProstCodec::<LeaseKeepAliveRequest, LeaseKeepAliveResponse>::default();
        let requests = futures::stream::iter([LeaseKeepAliveRequest { id }]);
        let mut answers = grpc
            .streaming(
                Request::new(requests),
                PathAndQuery::from_static("/etcdserverpb.Lease/LeaseKeepAlive"),
                codec,
            )
            .await
            .map_err(fail)?
            .into_inner();
        match answers.message().await.map_err(fail)? {
            Some(resp) => Ok(resp),
            None => Err(fail(Status::unavailable(
                "the keep-alive stream closed without an answer",
            ))),
        }
    }
}
