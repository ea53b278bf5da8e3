//! `basalt-cli`: the `basalt` command-line tool's library. Its shell ([`shell`]) speaks
//! HBase's shell language over an embedded Basalt data directory; the binary
//! (`src/main.rs`) only parses arguments and calls [`run_script`].
//!
//! Invariant: nothing typed at the shell panics; a failing command prints one `ERROR:`
//! line and the shell goes on.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod datadir;
pub mod shell;

pub use datadir::DataDir;
pub use shell::{run_script, run_script_until, Flow, Shell, ShellError};
