//! Hostile input against a region server's RPC port (gRPC on tonic, issue 48): the kinds of
//! bytes `cli/tests/serve_hostile.rs` sends the Thrift port, sent to
//! `basalt_cluster::rpc::server::serve` over an embedded engine in this process.
//!
//! What it proves, case by case (one test each): (1) random bytes and HTTP/1 on raw TCP
//! connections are closed, 200 at once; (2) an HTTP/2 preface followed by garbage frames
//! (random bytes, random frames, an oversized frame, a CONTINUATION flood, a window
//! overflow) has its connection closed, and PING and SETTINGS floods from a client that
//! never reads do not make the server buffer; (3) a gRPC message header declaring 4 GiB - 1
//! bytes (or the limit plus one) is refused with `OutOfRange` at once, while the call stalls,
//! without the server reserving it; (4) a valid header around a postcard body that is
//! garbage, truncated at any byte or followed by a byte is refused with `InvalidArgument`,
//! and 400 fuzzed bodies get a status each (no panic, no dropped connection); (5) a message
//! one byte over `MAX_MESSAGE_BYTES` is refused (`BadArgument` at the client), one of exactly
//! the limit is decoded, and a reply over it is refused, the server serving on; (6) 400 silent
//! connections, 8 connections each opening 300 streams that never send a body (past the
//! server's 256 concurrent streams: the rest are refused) and a rapid-reset flood of 5,000
//! streams; (7) 20 scans of a 50 MB table whose clients never read: the server holds a few
//! pages each, not the table; (8) postcard requests of a few bytes that claim byte strings,
//! strings and vectors of up to 2^64 - 1 elements, a put whose columns run past its
//! buffer, and a filter nested 200,000 deep are refused with `InvalidArgument`, never
//! allocated.
//!
//! After each case a well-behaved `RpcClient` gets correct answers (a put then a get of its
//! row), on the connection it had before the case and on a new one, within 5 s. The memory
//! of this process (server and clients both) is sampled every 2 ms through the case from
//! `/proc/self/status`: the peak resident set (`VmRSS`) must grow by less than a bound far
//! below what honouring the hostile input would take, and the figures are printed (before,
//! peak, after, and the peak virtual size, which a reservation of a claimed length would
//! show even untouched). The cases run one at a time (memory is per process).

use basalt::client::{BatchOp, Get, Put, Scan};
use basalt::filter::Filter;
use basalt::{
    ColumnFamilyDescriptor, Durability, Error, TableDescriptor, TableName, LATEST_TIMESTAMP,
};
use basalt_cluster::rpc::client::RpcClient;
use basalt_cluster::rpc::incoming::RpcLimits;
use basalt_cluster::rpc::messages::{Reply, Request, ScanRequest};
use basalt_cluster::rpc::server::{serve_rpc_within, RegionRpc};
use basalt_cluster::rpc::MAX_MESSAGE_BYTES;
use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The good client's table (family `cf`).
const TABLE: &str = "t";
/// How long the good client may wait for an answer after a case.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// How long the server may take to close a hostile connection or to answer a hostile call.
const REFUSE_WITHIN: Duration = Duration::from_secs(5);
const MIB: u64 = 1 << 20;

// ---- The server, the good client and the memory watch -----------------------------------

/// The cases measure this process's memory: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The RPC server over an embedded engine, on a runtime of its own (as in a server process),
/// with table `t` created.
struct Server {
    addr: String,
    runtime: Option<tokio::runtime::Runtime>,
    conn: Option<basalt::Connection<basalt::Engine>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<basalt::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// The server, its port within `limits`.
    fn start_within(limits: RpcLimits) -> Server {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rpc-server")
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (conn, listener) = runtime.block_on(async {
            let conn = basalt::Connection::open(dir.path()).await.unwrap();
            let desc = TableDescriptor::new(TableName::parse(TABLE).unwrap())
                .family(ColumnFamilyDescriptor::new("cf"));
            conn.admin().create_table(desc).await.unwrap();
            (conn, TcpListener::bind("127.0.0.1:0").await.unwrap())
        });
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = runtime.spawn(serve_rpc_within(
            RegionRpc::new(conn.engine().clone(), "hostile-test"),
            listener,
            limits,
            async move {
                let _ = stopped.await;
            },
        ));
        Server {
            addr,
            runtime: Some(runtime),
            conn: Some(conn),
            stop: Some(stop),
            served: Some(served),
            _dir: dir,
        }
    }

    /// The server is still serving (it never gave up on its own); it stops gracefully and
    /// the engine closes cleanly.
    fn stop(mut self) {
        let runtime = self.runtime.take().unwrap();
        let served = self.served.take().unwrap();
        assert!(!served.is_finished(), "the RPC server stopped on its own");
        let _ = self.stop.take().unwrap().send(());
        let conn = self.conn.take().unwrap();
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), served)
                .await
                .expect("the server did not stop within 10 s")
                .unwrap()
                .unwrap();
            conn.close().await.unwrap();
        });
        runtime.shutdown_timeout(Duration::from_secs(5));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background(); // a failed case leaves nothing running
        }
    }
}

/// Runs one case: a server, the case on a client runtime of its own (whose connections all
/// close when it ends), then the server's graceful stop.
fn case<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    case_within(RpcLimits::default(), test)
}

/// [`case`], the server's port within `limits`.
fn case_within<F, Fut>(limits: RpcLimits, test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let _serial = serial();
    let server = Server::start_within(limits);
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rpc-clients")
        .enable_all()
        .build()
        .unwrap();
    clients.block_on(test(server.addr.clone()));
    clients.shutdown_timeout(Duration::from_secs(5));
    server.stop();
}

/// A well-behaved client, connected before the hostile input arrives.
struct Good {
    addr: String,
    client: RpcClient,
}

impl Good {
    async fn connect(addr: &str) -> Good {
        let client = RpcClient::new(addr).unwrap();
        round_trip(&client, "setup").await.unwrap();
        Good {
            addr: addr.to_string(),
            client,
        }
    }

