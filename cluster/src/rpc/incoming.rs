//! The RPC port's connections before gRPC sees them: at most
//! [`RpcLimits::max_connections`] at once, and each must send HTTP/2's connection preface
//! (its first 24 bytes) within [`RpcLimits::handshake_timeout`], or it is closed, as the
//! Thrift gateway bounds its connections and their first request.
//!
//! When the port is full, the oldest connection still waiting for its preface makes room
//! for the new one (a flood of silent connections cannot keep a client out for longer than
//! it takes to accept it); when every connection open has sent its preface, the new one is
//! closed at once (and counted in the log, at most once a second).
//!
//! Invariants: the count of open connections is the number of connections accepted and
//! not yet closed, never above the limit: a connection handed to gRPC holds its place
//! until it is dropped, one waiting for its preface until it is admitted, times out, ends
//! or is evicted (its place then passes to the connection that evicted it); all of it
//! under one lock, so a connection is counted exactly once whichever happens first.

use futures::Stream;
use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// HTTP/2's connection preface, which every gRPC client sends first.
const PREFACE_BYTES: usize = 24;

/// The bounds of the RPC port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcLimits {
    /// Connections open at once (waiting for their preface or served).
    pub max_connections: usize,
    /// How long a new connection has to send HTTP/2's preface.
    pub handshake_timeout: Duration,
}

impl Default for RpcLimits {
    /// 1024 connections, 10 s for the preface.
    fn default() -> Self {
        RpcLimits {
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// The port's count, and the connections still waiting for their preface (by arrival).
#[derive(Debug, Default)]
struct Places {
    open: usize,
    waiting: BTreeMap<u64, oneshot::Sender<()>>,
    next: u64,
}

type Shared = Arc<Mutex<Places>>;

/// A connection admitted to gRPC; its place is given back when it is dropped.
#[derive(Debug)]
pub struct Admitted {
    stream: TcpStream,
    places: Shared,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Ok(mut p) = self.places.lock() {
            p.open = p.open.saturating_sub(1);
        }
    }
}

impl AsyncRead for Admitted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Connected for Admitted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

/// The connections of `listener` that sent their preface, within `limits` (see the module
/// doc). Accepting stops when the stream is dropped.
pub fn admit(
    listener: TcpListener,
    limits: RpcLimits,
) -> impl Stream<Item = io::Result<Admitted>> + Send + 'static {
    let (tx, mut rx) = mpsc::channel::<Admitted>(64);
    tokio::spawn(accept(listener, limits, tx));
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|c| c.map(Ok)))
}

/// Accepts until `admitted` is closed (the server stopped).
async fn accept(listener: TcpListener, limits: RpcLimits, admitted: mpsc::Sender<Admitted>) {
    let places: Shared = Arc::default();
    let mut refused = 0u64;
    let mut logged = Instant::now();
    let mut failures = 0u32;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = admitted.closed() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                failures = 0;
                stream
            }
            Err(e) => {
                // Out of descriptors, most likely: back off, log rarely.
                if logged.elapsed() >= Duration::from_secs(1) {
                    tracing::warn!("RPC port: accept failed: {e}");
                    logged = Instant::now();
                }
                let backoff = Duration::from_millis(10u64 << failures.min(6));
                tokio::time::sleep(backoff).await;
                failures = failures.saturating_add(1);
                continue;
            }
        };
        let Some((id, evicted)) = take_place(&places, limits.max_connections) else {
            refused += 1;
            if logged.elapsed() >= Duration::from_secs(1) {
                tracing::warn!(
                    "RPC port: refused {refused} connection(s): {} open, all past their handshake",
                    limits.max_connections
                );
                logged = Instant::now();
                refused = 0;
            }
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(handshake(
            stream,
            id,
            evicted,
            Arc::clone(&places),
            limits.handshake_timeout,
            admitted.clone(),
        ));
    }
}

/// A place for a new connection: a free one, or the oldest waiting connection's (told to
/// leave); `None` when every open connection is past its preface.
fn take_place(places: &Shared, max: usize) -> Option<(u64, oneshot::Receiver<()>)> {
    let mut p = places.lock().ok()?;
    if p.open >= max {
        let (_, leave) = p.waiting.pop_first()?;
        let _ = leave.send(());
    } else {
        p.open += 1;
    }
    let id = p.next;
    p.next += 1;
    let (tell, evicted) = oneshot::channel();
    p.waiting.insert(id, tell);
    Some((id, evicted))
}

