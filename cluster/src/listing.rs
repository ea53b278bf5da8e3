//! Keeping etcd's region lists in line with the catalog on the shared store. A create,
//! split, merge, drop, clone or restore updates the catalog first and etcd's list of the
//! table's regions after it, so a server that dies between the two leaves the list behind:
//! the master assigns only what the list holds, and a client routes only to it.
//!
//! Two things show such a list, and each region server looks for both:
//! - a region assigned to the server that the catalog no longer lists (a split, merge or
//!   drop cut short): the server mends the table's list once the region has been missing
//!   for [`LISTING_GRACE`] (`regionserver`'s follow loop);
//! - a table of the catalog whose regions the list does not hold as the catalog has them
//!   (a create, clone or restore cut short, where nothing is assigned that would show it):
//!   every [`LISTING_CHECK`] the server compares each table of the newest catalog with its
//!   list ([`Unlisted`], `Engine::unlisted_tables`) and mends a table found out of line the
//!   same way (the same regions in the catalog, the same in the list) for
//!   [`LISTING_GRACE`].
//!
//! Invariants: a list is mended only after it was found out of line the same way for
//! [`LISTING_GRACE`], at checks [`LISTING_CHECK`] apart (a live server finishing its own
//! update lists well within it, so it is not raced); a
//! mend reads the list before the catalog and lists the catalog's regions before it
//! unlists the others (`Engine::sync_region_listing`), so no row is ever without a listed
//! region; mends are idempotent, and several servers mending one table at once agree.

use basalt_core::{Engine, TableName, UnlistedTable};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a table's region list stays out of line with the catalog before a server
/// mends it: a live server that created, split, merged, dropped, cloned or restored it
/// lists within it.
pub const LISTING_GRACE: Duration = Duration::from_secs(10);

/// How often a region server compares every table of the catalog with its list in etcd.
pub const LISTING_CHECK: Duration = Duration::from_secs(5);

/// The tables a region server found listed out of line with the catalog, each with how
/// (the catalog's and the list's region ids) and since when it found them so.
#[derive(Debug, Default)]
pub(crate) struct Unlisted {
    since: BTreeMap<TableName, (UnlistedTable, Instant)>,
    checked: Option<Instant>,
}

impl Unlisted {
    /// Every [`LISTING_CHECK`] (a no-op between): compares the catalog's tables with
    /// their lists, forgets the tables back in line, and mends those out of line for
    /// [`LISTING_GRACE`].
    pub(crate) async fn check(&mut self, engine: &Engine, process: &str) {
        if self.checked.is_some_and(|at| at.elapsed() < LISTING_CHECK) {
            return;
        }
        self.checked = Some(Instant::now());
        let unlisted = match engine.unlisted_tables().await {
            Ok(tables) => tables,
            Err(e) => {
                tracing::debug!(%process, error = %e, "could not compare the region lists with the catalog");
                return;
            }
        };
        self.since
            .retain(|t, _| unlisted.iter().any(|u| u.table == *t));
        for found in unlisted {
            // The grace starts again whenever the difference changes: another change of
            // the table, which its live server lists in its turn.
            let since = match self.since.get(&found.table) {
                Some((seen, at)) if *seen == found => *at,
                _ => {
                    self.since
                        .insert(found.table.clone(), (found.clone(), Instant::now()));
                    continue;
                }
            };
            if since.elapsed() >= LISTING_GRACE {
                self.since.remove(&found.table);
                mend(engine, process, &found.table).await;
            }
        }
    }
}

/// Brings etcd's list of `table`'s regions in line with the catalog
/// (`Engine::sync_region_listing`), and says what it did.
pub(crate) async fn mend(engine: &Engine, process: &str, table: &TableName) {
    match engine.sync_region_listing(table).await {
        Ok((0, 0)) => {}
        Ok((listed, removed)) => tracing::info!(
            %process,
            %table,
            listed,
            removed,
            "brought the region list in etcd in line with the catalog"
        ),
        Err(e) => tracing::warn!(
            %process,
            %table,
            error = %e,
            "could not bring the region list in line with the catalog"
        ),
    }
}
