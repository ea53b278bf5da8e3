//! Hostile input against `basalt serve` (raw TCP): random bytes, truncated frames, a 1 GiB
//! frame length, a list length of 100 million, a 64-level nested struct, an unknown method,
//! and 1,000 connections opened and left idle with the server bound to 40. Throughout, a
//! well-behaved client connected first keeps getting answers; each hostile connection is
//! closed by the server (or answered, for the unknown method); the server's peak RSS
//! (`VmHWM`) stays bounded and is printed; SIGTERM then closes the engine cleanly.

use basalt_thrift::hbase::{HbaseSyncClient, THbaseSyncClient};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol};
use thrift::transport::{TBufferedReadTransport, TBufferedWriteTransport};

struct Server {
    child: Child,
    addr: String,
    /// The info port's address.
    info: String,
    /// The server's log, read as it comes (a full pipe would block the server).
    log: Option<std::thread::JoinHandle<String>>,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill(); // a failed test leaves no server behind
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(flags: &[&str]) -> Server {
        Server::start_limited(flags, None)
    }

    /// The server, with at most `max_fds` descriptors (`ulimit -n` in a shell that then
    /// runs it) when given.
    fn start_limited(flags: &[&str], max_fds: Option<u32>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut command = match max_fds {
            None => Command::new(env!("CARGO_BIN_EXE_basalt")),
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(env!("CARGO_BIN_EXE_basalt"));
                c
            }
        };
        let mut child = command
            .arg("serve")
            .arg(dir.path())
            .args(["--port", "0", "--info-port", "0"])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut info = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        out.read_line(&mut info).unwrap();
        let info = info
            .trim()
            .strip_prefix("status page on http://")
            .and_then(|a| a.strip_suffix('/'))
            .unwrap_or_else(|| panic!("unexpected second line {info:?}"))
            .to_string();
        let mut stderr = child.stderr.take().unwrap();
        let log = std::thread::spawn(move || {
            let mut log = String::new();
            let _ = stderr.read_to_string(&mut log);
            log
        });
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Server {
            child,
            addr,
            info,
            log: Some(log),
            _dir: dir,
        }
    }

    /// The descriptors the server holds open.
    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }

    /// A GET of `path` on the info port: the status line and the body.
    fn info_get(&self, path: &str) -> Result<(String, String), String> {
        let mut s = TcpStream::connect(&self.info).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        let status = answer.lines().next().unwrap_or_default().to_string();
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((status, body))
    }

    /// The value of metric `name` (with its labels) in `/metrics`.
    fn metric(&self, name: &str) -> f64 {
        let (status, body) = self.info_get("/metrics").unwrap();
        assert!(status.contains("200"), "{status}");
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {body}"))
    }

    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// SIGTERM; the server must exit 0 after closing the engine.
    fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        let log = self.log.take().unwrap().join().unwrap();
        assert!(status.success(), "exit {status}: {log}");
        assert!(log.contains("engine closed"), "{log}");
        log
    }
}

type Client = HbaseSyncClient<
    TBinaryInputProtocol<TBufferedReadTransport<TcpStream>>,
    TBinaryOutputProtocol<TBufferedWriteTransport<TcpStream>>,
>;

/// A well-behaved client (buffered, binary: happybase's default).
fn client(addr: &str) -> Client {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let i = TBinaryInputProtocol::new(TBufferedReadTransport::new(s.try_clone().unwrap()), true);
    let o = TBinaryOutputProtocol::new(TBufferedWriteTransport::new(s), true);
    HbaseSyncClient::new(i, o)
}

/// A well-behaved client that created table `t` (family `cf`, 3 versions) and wrote row
/// `r` (what `good_calls` reads).
fn client_with_table(addr: &str) -> Client {
    let mut good = client(addr);
    let family = basalt_thrift::hbase::ColumnDescriptor {
        name: Some(b"cf:".to_vec()),
        max_versions: Some(3),
        ..Default::default()
    };
    good.create_table(b"t".to_vec(), vec![family]).unwrap();
    let put = basalt_thrift::hbase::Mutation {
        column: Some(b"cf:a".to_vec()),
        value: Some(b"1".to_vec()),
        ..Default::default()
    };
    good.mutate_row(b"t".to_vec(), b"r".to_vec(), vec![put], Default::default())
        .unwrap();
    good
}

