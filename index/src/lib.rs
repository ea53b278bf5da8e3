//! Basalt's secondary indexes: definitions, the maintaining observer, the index row-key
//! layout, queries, online build and verify.
//!
//! An index is a table kept in sync with its data table inside one atomic engine batch.
//! Nothing lives here yet.
#![deny(missing_docs)]
