//! The `basalt` binary: parses the command line and runs the shell or one of the tools
//! ([`basalt_cli`]).
//!
//! `basalt shell DIR [SCRIPT]` runs the commands of SCRIPT, or of standard input, against
//! the data directory DIR (created if missing), printing only their output; `basalt shell
//! --etcd URLS [--prefix P] [SCRIPT]` runs them against a cluster instead. With neither a
//! script nor `-n`, and standard input a terminal, the shell is interactive: line editing,
//! history (`~/.basalt_history`) and Tab completion of command and table names.
//!
//! `basalt check DIR`, `basalt repair DIR`, `basalt report DIR [--table T] [--plot FILE]` and
//! `basalt import DIR TABLE FILE ...`, `basalt backup DIR TARGET`, `basalt backup --verify
//! TARGET` and `basalt restore TARGET DIR` (docs/cli.md, docs/backup.md) exit with 0 when all is well, 1 when
//! they found damage (or a bad line stopped the import), 130 after Ctrl-C stopped an import,
//! and 2 when they could not run (one `ERROR: ...` line on standard error).
//!
//! `basalt serve DIR` serves HBase's Thrift1 service over DIR ([`basalt_cli::serve()`]), so
//! happybase and other HBase Thrift clients work unchanged; `basalt serve --etcd URLS
//! [--prefix P]` is the same gateway in front of a cluster ([`basalt_cli::serve_cluster`]).
//!
//! `basalt regionserver --etcd URLS --store DIR --data DIR` runs a region server of a
//! cluster ([`basalt_cli::run_regionserver`], docs/cluster.md).
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// Basalt's command-line tool.
#[derive(Parser)]
#[command(
    name = "basalt",
    version,
    about = "Basalt's command-line tool: the HBase shell, offline check and repair, region reports and imports over a data directory"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs HBase shell commands against a data directory (or a cluster, with --etcd), from
    /// SCRIPT or standard input.
    Shell {
        /// The data directory (created if missing). With --etcd there is none: a lone path
        /// is then the SCRIPT.
        #[arg(required_unless_present = "etcd")]
        dir: Option<PathBuf>,
        /// A file of commands, one per line (`#` starts a comment).
        #[arg(conflicts_with = "etcd")]
        script: Option<PathBuf>,
        /// Non-interactive (as `hbase shell -n`): read commands from standard input.
        #[arg(short = 'n', long = "non-interactive")]
        non_interactive: bool,
        /// A cluster's etcd members, comma-separated (`host:port` or URLs), instead of a
        /// data directory.
        #[arg(long, value_delimiter = ',', num_args = 1..)]
        etcd: Vec<String>,
        /// The prefix of the cluster's keys in etcd.
        #[arg(long, default_value = "/basalt", requires = "etcd")]
        prefix: String,
    },
    /// Serves HBase's Thrift1 service (as happybase uses it) over a data directory.
    Serve(ServeArgs),
    /// Runs a region server of a cluster: etcd for coordination, a shared store directory.
    Regionserver(RegionServerArgs),
    /// Runs a candidate for a cluster's master that serves no region.
    Master(MasterArgs),
    #[command(flatten)]
    Tool(Tool),
}

/// The commands other than the shell: they exit with 0, 1, 130 or 2.
#[derive(Subcommand)]
enum Tool {
    /// Checks a closed data directory offline: the catalog, every store file, the WAL.
    Check {
        /// The data directory.
        dir: PathBuf,
    },
    /// Sets the damaged store files of a closed data directory aside, then checks it again.
    Repair {
        /// The data directory.
        dir: PathBuf,
    },
    /// Prints each table's regions: keys, size, store files, cells, requests, data share.
    Report {
        /// The data directory.
        dir: PathBuf,
        /// Only this table.
        #[arg(long)]
        table: Option<String>,
        /// Writes an SVG bar chart of each region's data share to FILE.
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
    },
    /// Bulk loads a TSV or CSV file into a table (HBase ImportTsv's column syntax).
    Import(basalt_cli::ImportArgs),
    /// Backs a data directory up to TARGET (`backup DIR TARGET`), or re-reads a backup and
    /// checks every file (`backup --verify TARGET`).
    Backup {
        /// `DIR TARGET`, or `TARGET` alone with `--verify`.
        #[arg(num_args = 1..=2, required = true)]
        paths: Vec<PathBuf>,
        /// Re-reads backup TARGET (the newest, or `--id`) and checks every size and checksum.
        #[arg(long)]
        verify: bool,
        /// The backup to verify (its number; the newest by default).
        #[arg(long, requires = "verify")]
        id: Option<u64>,
        /// Backs up this table snapshot instead of every table at a read point taken now.
        #[arg(long, conflicts_with = "verify")]
        snapshot: Option<String>,
        /// Copies at most this many bytes a second.
        #[arg(long, conflicts_with = "verify")]
        max_bytes_per_sec: Option<u64>,
    },
    /// Rebuilds a data directory DIR (missing or empty) from a backup, verified first.
    Restore {
        /// The backup directory.
        backup: PathBuf,
        /// The new data directory.
        dir: PathBuf,
        /// The backup to restore (its number; the newest by default).
        #[arg(long)]
        id: Option<u64>,
    },
}

