//! Helpers shared by the integration tests of the `basalt` command-line tool.
//!
//! Each test binary includes this module with `mod common;` and uses what it needs, so an
//! item one binary leaves unused is not dead code: `dead_code` is allowed here.
#![allow(dead_code)]

pub mod netns;
