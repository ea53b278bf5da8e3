//! Procedure records against their codec, and what replaced a procedure's regions against
//! a model of a table's region list, on seeded random cases.

use super::*;
use crate::keys::Keys;
use basalt_core::coord::RegionKey;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn table() -> TableName {
    TableName::parse("ns:t").unwrap()
}

fn row(rng: &mut StdRng) -> Vec<u8> {
    (0..rng.random_range(0..4))
        .map(|_| rng.random_range(b'a'..=b'e'))
        .collect()
}

fn bounds(rng: &mut StdRng) -> Bounds {
    Bounds {
        start: row(rng),
        end: row(rng),
    }
}

fn record(rng: &mut StdRng) -> ProcedureRecord {
    let kind = match rng.random_range(0..4) {
        0 => ProcedureKind::Split {
            table: table(),
            region: rng.random(),
            at: rng.random::<bool>().then(|| row(rng)),
            bounds: bounds(rng),
        },
        1 => ProcedureKind::Merge {
            table: table(),
            first: rng.random(),
            second: rng.random(),
            bounds: bounds(rng),
        },
        2 => ProcedureKind::CreateTable {
            desc: basalt_core::TableDescriptor::new(table())
                .family(basalt_core::ColumnFamilyDescriptor::new(row(rng))),
            split: match rng.random_range(0..3) {
                0 => basalt_core::PreSplit::None,
                1 => basalt_core::PreSplit::Keys(vec![row(rng), row(rng)]),
                _ => basalt_core::PreSplit::Algorithm(
                    basalt_core::SplitAlgorithm::HexString,
                    rng.random_range(1..64),
                ),
            },
        },
        _ => ProcedureKind::DeleteTable { table: table() },
    };
    let state = match rng.random_range(0..6) {
        5 => ProcedureState::Done(Outcome::Table),
        0 => ProcedureState::Requested,
        1 => ProcedureState::Running,
        2 => ProcedureState::Done(Outcome::Split(
            rng.random::<bool>().then(|| (rng.random(), rng.random())),
        )),
        3 => ProcedureState::Done(Outcome::Merged(rng.random())),
        _ => ProcedureState::Failed(ErrorWire::from(&Error::bad_argument("no such row"))),
    };
    ProcedureRecord { kind, state }
}

#[test]
fn records_round_trip_and_every_damaged_value_is_an_error() {
    let key = b"/p/procedures/8000000000000001";
    for seed in 0..500 {
        let mut rng = StdRng::seed_from_u64(seed);
        let r = record(&mut rng);
        let value = r.encode().unwrap();
        assert_eq!(value[0], RECORD_VERSION);
        assert_eq!(
            ProcedureRecord::decode(key, &value).unwrap(),
            r,
            "seed {seed}"
        );
        // Every cut of the value, and the value under another version, is refused.
        for cut in 0..value.len() {
            assert!(
                ProcedureRecord::decode(key, &value[..cut]).is_err(),
                "seed {seed} cut {cut}"
            );
        }
        let mut other = value.clone();
        other[0] = RECORD_VERSION + 1;
        assert!(matches!(
            ProcedureRecord::decode(key, &other),
            Err(Error::Corruption { .. })
        ));
        // Random bytes decode to an error or to some record, never a panic.
        let noise: Vec<u8> = (0..rng.random_range(0..40)).map(|_| rng.random()).collect();
        let _ = ProcedureRecord::decode(key, &noise);
    }
}

#[test]
fn a_procedure_key_holds_its_id() {
    let keys = Keys::new("/p");
    for id in [1u64 << 63, u64::MAX, (1 << 63) | 0xabc] {
        assert_eq!(keys.procedure_of(&keys.procedure(id)).unwrap(), id);
    }
    for bad in [
        "/p/procedures/",
        "/p/procedures/12",
        "/p/procedures/zz00000000000000",
    ] {
        assert!(keys.procedure_of(bad.as_bytes()).is_err(), "{bad}");
    }
}

/// A table's list: regions `ids` over split rows `rows` (`ids.len() == rows.len() + 1`).
fn list(ids: &[u64], rows: &[&str]) -> Vec<RegionRecord> {
    let mut edges: Vec<&str> = vec![""];
    edges.extend_from_slice(rows);
    edges.push("");
    ids.iter()
        .enumerate()
        .map(|(i, id)| RegionRecord {
            key: RegionKey::new(table(), *id),
            start: Bytes::copy_from_slice(edges[i].as_bytes()),
            end: Bytes::copy_from_slice(edges[i + 1].as_bytes()),
            revision: 1,
        })
        .collect()
}

fn bounds_of(listed: &[RegionRecord], id: u64) -> Bounds {
    let r = listed.iter().find(|r| r.key.region == id).unwrap();
    Bounds::of(r)
}

fn split(listed: &[RegionRecord], region: u64) -> ProcedureKind {
    ProcedureKind::Split {
        table: table(),
        region,
        at: None,
        bounds: bounds_of(listed, region),
    }
}

fn merge(listed: &[RegionRecord], first: u64, second: u64) -> ProcedureKind {
    let (a, b) = (bounds_of(listed, first), bounds_of(listed, second));
    ProcedureKind::Merge {
        table: table(),
        first,
        second,
        bounds: Bounds {
            start: a.start,
            end: b.end,
        },
    }
}