/// `basalt serve`'s flags (docs/serve.md).
#[derive(clap::Args)]
struct ServeArgs {
    /// The data directory (created if missing); not with --etcd.
    #[arg(required_unless_present = "etcd", conflicts_with = "etcd")]
    dir: Option<PathBuf>,
    /// A cluster's etcd members, comma-separated (`host:port` or URLs): the gateway serves
    /// the cluster instead of a data directory.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    etcd: Vec<String>,
    /// The prefix of the cluster's keys in etcd.
    #[arg(long, default_value = "/basalt", requires = "etcd")]
    prefix: String,
    /// The port to listen on (HBase's default).
    #[arg(long, default_value_t = 9090)]
    port: u16,
    /// The info port: the status page, /status.json and /metrics (HBase's default; 0 picks
    /// a free port).
    #[arg(long, default_value_t = 9095)]
    info_port: u16,
    /// The address to listen on (loopback unless asked).
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// Only framed transport (HBase's `-f`); by default detected per connection.
    #[arg(short = 'f', long, conflicts_with = "buffered")]
    framed: bool,
    /// Only buffered (unframed) transport; by default detected per connection.
    #[arg(long)]
    buffered: bool,
    /// Only the compact protocol (HBase's `-c`); by default detected per connection.
    #[arg(short = 'c', long, conflicts_with = "binary")]
    compact: bool,
    /// Only the binary protocol; by default detected per connection.
    #[arg(long)]
    binary: bool,
    /// The largest frame or unframed message, in bytes (HBase's framed default: 2 MiB).
    #[arg(long, default_value_t = 2 * 1024 * 1024)]
    max_message_bytes: usize,
    /// The most elements a list, set or map of a request may announce.
    #[arg(long, default_value_t = 100_000)]
    max_container_len: usize,
    /// Seconds a connection may wait for a request's bytes before it is closed.
    #[arg(long, default_value_t = 60)]
    read_timeout: u64,
    /// Seconds a new connection has to send its first complete request.
    #[arg(long, default_value_t = 60)]
    first_request_timeout: u64,
    /// Connections served at once (past it, a connection still waiting for its first
    /// request makes room, or the new one is closed).
    #[arg(long, default_value_t = 64)]
    max_connections: usize,
    /// Connections one client address may hold at once (0: no limit).
    #[arg(long, default_value_t = 0)]
    max_connections_per_peer: usize,
    /// Scanners open at once.
    #[arg(long, default_value_t = 1000)]
    max_scanners: usize,
    /// Seconds an unused scanner lives.
    #[arg(long, default_value_t = 60)]
    scanner_lease: u64,
}

/// `basalt regionserver`'s flags (docs/cluster.md).
#[derive(clap::Args)]
struct RegionServerArgs {
    /// etcd's members, comma-separated (`host:port` or URLs).
    #[arg(long, value_delimiter = ',', required = true)]
    etcd: Vec<String>,
    /// The prefix of the cluster's keys in etcd.
    #[arg(long, default_value = "/basalt")]
    prefix: String,
    /// The cluster's shared store: a directory every server reaches.
    #[arg(long)]
    store: PathBuf,
    /// This server's scratch directory (nothing durable is kept there).
    #[arg(long)]
    data: PathBuf,
    /// The server's name, unique in the cluster (default: regionserver-<port>).
    #[arg(long)]
    name: Option<String>,
    /// The address the RPC service and the status page listen on (loopback unless asked).
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// The RPC port (0 picks a free one).
    #[arg(long, default_value_t = 16020)]
    port: u16,
    /// The lease's time to live, in seconds: how long a dead server's regions wait.
    #[arg(long, default_value_t = 10)]
    lease_secs: u64,
    /// Never campaign for master (leave it to `basalt master` or the other servers).
    #[arg(long)]
    no_master: bool,
    /// The info port: the status page, /status.json, /metrics and the cluster's page at
    /// /master (HBase's region server default; 0 picks a free port).
    #[arg(long, default_value_t = 16030)]
    info_port: u16,
    /// Serve no status page.
    #[arg(long, conflicts_with = "info_port")]
    no_info: bool,
}

