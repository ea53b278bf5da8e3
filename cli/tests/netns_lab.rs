//! The network-namespace fixture (`common/netns.rs`) on its own: a lab of three nodes talks
//! TCP (a Python echo server and clients, each run with `Lab::command` in its node); a cut
//! link stops new connections both ways and stalls an established one while the other
//! nodes keep talking; the restored link carries the stalled connection on and accepts new
//! ones; dropping the lab leaves no namespace, veth or bridge. Also: two labs at once do not
//! collide, and `Lab::sweep_stale` deletes a dead run's namespaces only.
//!
//! Needs root and iproute2 (`.ci/run` installs it) and python3; without them the tests fail,
//! saying so, rather than pass. Each test takes a few seconds: every wait is bounded by a
//! timeout in the Python side (at most 10 s).

mod common;

use common::netns::{self, Lab};
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

/// The echo server and clients, run as `python3 -c PEER MODE HOST PORT [ARG]`:
/// - `serve`: echoes every line of every connection; prints `listening` once bound.
/// - `connect TIMEOUT`: one connection, sends `ping`, prints `reply ping` and exits 0, or
///   prints `failed <error>` and exits 1 (connect and read each bounded by TIMEOUT s).
/// - `session`: one connection kept open, driven by lines on stdin: `send TEXT` (prints
///   `sent`), `recv SECONDS` (prints `got LINE`, or `none` if no whole line came in time).
const PEER: &str = r#"
import socket, socketserver, sys
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "serve":
    class Echo(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                self.wfile.write(line)
                self.wfile.flush()
    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True
    server = Server((host, port), Echo)
    print("listening", flush=True)
    server.serve_forever()
elif mode == "connect":
    try:
        s = socket.create_connection((host, port), timeout=float(sys.argv[4]))
        s.sendall(b"ping\n")
        print("reply", s.makefile("rb").readline().decode().strip(), flush=True)
    except OSError as e:
        print("failed", type(e).__name__, e, flush=True)
        sys.exit(1)
elif mode == "session":
    s = socket.create_connection((host, port), timeout=5)
    print("connected", flush=True)
    buf = b""
    for command in sys.stdin:
        verb, _, arg = command.strip().partition(" ")
        if verb == "send":
            s.sendall(arg.encode() + b"\n")
            print("sent", flush=True)
        elif verb == "recv":
            s.settimeout(float(arg))
            try:
                while b"\n" not in buf:
                    chunk = s.recv(4096)
                    if not chunk:
                        print("closed", flush=True)
                        sys.exit(1)
                    buf += chunk
                line, _, buf = buf.partition(b"\n")
                print("got", line.decode(), flush=True)
            except TimeoutError:
                print("none", flush=True)
"#;

/// Why a test fails on a machine that cannot host a lab.
const UNAVAILABLE: &str = "this test creates network namespaces: run it as root with iproute2 \
     installed (CI does; .ci/run installs iproute2)";

/// The port every echo server listens on (each node has its own port space).
const PORT: u16 = 7000;

/// A Python peer running in a node; killed and reaped when dropped, so declare it after
/// the lab (locals drop in reverse order: the peer goes first).
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    /// Starts `python3 -c PEER mode host port` in `node`.
    fn start(lab: &Lab, node: &str, mode: &str, host: Ipv4Addr) -> Peer {
        let mut child = lab
            .command(node, "python3")
            .args(["-c", PEER, mode, &host.to_string(), &PORT.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ip netns exec python3 starts");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Peer {
            stdin: child.stdin.take(),
            child,
            stdout,
        }
    }

    /// An echo server on `node`'s address, listening.
    fn serve(lab: &Lab, node: &str) -> Peer {
        let mut peer = Peer::start(lab, node, "serve", lab.addr(node));
        assert_eq!(peer.line(), "listening", "the echo server in {node} binds");
        peer
    }

    /// A session from `node` to the echo server at `host`, connected.
    fn session(lab: &Lab, node: &str, host: Ipv4Addr) -> Peer {
        let mut peer = Peer::start(lab, node, "session", host);
        assert_eq!(peer.line(), "connected", "a session from {node} to {host}");
        peer
    }

    /// The next line the peer prints, without its newline ("" at end of output).
    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("the peer's stdout");
        line.trim_end().to_string()
    }

    /// Sends one command to a session and returns its answer.
    fn ask(&mut self, command: &str) -> String {
        let stdin = self.stdin.as_mut().expect("the session's stdin");
        writeln!(stdin, "{command}").expect("the session reads commands");
        stdin.flush().expect("the session reads commands");
        self.line()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One connection from `from` to `to`'s echo server, `ping` and its echo, given `timeout`
/// seconds per step: `Ok(reply line)` or `Err(failure line)`.
fn connect(lab: &Lab, from: &str, to: &str, timeout: f64) -> Result<String, String> {
    let output = lab
        .command(from, "python3")
        .args(["-c", PEER, "connect", &lab.addr(to).to_string()])
        .args([PORT.to_string(), timeout.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("ip netns exec python3 runs");
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if output.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// `ip` with `args`: whether it succeeded, and its standard output.
fn ip(args: &[&str]) -> (bool, String) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .expect("ip runs (apt-get install iproute2, as .ci/run does)");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// The names `ip netns list` shows.
fn namespaces() -> Vec<String> {
    let (ok, list) = ip(&["netns", "list"]);
    assert!(ok, "ip netns list");
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// A lab of `nodes`, failing the test with the reason when the machine cannot host one.
fn lab(nodes: &[&str]) -> Lab {
    Lab::new(nodes).expect(
        "a network-namespace lab (needs root or CAP_NET_ADMIN+CAP_SYS_ADMIN, and iproute2: \
         apt-get install iproute2, as .ci/run does)",
    )
}

/// What a lab leaves behind if anything: its namespaces in `ip netns list`, or its bridge
/// or bridge-side veths in the root namespace or the hub.
fn leftovers(names: &[String], hub: &str, bridge: &str) -> Vec<String> {
    let mut left: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| names.contains(n))
        .collect();
    if ip(&["link", "show", bridge]).0 {
        left.push(format!("bridge {bridge} in the root namespace"));
    }
    if ip(&["-n", hub, "link", "show"]).0 {
        left.push(format!("hub {hub} still answers"));
    }
    let (_, links) = ip(&["-br", "link"]);
    left.extend(
        links
            .lines()
            .filter(|l| l.starts_with("vb") || l.starts_with(bridge))
            .map(|l| format!("root-namespace link {l}")),
    );
    left
}

#[test]
fn a_cut_link_stops_tcp_both_ways_and_restoring_it_resumes_a_connection() {
    let started = Instant::now();
    assert!(netns::available(), "{UNAVAILABLE}");
    let lab = lab(&["a", "b", "c"]);
    let names: Vec<String> = std::iter::once(lab.hub())
        .chain(["a", "b", "c"].map(|n| lab.namespace(n)))
        .map(str::to_string)
        .collect();
    let (hub, bridge) = (lab.hub().to_string(), lab.bridge().to_string());
    for name in &names {
        assert!(namespaces().contains(name), "{name} exists");
    }
    assert_ne!(lab.addr("a"), lab.addr("b"));

    let echo_a = Peer::serve(&lab, "a");
    let echo_b = Peer::serve(&lab, "b");
    // The child is the program itself, in the node's namespace: killing it stops the server.
    let (ok, identified) = ip(&["netns", "identify", &echo_a.child.id().to_string()]);
    assert!(ok, "ip netns identify");
    assert_eq!(identified.trim(), lab.namespace("a"));
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", echo_a.child.id()))
        .expect("the server's /proc entry");
    assert!(
        comm.starts_with("python"),
        "the child is python, not ip: {comm:?}"
    );

    for (from, to) in [("b", "a"), ("a", "b"), ("c", "a"), ("c", "b")] {
        assert_eq!(
            connect(&lab, from, to, 2.0),
            Ok("reply ping".to_string()),
            "{from} -> {to}"
        );
    }
    let mut session = Peer::session(&lab, "b", lab.addr("a"));
    assert_eq!(session.ask("send before"), "sent");
    assert_eq!(session.ask("recv 2"), "got before");

    lab.link_down("b").expect("b's link goes down");
    let cut = Instant::now();
    let (from_b, to_b) = std::thread::scope(|s| {
        let from_b = s.spawn(|| connect(&lab, "b", "a", 1.0));
        let to_b = s.spawn(|| connect(&lab, "a", "b", 1.0));
        (from_b.join().expect("b -> a"), to_b.join().expect("a -> b"))
    });
    println!("with b's link down: b -> a {from_b:?}, a -> b {to_b:?}");
    assert!(
        from_b.as_ref().is_err_and(|e| e.starts_with("failed")),
        "b cannot connect out: {from_b:?}"
    );
    assert!(
        to_b.as_ref().is_err_and(|e| e.starts_with("failed")),
        "nobody connects to b: {to_b:?}"
    );
    assert_eq!(
        connect(&lab, "c", "a", 2.0),
        Ok("reply ping".to_string()),
        "c still reaches a"
    );
    assert_eq!(session.ask("send during"), "sent", "the write is buffered");
    assert_eq!(session.ask("recv 1"), "none", "no echo crosses a cut link");

    lab.link_up("b").expect("b's link comes up");
    let down_for = cut.elapsed();
    let up = Instant::now();
    assert_eq!(
        session.ask("recv 10"),
        "got during",
        "the established connection resumes"
    );
    println!(
        "link down {down_for:.1?}; the stalled echo came {:.1?} after the link came up",
        up.elapsed()
    );
    assert_eq!(session.ask("send after"), "sent");
    assert_eq!(session.ask("recv 2"), "got after");
    for (from, to) in [("b", "a"), ("a", "b")] {
        assert_eq!(
            connect(&lab, from, to, 2.0),
            Ok("reply ping".to_string()),
            "{from} -> {to} after the link came back"
        );
    }

    // The caller's processes go before the lab.
    drop(session);
    drop(echo_a);
    drop(echo_b);
    drop(lab);
    assert_eq!(leftovers(&names, &hub, &bridge), Vec::<String>::new());
    println!("done in {:.1?}", started.elapsed());
}

#[test]
fn a_panicking_test_leaves_nothing_behind() {
    assert!(netns::available(), "{UNAVAILABLE}");
    let mut names = Vec::new();
    let mut links = (String::new(), String::new());
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let lab = lab(&["a", "b"]);
        names = [lab.hub(), lab.namespace("a"), lab.namespace("b")]
            .map(str::to_string)
            .to_vec();
        links = (lab.hub().to_string(), lab.bridge().to_string());
        lab.link_down("a").expect("a's link goes down");
        panic!("a test failing with its lab up (expected by this test)");
    }));
    assert!(outcome.is_err(), "the closure panicked");
    assert_eq!(names.len(), 3, "the lab was built");
    assert_eq!(leftovers(&names, &links.0, &links.1), Vec::<String>::new());
}

#[test]
fn node_names_are_checked() {
    for nodes in [&[][..], &["a", "a"], &[""], &["a/b"], &["a b"]] {
        let error = Lab::new(nodes).expect_err("an invalid lab");
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{error}");
    }
}

#[test]
fn two_labs_at_once_do_not_collide() {
    // Built in parallel, with the same node names.
    let (one, two) = std::thread::scope(|s| {
        let one = s.spawn(|| lab(&["a", "b"]));
        let two = s.spawn(|| lab(&["a", "b"]));
        (one.join().expect("lab one"), two.join().expect("lab two"))
    });
    assert_ne!(one.hub(), two.hub());
    assert_ne!(one.bridge(), two.bridge());
    for node in ["a", "b"] {
        assert_ne!(one.namespace(node), two.namespace(node));
        assert_ne!(one.addr(node), two.addr(node));
    }
    let names: Vec<String> = [&one, &two]
        .iter()
        .flat_map(|l| [l.hub(), l.namespace("a"), l.namespace("b")])
        .map(str::to_string)
        .collect();
    let (hubs, bridges) = (
        [one.hub().to_string(), two.hub().to_string()],
        [one.bridge().to_string(), two.bridge().to_string()],
    );

    let echo_one = Peer::serve(&one, "a");
    let echo_two = Peer::serve(&two, "a");
    assert_eq!(connect(&one, "b", "a", 2.0), Ok("reply ping".to_string()));
    assert_eq!(connect(&two, "b", "a", 2.0), Ok("reply ping".to_string()));
    // Cutting a link in one lab leaves the other alone.
    one.link_down("b").expect("b's link in lab one goes down");
    assert_eq!(connect(&two, "b", "a", 2.0), Ok("reply ping".to_string()));
    one.link_up("b").expect("b's link in lab one comes up");
    // No path between the labs: lab two's b has no route to lab one's subnet.
    let across = two
        .command("b", "python3")
        .args(["-c", PEER, "connect", &one.addr("a").to_string()])
        .args([PORT.to_string(), "1".to_string()])
        .output()
        .expect("ip netns exec python3 runs");
    assert!(
        !across.status.success(),
        "lab two reached lab one: {}",
        String::from_utf8_lossy(&across.stdout)
    );

    drop(echo_one);
    drop(echo_two);
    drop(one);
    drop(two);
    for (hub, bridge) in hubs.iter().zip(&bridges) {
        assert_eq!(leftovers(&names, hub, bridge), Vec::<String>::new());
    }
}

#[test]
fn sweep_stale_deletes_a_dead_runs_namespaces_only() {
    let live = lab(&["a"]);
    let exists = |pid: &str| std::path::Path::new(&format!("/proc/{pid}")).exists();
    // A pid that no longer runs: a child that exited and was reaped (and not reused yet).
    let dead = (0..10)
        .map(|_| {
            let mut child = Command::new("true").spawn().expect("true runs");
            child.wait().expect("true ends");
            child.id().to_string()
        })
        .find(|pid| !exists(pid))
        .expect("a pid not in use");
    // A stale lab of the dead pid, by hand: a hub with a bridge, a node. Another test binary
    // sweeping at the same time may delete them as soon as they exist, which is right too:
    // so this test checks they are gone afterwards, not who deleted them.
    let (stale_hub, stale_node) = (format!("basalt-{dead}-0"), format!("basalt-{dead}-0-x"));
    assert!(
        ip(&["netns", "add", &stale_hub]).0,
        "ip netns add {stale_hub}"
    );
    let bridge = ip(&["-n", &stale_hub, "link", "add", "bbstale", "type", "bridge"]).0;
    assert!(
        bridge || !namespaces().contains(&stale_hub),
        "a bridge in {stale_hub}"
    );
    assert!(
        ip(&["netns", "add", &stale_node]).0,
        "ip netns add {stale_node}"
    );

    let deleted = Lab::sweep_stale().expect("sweep_stale");
    println!("swept {deleted:?}");
    for name in &deleted {
        let pid = name.split('-').nth(1).expect("basalt-<pid>-...");
        assert!(!exists(pid), "swept {name} of a running process");
    }
    let left = namespaces();
    assert!(
        !left.contains(&stale_hub) && !left.contains(&stale_node),
        "the stale namespaces are gone: {left:?}"
    );
    for name in [live.hub(), live.namespace("a")] {
        assert!(
            left.iter().any(|n| n == name),
            "the live lab's {name} stays"
        );
    }
}
