//! The HBase shell over a Basalt [`Connection`]: parse a line ([`parse`]), run the command
//! (`ddl` for namespaces and tables, `regions` for regions, `data` for reads and writes), print as
//! HBase's shell prints.
//!
//! The shell is generic over the backend ([`Shell<B>`](Shell)): an embedded data directory
//! (`basalt shell DIR`) or a cluster (`basalt shell --etcd URLS`, a
//! `DataDir<RemoteBackend>`). Every command that makes sense on a cluster runs there
//! through the same client API; what needs the engine in this process (`call_endpoint`'s
//! endpoint plugins, coprocessor metrics) says so in its one `ERROR:` line. A cluster has
//! commands of its own ([`CLUSTER_COMMANDS`]: `move`, `balancer`, `balance_switch`, in
//! `cluster`), refused on a directory.
//!
//! Invariants: every line gives either the command's output followed by one
//! `Took N.NNNN seconds` line, or exactly one `ERROR: ...` line; nothing a user types
//! panics or stops the shell (only `exit` and a failing output stream do).
//!
//! The interactive mode (line editing, history, Tab completion from [`complete`]) is the
//! binary's: it feeds each line to [`Shell::execute`].

mod admin;
mod aggregate;
pub mod args;
pub mod background;
pub mod binary;
mod cluster;
pub mod complete;
mod data;
mod ddl;
mod index;
pub mod interactive;
mod plugins;
mod regions;
mod snapshots;
pub use ddl::{family_settings, show_name};
pub mod lex;
pub mod parse;
mod target;

