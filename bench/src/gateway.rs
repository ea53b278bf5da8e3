//! The `gateway` suite: what the Thrift gateway costs a happybase user. The same work, rows
//! `row%010d` with one 100-byte cell `f:v` written in batches of 1,000 then read back by a
//! full scan fetching 1,000 rows at a time, done twice per round: through the Rust API in
//! this process (the baseline, `rust_api`), and by happybase 1.3 (`bench/gateway/
//! happybase_load.py`, CPython) through `basalt serve` in its own process. Each round uses
//! fresh data directories; the figures are the medians of the rounds, in rows/s.
//!
//! Needs the `basalt` binary beside this one (`cargo build --release -p basalt-cli`) or at
//! `$BASALT_BIN`, and `python3` with happybase (`pip install happybase==1.3.0`).

use crate::figures::{print, Figure};
use crate::measure::Settings;
use crate::BenchResult;
use basalt_core::client::{BatchOp, Put, Scan};
use basalt_core::{ColumnFamilyDescriptor, Connection, TableDescriptor, TableName};
use futures::StreamExt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Rows per round by default.
pub const DEFAULT_ROWS: u64 = 200_000;
/// Rows per batch and per scanner fetch (happybase's `batch_size`).
const BATCH: usize = 1000;

/// rows/s of the puts and of the scan.
#[derive(Debug, Clone, Copy)]
struct Round {
    put: f64,
    scan: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn row_key(i: u64) -> String {
    format!("row{i:010}")
}

/// The work through the Rust API.
fn rust_round(rows: u64, dir: &Path) -> BenchResult<Round> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let conn = Connection::open(dir).await?;
        let name = TableName::parse("bench")?;
        conn.admin()
            .create_table(
                TableDescriptor::new(name.clone()).family(ColumnFamilyDescriptor::new("f")),
            )
            .await?;
        let t = conn.table(name)?;
        let value = vec![b'v'; 100];
        let start = Instant::now();
        let mut i = 0;
        while i < rows {
            let end = (i + BATCH as u64).min(rows);
            let ops: Vec<BatchOp> = (i..end)
                .map(|r| BatchOp::Put(Put::new(row_key(r)).add_column("f", "v", value.as_slice())))
                .collect();
            for outcome in t.batch(ops).await? {
                outcome?;
            }
            i = end;
        }
        let put = rows as f64 / start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut scanned = 0u64;
        let mut stream = t.scan(Scan::new())?;
        while let Some(r) = stream.next().await {
            r?;
            scanned += 1;
        }
        let scan = scanned as f64 / start.elapsed().as_secs_f64();
        if scanned != rows {
            return Err(format!("the Rust scan read {scanned} rows of {rows}").into());
        }
        conn.close().await?;
        Ok(Round { put, scan })
    })
}

/// The `basalt` binary: `$BASALT_BIN`, else beside this benchmark's binary.
fn basalt_bin() -> BenchResult<PathBuf> {
    if let Some(p) = std::env::var_os("BASALT_BIN") {
        return Ok(p.into());
    }
    let exe = std::env::current_exe()?;
    let p = exe.with_file_name("basalt");
    if p.exists() {
        Ok(p)
    } else {
        Err(format!(
            "no `basalt` binary at {}: run `cargo build --release -p basalt-cli` first (or set BASALT_BIN)",
            p.display()
        )
        .into())
    }
}

/// A `basalt serve` child, killed if the round fails.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The work through happybase and the gateway.
fn gateway_round(rows: u64, dir: &Path) -> BenchResult<Round> {
    let mut child = Command::new(basalt_bin()?)
        .arg("serve")
        .arg(dir)
        .args(["--port", "0", "--info-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut served = Served(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .ok_or_else(|| format!("unexpected first line from basalt serve: {line:?}"))?;
    let (host, port) = addr.rsplit_once(':').ok_or("no port")?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("gateway/happybase_load.py");
    let out = Command::new("python3")
        .arg(script)
        .args([host, port, &rows.to_string(), &BATCH.to_string()])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "happybase_load.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> BenchResult<f64> {
        let key = format!("\"{name}\": ");
        let rest = text
            .split_once(&key)
            .map(|(_, r)| r)
            .ok_or_else(|| format!("no {name} in {text}"))?;
        let v: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '-')
            .collect();
        Ok(v.parse()?)
    };
    let scanned = field("scanned")?;
    if scanned as u64 != rows {
        return Err(format!("happybase scanned {scanned} rows of {rows}").into());
    }
    let round = Round {
        put: rows as f64 / field("put_secs")?,
        scan: scanned / field("scan_secs")?,
    };
    let pid = served.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status()?;
    let status = served.0.wait()?;
    if !status.success() {
        return Err(format!("basalt serve exited with {status}").into());
    }
    Ok(round)
}

/// Runs the suite and prints its table and `RESULT` lines.
pub fn run(s: &Settings) -> BenchResult<()> {
    println!(
        "suite gateway: {} rows of one 100-byte cell, batches and scanner fetches of {BATCH}, \
         {} round(s), medians; happybase 1.3 through `basalt serve` (buffered transport, \
         binary protocol) against the Rust API",
        s.rows, s.rounds
    );
    let (mut rust, mut gateway) = (Vec::new(), Vec::new());
    for round in 0..s.rounds {
        let d = tempfile::tempdir_in(&s.dir)?;
        let r = rust_round(s.rows, &d.path().join("rust"))?;
        let g = gateway_round(s.rows, &d.path().join("gateway"))?;
        println!(
            "round {}: puts {:.0} vs {:.0} rows/s, scan {:.0} vs {:.0} rows/s (gateway vs Rust API)",
            round + 1,
            g.put,
            r.put,
            g.scan,
            r.scan
        );
        rust.push(r);
        gateway.push(g);
    }
    let figures = [
        Figure {
            name: "batch_put",
            baseline: "rust_api",
            basalt: median(gateway.iter().map(|r| r.put).collect()),
            base: median(rust.iter().map(|r| r.put).collect()),
            unit: "rows/s",
        },
        Figure {
            name: "scan",
            baseline: "rust_api",
            basalt: median(gateway.iter().map(|r| r.scan).collect()),
            base: median(rust.iter().map(|r| r.scan).collect()),
            unit: "rows/s",
        },
    ];
    print("gateway", &figures, 0, 10);
    Ok(())
}
