//! `basalt report`: seed 002's pre-split table as a region table, and seed 000's IM schema
//! salted and unsalted, with the chart (`--plot`): the salted table's regions each hold
//! about 1/128 of the messages, the unsalted table of the same keys, pre-split the same way,
//! holds them all in one region.
//!
//! `BASALT_CHART_OUT=FILE cargo test -p basalt-cli --test tool report::` keeps the IM chart in FILE
//! (how docs/report-im-salted-vs-unsalted.svg was made).

use basalt_cli::{DataDir, TableReport};
use basalt_core::client::{BatchOp, Put};
use basalt_core::keys::{Field, KeySchema, Kind, Snowflake, Value};
use basalt_core::{
    ColumnFamilyDescriptor, PreSplit, SaltFormat, SaltSpec, SplitAlgorithm, TableDescriptor,
    TableName,
};
use std::path::Path;
use std::process::Command;

/// The DATA_SHARE column (in %) of the region table printed for `table`.
fn printed_shares(text: &str, table: &str) -> Vec<f64> {
    let block: Vec<&str> = text
        .split("\ntable ")
        .find(|b| {
            b.trim_start_matches("table ")
                .starts_with(&format!("{table}:"))
        })
        .unwrap_or_else(|| panic!("no table {table} in {text}"))
        .lines()
        .collect();
    assert!(block[1].starts_with("REGION_NAME"), "{}", block[1]);
    let col = block[1]
        .split(" | ")
        .position(|h| h.trim() == "DATA_SHARE")
        .unwrap();
    block[2..]
        .iter()
        .take_while(|l| l.contains(" | "))
        .map(|l| {
            // The last column is followed by its bar.
            let cell = l
                .split(" | ")
                .nth(col)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            cell.trim_end_matches('%').parse::<f64>().unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_002_regions_with_keys_cells_and_shares() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let data = DataDir::open(tmp.path()).await.unwrap();
        // create 'testtable', 'common', 'data', {SPLITS => ['1','2','3']}
        data.conn
            .admin()
            .create_table_with_splits(
                TableDescriptor::new(TableName::parse("testtable").unwrap())
                    .family(ColumnFamilyDescriptor::new("common"))
                    .family(ColumnFamilyDescriptor::new("data")),
                PreSplit::Keys(vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]),
            )
            .await
            .unwrap();
        let t = data.conn.table("testtable").unwrap();
        // seed 002's keys: random(4) + time; here 10 rows in region 0, 30 in 1, none in
        // 2, 10 in 3, and a binary key in the first region.
        for (prefix, n) in [("0", 10), ("1", 30), ("3", 10)] {
            for i in 0..n {
                t.put(
                    Put::new(format!("{prefix}{}", 1_700_000_000_000u64 + i))
                        .add_column("common", "c", "x"),
                )
                .await
                .unwrap();
            }
        }
        t.put(Put::new(b"\x00bin").add_column("data", "d", "y"))
            .await
            .unwrap();
        data.close().await.unwrap();
    }
    let mut out = Vec::new();
    let reports = basalt_cli::run_report(tmp.path(), None, None, &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    let keys: Vec<(&[u8], &[u8])> = r
        .regions
        .iter()
        .map(|g| (g.start_key.as_ref(), g.end_key.as_ref()))
        .collect();
    assert_eq!(
        keys,
        vec![
            (&b""[..], &b"1"[..]),
            (b"1", b"2"),
            (b"2", b"3"),
            (b"3", b"")
        ]
    );
    let cells: Vec<u64> = r.regions.iter().map(|g| g.cells).collect();
    assert_eq!(cells, vec![11, 30, 0, 10], "{text}");
    assert_eq!(
        printed_shares(&text, "default:testtable"),
        vec![21.6, 58.8, 0.0, 19.6]
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("table default:testtable: 4 regions;")
            && lines[0].ends_with("51 cells"),
        "{text}"
    );
    // Requests since open: the directory was just opened, nothing was served.
    assert!(
        lines[2].contains(" | 0             | 0              | -           |  21.6%"),
        "{text}"
    );
    assert!(
        text.contains("requests since open: 0 reads, 0 writes"),
        "{text}"
    );
    assert!(text.contains("largest 58.8%"), "{text}");
    assert!(lines[3].ends_with(&"#".repeat(24)), "{text}");

    // The binary, one table, and an unknown table.
    let dir = tmp.path().to_str().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["report", dir, "--table", "testtable"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), text);
    let o = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["report", dir, "--table", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.starts_with("ERROR: table not found: default:nosuch"),
        "{err}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["report", tmp.path().join("nope").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        !tmp.path().join("nope").exists(),
        "report creates no directory"
    );
}

const BUCKETS: u32 = 128;
const CONVERSATIONS: usize = 2_000;
const MESSAGES: usize = 4_000;

/// Seed 000's key: conversation id | message id, newest first.
fn schema() -> KeySchema {
    KeySchema::new(vec![Field::new(Kind::U64), Field::new(Kind::U64).desc()])
}

