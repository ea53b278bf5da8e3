//! The follower counter as a plugin (seed 004; the native `examples/follower_counter.rs`):
//! table `follows` holds one row per edge `<follower>|<followed>` with `f:on` = `1` or
//! `0`; for every edge whose state a batch changes, the plugin adds increments of
//! `f:following` (follower) and `f:followers` (followed) in the stats table (argument
//! `stats`), committed in the same atomic batch as the edge.

use basalt_plugin_sdk::observer::{
    mutations, put_value, region, AddedIncrement, BatchDecisions, Decision, Hooks, MutationKind,
    Observer, PackedMutations, RegionInfo,
};
use basalt_plugin_sdk::arg;
use basalt_plugin_sdk::observer::export_observer;
use std::collections::BTreeMap;
use std::sync::OnceLock;

static STATS: OnceLock<String> = OnceLock::new();

fn is_on(v: Option<&[u8]>) -> bool {
    v == Some(b"1".as_slice())
}

fn increment(table: &str, row: &str, qualifier: &str, amount: i64) -> AddedIncrement {
    AddedIncrement {
        table: table.to_string(),
        row: row.as_bytes().to_vec(),
        family: b"f".to_vec(),
        qualifier: qualifier.as_bytes().to_vec(),
        amount,
    }
}

struct FollowerCounter;

impl Observer for FollowerCounter {
    fn configure(args: Vec<(String, String)>) -> Result<Hooks, String> {
        let stats = arg(&args, "stats").ok_or("argument stats (the stats table) is missing")?;
        let _ = STATS.set(stats.to_string());
        Ok(Hooks::PRE_BATCH)
    }

    fn pre_mutate(_: RegionInfo, _: PackedMutations) -> Vec<Decision> {
        Vec::new()
    }

    fn pre_batch(_: RegionInfo, packed: PackedMutations) -> BatchDecisions {
        let stats = STATS.get().map_or("", String::as_str);
        // A buffer this SDK cannot read fails the call (a trap): no count goes unchanged.
        let Ok(muts) = mutations(&packed) else {
            std::process::abort()
        };
        let mut decisions = Vec::with_capacity(muts.len());
        let mut increments = Vec::new();
        // An edge's state as the batch changes it, operation after operation.
        let mut state: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
        for m in muts {
            let before = match state.get(m.row) {
                Some(s) => *s,
                None => match region::get(m.row, Some(b"f"), Some(b"on")) {
                    Ok(cells) => is_on(cells.first().map(|c| c.value.as_slice())),
                    Err(e) => {
                        decisions.push(Decision::Veto(e));
                        continue;
                    }
                },
            };
            let after = match m.kind {
                MutationKind::Put => put_value(&m, b"f", b"on").map_or(before, |v| v == b"1"),
                MutationKind::Delete => false,
            };
            let edge = String::from_utf8_lossy(m.row).into_owned();
            let Some((follower, followed)) = edge.split_once('|') else {
                decisions.push(Decision::Veto(format!("edge {edge:?} is not follower|followed")));
                continue;
            };
            decisions.push(Decision::Keep);
            state.insert(m.row.to_vec(), after);
            if before != after {
                let delta = if after { 1 } else { -1 };
                increments.push(increment(stats, follower, "following", delta));
                increments.push(increment(stats, followed, "followers", delta));
            }
        }
        BatchDecisions {
            decisions,
            writes: Vec::new(),
            increments,
        }
    }

    fn post_batch(_: RegionInfo, _: PackedMutations, _: Result<(), String>) {}
    fn post_mutate(_: RegionInfo, _: PackedMutations) {}
    fn flushed(_: RegionInfo, _: Vec<u8>) {}
    fn compacted(_: RegionInfo, _: Vec<u8>, _: u32, _: u64) {}
}

export_observer!(FollowerCounter);
