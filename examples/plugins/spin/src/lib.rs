//! A runaway observer, for the sandbox's limits: its `pre-batch` never returns. Each call
//! is stopped at the attachment's deadline and fails (under the attachment's failure
//! policy) while the server goes on serving every other table. Used by the `plugins`
//! bench suite; never attach it to a table you write to.

use basalt_plugin_sdk::observer::export_observer;
use basalt_plugin_sdk::observer::{
    BatchDecisions, Decision, Hooks, Observer, PackedMutations, RegionInfo,
};

struct Spin;

impl Observer for Spin {
    fn configure(_: Vec<(String, String)>) -> Result<Hooks, String> {
        Ok(Hooks::PRE_BATCH)
    }

    fn pre_mutate(_: RegionInfo, _: PackedMutations) -> Vec<Decision> {
        Vec::new()
    }

    fn pre_batch(_: RegionInfo, mutations: PackedMutations) -> BatchDecisions {
        // Seeded by the batch's size in bytes, so that the loop cannot be folded away.
        let mut n = mutations.len() as u64;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }

    fn post_batch(_: RegionInfo, _: PackedMutations, _: Result<(), String>) {}
    fn post_mutate(_: RegionInfo, _: PackedMutations) {}
    fn flushed(_: RegionInfo, _: Vec<u8>) {}
    fn compacted(_: RegionInfo, _: Vec<u8>, _: u32, _: u64) {}
}

export_observer!(Spin);
