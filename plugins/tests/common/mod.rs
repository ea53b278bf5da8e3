//! Test plugins written as core-module WAT and wrapped into components of
//! `basalt:coprocessor@0.2.0` with `wit-component` at test time: no guest toolchain needed.
#![allow(dead_code)]

use basalt::coprocessors::Registry;
use basalt::{Config, Connection};
use basalt_plugins::{PluginHost, PluginLimits};
use std::sync::Arc;

/// The canonical-ABI parameters of a hook taking `(region-info, packed-mutations)`.
pub const REGION_MUTS: &str = "(param i32 i32 i64 i32 i32 i32 i32 i32 i32)";

/// Bodies of an observer's core module: each is the body of one export, `None` for
/// `unreachable`.
#[derive(Clone)]
pub struct Observer {
    /// The `hooks` flags `configure` answers (1 pre-mutate, 2 pre-batch, 4 post-batch,
    /// 8 post-mutate, 16 flush, 32 compaction).
    pub hooks: u32,
    /// The body of `configure` (returns the result's address); default answers `hooks`.
    pub configure: Option<String>,
    /// The body of `pre-batch` (returns the address of its `batch-decisions`).
    pub pre_batch: String,
    /// Extra module fields (functions, data).
    pub extra: String,
    /// Imports, first in the module.
    pub imports: String,
}

impl Observer {
    /// Keeps every mutation.
    pub fn keep_all() -> Self {
        Observer {
            hooks: 2,
            configure: None,
            // Three empty lists at 256.
            pre_batch: "(i32.const 256)".into(),
            imports: String::new(),
            extra: String::new(),
        }
    }

    /// Vetoes the first mutation of every batch with `message` (< 64 bytes).
    pub fn veto_first(message: &str) -> Self {
        let len = message.len();
        Observer {
            hooks: 2,
            configure: None,
            pre_batch: "(i32.const 320)".into(),
            // decisions: one at 400: tag 2 (veto), string at 480.
            imports: String::new(),
            extra: format!(
                r#"(data (i32.const 320) "\90\01\00\00\01\00\00\00")
                   (data (i32.const 400) "\02\00\00\00\e0\01\00\00\{len:02x}\00\00\00")
                   (data (i32.const 480) "{message}")"#,
            ),
        }
    }

    /// A `pre-batch` that runs `body` and then returns the empty answer.
    pub fn pre_batch_runs(body: &str, extra: &str) -> Self {
        Observer {
            hooks: 2,
            configure: None,
            pre_batch: format!("{body} (i32.const 256)"),
            imports: String::new(),
            extra: extra.into(),
        }
    }

    /// The core module's text.
    pub fn wat(&self) -> String {
        let configure = self.configure.clone().unwrap_or_else(|| {
            format!(
                "(i32.store8 (i32.const 128) (i32.const 0)) (i32.store8 (i32.const 132) (i32.const {})) (i32.const 128)",
                self.hooks
            )
        });
        format!(
            r#"(module
  {imports}
  (memory (export "memory") 1)
  (global $bump (mut i32) (i32.const 4096))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    ;; align up, then bump
    (local.set $p (i32.and (i32.add (global.get $bump) (i32.sub (local.get 2) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get 2))))
    (global.set $bump (i32.add (local.get $p) (local.get 3)))
    (if (i32.gt_u (global.get $bump) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.div_u (i32.sub (global.get $bump)
                (i32.mul (memory.size) (i32.const 65536))) (i32.const 65536)) (i32.const 1))))))
    (local.get $p))
  (func (export "basalt:coprocessor/observer@0.2.0#configure") (param i32 i32) (result i32)
    (global.set $bump (i32.const 4096))
    {configure})
  (func (export "basalt:coprocessor/observer@0.2.0#pre-mutate") {REGION_MUTS} (result i32)
    (i32.const 256))
  (func (export "basalt:coprocessor/observer@0.2.0#pre-batch") {REGION_MUTS} (result i32)
    (global.set $bump (i32.const 4096))
    {pre_batch})
  (func (export "basalt:coprocessor/observer@0.2.0#post-batch")
    (param i32 i32 i64 i32 i32 i32 i32 i32 i32 i32 i32 i32))
  (func (export "basalt:coprocessor/observer@0.2.0#post-mutate") {REGION_MUTS})
  (func (export "basalt:coprocessor/observer@0.2.0#flushed") (param i32 i32 i64 i32 i32 i32 i32 i32 i32))
  (func (export "basalt:coprocessor/observer@0.2.0#compacted")
    (param i32 i32 i64 i32 i32 i32 i32 i32 i32 i32 i64))
  {extra}
)"#,
            pre_batch = self.pre_batch,
            extra = self.extra,
            imports = self.imports,
        )
    }

    /// The component's bytes.
    pub fn component(&self) -> Vec<u8> {
        component(&self.wat(), "region-observer")
    }
}

