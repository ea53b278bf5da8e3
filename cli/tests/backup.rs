//! `basalt backup`, `basalt backup --verify` and `basalt restore` (issue 46): a backup of a
//! closed data directory restores into a new one holding its rows; a second backup copies
//! nothing new; a flipped bit makes `--verify` exit 1 and `restore` exit 2 writing nothing;
//! misuse is one `ERROR:` line and exit 2.

use basalt_core::client::Put;
use basalt_core::{ColumnFamilyDescriptor, TableDescriptor, TableName};
use std::path::Path;
use std::process::{Command, Output};

fn basalt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .output()
        .expect("run basalt")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

async fn make_data_dir(dir: &Path) {
    let data = basalt_cli::DataDir::open(dir).await.unwrap();
    let admin = data.conn.admin();
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("t").unwrap())
                .family(ColumnFamilyDescriptor::new("f")),
        )
        .await
        .unwrap();
    let t = data.conn.table("t").unwrap();
    for i in 0..300 {
        t.put(Put::new(format!("r{i:04}")).add_column("f", "q", format!("v{i}")))
            .await
            .unwrap();
    }
    data.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_verify_and_restore_from_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, target) = (tmp.path().join("data"), tmp.path().join("bk"));
    make_data_dir(&data).await;
    let s = |p: &Path| p.to_str().unwrap().to_string();

    let o = basalt(&[
        "backup",
        &s(&data),
        &s(&target),
        "--max-bytes-per-sec",
        "100000000",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).starts_with("backup 1 of 1 table at read point"),
        "{}",
        text(&o)
    );
    let o = basalt(&["backup", &s(&data), &format!("file://{}", s(&target))]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("copied 0 files (0 B)"), "{}", text(&o));
    let o = basalt(&["backup", "--verify", &s(&target)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("every file present"), "{}", text(&o));

    let restored = tmp.path().join("restored");
    let o = basalt(&["restore", &s(&target), &s(&restored), "--id", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    let data2 = basalt_cli::DataDir::open(&restored).await.unwrap();
    let got = data2
        .conn
        .table("t")
        .unwrap()
        .get(basalt_core::client::Get::new("r0299"))
        .await
        .unwrap();
    assert_eq!(
        got.value("f", "q").map(|v| v.to_vec()),
        Some(b"v299".to_vec())
    );
    data2.close().await.unwrap();

    // A flipped bit: --verify exits 1 naming the file, restore exits 2 and writes nothing.
    let files: Vec<_> = std::fs::read_dir(target.join("files"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let mut bytes = std::fs::read(&files[0]).unwrap();
    bytes[10] ^= 0x80;
    std::fs::write(&files[0], bytes).unwrap();
    let o = basalt(&["backup", "--verify", &s(&target)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("DAMAGED files/"), "{}", text(&o));
    let again = tmp.path().join("again");
    let o = basalt(&["restore", &s(&target), &s(&again)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).starts_with("ERROR: "), "{}", text(&o));
    assert!(!again.exists());

    // Misuse.
    for args in [
        vec!["backup", "--verify", "a", "b"],
        vec!["backup", "only-one"],
        vec!["backup", &s(&data), "s3://bucket/x"],
        vec!["restore", &s(&tmp.path().join("nothing")), &s(&again)],
    ] {
        let o = basalt(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert_eq!(text(&o).lines().count(), 1, "{args:?}: {}", text(&o));
    }
}
