//! Splits and merges as procedures persisted in etcd (HBase 2's `SplitTableRegionProcedure`
//! and `MergeTableRegionsProcedure`): a client writes the procedure
//! (`P/procedures/<id:016x>`, a [`ProcedureRecord`]), the master runs it (`master`'s
//! procedures: it sends the split or merge to the server of the region, gathering a merge's
//! two regions on one server first) and writes its outcome in the record, and the client
//! reads the outcome and deletes the record. A master that dies while one runs is replaced
//! by one that finds the record and runs it on. A region server asks for the split of a
//! region grown past its split size the same way (`asks::MasterSplits`), and waits for
//! nothing: the master deletes that record once it is finished.
//!
//! A record moves from [`ProcedureState::Requested`] to [`ProcedureState::Running`] before
//! the master first sends anything, then to [`ProcedureState::Done`] or
//! [`ProcedureState::Failed`]. The record keeps the bounds of the regions it acts on, as the
//! client read them, so that a procedure found running whose regions are gone is known by
//! what replaced them ([`outcome_from_list`]): its server finished and listed the new
//! regions, and the master that sent it died before it wrote the outcome.
//!
//! The value is the record in postcard, after a version byte ([`RECORD_VERSION`]); a value
//! of another version or shape is an error ([`Error::Corruption`]), never a default.
//!
//! Invariants: only a client or a region server creates a record (create-if-absent: ids
//! never collide), a server only for a region with no unfinished procedure, and
//! only the master of a term changes one, in a transaction that compares the term and the
//! record's revision as the master read it; a record is done or failed only once, and then
//! never runs again; a procedure's split or merge is
//! sent only while its regions are listed, so one found running whose regions are gone is
//! never sent again.

use crate::coordination::{absent, delete, put, unchanged};
use crate::election::Leadership;
use crate::proto::TxnRequest;
use crate::EtcdCoordination;
use basalt_core::coord::RegionRecord;
use basalt_core::ErrorWire;
use basalt_core::{Error, PreSplit, Result, TableDescriptor, TableName};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The version byte in front of every record.
pub(crate) const RECORD_VERSION: u8 = 1;

/// The first pause of a client waiting for its procedure's outcome; it doubles up to
/// [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(20);
/// The longest pause of a client waiting for its procedure's outcome.
const MAX_POLL: Duration = Duration::from_millis(250);

/// The bounds of a region as listed: start row (inclusive) and end row (exclusive, empty
/// for the table's end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Bounds {
    /// The first row.
    pub(crate) start: Vec<u8>,
    /// The row past the last (empty: the table's end).
    pub(crate) end: Vec<u8>,
}

impl Bounds {
    fn of(r: &RegionRecord) -> Self {
        Bounds {
            start: r.start.to_vec(),
            end: r.end.to_vec(),
        }
    }

    /// Whether `r` lies within these bounds.
    fn contains(&self, r: &RegionRecord) -> bool {
        r.start.as_ref() >= self.start.as_slice()
            && (self.end.is_empty() || (!r.end.is_empty() && r.end.as_ref() <= self.end.as_slice()))
    }
}

/// What a procedure does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ProcedureKind {
    /// Split `region` of `table` (at `at`, or where its server chooses).
    Split {
        /// The table.
        table: TableName,
        /// The region split.
        region: u64,
        /// The row the daughters meet at, if the client chose one.
        at: Option<Vec<u8>>,
        /// The region's bounds when the client asked.
        bounds: Bounds,
    },
    /// Merge adjacent regions `first` and `second` of `table`.
    Merge {
        /// The table.
        table: TableName,
        /// The lower region.
        first: u64,
        /// The upper region.
        second: u64,
        /// The bounds of the two, together, when the client asked.
        bounds: Bounds,
    },
    /// Create a table (HBase 2's `CreateTableProcedure`), pre-split by `split`.
    CreateTable {
        /// The new table.
        desc: TableDescriptor,
        /// Its first regions.
        split: PreSplit,
    },
    /// Delete a disabled table (HBase 2's `DeleteTableProcedure`): the procedure holds the
    /// table, so the master gathers its regions on one server first.
    DeleteTable {
        /// The table.
        table: TableName,
    },
}

