//! Table snapshot commands as HBase's shell has them: `snapshot`, `list_snapshots`,
//! `describe_snapshot`, `clone_snapshot`, `restore_snapshot`, `delete_snapshot`.
//!
//! Invariants: `snapshot` of an indexed table includes its index tables unless
//! `{INDEXES => false}`; `clone_snapshot` of a snapshot holding index tables clones them
//! with the data table (through the index admin, which renames their definitions);
//! creation times print in UTC as HBase's shell prints them (`2026-11-29 10:40:00 UTC`).
//! Over a cluster every command works the same, through the servers.

use super::args::{as_bool, key_name, Args};
use super::binary::to_string_binary;
use super::ddl::{show_name, table_arg};
use super::ShellError;
use crate::datadir::DataDir;
use crate::offline::human_bytes;
use basalt_core::client::Backend;
use basalt_core::{SnapshotDescription, TableName};

/// `snapshot 't', 'name'`, `snapshot ['t1', 't2'], 'name'`, `{INDEXES => false}`.
pub(super) async fn snapshot<B: Backend>(
    data: &DataDir<B>,
    a: &Args<'_>,
) -> Result<(), ShellError> {
    a.count(2, 3)?;
    let tables: Vec<TableName> = match a.vals.first() {
        Some(super::parse::Value::Array(items)) => items
            .iter()
            .map(|v| match super::args::as_string(v) {
                Some(s) => Ok(TableName::parse(&s)?),
                None => Err(a.usage("the tables are strings")),
            })
            .collect::<Result<_, ShellError>>()?,
        _ => vec![table_arg(a, 0)?],
    };
    let name = a.string(1, "the snapshot name")?;
    let mut companions = true;
    if let Some(v) = a.vals.get(2) {
        let super::parse::Value::Hash(pairs) = v else {
            return Err(a.usage("the options are a hash such as {INDEXES => false}"));
        };
        for (k, v) in pairs {
            match (key_name(k).as_deref(), as_bool(v)) {
                (Some("INDEXES"), Some(b)) => companions = b,
                (Some("SKIP_FLUSH"), Some(false)) => {}
                (Some("SKIP_FLUSH"), Some(true)) => {
                    return Err(ShellError::Unsupported(
                        "SKIP_FLUSH => true: a Basalt snapshot always flushes what it holds of \
                         the MemStores, so that it is exactly its read point"
                            .into(),
                    ))
                }
                _ => return Err(a.usage("options are INDEXES => true|false, SKIP_FLUSH => false")),
            }
        }
    }
    data.conn
        .admin()
        .snapshot_tables(&name, tables, companions)
        .await?;
    Ok(())
}

/// `list_snapshots ['regex']`.
pub(super) async fn list_snapshots<B: Backend>(
    data: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(0, 1)?;
    let re = match a.vals.is_empty() {
        true => None,
        false => {
            let pat = a.string(0, "the pattern")?;
            Some(
                regex::Regex::new(&format!("^(?:{pat})$"))
                    .map_err(|e| a.usage(format!("bad regular expression: {e}")))?,
            )
        }
    };
    let list: Vec<SnapshotDescription> = data
        .conn
        .admin()
        .list_snapshots()
        .await?
        .into_iter()
        .filter(|s| re.as_ref().is_none_or(|r| r.is_match(&s.name)))
        .collect();
    out.push_str(&format!("{:<40} TABLE + CREATION TIME\n", "SNAPSHOT"));
    for s in &list {
        out.push_str(&format!(
            " {:<39} {} ({})\n",
            s.name,
            table_names(s),
            utc(s.created_ms)
        ));
    }
    out.push_str(&format!("{} row(s)\n", list.len()));
    Ok(())
}

/// `describe_snapshot 'name'`: tables, read point, regions, files and the space it holds.
pub(super) async fn describe_snapshot<B: Backend>(
    data: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(1, 1)?;
    let name = a.string(0, "the snapshot name")?;
    let s = data.conn.admin().describe_snapshot(&name).await?;
    let lines = [
        ("SNAPSHOT", s.name.clone()),
        ("TABLES", table_names(&s)),
        ("CREATION TIME", utc(s.created_ms)),
        ("READ POINT", s.read_point.to_string()),
        ("REGIONS", s.regions.to_string()),
        ("STOREFILES", s.files.to_string()),
        ("SIZE", human_bytes(s.size)),
        ("SHARED WITH TABLES", human_bytes(s.shared_size)),
        ("HELD ONLY BY SNAPSHOTS", human_bytes(s.own_size)),
    ];
    for (k, v) in lines {
        out.push_str(&format!("{k:<24}{v}\n"));
    }
    for d in &s.descriptors {
        let families: Vec<String> = d
            .families
            .iter()
            .map(|f| to_string_binary(&f.name))
            .collect();
        let coprocessors: Vec<&str> = d.coprocessors.iter().map(|c| c.name.as_str()).collect();
        out.push_str(&format!(
            "{:<24}{} FAMILIES [{}] COPROCESSORS [{}]\n",
            "TABLE",
            show_name(&d.name),
            families.join(", "),
            coprocessors.join(", ")
        ));
    }
    Ok(())
}

/// `clone_snapshot 'snap', 'new_table'`: an indexed table's snapshot is cloned with its
/// index tables, renamed for the new table.
pub(super) async fn clone_snapshot<B: Backend>(
    data: &DataDir<B>,
    a: &Args<'_>,
) -> Result<(), ShellError> {
    a.count(2, 2)?;
    let name = a.string(0, "the snapshot name")?;
    let table = table_arg(a, 1)?;
    let admin = data.conn.admin();
    if admin.describe_snapshot(&name).await?.tables.len() == 1 {
        admin.clone_snapshot(&name, table).await?;
    } else {
        data.index_admin().clone_snapshot(&name, table).await?;
    }
    Ok(())
}

/// `restore_snapshot 'snap'` (its tables disabled first) and `delete_snapshot 'snap'`.
pub(super) async fn restore_or_delete<B: Backend>(
    data: &DataDir<B>,
    a: &Args<'_>,
) -> Result<(), ShellError> {
    a.count(1, 1)?;
    let name = a.string(0, "the snapshot name")?;
    let admin = data.conn.admin();
    match a.cmd {
        "restore_snapshot" => {
            admin.restore_snapshot(&name).await?;
        }
        _ => admin.delete_snapshot(&name).await?,
    }
    Ok(())
}

/// A snapshot's tables as the shell shows names (`t`, `ns:t`), comma-separated.
fn table_names(s: &SnapshotDescription) -> String {
    s.descriptors
        .iter()
        .map(|d| show_name(&d.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ms` since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub(super) fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of day `days` after 1970-01-01 (eras of 400 years, each
/// 146,097 days, counted from March so that the leap day ends a year).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_prints_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_795_951_661_000), "2026-11-29 11:27:41 UTC");
        assert_eq!(utc(4_107_542_399_000), "2100-02-28 23:59:59 UTC");
    }
}
