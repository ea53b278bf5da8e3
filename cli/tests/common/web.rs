//! The tests' web client: plain HTTP/1.0 gets, and Debian's chromium, headless, for pages
//! as a browser renders them (`--dump-dom`) and their screenshots.
#![allow(dead_code)] // each test binary uses a different part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `GET path` over HTTP/1.0; returns (status line, body).
pub fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// `GET path` answered 200, its body as JSON.
pub fn get_json(addr: &str, path: &str) -> serde_json::Value {
    let (status, body) = http_get(addr, path);
    assert!(status.contains(" 200 "), "{path}: {status}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// Runs chromium headless with `args` and waits (at most two minutes); returns what it
/// printed.
pub fn chromium(profile: &Path, args: &[String]) -> String {
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium runs (apt-get install chromium, as .ci/run does)");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium failed: {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish in two minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// Saves chromium's screenshot of `url` (`width`x`height`) to `to`, and checks it is a
/// PNG of some size.
pub fn screenshot(url: &str, to: &Path, width: u32, height: u32) {
    let profile = tempfile::tempdir().unwrap();
    let _ = std::fs::remove_file(to);
    chromium(
        profile.path(),
        &[
            format!("--screenshot={}", to.display()),
            format!("--window-size={width},{height}"),
            url.to_string(),
        ],
    );
    let png = std::fs::read(to).unwrap_or_else(|e| panic!("no screenshot at {to:?}: {e}"));
    assert!(png.starts_with(b"\x89PNG"), "a PNG at {to:?}");
    assert!(png.len() > 10_000, "a screenshot with something on it");
}
