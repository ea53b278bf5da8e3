//! [`IndexAdmin`]: create (with an online build and progress), drop, list, describe,
//! verify and repair indexes, and open query handles.
//!
//! Where definitions live: in the arguments of the data table's maintaining coprocessor
//! ([`crate::maintainer::MAINTAINER`], one argument `index.<name>` per index), which the
//! catalog persists with the table descriptor, so reopening the engine reloads every index
//! with its table; and, for listing every index of the engine, in the system table
//! [`SYSTEM_TABLE`] (row `<data table>/<index>`, `d:def` the definition, `d:state`), written
//! after the descriptor (the descriptor is the authority: a crash between the two leaves the
//! system table one step behind until the next change). The index table (`ns:<table>.idx.<name>`, one family `i`, salted when
//! asked) carries the [`crate::maintainer::GUARD`] coprocessor, which refuses user writes.
//!
//! Online build: the index is first declared BUILDING, which installs the maintainer, so
//! every write from then on maintains it; then every data row is touched
//! ([`basalt_core::Table::touch`]), which rewrites the row's index row from its current
//! values under the row's lock; then the index is declared ACTIVE. A write and a touch of
//! one row are serialised by the row lock, and each derives the index row from the row as
//! it stands, so the build ends consistent while writes go on.

use crate::def::{IndexDef, IndexState};
use crate::layout::{Layout, FAMILY};
use crate::maintainer::{Runtime, ARG_PREFIX, GUARD, MAINTAINER};
use crate::query::{Index, IndexTable};
use basalt_core::client::{Backend, BatchOp, Put, RowResult, Scan};
use basalt_core::Engine;
use basalt_core::IntoTableName;
use basalt_core::RecoveryRepair;
use basalt_core::{
    ColumnFamilyDescriptor, Connection, CoprocessorDescriptor, Error, RecoveryRepairOutcome,
    Result, TableDescriptor, TableName,
};
use bytes::Bytes;
use futures::TryStreamExt;
use std::collections::HashMap;
use std::sync::Arc;

/// The system table listing every index: `basalt:indexes`.
pub const SYSTEM_TABLE: &str = "basalt:indexes";

/// How many rows an online build touches per batch.
pub const BUILD_BATCH: usize = 256;

/// The indexes' recovery repair, which `Connection::open_with` runs after a salvage or an
/// offline repair: verifies every index of the table and repairs what differs.
/// [`crate::register`] registers it.
#[derive(Debug)]
pub(crate) struct IndexRecovery {
    pub(crate) runtime: Arc<Runtime>,
}

#[async_trait::async_trait]
impl RecoveryRepair for IndexRecovery {
    async fn repair(
        &self,
        engine: &Arc<Engine>,
        table: &TableName,
    ) -> Result<Vec<RecoveryRepairOutcome>> {
        let conn = Connection::from_engine(engine.clone());
        let admin = IndexAdmin::new(&conn, self.runtime.clone());
        let name = table.to_string();
        let mut out = Vec::new();
        for def in admin.list(&name).await? {
            let found = admin.repair(&name, &def.name).await?;
            out.push(RecoveryRepairOutcome {
                table: table.clone(),
                what: format!("index {}", def.name),
                differences: found.differences(),
            });
        }
        Ok(out)
    }
}

/// Index administration on one connection.
pub struct IndexAdmin<B: Backend = Engine> {
    pub(crate) conn: Connection<B>,
    /// The maintainers' runtime, when they run in this process (an embedded engine): the
    /// channel repairs and drops of local indexes use to delete rows no data row gives.
    runtime: Option<Arc<Runtime>>,
}

impl<B: Backend> Clone for IndexAdmin<B> {
    fn clone(&self) -> Self {
        IndexAdmin {
            conn: self.conn.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for IndexAdmin<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexAdmin")
            .field("conn", &self.conn)
            .field("runtime", &self.runtime.is_some())
            .finish()
    }
}

impl IndexAdmin {
    /// An admin on `conn`, whose registry had the index coprocessors registered with
    /// `runtime` ([`crate::register`]).
    pub fn new(conn: &Connection, runtime: Arc<Runtime>) -> Self {
        IndexAdmin {
            conn: conn.clone(),
            runtime: Some(runtime),
        }
    }
}

impl<B: Backend> IndexAdmin<B> {
    /// An admin on a connection whose index maintainers run elsewhere (a cluster's region
    /// servers, started with the index coprocessors): it creates, lists, describes,
    /// queries and verifies indexes, and repairs what a touch of the data rows repairs;
    /// deleting index rows no data row gives (a repair's extra rows, a local index's
    /// drop) needs the maintainers' own process and is refused with a clear error.
    pub fn served(conn: &Connection<B>) -> Self {
        IndexAdmin {
            conn: conn.clone(),
            runtime: None,
        }
    }

