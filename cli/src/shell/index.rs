//! Basalt's secondary indexes in the shell: `create_index` (an online build with a progress
//! bar), `drop_index`, `list_indexes`, `scan_index` (equality, prefix or range over the
//! indexed values, as index hits or as data rows) and `verify_index` (with `REPAIR`).
//!
//! Values are typed as strings (`\xNN` escapes for bytes, `nil` for a missing value) in the
//! indexed columns' order.

use super::args::{as_bool, as_int, as_string, column, columns, key_name, Args};
use super::background::{self, OnInterrupt, Waited};
use super::binary::{to_bytes_binary, to_string_binary};
use super::data::print_row;
use super::ddl::{show_name, table_arg};
use super::parse::Value;
use super::ShellError;
use crate::datadir::DataDir;
use crate::progress;
use basalt_core::client::Backend;
use basalt_core::keys::Order;
use basalt_core::TableName;
use basalt_index::{IndexAdmin, IndexDef, IndexState, Query};
use bytes::Bytes;
use std::sync::atomic::AtomicBool;

fn admin<B: Backend>(dir: &DataDir<B>) -> IndexAdmin<B> {
    dir.index_admin().clone()
}

fn col_text(family: &[u8], qualifier: &[u8]) -> String {
    format!(
        "{}:{}",
        to_string_binary(family),
        to_string_binary(qualifier)
    )
}

/// The table (argument 0) and index name (argument 1) of an index command.
fn table_and_index(a: &Args<'_>) -> Result<(TableName, String), ShellError> {
    Ok((table_arg(a, 0)?, a.string(1, "the index name")?))
}

/// `create_index 't', 'name', 'f:q' | ['f:a', 'f:b DESC'] [, {INCLUDE => ['f:c'], UNIQUE =>
/// true, SPARSE => true, SALT_BUCKETS => n}]`.
pub(super) async fn create_index<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    stop: &AtomicBool,
    bg: &background::Background,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(3, 4)?;
    let (table, name) = table_and_index(a)?;
    let cols = a
        .vals
        .get(2)
        .and_then(columns)
        .ok_or_else(|| a.usage("the indexed columns are 'f:q' or an array of them"))?;
    let mut def = IndexDef::new(name.clone(), table.clone());
    for spec in &cols {
        let (spec, desc) = match spec.trim().rsplit_once(' ') {
            Some((c, dir)) if dir.eq_ignore_ascii_case("DESC") => (c.trim(), true),
            Some((c, dir)) if dir.eq_ignore_ascii_case("ASC") => (c.trim(), false),
            _ => (spec.trim(), false),
        };
        let (f, q) = match column(spec) {
            (f, Some(q)) => (f, q),
            (_, None) => return Err(a.usage(format!("'{spec}' is not 'family:qualifier'"))),
        };
        def = if desc {
            def.column_desc(f, q)
        } else {
            def.column(f, q)
        };
    }
    if let Some(v) = a.vals.get(3) {
        let Value::Hash(pairs) = v else {
            return Err(a.usage(format!("the options are a hash, not {}", v.kind())));
        };
        for (k, v) in pairs {
            let key = key_name(k).unwrap_or_default();
            let flag = || as_bool(v).ok_or_else(|| a.usage(format!("{key} is true or false")));
            def = match key.as_str() {
                "INCLUDE" | "COVER" => {
                    let cs = columns(v)
                        .ok_or_else(|| a.usage("INCLUDE is 'f:q' or an array of them"))?;
                    let mut d = def;
                    for c in &cs {
                        match column(c) {
                            (f, Some(q)) => d = d.cover(f, q),
                            (_, None) => {
                                return Err(a.usage(format!("'{c}' is not 'family:qualifier'")))
                            }
                        }
                    }
                    d
                }
                "UNIQUE" if flag()? => def.unique(),
                "SPARSE" if flag()? => def.sparse(),
                "UNIQUE" | "SPARSE" => def,
                "SALT_BUCKETS" => match as_int(v) {
                    Some(n) if (1..=65_536).contains(&n) => def.salt_buckets(n as u32),
                    _ => return Err(a.usage("SALT_BUCKETS is an integer from 1 to 65536")),
                },
                _ => return Err(a.usage(format!("unknown option {k}"))),
            };
        }
    }
    let bar = progress::items_bar(0, &format!("building index {name}"));
    let shown = bar.clone();
    let indexes = admin(dir);
    let task = tokio::spawn(async move {
        indexes
            .create_with_progress(def, move |done, total| {
                shown.set_length(total);
                shown.set_position(done);
            })
            .await
    });
    let waited = background::wait(task, stop, OnInterrupt::Continue, bg).await;
    bar.finish_and_clear();
    if let Waited::Interrupted = waited? {
        return Err(ShellError::Interrupted(format!(
            "{} of {} rows indexed: the build goes on in the background (list_indexes shows BUILDING until it ends)",
            bar.position(),
            bar.length().unwrap_or(0)
        )));
    }
    out.push_str(&format!(
        "Created index {name} on {} (ACTIVE)\n",
        show_name(&table)
    ));
    Ok(())
}