    /// After `what`, a put then a get of its row are answered correctly within 5 s, on the
    /// good client's connection and on a new one.
    async fn still_answered(&self, what: &str) {
        let fresh = RpcClient::new(&self.addr).unwrap();
        for (which, client) in [("its connection", &self.client), ("a new one", &fresh)] {
            let row = format!("{what} ({which})");
            match tokio::time::timeout(ANSWER_WITHIN, round_trip(client, &row)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("after {what}, the good client on {which} failed: {e}"),
                Err(_) => panic!("after {what}, the good client on {which} got no answer"),
            }
        }
    }
}

fn table() -> TableName {
    TableName::parse(TABLE).unwrap()
}

/// A put of `row`, then a get that must read back its value.
async fn round_trip(client: &RpcClient, row: &str) -> Result<(), String> {
    let value = format!("the value of {row}");
    let put = Put::new(row).add_column("cf", "q", &value);
    match client.call(Request::Put(table(), put), ANSWER_WITHIN).await {
        Ok(Reply::Done) => {}
        other => return Err(format!("put: {other:?}")),
    }
    match client
        .call(Request::Get(table(), Get::new(row)), ANSWER_WITHIN)
        .await
    {
        Ok(Reply::Row(r)) if r.cells.len() == 1 && r.cells[0].value == value.as_bytes() => Ok(()),
        other => Err(format!("get: {other:?}")),
    }
}

/// A field of `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .strip_prefix(':')?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// This process's resident and virtual sizes, sampled every 2 ms while a case runs.
struct Memory {
    what: String,
    rss_before: u64,
    size_before: u64,
    peak_rss: Arc<AtomicU64>,
    peak_size: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    sampler: Option<std::thread::JoinHandle<()>>,
}

/// How much a case grew the process, in MiB.
#[derive(Debug)]
struct Growth {
    /// Of the peak resident set over the one before the case.
    rss: u64,
    /// Of the peak virtual size over the one before the case.
    size: u64,
}

impl Memory {
    fn watch(what: &str) -> Memory {
        let (rss_before, size_before) = (status_kib("VmRSS"), status_kib("VmSize"));
        let peak_rss = Arc::new(AtomicU64::new(rss_before));
        let peak_size = Arc::new(AtomicU64::new(size_before));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s, st) = (peak_rss.clone(), peak_size.clone(), stop.clone());
        let sampler = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                r.fetch_max(status_kib("VmRSS"), Ordering::SeqCst);
                s.fetch_max(status_kib("VmSize"), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Memory {
            what: what.to_string(),
            rss_before,
            size_before,
            peak_rss,
            peak_size,
            stop,
            sampler: Some(sampler),
        }
    }

    /// Stops sampling; prints the figures.
    fn done(mut self) -> Growth {
        self.stop.store(true, Ordering::SeqCst);
        self.sampler.take().unwrap().join().unwrap();
        let (rss_after, peak_rss) = (status_kib("VmRSS"), self.peak_rss.load(Ordering::SeqCst));
        let peak_size = self.peak_size.load(Ordering::SeqCst);
        let mib = |kib: u64| kib / 1024;
        println!(
            "{}: RSS {} MiB before, {} MiB peak, {} MiB after; virtual {} MiB before, {} MiB peak",
            self.what,
            mib(self.rss_before),
            mib(peak_rss),
            mib(rss_after),
            mib(self.size_before),
            mib(peak_size),
        );
        Growth {
            rss: mib(peak_rss.saturating_sub(self.rss_before)),
            size: mib(peak_size.saturating_sub(self.size_before)),
        }
    }
}

// ---- Raw bytes: TCP and HTTP/2 frames -----------------------------------------------------

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/2 frame: 24-bit length, type, flags, stream id, payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = u32::try_from(payload.len()).unwrap().to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;
const END_HEADERS: u8 = 0x4;
const REFUSED_STREAM: u32 = 0x7;

/// An HPACK header block (no Huffman coding, no indexing) for a gRPC call of `method`.
fn call_header_block(method: &str) -> Vec<u8> {
    fn string(b: &mut Vec<u8>, s: &str) {
        assert!(s.len() < 127);
        b.push(s.len() as u8);
        b.extend_from_slice(s.as_bytes());
    }
    let mut b = vec![0x83, 0x86]; // :method POST, :scheme http (static table 3 and 6)
    b.push(0x04); // :path (static 4), literal value
    string(&mut b, &format!("/basalt.RegionServer/{method}"));
    b.push(0x01); // :authority (static 1)
    string(&mut b, "localhost");
    b.extend_from_slice(&[0x0f, 0x10]); // content-type (static 31)
    string(&mut b, "application/grpc");
    b.push(0x00); // a new name
    string(&mut b, "te");
    string(&mut b, "trailers");
    b
}

/// The server closes `s` (EOF or reset) within `within`; answers before that (at most
/// 1 MiB) are read and dropped. Returns how many bytes it answered.
async fn closed_within(s: &mut TcpStream, within: Duration) -> Result<usize, String> {
    let mut buf = vec![0u8; 16 << 10];
    let mut answered = 0usize;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return Err(format!("still open after {within:?} ({answered} bytes)")),
            Ok(Ok(0)) => return Ok(answered),
            Ok(Ok(n)) => {
                answered += n;
                if answered > 1 << 20 {
                    return Err("an endless answer".into());
                }
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(answered),
            Ok(Err(e)) => return Err(e.to_string()),
        }
    }
}

/// Sends `bytes` on a new connection (as much as the server takes within 3 s) and expects
/// the server to close it.
async fn send_and_expect_closed(addr: &str, bytes: &[u8], what: &str) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    // The server may close before it reads everything.
    let _ = tokio::time::timeout(Duration::from_secs(3), s.write_all(bytes)).await;
    if let Err(e) = closed_within(&mut s, REFUSE_WITHIN).await {
        panic!("{what}: {e}");
    }
}

