//! One client connection: detecting its transport (framed or buffered) and protocol (binary
//! or compact) from its first bytes, unless the server forces them; reading its messages
//! within the limits; and running the generated processor over them until the client
//! leaves, idles past the read timeout, or sends something malformed.
//!
//! Invariants: no read allocates more than the limits allow (a frame's length is checked
//! before its buffer is made, an unframed message's bytes are counted, and the protocol's
//! configuration bounds strings, containers and nesting before allocating); whatever a
//! client sends ends at worst its own connection, with one logged line saying why.

use super::guard::{Budget, Watched};
use super::metrics::GatewayMetrics;
use super::{Protocol, ServeOptions, Transport};
use basalt_thrift::hbase::{HbaseSyncHandler, HbaseSyncProcessor};
use std::io::{BufReader, Cursor, Read};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thrift::protocol::{
    TBinaryInputProtocol, TBinaryOutputProtocol, TCompactInputProtocol, TCompactOutputProtocol,
    TInputProtocol, TOutputProtocol, TType,
};
use thrift::server::TProcessor;
use thrift::transport::{TBufferedWriteTransport, TFramedWriteTransport};
use thrift::TConfiguration;

/// The first byte of a strict binary message (version 0x8001, high byte).
const BINARY_FIRST: u8 = 0x80;
/// The first byte of a compact message (protocol id).
const COMPACT_FIRST: u8 = 0x82;

/// What a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wire {
    pub(crate) transport: Transport,
    pub(crate) protocol: Protocol,
}

/// Detects the wire from the first bytes: `0x80` strict binary and `0x82` compact, both
/// unframed; otherwise a frame length, then `0x80 0x01` or `0x82` after it. Returns the
/// bytes read so far, which the message reader serves first.
fn detect(stream: &mut TcpStream, opts: &ServeOptions) -> Result<(Wire, Vec<u8>), String> {
    let mut first = [0u8; 1];
    stream
        .read_exact(&mut first)
        .map_err(|e| format!("no request: {e}"))?;
    let mut seen = first.to_vec();
    let unframed = match first[0] {
        BINARY_FIRST => Some(Protocol::Binary),
        COMPACT_FIRST => Some(Protocol::Compact),
        _ => None,
    };
    let wire = match (unframed, opts.transport, opts.protocol) {
        (Some(p), None | Some(Transport::Buffered), forced) => Wire {
            transport: Transport::Buffered,
            protocol: forced.unwrap_or(p),
        },
        (_, Some(Transport::Framed), Some(p)) => Wire {
            transport: Transport::Framed,
            protocol: p,
        },
        (Some(_), Some(Transport::Framed), None) | (None, _, _) => {
            // A frame: 4 length bytes, then the message's first bytes.
            let mut rest = [0u8; 5];
            stream
                .read_exact(&mut rest)
                .map_err(|e| format!("truncated first frame: {e}"))?;
            seen.extend_from_slice(&rest);
            let protocol = match (rest[3], rest[4]) {
                (BINARY_FIRST, 0x01) => Protocol::Binary,
                (COMPACT_FIRST, _) => Protocol::Compact,
                _ => {
                    return Err(format!(
                        "unrecognized first bytes {seen:02x?}: neither Thrift binary nor compact, framed or not"
                    ))
                }
            };
            if opts.transport == Some(Transport::Buffered) {
                return Err("framed request on a server forced to buffered transport".into());
            }
            Wire {
                transport: Transport::Framed,
                protocol: opts.protocol.unwrap_or(protocol),
            }
        }
    };
    Ok((wire, seen))
}

/// The socket read buffer of a connection, in bytes.
const READ_BUFFER: usize = 16 * 1024;
/// The unframed write buffer of a connection, in bytes (full, it is sent; a reply is sent
/// whole at its end). The framed transport holds a whole frame anyway.
const WRITE_BUFFER: usize = 64 * 1024;

/// The incoming bytes of a connection: the detected prefix, then the socket; frames are
/// read whole after their length is checked; a message's bytes are counted (through `used`,
/// reset before each message) and an unframed one's held against the message limit. The socket is read
/// through a buffer of [`READ_BUFFER`] bytes: the protocols read field by field, and an
/// unbuffered socket would cost a system call for each (happybase batch puts: 0.11x of the Rust
/// API unbuffered; see docs/BENCHMARKS.md, `gateway`).
struct Inbound {
    source: std::io::Chain<Cursor<Vec<u8>>, BufReader<TcpStream>>,
    framed: bool,
    frame: Vec<u8>,
    at: usize,
    max: usize,
    /// The bytes of the current message read so far (reset before each message).
    used: Arc<AtomicUsize>,
    /// The most bytes the current message can have: its frame's length, or the message
    /// limit unframed.
    window: Arc<AtomicUsize>,
    /// Until the first request is complete: its deadline.
    first: Option<FirstRequest>,
}

