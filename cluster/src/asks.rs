//! A region server's asks for splits (HBase 2's region server asking the master for a
//! `SplitTableRegionProcedure`): a region its table's split policy finds too big gets a
//! split procedure in etcd (`procedures`) for the master to run, at a row its server
//! chooses.
//!
//! Invariants: a server writes no procedure for a region with an unfinished one, and asks
//! for a region at most once per [`ASK_AGAIN`] unless the ask failed.

use crate::procedures::{listed_bounds, procedures, submit_procedure, ProcedureKind};
use crate::EtcdCoordination;
use basalt_core::coord::{RegionKey, SplitAsker};
use basalt_core::Result;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a server does not ask again for a split it asked for: the master runs it well
/// within that, and one lost with its master is asked again after it.
const ASK_AGAIN: Duration = Duration::from_secs(30);

/// A region server's [`SplitAsker`]: a region its table's split policy finds too big gets
/// a split procedure for the master to run (at a row its server chooses), unless one of
/// the region is pending. No client waits on it: the master deletes it once finished
/// (after `master::PROCEDURE_KEEP`).
#[derive(Debug)]
pub(crate) struct MasterSplits {
    coord: EtcdCoordination,
    /// The regions asked for lately, and when.
    asked: std::sync::Mutex<HashMap<RegionKey, Instant>>,
}

impl MasterSplits {
    /// Asks through `coord`.
    pub(crate) fn new(coord: EtcdCoordination) -> Self {
        MasterSplits {
            coord,
            asked: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Notes an ask of `region` now; false when one was made within [`ASK_AGAIN`].
    fn note_ask(&self, region: &RegionKey) -> bool {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.retain(|_, at| at.elapsed() < ASK_AGAIN);
        asked.insert(region.clone(), Instant::now()).is_none()
    }

    async fn submit(&self, region: &RegionKey) -> Result<Option<u64>> {
        let pending = procedures(&self.coord)
            .await?
            .into_iter()
            .any(|p| !p.record.finished() && p.record.kind.region_keys().contains(region));
        if pending {
            return Ok(None);
        }
        let [bounds] = listed_bounds(&self.coord, &region.table, [region.region]).await?;
        let kind = ProcedureKind::Split {
            table: region.table.clone(),
            region: region.region,
            at: None,
            bounds,
        };
        submit_procedure(&self.coord, kind).await.map(Some)
    }
}

#[async_trait::async_trait]
impl SplitAsker for MasterSplits {
    async fn ask_split(&self, region: &RegionKey) -> Result<()> {
        if !self.note_ask(region) {
            return Ok(());
        }
        match self.submit(region).await {
            Ok(Some(id)) => {
                tracing::info!(%region, procedure = %format!("{id:016x}"),
                    "asked the master to split a region grown past its split size");
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                // Asked again after the next flush.
                let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
                asked.remove(region);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procedures::{Bounds, ProcedureRecord, ProcedureState};
    use basalt_core::coord::RegionRecord;
    use basalt_core::{Error, TableName};
    use bytes::Bytes;

    fn table() -> TableName {
        TableName::parse("ns:t").unwrap()
    }

    /// A server's ask writes one split procedure per region however often it is made, by one
    /// server or by several; a region etcd does not list is refused, and asked again (not
    /// taken as pending) the next time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_region_is_asked_for_once_while_its_split_is_pending() {
        use basalt_core::coord::Coordination;
        let etcd = crate::LocalEtcd::start().unwrap();
        let config = crate::EtcdConfig::new([etcd.endpoint()]).prefix("/asks-test");
        let coord = EtcdCoordination::connect(config).await.unwrap();
        let listed = RegionKey::new(table(), 7);
        coord
            .put_region(
                RegionRecord {
                    key: listed.clone(),
                    start: Bytes::from_static(b"b"),
                    end: Bytes::from_static(b"m"),
                    revision: 0,
                },
                None,
            )
            .await
            .unwrap();
        let one = MasterSplits::new(coord.clone());
        let other = MasterSplits::new(coord.clone());
        for asker in [&one, &one, &other, &one] {
            asker.ask_split(&listed).await.unwrap();
        }
        let written = procedures(&coord).await.unwrap();
        assert_eq!(written.len(), 1, "{written:?}");
        assert_eq!(
            written[0].record,
            ProcedureRecord {
                kind: ProcedureKind::Split {
                    table: table(),
                    region: 7,
                    at: None,
                    bounds: Bounds {
                        start: b"b".to_vec(),
                        end: b"m".to_vec(),
                    },
                },
                state: ProcedureState::Requested,
            }
        );
        let unlisted = RegionKey::new(table(), 8);
        for _ in 0..2 {
            let refused = one.ask_split(&unlisted).await;
            assert!(
                matches!(refused, Err(Error::RegionNotFound { id: 8, .. })),
                "{refused:?}"
            );
        }
        assert_eq!(procedures(&coord).await.unwrap().len(), 1);
    }
}
