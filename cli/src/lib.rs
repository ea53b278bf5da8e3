//! `basalt-cli`: the `basalt` command-line tool's library. Its shell ([`Shell`],
//! [`run_script`]) speaks HBase's shell language over an embedded Basalt data directory
//! or a cluster ([`DataDir`]); [`run_check`] and [`run_repair`] check and repair a closed
//! directory, [`run_report`] prints (and plots) each table's regions and their share of
//! the data, [`run_import`] bulk loads TSV or CSV in HBase ImportTsv's syntax, and
//! [`serve()`] serves HBase's Thrift1 service (with a status page, [`Status`]) over a
//! directory, or in front of a cluster ([`serve_cluster`]). The binary (`src/main.rs`) only
//! parses arguments and calls into these.
//!
//! Layers, bottom to top: `error`, `progress`, `datadir`, `offline`, `import`, `report`,
//! `backup`, `shell`, `serve`, `pages`, `regionserver`.
//!
//! Each module uses only modules before it in that list: the error type and progress bars
//! at the bottom, then opening a data directory the tool's way; the offline check and
//! repair; the importer; the region report (which prints sizes as the check does);
//! backups ([`run_backup`], [`run_verify_backup`], [`run_restore`]); the shell; and on top the Thrift gateway, whose status page prints families as the shell's
//! `describe` does; the pages of a cluster's processes (a region server's status page and
//! the master's, [`RegionServerStatus`], [`MasterStatus`]); and a cluster's region server
//! ([`run_regionserver`]).
//!
//! Public modules: none. Every module is private: what the binary, the tests and the docs
//! use is re-exported at the crate root, so the compiler reports what no one uses.
//!
//! Invariants: nothing typed at the shell panics; a failing command prints one `ERROR:`
//! line and the shell goes on. No directory, file or argument makes `check`, `repair`,
//! `report` or `import` panic: what they cannot do is a [`ToolError`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod backup;
mod datadir;
mod error;
mod import;
mod offline;
mod pages;
mod progress;
mod regionserver;
mod report;
mod serve;
mod shell;

pub use backup::{run_backup, run_restore, run_verify_backup};
pub use datadir::{ClusterAddress, DataDir, Embedded, NotOnCluster};
pub use error::{ColumnSpecError, ToolError};
pub use import::{
    import_file, run_import, BadLine, BadLineKind, ColumnSpec, ImportArgs, ImportOptions,
    ImportStop, ImportSummary, InputColumn,
};
pub use offline::{check_offline, run_check, run_repair};
pub use pages::{
    LifeStatus, MasterStatus, PendingMove, RegionPlace, RegionServerStatus, RpcStatus,
    ServedRegion, ServerRow,
};
pub use progress::Interrupt;
pub use regionserver::{
    run as run_regionserver, run_master, run_with_endpoints as run_regionserver_with_endpoints,
    MasterOptions, RegionServerOptions, ServerAddresses,
};
pub use report::{run_report, RegionRow, TableReport};
pub use serve::{
    init_logging, serve, serve_cluster, ClusterInfo, CoprocessorStatus, FamilyStatus,
    GatewayCounters, IndexStatus, Listening, Protocol, RegionStatus, ServeOptions, ServerInfo,
    Status, TableStatus, Transport,
};
pub use shell::complete::complete;
pub use shell::interactive::interactive_shell;
pub use shell::lex::ParseError;
pub use shell::{run_script, run_script_until, show_name, Flow, Shell, ShellError};
