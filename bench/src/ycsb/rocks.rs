//! The ycsb suite on RocksDB (the `rocksdb` crate, behind this crate's `rocksdb` feature):
//! one database, a record is one key whose value holds the 10 fields, encoded as fjall's.
//!
//! Settings: RocksDB's default options, plus a 10 bits/key bloom filter (full filter) and a
//! block cache of the suite's cache size (LRU). Writes use the default `WriteOptions`: the
//! WAL is written per write without fsync (`sync=false`), i.e. handed to the OS, as Basalt's
//! `SyncWal` and fjall's buffered journal persist. An update of one field is a read-modify-
//! write of the whole value, as on fjall.

use super::fjall::{check_value, row_value, updated_value};
use super::{Settings, Store};
use crate::workload::FIELDS;
use crate::BenchResult;
use rocksdb::{BlockBasedOptions, Cache, Direction, IteratorMode, Options, DB};

/// RocksDB as a [`Store`].
pub struct RocksStore {
    db: DB,
}

impl Store for RocksStore {
    fn insert(&self, key: &[u8], fields: &[&[u8]; FIELDS]) -> BenchResult<()> {
        self.db.put(key, row_value(fields))?;
        Ok(())
    }

    fn read(&self, key: &[u8]) -> BenchResult<()> {
        let v = self.db.get_pinned(key)?;
        check_value("rocksdb", key, v.as_deref())
    }

    fn update(&self, key: &[u8], field: usize, value: &[u8]) -> BenchResult<()> {
        let old = self.db.get_pinned(key)?.ok_or_else(|| {
            format!(
                "rocksdb: update of missing row {}",
                String::from_utf8_lossy(key)
            )
        })?;
        let new = updated_value("rocksdb", key, &old, field, value)?;
        drop(old);
        self.db.put(key, new)?;
        Ok(())
    }

    fn scan(&self, start: &[u8], len: usize) -> BenchResult<u64> {
        let mut rows = 0;
        for item in self
            .db
            .iterator(IteratorMode::From(start, Direction::Forward))
            .take(len)
        {
            let (key, value) = item?;
            check_value("rocksdb scan", &key, Some(&*value))?;
            rows += 1;
        }
        Ok(rows)
    }
}

/// The suite's RocksDB options.
fn options(cache_bytes: u64) -> BenchResult<Options> {
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_block_cache(&Cache::new_lru_cache(usize::try_from(cache_bytes)?));
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_block_based_table_factory(&table);
    Ok(opts)
}

/// Runs the load and every workload on RocksDB in a fresh temporary directory.
pub fn run(s: &Settings) -> BenchResult<Vec<super::Measured>> {
    let tmp = super::temp_dir(s, "rocksdb")?;
    let db = DB::open(&options(s.core.cache_bytes)?, tmp.path())?;
    let store = RocksStore { db };
    let out = super::run_engine("rocksdb", &store, s);
    drop(store);
    out
}
