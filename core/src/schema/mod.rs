//! Schema: namespaces, table names, column-family and table descriptors, pre-split keys.
//!
//! Every descriptor is validated before it reaches the catalog, so the engine only ever
//! holds legal names and settings. Descriptors are plain data (serde) so that the catalog
//! can persist them.

pub mod salt;
pub mod split;

use crate::error::{Error, Result};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The namespace tables live in when their name has no `ns:` prefix.
pub const DEFAULT_NAMESPACE: &str = "default";
/// The namespace reserved for Basalt's own tables.
pub const SYSTEM_NAMESPACE: &str = "basalt";

/// A table name: `namespace:qualifier`, or a bare qualifier in the `default` namespace.
///
/// Legal characters follow HBase: the namespace uses `[A-Za-z0-9_]`, the qualifier
/// `[A-Za-z0-9_.-]` and must not start with `.` or `-`.
///
/// ```
/// use basalt_core::TableName;
/// let t = TableName::parse("im:messages").unwrap();
/// assert_eq!(t.namespace(), "im");
/// assert_eq!(t.qualifier(), "messages");
/// assert_eq!(TableName::parse("users").unwrap().to_string(), "default:users");
/// assert!(TableName::parse("bad name").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TableName {
    namespace: String,
    qualifier: String,
}

impl TableName {
    /// Parses and validates `ns:name` or `name`.
    pub fn parse(s: &str) -> Result<Self> {
        let name = Self::split(s);
        name.validate()?;
        Ok(name)
    }

    /// `ns:name` or `name` split into its parts, not checked.
    fn split(s: &str) -> Self {
        let (namespace, qualifier) = s.split_once(':').unwrap_or((DEFAULT_NAMESPACE, s));
        TableName {
            namespace: namespace.to_string(),
            qualifier: qualifier.to_string(),
        }
    }

    /// Checks the name's parts (a [`TableDescriptor`] built from a string keeps a malformed
    /// name as given, and creating the table fails here).
    pub fn validate(&self) -> Result<()> {
        Self::new(&self.namespace, &self.qualifier).map(|_| ())
    }

    /// Builds and validates a name from its two parts.
    pub fn new(namespace: &str, qualifier: &str) -> Result<Self> {
        validate_namespace(namespace)?;
        if qualifier.is_empty() {
            return Err(Error::bad_argument("table qualifier must not be empty"));
        }
        if qualifier.len() > 255 {
            return Err(Error::bad_argument("table qualifier longer than 255 bytes"));
        }
        if qualifier.starts_with('.') || qualifier.starts_with('-') {
            return Err(Error::bad_argument(format!(
                "table qualifier {qualifier:?} must not start with '.' or '-'"
            )));
        }
        if let Some(c) = qualifier
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        {
            return Err(Error::bad_argument(format!(
                "illegal character {c:?} in table qualifier {qualifier:?}: use [A-Za-z0-9_.-]"
            )));
        }
        Ok(TableName {
            namespace: namespace.to_string(),
            qualifier: qualifier.to_string(),
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The qualifier (the name inside the namespace).
    pub fn qualifier(&self) -> &str {
        &self.qualifier
    }
}

/// What names a table everywhere a table is named (the admin, `Connection::table`, salted
/// tables, the index admin, the aggregation client, [`TableDescriptor::new`]): a
/// [`TableName`], owned or borrowed, or a string in the form `ns:name` or `name` (the
/// default namespace), checked when it is used.
///
/// ```
/// use basalt_core::{IntoTableName, TableDescriptor, TableName};
/// assert_eq!("orders".into_table_name().unwrap(), TableName::parse("default:orders").unwrap());
/// assert_eq!(TableDescriptor::new("shop:orders").name.to_string(), "shop:orders");
/// assert!("bad name".into_table_name().is_err());
/// assert!(TableDescriptor::new("bad name").validate().is_err());
/// ```
pub trait IntoTableName: Sized {
    /// The name as given, not checked.
    fn into_table_name_unchecked(self) -> TableName;

    /// The name, checked: [`Error::BadArgument`] for a malformed one.
    fn into_table_name(self) -> Result<TableName> {
        let name = self.into_table_name_unchecked();
        name.validate()?;
        Ok(name)
    }
}

impl IntoTableName for TableName {
    fn into_table_name_unchecked(self) -> TableName {
        self
    }
}

impl IntoTableName for &TableName {
    fn into_table_name_unchecked(self) -> TableName {
        self.clone()
    }
}

impl IntoTableName for &str {
    fn into_table_name_unchecked(self) -> TableName {
        TableName::split(self)
    }
}

impl IntoTableName for String {
    fn into_table_name_unchecked(self) -> TableName {
        TableName::split(&self)
    }
}

impl IntoTableName for &String {
    fn into_table_name_unchecked(self) -> TableName {
        TableName::split(self)
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.namespace, self.qualifier)
    }
}

impl std::str::FromStr for TableName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        TableName::parse(s)
    }
}

