//! `basalt check` and `basalt repair`: a healthy directory checks clean; a store file with
//! flipped bytes is reported by the check (exit code 1), set aside by the repair, after which
//! the check is clean again; a directory open in another engine, or no data directory at
//! all, is refused with a clear error (exit code 2). Run through the binary, for the exit
//! codes, and through the library.

use basalt_cli::DataDir;
use basalt_core::client::{Get, Put};
use basalt_core::{ColumnFamilyDescriptor, PreSplit, TableDescriptor, TableName};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn basalt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A directory with two tables (one pre-split into three regions), written, flushed and
/// closed.
async fn written_dir(dir: &Path) {
    let data = DataDir::open(dir).await.unwrap();
    let admin = data.conn.admin();
    admin
        .create_table_with_splits(
            TableDescriptor::new(TableName::parse("users").unwrap())
                .family(ColumnFamilyDescriptor::new("f")),
            PreSplit::Keys(vec![b"h".to_vec(), b"p".to_vec()]),
        )
        .await
        .unwrap();
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("orders").unwrap())
                .family(ColumnFamilyDescriptor::new("o")),
        )
        .await
        .unwrap();
    let users = data.conn.table("users").unwrap();
    let orders = data.conn.table("orders").unwrap();
    for i in 0..300u32 {
        let key = format!("{}{i:05}", (b'a' + (i % 26) as u8) as char);
        users
            .put(Put::new(&key).add_column("f", "n", format!("value {i} {}", "x".repeat(40))))
            .await
            .unwrap();
        orders
            .put(Put::new(format!("o{i:05}")).add_column("o", "n", i.to_be_bytes()))
            .await
            .unwrap();
    }
    admin
        .flush(TableName::parse("users").unwrap())
        .await
        .unwrap();
    admin
        .flush(TableName::parse("orders").unwrap())
        .await
        .unwrap();
    data.close().await.unwrap();
}

fn store_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sf"))
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_directory_checks_clean() {
    let tmp = tempfile::tempdir().unwrap();
    written_dir(tmp.path()).await;
    let dir = tmp.path().to_str().unwrap();
    let o = basalt(&["check", dir]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("catalog: ok (2 tables)"), "{out}");
    assert!(
        out.contains("table default:users: 3 regions, 3 store files, 300 cells in"),
        "{out}"
    );
    assert!(
        out.contains("table default:orders: 1 region, 1 store file, 300 cells in"),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("  ok ")).count(),
        4,
        "{out}"
    );
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("result: healthy (2 tables, 4 store files"),
        "{out}"
    );
    // A repair of a healthy directory sets nothing aside and exits 0.
    let o = basalt(&["repair", dir]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("repair: no store file to set aside"), "{out}");
    assert_eq!(store_files(tmp.path()).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_store_file_is_reported_set_aside_and_then_clean() {
    let tmp = tempfile::tempdir().unwrap();
    written_dir(tmp.path()).await;
    let dir = tmp.path().to_str().unwrap();
    // Flip bytes in the middle of the largest store file (inside its data blocks).
    let victim = store_files(tmp.path())
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    let at = bytes.len() / 3;
    for b in &mut bytes[at..at + 8] {
        *b ^= 0xA5;
    }
    std::fs::write(&victim, &bytes).unwrap();
    let name = victim.file_name().unwrap().to_str().unwrap().to_string();

    let o = basalt(&["check", dir]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let damaged: Vec<&str> = out.lines().filter(|l| l.contains("DAMAGED ")).collect();
    assert!(
        damaged.iter().any(|l| l.contains(&name)),
        "the file {name} is named: {out}"
    );
    assert!(out.contains("checksum at offset"), "{out}");
    assert!(out.contains("result: DAMAGED: 1 of 4 store files"), "{out}");
    // The check changed nothing.
    assert_eq!(std::fs::read(&victim).unwrap(), bytes);

    let o = basalt(&["repair", dir]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("repair: 1 store file set aside"), "{out}");
    assert!(out.contains(&format!("moved to damaged/{name}")), "{out}");
    assert!(out.contains("may have lost: up to"), "{out}");
    assert!(
        out.contains("\nafter the repair: result: healthy (2 tables, 3 store files, "),
        "{out}"
    );
    assert!(tmp.path().join("damaged").join(&name).exists());
    assert!(!victim.exists());

    let o = basalt(&["check", dir]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("result: healthy (2 tables, 3 store files"),
        "{out}"
    );

    // The directory opens again: the other table is whole, the damaged one reads (less
    // the rows of the file set aside).
    let victim_table = if damaged[0].contains("region default:users") {
        "users"
    } else {
        "orders"
    };
    let data = DataDir::open(tmp.path()).await.unwrap();
    let mut found = std::collections::BTreeMap::new();
    for i in 0..300u32 {
        for (table, key) in [
            ("orders", format!("o{i:05}")),
            (
                "users",
                format!("{}{i:05}", (b'a' + (i % 26) as u8) as char),
            ),
        ] {
            let t = data.conn.table(table).unwrap();
            let row = t.get(Get::new(key)).await.unwrap();
            *found.entry(table).or_insert(0) += usize::from(!row.cells.is_empty());
        }
    }
    for (table, n) in &found {
        if *table == victim_table {
            assert!(*n < 300, "{table}: {n}");
        } else {
            assert_eq!(*n, 300, "{table}");
        }
    }
    data.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_an_open_directory_and_a_non_directory() {
    let tmp = tempfile::tempdir().unwrap();
    written_dir(tmp.path()).await;
    let dir = tmp.path().to_str().unwrap();
    let data = DataDir::open(tmp.path()).await.unwrap();
    for cmd in ["check", "repair"] {
        let o = basalt(&[cmd, dir]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {out}{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("ERROR: ") && err.contains("is already open in another engine"),
            "{err}"
        );
    }
    // The library says the same.
    let e = basalt_cli::check_offline(tmp.path()).unwrap_err();
    assert!(e.to_string().contains("already open"), "{e}");
    data.close().await.unwrap();
    assert_eq!(basalt(&["check", dir]).status.code(), Some(0));

    let empty = tempfile::tempdir().unwrap();
    let o = basalt(&["check", empty.path().to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("is not a Basalt data directory"), "{err}");
    let o = basalt(&["repair", empty.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("no such directory"));
    assert!(!empty.path().join("nope").exists(), "nothing is created");
}
