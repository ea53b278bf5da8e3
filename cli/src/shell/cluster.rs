//! `status` and the commands of a cluster's administration, as HBase's shell has them:
//! `move` (a region, with its table group when grouped, to a server or any other), `balancer` (one
//! balancing pass) and `balance_switch` (the balancer on or off), through the cluster's
//! [`ClusterAdmin`]; and where each region is served, for `list_regions`.
//!
//! Only the master moves regions: these commands write a request and wait (until Ctrl-C,
//! or 30 s) for the master to act on it and for every region to be served where it is
//! assigned, so that the next command sees the result. An embedded engine serves every
//! region itself: the cluster commands are refused there, saying so.
//!
//! Invariants: `status` over a directory prints its one line as it always has; a wait
//! interrupted by Ctrl-C leaves the request to the master (it is never withdrawn).

use super::admin::find_region;
use super::args::{as_bool, Args};
use super::background::{self, OnInterrupt, Waited};
use super::ddl::show_name;
use super::ShellError;
use crate::datadir::DataDir;
use basalt_cluster::{ClusterAdmin, RegionPlacement};
use basalt_core::client::Backend;
use basalt_core::TableName;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How long a move or a balancing pass is waited for.
const SETTLE: Duration = Duration::from_secs(30);

/// The cluster's administration, or the error of a cluster command on a directory.
fn cluster_admin<'d, B: Backend>(
    dir: &'d DataDir<B>,
    a: &Args<'_>,
) -> Result<&'d ClusterAdmin, ShellError> {
    dir.cluster_admin().ok_or_else(|| {
        ShellError::Unsupported(format!(
            "{} needs a cluster (basalt shell --etcd URLS): an embedded engine serves every \
             region itself",
            a.cmd
        ))
    })
}

/// `status`: what the shell works on, with its namespaces, tables and regions; over a
/// cluster also its master, balancer, regions in transition and live servers.
pub(super) async fn status<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(0, 1)?;
    let admin = dir.conn.admin();
    let tables = admin.list_tables().await?;
    let mut regions = 0;
    for t in &tables {
        regions += admin.regions(t.name.clone()).await?.len();
    }
    let namespaces = admin.list_namespaces().await?.len();
    let offline = admin.offline_regions().await?.len();
    let engines = match dir.cluster() {
        None => "1 embedded engine".to_string(),
        Some(at) => format!("a cluster at {at}"),
    };
    out.push_str(&format!(
        "{engines}, {namespaces} namespaces, {} tables, {regions} regions, {offline} offline regions\n",
        tables.len()
    ));
    let Some(cluster) = dir.cluster_admin() else {
        return Ok(());
    };
    let s = cluster.status().await?;
    out.push_str(&format!(
        "master {}, balancer {}, {} regions in transition, {} moves pending\n",
        s.master.as_deref().unwrap_or("(none elected)"),
        if s.balancer_on { "on" } else { "off" },
        s.in_transition.len(),
        s.pending_moves
    ));
    if !s.held.is_empty() {
        let held: Vec<String> = s.held.iter().map(ToString::to_string).collect();
        out.push_str(&format!("held by schema changes: {}\n", held.join(", ")));
    }
    out.push_str(&format!("{} live servers\n", s.servers.len()));
    for server in &s.servers {
        out.push_str(&format!(
            "    {} {}: {} assigned, {} serving\n",
            server.name, server.rpc_address, server.assigned, server.serving
        ));
    }
    Ok(())
}

/// Where each region of `table` is served, by region id, as `list_regions` shows it
/// (`None` for a directory).
pub(super) async fn servers_of<B: Backend>(
    dir: &DataDir<B>,
    table: &TableName,
) -> Result<Option<HashMap<u64, String>>, ShellError> {
    let Some(cluster) = dir.cluster_admin() else {
        return Ok(None);
    };
    let placed = cluster.regions(Some(table)).await?;
    Ok(Some(
        placed
            .iter()
            .map(|p| (p.key.region, placement(p)))
            .collect(),
    ))
}

