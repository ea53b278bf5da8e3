//! Storage: the sorted structures of one store (one column family of one region).
//!
//! Nothing here knows about regions or clients: a store is MemStores plus store files, read
//! through a k-way merge and one matcher that applies HBase's visibility rules.

pub mod storefile;