impl ProcedureKind {
    /// The operation's name, as the RPC's.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ProcedureKind::Split { .. } => "split_region",
            ProcedureKind::Merge { .. } => "merge_regions",
            ProcedureKind::CreateTable { .. } => "create_table",
            ProcedureKind::DeleteTable { .. } => "delete_table",
        }
    }

    /// The table it acts on.
    pub(crate) fn table(&self) -> &TableName {
        match self {
            ProcedureKind::Split { table, .. }
            | ProcedureKind::Merge { table, .. }
            | ProcedureKind::DeleteTable { table } => table,
            ProcedureKind::CreateTable { desc, .. } => &desc.name,
        }
    }

    /// Whether it acts on its whole table (a create or delete), not on some regions.
    pub(crate) fn whole_table(&self) -> bool {
        matches!(
            self,
            ProcedureKind::CreateTable { .. } | ProcedureKind::DeleteTable { .. }
        )
    }

    /// The regions it acts on (none for a procedure of a whole table).
    pub(crate) fn regions(&self) -> Vec<u64> {
        match self {
            ProcedureKind::Split { region, .. } => vec![*region],
            ProcedureKind::Merge { first, second, .. } => vec![*first, *second],
            ProcedureKind::CreateTable { .. } | ProcedureKind::DeleteTable { .. } => Vec::new(),
        }
    }

    /// Whether it and `other` may not run at once: a procedure of a whole table and any
    /// other of that table, or two that act on a region in common.
    pub(crate) fn conflicts(&self, other: &ProcedureKind) -> bool {
        if self.table() != other.table() {
            return false;
        }
        let theirs = other.regions();
        self.whole_table()
            || other.whole_table()
            || self.regions().iter().any(|r| theirs.contains(r))
    }

    /// The regions it acts on, as keys.
    pub(crate) fn region_keys(&self) -> Vec<basalt_core::coord::RegionKey> {
        let table = self.table();
        self.regions()
            .into_iter()
            .map(|r| basalt_core::coord::RegionKey::new(table.clone(), r))
            .collect()
    }

    /// The bounds of the regions it acts on, together (none for a whole table).
    pub(crate) fn bounds(&self) -> Option<&Bounds> {
        match self {
            ProcedureKind::Split { bounds, .. } | ProcedureKind::Merge { bounds, .. } => {
                Some(bounds)
            }
            ProcedureKind::CreateTable { .. } | ProcedureKind::DeleteTable { .. } => None,
        }
    }
}

/// What a procedure came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Outcome {
    /// A split's daughters, lower first; `None` when the region had no row to split at.
    Split(Option<(u64, u64)>),
    /// A merge's merged region.
    Merged(u64),
    /// A table created or deleted.
    Table,
}

/// Where a procedure stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ProcedureState {
    /// Written by its client; nothing sent yet.
    Requested,
    /// The master may have sent it to a server.
    Running,
    /// Finished, with what it came to.
    Done(Outcome),
    /// Refused, with why (the engine's error, or the regions gone before it ran).
    Failed(ErrorWire),
}

/// A procedure as etcd keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProcedureRecord {
    /// What it does.
    pub(crate) kind: ProcedureKind,
    /// Where it stands.
    pub(crate) state: ProcedureState,
}

impl ProcedureRecord {
    /// The record's value: [`RECORD_VERSION`], then the record in postcard.
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let mut out = vec![RECORD_VERSION];
        let body = postcard::to_allocvec(self)
            .map_err(|e| Error::Io(std::io::Error::other(format!("a procedure record: {e}"))))?;
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// The record of `key`'s `value`.
    pub(crate) fn decode(key: &[u8], value: &[u8]) -> Result<Self> {
        match value.split_first() {
            Some((&RECORD_VERSION, body)) => postcard::from_bytes(body)
                .map_err(|e| crate::keys::corrupt(key, &format!("not a procedure record: {e}"))),
            Some((v, _)) => Err(crate::keys::corrupt(
                key,
                &format!("a procedure record of unknown version {v}"),
            )),
            None => Err(crate::keys::corrupt(key, "an empty procedure record")),
        }
    }

