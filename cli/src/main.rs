//! The `basalt` binary: parses the command line and runs the shell ([`basalt_cli`]).
//!
//! `basalt shell DIR [SCRIPT]` runs the commands of SCRIPT, or of standard input, against
//! the data directory DIR (created if missing), printing only their output. With neither a
//! script nor `-n`, and standard input a terminal, the shell is interactive: line editing,
//! history (`~/.basalt_history`) and Tab completion of command and table names.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use std::io::{IsTerminal, Read, Write};
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
        /// Non-interactive (as `hbase shell -n`): read commands from standard input.
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
        non_interactive,
    } = cli.command;
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
        let data = basalt_cli::DataDir::open(&dir)
            .await
            .map_err(|e| format!("cannot open data directory {}: {e}", dir.display()))?;
        let result = if interactive {
            interactive_shell(&data).await
        } else {
            let mut out = std::io::stdout().lock();
            basalt_cli::run_script(&data, &input, &mut out)
                .await
                .map_err(Into::into)
        };
        data.close().await?;
        result
    })
}

/// The line editor's helper: completes command names and the tables it was last told of.
struct Completion {
    tables: Vec<String>,
}

impl Completer for Completion {
    type Candidate = String;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(basalt_cli::shell::complete::complete(
            line,
            pos,
            &self.tables,
        ))
    }
}

impl Hinter for Completion {
    type Hint = String;
}
impl Highlighter for Completion {}
impl Validator for Completion {}
impl Helper for Completion {}

async fn interactive_shell(data: &basalt_cli::DataDir) -> Result<(), Box<dyn std::error::Error>> {
    let conn = &data.conn;
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".basalt_history"));
    let mut editor: Editor<Completion, DefaultHistory> = Editor::new()?;
    editor.set_helper(Some(Completion { tables: Vec::new() }));
    if let Some(h) = &history {
        // A missing history file is the first session's normal state.
        let _ = editor.load_history(h);
    }
    println!(
        "Basalt shell {}: HBase shell commands; 'help' lists them, 'exit' leaves.",
        env!("CARGO_PKG_VERSION")
    );
    let mut shell = basalt_cli::Shell::new(data.clone());
    loop {
        let tables = match conn.admin().list_tables().await {
            Ok(ts) => ts
                .iter()
                .map(|d| basalt_cli::shell::show_name(&d.name))
                .collect(),
            Err(_) => Vec::new(),
        };
        if let Some(h) = editor.helper_mut() {
            h.tables = tables;
        }
        match editor.readline("basalt> ") {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                }
                let mut out = std::io::stdout().lock();
                if shell.execute(&line, &mut out).await? == basalt_cli::Flow::Exit {
                    break;
                }
                out.flush()?;
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(h) = &history {
        if let Err(e) = editor.save_history(h) {
            eprintln!("warning: history not saved to {}: {e}", h.display());
        }
    }
    Ok(())
}
