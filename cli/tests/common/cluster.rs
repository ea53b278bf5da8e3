//! A cluster of real processes for the tool's cluster tests: a local etcd
//! (`LocalEtcd`, Debian's `etcd-server`) and `basalt regionserver` processes of the binary
//! cargo built, on one shared store directory, each with a scratch directory of its own.
//!
//! Invariant: nothing is left running. Every process is killed and waited for when the
//! [`Cluster`] (or the [`Proc`]) is dropped, a failing test included; etcd removes its
//! directory when dropped.

use basalt_cluster::{EtcdConfig, EtcdCoordination, LocalEtcd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process, killed and waited for when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `basalt` binary cargo built for the tests.
pub fn basalt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
}

/// etcd and region servers on one shared store.
pub struct Cluster {
    /// The region servers, in the order started (dropped first: they stop before etcd).
    pub servers: Vec<Proc>,
    /// The cluster's etcd.
    pub etcd: LocalEtcd,
    /// The prefix of the cluster's keys in etcd.
    pub prefix: String,
    /// The servers' names (`rs-0`, `rs-1`, ...).
    pub names: Vec<String>,
    /// Each server's info address (`host:port` of its status page), in the same order.
    pub infos: Vec<String>,
    store: tempfile::TempDir,
    scratch: tempfile::TempDir,
}

impl Cluster {
    /// Starts etcd and `servers` region servers (3 s leases, every one a candidate for
    /// master), and waits until a master is elected and every server is registered.
    pub async fn start(servers: usize) -> Cluster {
        let mut cluster = Cluster::empty();
        for i in 0..servers {
            cluster.start_server(&format!("rs-{i}"));
        }
        let coord = cluster.coordination().await;
        until(
            "a master is elected and every server registered",
            || async {
                let live = coord.live_servers().await.map(|s| s.len()).unwrap_or(0);
                matches!(coord.leader().await, Ok(Some(_))) && live == servers
            },
        )
        .await;
        cluster
    }

    /// Starts one more region server named `name`.
    pub fn start_server(&mut self, name: &str) {
        self.start_server_with(name, &[]);
    }

    /// Starts one more region server named `name`, with `extra` flags (`--no-master`),
    /// its status page on a free port.
    pub fn start_server_with(&mut self, name: &str, extra: &[&str]) {
        let data = self.scratch.path().join(name);
        let mut command = basalt();
        command
            .args(["regionserver", "--etcd", &self.etcd.endpoint()])
            .args(["--prefix", &self.prefix, "--port", "0", "--info-port", "0"])
            .args(["--lease-secs", "3", "--name", name])
            .args(extra)
            .arg("--store")
            .arg(self.store.path())
            .arg("--data")
            .arg(&data);
        let (server, line) = announced(command, "listening on ", name);
        self.servers.push(server);
        self.names.push(name.to_string());
        self.infos.push(page_address(&line));
    }

    /// Starts `basalt master` named `name` (a 3 s lease), its page on a free port;
    /// returns the process and the page's address.
    pub fn start_master(&self, name: &str) -> (Proc, String) {
        let mut command = basalt();
        command
            .args(["master", "--etcd", &self.etcd.endpoint()])
            .args(["--prefix", &self.prefix, "--name", name])
            .args(["--lease-secs", "3", "--info-port", "0"]);
        let (master, line) = announced(command, "campaigning", name);
        (master, page_address(&line))
    }

    /// The etcd endpoint, as `--etcd` takes it.
    pub fn endpoint(&self) -> String {
        self.etcd.endpoint()
    }

    /// The etcd configuration of the cluster's keys.
    pub fn config(&self) -> EtcdConfig {
        EtcdConfig::new([self.endpoint()]).prefix(self.prefix.clone())
    }

    /// A connection to etcd under the cluster's prefix.
    pub async fn coordination(&self) -> EtcdCoordination {
        EtcdCoordination::connect(self.config())
            .await
            .expect("etcd answers")
    }

    /// Starts etcd alone: no server, no master yet.
    pub fn empty() -> Cluster {
        let etcd = LocalEtcd::start().expect("a local etcd (Debian's etcd-server)");
        let prefix = format!("/cli-{}", std::process::id());
        Cluster {
            servers: Vec::new(),
            etcd,
            prefix,
            names: Vec::new(),
            infos: Vec::new(),
            store: tempfile::tempdir().expect("a store directory"),
            scratch: tempfile::tempdir().expect("a scratch directory"),
        }
    }

    /// The shared store directory.
    pub fn store(&self) -> &Path {
        self.store.path()
    }

    /// The flags that point a `basalt shell` or `basalt serve` at this cluster.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--etcd".into(),
            self.endpoint(),
            "--prefix".into(),
            self.prefix.clone(),
        ]
    }

    /// Where a scratch file of the test may go.
    pub fn scratch_file(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }
}

/// Spawns `command` (quiet logs, its standard output read) and checks its first line
/// starts with `announcement`; returns the process and that line.
fn announced(mut command: Command, announcement: &str, name: &str) -> (Proc, String) {
    let mut child = command
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the basalt binary starts");
    let line = super::first_line(&mut child);
    let process = Proc(child);
    assert!(line.starts_with(announcement), "{name}: {line:?}");
    (process, line)
}

/// The `host:port` of the page a process announced (`... on http://ADDR/`).
fn page_address(line: &str) -> String {
    line.split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no page address in {line:?}"))
        .to_string()
}

/// Waits up to 30 s for `check` to hold.
pub async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