/// Validates a namespace name: `[A-Za-z0-9_]+`, at most 128 bytes.
pub fn validate_namespace(ns: &str) -> Result<()> {
    if ns.is_empty() || ns.len() > 128 {
        return Err(Error::bad_argument(format!(
            "namespace {ns:?} must be 1 to 128 characters"
        )));
    }
    if let Some(c) = ns
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        return Err(Error::bad_argument(format!(
            "illegal character {c:?} in namespace {ns:?}: use [A-Za-z0-9_]"
        )));
    }
    Ok(())
}

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
    /// Sets the block size in bytes.
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

    /// The family name as text (lossy), for messages.
    pub fn name_str(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// Checks the settings and returns a clear error for the first bad one.
    pub fn validate(&self) -> Result<()> {
        validate_family_name(&self.name)?;
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

/// A table: its name, column families and table-level settings.
///
/// ```
/// use basalt_core::{ColumnFamilyDescriptor, TableDescriptor, TableName};
/// let t = TableDescriptor::new(TableName::parse("sms").unwrap())
///     .family(ColumnFamilyDescriptor::new("d"));
/// assert!(t.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDescriptor {
    /// The table's name.
    pub name: TableName,
    /// Its column families, in the order declared.
    pub families: Vec<ColumnFamilyDescriptor>,
    /// MemStore size of one region that triggers a flush, in bytes; `None` uses the engine's.
    pub memstore_flush_size: Option<u64>,
    /// Compaction settings (appended in catalog format version 2).
    pub compaction: CompactionSettings,
    /// Coprocessors loaded on this table, in load order (appended in catalog format
    /// version 3). Chains run in priority order, ties in this order.
    pub coprocessors: Vec<CoprocessorDescriptor>,
    /// The salt of a salted table (appended in catalog format version 4): its rows are
    /// written as salt + logical key through [`crate::client::SaltedTable`], and the table
    /// is pre-split at the bucket boundaries, which no split or merge ever crosses.
    pub salt: Option<salt::SaltSpec>,
}

/// What a coprocessor's fault (a panic or a timeout in one of its hooks, or a bypass where
/// none is supported) does. An error a hook *returns* is not a fault but its answer, as an
/// `IOException` from an HBase coprocessor: it fails the operation with
/// [`Error::Coprocessor`] under every policy and never unloads the coprocessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum FailurePolicy {
    /// The operation fails with [`Error::Coprocessor`]; the coprocessor stays loaded and the
    /// engine keeps serving (the default).
    #[default]
    FailOperation,
    /// The coprocessor is unloaded (until the table's coprocessors change or the engine
    /// reopens) and the operation goes on without it.
    Unload,
}

/// One coprocessor of a table: its registered name, priority, arguments and failure
/// handling. Core only stores and persists this; the coprocessor framework
/// (`basalt-coprocessors`) resolves the name to code.
///
/// ```
/// use basalt_core::{CoprocessorDescriptor, FailurePolicy};
/// let cp = CoprocessorDescriptor::new("audit").priority(10).arg("table", "audit_log");
/// assert_eq!(cp.policy, FailurePolicy::FailOperation);
/// assert!(cp.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoprocessorDescriptor {
    /// The name it was registered under.
    pub name: String,
    /// Lower runs first (HBase: `PRIORITY_SYSTEM` 0 before `PRIORITY_USER`); default
    /// [`CoprocessorDescriptor::PRIORITY_USER`].
    pub priority: u32,
    /// String arguments handed to its factory.
    pub args: std::collections::BTreeMap<String, String>,
    /// What a failure of one of its hooks does.
    pub policy: FailurePolicy,
    /// The longest one hook call may run, in milliseconds; `None` uses the host's default.
    pub timeout_ms: Option<u64>,
}

