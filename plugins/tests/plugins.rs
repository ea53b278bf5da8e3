//! The plugin tests that can share a process, in one test binary: each of their crates
//! compiled the same Wasm tooling and engine generics again. `crash.rs` (it runs its own
//! binary again) and `memory_cap.rs` (it measures the process's resident memory) keep
//! binaries of their own (see `plugins/Cargo.toml`).

mod common;

mod cluster;
mod columns;
mod examples;
mod hot_swap;
mod sandbox;
