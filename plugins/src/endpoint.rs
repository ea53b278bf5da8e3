//! A plugin as an endpoint: [`PluginEndpoint`] runs the component's `call` once per region
//! (a region-local scanner through the `region` interface) and its `merge` on the client.
//!
//! Invariants: as an observer's, a trapped instance is dropped and its call fails with
//! `Error::PluginFault`; an endpoint call reads only its region, at the call's read point.

use crate::bindings::endpoint_world::{RegionEndpoint as Bindings, RegionEndpointPre};
use crate::bindings::wit;
use crate::pool::{Pool, Slot};
use crate::runtime::PluginHost;
use crate::state::{HostState, Reads};
use basalt_coprocessors::{CallOptions, Endpoint, EndpointRegistry, Endpoints, KeyRange};
use basalt_core::endpoint::RegionView;
use basalt_core::{plugin_coprocessor_name, Connection, Error, IntoTableName, Result};
use futures::StreamExt;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use wasmtime::Store;

/// An uploaded endpoint plugin: register it in an `EndpointRegistry` (requests and
/// answers are the plugin's own bytes) and fold the answers with [`PluginEndpoint::merge`].
pub struct PluginEndpoint {
    pool: Pool<Bindings>,
    pre: RegionEndpointPre<HostState>,
}

impl std::fmt::Debug for PluginEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEndpoint")
            .field("name", &self.pool.name)
            .finish()
    }
}

impl PluginEndpoint {
    /// Loads endpoint plugin `id` (whose bytes are `bytes`) in `host`.
    pub fn load(host: &PluginHost, id: &str, bytes: &[u8]) -> Result<Self> {
        let component = host.compile(id, bytes)?;
        let pre = host.endpoint_pre(&component)?;
        let name = plugin_coprocessor_name(id);
        Ok(PluginEndpoint {
            pool: Pool::new(host, &name, "", "endpoint", host.limits.call_deadline),
            pre,
        })
    }

    fn call<R>(
        &self,
        reads: Reads,
        f: impl FnOnce(&mut Store<HostState>, &Bindings) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let make = |pool: &Pool<Bindings>| {
            let mut store = pool.store();
            let inst = self
                .pre
                .instantiate(&mut store)
                .map_err(|e| pool.fault(&e))?;
            Ok(Slot { store, inst })
        };
        self.pool.call(reads, make, f)
    }

    fn answer(&self, r: std::result::Result<Vec<u8>, String>) -> Result<Vec<u8>> {
        r.map_err(|msg| Error::Coprocessor {
            name: self.pool.name.to_string(),
            msg,
        })
    }

    /// Folds two regions' answers into one (the plugin's `merge`).
    pub fn merge(&self, a: &[u8], b: &[u8]) -> Result<Vec<u8>> {
        let r = self.call(Reads::None, |store, bind| {
            bind.basalt_coprocessor_endpoint().call_merge(store, a, b)
        })?;
        self.answer(r)
    }
}

impl Endpoint for PluginEndpoint {
    type Request = Vec<u8>;
    type Response = Vec<u8>;

    fn call(&self, region: &RegionView<'_>, request: &Vec<u8>) -> Result<Vec<u8>> {
        let info = wit::RegionInfo {
            table: region.table().to_string(),
            region_id: region.region_id(),
            start_key: region.region_start().to_vec(),
            end_key: region.region_end().to_vec(),
        };
        let reads = Reads::Endpoint(region.to_owned_view());
        let r = self.call(reads, |store, b| {
            b.basalt_coprocessor_endpoint()
                .call_call(store, &info, request)
        })?;
        self.answer(r)
    }
}

/// A loaded endpoint as the endpoint registry holds it (shared with the merge).
struct Shared(Arc<PluginEndpoint>);

impl Endpoint for Shared {
    type Request = Vec<u8>;
    type Response = Vec<u8>;

    fn call(&self, region: &RegionView<'_>, request: &Vec<u8>) -> Result<Vec<u8>> {
        Endpoint::call(&*self.0, region, request)
    }
}

/// Calls endpoint plugins: each uploaded endpoint is loaded once (its bytes read through
/// the connection, compiled by the host) and registered system-wide in this object's
/// endpoint registry under `plugin:{sha256}`; a call runs it once per region of the range,
/// every region at one read point, and folds the answers with the plugin's `merge`.
pub struct PluginEndpoints {
    host: Arc<PluginHost>,
    registry: Arc<EndpointRegistry>,
    loaded: Mutex<HashMap<String, Arc<PluginEndpoint>>>,
    options: CallOptions,
}

impl std::fmt::Debug for PluginEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEndpoints")
            .field("loaded", &self.loaded.lock().len())
            .finish()
    }
}

impl PluginEndpoints {
    /// Endpoint calls run by `host`.
    pub fn new(host: Arc<PluginHost>) -> Self {
        PluginEndpoints {
            host,
            registry: Arc::new(EndpointRegistry::new()),
            loaded: Mutex::new(HashMap::new()),
            options: CallOptions::default(),
        }
    }

    /// The same, with `options` for every call (how many regions run at once, timeouts;
    /// default `CallOptions::default()`). Answers are merged in key order whatever
    /// `options.ordered` says.
    pub fn with_options(mut self, options: CallOptions) -> Self {
        self.options = options;
        self
    }

    /// The registry the loaded plugins are registered in (as `plugin:{sha256}`).
    pub fn registry(&self) -> &Arc<EndpointRegistry> {
        &self.registry
    }

    /// Plugin `id`, loaded on first use.
    pub async fn load(&self, conn: &Connection, id: &str) -> Result<Arc<PluginEndpoint>> {
        if let Some(e) = self.loaded.lock().get(id) {
            return Ok(e.clone());
        }
        let bytes = conn.admin().plugin_bytes(id).await?;
        let endpoint = Arc::new(PluginEndpoint::load(&self.host, id, &bytes)?);
        let mut loaded = self.loaded.lock();
        if let Some(e) = loaded.get(id) {
            return Ok(e.clone());
        }
        self.registry
            .register_system(plugin_coprocessor_name(id), Shared(endpoint.clone()))?;
        loaded.insert(id.to_string(), endpoint.clone());
        Ok(endpoint)
    }

    /// Runs endpoint plugin `id` over `range` of `table` with `request`, and merges the
    /// regions' answers in key order; `None` when no region overlaps the range. A region's
    /// failure fails the call.
    pub async fn call(
        &self,
        conn: &Connection,
        table: impl IntoTableName,
        id: &str,
        range: KeyRange,
        request: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let endpoint = self.load(conn, id).await?;
        let mut answers = Endpoints::new(conn, self.registry.clone())
            .with_options(self.options.clone().ordered(true))
            .coprocessor_service::<Shared>(
                table,
                &plugin_coprocessor_name(id),
                range,
                &request.to_vec(),
            )?;
        let mut acc: Option<Vec<u8>> = None;
        while let Some(r) = answers.next().await {
            let answer = r.result?;
            acc = Some(match acc {
                None => answer,
                Some(a) => endpoint.merge(&a, &answer)?,
            });
        }
        Ok(acc)
    }
}
