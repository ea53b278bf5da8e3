//! Schema and region administration: `alter` (families, and coprocessors as HBase's
//! `'coprocessor' => ...` table attribute), `split`, `merge_region`,
//! and `list_coprocessors` (a table's coprocessors with their call metrics).
//!
//! Regions are named as `list_regions` prints them (`table,start key,id`) or by their id
//! alone (Basalt's counterpart of HBase's encoded region name).
//!
//! Invariant: `alter` adds only coprocessors this tool has registered (a name it lacks would
//! make the table read-only here, see [`crate::datadir`]).

use super::args::{as_string, key_name, Args};
use super::binary::{to_bytes_binary, to_string_binary};
use super::ddl::{family, only_table_arg, show_name, table_arg};
use super::parse::Value;
use super::ShellError;
use crate::datadir::DataDir;
use basalt_core::client::Backend;
use basalt_core::{ColumnFamilyDescriptor, CoprocessorDescriptor, RegionInfo, TableName};

/// `alter 't', NAME => 'f', VERSIONS => 5` | `'f'` | `'delete' => 'f'` |
/// `{NAME => 'f', METHOD => 'delete'}` | `'coprocessor' => 'name|priority|k=v,...'` |
/// `METHOD => 'table_att_unset', NAME => 'coprocessor$1'`; several may follow the table.
pub(super) async fn alter<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    if a.vals.len() < 2 {
        return Err(a.usage("give a table name and at least one change"));
    }
    let name = table_arg(a, 0)?;
    let admin = dir.conn.admin();
    let desc = admin.describe_table(name.clone()).await?;
    out.push_str("Updating all regions with the new schema...\n");
    for v in &a.vals[1..] {
        match v {
            Value::Str(f) => {
                let f = to_bytes_binary(f);
                if !desc
                    .families
                    .iter()
                    .any(|d| d.name.as_ref() == f.as_slice())
                {
                    admin
                        .add_column_family(name.clone(), ColumnFamilyDescriptor::new(f))
                        .await?;
                }
            }
            Value::Hash(pairs) => alter_hash(dir, a, &name, pairs, out).await?,
            other => {
                return Err(a.usage(format!(
                    "a change is a family name or a hash, not {}",
                    other.kind()
                )))
            }
        }
    }
    let regions = admin.regions(name).await?.len();
    out.push_str(&format!("{regions}/{regions} regions updated.\nDone.\n"));
    Ok(())
}

fn entry<'v>(pairs: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    pairs
        .iter()
        .find(|(k, _)| key_name(k).as_deref() == Some(key))
        .map(|(_, v)| v)
}

async fn alter_hash<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    table: &TableName,
    pairs: &[(Value, Value)],
    out: &mut String,
) -> Result<(), ShellError> {
    let admin = dir.conn.admin();
    let method = entry(pairs, "METHOD")
        .and_then(as_string)
        .map(|m| m.to_ascii_lowercase());
    if let Some(v) = entry(pairs, "DELETE") {
        let f = as_string(v).ok_or_else(|| a.usage("'delete' => names a family"))?;
        admin
            .delete_column_family(table.clone(), to_bytes_binary(&f))
            .await?;
        return Ok(());
    }
    if let Some(v) = entry(pairs, "COPROCESSOR") {
        let spec = as_string(v).ok_or_else(|| a.usage("'coprocessor' => takes a string"))?;
        let cp = coprocessor_spec(dir, a, &spec)?;
        admin.add_coprocessor(table.clone(), cp).await?;
        return Ok(());
    }
    match method.as_deref() {
        Some("delete") => {
            let f = entry(pairs, "NAME")
                .and_then(as_string)
                .ok_or_else(|| a.usage("METHOD => 'delete' needs NAME => 'family'"))?;
            admin
                .delete_column_family(table.clone(), to_bytes_binary(&f))
                .await?;
        }
        Some("table_att_unset") => {
            let n = entry(pairs, "NAME").and_then(as_string).ok_or_else(|| {
                a.usage("METHOD => 'table_att_unset' needs NAME => 'coprocessor$N'")
            })?;
            let desc = admin.describe_table(table.clone()).await?;
            let cp = match n.strip_prefix("coprocessor$") {
                Some(i) => i
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| desc.coprocessors.get(i))
                    .map(|c| c.name.clone()),
                None => desc
                    .coprocessors
                    .iter()
                    .find(|c| c.name == n)
                    .map(|c| c.name.clone()),
            }
            .ok_or_else(|| {
                a.usage(format!(
                    "table {} has no coprocessor {n} (list_coprocessors '{}' lists them)",
                    show_name(table),
                    show_name(table)
                ))
            })?;
            admin.remove_coprocessor(table.clone(), &cp).await?;
        }
        Some("table_att") | None if entry(pairs, "NAME").is_none() => {
            let keys: Vec<String> = pairs
                .iter()
                .filter_map(|(k, _)| key_name(k))
                .filter(|k| k != "METHOD")
                .collect();
            return Err(ShellError::Unsupported(format!(
                "Basalt has no table attribute {}: alter changes families and coprocessors",
                keys.join(", ")
            )));
        }
        Some("add") | Some("modify") | None => {
            let cf = family(a, pairs, out)?;
            let desc = admin.describe_table(table.clone()).await?;
            if desc.families.iter().any(|d| d.name == cf.name) {
                admin.modify_column_family(table.clone(), cf).await?;
            } else {
                admin.add_column_family(table.clone(), cf).await?;
            }
        }
        Some(other) => {
            return Err(a.usage(format!(
                "unknown METHOD '{other}': use 'delete', 'table_att' or 'table_att_unset'"
            )))
        }
    }
    Ok(())
}