/// `drop_index 't', 'name'`.
pub(super) async fn drop_index<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
) -> Result<(), ShellError> {
    a.count(2, 2)?;
    let (table, name) = table_and_index(a)?;
    admin(dir).drop_index(table, &name).await?;
    Ok(())
}

/// `list_indexes` | `list_indexes 't'`.
pub(super) async fn list_indexes<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(0, 1)?;
    let defs = match a.vals.first() {
        Some(_) => admin(dir).list(table_arg(a, 0)?).await?,
        None => admin(dir).list_all().await?,
    };
    out.push_str("TABLE                INDEX                COLUMNS / INCLUDE / OPTIONS\n");
    for d in &defs {
        let cols: Vec<String> = d
            .columns
            .iter()
            .map(|(c, o)| {
                let t = col_text(&c.family, &c.qualifier);
                if *o == Order::Desc {
                    format!("{t} DESC")
                } else {
                    t
                }
            })
            .collect();
        let covered: Vec<String> = d
            .covered
            .iter()
            .map(|c| col_text(&c.family, &c.qualifier))
            .collect();
        let mut opts = vec![match d.state {
            IndexState::Active => "ACTIVE".to_string(),
            IndexState::Building => "BUILDING".to_string(),
            IndexState::Dropping => "DROPPING".to_string(),
        }];
        if d.unique {
            opts.push("UNIQUE".into());
        }
        if d.sparse {
            opts.push("SPARSE".into());
        }
        if let Some(n) = d.salt_buckets {
            opts.push(format!("SALT_BUCKETS={n}"));
        }
        out.push_str(&format!(
            "{:<21}{:<21}[{}] / [{}] / {}\n",
            d.table,
            d.name,
            cols.join(", "),
            covered.join(", "),
            opts.join(" ")
        ));
    }
    out.push_str(&format!("{} index(es)\n", defs.len()));
    Ok(())
}