/// `basalt master`'s flags (docs/cluster.md).
#[derive(clap::Args)]
struct MasterArgs {
    /// etcd's members, comma-separated (`host:port` or URLs).
    #[arg(long, value_delimiter = ',', required = true)]
    etcd: Vec<String>,
    /// The prefix of the cluster's keys in etcd.
    #[arg(long, default_value = "/basalt")]
    prefix: String,
    /// The candidate's name, unique in the cluster.
    #[arg(long, default_value = "master")]
    name: String,
    /// The lease's time to live, in seconds: how long a dead master's term lasts.
    #[arg(long, default_value_t = 10)]
    lease_secs: u64,
    /// The address the info port listens on (loopback unless asked).
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// The info port: the cluster's page, /status.json and /metrics (HBase's master
    /// default; 0 picks a free port).
    #[arg(long, default_value_t = 16010)]
    info_port: u16,
    /// Serve no page.
    #[arg(long, conflicts_with = "info_port")]
    no_info: bool,
}

/// Writes `line` to standard output at once (written, not printed: a reader that closed
/// the pipe must not stop the process).
fn announce(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn master(a: MasterArgs) -> Result<(), Box<dyn std::error::Error>> {
    basalt_cli::init_logging();
    let options = basalt_cli::MasterOptions {
        etcd: a.etcd,
        prefix: a.prefix,
        name: a.name,
        lease_ttl: std::time::Duration::from_secs(a.lease_secs.max(2)),
        info: (!a.no_info).then(|| std::net::SocketAddr::new(a.bind, a.info_port)),
    };
    // One line once connected (scripts and tests wait for it).
    basalt_cli::run_master(options, |at| match at.info {
        Some(info) => announce(format!("campaigning; the cluster's page on http://{info}/")),
        None => announce("campaigning"),
    })
}

fn regionserver(a: RegionServerArgs) -> Result<(), Box<dyn std::error::Error>> {
    basalt_cli::init_logging();
    let options = basalt_cli::RegionServerOptions {
        etcd: a.etcd,
        prefix: a.prefix,
        store: a.store,
        data_dir: a.data,
        name: a.name.unwrap_or_else(|| format!("regionserver-{}", a.port)),
        listen: std::net::SocketAddr::new(a.bind, a.port),
        lease_ttl: std::time::Duration::from_secs(a.lease_secs.max(2)),
        master_candidate: !a.no_master,
        info: (!a.no_info).then(|| std::net::SocketAddr::new(a.bind, a.info_port)),
    };
    // One line once listening (scripts and tests wait for it).
    basalt_cli::run_regionserver(options, None, |at| {
        let rpc = at.rpc.map(|a| a.to_string()).unwrap_or_default();
        match at.info {
            Some(info) => announce(format!("listening on {rpc}; status page on http://{info}/")),
            None => announce(format!("listening on {rpc}")),
        }
    })
}

fn serve(a: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    use basalt_cli::{Protocol, ServeOptions, Transport};
    use std::time::Duration;
    basalt_cli::init_logging();
    let opts = ServeOptions {
        bind: a.bind,
        port: a.port,
        info_port: Some(a.info_port),
        transport: match (a.framed, a.buffered) {
            (true, _) => Some(Transport::Framed),
            (_, true) => Some(Transport::Buffered),
            _ => None,
        },
        protocol: match (a.compact, a.binary) {
            (true, _) => Some(Protocol::Compact),
            (_, true) => Some(Protocol::Binary),
            _ => None,
        },
        max_message_bytes: a.max_message_bytes,
        max_container_len: a.max_container_len,
        read_timeout: Duration::from_secs(a.read_timeout.max(1)),
        first_request_timeout: Duration::from_secs(a.first_request_timeout.max(1)),
        max_connections: a.max_connections.max(1),
        max_connections_per_peer: a.max_connections_per_peer,
        max_scanners: a.max_scanners,
        scanner_lease: Duration::from_secs(a.scanner_lease),
        ..ServeOptions::default()
    };
    let ready = |at: basalt_cli::Listening| {
        // One line on standard output once listening (scripts and tests wait for it), then
        // the status page's address.
        announce(format!("listening on {}", at.thrift));
        if let Some(info) = at.info {
            announce(format!("status page on http://{info}/"));
        }
    };
    match a.dir {
        Some(dir) => basalt_cli::serve(&dir, opts, ready),
        None => basalt_cli::serve_cluster(a.etcd, a.prefix, opts, ready),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Shell {
            dir,
            script,
            non_interactive,
            etcd,
            prefix,
        } => {
            // With --etcd the lone path (clap's DIR) is the script.
            let (dir, script) = match etcd.is_empty() {
                true => (dir, script),
                false => (None, dir),
            };
            match shell(dir, (etcd, prefix), script, non_interactive) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.is::<Interrupted>() => ExitCode::from(130),
                Err(e) => {
                    eprintln!("ERROR: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Serve(args) => match serve(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ERROR: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Regionserver(args) => match regionserver(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ERROR: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Master(args) => match master(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ERROR: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Tool(t) => match tool(t) {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                eprintln!("ERROR: {e}");
                ExitCode::from(2)
            }
        },
    }
}

/// A script stopped by Ctrl-C (exit status 130, as a shell's).
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted by Ctrl-C")
    }
}

