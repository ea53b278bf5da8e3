//! The data directory's record of tables whose derived data (indexes, rows an observer
//! keeps) must be verified and repaired before it is trusted: written by an open that
//! salvaged a damaged WAL and by the offline repair, before either changes anything, and
//! cleared once a connection's recovery repairs ran (`Connection::open_with`).
//!
//! Invariant: from the moment a salvage or a repair may have separated a data row from
//! what derives from it until the repairs have run, the file exists and names the tables,
//! so a crash in between, or an open that is not a `Connection`, never forgets them.
//!
//! Format of `<dir>/VERIFY-PENDING`, text: the line `basalt verify-pending 1`, then one
//! table name (`ns:name`) per line, then `crc32 <8 hex digits>`, the crc32 (IEEE) of every
//! byte before that line. It is replaced whole (temporary file, fsync, rename, directory
//! fsync). A file that does not parse or whose checksum differs names every table with
//! coprocessors.

use crate::error::Result;
use crate::fs::FileSystem;
use crate::schema::TableName;
use std::path::{Path, PathBuf};

const NAME: &str = "VERIFY-PENDING";
const HEADER: &str = "basalt verify-pending 1\n";

/// What the directory's record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pending {
    /// No file: nothing to verify.
    Nothing,
    /// These tables.
    Tables(Vec<TableName>),
    /// The file is damaged: every table with coprocessors.
    Unreadable,
}

fn path(dir: &Path) -> PathBuf {
    dir.join(NAME)
}

/// Reads the record.
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Pending> {
    let p = path(dir);
    if !fs.exists(&p)? {
        return Ok(Pending::Nothing);
    }
    Ok(decode(&fs.read(&p)?).map_or(Pending::Unreadable, Pending::Tables))
}

/// Adds `tables` to the record (durably, before returning).
pub(crate) fn add(fs: &dyn FileSystem, dir: &Path, tables: &[TableName]) -> Result<()> {
    if tables.is_empty() {
        return Ok(());
    }
    let mut all = match read(fs, dir)? {
        Pending::Tables(t) => t,
        // A damaged record names every table with coprocessors; `tables` is all of them.
        Pending::Nothing | Pending::Unreadable => Vec::new(),
    };
    all.extend(tables.iter().cloned());
    replace(fs, dir, all)
}

/// Makes the record name exactly `tables` (none: removes it), durably.
pub(crate) fn replace(fs: &dyn FileSystem, dir: &Path, mut tables: Vec<TableName>) -> Result<()> {
    let p = path(dir);
    if tables.is_empty() {
        if fs.exists(&p)? {
            fs.remove_file(&p)?;
            fs.sync_dir(dir)?;
        }
        return Ok(());
    }
    tables.sort_by_key(|t| t.to_string());
    tables.dedup();
    let tmp = dir.join(format!("{NAME}.tmp"));
    let f = fs.create(&tmp)?;
    f.write_all(&encode(&tables))?;
    f.sync_all()?;
    drop(f);
    fs.rename(&tmp, &p)?;
    fs.sync_dir(dir)?;
    Ok(())
}

fn encode(tables: &[TableName]) -> Vec<u8> {
    let mut body = HEADER.to_string();
    for t in tables {
        body.push_str(&t.to_string());
        body.push('\n');
    }
    let crc = crc32fast::hash(body.as_bytes());
    body.push_str(&format!("crc32 {crc:08x}\n"));
    body.into_bytes()
}

fn decode(bytes: &[u8]) -> Option<Vec<TableName>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let body = text.strip_suffix('\n')?;
    let (body, crc_line) = body.rsplit_once('\n')?;
    let body = format!("{body}\n");
    let crc = u32::from_str_radix(crc_line.strip_prefix("crc32 ")?, 16).ok()?;
    if crc != crc32fast::hash(body.as_bytes()) {
        return None;
    }
    body.strip_prefix(HEADER)?
        .lines()
        .map(|l| TableName::parse(l).ok())
        .collect()
}

/// The tables with coprocessors (the ones with derived data).
pub(crate) fn with_coprocessors(state: &crate::catalog::CatalogState) -> Vec<TableName> {
    state
        .tables
        .values()
        .filter(|t| !t.descriptor.coprocessors.is_empty())
        .map(|t| t.descriptor.name.clone())
        .collect()
}

/// The tables the directory's record names that still exist (a damaged record: every table
/// with coprocessors).
pub(crate) fn pending_tables(
    fs: &dyn crate::fs::FileSystem,
    dir: &std::path::Path,
    state: &crate::catalog::CatalogState,
) -> Result<Vec<TableName>> {
    Ok(match read(fs, dir)? {
        Pending::Nothing => Vec::new(),
        Pending::Unreadable => with_coprocessors(state),
        Pending::Tables(t) => t
            .into_iter()
            .filter(|t| state.tables.contains_key(&t.to_string()))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn names(n: &[&str]) -> Vec<TableName> {
        n.iter().map(|s| TableName::parse(s).unwrap()).collect()
    }

    #[test]
    fn add_read_replace() {
        let dir = tempfile::tempdir().unwrap();
        let fs = crate::fs::StdFs::shared();
        assert_eq!(read(&*fs, dir.path()).unwrap(), Pending::Nothing);
        add(&*fs, dir.path(), &names(&["b", "ns:a"])).unwrap();
        add(&*fs, dir.path(), &names(&["b", "c"])).unwrap();
        assert_eq!(
            read(&*fs, dir.path()).unwrap(),
            Pending::Tables(names(&["b", "c", "ns:a"]))
        );
        replace(&*fs, dir.path(), names(&["c"])).unwrap();
        assert_eq!(
            read(&*fs, dir.path()).unwrap(),
            Pending::Tables(names(&["c"]))
        );
        replace(&*fs, dir.path(), Vec::new()).unwrap();
        assert_eq!(read(&*fs, dir.path()).unwrap(), Pending::Nothing);
        replace(&*fs, dir.path(), Vec::new()).unwrap();
        // A damaged record reads as unreadable; adding to it keeps only what is added.
        std::fs::write(dir.path().join(NAME), b"basalt verify-pending 1\nx").unwrap();
        assert_eq!(read(&*fs, dir.path()).unwrap(), Pending::Unreadable);
        add(&*fs, dir.path(), &names(&["d"])).unwrap();
        assert_eq!(
            read(&*fs, dir.path()).unwrap(),
            Pending::Tables(names(&["d"]))
        );
    }

    #[test]
    fn every_flipped_byte_or_cut_is_unreadable() {
        let good = encode(&names(&["orders", "shop:items"]));
        assert_eq!(decode(&good), Some(names(&["orders", "shop:items"])));
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x04;
            assert_eq!(decode(&bad), None, "flip at {i}");
            assert_eq!(decode(&good[..i]), None, "cut at {i}");
        }
    }

    proptest! {
        #[test]
        fn round_trips(tables in proptest::collection::vec("[a-z][a-z0-9_]{0,8}(:[a-z][a-z0-9_]{0,8})?", 0..6)) {
            let t: Vec<TableName> = tables.iter().map(|s| TableName::parse(s).unwrap()).collect();
            prop_assert_eq!(decode(&encode(&t)), Some(t));
        }
    }
}
