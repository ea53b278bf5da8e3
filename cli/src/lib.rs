//! `basalt-cli`: the `basalt` command-line tool's library. Its shell ([`shell`]) speaks
//! HBase's shell language over an embedded Basalt data directory; [`offline`] checks and
//! repairs a closed directory, [`report`] prints (and plots) each table's regions and
//! their share of the data, and [`import`] bulk loads TSV or CSV in HBase ImportTsv's
//! syntax. The binary (`src/main.rs`) only parses arguments and calls into these modules.
//!
//! Invariants: nothing typed at the shell panics; a failing command prints one `ERROR:`
//! line and the shell goes on. No directory, file or argument makes `check`, `repair`,
//! `report` or `import` panic: what they cannot do is a [`ToolError`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod datadir;
pub mod error;
pub mod import;
pub mod offline;
pub mod progress;
pub mod report;
pub mod serve;
pub mod shell;

pub use datadir::DataDir;
pub use error::ToolError;
pub use shell::{run_script, run_script_until, Flow, Shell, ShellError};
