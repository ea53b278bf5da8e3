//! Table names and namespaces: [`TableName`] (`namespace:qualifier`, or a bare qualifier in
//! the default namespace), what may name a table ([`IntoTableName`]) and the namespace rules.
//!
//! Invariants kept: a name built by [`TableName::new`] or [`TableName::parse`] is legal (the
//! namespace `[A-Za-z0-9_]`, the qualifier `[A-Za-z0-9_.-]` not starting with `.` or `-`, as
//! HBase); one given unchecked ([`IntoTableName::into_table_name_unchecked`]) is kept as given
//! and checked by [`TableName::validate`] before a table is created.

use crate::error::{Error, Result};
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
    ///
    /// [`TableDescriptor`]: super::TableDescriptor
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
///
/// [`TableDescriptor::new`]: super::TableDescriptor::new
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
