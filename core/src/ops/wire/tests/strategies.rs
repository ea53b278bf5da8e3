//! Strategies for the wire tests: every operation built through the public builders, with
//! the values (filters, time ranges, durabilities) they hold.

use crate::cell::{Cell, CellType, RowResult};
use crate::filter::{Comparator, CompareOp, Filter};
use crate::ops::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Delete, Get, Increment, Mutation, Put,
    RowMutations, Scan, TimeRange,
};
use crate::wal::Durability;
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;

pub(super) fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..max)
}

/// Short names from a tiny alphabet, so that markers and columns often share a family.
pub(super) fn name() -> impl Strategy<Value = Vec<u8>> {
    vec(b'a'..b'c', 0..3)
}

pub(super) fn durability() -> impl Strategy<Value = Durability> {
    prop_oneof![
        Just(Durability::SkipWal),
        Just(Durability::AsyncWal),
        Just(Durability::SyncWal),
        Just(Durability::FsyncWal),
    ]
}

pub(super) fn time_range() -> impl Strategy<Value = TimeRange> {
    prop_oneof![
        Just(TimeRange::ALL),
        any::<u64>().prop_map(TimeRange::at),
        (any::<u64>(), any::<u64>()).prop_filter_map("empty", |(a, b)| TimeRange::new(a, b).ok()),
    ]
}

pub(super) fn compare_op() -> impl Strategy<Value = CompareOp> {
    prop_oneof![
        Just(CompareOp::Less),
        Just(CompareOp::LessOrEqual),
        Just(CompareOp::Equal),
        Just(CompareOp::NotEqual),
        Just(CompareOp::GreaterOrEqual),
        Just(CompareOp::Greater),
    ]
}

pub(super) fn filter() -> impl Strategy<Value = Filter> {
    let leaf = prop_oneof![
        bytes(4).prop_map(Filter::prefix),
        (compare_op(), bytes(4)).prop_map(|(op, v)| Filter::Value(op, Comparator::binary(v))),
        (compare_op(), "[a-z.*]{0,4}").prop_map(|(op, re)| Filter::Row(op, Comparator::regex(re))),
        Just(Filter::FirstKeyOnly),
        any::<bool>().prop_map(|len_as_value| Filter::KeyOnly { len_as_value }),
        any::<u64>().prop_map(Filter::Page),
        vec(any::<u64>(), 0..4).prop_map(Filter::Timestamps),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|f| Filter::WhileMatch(Box::new(f))),
            vec(inner.clone(), 0..3).prop_map(Filter::all),
            vec(inner, 0..3).prop_map(Filter::any),
        ]
    })
}

prop_compose! {
    pub(super) fn put()(
        row in bytes(8),
        touch in any::<bool>(),
        ts in of(any::<u64>()),
        columns in vec((name(), bytes(4), of(any::<u64>()), bytes(16)), 0..6),
        durability in durability(),
        ttl in of(1u64..),
    ) -> Put {
        let mut p = if touch { Put::touch(&row) } else { Put::new(&row) };
        if let Some(ts) = ts {
            p = p.timestamp(ts);
        }
        for (f, q, ts, v) in columns {
            p = match ts {
                Some(ts) => p.add_column_ts(f, q, ts, v),
                None => p.add_column(f, q, v),
            };
        }
        p = p.durability(durability);
        if let Some(ttl) = ttl {
            p = p.ttl_ms(ttl);
        }
        p
    }
}

prop_compose! {
    pub(super) fn delete()(
        row in bytes(8),
        ts in of(any::<u64>()),
        markers in vec((0u8..7, name(), bytes(4), any::<u64>()), 0..6),
        durability in durability(),
    ) -> Delete {
        let mut d = Delete::new(&row);
        if let Some(ts) = ts {
            d = d.timestamp(ts);
        }
        for (kind, f, q, ts) in markers {
            d = match kind {
                0 => d.add_column(f, q),
                1 => d.add_column_ts(f, q, ts),
                2 => d.add_columns(f, q),
                3 => d.add_columns_ts(f, q, ts),
                4 => d.add_family(f),
                5 => d.add_family_ts(f, ts),
                _ => d.add_family_version(f, ts),
            };
        }
        d.durability(durability)
    }
}

prop_compose! {
    pub(super) fn get()(
        row in bytes(8),
        columns in vec((name(), of(bytes(4))), 0..4),
        range in time_range(),
        versions in any::<u32>(),
        filter in of(filter()),
    ) -> Get {
        let mut g = Get::new(&row).time_range(range).max_versions(versions);
        for (f, q) in columns {
            g = match q {
                Some(q) => g.add_column(f, q),
                None => g.add_family(f),
            };
        }
        match filter {
            Some(f) => g.filter(f),
            None => g,
        }
    }
}

