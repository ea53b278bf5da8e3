//! The block cache: decoded data blocks shared by every store-file reader of an engine.
//!
//! Keys are `(file id, block offset)`; file ids are unique engine-wide and never reused, so a
//! stale entry of a deleted file can never be returned for another file (it just ages out).
//! Values are decoded blocks behind an `Arc`, weighed by the bytes they hold, so the capacity
//! is a byte budget. Eviction is quick_cache's (CLOCK-Pro-like, scan resistant).
//!
//! As HBase's LRU block cache reserves a quarter of its space for IN_MEMORY families, the
//! cache has two partitions: blocks of in-memory families go to their own quarter, where
//! blocks of other families can never evict them. The quarter is reserved only once an
//! in-memory family reads its first block; until then the other families use all of the
//! capacity. The two partitions together never hold more than the capacity. A read may also bypass the cache (a family
//! with BLOCKCACHE off, a scan with `cache_blocks(false)`, a compaction): it uses a cached
//! block if there is one but inserts nothing.

use super::data::DataBlock;
use crate::error::Result;
use quick_cache::sync::Cache;
use quick_cache::Weighter;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// How a read uses the block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// Look in the cache; on a miss, read the block and cache it.
    #[default]
    Normal,
    /// As `Normal`, in the in-memory partition (an IN_MEMORY family).
    InMemory,
    /// Look in the cache; on a miss, read the block and do not cache it.
    Bypass,
}

/// Keys of the cache: `(file id, block offset)`.
type BlockCacheMap = Cache<(u64, u64), Arc<DataBlock>, BlockWeighter>;

/// A shared, byte-bounded cache of decoded data blocks.
pub struct BlockCache {
    cache: BlockCacheMap,
    in_memory: BlockCacheMap,
    /// Set once an in-memory family read a block: from then on its quarter is reserved.
    in_memory_reserved: AtomicBool,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most about `capacity_bytes` bytes of decoded blocks.
    pub fn new(capacity_bytes: u64) -> Self {
        let part = |bytes: u64| {
            let items = (bytes / TYPICAL_BLOCK_WEIGHT).clamp(16, 1 << 22) as usize;
            Cache::with_weighter(items, bytes.max(1), BlockWeighter)
        };
        // Until an in-memory family reads a block, every byte serves the other families.
        BlockCache {
            cache: part(capacity_bytes),
            in_memory: part(capacity_bytes / 4),
            in_memory_reserved: AtomicBool::new(false),
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
        self.cache.weight() + self.in_memory.weight()
    }

    /// The bytes of decoded blocks of in-memory families currently held.
    pub fn in_memory_bytes(&self) -> u64 {
        self.in_memory.weight()
    }

    /// The configured capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Returns the block at `(file_id, offset)`, calling `load` on a miss and caching the
    /// result as `mode` says. Concurrent misses of one block cached this way load it once:
    /// the others wait and count a hit. A failed load caches nothing.
    pub(crate) fn get_or_load(
        &self,
        file_id: u64,
        offset: u64,
        mode: CacheMode,
        load: impl FnOnce() -> Result<Arc<DataBlock>>,
    ) -> Result<Arc<DataBlock>> {
        let key = (file_id, offset);
        let part = match mode {
            CacheMode::InMemory => {
                if !self.in_memory_reserved.swap(true, Ordering::Relaxed) {
                    // The other families give up the in-memory quarter (evicting as needed).
                    self.cache.set_capacity(self.capacity - self.capacity / 4);
                }
                &self.in_memory
            }
            CacheMode::Normal => &self.cache,
            CacheMode::Bypass => {
                let cached = self.cache.get(&key).or_else(|| self.in_memory.get(&key));
                let counter = if cached.is_some() {
                    &self.hits
                } else {
                    &self.misses
                };
                counter.fetch_add(1, Ordering::Relaxed);
                return cached.map_or_else(load, Ok);
            }
        };
        let mut loaded = false;
        let block = part.get_or_insert_with(&key, || {
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
            .field("in_memory", &self.in_memory_bytes())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}
