//! The `basalt` binary: parses the command line and runs the shell ([`basalt_cli`]).
//!
//! `basalt shell DIR [SCRIPT]` runs the commands of SCRIPT, or of standard input, against
//! the data directory DIR (created if missing), printing only their output.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

/// Basalt's command-line tool.
#[derive(Parser)]
#[command(
    name = "basalt",
    version,
    about = "Basalt's command-line tool: the HBase shell over a data directory"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs HBase shell commands against a data directory, from SCRIPT or standard input.
    Shell {
        /// The data directory (created if missing).
        dir: PathBuf,
        /// A file of commands, one per line (`#` starts a comment).
        script: Option<PathBuf>,
        /// Non-interactive (as `hbase shell -n`); the only mode for now.
        #[arg(short = 'n', long = "non-interactive")]
        non_interactive: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ERROR: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    let Command::Shell {
        dir,
        script,
        non_interactive: _,
    } = cli.command;
    let input = match &script {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read script {}: {e}", path.display()))?,
        None => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            s
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let conn = basalt_core::Connection::open(&dir)
            .await
            .map_err(|e| format!("cannot open data directory {}: {e}", dir.display()))?;
        let mut out = std::io::stdout().lock();
        basalt_cli::run_script(&conn, &input, &mut out).await?;
        conn.close().await?;
        Ok(())
    })
}
