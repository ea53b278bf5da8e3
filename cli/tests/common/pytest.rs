//! Runs one pytest module of `cli/tests/happybase/` (happybase and pytest installed, as
//! `.ci/run` does) against the `basalt` binary cargo built, with extra environment
//! variables; fails the test unless pytest passed and ran at least one test. Returns what
//! pytest printed.

use std::path::Path;
use std::process::Command;

pub fn pytest(file: &str, env: &[(&str, &str)]) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/happybase");
    let out = Command::new("python3")
        .args(["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", file])
        .current_dir(&dir)
        .env("BASALT_BIN", env!("CARGO_BIN_EXE_basalt"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(env.iter().copied())
        .output()
        .expect("python3 runs (pip install happybase pytest, as .ci/run does)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}\n{stderr}");
    assert!(
        out.status.success(),
        "pytest {file} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(" passed"), "pytest ran no test: {stdout}");
    assert!(!stdout.contains(" failed"), "{stdout}");
    stdout
}
