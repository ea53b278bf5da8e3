//! The write-ahead log (being written).