fn index_values(a: &Args<'_>, v: &Value, what: &str) -> Result<Vec<Option<Bytes>>, ShellError> {
    let one = |v: &Value| match v {
        Value::Nil => Ok(None),
        v => as_string(v)
            .map(|s| Some(Bytes::from(to_bytes_binary(&s))))
            .ok_or_else(|| a.usage(format!("{what} values are strings or nil"))),
    };
    match v {
        Value::Array(items) => items.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// `scan_index 't', 'name', 'value' | ['v1', 'v2'] | {EQ => [...] | PREFIX => [...] | FROM
/// => [...], TO => [...], LIMIT => n, REVERSED => true, ROWS => true}`.
pub(super) async fn scan_index<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(2, 3)?;
    let (table, name) = table_and_index(a)?;
    let (mut eq, mut lo, mut hi) = (None, None, None);
    let (mut limit, mut reverse, mut rows) = (None, false, false);
    match a.vals.get(2) {
        None => {}
        Some(Value::Hash(pairs)) => {
            for (k, v) in pairs {
                let key = key_name(k).unwrap_or_default();
                match key.as_str() {
                    "EQ" | "PREFIX" => eq = Some(index_values(a, v, &key)?),
                    "FROM" => lo = Some(index_values(a, v, &key)?),
                    "TO" => hi = Some(index_values(a, v, &key)?),
                    "LIMIT" => match as_int(v) {
                        Some(n) if n >= 1 => limit = Some(n as usize),
                        _ => return Err(a.usage("LIMIT must be a positive integer")),
                    },
                    "REVERSED" => {
                        reverse = as_bool(v).ok_or_else(|| a.usage("REVERSED is true or false"))?
                    }
                    "ROWS" => rows = as_bool(v).ok_or_else(|| a.usage("ROWS is true or false"))?,
                    _ => return Err(a.usage(format!("unknown option {k}"))),
                }
            }
        }
        Some(v) => eq = Some(index_values(a, v, "EQ")?),
    }
    if eq.is_some() && (lo.is_some() || hi.is_some()) {
        return Err(a.usage("give EQ/PREFIX or FROM/TO, not both"));
    }
    let mut q = match eq {
        Some(vals) => Query::eq(vals),
        None => Query::range(lo, hi),
    };
    if reverse {
        q = q.reverse();
    }
    if let Some(n) = limit {
        q = q.limit(n);
    }
    let index = admin(dir).index(table, &name).await?;
    if rows {
        let found = index.rows(&q).await?;
        out.push_str(&format!("{:<35}{}\n", "ROW", "COLUMN+CELL"));
        for r in &found {
            print_row(r, out);
        }
        out.push_str(&format!("{} row(s)\n", found.len()));
        return Ok(());
    }
    let hits = index.hits(&q).await?;
    out.push_str(&format!("{:<35}{}\n", "ROW", "INDEXED VALUES / INCLUDED"));
    for h in &hits {
        let vals: Vec<String> = h
            .values
            .iter()
            .map(|v| {
                v.as_ref()
                    .map_or("nil".to_string(), |b| to_string_binary(b))
            })
            .collect();
        let covered: Vec<String> = h
            .covered
            .iter()
            .map(|((f, q), v)| format!("{}={}", col_text(f, q), to_string_binary(v)))
            .collect();
        let mut line = format!(
            " {:<34}values=[{}]",
            to_string_binary(&h.row),
            vals.join(", ")
        );
        if !covered.is_empty() {
            line.push_str(&format!(", {}", covered.join(", ")));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&format!("{} row(s)\n", hits.len()));
    Ok(())
}

/// `verify_index 't', 'name' [, {REPAIR => true}]`.
pub(super) async fn verify_index<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    stop: &AtomicBool,
    bg: &background::Background,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(2, 3)?;
    let (table, name) = table_and_index(a)?;
    let mut repair = false;
    if let Some(v) = a.vals.get(2) {
        let Value::Hash(pairs) = v else {
            return Err(a.usage(format!("the options are a hash, not {}", v.kind())));
        };
        for (k, v) in pairs {
            match key_name(k).as_deref() {
                Some("REPAIR") => {
                    repair = as_bool(v).ok_or_else(|| a.usage("REPAIR is true or false"))?
                }
                _ => return Err(a.usage(format!("unknown option {k}"))),
            }
        }
    }
    let bar = progress::counter(&format!("verifying index {name}: rows read"));
    let shown = bar.clone();
    let tick = move |n: u64| shown.set_position(n);
    let admin = admin(dir);
    let index = name.clone();
    let task = tokio::spawn(async move {
        if repair {
            admin.repair_with_progress(table, &index, tick).await
        } else {
            admin.verify_with_progress(table, &index, tick).await
        }
    });
    // A verification only reads: stopping it halfway changes nothing. A repair writes, so
    // it goes on to its end.
    let on_interrupt = if repair {
        OnInterrupt::Continue
    } else {
        OnInterrupt::Abort
    };
    let waited = background::wait(task, stop, on_interrupt, bg).await;
    bar.finish_and_clear();
    let report = match waited? {
        Waited::Done(report) => report,
        Waited::Interrupted => {
            return Err(ShellError::Interrupted(format!(
                "{} rows read: {}",
                bar.position(),
                if repair {
                    "the repair goes on in the background"
                } else {
                    "the verification stopped"
                }
            )))
        }
    };
    out.push_str(&format!(
        "data rows: {}, index rows: {}, missing: {}, extra: {}, stale: {}\n",
        report.data_rows,
        report.index_rows,
        report.missing.len(),
        report.extra.len(),
        report.stale.len()
    ));
    for (what, rows) in [
        ("missing", &report.missing),
        ("extra", &report.extra),
        ("stale", &report.stale),
    ] {
        for r in rows.iter().take(10) {
            out.push_str(&format!(" {what}: {}\n", to_string_binary(r)));
        }
    }
    out.push_str(match (report.is_consistent(), repair) {
        (true, _) => "Index is consistent\n",
        (false, true) => "Index repaired (the counts above are what was found before)\n",
        (false, false) => {
            "Index differs from its data: verify_index with {REPAIR => true} mends it\n"
        }
    });
    Ok(())
}
