//! The validation observer as a plugin: refuses puts whose age column is not a decimal
//! number from 0 to `max` (the native `examples/validation_observer.rs`, same messages).
//! Arguments: `family` (default `info`), `qualifier` (default `age`), `max` (default 150).
//! Runs in `pre-batch`, under the row locks: a refused put is vetoed, the rest of the
//! batch is written.

use basalt_plugin_sdk::observer::{
    mutations, put_value, BatchDecisions, Decision, Hooks, Observer, PackedMutations, RegionInfo,
};
use basalt_plugin_sdk::arg;
use basalt_plugin_sdk::observer::export_observer;
use std::sync::OnceLock;

struct Rule {
    family: Vec<u8>,
    qualifier: Vec<u8>,
    max: u32,
}

static RULE: OnceLock<Rule> = OnceLock::new();

/// Why `value` is not a valid age, if it is not.
fn problem(value: &[u8], max: u32) -> Option<String> {
    let Ok(text) = std::str::from_utf8(value) else {
        return Some("age is not UTF-8 text".to_string());
    };
    let valid = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && text.parse::<u32>().is_ok_and(|n| n <= max);
    (!valid).then(|| format!("age {text:?} is not a decimal number from 0 to {max}"))
}

struct AgeRule;

impl Observer for AgeRule {
    fn configure(args: Vec<(String, String)>) -> Result<Hooks, String> {
        let max = match arg(&args, "max") {
            Some(m) => m.parse().map_err(|_| format!("max {m:?} is not a number"))?,
            None => 150,
        };
        let rule = Rule {
            family: arg(&args, "family").unwrap_or("info").as_bytes().to_vec(),
            qualifier: arg(&args, "qualifier").unwrap_or("age").as_bytes().to_vec(),
            max,
        };
        let _ = RULE.set(rule);
        Ok(Hooks::PRE_BATCH)
    }

    fn pre_mutate(_: RegionInfo, _: PackedMutations) -> Vec<Decision> {
        Vec::new()
    }

    fn pre_batch(_: RegionInfo, packed: PackedMutations) -> BatchDecisions {
        let Some(rule) = RULE.get() else {
            return BatchDecisions {
                decisions: Vec::new(),
                writes: Vec::new(),
                increments: Vec::new(),
            };
        };
        // Missing decisions keep: the answer runs to the last veto.
        let mut decisions = Vec::new();
        // A buffer this SDK cannot read fails the call (a trap): never a batch let through
        // unchecked.
        let Ok(muts) = mutations(&packed) else {
            std::process::abort()
        };
        for (i, m) in muts.enumerate() {
            let value = put_value(&m, &rule.family, &rule.qualifier);
            if let Some(why) = value.and_then(|v| problem(v, rule.max)) {
                decisions.resize_with(i, || Decision::Keep);
                decisions.push(Decision::Veto(why));
            }
        }
        BatchDecisions {
            decisions,
            writes: Vec::new(),
            increments: Vec::new(),
        }
    }

    fn post_batch(_: RegionInfo, _: PackedMutations, _: Result<(), String>) {}
    fn post_mutate(_: RegionInfo, _: PackedMutations) {}
    fn flushed(_: RegionInfo, _: Vec<u8>) {}
    fn compacted(_: RegionInfo, _: Vec<u8>, _: u32, _: u64) {}
}

export_observer!(AgeRule);
