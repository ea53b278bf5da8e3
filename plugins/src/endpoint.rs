//! A plugin as an endpoint: [`PluginEndpoint`] runs the component's `call` once per region
//! (a region-local scanner through the `region` interface) and its `merge` on the client.
//!
//! Invariants: as an observer's, a trapped instance is dropped and its call fails with
//! `Error::PluginFault`; an endpoint call reads only its region, at the call's read point.

use crate::bindings::endpoint_world::{RegionEndpoint as Bindings, RegionEndpointPre};
use crate::bindings::wit;
use crate::runtime::PluginHost;
use crate::state::{HostState, Reads};
use crate::stats::Stats;
use basalt_coprocessors::{Endpoint, EndpointRegistry, Endpoints, KeyRange};
use basalt_core::endpoint::RegionView;
use basalt_core::{plugin_coprocessor_name, Connection, Error, IntoTableName, Result};
use futures::StreamExt;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::Store;

struct Instance {
    store: Store<HostState>,
    bindings: Bindings,
}

/// An uploaded endpoint plugin: register it in an `EndpointRegistry` (requests and
/// answers are the plugin's own bytes) and fold the answers with [`PluginEndpoint::merge`].
pub struct PluginEndpoint {
    name: Arc<str>,
    pre: RegionEndpointPre<HostState>,
    ticks: u64,
    memory_bytes: usize,
    idle: Mutex<Vec<Instance>>,
    max_idle: usize,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for PluginEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEndpoint")
            .field("name", &self.name)
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
            stats: host.track(&name, "", "endpoint"),
            name: Arc::from(name.as_str()),
            pre,
            ticks: PluginHost::ticks(host.limits.call_deadline),
            memory_bytes: host.limits.memory_bytes,
            idle: Mutex::new(Vec::new()),
            max_idle: host.limits.idle_instances,
        })
    }

    /// This endpoint with another per-call deadline.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.ticks = PluginHost::ticks(deadline);
        self
    }

    fn fault(&self, e: &wasmtime::Error) -> Error {
        let ms = u128::from(self.ticks) * crate::runtime::TICK.as_millis();
        let msg = match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => format!("ran past its deadline of {ms} ms"),
            Some(wasmtime::Trap::StackOverflow) => "overflowed its wasm stack".to_string(),
            _ => format!("{e:#}"),
        };
        Error::PluginFault {
            name: self.name.to_string(),
            msg,
        }
    }

    fn call<R>(
        &self,
        reads: Reads,
        f: impl FnOnce(&mut Store<HostState>, &Bindings) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let popped = self.idle.lock().pop();
        let mut inst = match popped {
            Some(i) => i,
            None => {
                let mut store = Store::new(
                    self.pre.engine(),
                    HostState::new(self.name.clone(), self.memory_bytes),
                );
                store.limiter(|s| &mut s.limits);
                store.set_epoch_deadline(self.ticks);
                let bindings = self
                    .pre
                    .instantiate(&mut store)
                    .map_err(|e| self.fault(&e))?;
                Instance { store, bindings }
            }
        };
        inst.store.data_mut().reads = reads;
        inst.store.set_epoch_deadline(self.ticks);
        let start = std::time::Instant::now();
        let out = f(&mut inst.store, &inst.bindings);
        let memory = inst.store.data().limits.memory as u64;
        self.stats.record(start.elapsed(), out.is_err(), memory);
        match out {
            Ok(r) => {
                inst.store.data_mut().reads = Reads::None;
                let mut idle = self.idle.lock();
                if idle.len() < self.max_idle {
                    idle.push(inst);
                }
                Ok(r)
            }
            Err(e) => Err(self.fault(&e)),
        }
    }

    fn answer(&self, r: std::result::Result<Vec<u8>, String>) -> Result<Vec<u8>> {
        r.map_err(|msg| Error::Coprocessor {
            name: self.name.to_string(),
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
        }
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