impl CoprocessorDescriptor {
    /// HBase's `Coprocessor.PRIORITY_SYSTEM`.
    pub const PRIORITY_SYSTEM: u32 = 0;
    /// HBase's `Coprocessor.PRIORITY_USER`, the default.
    pub const PRIORITY_USER: u32 = 1 << 30;

    /// A coprocessor with the default priority, no arguments, the fail-the-operation policy
    /// and the host's default timeout.
    pub fn new(name: impl Into<String>) -> Self {
        CoprocessorDescriptor {
            name: name.into(),
            priority: Self::PRIORITY_USER,
            args: std::collections::BTreeMap::new(),
            policy: FailurePolicy::default(),
            timeout_ms: None,
        }
    }
    /// Sets the priority.
    pub fn priority(mut self, p: u32) -> Self {
        self.priority = p;
        self
    }
    /// Adds an argument.
    pub fn arg(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.args.insert(key.into(), value.into());
        self
    }
    /// Sets the failure policy.
    pub fn policy(mut self, p: FailurePolicy) -> Self {
        self.policy = p;
        self
    }
    /// Sets the timeout of one hook call.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }
    /// Checks the name (non-empty, at most 255 bytes) and the timeout (positive).
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() || self.name.len() > 255 {
            return Err(Error::bad_argument(
                "coprocessor name must be 1 to 255 bytes",
            ));
        }
        if self.timeout_ms == Some(0) {
            return Err(Error::bad_argument(format!(
                "coprocessor {}: timeout must be positive",
                self.name
            )));
        }
        Ok(())
    }
}

/// A table's compaction settings: HBase's `hbase.hstore.compaction.min`, `.max`, `.ratio`
/// and `hbase.hregion.majorcompaction`, per table.
///
/// ```
/// use basalt_core::CompactionSettings;
/// let c = CompactionSettings::default();
/// assert_eq!((c.min_files, c.max_files, c.ratio()), (3, 10, 1.2));
/// assert_eq!(c.major_interval_ms, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionSettings {
    /// Fewest files a minor compaction rewrites (default 3, at least 2).
    pub min_files: u32,
    /// Most files a minor compaction rewrites (default 10).
    pub max_files: u32,
    /// The size ratio in thousandths (default 1200, i.e. 1.2); kept as an integer so that
    /// descriptors compare exactly.
    pub ratio_permille: u32,
    /// Run a major compaction of every region this often, in milliseconds; `None` (the
    /// default) never runs one on a timer.
    pub major_interval_ms: Option<u64>,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            min_files: 3,
            max_files: 10,
            ratio_permille: 1200,
            major_interval_ms: None,
        }
    }
}

impl CompactionSettings {
    /// The size ratio.
    pub fn ratio(&self) -> f64 {
        f64::from(self.ratio_permille) / 1000.0
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.min_files < 2 {
            return Err(Error::bad_argument(
                "compaction min files must be at least 2",
            ));
        }
        if self.max_files < self.min_files {
            return Err(Error::bad_argument(format!(
                "compaction max files ({}) is below min files ({})",
                self.max_files, self.min_files
            )));
        }
        if self.ratio_permille == 0 {
            return Err(Error::bad_argument("compaction ratio must be positive"));
        }
        if self.major_interval_ms == Some(0) {
            return Err(Error::bad_argument(
                "major compaction interval must be positive",
            ));
        }
        Ok(())
    }
}

impl TableDescriptor {
    /// A table with no families yet, named by a [`TableName`] or a string (a malformed
    /// name fails [`TableDescriptor::validate`], so creating the table reports it).
    pub fn new(name: impl IntoTableName) -> Self {
        TableDescriptor {
            name: name.into_table_name_unchecked(),
            families: Vec::new(),
            memstore_flush_size: None,
            compaction: CompactionSettings::default(),
            coprocessors: Vec::new(),
            salt: None,
        }
    }

