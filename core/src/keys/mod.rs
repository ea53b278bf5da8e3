//! The row-key toolkit: the building blocks the seeds use to design row keys that spread
//! writes and still read in a useful order.
//!
//! * [`codec`]: an order-preserving composite encoding ([`KeySchema`]): typed components,
//!   per-component descending order, nullable fields (null first); byte order = tuple order.
//! * [`time`]: reverse timestamps, binary (`u64::MAX - t`) and the seeds' 19-digit decimal
//!   (`Long.MAX_VALUE - t`), and string reversal (seed 001's reversed mobile numbers).
//! * [`hash`]: fixed-length hash prefixes: MD5 (seeds 001, 003, 004) and XXH3-64.
//! * [`snowflake`]: Snowflake ids (41-bit milliseconds, 10-bit worker, 12-bit sequence).
//! * [`local`]: the keys of region-local rows (local-index rows), which live in the region
//!   of their owner row.
//! * [`range`]: row ranges ([`RowRange`]) and the next row ([`row_successor`]).
//!
//! Salting itself (a bucket prefix computed from part of the key) is
//! `crate::schema::salt`; these functions know nothing of tables.

pub mod codec;
pub mod hash;
pub mod local;
pub mod range;
pub mod snowflake;
pub mod time;

pub use codec::{encode_bytes_value, Field, KeySchema, Kind, Order, Value};
pub use hash::{md5_hex_prefix, md5_prefix, xxh3_hex_prefix, xxh3_prefix};
pub use range::{prefix_successor, row_successor, RowRange};
pub use snowflake::Snowflake;
pub use time::{
    parse_reverse_decimal, reverse_bytes, reverse_decimal, reverse_str, reverse_ts,
    reverse_ts_bytes,
};
