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
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .arg("serve")
            .arg(dir.path())
            .args(["--port", "0", "--info-port", "0"])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
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
            log: Some(log),
            _dir: dir,
        }
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
    let mut good = client(&addr);
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