/// `im:messages` salted into 128 buckets by conversation, `im:unsalted` the same keys
/// pre-split into 128 uniform regions; the same messages written to both, then closed.
async fn im_tables(dir: &Path) {
    let data = DataDir::open(dir).await.unwrap();
    let admin = data.conn.admin();
    admin.create_namespace("im").await.unwrap();
    let spec = SaltSpec::new(BUCKETS)
        .format(SaltFormat::Decimal)
        .hash_component(schema(), 0);
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("im:messages").unwrap())
                .family(ColumnFamilyDescriptor::new("m"))
                .salt(spec),
        )
        .await
        .unwrap();
    admin
        .create_table_with_splits(
            TableDescriptor::new(TableName::parse("im:unsalted").unwrap())
                .family(ColumnFamilyDescriptor::new("m")),
            PreSplit::Algorithm(SplitAlgorithm::Uniform, BUCKETS as usize),
        )
        .await
        .unwrap();
    let salted = data.conn.salted_table("im:messages").unwrap();
    let unsalted = data.conn.table("im:unsalted").unwrap();
    let convs = Snowflake::new(0).unwrap();
    let conversations: Vec<u64> = (0..CONVERSATIONS)
        .map(|_| convs.next_id().unwrap())
        .collect();
    let ids = Snowflake::new(1).unwrap();
    let mut batch = Vec::new();
    for i in 0..MESSAGES {
        let conv = conversations[(i * 7919) % CONVERSATIONS];
        let key = schema()
            .encode(&[Value::U64(conv), Value::U64(ids.next_id().unwrap())])
            .unwrap();
        batch.push(Put::new(key).add_column("m", "text", format!("hello #{i}")));
        if batch.len() == 500 || i + 1 == MESSAGES {
            let ops = |b: &[Put]| b.iter().cloned().map(BatchOp::Put).collect::<Vec<_>>();
            for r in salted.batch(ops(&batch)).await.unwrap() {
                r.unwrap();
            }
            for r in unsalted.batch(ops(&batch)).await.unwrap() {
                r.unwrap();
            }
            batch.clear();
        }
    }
    data.close().await.unwrap();
}

fn report_of<'a>(reports: &'a [TableReport], name: &str) -> &'a TableReport {
    reports
        .iter()
        .find(|r| r.table.to_string() == name)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn im_salted_against_unsalted_with_chart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    im_tables(&dir).await;
    let chart = tmp.path().join("im.svg");
    let mut out = Vec::new();
    let reports = basalt_cli::run_report(&dir, None, Some(&chart), &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();

    let salted = report_of(&reports, "im:messages");
    let unsalted = report_of(&reports, "im:unsalted");
    assert_eq!((salted.regions.len(), unsalted.regions.len()), (128, 128));
    assert_eq!(salted.salt_buckets, Some(BUCKETS));
    let total = |r: &TableReport| r.regions.iter().map(|g| g.cells).sum::<u64>();
    assert_eq!(total(salted), MESSAGES as u64);
    assert_eq!(total(unsalted), MESSAGES as u64);
    // The printed shares are the computed ones, rounded.
    let printed_salted = printed_shares(&text, "im:messages");
    let printed_unsalted = printed_shares(&text, "im:unsalted");
    for (p, s) in printed_salted.iter().zip(salted.data_shares()) {
        assert!((p - s * 100.0).abs() <= 0.0501, "{p} vs {s}");
    }
    let max = |v: &[f64]| v.iter().copied().fold(0.0f64, f64::max);
    let even = 100.0 / f64::from(BUCKETS);
    // Conversations, not messages, are hashed (2,000 of them, two messages each): a bucket
    // holds its conversations' messages, so the busiest of 128 buckets runs above the mean
    // (about 1.7x), but nowhere near a hot spot.
    assert!(
        max(&printed_salted) < 2.5 * even,
        "salted: largest share {}% vs even {even}%\n{text}",
        max(&printed_salted)
    );
    assert!(
        printed_salted.iter().filter(|s| **s > 0.0).count() > 100,
        "salted: most regions hold data\n{text}"
    );
    assert!(
        max(&printed_unsalted) > 50.0,
        "unsalted: one hot region\n{text}"
    );
    assert_eq!(
        printed_unsalted.iter().filter(|s| **s > 0.0).count(),
        1,
        "unsalted: every message in one region (Snowflake ids share their high bits)\n{text}"
    );

    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(
        svg.contains("im:messages: 128 regions, salted into 128 buckets"),
        "{svg}"
    );
    assert!(svg.contains("im:unsalted: 128 regions, not salted"));
    assert_eq!(svg.matches("even share 1/128 = 0.78%").count(), 2);
    assert!(
        svg.contains("largest 100.00% = 128.0x even"),
        "the unsalted legend"
    );
    assert!(svg.matches("<rect").count() >= 2 * 128, "a bar per region");
    assert!(text.ends_with(&format!("chart written to {}\n", chart.display())));
    if let Some(keep) = std::env::var_os("BASALT_CHART_OUT") {
        std::fs::copy(&chart, keep).unwrap();
    }
}
