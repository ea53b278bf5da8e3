//! mvcc (being written).
