//! What the clients of one phase do, apart from calling an engine: [`PhasePlan`] is the state
//! a phase's clients share (the load's record counter, or a workload's operation mix, key
//! chooser and insert counter), [`Client`] one client's seeded choices, [`Planned`] one
//! operation ready to run, and [`ThreadStats`] what one client measured.
//!
//! Invariants: client `t` of `n` in phase number `p` draws from the same seeded stream
//! whatever the engine, so every engine gets the same operations (but for the interleaving
//! of inserts across clients); a workload's `operations` are split evenly over the clients;
//! an insert's record number is acknowledged once its call returned ([`PhasePlan::done`]),
//! so reads only ever choose acknowledged records.

use super::generators::{key_name, scan_length, InsertCounter, KeyChooser, Op, OpChooser};
use super::{key_chooser, Measured, Settings, Spec, Values, MAX_SCAN_LENGTH};
use crate::workload::FIELDS;
use crate::BenchResult;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Seed of every client's stream.
const SEED: u64 = 0x0059_C5B0;
/// Highest latency the histograms hold (1 hour, in nanoseconds); longer ones are clamped.
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// What a phase's clients share.
pub enum PhaseKind {
    /// The load: the next record number to insert, and how many there are.
    Load {
        /// YCSB's `keysequence`.
        next: AtomicU64,
        /// Records to load.
        records: u64,
    },
    /// A workload.
    Workload {
        /// The operation mix.
        ops: OpChooser,
        /// The key chooser every client starts from (each gets a copy).
        chooser: KeyChooser,
        /// The acknowledged-insert counter, shared by every workload of an engine.
        counter: Arc<InsertCounter>,
        /// Operations in the phase.
        operations: u64,
    },
}

/// One phase, as its clients see it.
pub struct PhasePlan {
    /// `load` or `a`..`f`.
    pub name: &'static str,
    /// The phase's number (0 for the load), for the seeds.
    pub number: u64,
    /// Clients in the phase.
    pub clients: usize,
    /// Field values.
    pub values: Arc<Values>,
    /// The shared state.
    pub kind: PhaseKind,
}

impl PhasePlan {
    /// The load of `s.records` records.
    pub fn load(s: &Settings, values: Arc<Values>) -> Self {
        PhasePlan {
            name: "load",
            number: 0,
            clients: s.threads,
            values,
            kind: PhaseKind::Load {
                next: AtomicU64::new(0),
                records: s.records,
            },
        }
    }

    /// Workload `spec`, phase number `number`, on the records `counter` has acknowledged.
    pub fn workload(
        spec: &Spec,
        number: u64,
        s: &Settings,
        counter: Arc<InsertCounter>,
        values: Arc<Values>,
    ) -> Self {
        PhasePlan {
            name: spec.name,
            number,
            clients: s.threads,
            values,
            kind: PhaseKind::Workload {
                ops: OpChooser::new(spec.proportions),
                chooser: key_chooser(spec, s.operations, &counter),
                counter,
                operations: s.operations,
            },
        }
    }

    /// Client `t`'s state.
    pub fn client(&self, t: usize) -> Client {
        let (chooser, remaining) = match &self.kind {
            PhaseKind::Load { .. } => (None, u64::MAX),
            PhaseKind::Workload {
                chooser,
                operations,
                ..
            } => {
                let (t, n) = (t as u64, self.clients as u64);
                (
                    Some(chooser.clone()),
                    operations * (t + 1) / n - operations * t / n,
                )
            }
        };
        Client {
            rng: StdRng::seed_from_u64(SEED ^ (self.number << 32) ^ t as u64),
            chooser,
            remaining,
        }
    }

    /// Marks `p` done (acknowledges a workload's insert).
    pub fn done(&self, p: &Planned<'_>) {
        if let (Planned::Insert { keynum, .. }, PhaseKind::Workload { counter, .. }) =
            (p, &self.kind)
        {
            counter.acknowledge(*keynum);
        }
    }
}

