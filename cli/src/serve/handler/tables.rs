//! The table and region admin methods of the Thrift1 service: `enableTable`,
//! `disableTable`, `isTableEnabled`, `compact`, `majorCompact`, `getTableNames`,
//! `getColumnDescriptors`, `getTableRegions`, `getRegionInfo`, `createTable`,
//! `deleteTable`, with the reference server's answers.
//!
//! Invariants: table names print as HBase prints them (the bare name in the default
//! namespace); the reserved family of local index rows is never listed; a region is named
//! `table,start,id` both where it is reported and where it is given (`compact`).

use super::Handler;
use crate::serve::convert::*;
use basalt_core::client::Backend;
use basalt_core::{Error, TableName};
use basalt_thrift::hbase::{ColumnDescriptor, TRegionInfo, Text};
use std::collections::BTreeMap;

/// A table name as an `IOError` on failure.
fn table_name_of(name: &[u8]) -> thrift::Result<TableName> {
    table_name(name)
}

/// The table part of a region name (`table,start,id`), or the whole name.
fn region_table(name: &[u8]) -> &[u8] {
    match name.iter().position(|&c| c == b',') {
        Some(at) => &name[..at],
        None => name,
    }
}

/// `enableTable` (`on`) or `disableTable`.
pub(super) fn enable<B: Backend>(h: &Handler<B>, name: &[u8], on: bool) -> thrift::Result<()> {
    let t = table_name_of(name)?;
    let admin = h.state.data.conn.admin();
    if on {
        h.run(admin.enable_table(t)).map_err(engine)
    } else {
        h.run(admin.disable_table(t)).map_err(engine)
    }
}

/// `isTableEnabled`.
pub(super) fn is_enabled<B: Backend>(h: &Handler<B>, name: &[u8]) -> thrift::Result<bool> {
    let t = table_name_of(name)?;
    h.run(h.state.data.conn.admin().is_table_enabled(t))
        .map_err(engine)
}

/// `compact` / `majorCompact` of a table name, or of a region name (`table,start,id`, as
/// `getTableRegions` names regions): that region only, as HBase's.
pub(super) fn compact<B: Backend>(h: &Handler<B>, name: &[u8], major: bool) -> thrift::Result<()> {
    let t = table_name_of(region_table(name))?;
    let admin = h.state.data.conn.admin();
    let region = name
        .iter()
        .rposition(|&c| c == b',')
        .and_then(|at| std::str::from_utf8(&name[at + 1..]).ok())
        .map(|id| {
            id.parse::<u64>()
                .map_err(|_| io_error(format!("not a region name (no region id): {id:?}")))
        })
        .transpose()?;
    let done = match (region, major) {
        (Some(id), true) => h.run(admin.major_compact_region(t, id)),
        (Some(id), false) => h.run(admin.compact_region(t, id)),
        (None, true) => h.run(admin.major_compact(t)),
        (None, false) => h.run(admin.compact(t)),
    };
    done.map_err(engine)
}

/// `getTableNames`: every table, sorted.
pub(super) fn names<B: Backend>(h: &Handler<B>) -> thrift::Result<Vec<Text>> {
    let tables = h
        .run(h.state.data.conn.admin().list_tables())
        .map_err(engine)?;
    let mut names: Vec<Text> = tables
        .iter()
        .map(|d| display_name(&d.name).into_bytes())
        .collect();
    names.sort();
    Ok(names)
}

/// `getColumnDescriptors`.
pub(super) fn column_descriptors<B: Backend>(
    h: &Handler<B>,
    name: &[u8],
) -> thrift::Result<BTreeMap<Text, ColumnDescriptor>> {
    let t = table_name_of(name)?;
    let desc = h
        .run(h.state.data.conn.admin().describe_table(t))
        .map_err(engine)?;
    Ok(desc
        .families
        .iter()
        // The reserved family of local index rows is no column family a client reads.
        .filter(|f| !f.is_local_rows())
        .map(|f| {
            let d = family_to_thrift(f);
            (d.name.clone().unwrap_or_default(), d)
        })
        .collect())
}

