//! Storage: the sorted structures of one store (one column family of one region).
//!
//! Nothing here knows about regions or clients: a store is MemStores plus store files, read
//! through a k-way merge ([`merge`]) and one matcher ([`matcher`]) that applies HBase's
//! visibility rules.

pub mod compaction;
pub mod matcher;
pub mod memstore;
pub mod merge;
pub mod row_filter;
pub mod storefile;
