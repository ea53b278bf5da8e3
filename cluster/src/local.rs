//! [`LocalEtcd`]: a one-member etcd that a test (or someone trying a cluster on one machine)
//! starts and stops itself: Debian's `etcd` (package `etcd-server`), on free loopback ports,
//! with a fresh temporary data directory.
//!
//! Invariants: nothing is left running: dropping a [`LocalEtcd`] kills etcd, waits for it
//! and removes its directory, and a watchdog shell kills etcd and removes the directory
//! within a second if the process that started it dies without dropping it (a test binary
//! killed by a signal);
//! [`LocalEtcd::start`] returns only once etcd reports itself healthy, or fails with an
//! error that says what is missing or what etcd printed.

use basalt_core::{Error, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the etcd binary (default: `etcd` on the `PATH`).
pub const ETCD_BIN_VAR: &str = "BASALT_ETCD";

/// How long etcd may take to report itself healthy.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running one-member etcd, stopped when dropped.
#[derive(Debug)]
pub struct LocalEtcd {
    etcd: Child,
    watchdog: Option<Child>,
    client: SocketAddr,
    dir: tempfile::TempDir,
}

fn io(msg: String) -> Error {
    Error::Io(std::io::Error::other(msg))
}

/// A loopback port nobody listens on now (etcd binds it a moment later).
fn free_port() -> Result<(TcpListener, u16)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    Ok((listener, port))
}

/// The last lines of etcd's log, to say why it did not start.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Whether etcd at `addr` answers its `/health` with `"health":"true"`.
fn healthy(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.replace(' ', "").contains("\"health\":\"true\"")
}

impl LocalEtcd {
    /// Starts etcd ([`ETCD_BIN_VAR`], or `etcd` on the `PATH`) and waits until it is
    /// healthy. Blocks the calling thread for as long as that takes (about a second).
    pub fn start() -> Result<Self> {
        let bin =
            std::env::var_os(ETCD_BIN_VAR).map_or_else(|| PathBuf::from("etcd"), PathBuf::from);
        let mut last = String::new();
        // A port found free can be taken before etcd binds it: try again with others.
        for _ in 0..3 {
            match Self::try_start(&bin)? {
                Ok(etcd) => return Ok(etcd),
                Err(why) => last = why,
            }
        }
        Err(io(format!("etcd did not start: {last}")))
    }

    /// One attempt: `Err(Error)` when etcd cannot be run at all, `Ok(Err(why))` when it ran
    /// and did not become healthy.
    fn try_start(bin: &Path) -> Result<std::result::Result<Self, String>> {
        let dir = tempfile::Builder::new().prefix("basalt-etcd-").tempdir()?;
        let log_path = dir.path().join("etcd.log");
        let log = std::fs::File::create(&log_path)?;
        let (client_listener, client_port) = free_port()?;
        let (peer_listener, peer_port) = free_port()?;
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        drop((client_listener, peer_listener));
        let spawned = Command::new(bin)
            .arg("--name=basalt")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=basalt={peer_url}"))
            .arg("--initial-cluster-state=new")
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        let etcd = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(io(format!(
                    "the etcd binary {} was not found: install Debian's etcd-server \
                     (`apt-get install etcd-server`), or set {ETCD_BIN_VAR} to its path",
                    bin.display()
                )));
            }
            Err(e) => return Err(io(format!("cannot run {}: {e}", bin.display()))),
        };
        // Kills etcd if this process dies without dropping the guard.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(
                "while kill -0 \"$1\" 2>/dev/null && kill -0 \"$2\" 2>/dev/null; do sleep 0.5; done; \
                 kill -0 \"$1\" 2>/dev/null || { kill -9 \"$2\" 2>/dev/null; rm -rf \"$3\"; }",
            )
            .arg("basalt-etcd-watchdog")
            .arg(std::process::id().to_string())
            .arg(etcd.id().to_string())
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        let mut guard = LocalEtcd {
            etcd,
            watchdog,
            client: SocketAddr::from(([127, 0, 0, 1], client_port)),
            dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if healthy(guard.client) {
                return Ok(Ok(guard));
            }
            if let Ok(Some(status)) = guard.etcd.try_wait() {
                return Ok(Err(format!(
                    "etcd exited ({status}):\n{}",
                    log_tail(&log_path)
                )));
            }
            if Instant::now() > deadline {
                return Ok(Err(format!(
                    "etcd was not healthy after {START_TIMEOUT:?}:\n{}",
                    log_tail(&log_path)
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The client URL, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.client)
    }

    /// etcd's process id (to pause or kill it in a failure test).
    pub fn pid(&self) -> u32 {
        self.etcd.id()
    }

    /// The temporary directory holding etcd's data and its log (`etcd.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
    }
}
