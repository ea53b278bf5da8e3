//! Transcript tests: every `tests/transcripts/NAME.hbase` runs against a fresh data
//! directory through `basalt_cli::run_script`, and its output, less the `Took ...` lines
//! (their times vary), must equal `NAME.out`. `BLESS=1 cargo test -p basalt-cli --test
//! transcripts` rewrites the `.out` files from the current output (review the diff).
//! Transcripts run with the tool's built-in coprocessors registered ([`basalt_cli::DataDir`]).

use std::path::Path;

/// The output less what varies from run to run: `Took` lines, hook latencies
/// (`list_coprocessors`' AVG_LATENCY, shown as `N.Nus`) and snapshot creation times.
fn strip_took(text: &str) -> String {
    let latency = regex::Regex::new(r" +\d+\.\dus\b").unwrap();
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC").unwrap();
    text.lines()
        .filter(|l| !l.starts_with("Took "))
        .map(|l| {
            let l = latency.replace_all(l, " N.Nus");
            format!("{}\n", time.replace_all(&l, "YYYY-MM-DD HH:MM:SS UTC"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcripts_match() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hbase"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 5, "transcripts missing: {scripts:?}");
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = Vec::new();
    for script in &scripts {
        let data = tempfile::tempdir().unwrap();
        let conn = basalt_cli::DataDir::open(data.path()).await.unwrap();
        let input = std::fs::read_to_string(script).unwrap();
        let mut out = Vec::new();
        // Relative paths in scripts (SPLITS_FILE) resolve against the transcripts folder.
        let input = input.replace("$TRANSCRIPTS", dir.to_str().unwrap());
        basalt_cli::run_script(&conn, &input, &mut out)
            .await
            .unwrap();
        conn.close().await.unwrap();
        let got = strip_took(&String::from_utf8(out).unwrap());
        let expected_path = script.with_extension("out");
        if bless {
            std::fs::write(&expected_path, &got).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if got != expected {
            failures.push(format!(
                "{}: output differs\n--- expected\n{expected}\n--- got\n{got}",
                script.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn every_command_prints_took() {
    let data = tempfile::tempdir().unwrap();
    let conn = basalt_cli::DataDir::open(data.path()).await.unwrap();
    let mut out = Vec::new();
    basalt_cli::run_script(&conn, "create 't', 'f'\nlist\nexit\nlist\n", &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("Took ")).count(), 2);
    assert!(text
        .lines()
        .any(|l| l.starts_with("Took ") && l.ends_with(" seconds")));
    conn.close().await.unwrap();
}
