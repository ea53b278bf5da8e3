//! Endpoint services: typed functions that run once per region, and the registry that
//! names them per table.
//!
//! An [`Endpoint`] has serde request and response types and one method that computes a
//! region's answer through a [`RegionView`] (region-local reads at the call's pinned read
//! point). The [`EndpointRegistry`] holds endpoints by name, system-wide (every table) or
//! for one table (a table's own endpoint shadows a system one of the same name). The
//! client side lives in [`crate::service`].
//!
//! Requests and responses cross the registry as postcard bytes, as they would cross a wire:
//! a caller naming a service with the wrong types gets a typed error, never a panic.
//! Invariants: a name is registered at most once per scope; an endpoint that panics fails
//! its region's result only ([`call_isolated`]).

use basalt_core::endpoint::{EndpointHost, RegionView};
use basalt_core::{Error, Result, TableName};
use parking_lot::RwLock;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// A typed service run once per region of a key range.
///
/// `call` runs on a blocking thread (it reads the region synchronously); it must not
/// assume anything about which regions run before or after it, or in parallel with it.
/// It may run more than once for the same rows when a split or merge retires its region
/// meanwhile (the earlier answer is discarded), so it should have no side effects.
///
/// ```
/// use basalt_coprocessors::Endpoint;
/// use basalt_core::client::Scan;
/// use basalt_core::endpoint::RegionView;
///
/// /// Counts the cells of the rows in range.
/// struct CellCount;
/// impl Endpoint for CellCount {
///     type Request = ();
///     type Response = u64;
///     fn call(&self, region: &RegionView<'_>, _req: &()) -> basalt_core::Result<u64> {
///         let mut n = 0;
///         for row in region.scan(&Scan::new())? {
///             n += row?.cells.len() as u64;
///         }
///         Ok(n)
///     }
/// }
/// ```
pub trait Endpoint: Send + Sync + 'static {
    /// What the caller sends (the same to every region).
    type Request: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// What one region answers.
    type Response: Serialize + DeserializeOwned + Send + 'static;
    /// Computes one region's answer.
    fn call(&self, region: &RegionView<'_>, request: &Self::Request) -> Result<Self::Response>;
}

/// An endpoint with its types erased to bytes, as the registry holds it.
pub trait ErasedEndpoint: Send + Sync {
    /// Decodes the request, calls the endpoint, encodes the response.
    fn call_bytes(&self, region: &RegionView<'_>, request: &[u8]) -> Result<Vec<u8>>;
}

struct Typed<E>(E);

impl<E: Endpoint> ErasedEndpoint for Typed<E> {
    fn call_bytes(&self, region: &RegionView<'_>, request: &[u8]) -> Result<Vec<u8>> {
        let req: E::Request = decode(request, "request")?;
        let resp = self.0.call(region, &req)?;
        encode(&resp, "response")
    }
}

/// Serializes a request or response.
pub(crate) fn encode<T: Serialize>(value: &T, what: &str) -> Result<Vec<u8>> {
    postcard::to_stdvec(value)
        .map_err(|e| Error::bad_argument(format!("cannot encode endpoint {what}: {e}")))
}

/// Deserializes a request or response; a mismatch of types is a bad argument.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| {
        Error::bad_argument(format!(
            "endpoint {what} does not decode as the expected type: {e}"
        ))
    })
}

/// Runs `endpoint` on one region, turning a panic into [`Error::Coprocessor`] for that
/// region (the engine and the other regions go on).
pub fn call_isolated(
    name: &str,
    endpoint: &dyn ErasedEndpoint,
    region: &RegionView<'_>,
    request: &[u8],
) -> Result<Vec<u8>> {
    std::panic::catch_unwind(AssertUnwindSafe(|| endpoint.call_bytes(region, request)))
        .unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Coprocessor {
                name: name.to_string(),
                msg: format!("endpoint panicked in region {}: {msg}", region.region_id()),
            })
        })
}

/// Endpoints by name: system-wide ones serve every table, a table's own ones shadow them.
#[derive(Default)]
pub struct EndpointRegistry {
    system: RwLock<HashMap<String, Arc<dyn ErasedEndpoint>>>,
    tables: RwLock<HashMap<(TableName, String), Arc<dyn ErasedEndpoint>>>,
}

impl std::fmt::Debug for EndpointRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut system: Vec<String> = self.system.read().keys().cloned().collect();
        system.sort();
        let mut tables: Vec<String> = self
            .tables
            .read()
            .keys()
            .map(|(t, n)| format!("{t}/{n}"))
            .collect();
        tables.sort();
        f.debug_struct("EndpointRegistry")
            .field("system", &system)
            .field("tables", &tables)
            .finish()
    }
}

impl EndpointRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `endpoint` for every table under `name`; fails if the name is taken.
    pub fn register_system<E: Endpoint>(&self, name: impl Into<String>, endpoint: E) -> Result<()> {
        let name = name.into();
        let mut map = self.system.write();
        if map.contains_key(&name) {
            return Err(Error::bad_argument(format!(
                "endpoint {name} is already registered system-wide"
            )));
        }
        map.insert(name, Arc::new(Typed(endpoint)));
        Ok(())
    }

    /// Registers `endpoint` for table `table` under `name`; fails if the table already has
    /// an endpoint of that name.
    pub fn register<E: Endpoint>(
        &self,
        table: &TableName,
        name: impl Into<String>,
        endpoint: E,
    ) -> Result<()> {
        let key = (table.clone(), name.into());
        let mut map = self.tables.write();
        if map.contains_key(&key) {
            return Err(Error::bad_argument(format!(
                "endpoint {} is already registered for table {table}",
                key.1
            )));
        }
        map.insert(key, Arc::new(Typed(endpoint)));
        Ok(())
    }

    /// Removes table `table`'s endpoint `name`; true when there was one.
    pub fn unregister(&self, table: &TableName, name: &str) -> bool {
        self.tables
            .write()
            .remove(&(table.clone(), name.to_string()))
            .is_some()
    }

    /// The endpoint serving `name` on `table`: the table's own, else the system one.
    pub fn lookup(&self, table: &TableName, name: &str) -> Result<Arc<dyn ErasedEndpoint>> {
        if let Some(e) = self.tables.read().get(&(table.clone(), name.to_string())) {
            return Ok(e.clone());
        }
        self.system
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::Coprocessor {
                name: name.to_string(),
                msg: format!("no endpoint of that name serves table {table}"),
            })
    }
}

/// A registry is what an engine serves to remote callers (`Engine::serve_endpoints`): a
/// region server started with one answers `Endpoints::served` calls from its endpoints.
impl EndpointHost for EndpointRegistry {
    fn call(&self, service: &str, region: &RegionView<'_>, request: &[u8]) -> Result<Vec<u8>> {
        let endpoint = self.lookup(region.table(), service)?;
        call_isolated(service, &*endpoint, region, request)
    }
}
