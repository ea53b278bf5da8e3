//! Column families: [`ColumnFamilyDescriptor`] and the settings it holds (bloom filter,
//! compression, what happens to deleted cells), and the family-name rule.
//!
//! Invariants kept: a descriptor that passes [`ColumnFamilyDescriptor::validate`] has a legal
//! name ([`validate_family_name`]) and consistent version, TTL and block settings; the
//! settings are plain serde data whose encoding the catalog's format versions rely on (see
//! [`KeepDeletedCells`]).

use crate::error::{Error, Result};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Bloom filter kind of a column family (used by store files from the compaction issue on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum BloomType {
    /// No bloom filter.
    None,
    /// A filter on row keys (HBase's default).
    #[default]
    Row,
    /// A filter on row + column.
    RowCol,
}

/// Block compression of a column family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Compression {
    /// Blocks are stored as they are.
    #[default]
    None,
    /// LZ4 block compression.
    Lz4,
    /// Zstandard.
    Zstd,
    /// Snappy.
    Snappy,
}

/// What a family does with deleted cells (HBase's `KeepDeletedCells`).
///
/// Encoded in the catalog as postcard's enum discriminant: 0 and 1 are the bytes the
/// `bool` of catalog versions up to 6 had, so those read unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum KeepDeletedCells {
    /// A delete marker masks every put it covers from every read; a major compaction
    /// removes both.
    #[default]
    False,
    /// A read whose time range ends at or before a marker's timestamp still sees the puts
    /// it masks; major compactions keep markers and masked puts (until the version limits
    /// remove the puts).
    True,
    /// As `True` while the marker is younger than the family's TTL, as `False` once it is
    /// older: deleted cells stay for point-in-time reads until the TTL, then go (a family
    /// without a TTL behaves as `True`).
    Ttl,
}

impl From<bool> for KeepDeletedCells {
    fn from(keep: bool) -> Self {
        if keep {
            KeepDeletedCells::True
        } else {
            KeepDeletedCells::False
        }
    }
}

impl KeepDeletedCells {
    /// Whether a marker at `ts` keeps what it masks, for a family whose cells older than
    /// `expire_before` have expired (0 when it has no TTL).
    pub fn keeps(self, ts: crate::cell::Timestamp, expire_before: u64) -> bool {
        match self {
            KeepDeletedCells::False => false,
            KeepDeletedCells::True => true,
            KeepDeletedCells::Ttl => ts >= expire_before,
        }
    }
}

/// Settings of one column family.
///
/// ```
/// use basalt_core::ColumnFamilyDescriptor;
/// let cf = ColumnFamilyDescriptor::new("f").max_versions(3).ttl_secs(86_400);
/// assert_eq!(cf.max_versions, 3);
/// assert!(cf.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnFamilyDescriptor {
    /// The family name (printable, no `:`; short names are cheaper, as seed 003 says).
    pub name: Bytes,
    /// Versions kept per column (default 1).
    pub max_versions: u32,
    /// Versions kept even when older than the TTL (default 0).
    pub min_versions: u32,
    /// Time to live of a cell in seconds; `None` keeps cells forever.
    pub ttl_secs: Option<u64>,
    /// Whether deleted cells stay visible to time-range reads that end before the delete
    /// (and are kept by major compactions): HBase's `KEEP_DELETED_CELLS`.
    pub keep_deleted_cells: KeepDeletedCells,
    /// Bloom filter kind.
    pub bloom: BloomType,
    /// Target size of a store-file data block in bytes (default 64 KiB).
    pub block_size: u32,
    /// Block compression of the files flushes write.
    pub compression: Compression,
    /// Block compression of the files compactions write (HBase's `COMPRESSION_COMPACT`);
    /// `None` uses [`Self::compression`]. A fast or no codec on flush and a tighter one on
    /// compaction keeps the write path light while the files that stay are compressed, as
    /// LSM stores that compress only their lower levels do. Added in catalog format
    /// version 5.
    pub compaction_compression: Option<Compression>,
    /// Cache this family's blocks in the block cache.
    pub block_cache: bool,
    /// Give this family's blocks in-memory priority in the block cache.
    pub in_memory: bool,
}

impl ColumnFamilyDescriptor {
    /// A family with HBase 2's defaults.
    pub fn new(name: impl AsRef<[u8]>) -> Self {
        ColumnFamilyDescriptor {
            name: Bytes::copy_from_slice(name.as_ref()),
            max_versions: 1,
            min_versions: 0,
            ttl_secs: None,
            keep_deleted_cells: KeepDeletedCells::False,
            bloom: BloomType::Row,
            block_size: 64 * 1024,
            compression: Compression::None,
            compaction_compression: None,
            block_cache: true,
            in_memory: false,
        }
    }