    /// Whether it is done or failed.
    pub(crate) fn finished(&self) -> bool {
        matches!(
            self.state,
            ProcedureState::Done(_) | ProcedureState::Failed(_)
        )
    }
}

/// A procedure as read from etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredProcedure {
    /// Its id.
    pub(crate) id: u64,
    /// The record.
    pub(crate) record: ProcedureRecord,
    /// The revision of the record's last change (what the master's next change compares).
    pub(crate) revision: i64,
}

/// What replaced a procedure's regions, from the table's region list `listed`, when none of
/// them is listed any more: a split's two daughters (the regions within its bounds that
/// start and end where it did, meeting at its row when it named one), a merge's merged
/// region (the region with its bounds). `None` while the list does not show it (a list
/// being mended, a split whose daughters split again, another change of the regions).
pub(crate) fn outcome_from_list(kind: &ProcedureKind, listed: &[RegionRecord]) -> Option<Outcome> {
    let bounds = kind.bounds()?;
    let within: Vec<&RegionRecord> = listed.iter().filter(|r| bounds.contains(r)).collect();
    if within
        .iter()
        .any(|r| kind.regions().contains(&r.key.region))
    {
        return None;
    }
    match kind {
        ProcedureKind::Split { .. } => match within.as_slice() {
            [lo, hi]
                if Bounds::of(lo).start == bounds.start
                    && Bounds::of(hi).end == bounds.end
                    && split_row(kind).is_none_or(|at| lo.end.as_ref() == at) =>
            {
                let (lo, hi) = (lo.key.region, hi.key.region);
                Some(Outcome::Split(Some((lo, hi))))
            }
            _ => None,
        },
        ProcedureKind::Merge { .. } => match within.as_slice() {
            [one] if Bounds::of(one) == *bounds => Some(Outcome::Merged(one.key.region)),
            _ => None,
        },
        ProcedureKind::CreateTable { .. } | ProcedureKind::DeleteTable { .. } => None,
    }
}

/// The row a split procedure names, if it names one.
fn split_row(kind: &ProcedureKind) -> Option<&[u8]> {
    match kind {
        ProcedureKind::Split { at, .. } => at.as_deref(),
        _ => None,
    }
}

/// Every procedure in etcd, by id. A key or record that does not read (another
/// version's, damaged) is left out with a warning: it must not stop the master.
pub(crate) async fn procedures(coord: &EtcdCoordination) -> Result<Vec<StoredProcedure>> {
    let mut out = Vec::new();
    for kv in coord
        .read_prefix(coord.keys.kind_prefix("procedures"))
        .await?
    {
        let read = coord.keys.procedure_of(&kv.key).and_then(|id| {
            ProcedureRecord::decode(&kv.key, &kv.value).map(|record| StoredProcedure {
                id,
                record,
                revision: kv.mod_revision,
            })
        });
        match read {
            Ok(p) => out.push(p),
            Err(e) => tracing::warn!(error = %e, "left out a procedure that does not read"),
        }
    }
    Ok(out)
}

/// The procedure `id`, if etcd has it.
pub(crate) async fn procedure(
    coord: &EtcdCoordination,
    id: u64,
) -> Result<Option<ProcedureRecord>> {
    let key = coord.keys.procedure(id);
    let resp = coord.read("procedure", vec![key.clone()]).await?;
    crate::coordination::read_at(&resp, 0)
        .map(|kv| ProcedureRecord::decode(&key, &kv.value))
        .transpose()
}

/// Writes `record` as procedure `id`, as master of `term`, if the record is still the
/// one of `revision`; returns the new revision. Fails with
/// [`Error::CoordinationConflict`] when the term is over or the record changed (or
/// was deleted by its client) since.
pub(crate) async fn update_procedure(
    coord: &EtcdCoordination,
    term: &Leadership,
    id: u64,
    record: &ProcedureRecord,
    revision: i64,
) -> Result<i64> {
    let key = coord.keys.procedure(id);
    let op = put(key.clone(), record.encode()?, 0);
    procedure_txn(coord, term, id, key, revision, op).await
}

