//! Regions built from their catalog entries: a served region with its stores' files open
//! (offline, naming the file, when one is missing or unreadable), a region another engine
//! serves (its bounds, refusing every read and write), and an open table of them.
//!
//! Invariant: every store file a catalog entry lists is recorded as live, opened or not, so
//! an open never deletes a file a repair still needs.

use crate::catalog::{RegionEntry, TableEntry};
use crate::error::Result;
use crate::objects::Objects;
use crate::region::{Region, RegionFault, Store};
use crate::schema::TableDescriptor;
use crate::server::config::Config;
use crate::server::hooks::lifecycle::load_hooks;
use crate::server::shared::TableState;
use crate::storage::storefile::{BlockCache, StoreFileReader};
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub(crate) fn open_table(
    config: &Config,
    objects: &Arc<dyn Objects>,
    entry: &TableEntry,
    cache: &Arc<BlockCache>,
    (live, max_seq): (&mut HashSet<String>, &mut u64),
    served: &dyn Fn(u64) -> bool,
) -> Result<Arc<TableState>> {
    let mut regions = Vec::with_capacity(entry.regions.len());
    for r in &entry.regions {
        let region = match served(r.id) {
            true => open_region(objects, &entry.descriptor, r, cache, live, max_seq)?,
            false => unserved_region(&entry.descriptor, r),
        };
        regions.push(Arc::new(region));
    }
    Ok(Arc::new(TableState {
        name: entry.descriptor.name.clone(),
        key: entry.descriptor.name.to_string(),
        key_hash: crate::keys::hash::xxh3(entry.descriptor.name.to_string().as_bytes()),
        descriptor: RwLock::new(entry.descriptor.clone()),
        enabled: AtomicBool::new(entry.enabled),
        regions: RwLock::new(regions),
        hooks: crate::coprocessor::HookSlot::new(load_hooks(config, &entry.descriptor)?),
    }))
}

/// Opens one region's stores from its catalog entry.
pub(crate) fn open_region(
    objects: &Arc<dyn Objects>,
    desc: &TableDescriptor,
    entry: &RegionEntry,
    cache: &Arc<BlockCache>,
    live: &mut HashSet<String>,
    max_seq: &mut u64,
) -> Result<Region> {
    *max_seq = (*max_seq).max(entry.flushed_seq);
    let mut stores = BTreeMap::new();
    let mut fault: Option<RegionFault> = None;
    for fam in &desc.families {
        let mut readers = Vec::new();
        for f in entry.files.get(&fam.name).into_iter().flatten() {
            let name = f.name();
            // Listed, so never removed as an orphan: the repair needs it.
            live.insert(name.clone());
            *max_seq = (*max_seq).max(f.max_seq);
            let opened = if objects.exists(&name)? {
                StoreFileReader::open(objects, &name, f.id, Some(cache.clone()))
                    .map_err(|e| e.to_string())
            } else {
                Err("store file listed in the catalog is missing".to_string())
            };
            match opened {
                Ok(reader) => readers.push(reader),
                Err(reason) => {
                    tracing::error!(
                        table = %desc.name,
                        region = entry.id,
                        file = %name,
                        %reason,
                        "store file cannot be opened; the region stays offline"
                    );
                    let file = objects.locate(&name);
                    fault.get_or_insert(RegionFault {
                        file,
                        reason,
                        elsewhere: false,
                    });
                }
            }
        }
        stores.insert(fam.name.clone(), Arc::new(Store::new(fam.clone(), readers)));
    }
    Ok(region_of(desc, entry, stores, fault))
}

/// The region of catalog entry `entry` of table `desc` with `stores`, offline for `fault`
/// if there is one.
pub(crate) fn region_of(
    desc: &TableDescriptor,
    entry: &RegionEntry,
    stores: BTreeMap<bytes::Bytes, Arc<Store>>,
    fault: Option<RegionFault>,
) -> Region {
    let region = Region::new(
        entry.id,
        desc.name.clone(),
        entry.start.clone(),
        entry.end.clone(),
        entry.flushed_seq,
        entry.generation,
        stores,
    );
    if let Some(fault) = fault {
        let _ = region.offline.set(fault);
    }
    region
}

/// A region another engine serves: its bounds, no store file open, and refusing every
/// read and write.
pub(crate) fn unserved_region(desc: &TableDescriptor, entry: &RegionEntry) -> Region {
    let stores = desc
        .families
        .iter()
        .map(|f| (f.name.clone(), Arc::new(Store::new(f.clone(), Vec::new()))))
        .collect::<BTreeMap<_, _>>();
    let fault = RegionFault {
        file: std::path::PathBuf::new(),
        reason: "served by another engine".into(),
        elsewhere: true,
    };
    region_of(desc, entry, stores, Some(fault))
}
