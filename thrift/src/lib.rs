//! HBase's Thrift1 service as happybase 1.3 ships it (`Hbase.thrift` beside this crate),
//! compiled to Rust by Apache Thrift's compiler 0.17 (`thrift --gen rs`, Debian's
//! `thrift-compiler`): the structs, the `HbaseSyncHandler` trait a server implements and the
//! `HbaseSyncProcessor` that decodes calls and encodes replies. `src/hbase.rs` is generated,
//! not hand-written: regenerate it with `./generate.sh` rather than editing it.
//!
//! Invariant: the wire layout (field ids, types) is exactly happybase's IDL.
#![forbid(unsafe_code)]

#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    unused_imports,
    unused_extern_crates,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#[rustfmt::skip]
pub mod hbase;