/// Deletes procedure `id`, as master of `term`, if the record is still the one of
/// `revision`.
pub(crate) async fn forget_procedure(
    coord: &EtcdCoordination,
    term: &Leadership,
    id: u64,
    revision: i64,
) -> Result<()> {
    let key = coord.keys.procedure(id);
    let op = delete(key.clone());
    procedure_txn(coord, term, id, key, revision, op)
        .await
        .map(|_| ())
}

async fn procedure_txn(
    coord: &EtcdCoordination,
    term: &Leadership,
    id: u64,
    key: Vec<u8>,
    revision: i64,
    op: crate::proto::RequestOp,
) -> Result<i64> {
    let req = TxnRequest {
        compare: vec![coord.fence(term), unchanged(key, revision)],
        success: vec![op],
        failure: Vec::new(),
    };
    let resp = coord.txn("procedure", req, 0).await?;
    if !resp.succeeded {
        return Err(Error::CoordinationConflict(format!(
            "procedure {id:016x}: the master's term {} is over, or the record changed",
            term.revision
        )));
    }
    Ok(resp.header.map_or(revision, |h| h.revision))
}

/// Writes a new procedure of `kind`; returns its id.
pub(crate) async fn submit_procedure(coord: &EtcdCoordination, kind: ProcedureKind) -> Result<u64> {
    let record = ProcedureRecord {
        kind,
        state: ProcedureState::Requested,
    };
    let value = record.encode()?;
    loop {
        // The top bit set: never a lease's id, which a merge's holds are grouped by.
        let id = rand::random::<u64>() | 1 << 63;
        let key = coord.keys.procedure(id);
        let req = TxnRequest {
            compare: vec![absent(key.clone())],
            success: vec![put(key, value.clone(), 0)],
            failure: Vec::new(),
        };
        if coord.txn("procedure", req, 0).await?.succeeded {
            return Ok(id);
        }
    }
}

/// A client's split or merge ([`split`], [`merge`]): writes the procedure, waits up to `timeout` for the master
/// to run it, deletes the record and returns the outcome (or the procedure's error). Past
/// `timeout` the procedure is left to the master, and the call fails with an
/// [`Error::Io`] of kind `TimedOut` (not retried: the procedure may still run).
pub(crate) async fn run(
    coord: &EtcdCoordination,
    kind: ProcedureKind,
    timeout: Duration,
) -> Result<Outcome> {
    let name = kind.name();
    let id = submit_procedure(coord, kind).await?;
    let deadline = Instant::now() + timeout;
    let mut pause = FIRST_POLL;
    loop {
        let state = match procedure(coord, id).await? {
            Some(record) => record.state,
            None => {
                return Err(Error::CoordinationConflict(format!(
                    "{name}: procedure {id:016x} was deleted before it finished"
                )))
            }
        };
        let outcome = match state {
            ProcedureState::Done(outcome) => Ok(outcome),
            ProcedureState::Failed(e) => Err(Error::from(e)),
            ProcedureState::Requested | ProcedureState::Running => {
                if Instant::now() >= deadline {
                    return Err(Error::Io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "{name}: procedure {id:016x} did not finish within {} ms; the \
                             master goes on with it",
                            timeout.as_millis()
                        ),
                    )));
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_POLL);
                continue;
            }
        };
        let req = TxnRequest {
            compare: Vec::new(),
            success: vec![delete(coord.keys.procedure(id))],
            failure: Vec::new(),
        };
        if let Err(e) = coord.txn("procedure", req, 0).await {
            // The master deletes it after PROCEDURE_KEEP.
            tracing::warn!(procedure = %format!("{id:016x}"), error = %e, "a finished procedure was left in etcd");
        }
        return outcome;
    }
}

