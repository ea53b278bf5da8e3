//! Write Basalt coprocessor plugins: WebAssembly components of the WIT package
//! `basalt:coprocessor@0.1.0` (`plugins/wit/coprocessor.wit` in the Basalt repository).
//!
//! An observer implements [`observer::Observer`] (the `observer` interface's exports) and
//! exports its type with `observer::export_observer!`; an endpoint implements
//! [`endpoint::Endpoint`] and exports it with `endpoint::export_endpoint!`. Reads go through
//! [`observer::region`] / [`endpoint::region`]: the rows of the region the call is about.
//!
//! Build a plugin crate (`crate-type = ["cdylib"]`) with
//! `cargo build --release --target wasm32-wasip2`; the `.wasm` it writes is the component
//! to upload. A plugin reaches nothing but `region`: every other import (clocks, random
//! numbers, files) traps, so use `BTreeMap` rather than `HashMap` (whose seed is random)
//! and no `std::time`.

/// The `region-observer` world: the [`observer::Observer`] trait and its types.
pub mod observer {
    wit_bindgen::generate!({
        path: "../plugins/wit",
        world: "region-observer",
        pub_export_macro: true,
        export_macro_name: "export_observer",
        default_bindings_module: "basalt_plugin_sdk::observer",
    });

    pub use basalt::coprocessor::region;
    pub use basalt::coprocessor::types::{
        AddedIncrement, AddedWrite, BatchDecisions, Cell, Decision, Hooks, Mutation,
        MutationKind, RegionInfo, Row,
    };
    pub use exports::basalt::coprocessor::observer::Guest as Observer;

    /// The value `m` puts in `family:qualifier`, if it puts one.
    pub fn put_value<'m>(m: &'m Mutation, family: &[u8], qualifier: &[u8]) -> Option<&'m [u8]> {
        if m.kind != MutationKind::Put {
            return None;
        }
        m.cells
            .iter()
            .find(|c| c.family == family && c.qualifier == qualifier)
            .map(|c| c.value.as_slice())
    }
}

/// The `region-endpoint` world: the [`endpoint::Endpoint`] trait and its types.
pub mod endpoint {
    wit_bindgen::generate!({
        path: "../plugins/wit",
        world: "region-endpoint",
        pub_export_macro: true,
        export_macro_name: "export_endpoint",
        default_bindings_module: "basalt_plugin_sdk::endpoint",
    });

    pub use basalt::coprocessor::region;
    pub use basalt::coprocessor::types::{Cell, RegionInfo, Row};
    pub use exports::basalt::coprocessor::endpoint::Guest as Endpoint;
}

/// The value of argument `key` in a `configure` call's arguments.
pub fn arg<'a>(args: &'a [(String, String)], key: &str) -> Option<&'a str> {
    args.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
