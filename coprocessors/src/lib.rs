//! Basalt's coprocessor framework: Observer hooks and Endpoint services.
//!
//! This crate will host the observer traits, their host (ordering, priorities, error
//! policy) and endpoint services with client-side fan-out. The engine in `basalt-core`
//! exposes the hook points; this crate implements them. Nothing lives here yet.
#![deny(missing_docs)]
