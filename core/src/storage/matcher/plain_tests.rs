//! Tests of [`PlainRow`]: against the general matcher over random rows, and its bounds.

use super::tests::{arb_read, build_row, plain_rules, raw_spec};
use super::*;

/// A read like [`arb_read`]'s (not raw) whose rows are mostly plain puts: a cell is a put
/// three times in four, so that many rows hold no other kind.
fn arb_mostly_puts() -> impl proptest::strategy::Strategy<
    Value = (
        Vec<StoreCell>,
        FamilyRules,
        ReadSpec,
        Option<BTreeSet<Bytes>>,
    ),
> {
    use proptest::strategy::Strategy;
    (
        arb_read(false),
        proptest::collection::vec(
            (0usize..3, 0u64..10, 0usize..24, 1u64..25, 0usize..4),
            0..30,
        ),
        proptest::bool::ANY,
    )
        .prop_map(|((_, mut rules, spec, columns), raw, no_ttl)| {
            let raw: Vec<_> = raw
                .into_iter()
                .map(|(q, ts, k, seq, ttl)| (q, ts, if k < 6 { k } else { 0 }, seq, ttl))
                .collect();
            if no_ttl {
                rules.ttl_ms = None;
            }
            (build_row(&raw), rules, spec, columns)
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 4000,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// The plain-row matcher agrees with the general one: on a row of plain puts it emits
    /// exactly the cells `match_row_into` does (versions, repeated writes, read points, time
    /// ranges, column selections); it refuses reads with a TTL and raw ones; and it aborts
    /// exactly on rows that hold another kind of cell (a marker or a cell TTL, visible or not).
    #[test]
    fn the_plain_row_matcher_agrees_with_the_matcher(
        case in arb_mostly_puts(),
    ) {
        let (cells, rules, spec, columns) = case;
        let mut want = Vec::new();
        match_row_into(cells.clone(), &rules, &spec, columns.as_ref(), |c| want.push(c));
        let Some(mut plain) = PlainRow::new(&rules, &spec, columns.as_ref()) else {
            proptest::prop_assert!(rules.ttl_ms.is_some());
            return Ok(());
        };
        proptest::prop_assert!(rules.ttl_ms.is_none());
        let mut got = Vec::new();
        let mut aborted = false;
        for c in &cells {
            match plain.offer(&c.key.qualifier, c.key.ts, c.key.kind, c.key.seq) {
                Verdict::Skip => {}
                Verdict::Emit => got.push(c.clone()),
                Verdict::Abort => {
                    aborted = true;
                    break;
                }
            }
        }
        let plain_row = cells.iter().all(|c| c.key.kind == CellType::Put);
        // A plain row is given up only past the skip bound (these rows are shorter).
        proptest::prop_assert!(cells.len() <= PLAIN_ROW_MAX_SKIPPED as usize);
        proptest::prop_assert_eq!(aborted, !plain_row);
        if !aborted {
            proptest::prop_assert_eq!(got, want);
        }
    }
}

/// A row of many versions the reader skips (a hot column's updates) is given up to the
/// general path, which seeks past them; one with fewer is matched.
#[test]
fn the_plain_row_matcher_gives_up_rows_of_many_hidden_versions() {
    let rules = plain_rules(1, false);
    let spec = ReadSpec {
        read_point: 1000,
        min_ts: 0,
        max_ts: u64::MAX,
        max_versions: 1,
        now_ms: 1000,
        raw: false,
    };
    let verdicts = |versions: u64| {
        let mut plain = PlainRow::new(&rules, &spec, None).unwrap();
        (0..versions)
            .map(|i| plain.offer(b"q", versions - i, CellType::Put, 1))
            .collect::<Vec<_>>()
    };
    let few = verdicts(u64::from(PLAIN_ROW_MAX_SKIPPED) + 1);
    assert_eq!(few[0], Verdict::Emit);
    assert!(few[1..].iter().all(|v| *v == Verdict::Skip));
    let many = verdicts(u64::from(PLAIN_ROW_MAX_SKIPPED) + 2);
    assert_eq!(many.last(), Some(&Verdict::Abort));
}

#[test]
fn the_plain_row_matcher_refuses_raw_reads() {
    let rules = plain_rules(1, false);
    let spec = raw_spec(1);
    assert!(PlainRow::new(&rules, &spec, None).is_none());
}
