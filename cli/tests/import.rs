//! `basalt import`: TSV and CSV files in ImportTsv's column syntax, bad lines reported with
//! their numbers (skipped by default, stopping the import with `--skip-bad-lines=false`),
//! `HBASE_TS_KEY`, a salted table written through the salted API (readable by logical
//! get), a stop between batches on Ctrl-C, and the tables and arguments it refuses.

use basalt_cli::{
    import_file, BadLineKind, DataDir, ImportArgs, ImportOptions, ImportStop, ImportSummary,
    Interrupt,
};
use basalt_core::client::Get;
use basalt_core::{
    ColumnFamilyDescriptor, CoprocessorDescriptor, SaltSpec, TableDescriptor, TableName,
};
use indicatif::ProgressBar;
use std::path::Path;
use std::process::{Command, Output};

async fn table(dir: &Path, desc: TableDescriptor) {
    let data = DataDir::open(dir).await.unwrap();
    data.conn.admin().create_table(desc).await.unwrap();
    data.close().await.unwrap();
}

fn desc(name: &str, families: &[&str]) -> TableDescriptor {
    families.iter().fold(
        TableDescriptor::new(TableName::parse(name).unwrap()),
        |d, f| d.family(ColumnFamilyDescriptor::new(*f)),
    )
}

fn args(dir: &Path, table: &str, file: &Path, columns: &str) -> ImportArgs {
    ImportArgs {
        dir: dir.to_path_buf(),
        table: table.to_string(),
        file: file.to_path_buf(),
        columns: Some(columns.to_string()),
        batch: 1000,
        ..Default::default()
    }
}

async fn import(a: &ImportArgs, interrupt: &Interrupt) -> ImportSummary {
    let opts = ImportOptions::from_args(a).unwrap();
    let data = DataDir::open(&a.dir).await.unwrap();
    let s = import_file(&data, &opts, interrupt, ProgressBar::hidden())
        .await
        .unwrap();
    data.close().await.unwrap();
    s
}

fn basalt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .output()
        .unwrap()
}

