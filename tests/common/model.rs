//! The reference model of one Basalt table: every cell and delete marker ever written, read
//! back by applying HBase's rules literally, the way the module doc of
//! `core/src/storage/matcher/mod.rs` states them. That doc is the specification; the rule numbers
//! below are its numbers.
//!
//! 1. Read points: the model has none. Operations are applied one at a time and every read
//!    sees every earlier write, which is what a single client gets from the engine.
//! 2. A delete marker applies when its timestamp is at or after the read's time-range minimum
//!    (and, when the marker keeps deleted cells, before the maximum too: in a family with
//!    `KEEP_DELETED_CELLS` true, or `TTL` while the marker is younger than the TTL). An applying
//!    DeleteFamily masks the family's puts with `ts <=` its own, DeleteFamilyVersion those at
//!    exactly its `ts`, DeleteColumn the column's puts with `ts <=` its own, Delete the
//!    column's put at exactly its `ts`, whatever order the marker and the put were written in.
//! 3. Of several puts at one timestamp only the latest write counts. The model simply
//!    overwrites: an older write at the same timestamp can never be seen again, because
//!    every mask that hides the newer write hides it too.
//! 4. Per column, of the unmasked versions newest first, the family keeps the first
//!    `max_versions`; of these, one older than the TTL is dropped unless it is among the
//!    first `min_versions`, and one whose own TTL ran out (a put with a cell TTL) is dropped
//!    whatever `min_versions` says, though it was counted. A major compaction forgets such a
//!    version only when no version older than it stays.
//! 5. Of what remains, the versions inside the read's time range `[min, max)` are returned,
//!    newest first, at most the reader's `max_versions` of them per column.
//!
//! Writes: a family marker replaces the markers of its family listed before it in the same
//! delete (HBase 2's `Delete.addFamily`). A delete marker without an explicit timestamp gets
//! the delete's timestamp, and a
//! delete without one gets the server's clock. A "delete the latest version" marker
//! ([`DeleteKind::Version`] with `ts: None` in a delete without a timestamp) takes the
//! timestamp of the column's newest visible version just before the delete (rules 2-4 with
//! no time range); when the column shows nothing it writes nothing. Every marker of one
//! delete is resolved against the state before that delete, and as in HBase's
//! `HRegion.prepareDeleteTimestamps` the n-th "latest version" marker of one column in one
//! delete takes the n-th newest visible version (nothing when the column shows fewer). A
//! delete with no marker at all deletes the whole row: a DeleteFamily on every family.
//!
//! Clock: the model reads the wall clock for server-assigned delete timestamps and for TTL.
//! It cannot know the exact millisecond the engine used, so results are exact only when the
//! explicit timestamps and time ranges a test uses stay far from the current time: small
//! numbers such as 1..100 (every TTL has long expired them, and a server-time marker lies
//! above all of them) or numbers near `u64::MAX` (never expired, above every server-time
//! marker). Puts must carry explicit timestamps, since the model could not predict the value
//! a server-assigned one would take.
//!
//! Compaction: flushes and minor compactions change no answer, so the model ignores them;
//! raw reads aside, which show masked puts until a flush or compaction happens to drop
//! them, so [`Model::check_raw_scan`] accepts every answer some choice of dropped writes
//! gives. The model keeps every write of a version for that (`RowFamily::older`).
//! A major compaction ([`Model::major_compact`], applied when the engine's major compaction
//! ran on a flushed table) forgets for good what HBase's major compaction removes, so later
//! answers change as the reference guide says ("Major compactions change query results"):
//! without keep-deleted-cells every delete marker goes, with the puts it masked, and per
//! column only the versions rule 4 keeps stay (the newest `max_versions` unmasked ones, minus
//! expired ones beyond `min_versions`), so a later delete no longer uncovers an older
//! version, and a later put below a forgotten marker is no longer masked. With
//! keep-deleted-cells markers and masked puts stay; a put goes only when the versions newer
//! than it that no marker masks already number `max_versions` (or `min_versions` while it is
//! expired), as no time range can then show it.
//!
//! Operations are plain structs ([`PutSpec`], [`DeleteSpec`], [`GetSpec`], [`ScanSpec`])
//! that the model applies and that build the engine's request (`to_put`, `to_delete`,
//! `to_get`, `to_scan`), so a test feeds one value to both sides. Reads return the engine's
//! own [`RowResult`] type, so results compare with `==`.
#![allow(dead_code)] // every test binary uses a different part of the model

use basalt::client::{
    CompareOp, Condition, Delete, DeleteKind, Get, Put, RowResult, Scan, TimeRange,
};
use basalt::{
    Cell, CellType, Comparator, Filter, KeepDeletedCells, TableDescriptor, Timestamp,
    LATEST_TIMESTAMP,
};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// Bytes from anything byte-like.
pub fn b(x: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(x.as_ref())
}

/// Milliseconds since the Unix epoch: the model's stand-in for the server's clock.
pub fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A put: cells `(family, qualifier, timestamp, value)` of one row, every one with an
/// explicit timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutSpec {
    /// The row.
    pub row: Bytes,
    /// `(family, qualifier, timestamp, value)`.
    pub cells: Vec<(Bytes, Bytes, Timestamp, Bytes)>,
    /// The cells' own time to live in milliseconds (`Put::ttl_ms`).
    pub ttl: Option<u64>,
}

