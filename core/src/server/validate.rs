//! Checks of operations against their table, before any lock or sequence id, so a bad
//! operation writes (or reads) nothing: row keys, families the table has, value sizes and
//! TTLs, the reserved family of local index rows, version counts. Used by every stage
//! that takes an operation (reads, hooks' added writes, splits, the write pipeline).
//!
//! Invariant: a check reads no row and takes no lock; what it accepts, the stage it guards
//! can write or read without a schema error (a concurrent schema change aside).

use super::config::Config;
use super::shared::TableState;
use crate::error::{Error, Result};
use crate::ops::{validate_row, DeleteKind, Increment, Mutation, RowMutations};
use crate::region::{Region, Store};
use std::borrow::Cow;
use std::sync::Arc;

pub(crate) fn store_of(t: &TableState, region: &Region, family: &[u8]) -> Result<Arc<Store>> {
    region.store(family).ok_or_else(|| Error::FamilyNotFound {
        table: t.name.to_string(),
        family: String::from_utf8_lossy(family).into_owned(),
    })
}

pub(crate) fn check_value(config: &Config, v: &[u8]) -> Result<()> {
    if v.len() > config.max_value_size {
        return Err(Error::ValueTooLarge {
            size: v.len(),
            limit: config.max_value_size,
        });
    }
    Ok(())
}

/// Refuses a user write naming the reserved family of local rows
/// ([`crate::keys::local`]): only the writes an index's hooks add may.
pub(crate) fn refuse_local_family(family: &[u8]) -> Result<()> {
    if crate::schema::is_local_family(family) {
        return Err(Error::bad_argument(format!(
            "family {} holds local index rows: only their index writes it",
            String::from_utf8_lossy(family)
        )));
    }
    Ok(())
}

/// [`validate_mutation_in`] of a user's write: also refuses the local-row family.
pub(crate) fn validate_user_mutation(
    config: &Config,
    t: &TableState,
    m: &Mutation,
    seen: Option<&Arc<Region>>,
) -> Result<()> {
    match m {
        Mutation::Put(p) => {
            for (f, _, _, _) in p.cells() {
                refuse_local_family(f)?;
            }
        }
        Mutation::Delete(d) => {
            for k in &d.kinds {
                refuse_local_family(k.family())?;
            }
        }
    }
    validate_mutation_in(config, t, m, seen)
}

/// Checks a mutation without writing anything.
pub(crate) fn validate_mutation(config: &Config, t: &TableState, m: &Mutation) -> Result<()> {
    validate_mutation_in(config, t, m, None)
}

/// [`validate_mutation`] with `seen`, a region a hook just found for the row: used while
/// it still serves the row ([`Region::serves`]), saving a region lookup.
pub(crate) fn validate_mutation_in(
    config: &Config,
    t: &TableState,
    m: &Mutation,
    seen: Option<&Arc<Region>>,
) -> Result<()> {
    validate_row(m.row())?;
    let region = match seen.filter(|r| r.serves(m.row())) {
        Some(r) => Cow::Borrowed(r),
        None => Cow::Owned(t.online_region(m.row())?),
    };
    match m {
        Mutation::Put(p) => {
            if p.is_empty() && !p.is_touch() {
                return Err(Error::bad_argument("a put needs at least one column"));
            }
            validate_ttl(p.ttl_ms)?;
            // Columns of one family usually come together: the family is checked once per run.
            let mut last_family: Option<&[u8]> = None;
            for (f, _, _, v) in p.cells() {
                if last_family != Some(f) {
                    store_of(t, &region, f)?;
                    last_family = Some(f);
                }
                check_value(config, v)?;
            }
        }
        Mutation::Delete(d) => {
            for k in &d.kinds {
                let f = match k {
                    DeleteKind::Version { family, .. }
                    | DeleteKind::Column { family, .. }
                    | DeleteKind::Family { family, .. }
                    | DeleteKind::FamilyVersion { family, .. } => family,
                };
                store_of(t, &region, f)?;
            }
        }
    }
    Ok(())
}

/// Checks an increment without writing anything.
pub(crate) fn validate_increment(t: &TableState, inc: &Increment) -> Result<()> {
    validate_row(&inc.row)?;
    if inc.columns.is_empty() {
        return Err(Error::bad_argument("no column given"));
    }
    let region = t.online_region(&inc.row)?;
    for (f, _, _) in &inc.columns {
        store_of(t, &region, f)?;
    }
    Ok(())
}

pub(crate) fn check_same_row(rm: &RowMutations) -> Result<()> {
    if rm.mutations.is_empty() {
        return Err(Error::bad_argument(
            "row mutations need at least one mutation",
        ));
    }
    if rm.mutations.iter().any(|m| m.row() != &rm.row) {
        return Err(Error::bad_argument(
            "every mutation of a RowMutations must name its row",
        ));
    }
    Ok(())
}

/// A cell TTL must be positive (HBase refuses a negative one; zero would expire at once).
pub(crate) fn validate_ttl(ttl_ms: Option<u64>) -> Result<()> {
    match ttl_ms {
        Some(0) => Err(Error::bad_argument("a cell TTL must be positive")),
        _ => Ok(()),
    }
}

/// A read asks for at least one version.
pub(crate) fn validate_versions(n: u32) -> Result<()> {
    if n == 0 {
        return Err(Error::bad_argument("max versions must be at least 1"));
    }
    Ok(())
}