/// Reads `row`'s cells as (qualifier, timestamp, value).
async fn cells(dir: &Path, table: &str, row: &[u8]) -> Vec<(String, u64, Vec<u8>)> {
    let data = DataDir::open(dir).await.unwrap();
    let r = data
        .conn
        .table(table)
        .unwrap()
        .get(Get::new(row))
        .await
        .unwrap();
    data.close().await.unwrap();
    r.cells
        .iter()
        .map(|c| {
            (
                format!(
                    "{}:{}",
                    String::from_utf8_lossy(&c.family),
                    String::from_utf8_lossy(&c.qualifier)
                ),
                c.timestamp,
                c.value.to_vec(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tsv_with_timestamps_and_bad_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    table(&dir, desc("t", &["cf", "other"])).await;
    let mut text = String::new();
    for i in 1..=1000u64 {
        let line = match i {
            100 => "row0100\t5\ta\tb\textra".to_string(),
            200 => "\t5\ta\tb".to_string(),
            300 => "row0300\tyesterday\ta\tb".to_string(),
            400 => String::new(),
            500 => "row0500\t77".to_string(),
            600 => "row0600\t600\tonly a".to_string(),
            _ => format!("row{i:04}\t{}\tva{i}\tvb{i}", 1_000 + i),
        };
        text.push_str(&line);
        text.push_str(if i % 2 == 0 { "\r\n" } else { "\n" });
    }
    let file = tmp.path().join("in.tsv");
    std::fs::write(&file, &text).unwrap();
    let mut a = args(
        &dir,
        "t",
        &file,
        "HBASE_ROW_KEY, HBASE_TS_KEY, cf:a, other:b",
    );
    a.batch = 64;
    let s = import(&a, &Interrupt::new()).await;
    assert!(s.stop.is_none(), "{}", s.render());
    assert_eq!(s.exit_code(), 0);
    assert_eq!(
        (s.records_read, s.rows_imported, s.bad_lines),
        (1000, 995, 5)
    );
    assert_eq!(
        (s.bytes_read, s.bytes_total),
        (text.len() as u64, text.len() as u64)
    );
    assert_eq!(s.last_line, 1000);
    let bad: Vec<(u64, BadLineKind)> = s
        .listed_bad_lines
        .iter()
        .map(|b| (b.line, b.reason.clone()))
        .collect();
    assert_eq!(
        bad,
        vec![
            (
                100,
                BadLineKind::ExcessiveColumns {
                    found: 5,
                    expected: 4
                }
            ),
            (200, BadLineKind::EmptyRowKey),
            (300, BadLineKind::InvalidTimestamp("yesterday".into())),
            (400, BadLineKind::NoDelimiter),
            (500, BadLineKind::NoCells),
        ]
    );
    let summary = s.render();
    assert!(
        summary.starts_with("imported 995 rows into t from 1000 lines"),
        "{summary}"
    );
    assert!(
        summary.contains("bad lines: 5\n  line 100: Excessive columns: 5 fields"),
        "{summary}"
    );
    assert!(
        summary.contains("  line 300: Invalid timestamp \"yesterday\"\n"),
        "{summary}"
    );
    assert!(
        summary.ends_with("done: the whole file was read\n"),
        "{summary}"
    );

    assert_eq!(
        cells(&dir, "t", b"row0042").await,
        vec![
            ("cf:a".to_string(), 1042, b"va42".to_vec()),
            ("other:b".to_string(), 1042, b"vb42".to_vec())
        ]
    );
    // Fewer columns than the specification: the missing one is not written.
    assert_eq!(
        cells(&dir, "t", b"row0600").await,
        vec![("cf:a".to_string(), 600, b"only a".to_vec())]
    );
    assert!(cells(&dir, "t", b"row0100").await.is_empty());
    assert!(cells(&dir, "t", b"row0300").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_through_the_binary_with_quotes_and_one_timestamp() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    table(&dir, desc("ns_less", &["f"])).await;
    let file = tmp.path().join("in.csv");
    std::fs::write(
        &file,
        "k1,\"Smith, Ada\",\"said \"\"hi\"\"\"\n\
         k2,\"two\nlines\",x\n\
         k3,too,many,fields\n\
         k4,plain,\n",
    )
    .unwrap();
    let o = basalt(&[
        "import",
        dir.to_str().unwrap(),
        "ns_less",
        file.to_str().unwrap(),
        "-Dimporttsv.columns=HBASE_ROW_KEY,f:name,f:note",
        "--csv",
        "--timestamp",
        "12345",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.starts_with("imported 3 rows into ns_less from 4 records"),
        "{out}"
    );
    // The bad record starts on line 4: the quoted newline of k2 counts.
    assert!(
        out.contains("  line 4: Excessive columns: 4 fields, the column specification has 3"),
        "{out}"
    );
    assert_eq!(
        cells(&dir, "ns_less", b"k1").await,
        vec![
            ("f:name".to_string(), 12345, b"Smith, Ada".to_vec()),
            ("f:note".to_string(), 12345, b"said \"hi\"".to_vec())
        ]
    );
    assert_eq!(cells(&dir, "ns_less", b"k2").await[0].2, b"two\nlines");
    // An empty field is an empty value (importtsv.skip.empty.columns=false).
    assert_eq!(cells(&dir, "ns_less", b"k4").await[1].2, b"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_time_is_every_cells_timestamp_and_empty_columns_can_be_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    table(&dir, desc("t", &["f"])).await;
    let file = tmp.path().join("in.tsv");
    std::fs::write(&file, "a\t1\t\nb\t2\t3\n").unwrap();
    let mut a = args(&dir, "t", &file, "HBASE_ROW_KEY,f:x,f:y");
    a.skip_empty_columns = true;
    let before = basalt_core::now_ms();
    let s = import(&a, &Interrupt::new()).await;
    assert_eq!(s.rows_imported, 2);
    let ca = cells(&dir, "t", b"a").await;
    let cb = cells(&dir, "t", b"b").await;
    assert_eq!(ca.len(), 1, "the empty f:y is skipped: {ca:?}");
    assert!(ca[0].1 >= before && ca[0].1 <= basalt_core::now_ms());
    assert!(
        cb.iter().all(|c| c.1 == ca[0].1),
        "one timestamp for the run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stops_at_the_first_bad_line_when_told() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    table(&dir, desc("t", &["f"])).await;
    let mut text = String::new();
    for i in 1..=100 {
        if i == 25 {
            text.push_str("only-a-key\n");
        } else {
            text.push_str(&format!("r{i:03}\tv\n"));
        }
    }
    let file = tmp.path().join("in.tsv");
    std::fs::write(&file, text).unwrap();
    let o = basalt(&[
        "import",
        dir.to_str().unwrap(),
        "t",
        file.to_str().unwrap(),
        "--columns",
        "HBASE_ROW_KEY,f:v",
        "--batch",
        "10",
        "--skip-bad-lines=false",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.starts_with("imported 24 rows"), "{out}");
    assert!(out.contains("  line 25: No delimiter\n"), "{out}");
    assert!(
        out.contains("stopped at bad line 25 (--skip-bad-lines=false)"),
        "{out}"
    );
    assert_eq!(cells(&dir, "t", b"r024").await.len(), 1);
    assert!(cells(&dir, "t", b"r026").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_between_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    table(&dir, desc("t", &["f"])).await;
    let text: String = (1..=100).map(|i| format!("r{i:03}\tv{i}\n")).collect();
    let file = tmp.path().join("in.tsv");
    std::fs::write(&file, text).unwrap();
    let mut a = args(&dir, "t", &file, "HBASE_ROW_KEY,f:v");
    a.batch = 10;
    let interrupt = Interrupt::new();
    interrupt.raise();
    let s = import(&a, &interrupt).await;
    assert!(matches!(s.stop, Some(ImportStop::Interrupted)));
    assert_eq!(s.exit_code(), 130);
    assert_eq!((s.rows_imported, s.last_line), (10, 10));
    assert!(
        s.render()
            .contains("interrupted by Ctrl-C after line 10: every line up to it is imported, none after it; resume from line 11"),
        "{}",
        s.render()
    );
    assert_eq!(cells(&dir, "t", b"r010").await.len(), 1);
    assert!(cells(&dir, "t", b"r011").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salted_rows_land_in_their_buckets_and_read_by_logical_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    table(&dir, desc("events", &["d"]).salt(SaltSpec::new(8))).await;
    let text: String = (0..800).map(|i| format!("e{i:04},{i}\n")).collect();
    let file = tmp.path().join("in.csv");
    std::fs::write(&file, text).unwrap();
    let mut a = args(&dir, "events", &file, "HBASE_ROW_KEY,d:n");
    a.separator = Some(",".into());
    a.salt_buckets = Some(4);
    let opts = ImportOptions::from_args(&a).unwrap();
    let data = DataDir::open(&dir).await.unwrap();
    let err = import_file(&data, &opts, &Interrupt::new(), ProgressBar::hidden())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("salted into 8 buckets, not 4"),
        "{err}"
    );
    data.close().await.unwrap();

    a.salt_buckets = Some(8);
    let s = import(&a, &Interrupt::new()).await;
    assert_eq!((s.rows_imported, s.salt_buckets), (800, Some(8)));
    assert!(s.render().contains("into events (salted, 8 buckets)"));
    let data = DataDir::open(&dir).await.unwrap();
    let events = data.conn.salted_table("events").unwrap();
    for i in [0, 417, 799] {
        let key = format!("e{i:04}");
        let row = events.get(Get::new(&key)).await.unwrap();
        assert_eq!(row.row.as_ref(), key.as_bytes());
        assert_eq!(
            row.value("d", "n").unwrap().as_ref(),
            i.to_string().as_bytes()
        );
    }
    // Physically, the rows are spread over the eight bucket regions.
    data.conn
        .admin()
        .flush(TableName::parse("events").unwrap())
        .await
        .unwrap();
    let regions = data.conn.admin().regions("events").await.unwrap();
    assert_eq!(regions.len(), 8);
    assert!(
        regions.iter().all(|r| r.store_file_cells > 50),
        "{regions:?}"
    );
    // The plain table holds no unsalted key.
    let plain = data.conn.table("events").unwrap();
    assert!(plain.get(Get::new("e0000")).await.unwrap().cells.is_empty());
    data.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_read_only_tables_missing_families_and_bad_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    table(
        &dir,
        desc("shop", &["f"]).coprocessor(CoprocessorDescriptor::new("app-rule")),
    )
    .await;
    table(&dir, desc("plain", &["f"])).await;
    let file = tmp.path().join("in.tsv");
    std::fs::write(&file, "k\tv\n").unwrap();
    let d = dir.to_str().unwrap();
    let f = file.to_str().unwrap();
    let run = |extra: &[&str]| {
        let o = basalt(&[&["import", d][..], extra].concat());
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        assert!(o.stdout.is_empty());
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    };
    let err = run(&["shop", f, "--columns", "HBASE_ROW_KEY,f:v"]);
    assert!(
        err.contains(
            "table default:shop is read-only here: its coprocessors app-rule are not loaded"
        ),
        "{err}"
    );
    let err = run(&["plain", f, "--columns", "HBASE_ROW_KEY,g:v,f:w"]);
    assert!(
        err.contains("column families [\"g\"] do not exist in table default:plain"),
        "{err}"
    );
    let err = run(&["nosuch", f, "--columns", "HBASE_ROW_KEY,f:v"]);
    assert!(err.contains("table not found"), "{err}");
    let err = run(&["plain", f]);
    assert!(err.contains("no columns: give --columns"), "{err}");
    let err = run(&["plain", f, "--columns", "f:v"]);
    assert!(err.contains("exactly one column as HBASE_ROW_KEY"), "{err}");
    let err = run(&[
        "plain",
        f,
        "--columns",
        "HBASE_ROW_KEY,f:v",
        "-Dimporttsv.columns=HBASE_ROW_KEY,f:w",
    ]);
    assert!(
        err.contains("importtsv.columns (--columns) is given twice"),
        "{err}"
    );
    let err = run(&[
        "plain",
        f,
        "-Dimporttsv.columns=HBASE_ROW_KEY,f:v",
        "-Dimporttsv.bulk.output=x",
    ]);
    assert!(
        err.contains("-Dimporttsv.bulk.output is not supported"),
        "{err}"
    );
    let err = run(&[
        "plain",
        f,
        "--columns",
        "HBASE_ROW_KEY,f:v",
        "--separator",
        "::",
    ]);
    assert!(err.contains("not one byte"), "{err}");
    let err = run(&[
        "plain",
        "/no/such/file.tsv",
        "--columns",
        "HBASE_ROW_KEY,f:v",
    ]);
    assert!(err.contains("cannot read /no/such/file.tsv"), "{err}");
    let err = run(&[
        "plain",
        f,
        "--columns",
        "HBASE_ROW_KEY,f:v",
        "--salt-buckets",
        "4",
    ]);
    assert!(err.contains("is not salted"), "{err}");
    // Nothing was written to either table.
    assert!(cells(&dir, "plain", b"k").await.is_empty());
    assert!(cells(&dir, "shop", b"k").await.is_empty());
    // The same file imports into the plain table.
    let o = basalt(&["import", d, "plain", f, "--columns", "HBASE_ROW_KEY,f:v"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(cells(&dir, "plain", b"k").await.len(), 1);
}