/// Where each region of `table` is served, by region id (over a cluster: the serving
/// server's RPC host and port; empty over a directory, whose regions are all this
/// gateway's). A region in transition is left out (reported as the gateway's).
fn servers_of<B: Backend>(h: &Handler<B>, table: &TableName) -> BTreeMap<u64, (String, u16)> {
    let Some(admin) = h.state.data.cluster_admin() else {
        return BTreeMap::new();
    };
    let located = h.run(async {
        let status = admin.status().await?;
        let placements = admin.regions(Some(table)).await?;
        Ok::<_, Error>((status, placements))
    });
    let (status, placements) = match located {
        Ok(x) => x,
        Err(e) => {
            tracing::debug!(%table, error = %e, "getTableRegions: servers not located");
            return BTreeMap::new();
        }
    };
    let address = |name: &str| {
        let server = status.servers.iter().find(|s| s.name == name)?;
        let at: std::net::SocketAddr = server.rpc_address.parse().ok()?;
        Some((at.ip().to_string(), at.port()))
    };
    placements
        .iter()
        .filter_map(|p| Some((p.key.region, address(p.serving.as_deref()?)?)))
        .collect()
}

/// The Thrift form of region `r`, served at `server` (host and port), or by this gateway.
fn region_info<B: Backend>(
    h: &Handler<B>,
    r: &basalt_core::RegionInfo,
    server: Option<&(String, u16)>,
) -> TRegionInfo {
    let (host, port) = match server {
        Some((host, port)) => (host.clone(), *port),
        None => (h.state.host.clone(), h.state.port),
    };
    TRegionInfo {
        start_key: Some(r.start_key.to_vec()),
        end_key: Some(r.end_key.to_vec()),
        id: Some(i64::try_from(r.id).unwrap_or(i64::MAX)),
        name: Some(r.name.clone().into_bytes()),
        version: Some(1),
        server_name: Some(host.into_bytes()),
        port: Some(i32::from(port)),
    }
}

/// `getTableRegions`: none for a table that does not exist. Over a cluster each region is
/// reported at the region server serving it (as HBase's Thrift server reports its region
/// servers).
pub(super) fn regions<B: Backend>(h: &Handler<B>, name: &[u8]) -> thrift::Result<Vec<TRegionInfo>> {
    let t = table_name_of(name)?;
    match h.run(h.state.data.conn.admin().regions(t.clone())) {
        Ok(regions) => {
            let servers = servers_of(h, &t);
            Ok(regions
                .iter()
                .map(|r| region_info(h, r, servers.get(&r.id)))
                .collect())
        }
        Err(Error::TableNotFound(_)) => Ok(Vec::new()),
        Err(e) => Err(engine(e)),
    }
}

/// `getRegionInfo` of a meta row key: `table,row[,id]`.
pub(super) fn region_of_row<B: Backend>(h: &Handler<B>, row: &[u8]) -> thrift::Result<TRegionInfo> {
    let at = row
        .iter()
        .position(|&c| c == b',')
        .ok_or_else(|| io_error("expected a region key `table,row[,id]`"))?;
    let t = table_name_of(&row[..at])?;
    let mut key = &row[at + 1..];
    if let Some(comma) = key.iter().rposition(|&c| c == b',') {
        if key[comma + 1..].iter().all(u8::is_ascii_digit) {
            key = &key[..comma];
        }
    }
    let regions = h
        .run(h.state.data.conn.admin().regions(t.clone()))
        .map_err(engine)?;
    regions
        .iter()
        .find(|r| r.start_key.as_ref() <= key && (r.end_key.is_empty() || key < r.end_key.as_ref()))
        .map(|r| region_info(h, r, servers_of(h, &t).get(&r.id)))
        .ok_or_else(|| io_error("no region holds that row"))
}

/// `createTable`: at least one family; a name in use is `AlreadyExists`.
pub(super) fn create<B: Backend>(
    h: &Handler<B>,
    name: &[u8],
    column_families: &[ColumnDescriptor],
) -> thrift::Result<()> {
    let t = table_name(name).map_err(|e| illegal(e.to_string()))?;
    if column_families.is_empty() {
        return Err(illegal("a table needs at least one column family"));
    }
    let mut desc = basalt_core::TableDescriptor::new(t);
    for cf in column_families {
        desc = desc.family(family_from_thrift(cf)?);
    }
    match h.run(h.state.data.conn.admin().create_table(desc)) {
        Ok(()) => Ok(()),
        Err(Error::TableExists(_)) => Err(already_exists("table name already in use")),
        Err(e) => Err(engine_or_illegal(e)),
    }
}

/// `deleteTable`.
pub(super) fn delete<B: Backend>(h: &Handler<B>, name: &[u8]) -> thrift::Result<()> {
    let t = table_name_of(name)?;
    match h.run(h.state.data.conn.admin().delete_table(t)) {
        Err(Error::TableNotFound(_)) => Err(io_error("table does not exist")),
        other => other.map_err(engine),
    }
}
