//! Index definitions ([`IndexDef`]): what an index covers and how its rows are laid out.
//!
//! A definition is plain data, serialised (postcard, then hex) into the maintaining
//! coprocessor's arguments on the data table, so the catalog keeps it and reopening the
//! engine reloads it with the table. Invariants checked by [`IndexDef::validate`]: at least
//! one indexed column, no column named twice among the indexed ones, a name usable in a
//! table name, salt buckets in 1..=65_536.

use basalt_core::keys::Order;
use basalt_core::{Error, IntoTableName, Result, TableName, DEFAULT_NAMESPACE};
use serde::{Deserialize, Serialize};

/// One column of the data table: family and qualifier.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ColumnRef {
    /// The family.
    pub family: Vec<u8>,
    /// The qualifier.
    pub qualifier: Vec<u8>,
}

impl ColumnRef {
    /// The column `family:qualifier`.
    pub fn new(family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        ColumnRef {
            family: family.as_ref().to_vec(),
            qualifier: qualifier.as_ref().to_vec(),
        }
    }
}

/// Whether an index is usable yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexState {
    /// Maintained on every write, but its older rows are still being indexed: queries are
    /// refused with [`Error::IndexNotReady`].
    Building,
    /// Complete: queries are answered.
    Active,
    /// A local index being dropped: no write adds its rows any more, and every write (or
    /// touch) of a data row deletes that row's one; queries are refused.
    Dropping,
}

/// A secondary index on a data table.
///
/// ```
/// use basalt_index::IndexDef;
/// let def = IndexDef::new("by_city", "users")
///     .column("p", "city")
///     .column_desc("p", "age")
///     .cover("p", "name");
/// def.validate().unwrap();
/// assert_eq!(def.index_table().unwrap().to_string(), "default:users.idx.by_city");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDef {
    /// The index's name (unique per data table).
    pub name: String,
    /// The data table: `table` in the default namespace, `ns:table` in any other.
    pub table: String,
    /// The indexed columns, most significant first, each with its direction.
    pub columns: Vec<(ColumnRef, Order)>,
    /// Columns copied into the index row, read by queries without the data table.
    pub covered: Vec<ColumnRef>,
    /// At most one data row per combination of indexed values.
    pub unique: bool,
    /// Rows lacking an indexed column are left out (else they are indexed with null).
    pub sparse: bool,
    /// Salt buckets of the index table (`None`: unsalted).
    pub salt_buckets: Option<u32>,
    /// Whether the index is being built or complete.
    pub state: IndexState,
    /// A region-local index: its rows live in the data table's regions, next to their data
    /// rows (see the `layout` module), instead of in an index table of their own.
    pub local: bool,
    /// The length of the data row key prefix that leads the index's values (`None`: no
    /// prefix); see [`IndexDef::row_prefix`].
    pub row_prefix: Option<u32>,
}

/// [`IndexDef`] as definitions written before row prefixes encode it (no `row_prefix`).
#[derive(Deserialize)]
struct IndexDefV2 {
    name: String,
    table: String,
    columns: Vec<(ColumnRef, Order)>,
    covered: Vec<ColumnRef>,
    unique: bool,
    sparse: bool,
    salt_buckets: Option<u32>,
    state: IndexState,
    local: bool,
}

/// [`IndexDef`] as definitions written before local indexes encode it (no `local`).
#[derive(Deserialize)]
struct IndexDefV1 {
    name: String,
    table: String,
    columns: Vec<(ColumnRef, Order)>,
    covered: Vec<ColumnRef>,
    unique: bool,
    sparse: bool,
    salt_buckets: Option<u32>,
    state: IndexState,
}

