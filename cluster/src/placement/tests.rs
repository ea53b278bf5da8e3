//! The placement policy's decisions on hand-made and seeded layouts.

use super::*;

fn key(table: &str, id: u64) -> RegionKey {
    RegionKey::new(TableName::parse(table).unwrap(), id)
}

fn live(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn policy(assigned: &Assignments, grouped: &[&str], holds: &[(&str, u64)]) -> Policy {
    let placements = grouped
        .iter()
        .map(|t| (TableName::parse(t).unwrap(), Placement::Grouped))
        .collect();
    let holds: Vec<(HoldTarget, u64)> = holds
        .iter()
        .map(|(t, l)| (HoldTarget::table(TableName::parse(t).unwrap()), *l))
        .collect();
    Policy::new(assigned.keys(), &placements, &holds)
}

/// Applies passes until none moves anything; returns the passes taken.
fn settle(assigned: &mut Assignments, policy: &Policy, servers: &BTreeSet<String>) -> usize {
    settle_around(assigned, policy, servers, &BTreeSet::new())
}

/// [`settle`] with regions `pinned` left where they are by balancing.
fn settle_around(
    assigned: &mut Assignments,
    policy: &Policy,
    servers: &BTreeSet<String>,
    pinned: &BTreeSet<RegionKey>,
) -> usize {
    for pass in 0..200 {
        let moves = policy.rebalance(assigned, servers, true, pinned);
        if moves.is_empty() {
            return pass;
        }
        for (k, s, _) in moves {
            assert!(servers.contains(&s), "a move to a dead server");
            assigned.insert(k, s);
        }
    }
    panic!("balancing does not converge: {assigned:?}");
}

/// A xorshift generator from `seed`: each call gives a number below its argument.
fn seeded(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

fn per_server(assigned: &Assignments, table: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (k, p) in assigned {
        if k.table == TableName::parse(table).unwrap() {
            *out.entry(p.clone()).or_default() += 1;
        }
    }
    out
}

#[test]
fn index_tables_join_their_data_tables_group() {
    let t = |n: &str| TableName::parse(n).unwrap();
    assert_eq!(
        table_group(&t("orders")),
        table_group(&t("orders.idx.by_user"))
    );
    assert_ne!(table_group(&t("orders")), table_group(&t("users")));
    assert_ne!(
        table_group(&t("a:orders")),
        table_group(&t("b:orders.idx.x"))
    );
}

#[test]
fn a_table_without_indexes_spreads_region_by_region() {
    let mut assigned = Assignments::new();
    for i in 0..12 {
        assigned.insert(key("events", i), "rs1".into());
    }
    let servers = live(&["rs1", "rs2", "rs3"]);
    let p = policy(&assigned, &[], &[]);
    assert!(matches!(p.unit(&key("events", 3)), Unit::Region(_)));
    settle(&mut assigned, &p, &servers);
    let counts = per_server(&assigned, "events");
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), vec![4, 4, 4]);
}

#[test]
fn single_region_tables_balance_by_load() {
    let mut assigned = Assignments::new();
    for (i, t) in ["t1", "t2", "t3", "t4"].iter().enumerate() {
        assigned.insert(key(t, i as u64), "rs1".into());
    }
    let servers = live(&["rs1", "rs2", "rs3"]);
    let p = policy(&assigned, &[], &[]);
    let passes = settle(&mut assigned, &p, &servers);
    assert_eq!(passes, 2, "one region per pass");
    let loads: Vec<usize> = load(&assigned, &servers).into_values().collect();
    assert_eq!(loads, vec![2, 1, 1]);
}

#[test]
fn a_table_with_a_global_index_stays_grouped() {
    let mut assigned = Assignments::new();
    for i in 0..6 {
        assigned.insert(key("orders", i), "rs1".into());
    }
    assigned.insert(key("orders.idx.by_user", 6), "rs2".into());
    let servers = live(&["rs1", "rs2", "rs3"]);
    let p = policy(&assigned, &[], &[]);
    settle(&mut assigned, &p, &servers);
    let on: BTreeSet<&String> = assigned.values().collect();
    assert_eq!(on.len(), 1, "{assigned:?}");
}