#[test]
fn a_split_is_known_by_its_two_daughters() {
    let before = list(&[1, 2, 3], &["g", "p"]);
    // The middle region, the first and the last.
    let cases: [(u64, Vec<u64>, Vec<&str>); 3] = [
        (2, vec![1, 4, 5, 3], vec!["g", "k", "p"]),
        (1, vec![4, 5, 2, 3], vec!["c", "g", "p"]),
        (3, vec![1, 2, 4, 5], vec!["g", "p", "t"]),
    ];
    for (parent, ids, rows) in cases {
        let kind = split(&before, parent);
        // Still listed: nothing replaced it yet.
        assert_eq!(outcome_from_list(&kind, &before), None);
        let after = list(&ids, &rows);
        assert_eq!(
            outcome_from_list(&kind, &after),
            Some(Outcome::Split(Some((4, 5)))),
            "{parent}"
        );
        // The daughters listed with the parent (a list being mended): not yet.
        let mut both = after.clone();
        both.push(
            before
                .iter()
                .find(|r| r.key.region == parent)
                .unwrap()
                .clone(),
        );
        assert_eq!(outcome_from_list(&kind, &both), None);
        // A daughter missing (listed after the parent was unlisted): not yet.
        let half: Vec<_> = after
            .iter()
            .filter(|r| r.key.region != 5)
            .cloned()
            .collect();
        assert_eq!(outcome_from_list(&kind, &half), None);
    }
    // A split at a row it named is known only by daughters meeting there (others came
    // from another split: the server's own, by size).
    let at = |row: &str| ProcedureKind::Split {
        table: table(),
        region: 2,
        at: Some(row.as_bytes().to_vec()),
        bounds: bounds_of(&before, 2),
    };
    let after = list(&[1, 4, 5, 3], &["g", "k", "p"]);
    assert_eq!(
        outcome_from_list(&at("k"), &after),
        Some(Outcome::Split(Some((4, 5))))
    );
    assert_eq!(outcome_from_list(&at("j"), &after), None);
    // Daughters that split again are not taken for the split's.
    let kind = split(&before, 2);
    let again = list(&[1, 4, 6, 7, 3], &["g", "k", "m", "p"]);
    assert_eq!(outcome_from_list(&kind, &again), None);
}

#[test]
fn a_merge_is_known_by_the_region_with_both_bounds() {
    let before = list(&[1, 2, 3, 4], &["g", "m", "t"]);
    for (first, second, ids, rows) in [
        (1, 2, vec![9, 3, 4], vec!["m", "t"]),
        (2, 3, vec![1, 9, 4], vec!["g", "t"]),
        (3, 4, vec![1, 2, 9], vec!["g", "m"]),
    ] {
        let kind = merge(&before, first, second);
        assert_eq!(outcome_from_list(&kind, &before), None);
        let after = list(&ids, &rows);
        assert_eq!(outcome_from_list(&kind, &after), Some(Outcome::Merged(9)));
        // One of the two still listed: not yet.
        let mut partial = after.clone();
        partial.push(
            before
                .iter()
                .find(|r| r.key.region == first)
                .unwrap()
                .clone(),
        );
        assert_eq!(outcome_from_list(&kind, &partial), None);
    }
}

/// Seeded: a list of random regions, a random split or merge applied to it; the outcome
/// read from the new list is what was done, and none is read from the old one.
#[test]
fn outcomes_follow_a_model_of_the_list() {
    for seed in 0..300 {
        let mut rng = StdRng::seed_from_u64(seed);
        let n = rng.random_range(2..8);
        let mut rows: Vec<String> = Vec::new();
        while rows.len() < n - 1 {
            let r = format!("{:03}", rng.random_range(1..999));
            if !rows.contains(&r) {
                rows.push(r);
            }
        }
        rows.sort();
        let ids: Vec<u64> = (1..=n as u64).collect();
        let row_refs: Vec<&str> = rows.iter().map(String::as_str).collect();
        let before = list(&ids, &row_refs);
        let i = rng.random_range(0..n);
        if rng.random() || i + 1 == n {
            // Split region i at a row strictly inside it.
            let lo = if i == 0 {
                0
            } else {
                rows[i - 1].parse::<u32>().unwrap() * 10
            };
            let hi = if i + 1 == n {
                10_000
            } else {
                rows[i].parse::<u32>().unwrap() * 10
            };
            if hi - lo < 2 {
                continue;
            }
            let at = format!("{:03}{}", (lo + 1) / 10, (lo + 1) % 10);
            let kind = split(&before, ids[i]);
            assert_eq!(outcome_from_list(&kind, &before), None);
            let mut new_ids = ids.clone();
            new_ids.splice(i..=i, [100, 101]);
            let mut new_rows = rows.clone();
            new_rows.insert(i, at);
            let refs: Vec<&str> = new_rows.iter().map(String::as_str).collect();
            let after = list(&new_ids, &refs);
            assert_eq!(
                outcome_from_list(&kind, &after),
                Some(Outcome::Split(Some((100, 101)))),
                "seed {seed}"
            );
        } else {
            let kind = merge(&before, ids[i], ids[i + 1]);
            assert_eq!(outcome_from_list(&kind, &before), None);
            let mut new_ids = ids.clone();
            new_ids.splice(i..=i + 1, [100]);
            let mut new_rows = rows.clone();
            new_rows.remove(i);
            let refs: Vec<&str> = new_rows.iter().map(String::as_str).collect();
            let after = list(&new_ids, &refs);
            assert_eq!(
                outcome_from_list(&kind, &after),
                Some(Outcome::Merged(100)),
                "seed {seed}"
            );
        }
    }
}