impl IndexDef {
    /// An index named `name` on `table` (a [`TableName`] or `ns:table` or `table`: a
    /// malformed one fails [`IndexDef::validate`]), with no column yet, not unique, not
    /// sparse, unsalted.
    pub fn new(name: impl Into<String>, table: impl IntoTableName) -> Self {
        IndexDef {
            name: name.into(),
            table: {
                let t = table.into_table_name_unchecked();
                if t.namespace() == DEFAULT_NAMESPACE {
                    t.qualifier().to_string()
                } else {
                    t.to_string()
                }
            },
            columns: Vec::new(),
            covered: Vec::new(),
            unique: false,
            sparse: false,
            salt_buckets: None,
            state: IndexState::Building,
            local: false,
            row_prefix: None,
        }
    }
    /// Makes the index region-local: its rows live in the data table's regions and commit,
    /// split and merge with their data rows; a query reads every region. Not salted (the
    /// data table's own salting spreads it); unique only with a [`IndexDef::row_prefix`].
    pub fn local(mut self) -> Self {
        self.local = true;
        self
    }
    /// Leads a local index's values with the first `n` bytes of the data row's key (the
    /// whole key when shorter): every entry's first value, and every query's, is that
    /// prefix, the indexed columns follow.
    ///
    /// This is what makes a local index unique where the value's region is known: on a data
    /// table whose [`basalt_core::SplitRestriction::KeyPrefix`]`(m)` keeps the rows sharing
    /// their first `m <= n` bytes in one region, all rows that could take one value (prefix
    /// included) live in one region, and that region alone decides. A unique local index
    /// needs it; [`crate::IndexAdmin::create`] checks the table's restriction.
    ///
    /// ```
    /// use basalt_index::IndexDef;
    /// // At most one message per conversation (the first 8 bytes of the row) and client id.
    /// let def = IndexDef::new("dedup", "msgs")
    ///     .local()
    ///     .row_prefix(8)
    ///     .column("m", "client_id")
    ///     .unique();
    /// def.validate().unwrap();
    /// ```
    pub fn row_prefix(mut self, n: u32) -> Self {
        self.row_prefix = Some(n);
        self
    }
    /// Adds an ascending indexed column.
    pub fn column(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.columns
            .push((ColumnRef::new(family, qualifier), Order::Asc));
        self
    }
    /// Adds a descending indexed column.
    pub fn column_desc(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.columns
            .push((ColumnRef::new(family, qualifier), Order::Desc));
        self
    }
    /// Adds a covered column.
    pub fn cover(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.covered.push(ColumnRef::new(family, qualifier));
        self
    }
    /// Makes the index unique.
    pub fn unique(mut self) -> Self {
        self.unique = true;
        self
    }
    /// Makes the index sparse.
    pub fn sparse(mut self) -> Self {
        self.sparse = true;
        self
    }
    /// Salts the index table into `buckets` buckets.
    pub fn salt_buckets(mut self, buckets: u32) -> Self {
        self.salt_buckets = Some(buckets);
        self
    }

    /// The data table's name.
    pub fn data_table(&self) -> Result<TableName> {
        TableName::parse(&self.table)
    }

    /// The index table's name: `ns:<table>.idx.<name>`.
    pub fn index_table(&self) -> Result<TableName> {
        let data = self.data_table()?;
        TableName::new(
            data.namespace(),
            &format!("{}.idx.{}", data.qualifier(), self.name),
        )
    }

