//! Helpers shared by the integration tests of the `basalt` command-line tool.
//!
//! Each test binary includes this module with `mod common;` and uses what it needs, so an
//! item one binary leaves unused is not dead code: `dead_code` is allowed here.
#![allow(dead_code)]

pub mod netns;

/// The first line a spawned `basalt regionserver` (or `serve`) prints on its piped
/// standard output: `listening on ADDR` once bound, or what it printed instead (empty
/// when it exited first).
pub fn first_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    line
}

pub mod cluster;
