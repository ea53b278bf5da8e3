//! The ycsb suite on fjall 3: one keyspace, a record is one key whose value holds the 10
//! fields in the core suite's encoding ([`crate::workload::encode_fields`]).
//!
//! As in the core suite, the keyspace keeps `manual_journal_persist(false)`, so every insert
//! persists the journal to the OS buffer before it returns (Basalt's `SyncWal`). A key-value
//! store holds a row as one value, so an update of one field is a read-modify-write of the
//! whole value (get, replace the field, insert); it is not atomic against a concurrent update
//! of the same record (YCSB's own key-value bindings do the same or write all fields). The
//! helpers [`row_value`], [`updated_value`] and [`check_value`] are shared with RocksDB.

use super::{check_fields, Settings, Store};
use crate::workload::{decode_row, encode_fields, FIELDS, FIELD_NAMES};
use crate::BenchResult;
use fjall::{Database, Keyspace, KeyspaceCreateOptions};

/// The keyspace's name.
const KEYSPACE: &str = "usertable";

/// A record's fields as one value.
pub fn row_value(fields: &[&[u8]; FIELDS]) -> Vec<u8> {
    encode_fields(
        FIELD_NAMES
            .iter()
            .map(|n| n.as_bytes())
            .zip(fields.iter().copied()),
    )
}

/// `old` with field `field` replaced by `value`; an error if `old` is not a full row.
pub fn updated_value(
    what: &str,
    key: &[u8],
    old: &[u8],
    field: usize,
    value: &[u8],
) -> BenchResult<Vec<u8>> {
    let mut fields = decode_row(old).ok_or_else(|| format!("{what}: malformed row"))?;
    check_fields(what, key, fields.iter().map(|f| f.1.len()))?;
    fields[field].1 = value;
    Ok(encode_fields(fields))
}

/// An error unless `value` (if any) holds a full row.
pub fn check_value(what: &str, key: &[u8], value: Option<&[u8]>) -> BenchResult<()> {
    let fields = match value {
        Some(v) => decode_row(v).ok_or_else(|| format!("{what}: malformed row"))?,
        None => Vec::new(),
    };
    check_fields(what, key, fields.iter().map(|f| f.1.len()))
}

/// fjall as a [`Store`].
pub struct FjallStore {
    /// The keyspace every record is in.
    pub(crate) ks: Keyspace,
}

/// Opens (or creates) fjall in `dir` with a block cache of `cache_bytes` and the suite's
/// keyspace (created with the journal persisted on every insert, or reopened as it is).
pub(crate) fn open(dir: &std::path::Path, cache_bytes: u64) -> BenchResult<(Database, FjallStore)> {
    let db = Database::builder(dir).cache_size(cache_bytes).open()?;
    let ks = db.keyspace(KEYSPACE, || {
        KeyspaceCreateOptions::default().manual_journal_persist(false)
    })?;
    Ok((db, FjallStore { ks }))
}

impl Store for FjallStore {
    fn insert(&self, key: &[u8], fields: &[&[u8]; FIELDS]) -> BenchResult<()> {
        self.ks.insert(key, row_value(fields))?;
        Ok(())
    }

    fn read(&self, key: &[u8]) -> BenchResult<()> {
        let v = self.ks.get(key)?;
        check_value("fjall", key, v.as_deref())
    }

    fn update(&self, key: &[u8], field: usize, value: &[u8]) -> BenchResult<()> {
        let old = self.ks.get(key)?;
        let old = old.ok_or_else(|| {
            format!(
                "fjall: update of missing row {}",
                String::from_utf8_lossy(key)
            )
        })?;
        let new = updated_value("fjall", key, &old, field, value)?;
        self.ks.insert(key, new)?;
        Ok(())
    }

    fn scan(&self, start: &[u8], len: usize) -> BenchResult<u64> {
        let mut rows = 0;
        for guard in self.ks.range::<&[u8], _>(start..).take(len) {
            let (key, value) = guard.into_inner()?;
            check_value("fjall scan", &key, Some(&*value))?;
            rows += 1;
        }
        Ok(rows)
    }
}

/// Runs the load and every workload on fjall in a fresh temporary directory.
pub fn run(s: &Settings) -> BenchResult<Vec<super::Measured>> {
    let tmp = super::temp_dir(s, "fjall")?;
    let (db, store) = open(tmp.path(), s.core.cache_bytes)?;
    let out = super::run_engine("fjall", &store, s);
    drop(store);
    drop(db);
    out
}