impl PutSpec {
    /// A put to `row` with no cell yet.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        PutSpec {
            row: b(row),
            cells: Vec::new(),
            ttl: None,
        }
    }

    /// Gives the cells their own time to live.
    pub fn ttl(mut self, ttl_ms: u64) -> Self {
        self.ttl = Some(ttl_ms);
        self
    }

    /// Adds a cell.
    pub fn cell(
        mut self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        ts: Timestamp,
        value: impl AsRef<[u8]>,
    ) -> Self {
        self.cells.push((b(family), b(qualifier), ts, b(value)));
        self
    }

    /// The engine's request with every cell at the server's time (no timestamp).
    pub fn to_put_at_server_time(&self) -> Put {
        let put = self
            .cells
            .iter()
            .fold(Put::new(&self.row), |p, (f, q, _, v)| p.add_column(f, q, v));
        match self.ttl {
            Some(ttl) => put.ttl_ms(ttl),
            None => put,
        }
    }

    /// The engine's request.
    pub fn to_put(&self) -> Put {
        let put = self
            .cells
            .iter()
            .fold(Put::new(&self.row), |p, (f, q, ts, v)| {
                p.add_column_ts(f, q, *ts, v)
            });
        match self.ttl {
            Some(ttl) => put.ttl_ms(ttl),
            None => put,
        }
    }
}

/// A delete: markers of one row, or the whole row when `kinds` is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteSpec {
    /// The row.
    pub row: Bytes,
    /// The delete's timestamp; `None` means the server's clock.
    pub ts: Option<Timestamp>,
    /// The markers, in the engine's own terms; empty deletes the whole row.
    pub kinds: Vec<DeleteKind>,
}

impl DeleteSpec {
    /// A delete of `row` at the server's time (the whole row unless markers are added).
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        DeleteSpec {
            row: b(row),
            ts: None,
            kinds: Vec::new(),
        }
    }

    /// Sets the delete's timestamp.
    pub fn at(mut self, ts: Timestamp) -> Self {
        self.ts = Some(ts);
        self
    }

    /// Adds a marker.
    pub fn kind(mut self, k: DeleteKind) -> Self {
        self.kinds.push(k);
        self
    }

    /// Deletes the latest version of a column (or the one at the delete's timestamp when the
    /// delete has one).
    pub fn latest(self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.kind(DeleteKind::Version {
            family: b(family),
            qualifier: b(qualifier),
            ts: None,
        })
    }

    /// Deletes the version of a column at exactly `ts`.
    pub fn version(
        self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        ts: Timestamp,
    ) -> Self {
        self.kind(DeleteKind::Version {
            family: b(family),
            qualifier: b(qualifier),
            ts: Some(ts),
        })
    }

    /// Deletes the versions of a column with timestamps `<= ts` (the delete's when `None`).
    pub fn column(
        self,
        family: impl AsRef<[u8]>,
        qualifier: impl AsRef<[u8]>,
        ts: Option<Timestamp>,
    ) -> Self {
        self.kind(DeleteKind::Column {
            family: b(family),
            qualifier: b(qualifier),
            ts,
        })
    }

    /// Deletes a family's cells with timestamps `<= ts` (the delete's when `None`).
    pub fn family(self, family: impl AsRef<[u8]>, ts: Option<Timestamp>) -> Self {
        self.kind(DeleteKind::Family {
            family: b(family),
            ts,
        })
    }

    /// Deletes a family's cells at exactly `ts`.
    pub fn family_version(self, family: impl AsRef<[u8]>, ts: Timestamp) -> Self {
        self.kind(DeleteKind::FamilyVersion {
            family: b(family),
            ts,
        })
    }

    /// The engine's request.
    pub fn to_delete(&self) -> Delete {
        let d = match self.ts {
            Some(ts) => Delete::new(&self.row).timestamp(ts),
            None => Delete::new(&self.row),
        };
        self.kinds.iter().fold(d, |d, k| match k {
            DeleteKind::Version {
                family,
                qualifier,
                ts: None,
            } => d.add_column(family, qualifier),
            DeleteKind::Version {
                family,
                qualifier,
                ts: Some(ts),
            } => d.add_column_ts(family, qualifier, *ts),
            DeleteKind::Column {
                family,
                qualifier,
                ts: None,
            } => d.add_columns(family, qualifier),
            DeleteKind::Column {
                family,
                qualifier,
                ts: Some(ts),
            } => d.add_columns_ts(family, qualifier, *ts),
            DeleteKind::Family { family, ts: None } => d.add_family(family),
            DeleteKind::Family {
                family,
                ts: Some(ts),
            } => d.add_family_ts(family, *ts),
            DeleteKind::FamilyVersion { family, ts } => d.add_family_version(family, *ts),
        })
    }
}

/// Which columns a read returns: `(family, Some(qualifier))` for one column, `(family, None)`
/// for a whole family (which wins over single columns of the same family); empty for all.
pub type Columns = Vec<(Bytes, Option<Bytes>)>;

/// A filter on single cells that the model applies (HBase's order, HBASE-17125): after
/// the family's rules and the time range, before the read's max versions, which counts only
/// the cells it includes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellFilter {
    /// ValueFilter, EQUAL, SubstringComparator: the value contains the text.
    ValueContains(String),
    /// TimestampsFilter: the cell's timestamp is one of these.
    Timestamps(Vec<Timestamp>),
}

impl CellFilter {
    fn keeps(&self, ts: Timestamp, value: &[u8]) -> bool {
        match self {
            CellFilter::ValueContains(text) => String::from_utf8_lossy(value)
                .to_lowercase()
                .contains(&text.to_lowercase()),
            CellFilter::Timestamps(list) => list.contains(&ts),
        }
    }