/// A client's split of `region` of `table` (at `at`, or where its server chooses), as a
/// procedure ([`run`]): the daughters, or `None` when the region has no row to split at.
pub(crate) async fn split(
    coord: &EtcdCoordination,
    table: &TableName,
    region: u64,
    at: Option<&[u8]>,
    timeout: Duration,
) -> Result<Option<(u64, u64)>> {
    let [bounds] = listed_bounds(coord, table, [region]).await?;
    let kind = ProcedureKind::Split {
        table: table.clone(),
        region,
        at: at.map(<[u8]>::to_vec),
        bounds,
    };
    match run(coord, kind, timeout).await? {
        Outcome::Split(daughters) => Ok(daughters),
        other => Err(came_back("split_region", &other)),
    }
}

/// A client's merge of two adjacent regions of `table`, as a procedure ([`run`]): the
/// merged region. Refused as the engine refuses it (one region twice, regions not
/// adjacent) before the master gathers anything.
pub(crate) async fn merge(
    coord: &EtcdCoordination,
    table: &TableName,
    [region_a, region_b]: [u64; 2],
    timeout: Duration,
) -> Result<u64> {
    if region_a == region_b {
        return Err(Error::bad_argument("cannot merge a region with itself"));
    }
    let [a, b] = listed_bounds(coord, table, [region_a, region_b]).await?;
    let (first, second, lower, upper) = if a.start <= b.start {
        (region_a, region_b, a, b)
    } else {
        (region_b, region_a, b, a)
    };
    if lower.end.is_empty() || lower.end != upper.start {
        return Err(Error::bad_argument(format!(
            "regions {region_a} and {region_b} of {table} are not adjacent"
        )));
    }
    let kind = ProcedureKind::Merge {
        table: table.clone(),
        first,
        second,
        bounds: Bounds {
            start: lower.start,
            end: upper.end,
        },
    };
    match run(coord, kind, timeout).await? {
        Outcome::Merged(merged) => Ok(merged),
        other => Err(came_back("merge_regions", &other)),
    }
}

/// A client's create of a table, as a procedure ([`run`]).
pub(crate) async fn create_table(
    coord: &EtcdCoordination,
    desc: TableDescriptor,
    split: PreSplit,
    timeout: Duration,
) -> Result<()> {
    table_outcome(run(coord, ProcedureKind::CreateTable { desc, split }, timeout).await?)
}

/// A client's delete of a disabled table, as a procedure ([`run`]).
pub(crate) async fn delete_table(
    coord: &EtcdCoordination,
    table: &TableName,
    timeout: Duration,
) -> Result<()> {
    let kind = ProcedureKind::DeleteTable {
        table: table.clone(),
    };
    table_outcome(run(coord, kind, timeout).await?)
}

fn table_outcome(outcome: Outcome) -> Result<()> {
    match outcome {
        Outcome::Table => Ok(()),
        other => Err(came_back("a table's procedure", &other)),
    }
}

/// The error for a procedure of `what` whose outcome is another kind's.
fn came_back(what: &str, outcome: &Outcome) -> Error {
    Error::CoordinationConflict(format!("{what}: the procedure came back as {outcome:?}"))
}

/// The bounds of `regions` of `table` as etcd lists them; [`Error::RegionNotFound`] for
/// one it does not list (and [`Error::TableNotFound`] when it lists none of the table's).
pub(crate) async fn listed_bounds<const N: usize>(
    coord: &EtcdCoordination,
    table: &TableName,
    regions: [u64; N],
) -> Result<[Bounds; N]> {
    use basalt_core::coord::Coordination;
    let listed = coord.regions(table).await?;
    if listed.is_empty() {
        return Err(Error::TableNotFound(table.to_string()));
    }
    let mut out = Vec::with_capacity(N);
    for region in regions {
        let r = listed
            .iter()
            .find(|r| r.key.region == region)
            .ok_or_else(|| Error::RegionNotFound {
                table: table.to_string(),
                id: region,
            })?;
        out.push(Bounds::of(r));
    }
    out.try_into()
        .map_err(|_| Error::bad_argument("the regions' bounds did not come out one each"))
}

#[cfg(test)]
mod tests;