    /// Sets max versions.
    pub fn max_versions(mut self, v: u32) -> Self {
        self.max_versions = v;
        self
    }
    /// Sets min versions.
    pub fn min_versions(mut self, v: u32) -> Self {
        self.min_versions = v;
        self
    }
    /// Sets the TTL in seconds.
    pub fn ttl_secs(mut self, secs: u64) -> Self {
        self.ttl_secs = Some(secs);
        self
    }
    /// Sets keep-deleted-cells: `true`, `false` or a [`KeepDeletedCells`] mode.
    ///
    /// ```
    /// use basalt_core::{ColumnFamilyDescriptor, KeepDeletedCells};
    /// let cf = ColumnFamilyDescriptor::new("f").ttl_secs(3600).keep_deleted_cells(KeepDeletedCells::Ttl);
    /// assert_eq!(ColumnFamilyDescriptor::new("g").keep_deleted_cells(true).keep_deleted_cells, KeepDeletedCells::True);
    /// ```
    pub fn keep_deleted_cells(mut self, v: impl Into<KeepDeletedCells>) -> Self {
        self.keep_deleted_cells = v.into();
        self
    }
    /// Sets the bloom filter kind.
    pub fn bloom(mut self, v: BloomType) -> Self {
        self.bloom = v;
        self
    }
    /// Sets the block size in bytes (HBase's `BLOCKSIZE`; default 64 KiB, HBase's). The
    /// block is what a block-cache miss reads, checks and decodes whole, and what the index
    /// has one entry for: large blocks suit families that are scanned, small ones families
    /// read at random. For random point reads choose 8 KiB: in the bench's `opcost` suite a
    /// miss costs 14.4k instructions at 16 KiB, 8.5k at 8 KiB and 5.7k at 4 KiB, while 4 KiB
    /// doubles the index kept in memory (`docs/BENCHMARKS.md`, issue 43).
    pub fn block_size(mut self, v: u32) -> Self {
        self.block_size = v;
        self
    }
    /// Sets the compression.
    pub fn compression(mut self, v: Compression) -> Self {
        self.compression = v;
        self
    }
    /// Sets the compression compactions write with (HBase's `COMPRESSION_COMPACT`).
    ///
    /// ```
    /// use basalt_core::{ColumnFamilyDescriptor, Compression};
    /// let cf = ColumnFamilyDescriptor::new("f")
    ///     .compression(Compression::None)
    ///     .compaction_compression(Compression::Lz4);
    /// assert_eq!(cf.compression_for_compaction(), Compression::Lz4);
    /// let g = ColumnFamilyDescriptor::new("g").compression(Compression::Zstd);
    /// assert_eq!(g.compression_for_compaction(), Compression::Zstd);
    /// ```
    pub fn compaction_compression(mut self, v: Compression) -> Self {
        self.compaction_compression = Some(v);
        self
    }
    /// The compression compactions write with.
    pub fn compression_for_compaction(&self) -> Compression {
        self.compaction_compression.unwrap_or(self.compression)
    }
    /// Sets block-cache use.
    pub fn block_cache(mut self, v: bool) -> Self {
        self.block_cache = v;
        self
    }
    /// Sets in-memory priority.
    pub fn in_memory(mut self, v: bool) -> Self {
        self.in_memory = v;
        self
    }

    /// The reserved family of a table's region-local rows ([`crate::keys::local`]): one
    /// version, row blooms, otherwise the defaults. User reads and whole-row deletes skip
    /// it; a table gets it with its first local index.
    pub fn local_rows() -> Self {
        ColumnFamilyDescriptor::new(crate::keys::local::LOCAL_FAMILY)
    }

    /// True for the reserved family of region-local rows.
    pub fn is_local_rows(&self) -> bool {
        is_local_family(&self.name)
    }

    /// The family name as text (lossy), for messages.
    pub fn name_str(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// Checks the settings and returns a clear error for the first bad one.
    pub fn validate(&self) -> Result<()> {
        if !self.is_local_rows() {
            validate_family_name(&self.name)?;
        }
        let n = self.name_str();
        if self.max_versions == 0 {
            return Err(Error::bad_argument(format!(
                "family {n}: max versions must be at least 1"
            )));
        }
        if self.min_versions > self.max_versions {
            return Err(Error::bad_argument(format!(
                "family {n}: min versions ({}) exceeds max versions ({})",
                self.min_versions, self.max_versions
            )));
        }
        if self.ttl_secs == Some(0) {
            return Err(Error::bad_argument(format!(
                "family {n}: TTL must be at least one second"
            )));
        }
        if !(1024..=16 * 1024 * 1024).contains(&self.block_size) {
            return Err(Error::bad_argument(format!(
                "family {n}: block size {} is outside 1 KiB..=16 MiB",
                self.block_size
            )));
        }
        Ok(())
    }
}

/// True for the name of the reserved family of region-local rows
/// ([`crate::keys::local::LOCAL_FAMILY`]), which no user read or whole-row delete sees.
pub fn is_local_family(name: &[u8]) -> bool {
    name == crate::keys::local::LOCAL_FAMILY
}

/// Validates a column-family name: 1 to 255 printable ASCII bytes, no `:`, `/` or `\\`, no
/// leading `.`.
pub fn validate_family_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(Error::bad_argument(
            "column family name must be 1 to 255 bytes",
        ));
    }
    // As HBase's isLegalColumnFamilyName: no leading period (which also rules out . and ..).
    if name.starts_with(b".") {
        return Err(Error::bad_argument(
            "column family name must not start with '.'",
        ));
    }
    if let Some(b) = name
        .iter()
        .find(|b| !(b.is_ascii_graphic()) || **b == b':' || **b == b'/' || **b == b'\\')
    {
        return Err(Error::bad_argument(format!(
            "illegal byte 0x{b:02x} in column family name {:?}: printable ASCII without ':' or '/'",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(())
}