    /// The engine's filter.
    pub fn to_filter(&self) -> Filter {
        match self {
            CellFilter::ValueContains(text) => {
                Filter::Value(CompareOp::Equal, Comparator::Substring(text.clone()))
            }
            CellFilter::Timestamps(list) => Filter::Timestamps(list.clone()),
        }
    }
}

/// A get of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetSpec {
    /// The row.
    pub row: Bytes,
    /// The columns; empty for every family.
    pub columns: Columns,
    /// The time range.
    pub time_range: TimeRange,
    /// Versions per column, at least 1.
    pub max_versions: u32,
    /// A filter on cells.
    pub filter: Option<CellFilter>,
}

impl GetSpec {
    /// The newest version of every column of `row`.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        GetSpec {
            row: b(row),
            columns: Vec::new(),
            time_range: TimeRange::ALL,
            max_versions: 1,
            filter: None,
        }
    }

    /// The engine's request.
    pub fn to_get(&self) -> Get {
        let mut g = Get::new(&self.row)
            .time_range(self.time_range)
            .max_versions(self.max_versions);
        if let Some(f) = &self.filter {
            g = g.filter(f.to_filter());
        }
        self.columns.iter().fold(g, |g, (f, q)| match q {
            Some(q) => g.add_column(f, q),
            None => g.add_family(f),
        })
    }
}

/// A scan, following HBase's conventions: forward scans run from `start` (inclusive) to
/// `stop` (exclusive); reverse scans from `start` (inclusive, the highest row) down to `stop`
/// (exclusive, the lowest); an empty bound is no bound; a prefix replaces both bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanSpec {
    /// Start row.
    pub start: Option<Bytes>,
    /// Stop row.
    pub stop: Option<Bytes>,
    /// Row prefix (replaces start and stop).
    pub prefix: Option<Bytes>,
    /// High rows first.
    pub reverse: bool,
    /// The columns; empty for every family.
    pub columns: Columns,
    /// The time range.
    pub time_range: TimeRange,
    /// Versions per column, at least 1.
    pub max_versions: u32,
    /// At most this many rows (at least 1).
    pub limit: Option<usize>,
    /// At most this many cells per result (at least 1); a wider row is split.
    pub batch: Option<usize>,
    /// A filter on cells.
    pub filter: Option<CellFilter>,
    /// A raw scan: the stored cells, markers too (rules R1 to R6 of the matcher's module
    /// doc); checked by [`Model::check_raw_scan`], not [`Model::scan`].
    pub raw: bool,
}

impl Default for ScanSpec {
    fn default() -> Self {
        ScanSpec {
            start: None,
            stop: None,
            prefix: None,
            reverse: false,
            columns: Vec::new(),
            time_range: TimeRange::ALL,
            max_versions: 1,
            limit: None,
            batch: None,
            filter: None,
            raw: false,
        }
    }
}

impl ScanSpec {
    /// The engine's request.
    pub fn to_scan(&self) -> Scan {
        let mut s = Scan::new()
            .reversed(self.reverse)
            .time_range(self.time_range)
            .max_versions(self.max_versions);
        if let Some(r) = &self.start {
            s = s.start_row(r);
        }
        if let Some(r) = &self.stop {
            s = s.stop_row(r);
        }
        if let Some(p) = &self.prefix {
            s = s.with_prefix(p);
        }
        if let Some(n) = self.limit {
            s = s.limit(n);
        }
        if let Some(n) = self.batch {
            s = s.batch(n);
        }
        if let Some(f) = &self.filter {
            s = s.filter(f.to_filter());
        }
        if self.raw {
            s = s.raw(true);
        }
        self.columns.iter().fold(s, |s, (f, q)| match q {
            Some(q) => s.add_column(f, q),
            None => s.add_family(f),
        })
    }

    /// True when `row` lies in the scan's row range.
    pub fn contains(&self, row: &[u8]) -> bool {
        if let Some(p) = &self.prefix {
            return row.starts_with(p);
        }
        let bound = |b: &Option<Bytes>| b.clone().filter(|r| !r.is_empty());
        let (start, stop) = (bound(&self.start), bound(&self.stop));
        if self.reverse {
            start.is_none_or(|s| row <= s.as_ref()) && stop.is_none_or(|s| row > s.as_ref())
        } else {
            start.is_none_or(|s| row >= s.as_ref()) && stop.is_none_or(|s| row < s.as_ref())
        }
    }
}

/// The settings of a family the rules depend on.
#[derive(Debug, Clone, Copy)]
struct Rules {
    max_versions: u32,
    min_versions: u32,
    ttl_ms: Option<u64>,
    keep_deleted_cells: KeepDeletedCells,
}

impl Rules {
    /// Whether a marker at `ts` keeps what it masks (see `KeepDeletedCells`).
    fn keeps(&self, ts: Timestamp, now_ms: u64) -> bool {
        let expire_before = self.ttl_ms.map_or(0, |ttl| now_ms.saturating_sub(ttl));
        self.keep_deleted_cells.keeps(ts, expire_before)
    }
}

/// One version of a column as written: its value and its own TTL.
#[derive(Debug, Clone)]
struct Stored {
    value: Bytes,
    ttl: Option<u64>,
}

impl Stored {
    /// True when the version's own TTL ran out at `now_ms` (timestamp + TTL below it).
    fn expired(&self, ts: Timestamp, now_ms: u64) -> bool {
        self.ttl.is_some_and(|ttl| ts.saturating_add(ttl) < now_ms)
    }
}