/// Waits for `stream`'s preface, then hands it to gRPC; closes it on a timeout, an early
/// end or an eviction.
async fn handshake(
    stream: TcpStream,
    id: u64,
    evicted: oneshot::Receiver<()>,
    places: Shared,
    timeout: Duration,
    admitted: mpsc::Sender<Admitted>,
) {
    let sent = tokio::select! {
        r = tokio::time::timeout(timeout, preface_arrived(&stream)) => matches!(r, Ok(true)),
        _ = evicted => false,
    };
    // Settled under the lock, released before the hand-over waits.
    {
        let Ok(mut p) = places.lock() else {
            return;
        };
        if p.waiting.remove(&id).is_none() {
            // Evicted: its place went to the connection that evicted it.
            return;
        }
        if !sent {
            p.open = p.open.saturating_sub(1);
            return;
        }
    }
    // Dropped (and its place given back) if the server stopped meanwhile.
    let _ = admitted
        .send(Admitted {
            stream,
            places: Arc::clone(&places),
        })
        .await;
}

/// Whether `stream` has [`PREFACE_BYTES`] bytes to read (false once it ended first). Only
/// peeks: gRPC reads them.
async fn preface_arrived(stream: &TcpStream) -> bool {
    let mut buf = [0u8; PREFACE_BYTES];
    loop {
        match stream.peek(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if n >= PREFACE_BYTES => return true,
            Ok(_) => {
                // Part of it: wait for more (peek returns at once while bytes wait).
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    async fn port(
        limits: RpcLimits,
    ) -> (
        String,
        Pin<Box<dyn Stream<Item = io::Result<Admitted>> + Send>>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap().to_string();
        (at, Box::pin(admit(listener, limits)))
    }

    /// Whether the server closed `s` within `within`.
    async fn closed(s: &mut TcpStream, within: Duration) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(within, s.read(&mut b)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[tokio::test]
    async fn a_connection_is_admitted_once_its_preface_came() {
        let (at, mut admitted) = port(RpcLimits::default()).await;
        let mut c = TcpStream::connect(&at).await.unwrap();
        c.write_all(&PREFACE[..10]).await.unwrap();
        let early = tokio::time::timeout(Duration::from_millis(200), admitted.next()).await;
        assert!(early.is_err(), "admitted before its whole preface");
        c.write_all(&PREFACE[10..]).await.unwrap();
        let mut a = admitted.next().await.unwrap().unwrap();
        // The preface is still there for gRPC to read.
        let mut got = [0u8; PREFACE_BYTES];
        a.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..], PREFACE);
    }

    #[tokio::test]
    async fn a_silent_connection_is_closed_after_the_timeout() {
        let limits = RpcLimits {
            max_connections: 4,
            handshake_timeout: Duration::from_millis(300),
        };
        let (at, _admitted) = port(limits).await;
        let mut c = TcpStream::connect(&at).await.unwrap();
        assert!(!closed(&mut c, Duration::from_millis(100)).await);
        assert!(closed(&mut c, Duration::from_secs(3)).await);
    }

    #[tokio::test]
    async fn silent_connections_make_room_and_served_ones_keep_theirs() {
        let limits = RpcLimits {
            max_connections: 3,
            handshake_timeout: Duration::from_secs(60),
        };
        let (at, mut admitted) = port(limits).await;
        // Two served connections, one silent: the port is full.
        let mut served = Vec::new();
        for _ in 0..2 {
            let mut c = TcpStream::connect(&at).await.unwrap();
            c.write_all(PREFACE).await.unwrap();
            served.push((c, admitted.next().await.unwrap().unwrap()));
        }
        let mut silent = TcpStream::connect(&at).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A new client evicts the silent one, not a served one, and is admitted.
        let mut newcomer = TcpStream::connect(&at).await.unwrap();
        newcomer.write_all(PREFACE).await.unwrap();
        assert!(closed(&mut silent, Duration::from_secs(3)).await);
        let third = admitted.next().await.unwrap().unwrap();
        // Now every place is held past its preface: one more is closed at once.
        let mut refused = TcpStream::connect(&at).await.unwrap();
        assert!(closed(&mut refused, Duration::from_secs(3)).await);
        for (c, _) in &mut served {
            assert!(!closed(c, Duration::from_millis(50)).await);
        }
        // A served connection dropped gives its place back.
        drop(third);
        drop(newcomer);
        let mut later = TcpStream::connect(&at).await.unwrap();
        later.write_all(PREFACE).await.unwrap();
        let admitted_later = tokio::time::timeout(Duration::from_secs(3), admitted.next()).await;
        assert!(matches!(admitted_later, Ok(Some(Ok(_)))));
    }

    #[test]
    fn places_never_exceed_the_limit() {
        let places: Shared = Arc::default();
        let mut taken = Vec::new();
        for _ in 0..100 {
            taken.push(take_place(&places, 8).unwrap());
            let p = places.lock().unwrap();
            assert!(p.open <= 8 && p.waiting.len() <= 8);
        }
        // The oldest 92 were told to leave, the newest 8 were not.
        for (i, (_, evicted)) in taken.iter_mut().enumerate() {
            assert_eq!(evicted.try_recv().is_ok(), i < 92, "connection {i}");
        }
    }
}