/// One round of the good client's calls.
fn good_calls(good: &mut Client) -> Result<(), String> {
    let names = good.get_table_names().map_err(|e| e.to_string())?;
    if !names.contains(&b"t".to_vec()) {
        return Err(format!("tables {names:?}"));
    }
    let rows = good
        .get_row(b"t".to_vec(), b"r".to_vec(), Default::default())
        .map_err(|e| e.to_string())?;
    if rows.len() != 1 {
        return Err(format!("rows {rows:?}"));
    }
    Ok(())
}

/// The good client, calling every 50 ms on one connection in its own thread.
struct Pinger {
    answered: Arc<AtomicUsize>,
    failed: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Pinger {
    fn start(mut good: Client) -> Pinger {
        let answered = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, f, st) = (answered.clone(), failed.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match good_calls(&mut good) {
                    Ok(()) => {
                        a.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        f.lock().unwrap().push(e);
                        return;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Pinger {
            answered,
            failed,
            stop,
            thread: Some(thread),
        }
    }

    /// The good client got new answers after `what`, and never failed.
    fn still_serving(&self, what: &str) {
        let before = self.answered.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.answered.load(Ordering::SeqCst) < before + 2 {
            let failed = self.failed.lock().unwrap().clone();
            assert!(
                failed.is_empty(),
                "the good client failed after {what}: {failed:?}"
            );
            assert!(
                Instant::now() < deadline,
                "the good client got no answer after {what}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let failed = self.failed.lock().unwrap().clone();
        assert!(failed.is_empty(), "the good client failed: {failed:?}");
        self.answered.load(Ordering::SeqCst)
    }
}

/// A strict binary call header: version 0x80010001, name, seqid 0.
fn header(name: &str) -> Vec<u8> {
    let mut m = vec![0x80, 0x01, 0x00, 0x01];
    m.extend_from_slice(&u32::try_from(name.len()).unwrap().to_be_bytes());
    m.extend_from_slice(name.as_bytes());
    m.extend_from_slice(&0i32.to_be_bytes());
    m
}

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut f = u32::try_from(msg.len()).unwrap().to_be_bytes().to_vec();
    f.extend_from_slice(msg);
    f
}

/// Sends `bytes` on a new connection and expects the server to close it (EOF or reset)
/// within `within` (answers before that, up to 1 MiB, are read and dropped).
fn expect_closed(addr: &str, bytes: &[u8], within: Duration, what: &str) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(within)).unwrap();
    let _ = s.write_all(bytes); // the server may close before reading everything
    let mut buf = [0u8; 4096];
    let mut answered = 0usize;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                answered += n;
                assert!(answered < 1 << 20, "{what}: endless answer");
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("{what}: the server kept the connection open ({e})"),
        }
    }
}