#[test]
fn placement_grouped_pins_a_table_and_groups_balance_by_load() {
    let mut assigned = Assignments::new();
    for (i, t) in ["a", "b", "c", "d"].iter().enumerate() {
        assigned.insert(key(t, i as u64 * 2), "rs1".into());
        assigned.insert(key(t, i as u64 * 2 + 1), "rs1".into());
    }
    let servers = live(&["rs1", "rs2", "rs3"]);
    let p = policy(&assigned, &["a", "b", "c", "d"], &[]);
    settle(&mut assigned, &p, &servers);
    for t in ["a", "b", "c", "d"] {
        assert_eq!(per_server(&assigned, t).len(), 1, "{t} split: {assigned:?}");
    }
    let loads = load(&assigned, &servers);
    let (min, max) = (loads.values().min(), loads.values().max());
    assert!(max.unwrap() - min.unwrap() <= 2, "{loads:?}");
    assert!(loads.values().all(|n| *n > 0), "{loads:?}");
}

#[test]
fn a_held_group_is_gathered_even_with_the_balancer_off() {
    let mut assigned = Assignments::new();
    for i in 0..6 {
        let server = ["rs1", "rs2", "rs3"][i % 3];
        assigned.insert(key("events", i as u64), server.into());
        assigned.insert(key("users", i as u64 + 10), server.into());
    }
    let servers = live(&["rs1", "rs2", "rs3"]);
    // One lease holds both tables (a snapshot of two tables): one server for both.
    let p = policy(&assigned, &[], &[("events", 7), ("users", 7)]);
    assert_eq!(p.unit(&key("events", 0)), p.unit(&key("users", 10)));
    assert!(p.held(&key("users", 10)) && !p.held(&key("other", 1)));
    let moves = p.gather_held(&assigned, &servers);
    for (k, s, _) in moves {
        assigned.insert(k, s);
    }
    let on: BTreeSet<&String> = assigned.values().collect();
    assert_eq!(on.len(), 1, "{assigned:?}");
    // Held, nothing else is balanced (the gathered server is the busiest).
    assigned.insert(key("other", 1), "rs2".into());
    assigned.insert(key("other", 2), "rs2".into());
    assigned.insert(key("other", 3), "rs2".into());
    let p = policy(&assigned, &[], &[("events", 7), ("users", 7)]);
    assert!(p.gather_held(&assigned, &servers).is_empty());
    assert!(p
        .rebalance(&assigned, &servers, true, &BTreeSet::new())
        .is_empty());
    for i in 1..=3 {
        assigned.remove(&key("other", i));
    }
    // Released, the tables spread again.
    let released = policy(&assigned, &[], &[]);
    settle(&mut assigned, &released, &servers);
    for t in ["events", "users"] {
        let counts = per_server(&assigned, t);
        assert_eq!(counts.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
    }
}

#[test]
fn holds_of_different_leases_stay_apart() {
    let assigned: Assignments = [
        (key("a", 1), "rs1".to_string()),
        (key("b", 2), "rs2".into()),
    ]
    .into_iter()
    .collect();
    let p = policy(&assigned, &[], &[("a", 1), ("b", 2)]);
    assert_ne!(p.unit(&key("a", 1)), p.unit(&key("b", 2)));
    assert!(matches!(p.unit(&key("a", 1)), Unit::Group(_)));
    // Chained joins: (a, b) under one lease and (b, c) under another are one group.
    let p = policy(&assigned, &[], &[("c", 1), ("b", 1), ("b", 2), ("a", 2)]);
    assert_eq!(p.unit(&key("a", 1)), p.unit(&key("c", 3)));
}

#[test]
fn orphans_of_a_spread_table_scatter() {
    let mut assigned = Assignments::new();
    for i in 0..4 {
        assigned.insert(key("events", i), "rs1".into());
    }
    let dead: Vec<RegionKey> = (4..10).map(|i| key("events", i)).collect();
    let servers = live(&["rs1", "rs2", "rs3"]);
    for k in &dead {
        let p = Policy::new(assigned.keys().chain([k]), &BTreeMap::new(), &[]);
        let (to, _) = p.placer(&assigned, &servers).target(k).unwrap();
        assigned.insert(k.clone(), to);
    }
    let counts = per_server(&assigned, "events");
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(counts.values().all(|n| (3..=4).contains(n)), "{counts:?}");
}

#[test]
fn a_move_of_a_spread_region_moves_it_alone() {
    let mut assigned = Assignments::new();
    for i in 0..3 {
        assigned.insert(key("events", i), "rs1".into());
        assigned.insert(key("pinned", i + 10), "rs1".into());
    }
    let p = policy(&assigned, &["pinned"], &[]);
    assert_eq!(
        p.members(&key("events", 1), assigned.keys()),
        vec![key("events", 1)]
    );
    assert_eq!(p.members(&key("pinned", 11), assigned.keys()).len(), 3);
}

#[test]
fn mixed_layouts_converge() {
    // Seeded layouts of grouped and spread tables on 1-4 servers.
    let mut next = seeded(0x9e37_79b9_7f4a_7c15);
    for _ in 0..200 {
        let names = ["rs1", "rs2", "rs3", "rs4"];
        let servers = live(&names[..1 + next(4) as usize]);
        let all: Vec<&String> = servers.iter().collect();
        let mut assigned = Assignments::new();
        let mut id = 0;
        for t in ["a", "b", "c", "a.idx.i", "d"] {
            for _ in 0..1 + next(8) {
                id += 1;
                let on = all[next(all.len() as u64) as usize].clone();
                assigned.insert(key(t, id), on);
            }
        }
        let p = policy(&assigned, &["b"], &[]);
        settle(&mut assigned, &p, &servers);
        for t in ["a", "b"] {
            let mut on: BTreeSet<&String> = BTreeSet::new();
            for (k, s) in &assigned {
                if table_group(&k.table) == table_group(&TableName::parse(t).unwrap()) {
                    on.insert(s);
                }
            }
            assert!(on.len() <= 1, "group {t} split: {assigned:?}");
        }
        for t in ["c", "d"] {
            let counts = per_server(&assigned, t);
            let regions: usize = counts.values().sum();
            let most = counts.values().max().copied().unwrap_or(0);
            assert!(most <= regions.div_ceil(servers.len()), "{t}: {counts:?}");
        }
    }
}

#[test]
fn pinned_regions_stay_and_the_others_balance_around_them() {
    // Seeded layouts: spread tables with some regions pinned (an operator moved them
    // lately), and grouped tables, one of them pinned, each whole on one server.
    let mut next = seeded(0x2545_f491_4f6c_dd1d);
    for _ in 0..200 {
        let names = ["rs1", "rs2", "rs3", "rs4"];
        let servers = live(&names[..1 + next(4) as usize]);
        let all: Vec<&String> = servers.iter().collect();
        let mut assigned = Assignments::new();
        let mut pinned = BTreeSet::new();
        let mut id = 0;
        for t in ["c", "d", "g1", "g2"] {
            let whole = all[next(all.len() as u64) as usize].clone();
            for _ in 0..1 + next(9) {
                id += 1;
                let on = match t.starts_with('g') {
                    true => whole.clone(),
                    false => all[next(all.len() as u64) as usize].clone(),
                };
                if next(4) == 0 || t == "g1" {
                    pinned.insert(key(t, id));
                }
                assigned.insert(key(t, id), on);
            }
        }
        let before = assigned.clone();
        let p = policy(&assigned, &["g1", "g2"], &[]);
        settle_around(&mut assigned, &p, &servers, &pinned);
        for k in &pinned {
            assert_eq!(assigned.get(k), before.get(k), "{k} moved: {assigned:?}");
        }
        for t in ["c", "d"] {
            let counts: BTreeMap<&String, usize> = servers
                .iter()
                .map(|s| (s, per_server(&assigned, t).get(s).copied().unwrap_or(0)))
                .collect();
            let fewest = counts.values().min().copied().unwrap_or(0);
            for (s, n) in &counts {
                let stuck = pinned
                    .iter()
                    .filter(|k| k.table == TableName::parse(t).unwrap())
                    .filter(|k| assigned.get(*k) == Some(*s))
                    .count();
                assert!(
                    *n <= (fewest + 1).max(stuck),
                    "{t} on {s}: {counts:?}, pinned {pinned:?}"
                );
            }
        }
        assert_eq!(
            per_server(&assigned, "g2").len(),
            1,
            "a grouped table split"
        );
    }
}

#[test]
fn one_placer_scatters_a_pass_of_orphans_and_keeps_groups_whole() {
    let servers = live(&["rs1", "rs2", "rs3"]);
    let mut assigned = Assignments::new();
    assigned.insert(key("events", 1), "rs1".into());
    let orphans: Vec<RegionKey> = (2..=12)
        .map(|i| key("events", i))
        .chain((20..24).map(|i| key("orders", i)))
        .collect();
    let p = Policy::new(
        assigned.keys().chain(&orphans),
        &[(TableName::parse("orders").unwrap(), Placement::Grouped)]
            .into_iter()
            .collect(),
        &[],
    );
    let mut placer = p.placer(&assigned, &servers);
    for k in &orphans {
        let (to, _) = placer.target(k).unwrap();
        placer.placed(k, &to);
        assigned.insert(k.clone(), to);
    }
    let counts = per_server(&assigned, "events");
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [4, 4, 4]);
    assert_eq!(per_server(&assigned, "orders").len(), 1, "{assigned:?}");
}

