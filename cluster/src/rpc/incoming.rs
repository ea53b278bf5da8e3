//! The RPC port's connections before gRPC sees them: at most
//! [`RpcLimits::max_connections`] at once, and each must send HTTP/2's connection preface
//! (its first 24 bytes) within [`RpcLimits::handshake_timeout`], or it is closed, as the
//! Thrift gateway bounds its connections and their first request.
//!
//! When the port is full, the oldest connection still waiting for its preface makes room
//! for the new one, so silent connections hold places only until newer ones need them;
//! when every connection open has sent its preface, the new one is closed at once (and
//! counted in the log, at most once a second).
//!
//! Invariants: the count of open connections is the number of connections accepted and
//! not yet closed, never above the limit: a connection handed to gRPC holds its place
//! until it is dropped, one waiting for its preface until it is admitted, times out, ends
//! or is evicted (its place then passes to the connection that evicted it); all of it
//! under one lock, so a connection is counted exactly once whichever happens first. The
//! listener belongs to the stream [`admit`] returns: when the server drops it (it
//! stopped), the port closes at once and the connections still waiting are closed.

use futures::Stream;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
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

/// A connection admitted to gRPC, its preface read already (and given to gRPC first); its
/// place is given back when it is dropped.
#[derive(Debug)]
pub struct Admitted {
    stream: TcpStream,
    preface: [u8; PREFACE_BYTES],
    replayed: usize,
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
        let this = &mut *self;
        if this.replayed < PREFACE_BYTES {
            let rest = &this.preface[this.replayed..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.replayed += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
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
/// doc). The listener closes when the stream is dropped.
pub fn admit(listener: TcpListener, limits: RpcLimits) -> Incoming {
    let (tx, rx) = mpsc::channel(64);
    Incoming {
        listener,
        limits,
        places: Arc::default(),
        tx,
        rx,
        backoff: None,
        failures: 0,
        refused: 0,
        logged: Instant::now(),
    }
}

/// The stream of admitted connections [`admit`] returns.
#[derive(Debug)]
pub struct Incoming {
    listener: TcpListener,
    limits: RpcLimits,
    places: Shared,
    /// Handshakes send admitted connections here (and notice the stream gone).
    tx: mpsc::Sender<Admitted>,
    rx: mpsc::Receiver<Admitted>,
    /// While accepting failed (out of descriptors, most likely): when to try again.
    backoff: Option<Pin<Box<tokio::time::Sleep>>>,
    failures: u32,
    refused: u64,
    logged: Instant,
}

impl Incoming {
    /// Takes in one accepted connection: a place and a handshake, or closed.
    fn take_in(&mut self, stream: TcpStream) {
        let Some((id, evicted)) = take_place(&self.places, self.limits.max_connections) else {
            self.refused += 1;
            if self.logged.elapsed() >= Duration::from_secs(1) {
                tracing::warn!(
                    "RPC port: refused {} connection(s): {} open, all past their handshake",
                    self.refused,
                    self.limits.max_connections
                );
                self.logged = Instant::now();
                self.refused = 0;
            }
            return;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(handshake(
            stream,
            id,
            evicted,
            Arc::clone(&self.places),
            self.limits.handshake_timeout,
            self.tx.clone(),
        ));
    }
}

impl Stream for Incoming {
    type Item = io::Result<Admitted>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(sleep) = &mut this.backoff {
                if sleep.as_mut().poll(cx).is_pending() {
                    break;
                }
                this.backoff = None;
            }
            match this.listener.poll_accept(cx) {
                Poll::Ready(Ok((stream, _))) => {
                    this.failures = 0;
                    this.take_in(stream);
                }
                Poll::Ready(Err(e)) => {
                    if this.logged.elapsed() >= Duration::from_secs(1) {
                        tracing::warn!("RPC port: accept failed: {e}");
                        this.logged = Instant::now();
                    }
                    let wait = Duration::from_millis(10u64 << this.failures.min(6));
                    this.failures = this.failures.saturating_add(1);
                    this.backoff = Some(Box::pin(tokio::time::sleep(wait)));
                }
                Poll::Pending => break,
            }
        }
        this.rx.poll_recv(cx).map(|c| c.map(Ok))
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

/// Reads `stream`'s preface, then hands it to gRPC; closes it on a timeout, an early end,
/// an eviction or the server's stop.
async fn handshake(
    mut stream: TcpStream,
    id: u64,
    evicted: oneshot::Receiver<()>,
    places: Shared,
    timeout: Duration,
    admitted: mpsc::Sender<Admitted>,
) {
    let mut preface = [0u8; PREFACE_BYTES];
    let sent = tokio::select! {
        r = tokio::time::timeout(timeout, stream.read_exact(&mut preface)) => matches!(r, Ok(Ok(_))),
        _ = evicted => false,
        _ = admitted.closed() => false,
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
            preface,
            replayed: 0,
            places: Arc::clone(&places),
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    /// A port within `limits`, its stream driven as gRPC drives it (polled all the time)
    /// by a task whose abort drops it; the admitted connections come out of the receiver.
    async fn port(
        limits: RpcLimits,
    ) -> (
        String,
        mpsc::UnboundedReceiver<Admitted>,
        tokio::task::JoinHandle<()>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap().to_string();
        let mut incoming = admit(listener, limits);
        let (tx, rx) = mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            while let Some(Ok(c)) = incoming.next().await {
                let _ = tx.send(c);
            }
        });
        (at, rx, driver)
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
        let (at, mut admitted, _driver) = port(RpcLimits::default()).await;
        let mut c = TcpStream::connect(&at).await.unwrap();
        c.write_all(&PREFACE[..10]).await.unwrap();
        let early = tokio::time::timeout(Duration::from_millis(200), admitted.recv()).await;
        assert!(early.is_err(), "admitted before its whole preface");
        c.write_all(&PREFACE[10..]).await.unwrap();
        c.write_all(b"then frames").await.unwrap();
        let mut a = admitted.recv().await.unwrap();
        // The preface is still there for gRPC to read, then what followed it.
        let mut got = [0u8; PREFACE_BYTES + 11];
        a.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..PREFACE_BYTES], PREFACE);
        assert_eq!(&got[PREFACE_BYTES..], b"then frames");
    }

    #[tokio::test]
    async fn dropping_the_stream_closes_the_port_and_the_waiting() {
        let (at, _admitted, driver) = port(RpcLimits::default()).await;
        let mut waiting = TcpStream::connect(&at).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        driver.abort();
        let _ = driver.await;
        assert!(closed(&mut waiting, Duration::from_secs(3)).await);
        assert!(TcpStream::connect(&at).await.is_err(), "the port is closed");
    }

    #[tokio::test]
    async fn a_silent_connection_is_closed_after_the_timeout() {
        let limits = RpcLimits {
            max_connections: 4,
            handshake_timeout: Duration::from_millis(300),
        };
        let (at, _admitted, _driver) = port(limits).await;
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
        let (at, mut admitted, _driver) = port(limits).await;
        // Two served connections, one silent: the port is full.
        let mut served = Vec::new();
        for _ in 0..2 {
            let mut c = TcpStream::connect(&at).await.unwrap();
            c.write_all(PREFACE).await.unwrap();
            served.push((c, admitted.recv().await.unwrap()));
        }
        let mut silent = TcpStream::connect(&at).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A new client evicts the silent one, not a served one, and is admitted.
        let mut newcomer = TcpStream::connect(&at).await.unwrap();
        newcomer.write_all(PREFACE).await.unwrap();
        assert!(closed(&mut silent, Duration::from_secs(3)).await);
        let third = admitted.recv().await.unwrap();
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
        let admitted_later = tokio::time::timeout(Duration::from_secs(3), admitted.recv()).await;
        assert!(matches!(admitted_later, Ok(Some(_))));
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
