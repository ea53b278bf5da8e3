//! Region commands: `get_splits`, `list_regions` (HBase's region table with each region's
//! share of the table's writes, and over a cluster the server of each region first, as
//! HBase's `SERVER_NAME`), and `flush`, `compact`, `major_compact`, which go on in
//! the background once Ctrl-C interrupts the wait for them.
//!
//! Invariants: regions print in key order; write shares are 0 on a table that took no
//! writes since the engine opened; an interrupted maintenance task is never cancelled.

use super::args::Args;
use super::background::{self, OnInterrupt, Waited};
use super::binary::to_string_binary;
use super::ddl::{only_table_arg, show_name};
use super::ShellError;
use crate::datadir::DataDir;
use basalt_core::client::Backend;
use basalt_core::Connection;
use std::sync::atomic::AtomicBool;

/// `get_splits` and `list_regions`.
pub(super) async fn regions<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let name = only_table_arg(a)?;
    let regions = dir.conn.admin().regions(name.clone()).await?;
    if a.cmd == "get_splits" {
        out.push_str(&format!("Total number of splits = {}\n", regions.len()));
        for r in regions.iter().skip(1) {
            out.push_str(&format!("{}\n", to_string_binary(&r.start_key)));
        }
        return Ok(());
    }
    let servers = match a.cmd {
        "list_regions" => super::cluster::servers_of(dir, &name).await?,
        _ => None,
    };
    let total: u64 = regions.iter().map(|r| r.write_requests).sum();
    let rows: Vec<Vec<String>> = regions
        .iter()
        .map(|r| {
            let share = if total == 0 {
                0.0
            } else {
                r.write_requests as f64 / total as f64
            };
            let server = servers.as_ref().map(|s| {
                s.get(&r.id)
                    .cloned()
                    .unwrap_or_else(|| "(unassigned)".to_string())
            });
            server
                .into_iter()
                .chain([
                    r.name.clone(),
                    to_string_binary(&r.start_key),
                    to_string_binary(&r.end_key),
                    r.store_files.to_string(),
                    (r.store_file_size + r.memstore_size).to_string(),
                    r.read_requests.to_string(),
                    r.write_requests.to_string(),
                    format!(
                        "{:>5.1}% {}",
                        share * 100.0,
                        "#".repeat((share * 40.0).round() as usize)
                    ),
                ])
                .collect()
        })
        .collect();
    let server_head = servers.as_ref().map(|_| "SERVER_NAME");
    let head: Vec<&str> = server_head
        .into_iter()
        .chain([
            "REGION_NAME",
            "START_KEY",
            "END_KEY",
            "STOREFILES",
            "SIZE",
            "READ_REQUESTS",
            "WRITE_REQUESTS",
            "WRITE_SHARE",
        ])
        .collect();
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$} | "));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    out.push_str(&line(head.clone()));
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out.push_str(&format!("{} row(s)\n", rows.len()));
    Ok(())
}

/// `flush`, `compact` and `major_compact`, waited for until Ctrl-C.
pub(super) async fn maintain<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    stop: &AtomicBool,
    bg: &background::Background,
) -> Result<(), ShellError> {
    let name = only_table_arg(a)?;
    let admin = conn.admin();
    let what = format!("{} of {}", a.cmd.replace('_', " "), show_name(&name));
    let bar = crate::progress::spinner(&what);
    let task = match a.cmd {
        "flush" => tokio::spawn(async move { admin.flush(name).await }),
        "compact" => tokio::spawn(async move { admin.compact(name).await }),
        _ => tokio::spawn(async move { admin.major_compact(name).await }),
    };
    let waited = background::wait(task, stop, OnInterrupt::Continue, bg).await;
    bar.finish_and_clear();
    match waited? {
        Waited::Done(()) => Ok(()),
        Waited::Interrupted => Err(ShellError::Interrupted(format!(
            "the {what} started: it goes on in the background"
        ))),
    }
}
