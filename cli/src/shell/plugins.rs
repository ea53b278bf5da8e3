//! Plugins in the shell (sandboxed coprocessors, WebAssembly components):
//! `upload_coprocessor` stores one from a file and prints its sha256, `list_plugins`,
//! `delete_plugin`, `swap_coprocessor` replaces a table's coprocessor in one schema change,
//! and `call_endpoint` runs an endpoint plugin over a table's regions. Attaching is HBase's
//! `alter 't', METHOD => 'table_att', 'coprocessor' => 'plugin:SHA256|priority|k=v'`.
//!
//! Over a cluster the plugin commands act on the shared catalog through the servers, and the
//! servers run the plugins attached to tables; `call_endpoint` runs an endpoint plugin in
//! this process, so it needs an embedded engine and is refused on a cluster.
//!
//! Invariants: a file is read whole only up to the plugin size bound, and nothing is
//! stored unless the runtime validated it; an endpoint's answer prints as binary-escaped
//! bytes (as HBase's shell prints values).

use super::admin::coprocessor_spec;
use super::args::{as_string, key_name, Args};
use super::binary::{to_bytes_binary, to_string_binary};
use super::ddl::table_arg;
use super::parse::Value;
use super::snapshots::utc;
use super::ShellError;
use crate::datadir::DataDir;
use crate::offline::human_bytes;
use basalt_coprocessors::KeyRange;
use basalt_core::client::Backend;
use basalt_core::{plugin_coprocessor_name, MAX_PLUGIN_BYTES};
use std::io::Read;

/// `upload_coprocessor '/path/plugin.wasm'`.
pub(super) async fn upload<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(1, 1)?;
    let path = a.string(0, "the component file")?;
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_PLUGIN_BYTES as u64 + 1).read_to_end(&mut bytes))
        .map_err(|e| a.usage(format!("cannot read {path}: {e}")))?;
    let p = dir.conn.admin().upload_plugin(bytes).await?;
    out.push_str(&format!(
        "Uploaded {} plugin {} ({})\nAttach it with: alter 't', METHOD => 'table_att', 'coprocessor' => '{}|priority|key=value'\n",
        p.kind,
        p.id,
        human_bytes(p.size),
        plugin_coprocessor_name(&p.id)
    ));
    Ok(())
}

/// `list_plugins`.
pub(super) async fn list<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(0, 0)?;
    let plugins = dir.conn.admin().list_plugins().await?;
    out.push_str(&format!(
        "{:<64} {:<8} {:>10} UPLOADED + TABLES\n",
        "SHA256", "KIND", "SIZE"
    ));
    for p in &plugins {
        out.push_str(&format!(
            "{:<64} {:<8} {:>10} {} {}\n",
            p.id,
            p.kind.to_string(),
            human_bytes(p.size),
            utc(p.uploaded_ms),
            match p.tables.is_empty() {
                true => "(not attached)".to_string(),
                false => p.tables.join(", "),
            }
        ));
    }
    out.push_str(&format!("{} plugin(s)\n", plugins.len()));
    Ok(())
}

/// `delete_plugin 'sha256'`.
pub(super) async fn delete<B: Backend>(dir: &DataDir<B>, a: &Args<'_>) -> Result<(), ShellError> {
    a.count(1, 1)?;
    let id = a.string(0, "the plugin's sha256")?;
    let id = id.strip_prefix(basalt_core::PLUGIN_PREFIX).unwrap_or(&id);
    dir.conn.admin().delete_plugin(id).await?;
    Ok(())
}

/// `swap_coprocessor 't', 'old name', 'new name|priority|key=value'`.
pub(super) async fn swap<B: Backend>(dir: &DataDir<B>, a: &Args<'_>) -> Result<(), ShellError> {
    a.count(3, 3)?;
    let table = table_arg(a, 0)?;
    let old = a.string(1, "the coprocessor to replace")?;
    let spec = a.string(2, "the new coprocessor")?;
    let new = coprocessor_spec(dir, a, &spec)?;
    dir.conn.admin().swap_coprocessor(table, &old, new).await?;
    Ok(())
}

/// `call_endpoint 't', 'sha256', 'request' [, {STARTROW => 'a', STOPROW => 'b'}]`.
pub(super) async fn call<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(3, 4)?;
    let table = table_arg(a, 0)?;
    let id = a.string(1, "the plugin's sha256")?;
    let id = id.strip_prefix(basalt_core::PLUGIN_PREFIX).unwrap_or(&id);
    let request = to_bytes_binary(&a.string(2, "the request")?);
    let (mut start, mut stop) = (Vec::new(), Vec::new());
    if let Some(v) = a.vals.get(3) {
        let Value::Hash(pairs) = v else {
            return Err(a.usage("the options are a hash such as {STARTROW => 'a'}"));
        };
        for (k, v) in pairs {
            let text = as_string(v).ok_or_else(|| a.usage("STARTROW and STOPROW are strings"))?;
            match key_name(k).as_deref() {
                Some("STARTROW") => start = to_bytes_binary(&text),
                Some("STOPROW") => stop = to_bytes_binary(&text),
                _ => return Err(a.usage("options are STARTROW, STOPROW")),
            }
        }
    }
    let local = dir.require_embedded(
        "call_endpoint",
        "endpoint plugins run in the shell's own process, on an embedded engine; the region \
         servers serve the built-in aggregations (aggregate)",
    )?;
    let answer = local
        .plugins
        .call(&local.conn, table, id, KeyRange::new(start, stop), &request)
        .await?;
    match answer {
        Some(bytes) => out.push_str(&format!("{}\n", to_string_binary(&bytes))),
        None => out.push_str("nil (no region in range)\n"),
    }
    Ok(())
}