/// Everything written to one row of one family.
#[derive(Debug, Clone, Default)]
struct RowFamily {
    /// qualifier -> timestamp -> value of the latest write at that timestamp (rule 3).
    puts: BTreeMap<Bytes, BTreeMap<Timestamp, Stored>>,
    /// (qualifier, timestamp) -> the earlier writes of that version since the last major
    /// compaction, newest first: no read sees them, but when a flush drops a masked newer
    /// write, a raw read may show one that another file still holds.
    older: BTreeMap<(Bytes, Timestamp), Vec<Stored>>,
    /// Timestamps of DeleteFamily markers.
    family: BTreeSet<Timestamp>,
    /// Timestamps of DeleteFamilyVersion markers.
    family_version: BTreeSet<Timestamp>,
    /// qualifier -> timestamps of DeleteColumn markers.
    column: BTreeMap<Bytes, BTreeSet<Timestamp>>,
    /// qualifier -> timestamps of Delete (one version) markers.
    version: BTreeMap<Bytes, BTreeSet<Timestamp>>,
}

impl RowFamily {
    /// True when a marker of any time for which `counts` holds hides the put of column
    /// `q` at `ts`.
    fn masked_by(&self, q: &Bytes, ts: Timestamp, counts: impl Fn(Timestamp) -> bool) -> bool {
        self.family.iter().any(|m| ts <= *m && counts(*m))
            || self.family_version.iter().any(|m| ts == *m && counts(*m))
            || self
                .column
                .get(q)
                .is_some_and(|s| s.iter().any(|m| ts <= *m && counts(*m)))
            || self
                .version
                .get(q)
                .is_some_and(|s| s.iter().any(|m| ts == *m && counts(*m)))
    }

    /// The qualifiers a raw read of this family may show cells of: those with puts or
    /// column markers, and the empty one (the family markers' column) when there are
    /// family markers.
    fn raw_qualifiers(&self) -> BTreeSet<Bytes> {
        let mut qualifiers: BTreeSet<Bytes> = self.puts.keys().cloned().collect();
        qualifiers.extend(self.column.keys().cloned());
        qualifiers.extend(self.version.keys().cloned());
        if !self.family.is_empty() || !self.family_version.is_empty() {
            qualifiers.insert(Bytes::new());
        }
        qualifiers
    }

    /// What the stores may hold of column `q` (with the family markers when `q` is empty),
    /// in store order: timestamp descending, markers before puts.
    fn raw_candidates(&self, q: &Bytes, rules: &Rules, now_ms: u64) -> Vec<RawCandidate> {
        let mut out = Vec::new();
        let mut markers = vec![
            (self.column.get(q), CellType::DeleteColumn),
            (self.version.get(q), CellType::Delete),
        ];
        if q.is_empty() {
            markers.push((Some(&self.family), CellType::DeleteFamily));
            markers.push((Some(&self.family_version), CellType::DeleteFamilyVersion));
        }
        for (set, kind) in markers {
            for ts in set.into_iter().flatten() {
                out.push(RawCandidate::Marker { ts: *ts, kind });
            }
        }
        for (ts, newest) in self.puts.get(q).into_iter().flatten() {
            let mut writes = vec![newest.clone()];
            writes.extend(
                self.older
                    .get(&(q.clone(), *ts))
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
            out.push(RawCandidate::Put {
                ts: *ts,
                writes,
                droppable: self.masked_by(q, *ts, |m| !rules.keeps(m, now_ms)),
            });
        }
        out.sort_by(|a, b| b.ts().cmp(&a.ts()).then(b.rank().cmp(&a.rank())));
        out
    }

    /// Forgets what a major compaction at `now_ms` removes (see the module doc).
    fn major_compact(&mut self, rules: &Rules, now_ms: u64) {
        let expire_before = rules.ttl_ms.map_or(0, |ttl| now_ms.saturating_sub(ttl));
        // It keeps one write per version.
        self.older.clear();
        let mut puts = std::mem::take(&mut self.puts);
        for (q, versions) in puts.iter_mut() {
            // Newer versions no marker masks, counted from the newest down.
            let mut unmasked = 0u32;
            let mut kept = BTreeMap::new();
            for (ts, v) in versions.iter().rev() {
                if self.masked_by(q, *ts, |m| !rules.keeps(m, now_ms)) {
                    continue;
                }
                let newer = unmasked;
                if !self.masked_by(q, *ts, |m| rules.keeps(m, now_ms)) {
                    unmasked += 1;
                }
                let expired = *ts < expire_before;
                if newer < rules.max_versions && !(expired && newer >= rules.min_versions) {
                    kept.insert(*ts, v.clone());
                }
            }
            // Versions whose own TTL ran out go when no version older than them stays;
            // the others stay, counted among the versions of the older ones.
            while let Some(entry) = kept.first_entry() {
                if !entry.get().expired(*entry.key(), now_ms) {
                    break;
                }
                entry.remove();
            }
            *versions = kept;
        }
        puts.retain(|_, v| !v.is_empty());
        self.puts = puts;
        let keeps = |m: &Timestamp| rules.keeps(*m, now_ms);
        self.family.retain(keeps);
        self.family_version.retain(keeps);
        for set in self.column.values_mut().chain(self.version.values_mut()) {
            set.retain(keeps);
        }
        self.column.retain(|_, s| !s.is_empty());
        self.version.retain(|_, s| !s.is_empty());
    }

    /// The versions of column `q` a reader sees, newest first (rules 2 to 5).
    fn read_column(
        &self,
        q: &Bytes,
        rules: &Rules,
        range: TimeRange,
        max_versions: u32,
        filter: Option<&CellFilter>,
        now_ms: u64,
    ) -> Vec<(Timestamp, Bytes)> {
        let Some(versions) = self.puts.get(q) else {
            return Vec::new();
        };
        // Rule 2: which markers apply to this reader.
        let applies =
            |ts: &Timestamp| *ts >= range.min && (!rules.keeps(*ts, now_ms) || *ts < range.max);
        let family_upto = self.family.iter().filter(|t| applies(t)).max();
        let column_upto = self
            .column
            .get(q)
            .and_then(|s| s.iter().filter(|t| applies(t)).max());
        let exact = |set: Option<&BTreeSet<Timestamp>>, ts: Timestamp| {
            set.is_some_and(|s| s.contains(&ts) && applies(&ts))
        };
        let masked = |ts: Timestamp| {
            family_upto.is_some_and(|m| ts <= *m)
                || column_upto.is_some_and(|m| ts <= *m)
                || exact(Some(&self.family_version), ts)
                || exact(self.version.get(q), ts)
        };
        let expire_before = rules.ttl_ms.map_or(0, |ttl| now_ms.saturating_sub(ttl));
        versions
            .iter()
            .rev() // newest first
            .filter(|(ts, _)| !masked(**ts))
            // Rule 4: the family's version cap, then TTL with its min-versions exemption.
            .take(rules.max_versions as usize)
            .enumerate()
            .filter(|(i, (ts, _))| **ts >= expire_before || *i < rules.min_versions as usize)
            // A version's own TTL, whatever min versions say (it was counted above).
            .filter(|(_, (ts, v))| !v.expired(**ts, now_ms))
            // Rule 5: the time range, the filter, then the reader's version cap.
            .filter(|(_, (ts, _))| **ts >= range.min && **ts < range.max)
            .filter(|(_, (ts, v))| filter.is_none_or(|f| f.keeps(**ts, &v.value)))
            .take(max_versions as usize)
            .map(|(_, (ts, v))| (*ts, v.value.clone()))
            .collect()
    }
}

/// The reference model of one table. See the module doc for the rules it applies.
#[derive(Debug, Clone)]
pub struct Model {
    families: BTreeMap<Bytes, Rules>,
    /// row -> family -> what was written there.
    rows: BTreeMap<Bytes, BTreeMap<Bytes, RowFamily>>,
}

impl Model {
    /// An empty table with the families of `desc`.
    pub fn new(desc: &TableDescriptor) -> Self {
        let families = desc
            .families
            .iter()
            .map(|f| {
                (
                    f.name.clone(),
                    Rules {
                        max_versions: f.max_versions,
                        min_versions: f.min_versions,
                        ttl_ms: f.ttl_secs.map(|s| s.saturating_mul(1000)),
                        keep_deleted_cells: f.keep_deleted_cells,
                    },
                )
            })
            .collect();
        Model {
            families,
            rows: BTreeMap::new(),
        }
    }

