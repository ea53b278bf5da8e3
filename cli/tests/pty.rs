//! The interactive shell through a pseudo-terminal: `basalt shell DIR` with a terminal on
//! standard input runs the line editor, and this test types at it as a person would
//! (prompt, Tab completion of a table name inside a quote, an unknown command, `exit`),
//! then checks the exit status and the history file written to `$HOME`.
//!
//! Every wait has a timeout, so a hung shell fails the test instead of blocking it.

use rexpect::process::WaitStatus;
use rexpect::session::{spawn_with_options, Options, PtySession};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long any one expected output may take.
const TIMEOUT_MS: u64 = 20_000;
const PROMPT: &str = "basalt> ";

/// Types `text` (no newline: `\r` is Enter, `\t` Tab) and sends it at once.
fn type_keys(p: &mut PtySession, text: &str) {
    p.send(text).unwrap();
    p.flush().unwrap();
}

/// Types `line` and Enter, then returns what the shell printed before its next prompt.
fn run_line(p: &mut PtySession, line: &str) -> String {
    type_keys(p, &format!("{line}\r"));
    p.exp_string(PROMPT).unwrap()
}

/// The shell's exit status, waiting at most [`TIMEOUT_MS`] for it to end.
fn exit_status(p: &PtySession) -> WaitStatus {
    let deadline = Instant::now() + Duration::from_millis(TIMEOUT_MS);
    loop {
        match p.process().status() {
            Some(WaitStatus::StillAlive) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Some(status) => return status,
            None => panic!("the shell's status cannot be read"),
        }
    }
}

#[test]
fn interactive_shell_edits_completes_and_keeps_history() {
    let data = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_basalt"));
    cmd.arg("shell")
        .arg(data.path())
        .env("HOME", home.path())
        // A terminal the line editor supports (it falls back to plain reads on "dumb").
        .env("TERM", "xterm");
    let options = Options::new()
        .timeout_ms(Some(TIMEOUT_MS))
        .strip_ansi_escape_codes(true);
    let mut p = spawn_with_options(cmd, options).unwrap();

    let banner = p.exp_string(PROMPT).unwrap();
    assert!(banner.contains("Basalt shell"), "banner: {banner:?}");

    let out = run_line(&mut p, "create 'messages', 'f'");
    assert!(out.contains("Took "), "create printed {out:?}");

    // Tab inside the quote completes the table name and closes the quote.
    type_keys(&mut p, "put 'mes");
    p.exp_string("put 'mes").unwrap();
    type_keys(&mut p, "\t");
    p.exp_string("put 'messages'").unwrap();
    let out = run_line(&mut p, ", 'r1', 'f:q', 'v1'");
    assert!(out.contains("Took "), "put printed {out:?}");
    assert!(!out.contains("ERROR"), "put printed {out:?}");

    let out = run_line(&mut p, "scan 'messages'");
    let cell = regex::Regex::new(r"r1\s+column=f:q, timestamp=\d+, value=v1\r?\n").unwrap();
    assert!(cell.is_match(&out), "scan printed {out:?}");
    assert!(out.contains("1 row(s)"), "scan printed {out:?}");

    // An unknown command: one ERROR line, and the shell goes on.
    let out = run_line(&mut p, "frobnicate 'x'");
    assert_eq!(out.matches("ERROR:").count(), 1, "printed {out:?}");
    assert!(
        out.contains("ERROR: Unknown command 'frobnicate'"),
        "printed {out:?}"
    );
    assert!(!out.contains("Took "), "printed {out:?}");
    let out = run_line(&mut p, "list");
    assert!(
        out.contains("messages") && out.contains("1 row(s)") && out.contains("Took "),
        "list printed {out:?}"
    );

    type_keys(&mut p, "exit\r");
    p.exp_eof().unwrap();
    match exit_status(&p) {
        WaitStatus::Exited(_, code) => assert_eq!(code, 0, "exit status"),
        other => panic!("the shell did not exit normally: {other:?}"),
    }

    let history = std::fs::read_to_string(home.path().join(".basalt_history")).unwrap();
    for line in [
        "create 'messages', 'f'",
        // The completed line, as the editor held it when Enter was pressed.
        "put 'messages', 'r1', 'f:q', 'v1'",
        "scan 'messages'",
        "exit",
    ] {
        assert!(
            history.lines().any(|l| l == line),
            "history lacks {line:?}: {history:?}"
        );
    }
}
