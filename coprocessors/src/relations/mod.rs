//! Two-way relations kept by observers: the schema of seed 003 (shops and items, each
//! listing the other; a category tree with `parent:` and `child:` columns) without client
//! code that writes both sides and breaks on every crash and every concurrent update.
//!
//! - [`InverseRelation`]: an observer on table A whose family `fam` holds links (qualifier =
//!   the linked row of table B, value = the link's payload, e.g. a relation type). A put of
//!   `A[a]/fam:b = v` adds `B[b]/fam':a = v`; deleting the link deletes the reverse one.
//! - [`TreeLinks`]: one table, two families (`parent:` and `child:`). A row has at most one
//!   parent; setting it adds `child:<row>` on the parent's row and removes both links to the
//!   old parent. A parent that would close a cycle is refused.
//! - [`RelationGuard`]: refuses user writes to a derived family (the reverse side), which only
//!   the maintaining observer writes (its added writes run no observer).
//! - [`register_relations`] registers the three under [`INVERSE_RELATION`], [`TREE_LINKS`]
//!   and [`RELATION_GUARD`]; [`inverse_relation`], [`tree_links`] and [`relation_guard`]
//!   build the matching descriptors.
//!
//! Invariant (both sides symmetric): for every visible link `A[a]/fam:b = v` there is a
//! visible `B[b]/fam':a = v` and the reverse, after any write, to any reader (the reverse
//! links are added to the write's own batch in `pre_batch_mutate`, under the source row's
//! lock, and commit in its WAL record and MVCC step) and after any crash.
//!
//! What keeps it, beyond atomicity:
//! - each derived cell has exactly one writer, its source row, whose batches are serialized
//!   by the row lock; the observer reads the row's links under that lock;
//! - writes whose effect cannot be mirrored exactly are refused with
//!   [`Error::BadArgument`] (see [`Refusal`]): explicit timestamps on a relation family (an
//!   old timestamp may sit under an existing version or delete marker), single-version and
//!   family-version deletes (they may uncover an older version), increments and appends;
//! - a delete marker hides puts at or below its timestamp. The engine stamps a batch that
//!   runs batch hooks, and the writes its hooks add, with one timestamp strictly above that
//!   of every earlier hooked write of the same rows (`MiniBatch::now`), so the source row
//!   and the reverse side of a link carry the same timestamp, and a link deleted and put
//!   again by the next batch is never hidden on either side. (`TreeLinks` deletes a replaced parent cell at that
//!   timestamp too.) Inside one batch a delete hides a put of the
//!   same link on both sides alike (HBase's rule), and the observer derives the reverse from
//!   that rule.
//!
//! Give the maintaining observers a larger priority number than any observer that may veto
//! (they then run after it): a veto that comes after the reverse links were derived would
//! leave the reverse write without its source. The descriptor helpers use
//! [`MAINTAINER_PRIORITY`] and [`GUARD_PRIORITY`].

mod changes;
mod guard;
mod inverse;
mod tree;

#[cfg(test)]
mod tests;

pub use changes::Refusal;
pub use guard::RelationGuard;
pub use inverse::InverseRelation;
pub use tree::TreeLinks;

use crate::observer::RegionObserver;
use crate::registry::{Args, Registry};
use basalt_core::{CoprocessorDescriptor, Error, Result, TableName};
use std::sync::Arc;

/// The registered name of [`InverseRelation`].
pub const INVERSE_RELATION: &str = "inverse-relation";
/// The registered name of [`TreeLinks`].
pub const TREE_LINKS: &str = "tree-links";
/// The registered name of [`RelationGuard`].
pub const RELATION_GUARD: &str = "relation-guard";

/// The priority the descriptor helpers give the maintaining observers: after user
/// observers (which may veto), so that the reverse links are derived from the final batch.
pub const MAINTAINER_PRIORITY: u32 = CoprocessorDescriptor::PRIORITY_USER + (1 << 20);
/// The priority of [`relation_guard`]: ahead of user observers.
pub const GUARD_PRIORITY: u32 = CoprocessorDescriptor::PRIORITY_SYSTEM + 100;

/// Registers [`InverseRelation`], [`TreeLinks`] and [`RelationGuard`] under their names.
///
/// ```
/// use basalt_coprocessors::Registry;
/// use basalt_coprocessors::relations::{register_relations, INVERSE_RELATION};
/// let registry = Registry::new();
/// register_relations(&registry).unwrap();
/// assert!(registry.contains(INVERSE_RELATION));
/// ```
pub fn register_relations(registry: &Registry) -> Result<()> {
    registry.register(INVERSE_RELATION, |args| {
        Ok(Arc::new(InverseRelation::from_args(args)?) as Arc<dyn RegionObserver>)
    })?;
    // One registry of moves in flight for every tree this registry builds: a chain
    // reloaded while moves are in flight still sees them.
    let in_flight = tree::InFlight::default();
    registry.register(TREE_LINKS, move |args| {
        let tree = TreeLinks::from_args(args)?.sharing(in_flight.clone());
        Ok(Arc::new(tree) as Arc<dyn RegionObserver>)
    })?;
    registry.register(RELATION_GUARD, |args| {
        Ok(Arc::new(RelationGuard::from_args(args)?) as Arc<dyn RegionObserver>)
    })?;
    Ok(())
}

/// The descriptor of an [`InverseRelation`] for the table holding `family`: links in
/// `family` are mirrored into `target_family` of `target_table`.
///
/// ```
/// use basalt_coprocessors::relations::inverse_relation;
/// let d = inverse_relation("item", "items", "shop");
/// assert_eq!(d.args["target_table"], "items");
/// ```
pub fn inverse_relation(
    family: &str,
    target_table: &str,
    target_family: &str,
) -> CoprocessorDescriptor {
    CoprocessorDescriptor::new(INVERSE_RELATION)
        .priority(MAINTAINER_PRIORITY)
        .arg("family", family)
        .arg("target_table", target_table)
        .arg("target_family", target_family)
}

/// The descriptor of a [`TreeLinks`] over `parent_family` and `child_family`.
pub fn tree_links(parent_family: &str, child_family: &str) -> CoprocessorDescriptor {
    CoprocessorDescriptor::new(TREE_LINKS)
        .priority(MAINTAINER_PRIORITY)
        .arg("parent_family", parent_family)
        .arg("child_family", child_family)
}

/// The descriptor of a [`RelationGuard`] protecting `families` (derived families).
pub fn relation_guard(families: &[&str]) -> CoprocessorDescriptor {
    CoprocessorDescriptor::new(RELATION_GUARD)
        .priority(GUARD_PRIORITY)
        .arg("families", families.join(","))
}

/// The argument `key`, or a clear error naming the coprocessor.
fn required<'a>(args: &'a Args, coprocessor: &str, key: &str) -> Result<&'a str> {
    match args.get(key) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(Error::bad_argument(format!(
            "coprocessor {coprocessor}: argument {key} missing or empty"
        ))),
    }
}

/// The argument `key`, or `default` when absent.
fn optional<'a>(args: &'a Args, key: &str, default: &'a str) -> &'a str {
    args.get(key).map_or(default, String::as_str)
}

/// Parses a table name argument.
fn table_arg(args: &Args, coprocessor: &str, key: &str) -> Result<TableName> {
    TableName::parse(required(args, coprocessor, key)?)
}