#[test]
fn hostile_input_closes_only_its_own_connection() {
    let server = Server::start(&["--max-connections", "40", "--read-timeout", "3"]);
    let addr = server.addr.clone();
    let good = client_with_table(&addr);
    let good = Pinger::start(good);
    good.still_serving("setup");
    let quick = Duration::from_secs(10);

    // Random bytes (a fixed xorshift sequence), as a framed guess and as binary garbage.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..65536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    expect_closed(&addr, &random, quick, "random bytes");
    let mut garbage = vec![0x80, 0x01, 0x00, 0x01];
    garbage.extend_from_slice(&random[..4096]);
    expect_closed(&addr, &garbage, quick, "binary header then random bytes");
    let mut compact_garbage = vec![0x82];
    compact_garbage.extend_from_slice(&random[100..4196]);
    expect_closed(
        &addr,
        &compact_garbage,
        quick,
        "compact header then random bytes",
    );
    good.still_serving("random bytes");

    // Truncated frames: a frame shorter than its length, then silence (read timeout), and
    // a frame cut inside the message header.
    let mut short = 100u32.to_be_bytes().to_vec();
    short.extend_from_slice(&header("getTableNames")[..10]);
    expect_closed(&addr, &short, quick, "truncated frame then idle");
    let call = framed(&[header("getTableNames"), vec![0]].concat());
    expect_closed(
        &addr,
        &call[..12],
        quick,
        "frame cut in its header then idle",
    );
    good.still_serving("truncated frames");

    // A 1 GiB frame length: refused before anything is allocated.
    let mut huge = (1u32 << 30).to_be_bytes().to_vec();
    huge.extend_from_slice(&[0x80, 0x01, 0x00, 0x01]);
    expect_closed(&addr, &huge, quick, "1 GiB frame");
    let negative = [0xff, 0xff, 0xff, 0xf0, 0x80, 0x01, 0x00, 0x01];
    expect_closed(&addr, &negative, quick, "negative frame length");
    good.still_serving("1 GiB frame");

    // A list length of 100 million: getRows(table, rows = list<binary> of 100,000,000).
    let mut list = header("getRows");
    list.extend_from_slice(&[11, 0, 1, 0, 0, 0, 1, b't']); // field 1: table "t"
    list.extend_from_slice(&[15, 0, 2, 11]); // field 2: list<binary>
    list.extend_from_slice(&100_000_000i32.to_be_bytes());
    list.extend_from_slice(&[0, 0, 0, 1, b'r']);
    expect_closed(&addr, &list, quick, "list of 100 million (buffered)");
    expect_closed(&addr, &framed(&list), quick, "list of 100 million (framed)");
    // A string of 1 GiB announced: refused the same way.
    let mut string = header("getTableRegions");
    string.extend_from_slice(&[11, 0, 1]);
    string.extend_from_slice(&(1i32 << 30).to_be_bytes());
    expect_closed(&addr, &string, quick, "1 GiB string");
    // A map of 100 million entries (the attributes of getRow).
    let mut map = header("getRow");
    map.extend_from_slice(&[13, 0, 3, 11, 11]);
    map.extend_from_slice(&100_000_000i32.to_be_bytes());
    expect_closed(&addr, &map, quick, "map of 100 million");
    good.still_serving("100-million containers");

    // A 64-level nested struct (an unknown field of the arguments, 64 structs deep), and a
    // 10,000-level one: past the nesting limit the connection closes.
    for depth in [64usize, 10_000] {
        let mut nested = header("getTableNames");
        for _ in 0..depth {
            nested.extend_from_slice(&[12, 0, 9]); // field 9: struct
        }
        nested.extend(std::iter::repeat_n(0u8, depth + 1)); // the stops
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(quick)).unwrap();
        s.write_all(&nested).unwrap();
        let mut buf = vec![0u8; 65536];
        // Answered (the field skipped) or closed: either way only this connection.
        let _ = s.read(&mut buf);
        good.still_serving(&format!("a {depth}-level nested struct"));
    }

    // An unknown method: a TApplicationException (type 3) with UNKNOWN_METHOD (1), and the
    // same connection then answers a real call.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(quick)).unwrap();
    let mut unknown = header("noSuchMethod");
    unknown.extend_from_slice(&[11, 0, 1, 0, 0, 0, 2, b'h', b'i', 0]);
    s.write_all(&unknown).unwrap();
    let mut reply = [0u8; 4];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [0x80, 0x01, 0x00, 0x03], "an exception message");
    let mut rest = vec![0u8; 4 + "noSuchMethod".len() + 4];
    s.read_exact(&mut rest).unwrap();
    let mut body = Vec::new();
    let mut byte = [0u8; 1];
    // TApplicationException {1: message, 2: i32 type}: find field 2's value.
    while !body.ends_with(&[8, 0, 2]) {
        s.read_exact(&mut byte).unwrap();
        body.push(byte[0]);
    }
    let mut kind = [0u8; 4];
    s.read_exact(&mut kind).unwrap();
    assert_eq!(i32::from_be_bytes(kind), 1, "UNKNOWN_METHOD");
    s.read_exact(&mut byte).unwrap(); // stop
    let mut next = header("getTableNames");
    next.push(0);
    s.write_all(&next).unwrap();
    s.read_exact(&mut reply).unwrap();
    assert_eq!(
        reply,
        [0x80, 0x01, 0x00, 0x02],
        "the connection answers again"
    );
    drop(s);
    good.still_serving("an unknown method");

    // 1,000 connections opened and left idle; the server serves 40 at once and closes the
    // rest when accepting them.
    let idle: Vec<TcpStream> = (0..1000)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    good.still_serving("1,000 idle connections");
    let mut closed = 0;
    for s in &idle {
        s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        let mut b = [0u8; 1];
        if let Ok(0) | Err(_) = (&*s).read(&mut b) {
            if matches!((&*s).read(&mut b), Ok(0))
                || matches!((&*s).read(&mut b), Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset)
            {
                closed += 1;
            }
        }
    }
    assert!(
        closed >= 1000 - 40,
        "only {closed} of the extra idle connections were closed"
    );
    // The idle ones the server kept are closed by the read timeout (3 s here).
    std::thread::sleep(Duration::from_secs(5));
    drop(idle);
    let mut fresh = client(&addr);
    good_calls(&mut fresh).expect("a new client is served once the idle ones are gone");
    good.still_serving("the idle connections timed out");

    let rss = server.peak_rss_kib();
    println!("server peak RSS (VmHWM): {} MiB", rss / 1024);
    assert!(rss < 512 * 1024, "peak RSS {rss} KiB");
    let answered = good.finish();
    println!("the good client got {answered} answers throughout");
    drop(fresh);
    let log = server.stop();
    assert!(log.contains("40 connections already open"), "{log}");
    assert!(log.contains("malformed request"), "{log}");
}