    /// The maintainers' runtime, or the error of an admin without one that needed it.
    pub(crate) fn runtime(&self, what: &str) -> Result<&Arc<Runtime>> {
        self.runtime.as_ref().ok_or_else(|| {
            Error::bad_argument(format!(
                "{what} deletes index rows no data row gives, which only the process \
                 running the index maintainers can do: run it on an embedded connection \
                 (basalt shell on the store) or a region server"
            ))
        })
    }

    pub(crate) async fn descriptor(&self, table: &TableName) -> Result<TableDescriptor> {
        self.conn.admin().describe_table(table).await
    }

    /// Every index defined on `table`, by name.
    pub async fn list(&self, table: impl IntoTableName) -> Result<Vec<IndexDef>> {
        let table = &table.into_table_name()?;
        let d = self.descriptor(table).await?;
        let mut out = Vec::new();
        for cp in d.coprocessors.iter().filter(|c| c.name == MAINTAINER) {
            for (k, v) in &cp.args {
                if k.starts_with(ARG_PREFIX) {
                    out.push(IndexDef::from_arg(v)?);
                }
            }
        }
        Ok(out)
    }

    /// The definition of index `name` on `table`.
    pub async fn describe(&self, table: impl IntoTableName, name: &str) -> Result<IndexDef> {
        let table = &table.into_table_name()?;
        self.list(table)
            .await?
            .into_iter()
            .find(|d| d.name == name)
            .ok_or_else(|| Error::IndexNotFound(format!("{table}/{name}")))
    }

    /// Writes `def` into (or, with `None`, removes index `name` from) the maintainer's
    /// arguments of `table`.
    async fn store(&self, table: &TableName, name: &str, def: Option<&IndexDef>) -> Result<()> {
        let d = self.descriptor(table).await?;
        let mut list = d.coprocessors.clone();
        let key = format!("{ARG_PREFIX}{name}");
        let pos = list.iter().position(|c| c.name == MAINTAINER);
        let cp = match pos {
            Some(i) => &mut list[i],
            None => {
                list.push(
                    CoprocessorDescriptor::new(MAINTAINER)
                        .priority(CoprocessorDescriptor::PRIORITY_USER.saturating_mul(3)),
                );
                let last = list.len() - 1;
                &mut list[last]
            }
        };
        match def {
            Some(def) => {
                cp.args.insert(key, def.to_arg()?);
            }
            None => {
                cp.args.remove(&key);
            }
        }
        if !cp.args.keys().any(|k| k.starts_with(ARG_PREFIX)) {
            list.retain(|c| c.name != MAINTAINER);
        }
        self.conn.admin().set_coprocessors(table, list).await?;
        self.record(table, name, def).await
    }

