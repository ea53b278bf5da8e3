//! Several hosts on one machine for tests: a [`Lab`] of nodes, each node a Linux network
//! namespace with one interface, `eth0`, on a bridge shared by the lab, whose link a test can
//! cut ([`Lab::link_down`]) and restore ([`Lab::link_up`]). Needs root (or CAP_NET_ADMIN and
//! CAP_SYS_ADMIN) and `ip` from iproute2; [`available`] says whether this process has both.
//!
//! Layout of one lab, `<pid>` being this process's id and `<n>` a per-process counter:
//! - a hub namespace `basalt-<pid>-<n>` holding the bridge `bb<pid % 100000><n>` (up, no
//!   address) and, per node, the bridge-side end of the node's veth pair, `vb<i>-<node>`
//!   (cut to 15 characters), attached to the bridge;
//! - per node a namespace `basalt-<pid>-<n>-<node>` holding `lo` (up) and `eth0`, the other
//!   end of the veth pair, up, with the address `10.<pid % 256>.<n % 256>.<i + 1>/24` (`i` the
//!   node's index in the list given to [`Lab::new`]) and no other route.
//!
//! Invariants:
//! - Nothing of a lab lives in the root namespace: the test process stays there and cannot
//!   reach the nodes (no address on the bridge, no route), so whatever talks to a node runs
//!   in a node ([`Lab::command`]); a client is a node too. The bridge sits in the hub rather
//!   than in the root namespace so that the host's firewall never sees the lab's frames (with
//!   `br_netfilter` loaded, bridged IPv4 traverses the root namespace's FORWARD chain, whose
//!   policy Docker sets to DROP) and the host's interface list stays untouched.
//! - Two labs never collide, in one process or across processes (parallel tests, several test
//!   binaries): every name holds the pid and the counter, and each lab is its own layer-2
//!   segment with no route out, so even equal addresses in two labs could not meet. The
//!   subnet still differs per lab within a process, and usually across processes, so that
//!   addresses in logs tell labs apart; correctness never depends on it.
//! - Every namespace name starts with `basalt-<pid>-`, so [`Lab::sweep_stale`] can tell a
//!   crashed run's leftovers (pid gone) from a live lab.
//! - Dropping a lab deletes its veth pairs, its bridge and its namespaces, also when the test
//!   panics (unwinding drops it). It kills nothing: processes started with [`Lab::command`]
//!   are the caller's, who must kill (and wait for) them before the lab drops. `ip netns del`
//!   with a process still inside only removes the name: the process keeps running, in a
//!   namespace left with `lo` alone (its `eth0` goes with the veth pair).
//! - Every `ip` command's exit status is checked; an error names the command line and
//!   carries its standard error. Concurrent `ip netns add` calls need no lock here: iproute2
//!   (since about 5.5, Debian bug 949235) locks `/run/netns` for its one-time setup itself.

use std::ffi::OsStr;
use std::io;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Prefix of every namespace this module creates.
const PREFIX: &str = "basalt-";

/// Where `ip netns` keeps the namespaces' names.
const NETNS_DIR: &str = "/var/run/netns";

/// Longest interface name Linux accepts (IFNAMSIZ - 1).
const IFNAME_MAX: usize = 15;

/// Numbers the labs (and probes) of this process.
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Whether this process may build a [`Lab`]: `ip` runs and a namespace can be created and
/// deleted (root, or CAP_NET_ADMIN and CAP_SYS_ADMIN). Probed once per process by creating
/// and deleting a namespace `basalt-<pid>-p<n>`.
///
/// Tests that need a lab should not skip when this is false (CI runs as root and installs
/// iproute2): they fail with [`Lab::new`]'s error, which says what was missing.
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| probe().is_ok())
}

/// Creates and deletes a namespace.
fn probe() -> io::Result<()> {
    ip(["-V"])?;
    let name = format!(
        "{PREFIX}{}-p{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    ip(["netns", "add", &name])?;
    ip(["netns", "del", &name])?;
    Ok(())
}

/// Runs `ip` with `args`; its standard output if it exits with success, else an error with
/// the command line, the exit status and its standard error.
fn ip<I, S>(args: I) -> io::Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new("ip");
    command.args(args).stdin(Stdio::null());
    let line = format!(
        "ip {}",
        command
            .get_args()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let output = command.output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("`{line}` did not start: {e} (is iproute2 installed?)"),
        )
    })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "`{line}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// One node of a lab.
