//! The block cache: decoded data blocks shared by every store-file reader of an engine.
//!
//! Keys are `(file id, block offset)`; file ids are unique engine-wide and never reused, so a
//! stale entry of a deleted file can never be returned for another file (it just ages out).
//! Values are decoded blocks behind an `Arc`, weighed by the bytes they hold, so the capacity
//! is a byte budget. Eviction is quick_cache's (CLOCK-Pro-like, scan resistant).

use super::data::DataBlock;
use crate::error::Result;
use quick_cache::sync::Cache;
use quick_cache::Weighter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A guess at the average weight of a block, used to size the cache's tables.
const TYPICAL_BLOCK_WEIGHT: u64 = 32 * 1024;

#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl Weighter<(u64, u64), Arc<DataBlock>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<DataBlock>) -> u64 {
        block.weight().max(1)
    }
}

/// A shared, byte-bounded cache of decoded data blocks.
pub struct BlockCache {
    cache: Cache<(u64, u64), Arc<DataBlock>, BlockWeighter>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most about `capacity_bytes` bytes of decoded blocks.
    pub fn new(capacity_bytes: u64) -> Self {
        let items = (capacity_bytes / TYPICAL_BLOCK_WEIGHT).clamp(16, 1 << 22) as usize;
        BlockCache {
            cache: Cache::with_weighter(items, capacity_bytes.max(1), BlockWeighter),
            capacity: capacity_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// How many block lookups found their block in the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// How many block lookups had to read the block from its file.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// The bytes of decoded blocks currently held.
    pub fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// The configured capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Returns the block at `(file_id, offset)`, calling `load` on a miss. Concurrent misses
    /// of one block load it once: the others wait and count a hit. A failed load caches
    /// nothing.
    pub(crate) fn get_or_load(
        &self,
        file_id: u64,
        offset: u64,
        load: impl FnOnce() -> Result<Arc<DataBlock>>,
    ) -> Result<Arc<DataBlock>> {
        let mut loaded = false;
        let block = self.cache.get_or_insert_with(&(file_id, offset), || {
            loaded = true;
            load()
        });
        let counter = if loaded { &self.misses } else { &self.hits };
        counter.fetch_add(1, Ordering::Relaxed);
        block
    }
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("used", &self.used_bytes())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}
