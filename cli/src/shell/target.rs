//! The table a data command works on: a plain table, or a salted table addressed by
//! logical row keys (Basalt's salting, as Phoenix's `SALT_BUCKETS`: the shell never shows a
//! salt, and `put`, `get`, `scan`, `count`, `delete`, `incr` and `append` on a salted table
//! take and print logical keys, scans merging the buckets in logical key order).
//!
//! Invariant: a salted table is always written through its salt (a row written without it
//! would land in the wrong bucket and be invisible to logical reads).

use super::ShellError;
use basalt_core::client::Backend;
use basalt_core::client::{Append, Delete, Get, Increment, Put, RowResult, Scan};
use basalt_core::{Connection, SaltedTable, Table, TableName};
use futures::stream::BoxStream;
use futures::StreamExt;

/// A table opened for a data command.
pub(super) enum Target<B: Backend> {
    /// An unsalted table: row keys as typed.
    Plain(Table<B>),
    /// A salted table: logical row keys.
    Salted(SaltedTable<B>),
}

impl<B: Backend> Target<B> {
    /// Opens `name`, salted when its descriptor says so. A table that cannot be described
    /// (it does not exist) opens plain, so that the command checks its own arguments first
    /// and the operation itself reports the missing table.
    pub(super) async fn open(conn: &Connection<B>, name: TableName) -> Result<Self, ShellError> {
        let salted = match conn.admin().describe_table(name.clone()).await {
            Ok(desc) => desc.salt.is_some(),
            Err(_) => false,
        };
        Ok(if salted {
            Target::Salted(conn.salted_table(name)?)
        } else {
            Target::Plain(conn.table(name)?)
        })
    }

    pub(super) async fn put(&self, p: Put) -> Result<(), ShellError> {
        match self {
            Target::Plain(t) => t.put(p).await?,
            Target::Salted(t) => t.put(p).await?,
        }
        Ok(())
    }

    pub(super) async fn get(&self, g: Get) -> Result<RowResult, ShellError> {
        Ok(match self {
            Target::Plain(t) => t.get(g).await?,
            Target::Salted(t) => t.get(g).await?,
        })
    }

    pub(super) async fn delete(&self, d: Delete) -> Result<(), ShellError> {
        match self {
            Target::Plain(t) => t.delete(d).await?,
            Target::Salted(t) => t.delete(d).await?,
        }
        Ok(())
    }

    pub(super) async fn increment(&self, i: Increment) -> Result<RowResult, ShellError> {
        Ok(match self {
            Target::Plain(t) => t.increment(i).await?,
            Target::Salted(t) => t.increment(i).await?,
        })
    }

    pub(super) async fn append(&self, a: Append) -> Result<RowResult, ShellError> {
        Ok(match self {
            Target::Plain(t) => t.append(a).await?,
            Target::Salted(t) => t.append(a).await?,
        })
    }

    /// The rows of `s`, in (logical) key order.
    pub(super) fn scan(
        &self,
        s: Scan,
    ) -> Result<BoxStream<'static, basalt_core::Result<RowResult>>, ShellError> {
        Ok(match self {
            Target::Plain(t) => t.scan(s)?.boxed(),
            Target::Salted(t) => t.scan(s)?.boxed(),
        })
    }
}