#[derive(Debug)]
struct Node {
    name: String,
    namespace: String,
    /// The bridge-side end of the node's veth pair, in the hub.
    veth: String,
    addr: Ipv4Addr,
}

/// Nodes in network namespaces on one bridge; see the module documentation for the layout
/// and the invariants. Dropping it removes every namespace, veth pair and the bridge.
#[derive(Debug)]
pub struct Lab {
    hub: String,
    bridge: String,
    nodes: Vec<Node>,
    /// The namespaces created so far, the hub first: what [`Drop`] deletes.
    namespaces: Vec<String>,
    /// Whether the bridge was created.
    bridge_created: bool,
    /// How many nodes' veth pairs were created (a prefix of `nodes`).
    veths_created: usize,
}

impl Lab {
    /// Builds a lab with one node per name, in order (node `i` gets host number `i + 1`).
    ///
    /// A name is 1 to 32 ASCII letters, digits, `_` or `-`; names are distinct; at most 253
    /// nodes. On error, whatever was already created is removed; the error names the `ip`
    /// command that failed and carries its standard error.
    pub fn new(nodes: &[&str]) -> io::Result<Lab> {
        validate(nodes)?;
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let hub = format!("{PREFIX}{pid}-{n}");
        let subnet = [10, (pid % 256) as u8, (n % 256) as u8];
        let mut lab = Lab {
            bridge: format!("bb{}{}", pid % 100_000, n),
            nodes: nodes
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let mut veth = format!("vb{i}-{name}");
                    veth.truncate(IFNAME_MAX);
                    Node {
                        name: name.to_string(),
                        namespace: format!("{hub}-{name}"),
                        veth,
                        addr: Ipv4Addr::new(subnet[0], subnet[1], subnet[2], i as u8 + 1),
                    }
                })
                .collect(),
            hub,
            namespaces: Vec::new(),
            bridge_created: false,
            veths_created: 0,
        };
        // On any error below, `lab` drops and removes what exists so far.
        lab.build()?;
        Ok(lab)
    }

    /// Creates the hub, the bridge and the nodes, recording each step for [`Drop`].
    fn build(&mut self) -> io::Result<()> {
        ip(["netns", "add", &self.hub])?;
        self.namespaces.push(self.hub.clone());
        let hub = self.hub.as_str();
        ip(["-n", hub, "link", "add", &self.bridge, "type", "bridge"])?;
        self.bridge_created = true;
        ip(["-n", hub, "link", "set", &self.bridge, "up"])?;
        for i in 0..self.nodes.len() {
            let node = &self.nodes[i];
            ip(["netns", "add", &node.namespace])?;
            self.namespaces.push(node.namespace.clone());
            ip([
                "-n",
                hub,
                "link",
                "add",
                &node.veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &node.namespace,
            ])?;
            self.veths_created = i + 1;
            ip([
                "-n",
                hub,
                "link",
                "set",
                &node.veth,
                "master",
                &self.bridge,
                "up",
            ])?;
            let ns = node.namespace.as_str();
            ip(["-n", ns, "link", "set", "lo", "up"])?;
            let cidr = format!("{}/24", node.addr);
            ip(["-n", ns, "addr", "add", &cidr, "dev", "eth0"])?;
            ip(["-n", ns, "link", "set", "eth0", "up"])?;
        }
        Ok(())
    }

    /// The node called `node`.
    ///
    /// # Panics
    /// If the lab has no such node.
    fn node(&self, node: &str) -> &Node {
        match self.nodes.iter().find(|n| n.name == node) {
            Some(n) => n,
            None => panic!(
                "no node {node:?} in this lab (its nodes: {:?})",
                self.nodes.iter().map(|n| &n.name).collect::<Vec<_>>()
            ),
        }
    }

    /// The IPv4 address of `node`'s `eth0`, reachable from the lab's other nodes only.
    ///
    /// # Panics
    /// If the lab has no such node.
    pub fn addr(&self, node: &str) -> Ipv4Addr {
        self.node(node).addr
    }

    /// The name of `node`'s network namespace (`basalt-<pid>-<n>-<node>`).
    ///
    /// # Panics
    /// If the lab has no such node.
    pub fn namespace(&self, node: &str) -> &str {
        &self.node(node).namespace
    }

    /// The name of the namespace holding the bridge and the bridge-side veths.
    pub fn hub(&self) -> &str {
        &self.hub
    }

    /// The name of the bridge, inside [`Lab::hub`]'s namespace.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    /// `ip netns exec <namespace> <program>`: the caller adds arguments, environment and
    /// standard streams, then spawns. `ip` enters the namespace and execs `program` in its
    /// own process, so the child's id is the program's and killing the child kills it.
    /// The program inherits this process's environment, so `PATH` lookups work as here.
    ///
    /// # Panics
    /// If the lab has no such node.
    pub fn command(&self, node: &str, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", self.namespace(node)])
            .arg(program);
        command
    }

    /// Cuts `node`'s link: sets the bridge-side end of its veth pair down. Frames to and
    /// from the node are dropped both ways (its `eth0` loses carrier); established
    /// connections stall and retransmit, new ones time out.
    ///
    /// # Panics
    /// If the lab has no such node.
    pub fn link_down(&self, node: &str) -> io::Result<()> {
        ip([
            "-n",
            &self.hub,
            "link",
            "set",
            &self.node(node).veth,
            "down",
        ])?;
        Ok(())
    }

    /// Restores `node`'s link (the bridge-side end up again). The bridge runs no spanning
    /// tree, so the port forwards at once; a stalled connection resumes at its next
    /// retransmission if TCP has not given up on it meanwhile.
    ///
    /// # Panics
    /// If the lab has no such node.
    pub fn link_up(&self, node: &str) -> io::Result<()> {
        ip(["-n", &self.hub, "link", "set", &self.node(node).veth, "up"])?;
        Ok(())
    }

    /// Deletes the namespaces (with their bridges and veth pairs) a crashed earlier run left:
    /// each `basalt-<pid>-...` namespace whose pid is no longer a running process. Kills
    /// nothing: a process of that run still inside a namespace keeps running. Returns the
    /// names deleted.
    ///
    /// A pid reused since the crash keeps its namespaces until that process ends too; a
    /// run in another pid namespace that shares `/run/netns` would look stale from here.
    pub fn sweep_stale() -> io::Result<Vec<String>> {
        let mut deleted = Vec::new();
        for line in ip(["netns", "list"])?.lines() {
            // Lines read `name` or `name (id: 3)`.
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            let Some(pid) = name
                .strip_prefix(PREFIX)
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            // Deleting a hub deletes its bridge and veth pairs, and deleting a node deletes
            // its pair too, so the order does not matter. Another process sweeping at the
            // same time may have deleted the name first: that is no error.
            match ip(["netns", "del", name]) {
                Ok(_) => deleted.push(name.to_string()),
                Err(_) if !Path::new(NETNS_DIR).join(name).exists() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// Deletes everything created, the veth pairs and the bridge first (at once, not when
    /// the kernel gets round to freeing the hub), then the namespaces; the errors met.
    fn teardown(&mut self) -> Vec<io::Error> {
        let mut errors = Vec::new();
        let hub = self.hub.clone();
        for node in self.nodes.drain(..).take(self.veths_created) {
            // Deleting one end deletes the pair.
            if let Err(e) = ip(["-n", &hub, "link", "del", &node.veth]) {
                errors.push(e);
            }
        }
        if std::mem::take(&mut self.bridge_created) {
            if let Err(e) = ip(["-n", &hub, "link", "del", &self.bridge]) {
                errors.push(e);
            }
        }
        for namespace in self.namespaces.drain(..).rev() {
            if let Err(e) = ip(["netns", "del", &namespace]) {
                errors.push(e);
            }
        }
        errors
    }
}

impl Drop for Lab {
    /// Removes the veth pairs, the bridge and the namespaces. A failure is reported on
    /// standard error, and panics unless the thread is already panicking (a second panic
    /// would abort the test binary).
    fn drop(&mut self) {
        let errors = self.teardown();
        if errors.is_empty() {
            return;
        }
        let message = errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        eprintln!("netns lab {}: cleanup failed: {message}", self.hub);
        if !std::thread::panicking() {
            panic!("netns lab {}: cleanup failed: {message}", self.hub);
        }
    }
}

/// Checks node names: see [`Lab::new`].
fn validate(nodes: &[&str]) -> io::Result<()> {
    let invalid = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    if nodes.is_empty() || nodes.len() > 253 {
        return invalid(format!("a lab has 1 to 253 nodes, not {}", nodes.len()));
    }
    for (i, name) in nodes.iter().enumerate() {
        let valid = (1..=32).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return invalid(format!(
                "node name {name:?}: 1 to 32 ASCII letters, digits, `_` or `-`"
            ));
        }
        if nodes[..i].contains(name) {
            return invalid(format!("node name {name:?} given twice"));
        }
    }
    Ok(())
}
