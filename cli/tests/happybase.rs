//! Runs the Python suite in `cli/tests/happybase/` (pytest over happybase 1.3, the client
//! HBase users run) against the `basalt` binary cargo built for this test, so that
//! `cargo test` covers the Thrift gateway end to end. Needs `python3` with `happybase` and
//! `pytest` (`.ci/run` installs them with pip); the suite starts and stops its own servers.
//!
//! The load test's period is `BASALT_CONCURRENCY_SECS` (default 60 s, the figure;
//! `.ci/run` sets a shorter one).

use std::path::Path;
use std::process::Command;

fn pytest(file: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/happybase");
    let out = Command::new("python3")
        .args(["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", file])
        .current_dir(&dir)
        .env("BASALT_BIN", env!("CARGO_BIN_EXE_basalt"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs (pip install happybase pytest, as .ci/run does)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}\n{stderr}");
    assert!(
        out.status.success(),
        "pytest {file} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(" passed"), "pytest ran no test: {stdout}");
    assert!(!stdout.contains(" failed"), "{stdout}");
}

/// Every happybase call, in both transports and both protocols.
#[test]
fn happybase_calls_in_every_transport_and_protocol() {
    pytest("test_happybase.py");
}

/// The example plugins (validation, counter) under happybase, the sum endpoint in the shell.
#[test]
fn plugins_serve_happybase() {
    pytest("test_plugins.py");
}

/// 32 concurrent happybase clients: no error, every acknowledged put read back.
#[test]
fn thirty_two_happybase_clients_lose_nothing() {
    pytest("test_concurrency.py");
}