/// The deadline of a connection's first complete request.
struct FirstRequest {
    deadline: Instant,
    /// The connection's socket, whose read timeout follows the deadline.
    socket: TcpStream,
    /// Set by the connection once the first request is complete.
    answered: Arc<AtomicBool>,
    /// The read timeout once it is.
    read_timeout: Duration,
    /// The read timeout last set, to set it again only when it shrank by a tenth of a second.
    set: Duration,
}

impl Inbound {
    /// Fails once the first request's deadline passed; until then each read waits at most
    /// until it.
    fn check_deadline(&mut self) -> std::io::Result<()> {
        let Some(f) = &mut self.first else {
            return Ok(());
        };
        if f.answered.load(Ordering::SeqCst) {
            f.socket.set_read_timeout(Some(f.read_timeout))?;
            self.first = None;
            return Ok(());
        }
        let left = f.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                NO_FIRST_REQUEST,
            ));
        }
        if f.set.saturating_sub(left) >= Duration::from_millis(100) {
            f.socket.set_read_timeout(Some(left))?;
            f.set = left;
        }
        Ok(())
    }
}

/// Why a connection that sent no complete first request in time was closed.
const NO_FIRST_REQUEST: &str = "no complete first request within the first-request timeout";

impl Inbound {
    fn next_frame(&mut self) -> std::io::Result<()> {
        self.check_deadline()?;
        let mut len = [0u8; 4];
        self.source.read_exact(&mut len)?;
        let len = i32::from_be_bytes(len);
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l > 0 && l <= self.max)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("frame length {len} outside 1..={}", self.max),
                )
            })?;
        // Read as the bytes come (the buffer grows with them): a client announcing a large
        // frame and then stalling holds no more memory than it sent; the first request's
        // deadline is checked between reads, so trickling a frame does not outlast it.
        self.frame.clear();
        let mut chunk = [0u8; 16 * 1024];
        while self.frame.len() < len {
            self.check_deadline()?;
            let want = chunk.len().min(len - self.frame.len());
            let n = self.source.read(&mut chunk[..want])?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("frame of {len} bytes cut after {}", self.frame.len()),
                ));
            }
            self.frame.extend_from_slice(&chunk[..n]);
        }
        self.window.store(len, Ordering::Relaxed);
        self.at = 0;
        if self.frame.capacity() > 64 * 1024 && len < 16 * 1024 {
            self.frame.shrink_to(64 * 1024); // keep an idle connection small
        }
        Ok(())
    }
}

impl Read for Inbound {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.framed {
            if self.at >= self.frame.len() {
                self.next_frame()?;
            }
            let n = buf.len().min(self.frame.len() - self.at);
            buf[..n].copy_from_slice(&self.frame[self.at..self.at + n]);
            self.at += n;
            self.used.fetch_add(n, Ordering::Relaxed);
            return Ok(n);
        }
        self.check_deadline()?;
        let used = self.used.load(Ordering::Relaxed);
        let left = self.max.saturating_sub(used);
        if left == 0 && !buf.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("message longer than {} bytes", self.max),
            ));
        }
        let cap = buf.len().min(left);
        let n = self.source.read(&mut buf[..cap])?;
        self.used.store(used + n, Ordering::Relaxed);
        Ok(n)
    }
}

/// The limits the protocol objects enforce before allocating.
fn config(opts: &ServeOptions) -> thrift::Result<TConfiguration> {
    TConfiguration::builder()
        .max_message_size(Some(opts.max_message_bytes))
        .max_frame_size(Some(opts.max_message_bytes))
        .max_string_size(Some(opts.max_message_bytes))
        .max_container_size(Some(opts.max_container_len))
        .max_recursion_depth(Some(opts.max_depth))
        .build()
}

/// Serves one connection to its end; returns why it ended (for the log).
pub(crate) fn serve<H: HbaseSyncHandler>(
    stream: TcpStream,
    peer: SocketAddr,
    opts: &ServeOptions,
    processor: &HbaseSyncProcessor<H>,
    metrics: &GatewayMetrics,
    answered: &Arc<AtomicBool>,
) -> String {
    let why = serve_requests(stream, peer, opts, processor, metrics, answered);
    if why.starts_with(IDLE) || why.contains(NO_FIRST_REQUEST) {
        metrics.timed_out.inc();
    }
    why
}

/// How the reason of a connection closed by its read timeout starts.
const IDLE: &str = "idle past the read timeout";

