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

use super::Engine;
use crate::error::Result;
use crate::fs::FileSystem;
use crate::schema::TableName;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Verification and repair of what a coprocessor library derives from a table (an
/// index's rows, an observer's counters), run by `Connection::open_with` before it returns
/// when the directory's derived data may disagree with its tables: after an open that
/// salvaged a damaged WAL ([`crate::wal::WalRecoveryMode::Salvage`]), or after the offline
/// repair set store files aside. The configured [`super::HooksLoader`]
/// supplies them ([`super::HooksLoader::recovery_repairs`]);
/// `basalt::index::register` registers the indexes' one. A repair that needs the client API
/// opens `Connection::from_engine` on the engine it is given.
#[async_trait::async_trait]
pub trait RecoveryRepair: Send + Sync + std::fmt::Debug {
    /// Verifies and repairs what this library derives from `table`, returning one outcome
    /// per derived structure (none when it derives nothing from it). An error fails the
    /// open; the directory keeps the table recorded for the next one.
    async fn repair(
        &self,
        engine: &Arc<Engine>,
        table: &TableName,
    ) -> Result<Vec<RecoveryRepairOutcome>>;
}

/// What one recovery repair found in one derived structure of a table (see
/// [`super::recovery::RecoveryReport::repairs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryRepairOutcome {
    /// The data table.
    pub table: TableName,
    /// What was verified, as its library names it (`index by_user`).
    pub what: String,
    /// Differences found between the table and what derives from it, all repaired.
    pub differences: usize,
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
