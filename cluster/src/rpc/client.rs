//! The client's side of the RPC: one region server's channel, calls with deadlines, scans
//! as streams of rows, and the mapping of what comes back to `basalt_core::Error`.
//!
//! Invariants: an engine's refusal comes back as the same [`Error`] variant the engine
//! raised ([`Reply::Error`] carries it); a failure of the transport maps to
//! [`Error::Io`] with the kind a caller can act on (`TimedOut` for a deadline,
//! `ConnectionRefused` for a server that cannot be reached: both may be retried
//! elsewhere), and bytes the server refused as malformed or too large to
//! [`Error::BadArgument`]. No call waits past its deadline.

use super::messages::{
    Acknowledgement, Reply, Request, ScanPage, ScanRequest, ServerLoad, PROTOCOL_VERSION,
};
use super::service::region_server_client::RegionServerClient;
use super::MAX_MESSAGE_BYTES;
use basalt_core::client::RowResult;
use basalt_core::{Error, Result};
use futures::{Stream, StreamExt};
use std::io::ErrorKind;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection to one region server (cheap to clone: clones share the channel).
#[derive(Debug, Clone)]
pub struct RpcClient {
    address: String,
    client: RegionServerClient<Channel>,
}

impl RpcClient {
    /// A client of the server at `address` (`host:port`); connects on first use, and
    /// reconnects after a failure.
    pub fn new(address: &str) -> Result<Self> {
        let uri = format!("http://{address}");
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|e| Error::bad_argument(format!("bad server address {address:?}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(20));
        let client = RegionServerClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(RpcClient {
            address: address.to_string(),
            client,
        })
    }

    /// The server's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Checks the server speaks this protocol; returns its process name.
    pub async fn hello(&self, deadline: Duration) -> Result<String> {
        let version = PROTOCOL_VERSION;
        match self.call(Request::Hello { version }, deadline).await? {
            Reply::Hello { process, .. } => Ok(process),
            other => Err(unexpected("hello", &other)),
        }
    }

    /// What the server's RPC service counted since the server started
    /// ([`Request::ServerLoad`]).
    pub async fn server_load(&self, deadline: Duration) -> Result<ServerLoad> {
        match self.call(Request::ServerLoad, deadline).await? {
            Reply::Load(load) => Ok(load),
            other => Err(unexpected("server_load", &other)),
        }
    }

    /// Sends `request` and waits at most `deadline` for its reply; an engine's refusal is
    /// its error.
    pub async fn call(&self, request: Request, deadline: Duration) -> Result<Reply> {
        self.call_acknowledged(request, deadline)
            .await
            .map(|(reply, _)| reply)
    }

    /// [`RpcClient::call`], with the acknowledgement a region server attaches to a write's
    /// reply ([`Acknowledgement`]), when it does.
    pub async fn call_acknowledged(
        &self,
        request: Request,
        deadline: Duration,
    ) -> Result<(Reply, Option<Acknowledgement>)> {
        let name = request.name();
        fits(name, &self.address, &request)?;
        let mut req = tonic::Request::new(request);
        req.set_timeout(deadline);
        let mut client = self.client.clone();
        let response = tokio::time::timeout(deadline, client.call(req))
            .await
            .map_err(|_| timed_out(name, &self.address, deadline))?
            .map_err(|s| from_status(name, &self.address, s))?;
        let ack = Acknowledgement::from_metadata(response.metadata());
        match response.into_inner() {
            Reply::Error(e) => Err(e.into()),
            other => Ok((other, ack)),
        }
    }

    /// Opens `request`'s scan, waiting at most `deadline` for the server to answer, and
    /// streams its rows; each page is awaited at most `deadline` too.
    pub async fn scan(
        &self,
        request: ScanRequest,
        deadline: Duration,
    ) -> Result<impl Stream<Item = Result<RowResult>> + Send + Unpin + 'static> {
        let address = self.address.clone();
        fits("scan", &address, &request)?;
        let mut client = self.client.clone();
        let pages = tokio::time::timeout(deadline, client.scan(tonic::Request::new(request)))
            .await
            .map_err(|_| timed_out("scan", &address, deadline))?
            .map_err(|s| from_status("scan", &address, s))?
            .into_inner();
        let state = (pages, address, false);
        let rows = futures::stream::unfold(state, move |(mut pages, address, done)| async move {
            if done {
                return None;
            }
            let next = tokio::time::timeout(deadline, pages.message()).await;
            let item: Result<Option<Vec<RowResult>>> = match next {
                Err(_) => Err(timed_out("scan", &address, deadline)),
                Ok(Err(s)) => Err(from_status("scan", &address, s)),
                Ok(Ok(None)) => Ok(None),
                Ok(Ok(Some(ScanPage::Rows(rows)))) => Ok(Some(rows)),
                Ok(Ok(Some(ScanPage::Error(e)))) => Err(e.into()),
            };
            match item {
                Ok(None) => None,
                Ok(Some(rows)) => Some((
                    futures::stream::iter(rows.into_iter().map(Ok)).left_stream(),
                    (pages, address, false),
                )),
                Err(e) => Some((
                    futures::stream::iter([Err(e)]).right_stream(),
                    (pages, address, true),
                )),
            }
        })
        .flatten();
        Ok(Box::pin(rows))
    }
}

/// Refuses a request larger than [`MAX_MESSAGE_BYTES`] before it is sent, as
/// [`Error::BadArgument`]: tonic's encoder would refuse it too, but half way through the
/// request's body, and the client would then see only the stream's reset ("h2 protocol
/// error"), not why.
fn fits<T: serde::Serialize>(call: &str, address: &str, request: &T) -> Result<()> {
    let size = postcard::experimental::serialized_size(request)
        .map_err(|e| Error::bad_argument(format!("{call} to {address}: cannot encode: {e}")))?;
    if size > MAX_MESSAGE_BYTES {
        return Err(Error::bad_argument(format!(
            "{call} to {address}: the request is too large: {size} bytes, the limit is \
             {MAX_MESSAGE_BYTES} bytes"
        )));
    }
    Ok(())
}

/// The error of a call that passed its deadline.
fn timed_out(call: &str, address: &str, deadline: Duration) -> Error {
    Error::Io(std::io::Error::new(
        ErrorKind::TimedOut,
        format!("{call} to {address}: no answer within {deadline:?}"),
    ))
}

/// The error of a reply of the wrong kind (a server of another protocol).
pub(crate) fn unexpected(call: &str, reply: &Reply) -> Error {
    let kind = format!("{reply:?}");
    let kind = kind.split(['(', ' ', '{']).next().unwrap_or("?");
    Error::Io(std::io::Error::new(
        ErrorKind::InvalidData,
        format!("{call}: the server answered {kind}"),
    ))
}

/// What a gRPC status means to a caller.
pub(crate) fn from_status(call: &str, address: &str, status: Status) -> Error {
    let msg = format!("{call} to {address}: {}", status.message());
    match status.code() {
        Code::InvalidArgument | Code::OutOfRange | Code::ResourceExhausted => {
            Error::BadArgument(msg)
        }
        Code::DeadlineExceeded | Code::Cancelled => {
            Error::Io(std::io::Error::new(ErrorKind::TimedOut, msg))
        }
        Code::Unavailable if never_sent(&status) => {
            Error::Io(std::io::Error::new(ErrorKind::ConnectionRefused, msg))
        }
        // The connection broke with the call sent: it may have been applied.
        Code::Unavailable => Error::Io(std::io::Error::new(ErrorKind::ConnectionAborted, msg)),
        _ => Error::Io(std::io::Error::other(msg)),
    }
}

/// Whether an `Unavailable` status means the call never reached a server: no connection
/// could be made (refused, unreachable, or the connection attempt failed). Anything else
/// may have been sent.
fn never_sent(status: &Status) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                ErrorKind::ConnectionRefused
                    | ErrorKind::NotConnected
                    | ErrorKind::AddrNotAvailable
                    | ErrorKind::HostUnreachable
                    | ErrorKind::NetworkUnreachable
            ) {
                return true;
            }
        }
        if connect_phase(&e.to_string()) {
            return true;
        }
        cause = e.source();
    }
    connect_phase(status.message())
}

/// Whether an error's text is one hyper and tonic give a connection that could not be
/// made ("tcp connect error", "error trying to connect", "dns error"), as opposed to one
/// that broke after a call was sent ("connection error", "connection reset", "connection
/// closed before message completed").
fn connect_phase(text: &str) -> bool {
    ["tcp connect error", "error trying to connect", "dns error"]
        .iter()
        .any(|t| text.contains(t))
}