    fn rules(&self, family: &Bytes) -> Rules {
        match self.families.get(family) {
            Some(r) => *r,
            None => panic!("model: unknown family {family:?}"),
        }
    }

    fn slot(&mut self, row: &Bytes, family: &Bytes) -> &mut RowFamily {
        self.rules(family);
        self.rows
            .entry(row.clone())
            .or_default()
            .entry(family.clone())
            .or_default()
    }

    /// Applies a major compaction of every family at `now_ms`, the engine's having run on a
    /// flushed table: forgets what it removes (see the module doc).
    pub fn major_compact(&mut self, now_ms: u64) {
        let families = &self.families;
        for fams in self.rows.values_mut() {
            for (family, rf) in fams.iter_mut() {
                if let Some(rules) = families.get(family) {
                    rf.major_compact(rules, now_ms);
                }
            }
        }
    }

    /// Applies a put. Panics on a cell without an explicit timestamp or an unknown family.
    pub fn put(&mut self, p: &PutSpec) {
        assert!(!p.cells.is_empty(), "model: a put needs a cell");
        for (f, q, ts, v) in &p.cells {
            assert!(
                *ts != LATEST_TIMESTAMP,
                "model: puts need explicit timestamps"
            );
            let slot = self.slot(&p.row, f);
            let replaced = slot.puts.entry(q.clone()).or_default().insert(
                *ts,
                Stored {
                    value: v.clone(),
                    ttl: p.ttl,
                },
            );
            if let Some(old) = replaced {
                slot.older
                    .entry((q.clone(), *ts))
                    .or_default()
                    .insert(0, old);
            }
        }
    }

    /// Applies a delete: resolves every marker against the current state, then writes them.
    /// A delete without a timestamp takes the wall clock's.
    pub fn delete(&mut self, d: &DeleteSpec) {
        self.delete_at(d, d.ts.unwrap_or_else(wall_clock_ms));
    }