/// `mutateRows` of 20 row batches of 100,000 empty mutations each: 2,000,249 bytes that
/// decode to tens of megabytes (a 1-byte struct on the wire is a 56-byte `Mutation`).
fn amplifying_mutate_rows() -> Vec<u8> {
    let mut m = header("mutateRows");
    m.extend_from_slice(&[11, 0, 1, 0, 0, 0, 1, b't']); // field 1: table "t"
    m.extend_from_slice(&[15, 0, 2, 12]); // field 2: list<BatchMutation>
    m.extend_from_slice(&20i32.to_be_bytes());
    for _ in 0..20 {
        m.extend_from_slice(&[11, 0, 1, 0, 0, 0, 1, b'r']); // row "r"
        m.extend_from_slice(&[15, 0, 2, 12]); // mutations: list<Mutation>
        m.extend_from_slice(&100_000i32.to_be_bytes());
        m.extend(std::iter::repeat_n(0u8, 100_000)); // each an empty struct
        m.push(0); // the BatchMutation's stop
    }
    m.push(0); // the arguments' stop
    m
}

/// Memory amplification (issue 44): 32 connections each send a 2 MB request that would
/// decode to about 58 MB, and stall. Each request is refused once it asks for more than
/// `ALLOC_FACTOR` times its bytes, its connection closes, and the server's peak RSS grows by
/// far less than the 1.8 GB the requests would take; the good client is served throughout.
#[test]
fn requests_cannot_make_the_server_allocate_more_than_a_multiple_of_their_size() {
    let server = Server::start(&["--max-connections", "40", "--read-timeout", "30"]);
    let addr = server.addr.clone();
    let good = client_with_table(&addr);
    let good = Pinger::start(good);
    good.still_serving("setup");
    let before = server.peak_rss_kib();
    let message = amplifying_mutate_rows();
    assert!(message.len() < 2 * 1024 * 1024, "{} bytes", message.len());
    for (what, bytes) in [("buffered", message.clone()), ("framed", framed(&message))] {
        let stalled: Vec<TcpStream> = (0..32)
            .map(|_| {
                let mut s = TcpStream::connect(&addr).unwrap();
                // The server closes the connection part way: the rest may not be taken.
                let _ = s.write_all(&bytes);
                s
            })
            .collect();
        good.still_serving(&format!("32 amplifying requests ({what})"));
        for mut s in stalled {
            // An exception may come first (the generated code answers a decoding error),
            // then the server closes the connection.
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 4096];
            let mut answered = 0usize;
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) if answered + n < 4096 => answered += n,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                    other => panic!("{what}: an amplifying request was not refused: {other:?}"),
                }
            }
        }
    }
    let grown = server.peak_rss_kib().saturating_sub(before);
    println!("peak RSS grew by {} MiB", grown / 1024);
    assert!(grown < 256 * 1024, "peak RSS grew by {grown} KiB");
    good.finish();
    let log = server.stop();
    assert!(log.contains("bytes of memory for the"), "{log}");
}