    /// Makes the table salted (see [`salt::SaltSpec`]).
    pub fn salt(mut self, spec: salt::SaltSpec) -> Self {
        self.salt = Some(spec);
        self
    }

    /// Adds a coprocessor (loaded after those already listed).
    pub fn coprocessor(mut self, cp: CoprocessorDescriptor) -> Self {
        self.coprocessors.push(cp);
        self
    }

    /// Sets the fewest and most files of a minor compaction.
    pub fn compaction_files(mut self, min: u32, max: u32) -> Self {
        self.compaction.min_files = min;
        self.compaction.max_files = max;
        self
    }

    /// Sets the minor compaction size ratio (rounded to thousandths).
    pub fn compaction_ratio(mut self, ratio: f64) -> Self {
        self.compaction.ratio_permille =
            (ratio * 1000.0).round().clamp(0.0, u32::MAX as f64) as u32;
        self
    }

    /// Sets the periodic major compaction interval (`None`: off).
    pub fn major_compaction_interval_ms(mut self, ms: Option<u64>) -> Self {
        self.compaction.major_interval_ms = ms;
        self
    }

    /// Adds a family.
    pub fn family(mut self, cf: ColumnFamilyDescriptor) -> Self {
        self.families.push(cf);
        self
    }

    /// Sets the per-region flush size.
    pub fn memstore_flush_size(mut self, bytes: u64) -> Self {
        self.memstore_flush_size = Some(bytes);
        self
    }

    /// The family named `name`, if declared.
    pub fn get_family(&self, name: &[u8]) -> Option<&ColumnFamilyDescriptor> {
        self.families.iter().find(|f| f.name.as_ref() == name)
    }

    /// Checks names and settings: a well-formed table name, at least one family, no
    /// duplicates, every family valid.
    pub fn validate(&self) -> Result<()> {
        self.name.validate()?;
        if self.families.is_empty() {
            return Err(Error::bad_argument(format!(
                "table {} needs at least one column family",
                self.name
            )));
        }
        for (i, f) in self.families.iter().enumerate() {
            f.validate()?;
            if self.families[..i].iter().any(|g| g.name == f.name) {
                return Err(Error::bad_argument(format!(
                    "table {}: column family {} declared twice",
                    self.name,
                    f.name_str()
                )));
            }
        }
        if self.memstore_flush_size == Some(0) {
            return Err(Error::bad_argument("memstore flush size must be positive"));
        }
        for (i, cp) in self.coprocessors.iter().enumerate() {
            cp.validate()?;
            if self.coprocessors[..i].iter().any(|c| c.name == cp.name) {
                return Err(Error::bad_argument(format!(
                    "table {}: coprocessor {} listed twice",
                    self.name, cp.name
                )));
            }
        }
        if let Some(salt) = &self.salt {
            salt.validate()?;
        }
        self.compaction.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        assert!(TableName::parse("a:b").is_ok());
        assert!(TableName::parse("ns_1:t-2.x").is_ok());
        assert!(TableName::parse(":t").is_err());
        assert!(TableName::parse("ns:").is_err());
        assert!(TableName::parse("n-s:t").is_err());
        assert!(TableName::parse("ns:.t").is_err());
        assert!(TableName::parse("ns:t:u").is_err());
        assert!(TableName::parse("ns:t/u").is_err());
    }

    #[test]
    fn families() {
        assert!(ColumnFamilyDescriptor::new("").validate().is_err());
        assert!(ColumnFamilyDescriptor::new("a:b").validate().is_err());
        assert!(ColumnFamilyDescriptor::new("f")
            .max_versions(0)
            .validate()
            .is_err());
        assert!(ColumnFamilyDescriptor::new("f")
            .max_versions(2)
            .min_versions(3)
            .validate()
            .is_err());
        assert!(ColumnFamilyDescriptor::new("f")
            .block_size(10)
            .validate()
            .is_err());
        let t = TableDescriptor::new(TableName::parse("t").unwrap())
            .family(ColumnFamilyDescriptor::new("f"))
            .family(ColumnFamilyDescriptor::new("f"));
        assert!(t.validate().is_err());
    }
}
