//! The interactive shell: `basalt shell` on a terminal, a line editor (rustyline) with
//! completion of command names and the tables it last listed, and a history file.
//!
//! Invariant: a failing command prints its error and the shell goes on; only the
//! terminal's end of input, `exit` or an I/O error on the terminal end it.

use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
        Ok(super::complete::complete(line, pos, &self.tables))
    }
}

impl Hinter for Completion {
    type Hint = String;
}
impl Highlighter for Completion {}
impl Validator for Completion {}
impl Helper for Completion {}

/// Runs the shell interactively on the terminal over `data`: a line editor with
/// completion of commands and tables and a history in `~/.basalt_history`, until `exit`
/// or end of input; Ctrl-C (`interrupted`) stops the running command, not the shell.
pub async fn interactive_shell<B: basalt_core::client::Backend>(
    data: &crate::DataDir<B>,
    interrupted: Arc<AtomicBool>,
) -> Result<(), Box<dyn std::error::Error>> {
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
    let mut shell = super::Shell::new(data.clone()).interrupted_by(interrupted.clone());
    loop {
        let tables = match conn.admin().list_tables().await {
            Ok(ts) => ts.iter().map(|d| super::show_name(&d.name)).collect(),
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
                interrupted.store(false, Ordering::Relaxed);
                if shell.execute(&line, &mut out).await? == super::Flow::Exit {
                    break;
                }
                out.flush()?;
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    shell.finish_background().await;
    if let Some(h) = &history {
        if let Err(e) = editor.save_history(h) {
            eprintln!("warning: history not saved to {}: {e}", h.display());
        }
    }
    Ok(())
}
