//! Host bindings generated from `wit/coprocessor.wit` (`basalt:coprocessor@0.1.0`): one
//! module per world; the endpoint world reuses the observer world's types and `region`
//! interface, so the host implements `region` once.

/// An open region scan handed to a guest (the `region.scanner` resource).
pub struct Scanner {
    pub(crate) rows: basalt_core::endpoint::LocalScanner,
}

/// The `region-observer` world.
pub(crate) mod observer_world {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "region-observer",
        imports: { default: trappable },
        additional_derives: [PartialEq],
        with: {
            "basalt:coprocessor/region.scanner": super::Scanner,
        },
    });
}

/// The `region-endpoint` world.
pub(crate) mod endpoint_world {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "region-endpoint",
        imports: { default: trappable },
        with: {
            "basalt:coprocessor/types": super::observer_world::basalt::coprocessor::types,
            "basalt:coprocessor/region": super::observer_world::basalt::coprocessor::region,
        },
    });
}

pub(crate) use observer_world::basalt::coprocessor::region;
pub(crate) use observer_world::basalt::coprocessor::types as wit;
