//! The status page: a [`Status`] rendered as one server-side HTML page (no script), in the
//! spirit of HBase's master and region server pages. A summary of the server and of every
//! table, then per table its families, its regions (seed 002's region table, with each
//! region's share of the table's writes drawn as a bar), its coprocessors and its indexes.
//!
//! Invariants: every text that comes from the data directory (table, family, coprocessor and
//! index names, row keys) is HTML-escaped; region rows carry `data-region` and their write
//! count a `writes` class, so tests can read the page as a browser renders it.

use super::status::{ClusterInfo, RegionStatus, Status, TableStatus};
use crate::offline::human_bytes;
use std::fmt::Write as _;

/// `s` with HTML's special characters escaped (for text and attribute values).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An id for an HTML anchor from a table name (letters, digits, `-` and `_` kept).
fn anchor(table: &str) -> String {
    let id: String = table
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("table-{id}")
}

/// `secs` as the page shows an uptime (`3m 4s`, `2h 5m`, `1d 3h`).
pub(crate) fn duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// A key as the page shows it: `(start)` / `(end)` for the empty bounds.
pub(crate) fn key_cell(key: &str, empty: &str) -> String {
    if key.is_empty() {
        format!("<span class=\"muted\">{empty}</span>")
    } else {
        format!("<code>{}</code>", escape(key))
    }
}

