//! Host bindings generated from `wit/coprocessor.wit` (`basalt:coprocessor@0.2.0`): one
//! module per world; the endpoint world reuses the observer world's types and `region`
//! interface, so the host implements `region` once.

/// An open region scan handed to a guest (the `region.scanner` resource).
pub struct Scanner {
    pub(crate) rows: basalt_core::endpoint::LocalScanner,
}

/// An open column scan handed to a guest (the `region.column-scanner` resource): what to
/// read and where the next page starts; each page reads the region of the current call.
pub struct ColumnScanner {
    /// The (family, qualifier) pairs asked for.
    pub(crate) columns: Vec<(bytes::Bytes, bytes::Bytes)>,
    /// The rows left to read (the start moves past each page's last row).
    pub(crate) rows: basalt_core::keys::RowRange,
    /// No row is left.
    pub(crate) done: bool,
    /// The size of the last page, to reserve the next one's buffer.
    pub(crate) last_page: usize,
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
            "basalt:coprocessor/region.column-scanner": super::ColumnScanner,
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
