//! Schema: namespaces, table names, column-family and table descriptors, pre-split keys.
//!
//! Every descriptor is validated before it reaches the catalog, so the engine only ever
//! holds legal names and settings. Descriptors are plain data (serde) so that the catalog
//! can persist them.

mod family;
mod name;
mod restriction;
pub mod salt;
pub mod split;

pub use family::{
    is_local_family, validate_family_name, BloomType, ColumnFamilyDescriptor, Compression,
    KeepDeletedCells,
};
pub use name::{validate_namespace, IntoTableName, TableName, DEFAULT_NAMESPACE, SYSTEM_NAMESPACE};
pub use restriction::SplitRestriction;

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

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
    /// Which rows no split separates (appended in catalog format version 11); fixed when the
    /// table is created.
    pub split_restriction: Option<SplitRestriction>,
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
    /// The failed hook call is skipped: the operation goes on as if the coprocessor had
    /// not run it (its changes to a batch are rolled back), and it stays loaded. Appended
    /// in catalog format version 13.
    SkipHook,
    /// Faults fail the operation, as [`FailurePolicy::FailOperation`], until this many
    /// have happened; that one unloads the coprocessor (as [`FailurePolicy::Unload`]) and
    /// the operation goes on without it. Appended in catalog format version 13.
    UnloadAfter(u32),
}

impl FailurePolicy {
    /// What a fault does under this policy, with `faults` faults so far (this one
    /// included).
    pub fn on_fault(self, faults: u64) -> FaultAction {
        match self {
            FailurePolicy::FailOperation => FaultAction::Fail,
            FailurePolicy::Unload => FaultAction::Unload,
            FailurePolicy::SkipHook => FaultAction::Skip,
            FailurePolicy::UnloadAfter(n) if faults >= u64::from(n) => FaultAction::Unload,
            FailurePolicy::UnloadAfter(_) => FaultAction::Fail,
        }
    }
}

/// What one coprocessor fault does ([`FailurePolicy::on_fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// The operation fails with [`Error::Coprocessor`].
    Fail,
    /// The hook call is skipped; the operation goes on.
    Skip,
    /// The coprocessor is unloaded; the operation goes on without it.
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
            split_restriction: None,
        }
    }

    /// Keeps groups of rows in one region (see [`SplitRestriction`]): no split, pre-split
    /// key or split point ever separates them.
    pub fn split_restriction(mut self, r: SplitRestriction) -> Self {
        self.split_restriction = Some(r);
        self
    }

    /// Refuses split keys (pre-split keys, split rows) that fall inside a group of the
    /// table's split restriction, if it has one.
    pub fn check_split_keys<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<()> {
        match &self.split_restriction {
            Some(r) => keys.iter().try_for_each(|k| r.check_split_row(k.as_ref())),
            None => Ok(()),
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
        if let Some(r) = &self.split_restriction {
            r.validate()?;
            if let Some(salt) = self.salt.as_ref().filter(|s| s.width() > r.prefix_len()) {
                return Err(Error::bad_argument(format!(
                    "table {}: its salt ({} bytes) must fit in the split restriction's key \
                     prefix ({} bytes): the salt buckets' boundaries split the table",
                    self.name,
                    salt.width(),
                    r.prefix_len()
                )));
            }
        }
        self.compaction.validate()
    }
}

#[cfg(test)]
mod tests;