prop_compose! {
    pub(super) fn scan()(
        (start, stop, prefix) in (of(bytes(6)), of(bytes(6)), of(bytes(4))),
        columns in vec((name(), of(bytes(4))), 0..4),
        range in time_range(),
        (versions, limit, batch) in (any::<u32>(), of(any::<usize>()), of(any::<usize>())),
        flags in any::<[bool; 5]>(),
        filter in of(filter()),
    ) -> Scan {
        let [reverse, prefetch, cache_blocks, raw, pipeline] = flags;
        let mut s = Scan::new()
            .reversed(reverse)
            .time_range(range)
            .max_versions(versions)
            .prefetch(prefetch)
            .cache_blocks(cache_blocks)
            .raw(raw);
        s.pipeline_merges = pipeline; // set by a salted scan, which has no builder for it
        if let Some(r) = start {
            s = s.start_row(r);
        }
        if let Some(r) = stop {
            s = s.stop_row(r);
        }
        if let Some(p) = prefix {
            s = s.with_prefix(p);
        }
        for (f, q) in columns {
            s = match q {
                Some(q) => s.add_column(f, q),
                None => s.add_family(f),
            };
        }
        if let Some(n) = limit {
            s = s.limit(n);
        }
        if let Some(n) = batch {
            s = s.batch(n);
        }
        match filter {
            Some(f) => s.filter(f),
            None => s,
        }
    }
}

prop_compose! {
    pub(super) fn increment()(
        row in bytes(8),
        columns in vec((name(), bytes(4), any::<i64>()), 0..4),
        durability in durability(),
        range in time_range(),
        ttl in of(1u64..),
    ) -> Increment {
        let mut inc = Increment::new(&row).durability(durability).time_range(range);
        for (f, q, n) in columns {
            inc = inc.add_column(f, q, n);
        }
        match ttl {
            Some(t) => inc.ttl_ms(t),
            None => inc,
        }
    }
}

prop_compose! {
    pub(super) fn append()(
        row in bytes(8),
        columns in vec((name(), bytes(4), bytes(8)), 0..4),
        durability in durability(),
        range in time_range(),
        ttl in of(1u64..),
    ) -> Append {
        let mut app = Append::new(&row).durability(durability).time_range(range);
        for (f, q, v) in columns {
            app = app.add_column(f, q, v);
        }
        match ttl {
            Some(t) => app.ttl_ms(t),
            None => app,
        }
    }
}

pub(super) fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        put().prop_map(Mutation::from),
        delete().prop_map(Mutation::from)
    ]
}

prop_compose! {
    pub(super) fn row_mutations()(row in bytes(8), ms in vec(mutation(), 0..4)) -> RowMutations {
        ms.into_iter().fold(RowMutations::new(&row), RowMutations::add)
    }
}

prop_compose! {
    pub(super) fn check_and_mutate()(
        (row, family, qualifier) in (bytes(8), name(), bytes(4)),
        condition in 0u8..3,
        (op, value, filter) in (compare_op(), bytes(6), filter()),
        action in 0u8..4,
        (p, d, rm) in (put(), delete(), row_mutations()),
    ) -> CheckAndMutate {
        let cam = CheckAndMutate::new(&row, family, qualifier);
        let cam = match condition {
            0 => cam.if_value(op, value),
            1 => cam.if_absent(),
            _ => cam.if_matches(filter),
        };
        match action {
            0 => cam,
            1 => cam.then_put(p),
            2 => cam.then_delete(d),
            _ => cam.then_mutate(rm),
        }
    }
}

pub(super) fn batch_op() -> impl Strategy<Value = BatchOp> {
    prop_oneof![
        put().prop_map(BatchOp::Put),
        delete().prop_map(BatchOp::Delete),
        get().prop_map(BatchOp::Get),
        increment().prop_map(BatchOp::Increment),
        append().prop_map(BatchOp::Append),
        row_mutations().prop_map(BatchOp::RowMutations),
        check_and_mutate().prop_map(BatchOp::CheckAndMutate),
    ]
}

pub(super) fn row_result() -> impl Strategy<Value = RowResult> {
    let kind = prop_oneof![
        Just(CellType::Put),
        Just(CellType::ExpiringPut),
        Just(CellType::Delete),
        Just(CellType::DeleteFamilyVersion),
        Just(CellType::DeleteColumn),
        Just(CellType::DeleteFamily),
    ];
    let cell = (bytes(6), name(), bytes(4), any::<u64>(), kind, bytes(8)).prop_map(
        |(row, family, qualifier, timestamp, kind, value)| Cell {
            row: row.into(),
            family: family.into(),
            qualifier: qualifier.into(),
            timestamp,
            kind,
            value: value.into(),
        },
    );
    (bytes(6), vec(cell, 0..4)).prop_map(|(row, cells)| RowResult {
        row: row.into(),
        cells,
    })
}

pub(super) fn batch_outcome() -> impl Strategy<Value = BatchOutcome> {
    prop_oneof![
        Just(BatchOutcome::Done),
        row_result().prop_map(BatchOutcome::Row),
        any::<bool>().prop_map(BatchOutcome::Checked),
    ]
}
