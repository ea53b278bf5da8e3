//! Runs the Python suite in `cli/tests/happybase/` (pytest over happybase 1.3, the client
//! HBase users run) against the `basalt` binary cargo built for this test, so that
//! `cargo test` covers the Thrift gateway end to end. Needs `python3` with `happybase` and
//! `pytest` (`.ci/run` installs them with pip); the suite starts and stops its own servers.
//!
//! The load test's period is `BASALT_CONCURRENCY_SECS` (default 60 s, the figure;
//! `.ci/run` sets a shorter one).

#[path = "common/pytest.rs"]
mod runner;

fn pytest(file: &str) {
    runner::pytest(file, &[]);
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
