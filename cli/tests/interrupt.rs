//! Ctrl-C: a script stops before its next line, the engine closes cleanly and the tool
//! exits with status 130; every write the script made before it stopped is there after
//! reopening. Scans and counts stop at their next row with one `ERROR:` line.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[test]
fn ctrl_c_stops_a_script_between_lines_and_keeps_its_writes() {
    let data = tempfile::tempdir().unwrap();
    let script_dir = tempfile::tempdir().unwrap();
    let script = script_dir.path().join("load.hbase");
    let mut text = String::from("create 't', 'f'\n");
    for i in 0..1_000_000 {
        text.push_str(&format!("put 't', 'r{i:06}', 'f:q', 'v'\n"));
    }
    std::fs::write(&script, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .arg("shell")
        .arg(data.path())
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the output as it comes (a full pipe would block the tool), and send Ctrl-C
    // once a hundred commands have run.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (ran, ran_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let mut line = String::new();
        let mut took = 0;
        while stdout.read_line(&mut line).unwrap() > 0 {
            if line.starts_with("Took ") {
                took += 1;
                if took == 100 {
                    let _ = ran.send(());
                }
            }
            out.push_str(&line);
            line.clear();
        }
        out
    });
    ran_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the script did not start");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the tool did not stop after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = reader.join().unwrap();
    assert_eq!(code, Some(130), "{out}");
    let last = out.lines().last().unwrap_or_default().to_string();
    let prefix = "ERROR: interrupted by Ctrl-C: the script stopped before line ";
    assert!(last.starts_with(prefix), "{last}");
    let stopped_at: usize = last[prefix.len()..].parse().unwrap();
    assert!(stopped_at > 2 && stopped_at < 1_000_002, "{stopped_at}");
    // Lines 2..stopped_at were puts of rows 0..stopped_at-2: all of them are there.
    let written = stopped_at - 2;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = basalt_cli::DataDir::open(data.path()).await.unwrap();
        let mut out = Vec::new();
        basalt_cli::run_script(&dir, "count 't', {INTERVAL => 100000000}", &mut out)
            .await
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(&format!("{written} row(s)\n")), "{text}");
        dir.close().await.unwrap();
    });
}

#[tokio::test]
async fn an_interrupted_scan_or_count_gives_one_error_line() {
    let data = tempfile::tempdir().unwrap();
    let dir = basalt_cli::DataDir::open(data.path()).await.unwrap();
    let mut out = Vec::new();
    basalt_cli::run_script(
        &dir,
        "create 't', 'f'\nput 't', 'a', 'f:q', 'v'\nput 't', 'b', 'f:q', 'v'",
        &mut out,
    )
    .await
    .unwrap();
    let mut shell = basalt_cli::Shell::new(dir.clone());
    shell.interrupt_flag().store(true, Ordering::Relaxed);
    for (line, what) in [("scan 't'", "scanned"), ("count 't'", "counted")] {
        let mut out = Vec::new();
        shell.execute(line, &mut out).await.unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("ERROR: interrupted by Ctrl-C after 0 row(s) {what}\n")
        );
    }
    shell.interrupt_flag().store(false, Ordering::Relaxed);
    let mut out = Vec::new();
    shell.execute("count 't'", &mut out).await.unwrap();
    assert!(String::from_utf8(out).unwrap().starts_with("2 row(s)\n"));
    dir.close().await.unwrap();
}

/// Ctrl-C during a compaction or an index build stops the wait, not the work: it goes on in
/// the background and ends as it would have; a verification (which only reads) stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_compactions_and_index_builds_go_on_in_the_background() {
    let data = tempfile::tempdir().unwrap();
    let dir = basalt_cli::DataDir::open(data.path()).await.unwrap();
    let mut script = String::from("create 't', 'f'\n");
    for i in 0..2000 {
        script.push_str(&format!("put 't', 'r{i:04}', 'f:c', 'city{}', 1\n", i % 7));
    }
    script.push_str("flush 't'\n");
    let mut out = Vec::new();
    basalt_cli::run_script(&dir, &script, &mut out)
        .await
        .unwrap();
    let mut shell = basalt_cli::Shell::new(dir.clone());
    let flag = shell.interrupt_flag();
    flag.store(true, Ordering::Relaxed);
    let mut run = async |line: &str| {
        let mut out = Vec::new();
        shell.execute(line, &mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(
        run("major_compact 't'").await,
        "ERROR: interrupted by Ctrl-C after the major compact of t started: it goes on in the background\n"
    );
    let built = run("create_index 't', 'by_city', 'f:c'").await;
    assert!(
        built.starts_with("ERROR: interrupted by Ctrl-C after ")
            && built.ends_with(
                "the build goes on in the background (list_indexes shows BUILDING until it ends)\n"
            ),
        "{built}"
    );
    flag.store(false, Ordering::Relaxed);
    // The build goes on; the shell waits for it (as before the engine closes).
    shell.finish_background().await;
    let mut run = async |line: &str| {
        let mut out = Vec::new();
        shell.execute(line, &mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    };
    let listed = run("list_indexes 't'").await;
    assert!(listed.contains("/ ACTIVE"), "{listed}");
    let hits = run("scan_index 't', 'by_city', 'city3'").await;
    assert!(hits.contains("286 row(s)\n"), "{hits}");
    flag.store(true, Ordering::Relaxed);
    let stopped = run("verify_index 't', 'by_city'").await;
    assert!(
        stopped.starts_with("ERROR: interrupted by Ctrl-C after ")
            && stopped.ends_with(" rows read: the verification stopped\n"),
        "{stopped}"
    );
    flag.store(false, Ordering::Relaxed);
    let verified = run("verify_index 't', 'by_city'").await;
    assert!(
        verified.contains("data rows: 2000, index rows: 2000, missing: 0, extra: 0, stale: 0\n"),
        "{verified}"
    );
    let counted = run("count 't'").await;
    assert!(counted.contains("\n2000 row(s)\n"), "{counted}");
    assert!(run("major_compact 't'").await.starts_with("Took "));
    dir.close().await.unwrap();
}