#[test]
fn a_merges_two_held_regions_gather_and_the_rest_stays() {
    let servers = live(&["rs1", "rs2", "rs3"]);
    let mut assigned = Assignments::new();
    for i in 0..6 {
        assigned.insert(
            key("events", i),
            ["rs1", "rs2", "rs3"][i as usize % 3].into(),
        );
    }
    let before = assigned.clone();
    let events = TableName::parse("events").unwrap();
    let holds = [
        (HoldTarget::region(events.clone(), 1), 9),
        (HoldTarget::region(events.clone(), 2), 9),
    ];
    let p = Policy::new(assigned.keys(), &BTreeMap::new(), &holds);
    assert!(p.held(&key("events", 1)) && p.held(&key("events", 2)));
    assert!(!p.held(&key("events", 0)));
    assert_eq!(p.unit(&key("events", 1)), p.unit(&key("events", 2)));
    assert!(matches!(p.unit(&key("events", 3)), Unit::Region(_)));
    let moves = p.gather_held(&assigned, &servers);
    assert_eq!(moves.len(), 1, "{moves:?}");
    for (k, s, _) in moves {
        assigned.insert(k, s);
    }
    assert_eq!(assigned[&key("events", 1)], assigned[&key("events", 2)]);
    for i in [0, 3, 4, 5] {
        assert_eq!(assigned[&key("events", i)], before[&key("events", i)]);
    }
    // Nothing else is balanced while the hold lasts.
    assert!(p
        .rebalance(&assigned, &servers, true, &BTreeSet::new())
        .is_empty());
    assert!(p.gather_held(&assigned, &servers).is_empty());
}