    /// The system table, created (with its namespace) on first use.
    async fn system_table(&self) -> Result<basalt_core::Table<B>> {
        let name = TableName::parse(SYSTEM_TABLE)?;
        let admin = self.conn.admin();
        if !admin.table_exists(&name).await? {
            match admin.create_namespace(name.namespace()).await {
                Ok(()) | Err(Error::NamespaceExists(_)) => {}
                Err(e) => return Err(e),
            }
            match admin
                .create_table(TableDescriptor::new(name).family(ColumnFamilyDescriptor::new("d")))
                .await
            {
                Ok(()) | Err(Error::TableExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        self.conn.table(SYSTEM_TABLE)
    }

    /// Writes (or, with `None`, deletes) index `name` of `table` in the system table.
    pub(crate) async fn record(
        &self,
        table: &TableName,
        name: &str,
        def: Option<&IndexDef>,
    ) -> Result<()> {
        let sys = self.system_table().await?;
        let row = format!("{table}/{name}");
        match def {
            Some(d) => {
                let state = match d.state {
                    IndexState::Building => "BUILDING",
                    IndexState::Active => "ACTIVE",
                    IndexState::Dropping => "DROPPING",
                };
                sys.put(
                    Put::new(row)
                        .add_column("d", "def", d.to_arg()?)
                        .add_column("d", "state", state),
                )
                .await
            }
            None => sys.delete(basalt_core::client::Delete::new(row)).await,
        }
    }

    /// Every index of the engine, from the system table, in (data table, name) order.
    pub async fn list_all(&self) -> Result<Vec<IndexDef>> {
        let sys = self.system_table().await?;
        let rows: Vec<RowResult> = sys.scan(Scan::new())?.try_collect().await?;
        rows.iter()
            .filter_map(|r| r.value("d", "def"))
            .map(|v| IndexDef::from_arg(&String::from_utf8_lossy(v)))
            .collect()
    }

    /// Creates an index and builds it (see [`IndexAdmin::create_with_progress`]).
    pub async fn create(&self, def: IndexDef) -> Result<()> {
        self.create_with_progress(def, |_, _| {}).await
    }

    /// Creates an index: its table, then the maintainer (state BUILDING), then an online
    /// build over the table's existing rows while writes go on, reporting `(rows done,
    /// rows total)` to `progress` after every batch (the total is counted when the build
    /// starts; the last call has done = total), then state ACTIVE. A build that fails (a
    /// unique index over rows that repeat a value) drops the index again and returns the
    /// build's error.
    pub async fn create_with_progress(
        &self,
        mut def: IndexDef,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<()> {
        def.validate()?;
        let data = def.data_table()?;
        let data_desc = self.descriptor(&data).await?;
        if self
            .list(&def.table)
            .await?
            .iter()
            .any(|d| d.name == def.name)
        {
            return Err(Error::bad_argument(format!(
                "table {} already has an index {}",
                def.table, def.name
            )));
        }
        if def.local {
            // The rows go to the data table's reserved family, next to their data rows.
            crate::local::check_regions(&self.conn.table(&data)?).await?;
            crate::local::check_unique(&def, &data_desc)?;
            if !data_desc.families.iter().any(|f| f.is_local_rows()) {
                self.conn
                    .admin()
                    .add_column_family(&data, ColumnFamilyDescriptor::local_rows())
                    .await?;
            }
        } else {
            let itable = def.index_table()?;
            self.drop_orphaned_index_table(&itable).await?;
            let mut desc = TableDescriptor::new(itable.clone())
                .family(ColumnFamilyDescriptor::new(FAMILY))
                .coprocessor(CoprocessorDescriptor::new(GUARD));
            if let Some(b) = def.salt_buckets {
                desc = desc.salt(basalt_core::SaltSpec::new(b));
            }
            self.conn.admin().create_table(desc).await?;
        }
        def.state = IndexState::Building;
        self.store(&data, &def.name, Some(&def)).await?;
        drop(data_desc);
        if let Err(e) = self.build(&data, &mut progress).await {
            // Undone: a half-built index would go on being maintained on every write (a
            // unique one refusing the duplicates that failed its build) and never be queried.
            if let Err(undo) = self.drop_index(&data, &def.name).await {
                return Err(Error::bad_argument(format!(
                    "building index {} failed ({e}) and dropping it failed too ({undo}): drop it with drop_index",
                    def.name
                )));
            }
            return Err(e);
        }
        def.state = IndexState::Active;
        self.store(&data, &def.name, Some(&def)).await
    }

    /// Drops `itable` when it is an index table (it carries [`GUARD`]) that no index
    /// definition names: what a crash leaves between creating an index table and recording
    /// its definition, or between forgetting the definition and dropping the table. The
    /// caller checked that no index of that name is defined. A table without the guard is
    /// left alone (creating the index then fails with `TableExists`).
    async fn drop_orphaned_index_table(&self, itable: &TableName) -> Result<()> {
        let admin = self.conn.admin();
        if !admin.table_exists(itable).await? {
            return Ok(());
        }
        let desc = admin.describe_table(itable).await?;
        if !desc.coprocessors.iter().any(|c| c.name == GUARD) {
            return Ok(());
        }
        tracing::warn!(table = %itable, "dropping an index table no index names (left by a crash)");
        if admin.is_table_enabled(itable).await? {
            admin.disable_table(itable).await?;
        }
        admin.delete_table(itable).await
    }

    /// Touches every row of `data`, reporting progress.
    async fn build(&self, data: &TableName, progress: &mut impl FnMut(u64, u64)) -> Result<()> {
        let t = self.conn.table(data)?;
        let total = t
            .scan(Scan::new().filter(basalt_core::Filter::FirstKeyOnly))?
            .try_fold(0u64, |n, _| async move { Ok(n + 1) })
            .await?;
        progress(0, total);
        let region_of = self.region_finder(data).await?;
        let mut stream = t.scan(Scan::new().filter(basalt_core::Filter::FirstKeyOnly))?;
        let mut done = 0u64;
        let mut chunk: Vec<BatchOp> = Vec::with_capacity(BUILD_BATCH);
        let mut chunk_region = 0;
        loop {
            let next = stream.try_next().await?;
            let next_region = next.as_ref().map(|r| region_of(&r.row));
            // A batch stays within one region: a cluster serves regions on several servers,
            // and a batch is atomic per server only.
            let cut = chunk.len() >= BUILD_BATCH || next_region != Some(chunk_region);
            if cut && !chunk.is_empty() {
                let n = chunk.len() as u64;
                for r in t.batch(std::mem::take(&mut chunk)).await? {
                    r?;
                }
                done += n;
                progress(done, total.max(done));
            }
            if let (Some(r), Some(region)) = (&next, next_region) {
                chunk_region = region;
                chunk.push(BatchOp::Put(Put::touch(&r.row)));
            }
            if next.is_none() {
                if done != total {
                    // The total was counted before the build; writes meanwhile moved it.
                    progress(done, done);
                }
                return Ok(());
            }
        }
    }

    /// Drops index `name` of `table`: its maintainer first (writes stop maintaining it),
    /// then its table, or for a local index its rows in the data table.
    pub async fn drop_index(&self, table: impl IntoTableName, name: &str) -> Result<()> {
        let table = &table.into_table_name()?;
        let def = self.describe(table, name).await?;
        if def.local {
            self.drop_local_rows(&def).await?;
        }
        self.store(&def.data_table()?, name, None).await?;
        if def.local {
            return Ok(());
        }
        let itable = def.index_table()?;
        let admin = self.conn.admin();
        admin.disable_table(&itable).await?;
        admin.delete_table(&itable).await
    }

    /// Deletes the rows of local index `def`: the index is declared DROPPING (writes stop
    /// adding its rows and delete the ones they find), then every data row holding one is
    /// touched, under its lock, which deletes it wherever a split or merge has moved it.
    async fn drop_local_rows(&self, def: &IndexDef) -> Result<()> {
        let runtime = self.runtime("dropping a local index")?;
        let data_name = def.data_table()?;
        let mut dropping = def.clone();
        dropping.state = IndexState::Dropping;
        self.store(&data_name, &def.name, Some(&dropping)).await?;
        let layout = Layout::new(dropping);
        let data = self.conn.table(&data_name)?;
        let (_, rows) = crate::local::stored_rows(&layout, &data).await?;
        let mut owners: Vec<Bytes> = Vec::with_capacity(rows.len());
        for (row, logical, cells) in rows {
            // A row that is not what its owner gives is deleted at the touch too.
            if let Ok(owner) = layout.data_row_logical(&logical, &cells) {
                runtime.schedule_delete(&def.table, owner.clone(), &def.name, row);
                owners.push(owner);
            }
        }
        owners.sort();
        owners.dedup();
        let region_of = self.region_finder(&data_name).await?;
        // Batches within one region each (see `build`).
        for region in owners.chunk_by(|a, b| region_of(a) == region_of(b)) {
            for chunk in region.chunks(BUILD_BATCH) {
                let ops = chunk.iter().map(|r| BatchOp::Put(Put::touch(r))).collect();
                for r in data.batch(ops).await? {
                    r?;
                }
            }
        }
        Ok(())
    }

    /// Which region of `table` (by position) holds a row, as the regions stand now.
    async fn region_finder(&self, table: &TableName) -> Result<impl Fn(&[u8]) -> usize> {
        let mut ends: Vec<Bytes> = self
            .conn
            .admin()
            .regions(table)
            .await?
            .into_iter()
            .map(|r| r.end_key)
            .filter(|e| !e.is_empty())
            .collect();
        ends.sort();
        Ok(move |row: &[u8]| ends.partition_point(|e| e.as_ref() <= row))
    }

    /// A query handle on index `name` of `table`; refused with [`Error::IndexNotReady`]
    /// while the index is BUILDING.
    pub async fn index(&self, table: impl IntoTableName, name: &str) -> Result<Index<B>> {
        let table = &table.into_table_name()?;
        let def = self.describe(table, name).await?;
        if def.state != IndexState::Active {
            return Err(Error::IndexNotReady(format!("{table}/{name}")));
        }
        self.handle(def).await
    }

    pub(crate) async fn handle(&self, def: IndexDef) -> Result<Index<B>> {
        let data = def.data_table()?;
        let desc = self.descriptor(&data).await?;
        let ttls: HashMap<Bytes, u64> = desc
            .families
            .iter()
            .filter_map(|f| Some((f.name.clone(), f.ttl_secs?.saturating_mul(1000))))
            .collect();
        let iname = def.index_table()?.to_string();
        let table = if def.local {
            IndexTable::Local
        } else if def.salt_buckets.is_some() {
            IndexTable::Salted(self.conn.salted_table(&iname)?)
        } else {
            IndexTable::Plain(self.conn.table(&iname)?)
        };
        Ok(Index {
            layout: Layout::new(def),
            table,
            data: self.conn.table(&data)?,
            ttls,
        })
    }
}