/// The pages' style sheet.
pub(crate) const STYLE: &str = "
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2329;background:#f6f7f9}
header{background:#23313f;color:#fff;padding:14px 28px}
header h1{margin:0;font-size:22px}header p{margin:4px 0 0;color:#c5d0db}
header a{color:#9fd0ff}header code{background:#34475a;color:#fff}
main{padding:8px 28px 40px}
section{background:#fff;border:1px solid #dde2e8;border-radius:6px;padding:6px 18px 14px;margin:16px 0}
h2{font-size:18px;margin:12px 0 8px}h3{font-size:14px;margin:14px 0 6px;color:#46525e}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 10px 4px 0;border-bottom:1px solid #eef1f4;vertical-align:top}
th{font-weight:600;color:#46525e;white-space:nowrap}
td.num,th.num{text-align:right}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f1f3f5;padding:1px 4px;border-radius:3px}
.muted{color:#8a96a3}
.kv td:first-child{color:#46525e;width:260px}
.share{white-space:nowrap}
.bar{display:inline-block;width:160px;height:10px;background:#e9edf1;border-radius:2px;vertical-align:middle;margin-right:8px;position:relative}
.bar span{position:absolute;left:0;top:0;bottom:0;background:#2f80c9;border-radius:2px}
.bar i{position:absolute;top:-2px;bottom:-2px;border-left:1px dashed #c0392b}
.state-ACTIVE,.state-LOADED,.state-ENABLED{color:#1e7b34;font-weight:600}
.state-BUILDING,.state-UNLOADED,.state-DISABLED,.state-MISSING,.state-NOT{color:#b0521b;font-weight:600}
";

/// The page for `status`.
pub fn render(status: &Status) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let (what, dir) = match (&status.data_dir, &status.cluster) {
        (Some(dir), _) => ("Data directory", dir.clone()),
        (None, Some(c)) => (
            "Cluster",
            format!("etcd {} (prefix {})", c.etcd.join(","), c.prefix),
        ),
        (None, None) => ("Data directory", String::new()),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Basalt status: {dir}</title><style>{STYLE}</style></head><body>\
         <header><h1>Basalt {version}</h1><p>{what} <code>{dir}</code> · \
         HBase Thrift1 service on {thrift} · up {up} · \
         <a href=\"/status.json\">JSON</a> · <a href=\"/metrics\">metrics</a></p></header><main>",
        dir = escape(&dir),
        version = escape(status.version),
        thrift = escape(&status.thrift_address),
        up = duration(status.uptime_secs),
    );
    server_section(&mut h, status);
    if let Some(c) = &status.cluster {
        cluster_section(&mut h, c);
    }
    tables_summary(&mut h, status);
    let lacking = match status.cluster {
        None => "Read-only here: this server lacks",
        Some(_) => "Read-only on the cluster's stock region servers: they lack",
    };
    for t in &status.tables {
        table_section(&mut h, t, lacking);
    }
    h.push_str("</main></body></html>\n");
    h
}

fn server_section(h: &mut String, s: &Status) {
    let g = &s.gateway;
    let mut rows = vec![
        ("Thrift connections", g.connections.to_string()),
        (
            "Connections refused (timed out)",
            format!("{} ({})", g.refused_connections, g.timed_out_connections),
        ),
        ("Open scanners", g.open_scanners.to_string()),
        (
            "Requests (errors)",
            format!("{} ({})", g.requests, g.errors),
        ),
    ];
    match &s.engine {
        Some(e) => rows.extend(engine_rows(e)),
        None => rows.push((
            "Engine",
            "each region server keeps its own counters (not available through the gateway)"
                .to_string(),
        )),
    }
    h.push_str("<section id=\"server\"><h2>Server</h2><table class=\"kv\">");
    for (k, v) in rows {
        let _ = write!(h, "<tr><td>{k}</td><td>{}</td></tr>", escape(&v));
    }
    h.push_str("</table></section>");
}

/// The server section's rows of the engine's counters.
pub(crate) fn engine_rows(e: &basalt_core::EngineStats) -> Vec<(&'static str, String)> {
    let lookups = e.block_cache_hits + e.block_cache_misses;
    let hit_ratio = if lookups == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", e.block_cache_hits as f64 * 100.0 / lookups as f64)
    };
    vec![
        ("MemStore", human_bytes(e.memstore_bytes)),
        (
            "Writes blocked by the MemStore budget",
            e.memstore_blocked_writes.to_string(),
        ),
        ("Flushes", e.flushes.to_string()),
        ("Compactions", e.compactions.to_string()),
        ("WAL syncs", e.wal_syncs.to_string()),
        ("WAL written", human_bytes(e.wal_bytes)),
        (
            "Block cache",
            format!(
                "{} of {}; {} hits, {} misses ({hit_ratio} hits)",
                human_bytes(e.block_cache_bytes),
                human_bytes(e.block_cache_capacity),
                e.block_cache_hits,
                e.block_cache_misses
            ),
        ),
    ]
}

/// The cluster's master, balancer and live servers.
fn cluster_section(h: &mut String, c: &ClusterInfo) {
    let _ = write!(
        h,
        "<section id=\"cluster\"><h2>Cluster</h2><p>Master <code>{master}</code> · balancer \
         {balancer} · {moving} region(s) in transition</p><table><tr><th>Region server</th>\
         <th>RPC address</th><th class=\"num\">Assigned regions</th>\
         <th class=\"num\">Serving</th></tr>",
        master = escape(c.master.as_deref().unwrap_or("(none elected)")),
        balancer = if c.balancer_on { "on" } else { "off" },
        moving = c.regions_in_transition,
    );
    for v in &c.servers {
        let _ = write!(
            h,
            "<tr class=\"server\"><td><code>{}</code></td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td></tr>",
            escape(&v.name),
            escape(&v.rpc_address),
            v.assigned,
            v.serving
        );
    }
    h.push_str("</table></section>");
}

fn tables_summary(h: &mut String, s: &Status) {
    h.push_str(
        "<section id=\"tables\"><h2>Tables</h2><table><tr><th>Table</th><th>State</th>\
         <th>Families</th><th class=\"num\">Regions</th><th class=\"num\">Size on disk</th>\
         <th class=\"num\">MemStore</th><th class=\"num\">Read requests</th>\
         <th class=\"num\">Write requests</th><th>Coprocessors</th><th>Indexes</th></tr>",
    );
    if s.tables.is_empty() {
        h.push_str("<tr><td colspan=\"10\" class=\"muted\">no tables</td></tr>");
    }
    for t in &s.tables {
        let sum =
            |f: fn(&super::status::RegionStatus) -> u64| -> u64 { t.regions.iter().map(f).sum() };
        let state = if t.enabled { "ENABLED" } else { "DISABLED" };
        let families: Vec<String> = t.families.iter().map(|f| escape(&f.name)).collect();
        let _ = write!(
            h,
            "<tr><td><a href=\"#{anchor}\">{name}</a></td><td class=\"state-{state}\">{state}</td>\
             <td>{families}</td><td class=\"num\">{regions}</td><td class=\"num\">{size}</td>\
             <td class=\"num\">{mem}</td><td class=\"num\">{reads}</td><td class=\"num\">{writes}</td>\
             <td>{cps}</td><td>{idx}</td></tr>",
            anchor = anchor(&t.name),
            name = escape(&t.name),
            families = families.join(", "),
            regions = t.regions.len(),
            size = human_bytes(sum(|r| r.store_file_bytes)),
            mem = human_bytes(sum(|r| r.memstore_bytes)),
            reads = sum(|r| r.read_requests),
            writes = sum(|r| r.write_requests),
            cps = t.coprocessors.len(),
            idx = t.indexes.len(),
        );
    }
    h.push_str("</table></section>");
}

fn table_section(h: &mut String, t: &TableStatus, lacking: &str) {
    let salted = match t.salt_buckets {
        Some(n) => format!(" · salted into {n} buckets"),
        None => String::new(),
    };
    let _ = write!(
        h,
        "<section class=\"table\" id=\"{anchor}\" data-table=\"{name}\"><h2>Table {name}</h2>\
         <p class=\"muted\">{regions} region(s){salted}</p>",
        anchor = anchor(&t.name),
        name = escape(&t.name),
        regions = t.regions.len(),
    );
    if !t.missing_coprocessors.is_empty() {
        let _ = write!(
            h,
            "<p class=\"state-MISSING\">{lacking} {}</p>",
            escape(&t.missing_coprocessors.join(", "))
        );
    }
    h.push_str("<h3>Column families</h3><table><tr><th>Family</th><th class=\"num\">Versions</th><th>TTL</th><th>Settings</th></tr>");
    for f in &t.families {
        let ttl = f
            .ttl_secs
            .map_or_else(|| "FOREVER".to_string(), |s| format!("{s} s"));
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td>{ttl}</td><td><code>{}</code></td></tr>",
            escape(&f.name),
            f.versions,
            escape(&f.settings)
        );
    }
    h.push_str("</table>");
    regions_table(h, t);
    h.push_str("<h3>Coprocessors</h3>");
    if t.coprocessors.is_empty() {
        h.push_str("<p class=\"muted\">none</p>");
    } else {
        h.push_str(
            "<table><tr><th>Name</th><th class=\"num\">Priority</th><th>State</th>\
             <th class=\"num\">Calls</th><th class=\"num\">Errors</th>\
             <th class=\"num\">Mean latency</th><th class=\"num\">p99 (plugins)</th>\
             <th class=\"num\">Memory (plugins)</th></tr>",
        );
        for c in &t.coprocessors {
            let latency = c
                .mean_latency_micros
                .map_or_else(|| "-".to_string(), |us| format!("{us:.1} µs"));
            let p99 = c
                .p99_latency_micros
                .map_or_else(|| "-".to_string(), |us| format!("{us:.1} µs"));
            let memory = c.memory_bytes.map_or_else(|| "-".to_string(), human_bytes);
            let count = |n: Option<u64>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
            let _ = write!(
                h,
                "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"state-{}\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{latency}</td>\
                 <td class=\"num p99\">{p99}</td><td class=\"num memory\">{memory}</td></tr>",
                escape(&c.name),
                c.priority,
                c.state.split(' ').next().unwrap_or_default(),
                c.state,
                count(c.calls),
                count(c.errors)
            );
        }
        h.push_str("</table>");
    }
    h.push_str("<h3>Indexes</h3>");
    if t.indexes.is_empty() {
        h.push_str("<p class=\"muted\">none</p>");
    } else {
        h.push_str(
            "<table><tr><th>Index</th><th>Columns</th><th>Covered</th><th>Unique</th><th>State</th></tr>",
        );
        for i in &t.indexes {
            let _ = write!(
                h,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td class=\"state-{s}\">{s}</td></tr>",
                escape(&i.name),
                escape(&i.columns.join(", ")),
                escape(&i.covered.join(", ")),
                if i.unique { "yes" } else { "no" },
                s = i.state
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</section>");
}

fn regions_table(h: &mut String, t: &TableStatus) {
    let even = if t.regions.is_empty() {
        0.0
    } else {
        1.0 / t.regions.len() as f64
    };
    let any_writes = t.regions.iter().any(|r| r.write_requests > 0);
    // Over a cluster, the server of each region (a directory's engine serves them all).
    let served = t.regions.iter().any(|r| r.server.is_some());
    let _ = write!(
        h,
        "<h3>Regions</h3><table class=\"regions\"><tr><th>Name</th>{}<th>Start key</th>\
         <th>End key</th><th class=\"num\">Store files</th><th class=\"num\">Size on disk</th>\
         <th class=\"num\">MemStore</th><th class=\"num\">Read requests</th>\
         <th class=\"num\">Write requests</th><th>Write share</th></tr>",
        if served { "<th>Server</th>" } else { "" }
    );
    for r in &t.regions {
        let share = if any_writes {
            format!(
                "<span class=\"bar\" title=\"dashed line: an even share\"><span style=\"width:{w:.2}%\"></span>\
                 <i style=\"left:{e:.2}%\"></i></span>{p:.1}%",
                w = r.write_share * 100.0,
                e = even * 100.0,
                p = r.write_share * 100.0
            )
        } else {
            "<span class=\"muted\">no writes since start</span>".to_string()
        };
        let server = match (served, &r.server) {
            (false, _) => String::new(),
            (true, Some(s)) => format!("<td class=\"server\"><code>{}</code></td>", escape(s)),
            (true, None) => "<td class=\"server muted\">(in transition)</td>".to_string(),
        };
        let _ = write!(
            h,
            "<tr class=\"region\" data-region=\"{id}\"><td><code>{name}</code></td>{server}\
             {figures}<td class=\"share\">{share}</td></tr>",
            id = r.id,
            name = escape(&r.name),
            figures = region_figures(r),
        );
    }
    h.push_str("</table>");
}

/// The cells of HBase's region table for `r`: start and end keys, store files, size on
/// disk, MemStore, read and write requests (`reads` and `writes` classes).
pub(crate) fn region_figures(r: &RegionStatus) -> String {
    format!(
        "<td>{start}</td><td>{end}</td><td class=\"num\">{files}</td>\
         <td class=\"num\">{size}</td><td class=\"num\">{mem}</td>\
         <td class=\"num reads\">{reads}</td><td class=\"num writes\">{writes}</td>",
        start = key_cell(&r.start_key, "(start)"),
        end = key_cell(&r.end_key, "(end)"),
        files = r.store_files,
        size = human_bytes(r.store_file_bytes),
        mem = human_bytes(r.memstore_bytes),
        reads = r.read_requests,
        writes = r.write_requests,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("plain \\x00 key"), "plain \\x00 key");
    }

    #[test]
    fn anchors_and_durations() {
        assert_eq!(anchor("ns:t<1>"), "table-ns_t_1_");
        assert_eq!(duration(5), "5s");
        assert_eq!(duration(125), "2m 5s");
        assert_eq!(duration(7322), "2h 2m");
        assert_eq!(duration(90_000), "1d 1h");
    }
}