/// The frames the server sends on `s` within `within` (or until it closes).
async fn read_frames(s: &mut TcpStream, within: Duration) -> Vec<(u8, u32, Vec<u8>)> {
    let deadline = tokio::time::Instant::now() + within;
    let mut frames = Vec::new();
    loop {
        let mut head = [0u8; 9];
        match tokio::time::timeout_at(deadline, s.read_exact(&mut head)).await {
            Ok(Ok(_)) => {}
            _ => return frames,
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        match tokio::time::timeout_at(deadline, s.read_exact(&mut payload)).await {
            Ok(Ok(_)) => frames.push((head[3], stream, payload)),
            _ => return frames,
        }
    }
}

// ---- gRPC over the h2 crate's client ------------------------------------------------------

/// An HTTP/2 connection of the `h2` crate's client, which sends whatever it is given.
async fn h2_connect(addr: &str) -> h2::client::SendRequest<Bytes> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// Opens a gRPC call of `method` (`Call` or `Scan`), its body still to send.
async fn open_call(
    conn: &mut h2::client::SendRequest<Bytes>,
    addr: &str,
    method: &str,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/basalt.RegionServer/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut ready = conn.clone().ready().await.unwrap();
    ready.send_request(request, false).unwrap()
}

/// A gRPC message: not compressed, its length (big-endian), its bytes.
fn grpc_frame(message: &[u8]) -> Bytes {
    let mut f = vec![0u8];
    f.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    f.extend_from_slice(message);
    f.into()
}

/// What a call came back with.
#[derive(Debug)]
struct Answer {
    /// `grpc-status` (0 is OK).
    status: u32,
    /// `grpc-message`.
    message: String,
    /// The reply messages' bytes.
    data: Vec<u8>,
}

/// A percent-encoded `grpc-message`, decoded.
fn percent_decoded(s: &str) -> String {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        let hex = |b: Option<u8>| (b? as char).to_digit(16);
        match b {
            b'%' => {
                let (hi, lo) = (hex(bytes.next()), hex(bytes.next()));
                out.push((hi.unwrap_or(0) * 16 + lo.unwrap_or(0)) as u8);
            }
            b => out.push(b),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `grpc-status` and `grpc-message` of `headers`, if there.
fn grpc_status(headers: &http::HeaderMap) -> Option<(u32, String)> {
    let status = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .map(percent_decoded)
        .unwrap_or_default();
    Some((status, message))
}

/// Reads a call's answer (a trailers-only error, or replies then trailers) within 5 s.
async fn answer(response: h2::client::ResponseFuture) -> Result<Answer, String> {
    let read = async {
        let response = response.await.map_err(|e| format!("no answer: {e}"))?;
        let (parts, mut body) = response.into_parts();
        if let Some((status, message)) = grpc_status(&parts.headers) {
            return Ok(Answer {
                status,
                message,
                data: Vec::new(),
            });
        }
        let mut data = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| format!("the answer broke off: {e}"))?;
            let _ = body.flow_control().release_capacity(chunk.len());
            data.extend_from_slice(&chunk);
        }
        let trailers = body
            .trailers()
            .await
            .map_err(|e| format!("no trailers: {e}"))?
            .unwrap_or_default();
        let (status, message) = grpc_status(&trailers).ok_or("no grpc-status")?;
        Ok(Answer {
            status,
            message,
            data,
        })
    };
    tokio::time::timeout(REFUSE_WITHIN, read)
        .await
        .map_err(|_| format!("no answer within {REFUSE_WITHIN:?}"))?
}

/// Sends `body` whole as a call of `method` and reads the answer.
async fn call_with_body(
    conn: &mut h2::client::SendRequest<Bytes>,
    addr: &str,
    method: &str,
    body: Bytes,
) -> Result<Answer, String> {
    let (response, mut send) = open_call(conn, addr, method).await;
    send.send_data(body, true).map_err(|e| e.to_string())?;
    answer(response).await
}

const OK: u32 = 0;
const INVALID_ARGUMENT: u32 = 3;
const OUT_OF_RANGE: u32 = 11;

/// A postcard message of `value`.
fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_allocvec(value).unwrap()
}

/// The index of `request`'s variant (its encoding's first byte: fewer than 128 variants).
fn variant(request: &Request) -> u32 {
    u32::from(encode(request)[0])
}

/// A sequence, or byte string, or string (postcard writes them all as a length and the
/// items) that claims `.0` items and holds only `.1`.
struct Claimed<T>(u64, Vec<T>);

impl<T: Serialize> Serialize for Claimed<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(usize::try_from(self.0).unwrap()))?;
        for item in &self.1 {
            seq.serialize_element(item)?;
        }
        seq.end()
    }
}

/// A put's wire form (`basalt_core::ops::wire::PutWire`), field for field; each column is
/// (family length, qualifier length, timestamp, value length).
#[derive(Serialize)]
struct PutWire {
    row: Claimed<u8>,
    ts: u64,
    data: Claimed<u8>,
    columns: Claimed<(u64, u64, u64, u64)>,
    durability: Durability,
    ttl_ms: Option<u64>,
    touch: bool,
}

/// A `Request::Put` of `put` into table `t`.
fn put_request(put: PutWire) -> Vec<u8> {
    let index = variant(&Request::Put(table(), Put::new("r")));
    encode(&(index, table(), put))
}

fn bytes_of(s: &[u8]) -> Claimed<u8> {
    Claimed(s.len() as u64, s.to_vec())
}

/// A valid `Request::Put` of one cell, as the client encodes it.
fn valid_put(row: &str) -> Vec<u8> {
    let put = Put::new(row).add_column("cf", "q", "a value");
    encode(&Request::Put(table(), put))
}

fn valid_scan() -> Vec<u8> {
    encode(&ScanRequest {
        table: table(),
        scan: Scan::new(),
        read_point: None,
    })
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    rng.fill_bytes(&mut b);
    b
}

// ---- The cases ----------------------------------------------------------------------------

