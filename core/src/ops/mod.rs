//! The operations a client sends: Put, Delete, Get, Scan, Increment, Append, CheckAndMutate,
//! RowMutations, batches, and what they return.
//!
//! These are plain builders; validation (row length, families, value size) happens in the
//! engine before anything is written, so a bad operation never leaves partial state.

mod atomic;
mod batch;
mod mutate;
mod read;

pub use atomic::*;
pub use batch::*;
pub use mutate::*;
pub use read::*;

use bytes::Bytes;

/// Copies caller bytes into an owned `Bytes`.
pub(crate) fn b(x: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(x.as_ref())
}