    /// [`Model::delete`] with the timestamp the server gave a delete without one (`dts`,
    /// which its family and column markers without their own take; "latest version"
    /// markers still resolve against the state).
    pub fn delete_at(&mut self, d: &DeleteSpec, dts: Timestamp) {
        if d.kinds.is_empty() {
            let families: Vec<Bytes> = self.families.keys().cloned().collect();
            for f in families {
                self.slot(&d.row, &f).family.insert(dts);
            }
            return;
        }
        // A family marker replaces the markers of its family added before it (HBase 2's
        // `Delete.addFamily`).
        let mut kinds: Vec<&DeleteKind> = Vec::new();
        for k in &d.kinds {
            if let DeleteKind::Family { family, .. } = k {
                kinds.retain(|e| e.family() != family);
            }
            kinds.push(k);
        }
        let mut resolved = Vec::new();
        let mut latest_seen: BTreeMap<(Bytes, Bytes), usize> = BTreeMap::new();
        for k in kinds {
            match k {
                DeleteKind::Version {
                    family,
                    qualifier,
                    ts,
                } => {
                    let ts = match (ts, d.ts) {
                        (Some(ts), _) => Some(*ts),
                        (None, Some(dts)) => Some(dts),
                        (None, None) => {
                            let n = latest_seen
                                .entry((family.clone(), qualifier.clone()))
                                .or_default();
                            *n += 1;
                            self.nth_latest(&d.row, family, qualifier, *n)
                                .map(|(ts, _)| ts)
                        }
                    };
                    if let Some(ts) = ts {
                        resolved.push(DeleteKind::Version {
                            family: family.clone(),
                            qualifier: qualifier.clone(),
                            ts: Some(ts),
                        });
                    }
                }
                DeleteKind::Column {
                    family,
                    qualifier,
                    ts,
                } => resolved.push(DeleteKind::Column {
                    family: family.clone(),
                    qualifier: qualifier.clone(),
                    ts: Some(ts.unwrap_or(dts)),
                }),
                DeleteKind::Family { family, ts } => resolved.push(DeleteKind::Family {
                    family: family.clone(),
                    ts: Some(ts.unwrap_or(dts)),
                }),
                DeleteKind::FamilyVersion { .. } => resolved.push(k.clone()),
            }
        }
        for k in resolved {
            match k {
                DeleteKind::Version {
                    family,
                    qualifier,
                    ts: Some(ts),
                } => {
                    self.slot(&d.row, &family)
                        .version
                        .entry(qualifier)
                        .or_default()
                        .insert(ts);
                }
                DeleteKind::Column {
                    family,
                    qualifier,
                    ts: Some(ts),
                } => {
                    self.slot(&d.row, &family)
                        .column
                        .entry(qualifier)
                        .or_default()
                        .insert(ts);
                }
                DeleteKind::Family {
                    family,
                    ts: Some(ts),
                } => {
                    self.slot(&d.row, &family).family.insert(ts);
                }
                DeleteKind::FamilyVersion { family, ts } => {
                    self.slot(&d.row, &family).family_version.insert(ts);
                }
                other => unreachable!("unresolved marker {other:?}"),
            }
        }
    }

    /// The newest visible `(timestamp, value)` of a column, as "delete the latest version",
    /// increment, append and check-and-mutate see it.
    pub fn latest(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
    ) -> Option<(Timestamp, Bytes)> {
        self.nth_latest(row, family, qualifier, 1)
    }

    /// Whether a check-and-mutate's column condition holds on the row as it is (HBase's
    /// rules for an empty expected value: see `basalt::client::Condition`).
    pub fn condition_holds(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        condition: &Condition,
    ) -> bool {
        let current = self.latest(row, family, qualifier).map(|(_, v)| v);
        let no_value = current.as_ref().is_none_or(|v| v.is_empty());
        match condition {
            Condition::Absent => no_value,
            Condition::Value(op, given) if given.is_empty() => {
                no_value == (*op != CompareOp::NotEqual)
            }
            Condition::Value(op, given) => current.is_some_and(|stored| op.test(&stored, given)),
            Condition::Filter(_) => panic!("model: filter conditions are not modelled"),
        }
    }

    /// The `n`-th newest (from 1) visible `(timestamp, value)` of a column, with no time range.
    pub fn nth_latest(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        n: usize,
    ) -> Option<(Timestamp, Bytes)> {
        self.nth_latest_in(row, family, qualifier, TimeRange::ALL, n)
    }

    /// The newest visible `(timestamp, value)` of a column inside `range`, as an increment
    /// or append with that time range reads it.
    pub fn latest_in(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        range: TimeRange,
    ) -> Option<(Timestamp, Bytes)> {
        self.nth_latest_in(row, family, qualifier, range, 1)
    }

    /// The `n`-th newest (from 1) visible `(timestamp, value)` of a column inside `range`.
    fn nth_latest_in(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        range: TimeRange,
        n: usize,
    ) -> Option<(Timestamp, Bytes)> {
        let family = b(family);
        let rules = self.rules(&family);
        let n = u32::try_from(n).ok()?.max(1);
        self.rows
            .get(row)?
            .get(&family)?
            .read_column(&b(qualifier), &rules, range, n, None, wall_clock_ms())
            .into_iter()
            .nth(n as usize - 1)
    }

    /// Resolves a column selection to families, each with `None` for every qualifier or the
    /// set of qualifiers asked for; every family for an empty selection.
    fn resolve(&self, columns: &Columns) -> BTreeMap<Bytes, Option<BTreeSet<Bytes>>> {
        if columns.is_empty() {
            return self.families.keys().map(|f| (f.clone(), None)).collect();
        }
        let mut out: BTreeMap<Bytes, Option<BTreeSet<Bytes>>> = BTreeMap::new();
        for (f, q) in columns {
            self.rules(f);
            let entry = out
                .entry(f.clone())
                .or_insert_with(|| Some(BTreeSet::new()));
            match (q, entry.as_mut()) {
                (None, _) => *entry = None,
                (Some(q), Some(set)) => {
                    set.insert(q.clone());
                }
                (Some(_), None) => {}
            }
        }
        out
    }

