//! Endpoints an engine serves to its clients by name: what a region server runs when a
//! remote client calls an endpoint (`Backend::call_endpoint`), as HBase's region servers
//! run the coprocessor services registered on them.
//!
//! The engine holds an [`EndpointHost`] (`Engine::serve_endpoints`): the coprocessors
//! crate's registry implements it. A call names its table, the service, a range of rows, an
//! encoded request and a read point the caller pinned; the engine runs the service once per
//! region of its own overlapping the range, at that read point, through the same
//! [`EndpointCall`] an in-process call uses (so a region retired by a split or merge during
//! the call is redone on its successors, clipped to its part).
//!
//! Invariants: a call that reaches a region this engine does not serve (another server's,
//! after a move) fails whole with `RegionNotServed` before any answer is returned, so the
//! caller locates the range again and no part is answered twice; the service's own errors
//! are per region (each answer carries its own `Result`), never the call's.

use super::{EndpointCall, RegionSpan, RegionView};
use crate::error::{Error, Result};
use crate::keys::RowRange;
use crate::schema::TableName;
use crate::server::read::{ReadPath, ScanPoint};
use bytes::Bytes;
use std::sync::Arc;

/// The answers of a served endpoint call: one per region that answered, in key order, each
/// with the part of the range it covered and the service's encoded response or error.
pub type EndpointAnswers = Vec<(RegionSpan, Result<Bytes>)>;

/// Endpoint services by name, as an engine serves them to remote callers (implemented by
/// the coprocessors crate's `EndpointRegistry`).
pub trait EndpointHost: Send + Sync + std::fmt::Debug {
    /// Runs service `service` of `region`'s table on `region`: decodes `request`, computes
    /// the region's answer and encodes it. An unknown service, a request of the wrong type
    /// and a panic of the service are errors of this region's answer.
    fn call(&self, service: &str, region: &RegionView<'_>, request: &[u8]) -> Result<Vec<u8>>;
}

impl ReadPath {
    /// An endpoint call of table `name` at a read point already pinned (`point`), rather
    /// than one of its own.
    pub(crate) fn endpoint_call_at(
        self: &Arc<Self>,
        name: &TableName,
        point: Arc<ScanPoint>,
    ) -> Result<EndpointCall> {
        let table = self.shared.table(name)?;
        table.check_enabled()?;
        Ok(EndpointCall {
            reads: self.clone(),
            table,
            point,
        })
    }
}

/// Runs `service` on every region of `call`'s table overlapping `range` (see the module
/// doc). Synchronous: callers run it on a blocking thread.
pub(crate) fn serve(
    call: &EndpointCall,
    host: &dyn EndpointHost,
    service: &str,
    range: &RowRange,
    request: &[u8],
) -> Result<EndpointAnswers> {
    let parts = call.parts(range)?;
    // Every part's region first: a call that would answer only some of its range is
    // refused whole, before any service runs.
    for part in &parts {
        part.region.check_online()?;
    }
    let mut out = Vec::with_capacity(parts.len());
    for part in &parts {
        let answers = call.run(part, |view| host.call(service, view, request))?;
        out.extend(
            answers
                .into_iter()
                .map(|(span, r)| (span, r.map(Bytes::from))),
        );
    }
    Ok(out)
}

/// The error of an engine that serves no endpoint services.
pub(crate) fn no_host(service: &str) -> Error {
    Error::Coprocessor {
        name: service.to_string(),
        msg: "this engine serves no endpoint services (Engine::serve_endpoints)".into(),
    }
}