impl std::error::Error for Interrupted {}

/// Runs `check`, `repair`, `report` or `import`; the exit code.
fn tool(command: Tool) -> Result<u8, basalt_cli::ToolError> {
    let mut out = std::io::stdout().lock();
    let healthy = |ok: bool| if ok { 0 } else { 1 };
    match command {
        Tool::Check { dir } => basalt_cli::run_check(&dir, &mut out).map(healthy),
        Tool::Repair { dir } => basalt_cli::run_repair(&dir, &mut out).map(healthy),
        Tool::Report { dir, table, plot } => runtime()?.block_on(async {
            basalt_cli::run_report(&dir, table.as_deref(), plot.as_deref(), &mut out)
                .await
                .map(|_| 0)
        }),
        Tool::Backup {
            paths,
            verify: true,
            id,
            ..
        } => match paths.as_slice() {
            [target] => basalt_cli::run_verify_backup(target, id, &mut out).map(healthy),
            _ => Err(basalt_cli::ToolError::Usage(
                "backup --verify takes the backup directory alone".into(),
            )),
        },
        Tool::Backup {
            paths,
            snapshot,
            max_bytes_per_sec,
            ..
        } => match paths.as_slice() {
            [dir, target] => runtime()?.block_on(async {
                basalt_cli::run_backup(dir, target, snapshot, max_bytes_per_sec, &mut out)
                    .await
                    .map(|_| 0)
            }),
            _ => Err(basalt_cli::ToolError::Usage(
                "backup takes the data directory and the backup directory".into(),
            )),
        },
        Tool::Restore { backup, dir, id } => {
            basalt_cli::run_restore(&backup, &dir, id, &mut out).map(|_| 0)
        }
        Tool::Import(args) => runtime()?.block_on(async {
            let summary = basalt_cli::run_import(&args, &mut out).await?;
            if let Some(basalt_cli::ImportStop::Failed(e)) = &summary.stop {
                eprintln!("ERROR: {e}");
            }
            Ok(summary.exit_code())
        }),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, basalt_cli::ToolError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            basalt_cli::ToolError::io("start the runtime for", std::path::Path::new("basalt"), e)
        })
}

/// Runs the shell on the data directory `dir`, or else on the cluster of `cluster`'s etcd
/// members and prefix.
fn shell(
    dir: Option<PathBuf>,
    (etcd, prefix): (Vec<String>, String),
    script: Option<PathBuf>,
    non_interactive: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let interactive = script.is_none() && !non_interactive && std::io::stdin().is_terminal();
    let input = match &script {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read script {}: {e}", path.display()))?,
        None if interactive => String::new(),
        None => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            s
        }
    };
    rt.block_on(async {
        let Some(dir) = dir else {
            let at = format!("etcd {} (prefix {prefix})", etcd.join(","));
            let data = basalt_cli::DataDir::connect(etcd, prefix)
                .await
                .map_err(|e| format!("cannot reach the cluster at {at}: {e}"))?;
            return run_shell(data, interactive, &input).await;
        };
        let data = basalt_cli::DataDir::open(&dir)
            .await
            .map_err(|e| format!("cannot open data directory {}: {e}", dir.display()))?;
        run_shell(data, interactive, &input).await
    })
}

/// Runs the shell over `data` (interactive, or the commands of `input`), then closes it.
async fn run_shell<B: basalt_core::client::Backend>(
    data: basalt_cli::DataDir<B>,
    interactive: bool,
    input: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    // Ctrl-C stops the running scan or count at its next row and a script before its
    // next line; the engine then closes cleanly.
    let interrupted = basalt_cli::Interrupt::on_ctrl_c(
        "the command stops at its next row, a script before its next line",
    )
    .flag();
    let result = if interactive {
        basalt_cli::interactive_shell(&data, interrupted.clone()).await
    } else {
        let mut out = std::io::stdout().lock();
        basalt_cli::run_script_until(&data, input, &mut out, interrupted.clone())
            .await
            .map_err(Into::into)
    };
    data.close().await?;
    result?;
    if !interactive && interrupted.load(Ordering::Relaxed) {
        // The script stopped early: say so in the exit status, as a shell does.
        return Err(Interrupted.into());
    }
    Ok(())
}