/// A new Thrift connection sends nothing: the server closes it within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

/// Idle connections cannot lock everyone out (issue 44): the server full of connections
/// that sent nothing still serves a new client at once (the silent connection that waited
/// longest makes room), a silent or trickling connection is closed at the first-request
/// deadline, and the metrics count refused and timed-out connections.
#[test]
fn silent_connections_cannot_lock_out_new_clients() {
    let server = Server::start(&[
        "--max-connections",
        "16",
        "--first-request-timeout",
        "3",
        "--read-timeout",
        "60",
    ]);
    let addr = server.addr.clone();
    let good = client_with_table(&addr);
    // The good client calls every 50 ms throughout.
    let good = Pinger::start(good);
    // 15 silent connections fill the bound with the good one; a 16th and 17th arrive at once.
    let mut silent: Vec<TcpStream> = (0..17)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    // A new client is served at once: a silent connection gives it its place.
    let started = Instant::now();
    let mut fresh = client(&addr);
    good_calls(&mut fresh).expect("a new client is served while silent ones fill the server");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    good.still_serving("silent connections filled the server");
    // A client trickling a request (one byte every 400 ms) is closed at the deadline too.
    let mut trickle = TcpStream::connect(&addr).unwrap();
    let request = [header("getTableNames"), vec![0]].concat();
    let trickled = Instant::now();
    let mut sent = 0;
    for b in &request {
        if trickle.write_all(&[*b]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(400));
        if trickled.elapsed() > Duration::from_secs(6) {
            break;
        }
    }
    assert!(sent < request.len(), "the trickled request was read whole");
    assert!(
        closed_within(&mut trickle, Duration::from_secs(5)),
        "the trickler kept its connection"
    );
    // Every silent connection is closed by the deadline (3 s) or to make room.
    for (i, s) in silent.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "silent connection {i} still open"
        );
    }
    good.still_serving("the deadline closed the silent connections");
    good_calls(&mut fresh).expect("the new client is served after the deadline");
    // 15 silent ones accepted (2 refused: none had waited long enough to give its place),
    // and the trickler: each made room or reached the deadline.
    let timed_out = server.metric("basalt_thrift_connections_timed_out_total");
    assert!(
        timed_out >= 16.0,
        "{timed_out} connections counted as timed out"
    );
    let refused = server.metric("basalt_connections_refused_total{port=\"thrift\"}");
    assert!(refused >= 2.0, "{refused} connections counted as refused");
    let page = server.info_get("/").unwrap().1;
    assert!(page.contains("Connections refused (timed out)"), "{page}");
    let rss = server.peak_rss_kib();
    println!("server peak RSS (VmHWM): {} MiB", rss / 1024);
    assert!(rss < 256 * 1024, "peak RSS {rss} KiB");
    good.finish();
    drop(fresh);
    server.stop();
}