/// HBase's `'[path|]class|priority|k=v,k=v'`, with Basalt's registered names for classes.
pub(super) fn coprocessor_spec<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    spec: &str,
) -> Result<CoprocessorDescriptor, ShellError> {
    let parts: Vec<&str> = spec.split('|').collect();
    let (name, rest) =
        match parts.as_slice() {
            [_path, class, rest @ ..] if parts.len() == 4 => (*class, rest),
            [name, rest @ ..] if parts.len() <= 3 => (*name, rest),
            _ => return Err(a.usage(
                "a coprocessor is 'name|priority|key=value,...' (priority and arguments optional)",
            )),
        };
    let name = name.trim();
    if !dir.coprocessors.contains(name) {
        return Err(ShellError::Unsupported(format!(
            "coprocessor '{name}' is not registered in this tool; it has: {}",
            dir.coprocessors.names().join(", ")
        )));
    }
    let mut cp = CoprocessorDescriptor::new(name);
    if let Some(p) = rest.first().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let p = p.parse::<u32>().map_err(|_| {
            a.usage(format!(
                "priority '{p}' is not a number from 0 to 4294967295"
            ))
        })?;
        cp = cp.priority(p);
    }
    if let Some(args) = rest.get(1).filter(|s| !s.trim().is_empty()) {
        for kv in args.split(',') {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| a.usage(format!("coprocessor argument '{kv}' is not key=value")))?;
            cp = cp.arg(k.trim(), v.trim());
        }
    }
    Ok(cp)
}

/// A region named as `list_regions` prints it (`table,start,id`) or by its id: `None`
/// when `spec` has neither form, an error when no such region exists.
pub(super) async fn find_region<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    spec: &str,
) -> Result<Option<(TableName, RegionInfo)>, ShellError> {
    let admin = dir.conn.admin();
    let (tables, id) = if let Some((table, rest)) = spec.split_once(',') {
        let id = rest
            .rsplit(',')
            .next()
            .unwrap_or(rest)
            .trim_end_matches('.');
        let Ok(id) = id.parse::<u64>() else {
            return Ok(None);
        };
        (vec![TableName::parse(table)?], id)
    } else if let Ok(id) = spec.parse::<u64>() {
        let all = admin.list_tables().await?;
        (all.into_iter().map(|d| d.name).collect(), id)
    } else {
        return Ok(None);
    };
    // The full form must name the region exactly (start key included).
    let full = spec.contains(',');
    for t in tables {
        if let Some(r) = admin
            .regions(t.clone())
            .await?
            .into_iter()
            .find(|r| r.id == id && (!full || r.name == spec.trim_end_matches('.')))
        {
            return Ok(Some((t, r)));
        }
    }
    Err(a.usage(format!(
        "no region {spec} (list_regions 'table' names the regions)"
    )))
}

/// `split 't'` (every region at its midpoint), `split 't', 'key'`, `split 'region'`,
/// `split 'region', 'key'`.
pub(super) async fn split<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(1, 2)?;
    let spec = a.string(0, "the table or region name")?;
    let key = match a.vals.get(1) {
        Some(_) => Some(a.bytes(1, "the split key")?),
        None => None,
    };
    let admin = dir.conn.admin();
    let (table, regions) = match find_region(dir, a, &spec).await? {
        Some((t, r)) => (t, vec![r]),
        None => {
            let t = table_arg(a, 0)?;
            let all = admin.regions(t.clone()).await?;
            let chosen = match &key {
                // The region holding the key.
                Some(k) => all
                    .into_iter()
                    .filter(|r| {
                        r.start_key.as_ref() <= k.as_slice()
                            && (r.end_key.is_empty() || k.as_slice() < r.end_key.as_ref())
                    })
                    .collect(),
                None => all,
            };
            (t, chosen)
        }
    };
    let mut split = 0;
    for r in &regions {
        match admin
            .split_region(table.clone(), r.id, key.as_deref())
            .await?
        {
            Some((lo, hi)) => {
                split += 1;
                out.push_str(&format!(
                    "Split region {} into {lo} and {hi}\n",
                    to_string_binary(r.name.as_bytes())
                ));
            }
            None => out.push_str(&format!(
                "Region {} has no split point (too little data)\n",
                to_string_binary(r.name.as_bytes())
            )),
        }
    }
    out.push_str(&format!("{split} region(s) split\n"));
    Ok(())
}

