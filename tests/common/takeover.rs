//! What the takeover tests share: one object store and one coordination store that
//! engines share, the WAL writer folders of an object store (each folder's segment ids and
//! its fence, an empty last object), and the model of what was acknowledged with the check
//! of table `t` (family `f`, qualifier `q`) against it.

use basalt::client::Scan;
use basalt::objects::{Objects, StoreObjects};
use basalt::{Config, Connection};
use futures::TryStreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

/// One object store and one coordination store (on a manual clock) that engines share.
#[allow(dead_code)] // not every test binary that includes this module opens engines so
pub struct SharedCoordination {
    pub clock: Arc<basalt::coord::ManualClock>,
    pub coord: Arc<basalt::coord::MemoryCoordination>,
    pub objects: Arc<dyn Objects>,
}

#[allow(dead_code)]
impl SharedCoordination {
    pub fn new() -> Self {
        let clock = Arc::new(basalt::coord::ManualClock::default());
        SharedCoordination {
            coord: Arc::new(basalt::coord::MemoryCoordination::new(clock.clone())),
            clock,
            objects: Arc::new(StoreObjects::in_memory()),
        }
    }

    /// An engine of process `process` in `dir`, with a lease of a minute.
    pub fn config(&self, dir: &Path, process: &str) -> Config {
        Config::new(dir)
            .objects(Arc::clone(&self.objects))
            .coordination(self.coord.clone())
            .process_name(process)
            .lease_ttl_ms(60_000)
    }
}

/// Every writer folder, in order: `(folder, segment ids, fence)`, the fence being the id of
/// an empty last object.
pub fn writers(objects: &dyn Objects) -> Vec<(String, Vec<u64>, Option<u64>)> {
    let mut by_folder: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for name in objects.list("wal").unwrap() {
        let (folder, last) = name.rsplit_once('/').unwrap();
        if let Ok(id) = last.parse::<u64>() {
            by_folder
                .entry(folder.to_string())
                .or_default()
                .push((id, name.clone()));
        }
    }
    by_folder
        .into_iter()
        .map(|(folder, mut ids)| {
            ids.sort();
            let fence = ids
                .last()
                .filter(|(_, name)| objects.read(name).unwrap().is_empty())
                .map(|(id, _)| *id);
            (folder, ids.into_iter().map(|(id, _)| id).collect(), fence)
        })
        .collect()
}

/// Every writer folder's segment ids run without a gap (a purge removes the oldest only).
pub fn assert_contiguous(objects: &dyn Objects, context: &str) {
    for (folder, ids, _) in writers(objects) {
        for pair in ids.windows(2) {
            assert_eq!(
                pair[1],
                pair[0] + 1,
                "{context}: {folder} has a gap: {ids:?}"
            );
        }
    }
}

/// What the engines acknowledged: the value each row must have (`None`: deleted), and rows
/// whose write failed (fenced) and must never show.
#[derive(Default, Clone, Debug)]
pub struct Model {
    pub rows: BTreeMap<String, Option<String>>,
    pub never: BTreeSet<String>,
}

impl Model {
    /// Records an acknowledged put (`Some`) or delete (`None`) of `row`.
    #[allow(dead_code)] // not every test binary that includes this module records so
    pub fn ack(&mut self, row: &str, value: Option<&str>) {
        self.rows.insert(row.to_string(), value.map(str::to_string));
    }
}

/// Every row of table `t` through `conn` (which serves all of it), with its `f:q` value.
pub async fn rows(conn: &Connection) -> BTreeMap<String, String> {
    conn.table("t")
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            let v = r.value("f", "q").unwrap().to_vec();
            (
                String::from_utf8(r.row.to_vec()).unwrap(),
                String::from_utf8(v).unwrap(),
            )
        })
        .collect()
}

/// Scans table `t` through `conn` (which serves all of it) and checks it holds exactly what
/// `model` says.
pub async fn check(conn: &Connection, model: &Model, context: &str) {
    let found = rows(conn).await;
    for (row, want) in &model.rows {
        assert_eq!(found.get(row), want.as_ref(), "{context}: row {row}");
    }
    for row in &model.never {
        assert!(
            !found.contains_key(row),
            "{context}: fenced write {row} shows"
        );
    }
    let known: BTreeSet<&String> = model.rows.keys().chain(model.never.iter()).collect();
    for row in found.keys() {
        assert!(
            known.contains(row),
            "{context}: row {row} was never written"
        );
    }
}