    /// The visible cells of one row, sorted by family, qualifier, timestamp descending.
    fn read_row(
        &self,
        row: &Bytes,
        columns: &Columns,
        range: TimeRange,
        max_versions: u32,
        filter: Option<&CellFilter>,
    ) -> Vec<Cell> {
        assert!(max_versions >= 1, "model: max versions must be at least 1");
        let now = wall_clock_ms();
        let Some(families) = self.rows.get(row) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (family, wanted) in self.resolve(columns) {
            let Some(rf) = families.get(&family) else {
                continue;
            };
            let rules = self.rules(&family);
            for q in rf.puts.keys() {
                if wanted.as_ref().is_some_and(|w| !w.contains(q)) {
                    continue;
                }
                for (ts, value) in rf.read_column(q, &rules, range, max_versions, filter, now) {
                    out.push(Cell {
                        row: row.clone(),
                        family: family.clone(),
                        qualifier: q.clone(),
                        timestamp: ts,
                        kind: CellType::Put,
                        value,
                    });
                }
            }
        }
        out
    }

    /// Checks a raw scan's results (`got`, one result per row: raw scans here have no
    /// batch) against what the stores may hold. A raw read shows the stored cells (rules R1
    /// to R6 of the matcher's module doc), and a flush or compaction drops a masked put when
    /// its input also holds a marker masking it that does not keep deleted cells (as
    /// HBase's do), at times the model cannot know. So each such put may show with any of
    /// its writes or not at all, as long as the rest of its column agrees (a shown one
    /// counts among the versions). Markers with `server_time` timestamps are left out of
    /// the comparison: the model does not know their exact timestamps (they count as no
    /// version, so nothing else depends on them).
    pub fn check_raw_scan(
        &self,
        s: &ScanSpec,
        got: &[RowResult],
        server_time: impl Fn(Timestamp) -> bool,
    ) -> Result<(), String> {
        assert!(s.raw && s.batch.is_none() && s.filter.is_none());
        let now = wall_clock_ms();
        let rows: Vec<&Bytes> = self.rows.keys().filter(|r| s.contains(r)).collect();
        let ordered: Box<dyn Iterator<Item = &&Bytes>> = if s.reverse {
            Box::new(rows.iter().rev())
        } else {
            Box::new(rows.iter())
        };
        let limit = s.limit.unwrap_or(usize::MAX);
        if got.len() > limit {
            return Err(format!("{} rows past the limit {limit}", got.len()));
        }
        let mut next = 0;
        for row in ordered {
            if next == limit {
                break; // the engine stopped at the limit: later rows are not read
            }
            let cells: &[Cell] = match got.get(next) {
                Some(r) if r.row == **row => {
                    next += 1;
                    &r.cells
                }
                // A row the engine showed nothing of.
                _ => &[],
            };
            let cells: Vec<&Cell> = cells
                .iter()
                .filter(|c| c.kind == CellType::Put || !server_time(c.timestamp))
                .collect();
            self.check_raw_row(row, s, &cells, now, &server_time)
                .map_err(|e| format!("row {:?}: {e}", String::from_utf8_lossy(row)))?;
        }
        match got.get(next) {
            Some(r) => Err(format!(
                "the engine showed row {:?}, which the model has not at that place",
                String::from_utf8_lossy(&r.row)
            )),
            None => Ok(()),
        }
    }

    /// [`Model::check_raw_scan`] for one row's cells.
    fn check_raw_row(
        &self,
        row: &Bytes,
        s: &ScanSpec,
        cells: &[&Cell],
        now_ms: u64,
        server_time: &impl Fn(Timestamp) -> bool,
    ) -> Result<(), String> {
        let empty = BTreeMap::new();
        let families = self.rows.get(row).unwrap_or(&empty);
        let mut rest = cells;
        for (family, wanted) in self.resolve(&s.columns) {
            let Some(rf) = families.get(&family) else {
                continue;
            };
            let rules = self.rules(&family);
            for q in rf.raw_qualifiers() {
                if wanted.as_ref().is_some_and(|w| !w.contains(&q)) {
                    continue;
                }
                let n = rest
                    .iter()
                    .take_while(|c| c.family == family && c.qualifier == q)
                    .count();
                let (column, after) = rest.split_at(n);
                rest = after;
                check_raw_column(
                    &rf.raw_candidates(&q, &rules, now_ms),
                    column,
                    &rules,
                    s.time_range,
                    s.max_versions,
                    now_ms,
                    server_time,
                )
                .map_err(|e| {
                    format!(
                        "column {}:{}: {e}",
                        String::from_utf8_lossy(&family),
                        String::from_utf8_lossy(&q)
                    )
                })?;
            }
        }
        match rest.first() {
            Some(c) => Err(format!(
                "the engine showed {}:{}@{} {:?} out of place or never written",
                String::from_utf8_lossy(&c.family),
                String::from_utf8_lossy(&c.qualifier),
                c.timestamp,
                c.kind
            )),
            None => Ok(()),
        }
    }

    /// What a get returns: the row's visible cells, or an empty result (with an empty row
    /// key) when there are none.
    pub fn get(&self, g: &GetSpec) -> RowResult {
        let cells = self.read_row(
            &g.row,
            &g.columns,
            g.time_range,
            g.max_versions,
            g.filter.as_ref(),
        );
        if cells.is_empty() {
            return RowResult::default();
        }
        RowResult {
            row: g.row.clone(),
            cells,
        }
    }

