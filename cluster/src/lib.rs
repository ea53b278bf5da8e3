//! Basalt's cluster coordination on etcd v3: [`EtcdCoordination`] implements
//! `basalt_core::coord::Coordination` (leases with keep-alive and node generations, region
//! ownership with generations, the region catalog and manifest pointers as compare-and-swap
//! transactions) for region servers that share one etcd, with region servers' registration
//! under their leases ([`EtcdCoordination::register_server`]) and the master's election
//! ([`EtcdCoordination::campaign`], a [`Leadership`] per term, whose writes are fenced by
//! the term); [`LocalEtcd`] starts and stops a one-member etcd for tests and for trying a
//! cluster on one machine.
//!
//! The conformance suite `tests/coordination.rs` (the `basalt` package) runs the same checks
//! on `MemoryCoordination` and on [`EtcdCoordination`] against a [`LocalEtcd`], with real
//! times to live. The client speaks etcd's gRPC API through tonic, with the messages it
//! needs written out in `proto` (no `protoc` at build time); it works with etcd 3.4 (Debian's
//! `etcd-server`) and later.
//!
//! On top of them the cluster itself: the RPC protocol between clients and region servers
//! ([`rpc`]: gRPC on tonic, Basalt's values as postcard messages), the client's remote
//! backend ([`RemoteBackend`], [`connect`]: the same `Connection` API as an embedded
//! engine) and the region server ([`regionserver`]).
//!
//! Layers, bottom to top: `proto`, `keys`, `client`, `coordination`, `election`,
//! `assignment`, `placement`, `holds`, `procedures`, `asks`, `admin`, `local`, `rpc`, `remote`,
//! `master`, `listing`, `regionserver`. That is: etcd's messages; the key layout and the values' encodings; the
//! etcd gRPC client; the `Coordination` implementation; servers' registration and the
//! master's election; the master's region assignments; where regions should go (grouped
//! or spread, [`Placement`]); placement preferences and schema holds in etcd; splits and
//! merges as procedures in etcd; a region server's asks for splits; the
//! operators' status and requests ([`ClusterAdmin`]); the
//! local etcd process; the region servers' protocol; the remote client; the master's
//! reconciliation; etcd's region lists kept in line with the catalog; the region server.
//!
//! Public modules: `rpc`, `master`, `regionserver`; what else users name is re-exported
//! here.
//!
//! Invariants: every change to etcd is one transaction that compares what it was decided on
//! (see `coordination`; a master's writes also compare its term, see `election`); every
//! key is under the configured prefix.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod asks;
mod assignment;
mod client;
mod coordination;
mod election;
mod holds;
mod keys;
mod listing;
mod local;
pub mod master;
mod placement;
mod procedures;
mod proto;
pub mod regionserver;
mod remote;
pub mod rpc;

pub use admin::{ClusterAdmin, ClusterStatus, ProcedureStatus, RegionPlacement, ServerStatus};
pub use assignment::Assignments;
pub use coordination::{EtcdConfig, EtcdCoordination};
pub use election::{Leadership, LiveServer, ServerInfo};
pub use holds::HOLD_TTL;
pub use local::{LocalEtcd, ETCD_BIN_VAR};
pub use placement::{HoldTarget, Placement};
pub use remote::{connect, connect_with, AckObserver, RemoteBackend, RemoteReadPoint, RetryPolicy};