    /// Checks the definition (see the module doc).
    pub fn validate(&self) -> Result<()> {
        self.data_table()?;
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(Error::bad_argument(format!(
                "index name {:?} must be non-empty [A-Za-z0-9_-]",
                self.name
            )));
        }
        self.index_table()?;
        if self.columns.is_empty() {
            return Err(Error::bad_argument(format!(
                "index {} has no indexed column",
                self.name
            )));
        }
        for (i, (c, _)) in self.columns.iter().enumerate() {
            if self.columns[..i].iter().any(|(d, _)| d == c) {
                return Err(Error::bad_argument(format!(
                    "index {} names a column twice",
                    self.name
                )));
            }
        }
        if let Some(b) = self.salt_buckets {
            basalt_core::SaltSpec::new(b).validate()?;
        }
        if self.local && self.unique && self.row_prefix.is_none() {
            return Err(Error::bad_argument(format!(
                "index {}: a local index sees one region's rows, so it can be unique only where \
                 a value's region is known: lead its values with the data row's key prefix \
                 (row_prefix) on a table whose split restriction keeps that prefix in one \
                 region, or make it global",
                self.name
            )));
        }
        match self.row_prefix {
            Some(_) if !self.local => {
                return Err(Error::bad_argument(format!(
                    "index {}: a row prefix leads local indexes only",
                    self.name
                )))
            }
            Some(n) if n == 0 || n as usize > basalt_core::cell::MAX_ROW_LENGTH => {
                return Err(Error::bad_argument(format!(
                    "index {}: the row prefix length must be in 1..={}, not {n}",
                    self.name,
                    basalt_core::cell::MAX_ROW_LENGTH
                )))
            }
            _ => {}
        }
        if self.local && self.salt_buckets.is_some() {
            return Err(Error::bad_argument(format!(
                "index {}: a local index lives in its data table's regions and takes no salt \
                 of its own (salt the data table)",
                self.name
            )));
        }
        Ok(())
    }

    /// The definition as a coprocessor argument (hex of its postcard bytes).
    pub fn to_arg(&self) -> Result<String> {
        let bytes = postcard::to_allocvec(self)
            .map_err(|e| Error::bad_argument(format!("index definition: {e}")))?;
        Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// A definition back from [`IndexDef::to_arg`].
    pub fn from_arg(s: &str) -> Result<Self> {
        let bad = || Error::bad_argument("index definition argument is not hex");
        if !s.len().is_multiple_of(2) {
            return Err(bad());
        }
        let bytes = (0..s.len())
            .step_by(2)
            .map(|i| {
                s.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(bad)
            })
            .collect::<Result<Vec<u8>>>()?;
        let e = match postcard::from_bytes::<IndexDef>(&bytes) {
            Ok(d) => return Ok(d),
            Err(e) => e,
        };
        // Written before row prefixes (no `row_prefix`), or before local indexes (no
        // `local` either).
        let old = postcard::from_bytes::<IndexDefV2>(&bytes).or_else(|_| {
            postcard::from_bytes::<IndexDefV1>(&bytes).map(|v| IndexDefV2 {
                name: v.name,
                table: v.table,
                columns: v.columns,
                covered: v.covered,
                unique: v.unique,
                sparse: v.sparse,
                salt_buckets: v.salt_buckets,
                state: v.state,
                local: false,
            })
        });
        match old {
            Ok(v) => Ok(IndexDef {
                name: v.name,
                table: v.table,
                columns: v.columns,
                covered: v.covered,
                unique: v.unique,
                sparse: v.sparse,
                salt_buckets: v.salt_buckets,
                state: v.state,
                local: v.local,
                row_prefix: None,
            }),
            Err(_) => Err(Error::bad_argument(format!("index definition: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_round_trips_through_its_argument() {
        let d = IndexDef::new("i", "ns:t")
            .column("f", "a")
            .column_desc("f", "b")
            .cover("g", "c")
            .unique()
            .salt_buckets(4);
        assert_eq!(IndexDef::from_arg(&d.to_arg().unwrap()).unwrap(), d);
        assert!(IndexDef::from_arg("zz").is_err());
        let l = IndexDef::new("i", "t").column("f", "a").local();
        assert_eq!(IndexDef::from_arg(&l.to_arg().unwrap()).unwrap(), l);
        let p = l.clone().row_prefix(300).unique();
        assert_eq!(IndexDef::from_arg(&p.to_arg().unwrap()).unwrap(), p);
        let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        // A definition written before row prefixes (no `row_prefix` field) reads without
        // one, and one written before local indexes (no `local` either) as global.
        let mut bytes = postcard::to_allocvec(&l).unwrap();
        assert_eq!(bytes.pop(), Some(0));
        assert_eq!(IndexDef::from_arg(&hex(&bytes)).unwrap(), l);
        let mut old = d.clone();
        old.state = IndexState::Active;
        let mut bytes = postcard::to_allocvec(&old).unwrap();
        bytes.truncate(bytes.len() - 2);
        assert_eq!(IndexDef::from_arg(&hex(&bytes)).unwrap(), old);
        assert!(IndexDef::from_arg("abc").is_err());
    }

    #[test]
    fn bad_definitions_are_refused() {
        assert!(IndexDef::new("i", "t").validate().is_err());
        assert!(IndexDef::new("a b", "t")
            .column("f", "q")
            .validate()
            .is_err());
        assert!(IndexDef::new("i", "t")
            .column("f", "q")
            .column("f", "q")
            .validate()
            .is_err());
        assert!(IndexDef::new("i", "t")
            .column("f", "q")
            .salt_buckets(0)
            .validate()
            .is_err());
        assert!(IndexDef::new("i", "t").column("f", "q").validate().is_ok());
        assert!(IndexDef::new("i", "t")
            .column("f", "q")
            .local()
            .unique()
            .validate()
            .is_err());
        let prefixed = |n| IndexDef::new("i", "t").column("f", "q").row_prefix(n);
        assert!(prefixed(4).local().unique().validate().is_ok());
        assert!(prefixed(4).unique().validate().is_err(), "global");
        assert!(prefixed(0).local().validate().is_err());
        assert!(prefixed(40_000).local().validate().is_err());
        assert!(IndexDef::new("i", "t")
            .column("f", "q")
            .local()
            .salt_buckets(4)
            .validate()
            .is_err());
    }
}
