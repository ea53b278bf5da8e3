//! The generated gRPC service `basalt.RegionServer` (see `cluster/build.rs`): its server
//! trait and its client, over the messages of `messages` encoded by `codec`.
#![allow(missing_docs, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/basalt.RegionServer.rs"));