    /// What a scan returns, every result in order: rows with at least one visible cell, in
    /// the scan's direction, at most `limit` rows, each split into results of at most
    /// `batch` cells.
    pub fn scan(&self, s: &ScanSpec) -> Vec<RowResult> {
        let rows: Vec<&Bytes> = self.rows.keys().filter(|r| s.contains(r)).collect();
        let ordered: Box<dyn Iterator<Item = &&Bytes>> = if s.reverse {
            Box::new(rows.iter().rev())
        } else {
            Box::new(rows.iter())
        };
        let mut out = Vec::new();
        let mut left = s.limit.unwrap_or(usize::MAX);
        for row in ordered {
            if left == 0 {
                break;
            }
            assert!(!s.raw, "model: raw scans are checked by check_raw_scan");
            let cells = self.read_row(
                row,
                &s.columns,
                s.time_range,
                s.max_versions,
                s.filter.as_ref(),
            );
            if cells.is_empty() {
                continue;
            }
            left -= 1;
            let chunk = s.batch.unwrap_or(usize::MAX).max(1);
            for part in cells.chunks(chunk) {
                out.push(RowResult {
                    row: (*row).clone(),
                    cells: part.to_vec(),
                });
            }
        }
        out
    }

    /// Every visible version (up to `max_versions` per column) of every row, forward.
    pub fn dump(&self, max_versions: u32) -> Vec<RowResult> {
        self.scan(&ScanSpec {
            max_versions,
            ..ScanSpec::default()
        })
    }
}

/// One cell a raw read of a column may show (see [`Model::check_raw_scan`]).
#[derive(Debug, Clone)]
enum RawCandidate {
    /// A delete marker: stored until a major compaction forgets it.
    Marker { ts: Timestamp, kind: CellType },
    /// A put version, its writes newest first. When no marker that does not keep deleted
    /// cells masks it (`droppable` false) its newest write is always stored; otherwise
    /// flushes and compactions may have dropped any of its writes.
    Put {
        ts: Timestamp,
        writes: Vec<Stored>,
        droppable: bool,
    },
}

impl RawCandidate {
    fn ts(&self) -> Timestamp {
        match self {
            RawCandidate::Marker { ts, .. } | RawCandidate::Put { ts, .. } => *ts,
        }
    }

    /// The store order's rank at one timestamp (higher first).
    fn rank(&self) -> u8 {
        match self {
            RawCandidate::Marker { kind, .. } => kind.code(),
            RawCandidate::Put { .. } => CellType::Put.code(),
        }
    }
}

/// Whether `got`, the cells a raw read showed of one column (server-time markers left
/// out), is what the matcher's rules R1 to R6 give for some choice of which writes of the
/// droppable puts of `candidates` the stores still hold. The choice is made greedily: a
/// droppable put shows exactly when the engine's next cell is one of its writes, and one
/// that does not show may still have ended the column (counted past the versions bound)
/// when the engine showed nothing after it.
fn check_raw_column(
    candidates: &[RawCandidate],
    got: &[&Cell],
    rules: &Rules,
    range: TimeRange,
    max_versions: u32,
    now_ms: u64,
    server_time: &impl Fn(Timestamp) -> bool,
) -> Result<(), String> {
    let expire_before = rules.ttl_ms.map_or(0, |ttl| now_ms.saturating_sub(ttl));
    let shown = |c: &Cell| {
        format!(
            "{}@{} {:?}",
            String::from_utf8_lossy(&c.value),
            c.timestamp,
            c.kind
        )
    };
    let mut puts = 0u32;
    let mut next = 0usize;
    // The column ends here: nothing more may have been shown.
    let end = |next: usize| match got.get(next) {
        Some(c) => Err(format!("{} shown past the column's end", shown(c))),
        None => Ok(()),
    };
    for candidate in candidates {
        let ts = candidate.ts();
        let expired = ts < expire_before;
        if (expired && rules.min_versions == 0) || ts < range.min || ts >= range.max {
            continue;
        }
        let ends = |puts: u32| puts > max_versions || (expired && puts > rules.min_versions);
        match candidate {
            RawCandidate::Marker { kind, .. } => {
                if server_time(ts) {
                    continue;
                }
                if ends(puts) {
                    return end(next);
                }
                match got.get(next) {
                    Some(c) if c.timestamp == ts && c.kind == *kind && c.value.is_empty() => {
                        next += 1;
                    }
                    other => {
                        return Err(format!(
                            "marker {kind:?}@{ts} missing, the engine showed {:?}",
                            other.map(|c| shown(c))
                        ))
                    }
                }
            }
            RawCandidate::Put {
                writes,
                droppable: false,
                ..
            } => {
                let newest = &writes[0];
                if newest.expired(ts, now_ms) {
                    continue; // its own TTL ran out: hidden, and older writes with it
                }
                puts += 1;
                if ends(puts) {
                    return end(next);
                }
                match got.get(next) {
                    Some(c)
                        if c.timestamp == ts
                            && c.kind == CellType::Put
                            && c.value == newest.value =>
                    {
                        next += 1;
                    }
                    other => {
                        return Err(format!(
                            "put {}@{ts} missing, the engine showed {:?}",
                            String::from_utf8_lossy(&newest.value),
                            other.map(|c| shown(c))
                        ))
                    }
                }
            }
            RawCandidate::Put {
                writes,
                droppable: true,
                ..
            } => {
                let mut values = writes
                    .iter()
                    .filter(|w| !w.expired(ts, now_ms))
                    .map(|w| &w.value);
                let is_next = got.get(next).is_some_and(|c| {
                    c.timestamp == ts
                        && c.kind == CellType::Put
                        && values.clone().any(|v| *v == c.value)
                });
                if is_next {
                    puts += 1;
                    if ends(puts) {
                        return end(next);
                    }
                    next += 1;
                } else if next == got.len() && values.next().is_some() && ends(puts + 1) {
                    return Ok(()); // a write of it still stored may have ended the column
                }
            }
        }
    }
    end(next)
}
