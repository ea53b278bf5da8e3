//! The engine's and the client's integration tests that can share a process, in one test
//! binary: forty-odd binaries each linked the whole engine, a fifth of CI's build. Tests
//! that must be alone in their process keep binaries of their own (see `Cargo.toml`).

mod common;
// Helpers several of the modules below share.
#[path = "common/cluster.rs"]
mod cluster_harness;
#[path = "common/table_rows.rs"]
mod table_rows;

mod admin;
mod backend;
mod backups;
mod block_cache;
mod bloom;
mod cluster_admin;
mod cluster_rpc;
mod compaction;
mod coordination;
mod coprocessor_batch;
mod coprocessor_lifecycle;
mod coprocessor_sync;
mod coprocessors;
mod damage;
mod endpoints;
mod fault_behaviour;
mod filter_parse;
mod filters;
mod fs_conformance;
mod hbase_semantics;
mod indexes;
mod integrity;
mod local_indexes;
mod local_unique;
mod memstore_budget;
mod model;
mod object_storage;
mod objects;
mod one_api;
mod one_api_coprocessors;
mod ownership;
mod region_assign;
mod relations;
mod salted_endpoints;
mod salting;
mod scan_prefetch;
mod snapshot_model;
mod split;
mod split_restriction;
mod table_api;
mod table_names;
mod table_snapshots;