/// `merge_region 'region a', 'region b'` or `merge_region ['a', 'b', ...]` (adjacent regions
/// of one table, merged left to right).
pub(super) async fn merge_region<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let specs: Vec<String> = match a.vals {
        [Value::Array(items)] => items
            .iter()
            .map(|v| as_string(v).ok_or_else(|| a.usage("region names are strings")))
            .collect::<Result<_, _>>()?,
        [_, _] | [_, _, _] => {
            // HBase's optional third argument (force) changes nothing here.
            vec![
                a.string(0, "the first region")?,
                a.string(1, "the second region")?,
            ]
        }
        _ => return Err(a.usage("give two region names, or an array of region names")),
    };
    if specs.len() < 2 {
        return Err(a.usage("give at least two regions to merge"));
    }
    let mut found = Vec::new();
    for s in &specs {
        match find_region(dir, a, s).await? {
            Some(r) => found.push(r),
            None => {
                return Err(a.usage(format!(
                    "'{s}' is not a region name (list_regions 'table' names the regions)"
                )))
            }
        }
    }
    let table = found[0].0.clone();
    if found.iter().any(|(t, _)| *t != table) {
        return Err(a.usage("the regions belong to different tables"));
    }
    found.sort_by(|x, y| x.1.start_key.cmp(&y.1.start_key));
    let admin = dir.conn.admin();
    let mut merged = found[0].1.id;
    for (_, r) in &found[1..] {
        merged = admin.merge_regions(table.clone(), merged, r.id).await?;
    }
    out.push_str(&format!(
        "Merged {} regions of {} into region {merged}\n",
        found.len(),
        show_name(&table)
    ));
    Ok(())
}

/// `list_coprocessors 't'`: the table's coprocessors in run order with their counters
/// (an embedded engine's; over a cluster each region server counts its own calls, so the
/// counters print as `-`).
pub(super) async fn list_coprocessors<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let name = only_table_arg(a)?;
    let desc = dir.conn.admin().describe_table(name.clone()).await?;
    let missing = dir.coprocessors.missing(&desc);
    let local = dir.embedded();
    let metrics = match local {
        Some(_) => dir.coprocessors.metrics(&name),
        None => Vec::new(),
    };
    let full_name = name.to_string();
    let plugins = local
        .map(|e| e.plugin_host.plugin_stats())
        .unwrap_or_default();
    out.push_str(&format!(
        "{:<4}{:<28}{:>11}  {:<8}{:>10}{:>8}{:>9}{:>8}{:>14}  ARGS\n",
        "#", "NAME", "PRIORITY", "STATE", "CALLS", "ERRORS", "REFUSED", "FAULTS", "AVG_LATENCY"
    ));
    for (i, cp) in desc.coprocessors.iter().enumerate() {
        let m = metrics.iter().find(|m| m.name == cp.name);
        let state = if missing.contains(&cp.name) {
            "MISSING"
        } else if !missing.is_empty() {
            // A read-only table runs none of its coprocessors.
            "NOT RUN"
        } else if local.is_none() {
            // Loaded (or not) by each region server.
            "REMOTE"
        } else {
            match m {
                Some(m) if !m.loaded => "UNLOADED",
                _ => "LOADED",
            }
        };
        let counters = match (m, local) {
            (_, None) => [
                "-".to_string(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ],
            (Some(m), Some(_)) => [
                m.calls.to_string(),
                m.errors.to_string(),
                m.refusals.to_string(),
                m.faults.to_string(),
                if m.calls == 0 {
                    "-".to_string()
                } else {
                    format!(
                        "{:.1}us",
                        m.total_latency.as_secs_f64() * 1e6 / m.calls as f64
                    )
                },
            ],
            (None, Some(_)) => [
                "0".to_string(),
                "0".into(),
                "0".into(),
                "0".into(),
                "-".into(),
            ],
        };
        let [calls, errors, refusals, faults, avg] = &counters;
        let args: Vec<String> = cp.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "{:<4}{:<28}{:>11}  {state:<8}{calls:>10}{errors:>8}{refusals:>9}{faults:>8}{avg:>14}  {}\n",
            format!("${}", i + 1),
            cp.name,
            cp.priority,
            args.join(",")
        ));
        if let Some(p) = plugins
            .iter()
            .find(|p| p.table == full_name && p.name == cp.name)
        {
            let p99 = p
                .p99
                .map_or("-".into(), |d| format!("{:.1}us", d.as_secs_f64() * 1e6));
            out.push_str(&format!(
                "    plugin: {} calls, {} faults, p99 {p99}, memory {}\n",
                p.calls,
                p.faults,
                crate::offline::human_bytes(p.memory_bytes)
            ));
        }
    }
    if !missing.is_empty() {
        let here = match local {
            Some(_) => "here",
            None => "on the cluster's stock region servers",
        };
        out.push_str(&format!(
            "Table {} is read-only {here}: this tool lacks {}\n",
            show_name(&name),
            missing.join(", ")
        ));
    }
    if local.is_none() && !desc.coprocessors.is_empty() {
        out.push_str(
            "Calls, errors and latency are counted by each region server: not available over a cluster\n",
        );
    }
    out.push_str(&format!("{} coprocessor(s)\n", desc.coprocessors.len()));
    Ok(())
}