fn serve_requests<H: HbaseSyncHandler>(
    mut stream: TcpStream,
    peer: SocketAddr,
    opts: &ServeOptions,
    processor: &HbaseSyncProcessor<H>,
    metrics: &GatewayMetrics,
    answered: &Arc<AtomicBool>,
) -> String {
    let deadline = Instant::now() + opts.first_request_timeout;
    let first_wait = opts.first_request_timeout.min(opts.read_timeout);
    if let Err(e) = stream.set_read_timeout(Some(first_wait)) {
        return format!("cannot set read timeout: {e}");
    }
    let _ = stream.set_nodelay(true);
    let (wire, prefix) = match detect(&mut stream, opts) {
        Ok(x) => x,
        Err(reason) if Instant::now() >= deadline => {
            return format!("{reason}: {NO_FIRST_REQUEST}")
        }
        Err(reason) => return reason,
    };
    let first = match stream.try_clone() {
        Ok(socket) => FirstRequest {
            deadline,
            socket,
            answered: answered.clone(),
            read_timeout: opts.read_timeout,
            set: first_wait,
        },
        Err(e) => return format!("cannot clone socket: {e}"),
    };
    tracing::debug!(%peer, ?wire, "connection");
    let write_half = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => return format!("cannot clone socket: {e}"),
    };
    let used = Arc::new(AtomicUsize::new(0));
    let window = Arc::new(AtomicUsize::new(opts.max_message_bytes));
    let inbound = Inbound {
        source: Cursor::new(prefix).chain(BufReader::with_capacity(READ_BUFFER, stream)),
        framed: wire.transport == Transport::Framed,
        frame: Vec::new(),
        at: 0,
        max: opts.max_message_bytes,
        used: used.clone(),
        window: window.clone(),
        first: Some(first),
    };
    let cfg = match config(opts) {
        Ok(c) => c,
        Err(e) => return format!("bad limits: {e}"),
    };
    let out: Box<dyn thrift::transport::TWriteTransport> = match wire.transport {
        Transport::Framed => Box::new(TFramedWriteTransport::new(write_half)),
        Transport::Buffered => Box::new(TBufferedWriteTransport::with_capacity(
            WRITE_BUFFER,
            write_half,
        )),
    };
    let (mut i_prot, mut o_prot): (Box<dyn TInputProtocol>, Box<dyn TOutputProtocol>) =
        match wire.protocol {
            Protocol::Binary => (
                Box::new(TBinaryInputProtocol::with_config(
                    inbound,
                    true,
                    cfg.clone(),
                )),
                Box::new(TBinaryOutputProtocol::with_config(out, true, cfg)),
            ),
            Protocol::Compact => (
                Box::new(TCompactInputProtocol::with_config(inbound, cfg.clone())),
                Box::new(TCompactOutputProtocol::with_config(out, cfg)),
            ),
        };
    loop {
        used.store(0, Ordering::Relaxed);
        let header = match i_prot.read_message_begin() {
            Ok(h) => h,
            Err(e) => return ended(&e, opts),
        };
        let budget = Budget::new(&used, &window);
        let mut watched = Watched::new(&mut *i_prot, header, budget, answered);
        let result = processor.process(&mut watched, &mut *o_prot);
        let (args_read, failed) = (watched.args_read, watched.failed.take());
        let call = super::calls::take();
        if let Some(why) = failed {
            return format!("malformed request: {why}");
        }
        if let Err(e) = result {
            return ended(&e, opts);
        }
        match call {
            Some(call) => {
                let elapsed = call.started.elapsed();
                metrics.observe(&call, elapsed);
                let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
                let (method, table, failed) = (call.method, call.table, call.failed);
                tracing::debug!(%peer, method, table, failed, micros, "request");
            }
            None => {
                metrics.unknown_method();
                tracing::debug!(%peer, "request for an unknown method");
            }
        }
        if !args_read {
            // Answered without reading its arguments (an unknown method): skip them.
            if let Err(e) = i_prot.skip(TType::Struct) {
                return format!("malformed request: {e}");
            }
            answered.store(true, Ordering::SeqCst);
        }
    }
}

/// Why a connection ended, from the error that ended it.
fn ended(e: &thrift::Error, opts: &ServeOptions) -> String {
    match e {
        thrift::Error::Transport(t) if t.kind == thrift::TransportErrorKind::EndOfFile => {
            "closed by the client".to_string()
        }
        thrift::Error::Transport(t) if t.message.contains(NO_FIRST_REQUEST) => {
            format!("{NO_FIRST_REQUEST} ({:?})", opts.first_request_timeout)
        }
        thrift::Error::Transport(t)
            if t.kind == thrift::TransportErrorKind::TimedOut
                || t.message.contains("timed out")
                || t.message.contains("Resource temporarily unavailable") =>
        {
            format!("{IDLE} ({:?})", opts.read_timeout)
        }
        e => format!("malformed request: {e}"),
    }
}