/// WASI's wall clock, as much of it as the clock test imports.
const WASI_CLOCKS: &str = "package wasi:clocks@0.2.0;
interface wall-clock {
    record datetime { seconds: u64, nanoseconds: u32 }
    now: func() -> datetime;
    resolution: func() -> datetime;
}";

/// A world that imports WASI's wall clock besides being a region observer.
const CLOCKED: &str = "package test:clocked;
world clocked {
    import wasi:clocks/wall-clock@0.2.0;
    include basalt:coprocessor/region-observer@0.2.0;
}";

/// Wraps core module `wat` into a component of `world` (`clocked`: a region observer that
/// imports WASI's wall clock).
pub fn component(wat: &str, world: &str) -> Vec<u8> {
    component_of(wat, world, basalt_plugins::WIT)
}

/// [`component`] against the interface text `wit` (another version of it, say).
pub fn component_of(wat: &str, world: &str, wit: &str) -> Vec<u8> {
    let mut module = wat::parse_str(wat).unwrap();
    let mut resolve = wit_parser::Resolve::default();
    let mut pkg = resolve.push_str("coprocessor.wit", wit).unwrap();
    if world == "clocked" {
        resolve.push_str("clocks.wit", WASI_CLOCKS).unwrap();
        pkg = resolve.push_str("clocked.wit", CLOCKED).unwrap();
    }
    let world = resolve.select_world(&[pkg], Some(world)).unwrap();
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .unwrap();
    wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap()
        .validate(true)
        .encode()
        .unwrap()
}

/// A connection whose registry runs plugins with `limits`.
pub async fn open(dir: &std::path::Path, limits: PluginLimits) -> (Connection, Arc<Registry>) {
    let registry = Arc::new(Registry::new());
    registry.set_plugin_runtime(PluginHost::new(limits).unwrap());
    let conn = Connection::open_with(Config::new(dir).coprocessor_loader(registry.clone()))
        .await
        .unwrap();
    (conn, registry)
}

/// Counts the mutations of every batch into `stats` row `n`, column `f:{qualifier}` (two
/// characters): one increment per batch, added to the batch itself.
pub fn counter(qualifier: &str) -> Observer {
    assert_eq!(qualifier.len(), 2);
    Observer {
        hooks: 2,
        configure: None,
        // The answer at 256: no decisions, no writes, one increment at 512.
        // The count of the batch's mutations: the first u32 of its packed bytes.
        pre_batch:
            "(i64.store (i32.const 544) (i64.extend_i32_u (i32.load (local.get 7)))) (i32.const 256)"
                .into(),
        imports: String::new(),
        extra: format!(
            r#"(data (i32.const 256) "\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\02\00\00\01\00\00\00")
               (data (i32.const 512) "\58\02\00\00\05\00\00\00\62\02\00\00\01\00\00\00\63\02\00\00\01\00\00\00\64\02\00\00\02\00\00\00")
               (data (i32.const 600) "stats\00\00\00\00\00nf{qualifier}")"#
        ),
    }
}

/// A `pre-batch` that grows its memory a page at a time, writing to every 4 KiB of every
/// new page (so that each is resident).
pub fn hog() -> Observer {
    Observer::pre_batch_runs(
        "(call $hog)",
        "(func $hog (local $p i32) (local $end i32)
           (loop $l
             (local.set $p (i32.mul (memory.grow (i32.const 1)) (i32.const 65536)))
             (local.set $end (i32.add (local.get $p) (i32.const 65536)))
             (loop $touch
               (i32.store (local.get $p) (i32.const 1))
               (local.set $p (i32.add (local.get $p) (i32.const 4096)))
               (br_if $touch (i32.lt_u (local.get $p) (local.get $end))))
             (br $l)))",
    )
}