use crate::datadir::{DataDir, NotOnCluster};
use basalt_core::client::Backend;
use basalt_core::{Connection, Engine};
use lex::ParseError;
use parse::parse_line;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Why a command failed: printed as one `ERROR: ...` line.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The line is not valid shell syntax.
    #[error("{0}")]
    Parse(#[from] ParseError),
    /// No such command.
    #[error("Unknown command '{0}'. Type 'help' to list the commands.")]
    UnknownCommand(String),
    /// The command's arguments are wrong.
    #[error("{command}: {message}. Type help '{command}' for its usage.")]
    Usage {
        /// The command.
        command: String,
        /// What is wrong.
        message: String,
    },
    /// Something HBase has that Basalt does not.
    #[error("{0}")]
    Unsupported(String),
    /// Ctrl-C stopped the command (what it had done is said; nothing it wrote is undone).
    #[error("interrupted by Ctrl-C after {0}")]
    Interrupted(String),
    /// The engine refused.
    #[error("{}", engine_message(.0))]
    Engine(#[from] basalt_core::Error),
    /// The command needs an embedded engine and the shell is on a cluster.
    #[error(transparent)]
    NotOnCluster(#[from] NotOnCluster),
}

fn engine_message(e: &basalt_core::Error) -> String {
    use basalt_core::Error as E;
    match e {
        E::TableNotFound(t) => format!("Unknown table {t}! Check the name with 'list'."),
        E::TableExists(t) => format!("Table already exists: {t}! Pick another name or drop it."),
        E::TableDisabled(t) => format!("Table {t} is disabled! Enable it with enable '{t}'."),
        E::NamespaceNotFound(n) => {
            format!("Unknown namespace {n}! Create it with create_namespace '{n}'.")
        }
        E::TableState { table, expected } => {
            let step = if *expected == "disabled" {
                "disable"
            } else {
                "enable"
            };
            format!("Table {table} should be {expected}! Run {step} '{table}' first.")
        }
        E::SnapshotNotFound(s) => format!("Snapshot '{s}' doesn't exist on the filesystem"),
        E::SnapshotExists(s) => format!("Snapshot '{s}' already stored on the filesystem."),
        other => other.to_string(),
    }
}

/// What the shell does after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Read the next line.
    Continue,
    /// `exit` was typed.
    Exit,
}

/// A shell session over one data directory or one cluster.
pub struct Shell<B: Backend = Engine> {
    conn: Connection<B>,
    dir: DataDir<B>,
    interrupted: Arc<AtomicBool>,
    background: background::Background,
}

/// The commands, by group, with a one-line usage each (`help` prints them).
pub const COMMANDS: &[(&str, &str, &str)] = &[
    ("general", "help", "help | help 'command'"),
    ("general", "version", "version"),
    ("general", "status", "status"),
    ("general", "exit", "exit"),
    ("ddl", "create", "create 't', 'f1' | {NAME => 'f1', VERSIONS => 3, TTL => 86400, MIN_VERSIONS, KEEP_DELETED_CELLS, COMPRESSION, BLOOMFILTER, BLOCKSIZE, BLOCKCACHE, IN_MEMORY}, ..., [{SPLITS => ['a','b'] | SPLITS_FILE => 'f.txt' | NUMREGIONS => n, SPLITALGO => 'HexStringSplit'|'DecimalStringSplit'|'UniformSplit', SALT_BUCKETS => n, SALT_HASH_PREFIX => bytes}] (a salted table: data commands then take logical row keys)"),
    ("ddl", "list", "list | list 'regex'"),
    ("ddl", "describe", "describe 't'"),
    ("ddl", "exists", "exists 't'"),
    ("ddl", "disable", "disable 't'"),
    ("ddl", "enable", "enable 't'"),
    ("ddl", "is_enabled", "is_enabled 't'"),
    ("ddl", "is_disabled", "is_disabled 't'"),
    ("ddl", "drop", "drop 't' (disable it first)"),
    ("ddl", "alter", "alter 't', NAME => 'f', VERSIONS => 5 (adds or changes family f) | 'f' | 'delete' => 'f' | {NAME => 'f', METHOD => 'delete'} | 'coprocessor' => 'name|priority|key=value,...' | METHOD => 'table_att_unset', NAME => 'coprocessor$1'"),
    ("ddl", "truncate", "truncate 't' (drops every row; one region after)"),
    ("ddl", "truncate_preserve", "truncate_preserve 't' (drops every row, keeps the region boundaries)"),
    ("namespace", "create_namespace", "create_namespace 'ns'"),
    ("namespace", "list_namespace", "list_namespace"),
    ("namespace", "drop_namespace", "drop_namespace 'ns' (it must hold no table)"),
    ("namespace", "list_namespace_tables", "list_namespace_tables 'ns'"),
    ("dml", "put", "put 't', 'row', 'f:q', 'value' [, ts]"),
    ("dml", "get", "get 't', 'row' [, 'f:q' | ['f:q', ...] | {COLUMN(S) => ..., TIMESTAMP => ts, TIMERANGE => [min, max], VERSIONS => n, FILTER => \"...\"}]"),
    ("dml", "scan", "scan 't' [, {STARTROW, STOPROW, ROWPREFIXFILTER, COLUMNS, LIMIT, REVERSED, VERSIONS, TIMERANGE, FILTER, RAW}]"),
    ("dml", "count", "count 't' [, {INTERVAL => 1000, FILTER => \"...\", STARTROW, STOPROW}] (prints the count every INTERVAL rows)"),
    ("dml", "delete", "delete 't', 'row', 'f:q' [, ts]"),
    ("dml", "deleteall", "deleteall 't', 'row' [, 'f:q' [, ts]]"),
    ("dml", "incr", "incr 't', 'row', 'f:q' [, n]"),
    ("dml", "get_counter", "get_counter 't', 'row', 'f:q'"),
    ("dml", "append", "append 't', 'row', 'f:q', 'value'"),
    ("regions", "get_splits", "get_splits 't'"),
    ("regions", "list_regions", "list_regions 't'"),
    ("snapshots", "snapshot", "snapshot 't', 'name' | ['t1', 't2'], 'name' [, {INDEXES => false}] (online, at one read point; an indexed table's index tables are included unless INDEXES => false)"),
    ("snapshots", "list_snapshots", "list_snapshots ['regex']"),
    ("snapshots", "describe_snapshot", "describe_snapshot 'name' (tables, read point, files, space held only by snapshots)"),
    ("snapshots", "clone_snapshot", "clone_snapshot 'name', 'new_table' (shares the snapshot's files; index tables follow the data table)"),
    ("snapshots", "restore_snapshot", "restore_snapshot 'name' (disable its tables first; takes a fail-safe snapshot, leaves the tables disabled)"),
    ("snapshots", "delete_snapshot", "delete_snapshot 'name'"),
    ("plugins", "upload_coprocessor", "upload_coprocessor '/path/plugin.wasm' (a WebAssembly component of basalt:coprocessor@0.2.0; prints its sha256; attach with alter 't', METHOD => 'table_att', 'coprocessor' => 'plugin:SHA256|priority|key=value')"),
    ("plugins", "list_plugins", "list_plugins (sha256, kind, size, upload time, the tables it is attached to)"),
    ("plugins", "delete_plugin", "delete_plugin 'sha256' (detach it first)"),
    ("plugins", "swap_coprocessor", "swap_coprocessor 't', 'plugin:OLD', 'plugin:NEW|priority|key=value' (one schema change: hot swap, or roll back)"),
    ("plugins", "call_endpoint", "call_endpoint 't', 'sha256', 'request' [, {STARTROW => 'a', STOPROW => 'b'}] (an endpoint plugin over the regions, merged)"),
    ("admin", "flush", "flush 't'"),
    ("admin", "compact", "compact 't'"),
    ("admin", "major_compact", "major_compact 't'"),
    ("admin", "split", "split 't' | split 't', 'key' | split 'region' [, 'key'] (regions as list_regions names them, or by id)"),
    ("admin", "merge_region", "merge_region 'region a', 'region b' | merge_region ['a', 'b', ...] (adjacent regions)"),
    ("indexes", "create_index", "create_index 't', 'name', 'f:q' | ['f:a', 'f:b DESC'] [, {INCLUDE => ['f:c'], UNIQUE => true, SPARSE => true, SALT_BUCKETS => n}] (online build)"),
    ("indexes", "drop_index", "drop_index 't', 'name'"),
    ("indexes", "list_indexes", "list_indexes | list_indexes 't'"),
    ("indexes", "scan_index", "scan_index 't', 'name', 'value' | ['v1', 'v2'] | {EQ => [...] | PREFIX => [...] | FROM => [...], TO => [...], LIMIT => n, REVERSED => true, ROWS => true}"),
    ("indexes", "verify_index", "verify_index 't', 'name' [, {REPAIR => true}]"),
    ("aggregation", "aggregate", "aggregate 't', 'count'|'sum'|'min'|'max'|'avg'|'std'|'median' [, 'f:q'] [, {STARTROW => 'a', STOPROW => 'b', TYPE => 'long'|'unsigned'|'double'}]"),
    ("coprocessors", "list_coprocessors", "list_coprocessors 't' (run order, state, calls, errors, latency)"),
];

/// The commands only a cluster has (`help` lists them over a cluster), as [`COMMANDS`].
pub const CLUSTER_COMMANDS: &[(&str, &str, &str)] = &[
    ("cluster", "move", "move 'region' [, 'server'] (a region as list_regions names it, or its id, with its table group when grouped; to any other live server when none is named)"),
    ("cluster", "balancer", "balancer (one balancing pass; prints how many regions moved)"),
    ("cluster", "balance_switch", "balance_switch true|false (prints the previous state)"),
];

impl<B: Backend> Shell<B> {
    /// A shell over the open data directory (or connected cluster) `dir`.
    pub fn new(dir: DataDir<B>) -> Self {
        Shell {
            conn: dir.conn.clone(),
            dir,
            interrupted: Arc::new(AtomicBool::new(false)),
            background: background::Background::default(),
        }
    }

    /// Waits for the work Ctrl-C left running in the background (compactions, index
    /// builds and repairs); call it before closing the engine.
    pub async fn finish_background(&self) {
        self.background.finish().await
    }

    /// This shell, stopped by `flag` (see [`Shell::interrupt_flag`]).
    pub fn interrupted_by(mut self, flag: Arc<AtomicBool>) -> Self {
        self.interrupted = flag;
        self
    }

    /// The flag Ctrl-C sets: scans and counts stop at their next row, a script at its next
    /// line; schema changes, compactions and index builds run to their end (stopping them
    /// halfway would leave work for the next open, or an index half built). The
    /// interactive shell clears it before each command.
    pub fn interrupt_flag(&self) -> Arc<AtomicBool> {
        self.interrupted.clone()
    }

    /// Runs one line, writing its output (or its one `ERROR:` line) to `out`.
    pub async fn execute(&mut self, line: &str, out: &mut dyn Write) -> io::Result<Flow> {
        let started = Instant::now();
        let cmd = match parse_line(line) {
            Ok(None) => return Ok(Flow::Continue),
            Ok(Some(c)) => c,
            Err(e) => {
                writeln!(out, "ERROR: {e}")?;
                return Ok(Flow::Continue);
            }
        };
        let mut text = String::new();
        let result = self.dispatch(&cmd.name, &cmd.args, &mut text).await;
        match result {
            Ok(Flow::Exit) => Ok(Flow::Exit),
            Ok(Flow::Continue) => {
                out.write_all(text.as_bytes())?;
                if cmd.name != "help" {
                    writeln!(out, "Took {:.4} seconds", started.elapsed().as_secs_f64())?;
                }
                Ok(Flow::Continue)
            }
            Err(e) => {
                let msg = e.to_string().replace('\n', " ");
                writeln!(out, "ERROR: {msg}")?;
                Ok(Flow::Continue)
            }
        }
    }

    async fn dispatch(
        &mut self,
        name: &str,
        vals: &[parse::Value],
        out: &mut String,
    ) -> Result<Flow, ShellError> {
        let a = args::Args { cmd: name, vals };
        match name {
            "exit" | "quit" => {
                a.count(0, 0)?;
                return Ok(Flow::Exit);
            }
            "help" => help(&a, self.dir.cluster().is_some(), out)?,
            "version" => {
                a.count(0, 0)?;
                let backend = match self.dir.cluster() {
                    None => "embedded engine",
                    Some(_) => "cluster client",
                };
                out.push_str(&format!(
                    "basalt {} ({backend}), HBase shell syntax\n",
                    env!("CARGO_PKG_VERSION")
                ));
            }
            "status" => cluster::status(&self.dir, &a, out).await?,
            "move" => {
                cluster::move_region(&self.dir, &a, &self.interrupted, &self.background, out)
                    .await?
            }
            "balancer" => {
                cluster::balancer(&self.dir, &a, &self.interrupted, &self.background, out).await?
            }
            "balance_switch" => cluster::balance_switch(&self.dir, &a, out).await?,
            "create" => ddl::create(&self.conn, &a, out).await?,
            "list" => ddl::list(&self.conn, &a, out).await?,
            "describe" | "desc" => ddl::describe(&self.conn, &a, out).await?,
            "exists" => ddl::exists(&self.conn, &a, out).await?,
            "disable" | "enable" => ddl::enable(&self.conn, &a, name == "enable").await?,
            "is_enabled" | "is_disabled" => {
                ddl::is_enabled(&self.conn, &a, name == "is_enabled", out).await?
            }
            "drop" => ddl::drop(&self.conn, &a).await?,
            "truncate" | "truncate_preserve" => ddl::truncate(&self.conn, &a, out).await?,
            "create_namespace" | "drop_namespace" | "list_namespace" | "list_namespace_tables" => {
                ddl::namespace(&self.conn, &a, out).await?
            }
            "alter" => admin::alter(&self.dir, &a, out).await?,
            "split" => admin::split(&self.dir, &a, out).await?,
            "merge_region" => admin::merge_region(&self.dir, &a, out).await?,
            "create_index" => {
                index::create_index(&self.dir, &a, &self.interrupted, &self.background, out).await?
            }
            "drop_index" => index::drop_index(&self.dir, &a).await?,
            "list_indexes" => index::list_indexes(&self.dir, &a, out).await?,
            "scan_index" => index::scan_index(&self.dir, &a, out).await?,
            "verify_index" => {
                index::verify_index(&self.dir, &a, &self.interrupted, &self.background, out).await?
            }
            "aggregate" => aggregate::aggregate(&self.dir, &a, out).await?,
            "list_coprocessors" => admin::list_coprocessors(&self.dir, &a, out).await?,
            "upload_coprocessor" => plugins::upload(&self.dir, &a, out).await?,
            "list_plugins" => plugins::list(&self.dir, &a, out).await?,
            "delete_plugin" => plugins::delete(&self.dir, &a).await?,
            "swap_coprocessor" => plugins::swap(&self.dir, &a).await?,
            "call_endpoint" => plugins::call(&self.dir, &a, out).await?,
            "get_splits" | "list_regions" => regions::regions(&self.dir, &a, out).await?,
            "snapshot" => snapshots::snapshot(&self.dir, &a).await?,
            "list_snapshots" => snapshots::list_snapshots(&self.dir, &a, out).await?,
            "describe_snapshot" => snapshots::describe_snapshot(&self.dir, &a, out).await?,
            "clone_snapshot" => snapshots::clone_snapshot(&self.dir, &a).await?,
            "restore_snapshot" | "delete_snapshot" => {
                snapshots::restore_or_delete(&self.dir, &a).await?
            }
            "flush" | "compact" | "major_compact" => {
                regions::maintain(&self.conn, &a, &self.interrupted, &self.background).await?
            }
            "put" => data::put(&self.conn, &a).await?,
            "get" => data::get(&self.conn, &a, out).await?,
            "scan" => data::scan(&self.conn, &a, &self.interrupted, out).await?,
            "count" => data::count(&self.conn, &a, &self.interrupted, out).await?,
            "delete" | "deleteall" => data::delete(&self.conn, &a).await?,
            "incr" | "get_counter" => data::counter(&self.conn, &a, out).await?,
            "append" => data::append(&self.conn, &a, out).await?,
            other => {
                if KNOWN_ELSEWHERE.contains(&other) {
                    return Err(ShellError::Unsupported(format!(
                        "'{other}' is an HBase shell command the basalt shell does not have; type 'help' for the commands it has."
                    )));
                }
                return Err(ShellError::UnknownCommand(other.to_string()));
            }
        }
        Ok(Flow::Continue)
    }
}

/// HBase commands not built yet: they get a clearer error than an unknown word.
const KNOWN_ELSEWHERE: &[&str] = &["whoami", "snapshot", "clone_snapshot", "grant", "revoke"];

fn help(a: &args::Args<'_>, cluster: bool, out: &mut String) -> Result<(), ShellError> {
    a.count(0, 1)?;
    if a.vals.is_empty() {
        out.push_str(match cluster {
            false => "Basalt shell: HBase shell commands over an embedded Basalt data directory.\n",
            true => "Basalt shell: HBase shell commands over a Basalt cluster.\n",
        });
        let listed: Vec<&(&str, &str, &str)> = match cluster {
            false => COMMANDS.iter().collect(),
            true => COMMANDS.iter().chain(CLUSTER_COMMANDS).collect(),
        };
        let mut groups: Vec<&str> = listed.iter().map(|(g, _, _)| *g).collect();
        groups.dedup();
        for g in groups {
            let names: Vec<&str> = listed
                .iter()
                .filter(|(gg, _, _)| *gg == g)
                .map(|(_, n, _)| *n)
                .collect();
            out.push_str(&format!(
                "\n  Group name: {g}\n  Commands: {}\n",
                names.join(", ")
            ));
        }
        out.push_str("\nType help 'command' for one command's usage.\n");
        return Ok(());
    }
    let name = a.string(0, "the command name")?;
    match COMMANDS
        .iter()
        .chain(CLUSTER_COMMANDS)
        .find(|(_, n, _)| *n == name)
    {
        Some((_, _, usage)) => {
            out.push_str(&format!("{usage}\n"));
            Ok(())
        }
        None => Err(ShellError::UnknownCommand(name)),
    }
}

/// Runs every line of `input` (a script or standard input) against `dir`, writing the
/// output to `out`; stops at `exit` or the end of the input. Only a failing `out` is an
/// error: a command's failure is an `ERROR:` line and the script goes on.
pub async fn run_script<B: Backend>(
    dir: &DataDir<B>,
    input: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    run_script_until(dir, input, out, Arc::new(AtomicBool::new(false))).await
}

/// [`run_script`], stopping at the first line after `interrupted` is set (by Ctrl-C),
/// with one `ERROR:` line saying how far it got.
pub async fn run_script_until<B: Backend>(
    dir: &DataDir<B>,
    input: &str,
    out: &mut dyn Write,
    interrupted: Arc<AtomicBool>,
) -> io::Result<()> {
    let mut shell = Shell::new(dir.clone()).interrupted_by(interrupted);
    for (n, line) in input.lines().enumerate() {
        if shell.interrupted.load(Ordering::Relaxed) {
            writeln!(
                out,
                "ERROR: interrupted by Ctrl-C: the script stopped before line {}",
                n + 1
            )?;
            break;
        }
        if shell.execute(line, out).await? == Flow::Exit {
            break;
        }
    }
    shell.finish_background().await;
    out.flush()
}