/// A region's server as `list_regions` shows it.
fn placement(p: &RegionPlacement) -> String {
    match (&p.serving, &p.assigned) {
        (Some(s), Some(a)) if s == a => s.clone(),
        (Some(s), Some(a)) => format!("{s} (moving to {a})"),
        (Some(s), None) => s.clone(),
        (None, Some(a)) => format!("(opening on {a})"),
        (None, None) => "(unassigned)".to_string(),
    }
}

/// Waits for the master to act on the requests and for every region to be served where it
/// is assigned (until Ctrl-C, which leaves the requests to the master).
async fn settle(
    cluster: &ClusterAdmin,
    stop: &AtomicBool,
    bg: &background::Background,
    what: &str,
) -> Result<(), ShellError> {
    let waiting = cluster.clone();
    let task = tokio::spawn(async move { waiting.wait_settled(SETTLE).await });
    // Waiting only reads: dropping the wait withdraws nothing.
    match background::wait(task, stop, OnInterrupt::Abort, bg).await? {
        Waited::Done(_) => Ok(()),
        Waited::Interrupted => Err(ShellError::Interrupted(format!(
            "{what} was requested: the master acts on it without the shell"
        ))),
    }
}

/// `move 'region' [, 'server']`: the region (as `list_regions` names it, or its id) and the
/// rest of its table group when grouped) to `server`, or to any other live server.
pub(super) async fn move_region<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    stop: &AtomicBool,
    bg: &background::Background,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(1, 2)?;
    let cluster = cluster_admin(dir, a)?;
    let spec = a.string(0, "the region name or id")?;
    let to = match a.vals.get(1) {
        Some(_) => Some(a.string(1, "the server name")?),
        None => None,
    };
    let Some((table, region)) = find_region(dir, a, &spec).await? else {
        return Err(a.usage(format!(
            "'{spec}' is not a region name (list_regions 'table' names the regions)"
        )));
    };
    cluster
        .move_region(&table, region.id, to.as_deref())
        .await?;
    settle(cluster, stop, bg, "the move").await?;
    let now = cluster
        .regions(Some(&table))
        .await?
        .iter()
        .find(|p| p.key.region == region.id)
        .map(placement)
        .unwrap_or_else(|| "(gone)".to_string());
    out.push_str(&format!(
        "Moved region {} of {}: served by {now}\n",
        region.id,
        show_name(&table)
    ));
    Ok(())
}

/// `balancer`: one balancing pass, whether the balancer is on or not; prints how many
/// regions it moved.
pub(super) async fn balancer<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    stop: &AtomicBool,
    bg: &background::Background,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(0, 1)?;
    if a.vals.len() == 1 && !a.string(0, "'force'")?.eq_ignore_ascii_case("force") {
        return Err(a.usage("the only option is 'force'"));
    }
    let cluster = cluster_admin(dir, a)?;
    let before = where_served(&cluster.regions(None).await?);
    cluster.balance().await?;
    settle(cluster, stop, bg, "the balancing pass").await?;
    let after = where_served(&cluster.regions(None).await?);
    let moved = after
        .iter()
        .filter(|(region, server)| before.get(*region).is_some_and(|b| b != *server))
        .count();
    out.push_str(&format!("true\nThe balancer moved {moved} region(s)\n"));
    Ok(())
}

/// Each region's serving server.
fn where_served(placed: &[RegionPlacement]) -> HashMap<(String, u64), Option<String>> {
    placed
        .iter()
        .map(|p| ((p.key.table.to_string(), p.key.region), p.serving.clone()))
        .collect()
}

/// `balance_switch true|false`: turns the balancer on or off; prints its previous state.
pub(super) async fn balance_switch<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(1, 1)?;
    let on = a
        .vals
        .first()
        .and_then(as_bool)
        .ok_or_else(|| a.usage("give true or false"))?;
    let was = cluster_admin(dir, a)?.balancer(on).await?;
    out.push_str(&format!("Previous balancer state : {was}\n"));
    Ok(())
}