/// The info port is bounded (issue 44): 1,000 half-sent requests hold at most its bound
/// of descriptors and are closed at the header-read timeout; extra connections are closed
/// when accepted and counted; the Thrift client is served throughout and the info port
/// answers again once the half-sent requests are gone.
#[test]
fn half_sent_requests_on_the_info_port_are_bounded() {
    let server = Server::start(&["--read-timeout", "60"]);
    let addr = server.addr.clone();
    let good = client_with_table(&addr);
    let good = Pinger::start(good);
    let before = server.open_fds();
    let half: Vec<TcpStream> = (0..1000)
        .filter_map(|_| {
            let mut s = TcpStream::connect(&server.info).ok()?;
            let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ");
            Some(s)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let held = server.open_fds().saturating_sub(before);
    println!(
        "{} half-sent requests, {held} more descriptors held",
        half.len()
    );
    assert!(held <= 64, "the server holds {held} more descriptors");
    good.still_serving("1,000 half-sent info requests");
    // The header-read timeout (5 s) closes the ones it kept.
    std::thread::sleep(Duration::from_secs(7));
    let (status, body) = server
        .info_get("/status.json")
        .expect("the info port answers again");
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("refused_connections"), "{body}");
    let refused = server.metric("basalt_connections_refused_total{port=\"info\"}");
    assert!(
        refused >= 900.0,
        "{refused} refused info connections counted"
    );
    let rss = server.peak_rss_kib();
    println!("server peak RSS (VmHWM): {} MiB", rss / 1024);
    assert!(rss < 256 * 1024, "peak RSS {rss} KiB");
    drop(half);
    good.still_serving("the half-sent requests timed out");
    good.finish();
    server.stop();
}

/// A process at its descriptor limit (issue 44): `ulimit -n 128` and more silent
/// connections than that. Failed accepts back off and are logged at most once a second;
/// the connected client keeps writing; a flush and a major compaction either work or fail
/// with a clear error, and work once descriptors are free again; nothing written is lost.
#[test]
fn at_the_descriptor_limit_the_engine_keeps_working() {
    let started = Instant::now();
    let server = Server::start_limited(
        &["--max-connections", "1000", "--first-request-timeout", "3"],
        Some(128),
    );
    let addr = server.addr.clone();
    let mut good = client_with_table(&addr);
    let put = |good: &mut Client, i: usize| {
        let m = basalt_thrift::hbase::Mutation {
            column: Some(b"cf:a".to_vec()),
            value: Some(format!("v{i}").into_bytes()),
            ..Default::default()
        };
        good.mutate_row(
            b"t".to_vec(),
            format!("r{i:05}").into_bytes(),
            vec![m],
            Default::default(),
        )
    };
    for i in 0..100 {
        put(&mut good, i).unwrap();
    }
    // Exhaust the descriptors: connections the server cannot all accept.
    let flood: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let fds = server.open_fds();
    println!(
        "{} connections, the server holds {fds} descriptors",
        flood.len()
    );
    // The connected client keeps writing.
    for i in 100..200 {
        put(&mut good, i).expect("a write at the descriptor limit");
    }
    // A flush and a compaction need new files: they work, or fail with a clear error.
    let under_limit = good.major_compact(b"t".to_vec());
    if let Err(e) = &under_limit {
        let e = e.to_string();
        assert!(
            e.contains("Too many open files") || e.contains("descriptor"),
            "{e}"
        );
    }
    for i in 200..300 {
        put(&mut good, i).expect("a write after a failed flush");
    }
    drop(flood);
    // Descriptors free again: the silent connections the server took are closed by the
    // first-request deadline (3 s here) at the latest.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match good.major_compact(b"t".to_vec()) {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                println!("major compaction still failing: {e}");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("major compaction never worked again: {e}"),
        }
    }
    let mut fresh = client(&addr);
    let rows = fresh
        .get_rows(
            b"t".to_vec(),
            (0..300).map(|i| format!("r{i:05}").into_bytes()).collect(),
            Default::default(),
        )
        .unwrap();
    assert_eq!(rows.len(), 300, "rows written at the limit were lost");
    let log = server.stop();
    // At most a line a second (each with its count), where unthrottled it was one per 10 ms.
    let secs = started.elapsed().as_secs() as usize;
    let accept_lines = log.lines().filter(|l| l.contains("accept failed")).count();
    println!("{accept_lines} accept-failure lines in {secs} s; under the limit: {under_limit:?}");
    assert!(
        accept_lines <= secs + 2,
        "{accept_lines} lines of accept failures in {secs} s"
    );
}

/// A per-address bound (`--max-connections-per-peer`): a client address past it has its new
/// connections closed when accepted and counted; its first connections are served.
#[test]
fn a_peer_past_its_bound_is_refused() {
    let server = Server::start(&["--max-connections-per-peer", "2"]);
    let addr = server.addr.clone();
    let mut first = client(&addr);
    let mut second = client(&addr);
    first.get_table_names().unwrap();
    second.get_table_names().unwrap();
    let mut third = TcpStream::connect(&addr).unwrap();
    assert!(
        closed_within(&mut third, Duration::from_secs(5)),
        "a third connection from one address was kept"
    );
    first.get_table_names().unwrap();
    let refused = server.metric("basalt_connections_refused_total{port=\"thrift\"}");
    assert!(refused >= 1.0, "{refused}");
    drop((first, second));
    server.stop();
}