/// One operation, ready to run.
pub enum Planned<'a> {
    /// Insert a new record.
    Insert {
        /// Its record number.
        keynum: u64,
        /// Its key.
        key: String,
        /// Its field values.
        fields: [&'a [u8]; FIELDS],
    },
    /// Read every field of a record.
    Read {
        /// The record's key.
        key: String,
    },
    /// Write one field of a record (after reading the record, for a read-modify-write).
    Update {
        /// The record's key.
        key: String,
        /// Which field.
        field: usize,
        /// Its new value.
        value: &'a [u8],
        /// True for a read-modify-write.
        read_first: bool,
    },
    /// Read `len` records from `key` on.
    Scan {
        /// The start key.
        key: String,
        /// Rows to read.
        len: usize,
    },
}

impl Planned<'_> {
    /// The operation's kind.
    pub fn op(&self) -> Op {
        match self {
            Planned::Insert { .. } => Op::Insert,
            Planned::Read { .. } => Op::Read,
            Planned::Update {
                read_first: false, ..
            } => Op::Update,
            Planned::Update { .. } => Op::ReadModifyWrite,
            Planned::Scan { .. } => Op::Scan,
        }
    }
}

/// One client's seeded choices.
pub struct Client {
    rng: StdRng,
    chooser: Option<KeyChooser>,
    remaining: u64,
}

impl Client {
    /// The client's next operation, `None` once its share is done.
    pub fn plan<'a>(&mut self, phase: &'a PhasePlan) -> Option<Planned<'a>> {
        let values = &*phase.values;
        match &phase.kind {
            PhaseKind::Load { next, records } => {
                let keynum = next.fetch_add(1, Ordering::Relaxed);
                (keynum < *records).then(|| Planned::Insert {
                    keynum,
                    key: key_name(keynum),
                    fields: values.row(&mut self.rng),
                })
            }
            PhaseKind::Workload { ops, counter, .. } => {
                if self.remaining == 0 {
                    return None;
                }
                self.remaining -= 1;
                let op = ops.next(&mut self.rng);
                if op == Op::Insert {
                    let keynum = counter.next_value();
                    return Some(Planned::Insert {
                        keynum,
                        key: key_name(keynum),
                        fields: values.row(&mut self.rng),
                    });
                }
                let chooser = self.chooser.as_mut()?;
                let key = key_name(chooser.next_keynum(&mut self.rng, counter));
                Some(match op {
                    Op::Read => Planned::Read { key },
                    Op::Scan => Planned::Scan {
                        key,
                        len: scan_length(&mut self.rng, MAX_SCAN_LENGTH),
                    },
                    _ => Planned::Update {
                        key,
                        field: self.rng.random_range(0..FIELDS),
                        value: values.pick(&mut self.rng),
                        read_first: op == Op::ReadModifyWrite,
                    },
                })
            }
        }
    }
}

/// What one client measured.
pub struct ThreadStats {
    latency: Histogram<u64>,
    by_op: [u64; 5],
    scan_rows: u64,
}

impl ThreadStats {
    /// Nothing measured yet.
    pub fn new() -> BenchResult<Self> {
        Ok(ThreadStats {
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)?,
            by_op: [0; 5],
            scan_rows: 0,
        })
    }

    /// Records `p`, which took `took` and returned `rows` rows (scans: an error if none).
    pub fn record(&mut self, p: &Planned<'_>, took: Duration, rows: u64) -> BenchResult<()> {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.latency.saturating_record(ns.max(1));
        self.by_op[p.op().index()] += 1;
        if let Planned::Scan { key, .. } = p {
            if rows == 0 {
                return Err(format!("scan from {key} found no row").into());
            }
            self.scan_rows += rows;
        }
        Ok(())
    }
}

/// The clients' figures merged into one phase that took `elapsed`.
pub fn merge(
    phase: &'static str,
    elapsed: Duration,
    clients: Vec<ThreadStats>,
) -> BenchResult<Measured> {
    let mut total = ThreadStats::new()?;
    for c in clients {
        total.latency.add(&c.latency)?;
        for (a, b) in total.by_op.iter_mut().zip(c.by_op) {
            *a += b;
        }
        total.scan_rows += c.scan_rows;
    }
    Ok(Measured {
        phase,
        ops: total.by_op.iter().sum(),
        elapsed,
        latency: total.latency,
        by_op: total.by_op,
        scan_rows: total.scan_rows,
    })
}