#[test]
fn a_merge_on_a_grouped_table_holds_its_group_where_it_is() {
    let servers = live(&["rs1", "rs2"]);
    let mut assigned = Assignments::new();
    for i in 0..4 {
        assigned.insert(key("orders", i), "rs1".into());
    }
    assigned.insert(key("orders.idx.by_user", 9), "rs1".into());
    let orders = TableName::parse("orders").unwrap();
    let holds = [
        (HoldTarget::region(orders.clone(), 1), 5),
        (HoldTarget::region(orders.clone(), 2), 5),
    ];
    let p = Policy::new(assigned.keys(), &BTreeMap::new(), &holds);
    // The held regions stay in their group's unit, which is held whole.
    assert_eq!(p.unit(&key("orders", 1)), p.unit(&key("orders", 3)));
    assert_eq!(
        p.unit(&key("orders", 1)),
        p.unit(&key("orders.idx.by_user", 9))
    );
    assert!(p.held(&key("orders", 0)) && p.held(&key("orders", 2)));
    assert!(p.gather_held(&assigned, &servers).is_empty());
    assert!(p
        .rebalance(&assigned, &servers, true, &BTreeSet::new())
        .is_empty());
    // With a whole-table hold of the same spread table, the table's unit wins too.
    let mut spread = Assignments::new();
    for i in 0..4 {
        spread.insert(key("events", i), ["rs1", "rs2"][i as usize % 2].into());
    }
    let events = TableName::parse("events").unwrap();
    let holds = [
        (HoldTarget::region(events.clone(), 1), 5),
        (HoldTarget::region(events.clone(), 2), 5),
        (HoldTarget::table(events), 6),
    ];
    let p = Policy::new(spread.keys(), &BTreeMap::new(), &holds);
    assert_eq!(p.unit(&key("events", 1)), p.unit(&key("events", 0)));
    for (k, s, _) in p.gather_held(&spread, &servers) {
        spread.insert(k, s);
    }
    assert_eq!(per_server(&spread, "events").len(), 1, "{spread:?}");
}
