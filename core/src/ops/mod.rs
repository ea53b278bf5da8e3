//! The operations a client sends: Put, Delete, Get, Scan, Increment, Append, CheckAndMutate,
//! RowMutations, batches, and what they return.
//!
//! These are plain builders; validation (row length, families, value size) happens in the
//! engine before anything is written, so a bad operation never leaves partial state.
//! They all serialize with serde, for a network protocol; `wire` says how one decoded from
//! a peer's bytes stays as safe to use as one built here.

use crate::cell::MAX_ROW_LENGTH;

mod atomic;
mod batch;
mod mutate;
mod read;
mod wire;

pub use atomic::*;
pub use batch::*;
pub use mutate::*;
pub use read::*;

use bytes::Bytes;

/// Copies caller bytes into an owned `Bytes`.
pub(crate) fn b(x: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(x.as_ref())
}

/// Checks a row key's length: not empty, at most [`MAX_ROW_LENGTH`] bytes.
pub(crate) fn validate_row(row: &[u8]) -> crate::error::Result<()> {
    use crate::error::Error;
    if row.is_empty() {
        return Err(Error::InvalidRow("row key is empty".into()));
    }
    if row.len() > MAX_ROW_LENGTH {
        return Err(Error::InvalidRow(format!(
            "row key of {} bytes exceeds {MAX_ROW_LENGTH}",
            row.len()
        )));
    }
    Ok(())
}