/// (1) Random bytes, and HTTP/1 requests, on 200 raw TCP connections at once: the server
/// closes each (it speaks HTTP/2 only), and serves on.
#[test]
fn random_bytes_on_raw_connections_are_closed() {
    case(|addr| async move {
        let good = Good::connect(&addr).await;
        let memory = Memory::watch("(1) random bytes on 200 connections");
        let mut rng = StdRng::seed_from_u64(1);
        let mut tasks = Vec::new();
        for i in 0..200 {
            let bytes = match i % 4 {
                0 => b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                1 => b"POST /basalt.RegionServer/Call HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n".to_vec(),
                _ => {
                    let len = rng.random_range(1..=64 << 10);
                    random_bytes(&mut rng, len)
                }
            };
            let addr = addr.clone();
            tasks.push(tokio::spawn(async move {
                send_and_expect_closed(&addr, &bytes, &format!("connection {i}")).await
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        good.still_answered("random bytes").await;
        let grown = memory.done();
        assert!(grown.rss < 64, "{grown:?}");
    });
}

/// (2) A valid HTTP/2 preface followed by garbage: random bytes; a SETTINGS frame then
/// frames of random types, flags, streams and payloads; a frame longer than the largest
/// frame; a CONTINUATION flood; a window overflow. Each connection is closed. Then 10 MB of
/// PINGs and of SETTINGS from clients that never read the acknowledgements: the server
/// buffers no answers for them.
#[test]
fn garbage_frames_after_the_preface_are_closed() {
    case(|addr| async move {
        let good = Good::connect(&addr).await;
        let memory = Memory::watch("(2) garbage HTTP/2 frames");
        let mut rng = StdRng::seed_from_u64(2);
        let settings = h2_frame(SETTINGS, 0, 0, &[]);
        let mut hostile: Vec<(String, Vec<u8>)> = Vec::new();
        for i in 0..20 {
            let garbage = random_bytes(&mut rng, 64 << 10);
            hostile.push((
                format!("preface and random bytes {i}"),
                [PREFACE, &garbage].concat(),
            ));
            let mut frames = [PREFACE, &settings].concat();
            for _ in 0..200 {
                let kind = rng.random_range(0..10u8);
                let len = rng.random_range(0..512);
                let stream = rng.random::<u32>() % 8;
                let payload = random_bytes(&mut rng, len);
                frames.extend(h2_frame(kind, rng.random(), stream, &payload));
            }
            hostile.push((format!("random frames {i}"), frames));
        }
        let mut oversized = [PREFACE, &settings].concat();
        oversized.extend_from_slice(&[0xff, 0xff, 0xff, DATA, 0, 0, 0, 0, 1]);
        oversized.extend(random_bytes(&mut rng, 64 << 10));
        hostile.push(("a frame of 16 MiB - 1".into(), oversized));
        let mut continuation = [PREFACE, &settings].concat();
        let block = call_header_block("Call");
        continuation.extend(h2_frame(HEADERS, 0, 1, &block));
        for i in 0..20_000u32 {
            let name = format!("x-{i}");
            let mut fragment = vec![0x00, name.len() as u8];
            fragment.extend_from_slice(name.as_bytes());
            fragment.extend_from_slice(&[8, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h']);
            continuation.extend(h2_frame(CONTINUATION, 0, 1, &fragment));
        }
        hostile.push(("a CONTINUATION flood".into(), continuation));
        let mut overflow = [PREFACE, &settings].concat();
        for _ in 0..2 {
            overflow.extend(h2_frame(WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes()));
        }
        hostile.push(("a connection window overflow".into(), overflow));
        let mut tasks = Vec::new();
        for (what, bytes) in hostile {
            let addr = addr.clone();
            tasks.push(tokio::spawn(async move {
                send_and_expect_closed(&addr, &bytes, &what).await
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        good.still_answered("garbage frames").await;

        // Floods from clients that never read: 10 MB each of PINGs, then of SETTINGS.
        for (what, frame) in [
            ("a PING flood", h2_frame(PING, 0, 0, &[7; 8])),
            (
                "a SETTINGS flood",
                h2_frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]),
            ),
        ] {
            let mut s = TcpStream::connect(&addr).await.unwrap();
            let mut flood = [PREFACE, &settings].concat();
            let n = (10 << 20) / frame.len();
            for _ in 0..n {
                flood.extend_from_slice(&frame);
            }
            let sent = tokio::time::timeout(Duration::from_secs(3), s.write_all(&flood)).await;
            println!("{what}: written whole: {}", matches!(sent, Ok(Ok(()))));
            good.still_answered(what).await;
            drop(s);
        }
        let grown = memory.done();
        assert!(grown.rss < 64, "{grown:?}");
    });
}

/// (3) A gRPC message header declaring 4 GiB - 1 bytes, or the limit plus one, then a few
/// bytes and a stall: each call is refused with `OutOfRange` while it stalls, on both
/// methods, 128 calls on 4 connections at once, without the server reserving the claimed
/// length (the process's virtual size would grow by 4 GiB per call). For scale, 16 calls that
/// declare exactly the limit, send 1 MiB of it and stall are taken: the server holds what
/// arrived (and reserves the declared length, untouched) while the call waits for the rest.
#[test]
fn a_huge_declared_message_length_is_refused_before_it_is_buffered() {
    case(|addr| async move {
        let good = Good::connect(&addr).await;
        let memory = Memory::watch("(3) 128 calls declaring 4 GiB - 1 bytes");
        let mut stalled = Vec::new();
        let mut connections = Vec::new();
        let mut pending = Vec::new();
        for c in 0..4 {
            let mut conn = h2_connect(&addr).await;
            for i in 0..32 {
                let method = if i % 2 == 0 { "Call" } else { "Scan" };
                let declared: u32 = if i % 4 < 2 {
                    u32::MAX
                } else {
                    MAX_MESSAGE_BYTES as u32 + 1
                };
                let (response, mut send) = open_call(&mut conn, &addr, method).await;
                let mut head = vec![0u8];
                head.extend_from_slice(&declared.to_be_bytes());
                head.extend_from_slice(&[0x2a; 100]);
                send.send_data(head.into(), false).unwrap();
                pending.push((
                    format!("connection {c}, {method} declaring {declared}"),
                    response,
                ));
                stalled.push(send); // never ended
            }
            connections.push(conn);
        }
        for (what, response) in pending {
            let answer = answer(response)
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(answer.status, OUT_OF_RANGE, "{what}: {answer:?}");
            assert!(answer.message.contains("too large"), "{what}: {answer:?}");
        }
        good.still_answered("huge declared lengths").await;
        let grown = memory.done();
        assert!(grown.rss < 64, "{grown:?}");
        assert!(grown.size < 2048, "{grown:?}");
        drop((stalled, connections));

        // For scale: 16 calls declaring exactly the limit, sending 1 MiB of it and stalling.
        // The server takes them (within the limit) and holds what arrived.
        let memory = Memory::watch("(3) 16 calls declaring the limit, 1 MiB sent, stalled");
        let mut conn = h2_connect(&addr).await;
        let mut stalled = Vec::new();
        for _ in 0..16 {
            let (response, mut send) = open_call(&mut conn, &addr, "Call").await;
            let mut head = vec![0u8];
            head.extend_from_slice(&(MAX_MESSAGE_BYTES as u32).to_be_bytes());
            send.send_data(head.into(), false).unwrap();
            send.send_data(Bytes::from(vec![0x2a; 1 << 20]), false)
                .unwrap();
            stalled.push((response, send));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        good.still_answered("stalled calls within the limit").await;
        let grown = memory.done();
        assert!(grown.rss < 256, "{grown:?}");
        drop((stalled, conn));
    });
}

/// (4) A valid gRPC frame around a postcard body that is not a message: an unknown variant,
/// nothing, every strict prefix of a valid put and of a valid scan, either followed by one
/// more byte, a valid put followed by a second, malformed message. Each is refused with
/// `InvalidArgument`. Then 400 random bodies and 400 valid ones with a byte changed: each
/// call gets a status (OK or `InvalidArgument`; no panic drops the connection).
#[test]
fn malformed_messages_are_refused_with_invalid_argument() {
    case(|addr| async move {
        let good = Good::connect(&addr).await;
        let memory = Memory::watch("(4) malformed postcard bodies");
        let mut conn = h2_connect(&addr).await;
        let put = valid_put("malformed");
        let scan = valid_scan();
        let mut refused: Vec<(String, &str, Bytes)> = vec![
            ("an unknown variant".into(), "Call", grpc_frame(&[0x7f])),
            (
                "variant u32::MAX".into(),
                "Call",
                grpc_frame(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            ),
            (
                "a variant index past u32".into(),
                "Call",
                grpc_frame(&[0xff; 10]),
            ),
            ("an empty call".into(), "Call", grpc_frame(&[])),
            ("an empty scan".into(), "Scan", grpc_frame(&[])),
            (
                "a put and a byte".into(),
                "Call",
                grpc_frame(&[&put[..], &[0]].concat()),
            ),
            (
                "a scan and a byte".into(),
                "Scan",
                grpc_frame(&[&scan[..], &[0]].concat()),
            ),
            (
                "a put then a malformed message".into(),
                "Call",
                [grpc_frame(&put), grpc_frame(&[0x7f])].concat().into(),
            ),
        ];
        for cut in 0..put.len() {
            let what = format!("a put cut at byte {cut} of {}", put.len());
            refused.push((what, "Call", grpc_frame(&put[..cut])));
        }
        for cut in 0..scan.len() {
            let what = format!("a scan cut at byte {cut} of {}", scan.len());
            refused.push((what, "Scan", grpc_frame(&scan[..cut])));
        }
        let calls = refused.into_iter().map(|(what, method, body)| {
            let (mut conn, addr) = (conn.clone(), addr.clone());
            async move { (what, call_with_body(&mut conn, &addr, method, body).await) }
        });
        for (what, answer) in futures::future::join_all(calls).await {
            let answer = answer.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(answer.status, INVALID_ARGUMENT, "{what}: {answer:?}");
        }
        // The put followed by a malformed message was not run.
        let get = encode(&Request::Get(table(), Get::new("malformed")));
        let answer = call_with_body(&mut conn, &addr, "Call", grpc_frame(&get))
            .await
            .unwrap();
        assert_eq!(answer.status, OK, "{answer:?}");
        match postcard::from_bytes::<Reply>(&answer.data[5..]).unwrap() {
            Reply::Row(r) => assert!(r.is_empty(), "{r:?}"),
            other => panic!("{other:?}"),
        }

        // Fuzz: random bodies, and valid ones with one byte changed.
        let mut rng = StdRng::seed_from_u64(4);
        let mut fuzz = Vec::new();
        for i in 0..400 {
            let len = rng.random_range(1..600);
            fuzz.push((
                format!("random body {i}"),
                if i % 2 == 0 { "Call" } else { "Scan" },
                random_bytes(&mut rng, len),
            ));
        }
        for i in 0..400 {
            let (method, mut body) = if i % 2 == 0 {
                ("Call", put.clone())
            } else {
                ("Scan", scan.clone())
            };
            let at = rng.random_range(0..body.len());
            body[at] = rng.random();
            fuzz.push((format!("{method} with byte {at} changed"), method, body));
        }
        let mut statuses = std::collections::BTreeMap::new();
        for chunk in fuzz.chunks(100) {
            let calls = chunk.iter().map(|(what, method, body)| {
                let (mut conn, addr) = (conn.clone(), addr.clone());
                async move {
                    (
                        what,
                        call_with_body(&mut conn, &addr, method, grpc_frame(body)).await,
                    )
                }
            });
            for (what, answer) in futures::future::join_all(calls).await {
                let answer = answer.unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(
                    answer.status == OK || answer.status == INVALID_ARGUMENT,
                    "{what}: {answer:?}"
                );
                *statuses.entry(answer.status).or_insert(0) += 1;
            }
        }
        println!("(4) fuzzed bodies, by grpc-status: {statuses:?}");
        good.still_answered("malformed messages").await;
        let grown = memory.done();
        assert!(grown.rss < 64, "{grown:?}");
    });
}

/// (5) Messages around `MAX_MESSAGE_BYTES`: a request one byte over it from the real client
/// is refused (`BadArgument`), and so is the same declared by raw HTTP/2 and sent in part;
/// one of exactly the limit reaches the engine (which refuses it as a plugin); a reply over it
/// (a row of seven 9.5 MiB values) is refused too. The server serves on.
#[test]
fn messages_over_the_limit_are_refused_and_the_server_serves_on() {
    case(|addr| async move {
        let good = Good::connect(&addr).await;
        let memory = Memory::watch("(5) messages around MAX_MESSAGE_BYTES");
        let long = Duration::from_secs(30);
        let over = Request::UploadPlugin(Bytes::from(vec![7u8; MAX_MESSAGE_BYTES - 4]));
        assert_eq!(encode(&over).len(), MAX_MESSAGE_BYTES + 1);
        match good.client.call(over, long).await {
            Err(Error::BadArgument(m)) => assert!(m.contains("too large"), "{m}"),
            other => panic!("a message over the limit: {other:?}"),
        }
        good.still_answered("a request over the limit").await;
        let under = Request::UploadPlugin(Bytes::from(vec![7u8; MAX_MESSAGE_BYTES - 5]));
        assert_eq!(encode(&under).len(), MAX_MESSAGE_BYTES);
        match good.client.call(under, long).await {
            Err(Error::BadArgument(m)) => assert!(m.contains("coprocessor loader"), "{m}"),
            other => panic!("a message under the limit: {other:?}"),
        }
        // Over the limit by raw HTTP/2, the rest of the body on its way.
        let mut conn = h2_connect(&addr).await;
        let (response, mut send) = open_call(&mut conn, &addr, "Call").await;
        let mut head = vec![0u8];
        head.extend_from_slice(&(MAX_MESSAGE_BYTES as u32 + 1).to_be_bytes());
        send.send_data(head.into(), false).unwrap();
        // The server may refuse from the header and reset the stream before the rest is
        // queued: then this send fails (an inactive stream), which is the point.
        let _ = send.send_data(Bytes::from(vec![0x2a; 4 << 20]), false);
        let answer = answer(response).await.unwrap();
        assert_eq!(answer.status, OUT_OF_RANGE, "{answer:?}");
        drop((send, conn));
        // A reply over the limit: the row is written, it cannot be read in one message.
        for i in 0..7 {
            let value = vec![i as u8; 19 << 19];
            let put = Put::new("big row").add_column("cf", format!("q{i}"), value);
            assert!(matches!(
                good.client.call(Request::Put(table(), put), long).await,
                Ok(Reply::Done)
            ));
        }
        match good
            .client
            .call(Request::Get(table(), Get::new("big row")), long)
            .await
        {
            Err(Error::BadArgument(m)) => assert!(m.contains("too large"), "{m}"),
            other => panic!("a reply over the limit: {:?}", other.map(|_| ())),
        }
        let scan = ScanRequest {
            table: table(),
            scan: Scan::new().start_row("big row").stop_row("big row\0"),
            read_point: None,
        };
        let mut rows = good.client.scan(scan, long).await.unwrap();
        match rows.next().await {
            Some(Err(Error::BadArgument(m))) => assert!(m.contains("too large"), "{m}"),
            other => panic!(
                "a scan page over the limit: {:?}",
                other.map(|r| r.map(|_| ()))
            ),
        }
        good.still_answered("messages over the limit").await;
        let grown = memory.done();
        assert!(grown.rss < 1024, "{grown:?}");
    });
}

/// (6) Slowloris: 300 connections that send nothing and 100 that send half the preface;
/// then 8 connections that each open 300 streams (HEADERS without a body) and stall: the
/// server refuses the ones past its 256 concurrent streams; then a rapid-reset flood of
/// 5,000 streams opened and reset at once. Other clients are answered throughout.
#[test]
fn silent_connections_and_stalled_streams_do_not_lock_out_other_clients() {
    case(|addr| async move {
        let good = Good::connect(&addr).await;
        let memory = Memory::watch("(6) slowloris: 400 silent connections, 2,400 stalled streams");
        let mut silent = Vec::new();
        for i in 0..400 {
            let mut s = TcpStream::connect(&addr).await.unwrap();
            if i >= 300 {
                s.write_all(&PREFACE[..12]).await.unwrap();
            }
            silent.push(s);
        }
        good.still_answered("400 silent connections").await;
        let mut tasks = Vec::new();
        for c in 0..8 {
            let addr = addr.clone();
            tasks.push(tokio::spawn(async move {
                let mut s = TcpStream::connect(&addr).await.unwrap();
                let mut bytes = [PREFACE, &h2_frame(SETTINGS, 0, 0, &[])].concat();
                for i in 0..300u32 {
                    let method = if i % 2 == 0 { "Call" } else { "Scan" };
                    bytes.extend(h2_frame(
                        HEADERS,
                        END_HEADERS,
                        2 * i + 1,
                        &call_header_block(method),
                    ));
                }
                s.write_all(&bytes).await.unwrap();
                let frames = read_frames(&mut s, Duration::from_millis(1500)).await;
                let refused = frames
                    .iter()
                    .filter(|(kind, _, p)| {
                        *kind == RST_STREAM
                            && p.len() == 4
                            && u32::from_be_bytes([p[0], p[1], p[2], p[3]]) == REFUSED_STREAM
                    })
                    .count();
                let goaway = frames.iter().any(|(kind, ..)| *kind == GOAWAY);
                println!(
                    "(6) connection {c}: {refused} streams refused, GOAWAY {goaway}, {} frames",
                    frames.len()
                );
                assert!(
                    refused >= 300 - 256,
                    "connection {c}: {refused} streams refused"
                );
                s
            }));
        }
        let mut stalled = Vec::new();
        for t in tasks {
            stalled.push(t.await.unwrap());
        }
        good.still_answered("8 connections of 300 stalled streams")
            .await;

        // Rapid reset: streams opened and reset at once.
        let conn = h2_connect(&addr).await;
        let mut opened = 0;
        for _ in 0..5000 {
            let Ok(mut ready) = conn.clone().ready().await else {
                break;
            };
            let request = http::Request::builder()
                .method("POST")
                .uri(format!("http://{addr}/basalt.RegionServer/Call"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
            match ready.send_request(request, false) {
                Ok((response, mut send)) => {
                    send.send_reset(h2::Reason::CANCEL);
                    drop(response);
                    opened += 1;
                }
                Err(_) => break,
            }
        }
        println!("(6) rapid reset: {opened} streams opened and reset before the server closed");
        good.still_answered("a rapid-reset flood").await;
        let grown = memory.done();
        assert!(grown.rss < 128, "{grown:?}");
        drop((silent, stalled, conn));
        good.still_answered("the slowloris connections closed")
            .await;
    });
}

/// (9) A flood of connections past the port's bound (32 here) that never send HTTP/2's
/// preface: the oldest waiting ones make room for new clients, so a good client connects
/// and is answered throughout, and every silent one is closed once its handshake time (1 s
/// here) passed; the server's memory stays flat.
#[test]
fn connections_past_the_bound_and_the_handshake_time_are_closed() {
    let limits = RpcLimits {
        max_connections: 32,
        handshake_timeout: Duration::from_secs(1),
    };
    case_within(limits, |addr| async move {
        let good = Good::connect(&addr).await;
        let memory = Memory::watch("(9) 500 silent connections past a bound of 32");
        let mut silent = Vec::new();
        for i in 0..500 {
            let mut s = TcpStream::connect(&addr).await.unwrap();
            if i % 2 == 0 {
                s.write_all(&PREFACE[..12]).await.unwrap();
            }
            silent.push(s);
        }
        good.still_answered("500 silent connections").await;
        let mut open = 0;
        for s in &mut silent {
            if closed_within(s, Duration::from_secs(5)).await.is_err() {
                open += 1;
            }
        }
        assert_eq!(
            open, 0,
            "silent connections still open past their handshake time"
        );
        good.still_answered("the silent connections closed").await;
        let grown = memory.done();
        assert!(grown.rss < 64, "{grown:?}");
    });
}

/// (7) Back-pressure: 20 clients open a full scan of a 50 MiB table and never read a byte.
/// The server produces a few pages ahead of each and stops (HTTP/2 flow control, then the
/// channel of `SCAN_PAGES_AHEAD` pages), so its memory grows by a few MiB per scan, not by
/// the table (20 x 50 MiB); other clients are answered, and one scans the whole table
/// meanwhile.
#[test]
fn scans_whose_clients_never_read_hold_a_few_pages_not_the_table() {
    case(|addr| async move {
        let good = Good::connect(&addr).await;
        let long = Duration::from_secs(30);
        let big = TableName::parse("big").unwrap();
        let desc = TableDescriptor::new(big.clone()).family(ColumnFamilyDescriptor::new("cf"));
        let created = good
            .client
            .call(Request::CreateTable(desc, Default::default()), long)
            .await;
        assert!(matches!(created, Ok(Reply::Done)), "{created:?}");
        let (batches, per_batch, value_len) = (25usize, 512usize, 4096usize);
        let mut rng = StdRng::seed_from_u64(7);
        for b in 0..batches {
            let ops = (0..per_batch)
                .map(|i| {
                    let value = random_bytes(&mut rng, value_len);
                    BatchOp::Put(
                        Put::new(format!("row{:06}", b * per_batch + i))
                            .add_column("cf", "q", value),
                    )
                })
                .collect();
            match good
                .client
                .call(Request::Batch(big.clone(), ops), long)
                .await
            {
                Ok(Reply::Batch(outcomes)) => assert!(outcomes.iter().all(|o| o.is_ok())),
                other => panic!("{other:?}"),
            }
        }
        let flushed = good.client.call(Request::Flush(big.clone()), long).await;
        assert!(matches!(flushed, Ok(Reply::Done)), "{flushed:?}");
        let table_mib = (batches * per_batch * value_len) as u64 / MIB;

        let memory = Memory::watch(&format!(
            "(7) 20 scans of a {table_mib} MiB table, never read"
        ));
        let scan = ScanRequest {
            table: big.clone(),
            scan: Scan::new(),
            read_point: None,
        };
        let mut held = Vec::new();
        for _ in 0..20 {
            let mut conn = h2_connect(&addr).await;
            let (response, mut send) = open_call(&mut conn, &addr, "Scan").await;
            send.send_data(grpc_frame(&encode(&scan)), true).unwrap();
            let response = tokio::time::timeout(REFUSE_WITHIN, response)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(response.status(), 200);
            held.push((conn, send, response)); // its body never read
        }
        // The server fills what it buffers: wait until the resident size has been still
        // for a second (a server that buffered the table would keep growing; 8 s at most).
        let started = tokio::time::Instant::now();
        let (mut rss, mut still_since) = (status_kib("VmRSS"), started);
        while still_since.elapsed() < Duration::from_secs(1)
            && started.elapsed() < Duration::from_secs(8)
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = status_kib("VmRSS");
            if now > rss + 1024 {
                (rss, still_since) = (now, tokio::time::Instant::now());
            }
        }
        good.still_answered("20 scans that are never read").await;
        let grown = memory.done();
        // Per scan, about five pages of 1 MiB (one in the HTTP/2 send buffer, one waiting for
        // it, `SCAN_PAGES_AHEAD` in the channel, one being filled) and the engine's chunk read
        // ahead, where the table is 50 MiB.
        assert!(grown.rss < 20 * 6, "{grown:?}");
        assert!(table_mib >= 48, "{table_mib}");

        let memory = Memory::watch("(7) a full scan while the 20 wait");
        let rows = good.client.scan(scan, long).await.unwrap();
        let rows: Vec<_> = tokio::time::timeout(long, rows.collect::<Vec<_>>())
            .await
            .unwrap();
        assert_eq!(rows.len(), batches * per_batch);
        assert!(rows
            .iter()
            .all(|r| matches!(r, Ok(r) if r.cells[0].value.len() == value_len)));
        memory.done();
        drop(held);
        good.still_answered("the 20 scans closed").await;
    });
}

/// (8) Requests of a few bytes built by hand that claim a byte string of 3 GiB or of
/// 2^64 - 1 bytes, a string of 2^40 bytes, vectors of 2^40 and 2^64 - 1 elements, a put
/// whose buffer claims 3 GiB, whose columns claim 2^40 entries, or whose columns run past
/// its buffer or leave part of it over, a table name of 2^40 bytes in a scan, and a filter
/// nested 200,000 deep: each is refused with `InvalidArgument`, and nothing claimed is
/// allocated (a vector of 2^40 batch operations would abort the process; the virtual size
/// stays within 2 GiB of where it was).
#[test]
fn claimed_lengths_inside_small_messages_are_not_allocated() {
    case(|addr| async move {
        let good = Good::connect(&addr).await;
        let memory = Memory::watch("(8) enormous claimed lengths");
        let upload = variant(&Request::UploadPlugin(Bytes::new()));
        let namespace = variant(&Request::CreateNamespace(String::new()));
        let batch = variant(&Request::Batch(table(), Vec::new()));
        let coprocessors = variant(&Request::SetCoprocessors(table(), Vec::new()));
        let clone = variant(&Request::CloneSnapshot(String::new(), Vec::new()));
        let col = |f: u64, q: u64, v: u64| (f, q, LATEST_TIMESTAMP, v);
        let put = |data: Claimed<u8>, columns: Claimed<(u64, u64, u64, u64)>| {
            put_request(PutWire {
                row: bytes_of(b"r"),
                ts: LATEST_TIMESTAMP,
                data,
                columns,
                durability: Durability::default(),
                ttl_ms: None,
                touch: false,
            })
        };
        // The header of a filter wrapping another, and a get ending with a leaf filter.
        let leaf = encode(&Filter::FirstKeyOnly);
        let wrapped = encode(&Filter::WhileMatch(Box::new(Filter::FirstKeyOnly)));
        let wrapper = &wrapped[..wrapped.len() - leaf.len()];
        let get = encode(&Request::Get(
            table(),
            Get::new("r").filter(Filter::FirstKeyOnly),
        ));
        let mut deep = get[..get.len() - leaf.len()].to_vec();
        deep.extend(wrapper.repeat(200_000 - 1));
        deep.extend_from_slice(&leaf);
        let hostile: Vec<(&str, &str, Vec<u8>)> = vec![
            (
                "a plugin of 3 GiB",
                "Call",
                encode(&(upload, Claimed(3 << 30, vec![0u8; 16]))),
            ),
            (
                "a plugin of 2^64 - 1 bytes",
                "Call",
                encode(&(upload, Claimed(u64::MAX, vec![0u8; 16]))),
            ),
            (
                "a namespace of 2^40 bytes",
                "Call",
                encode(&(namespace, Claimed(1 << 40, b"ns".to_vec()))),
            ),
            (
                "a batch of 2^40 operations",
                "Call",
                encode(&(batch, table(), Claimed::<u8>(1 << 40, vec![]))),
            ),
            (
                "a batch of 2^64 - 1 operations",
                "Call",
                encode(&(batch, table(), Claimed::<u8>(u64::MAX, vec![]))),
            ),
            (
                "2^32 - 1 coprocessors",
                "Call",
                encode(&(
                    coprocessors,
                    table(),
                    Claimed::<u8>(u32::MAX.into(), vec![]),
                )),
            ),
            (
                "a clone of 2^50 tables",
                "Call",
                encode(&(clone, "s", Claimed::<u8>(1 << 50, vec![]))),
            ),
            (
                "a put of a 3 GiB buffer",
                "Call",
                put(
                    Claimed(3 << 30, b"cfqv".to_vec()),
                    Claimed(1, vec![col(2, 1, 1)]),
                ),
            ),
            (
                "a put of 2^40 columns",
                "Call",
                put(bytes_of(b"cfqv"), Claimed(1 << 40, vec![col(2, 1, 1)])),
            ),
            (
                "a put whose column runs past its buffer",
                "Call",
                put(bytes_of(b"cfqv"), Claimed(1, vec![col(u64::MAX, 1, 1)])),
            ),
            (
                "a put whose value runs past its buffer",
                "Call",
                put(bytes_of(b"cfqv"), Claimed(1, vec![col(2, 1, 1 << 40)])),
            ),
            (
                "a put whose columns leave bytes over",
                "Call",
                put(bytes_of(b"cfqvXXXX"), Claimed(1, vec![col(2, 1, 1)])),
            ),
            ("a filter nested 200,000 deep", "Call", deep),
            (
                "a scan of a 2^40-byte namespace",
                "Scan",
                encode(&(
                    Claimed(1 << 40, b"default".to_vec()),
                    "t",
                    Scan::new(),
                    None::<u64>,
                )),
            ),
        ];
        let mut conn = h2_connect(&addr).await;
        for (what, method, message) in hostile {
            assert!(message.len() < 1 << 20, "{what}: {} bytes", message.len());
            let answer = call_with_body(&mut conn, &addr, method, grpc_frame(&message))
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(answer.status, INVALID_ARGUMENT, "{what}: {answer:?}");
            println!("(8) {what} ({} bytes): {}", message.len(), answer.message);
        }
        good.still_answered("enormous claimed lengths").await;
        let grown = memory.done();
        assert!(grown.rss < 64, "{grown:?}");
        assert!(grown.size < 2048, "{grown:?}");
    });
}
