//! Helpers shared by the integration tests: the reference model of the data model.
//!
//! Each test binary includes this module with `mod common;` and uses what it needs.

pub mod model;
