//! The tree observer on a real engine: moves keep parent and child links symmetric, a move
//! still in flight counts in the cycle check, and moving back at once stays symmetric.

use super::*;

#[tokio::test]
async fn tree_moves_keep_parent_and_child_symmetric() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let cat = tree(&conn).await;
    let parent = |row: &'static str, p: &'static str| Put::new(row).add_column("parent", p, p);

    cat.put(parent("2", "1")).await.unwrap();
    cat.put(parent("3", "2")).await.unwrap();
    cat.put(parent("4", "2")).await.unwrap();
    assert_eq!(links(&cat, "1", "child").await, map(&[("2", "1")]));
    assert_eq!(
        links(&cat, "2", "child").await,
        map(&[("3", "2"), ("4", "2")])
    );

    // Moving 4 under 1: its old parent cell and 2's child link go.
    cat.put(parent("4", "1")).await.unwrap();
    assert_eq!(links(&cat, "4", "parent").await, map(&[("1", "1")]));
    assert_eq!(links(&cat, "2", "child").await, map(&[("3", "2")]));
    assert_eq!(
        links(&cat, "1", "child").await,
        map(&[("2", "1"), ("4", "1")])
    );

    // Deleting the parent cell makes a root.
    cat.delete(Delete::new("4").add_family("parent"))
        .await
        .unwrap();
    assert!(links(&cat, "4", "parent").await.is_empty());
    assert_eq!(links(&cat, "1", "child").await, map(&[("2", "1")]));

    // Cycles, self-parents and two parents are refused.
    for (row, p) in [("1", "3"), ("2", "2"), ("1", "2")] {
        let e = cat.put(parent(row, p)).await.unwrap_err();
        assert!(is_refusal(&e, "cycle"), "{row} under {p}: {e}");
    }
    let e = cat
        .put(
            Put::new("5")
                .add_column("parent", "1", "")
                .add_column("parent", "2", ""),
        )
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "two parents"), "{e}");
    // A move against the committed tree: 3 under 6 (a new row), then 6 under 3 closes a
    // cycle while 7 under 1 in the same batch passes.
    cat.mutate_row(RowMutations::new("3").add(parent("3", "6")))
        .await
        .unwrap();
    let out = cat
        .batch(vec![
            BatchOp::Put(parent("6", "3")),
            BatchOp::Put(parent("7", "1")),
        ])
        .await
        .unwrap();
    assert!(matches!(&out[0], Err(e) if is_refusal(e, "cycle")));
    assert!(out[1].is_ok());
    // A batch's own moves count: 8 under 9 and 9 under 8 in one batch are both refused.
    let out = cat
        .batch(vec![
            BatchOp::Put(parent("8", "9")),
            BatchOp::Put(parent("9", "8")),
        ])
        .await
        .unwrap();
    for r in &out {
        assert!(matches!(r, Err(e) if is_refusal(e, "cycle")));
    }
    assert!(links(&cat, "8", "child").await.is_empty());
    assert!(links(&cat, "9", "child").await.is_empty());

    // The child family belongs to the observer.
    let e = cat
        .put(Put::new("1").add_column("child", "9", ""))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "derived"), "{e}");
    let e = cat.delete(Delete::new("1")).await.unwrap_err();
    assert!(is_refusal(&e, "derived"), "{e}");

    assert_eq!(links(&cat, "2", "child").await, map(&[]));
    assert_eq!(links(&cat, "6", "child").await, map(&[("3", "6")]));
    assert_eq!(
        links(&cat, "1", "child").await,
        map(&[("2", "1"), ("7", "1")])
    );
    conn.close().await.unwrap();
}

/// Holds a batch that moves row `a` inside its `pre_batch_mutate` (after [`TreeLinks`] ran)
/// until released: a move in flight.
#[derive(Debug, Default)]
struct Gate {
    entered: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl RegionObserver for Gate {
    async fn pre_batch_mutate(
        &self,
        _ctx: &mut crate::ObserverContext<'_>,
        batch: &mut crate::MiniBatch<'_>,
    ) -> Result<()> {
        if batch.operations().any(|m| m.row().as_ref() == b"a") {
            self.entered.notify_one();
            self.release.notified().await;
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_in_flight_counts_in_the_cycle_check() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::new());
    register_relations(&registry).unwrap();
    let gate = Arc::new(Gate::default());
    let g = gate.clone();
    registry
        .register("gate", move |_| Ok(g.clone() as Arc<dyn RegionObserver>))
        .unwrap();
    let conn = Connection::open_with(
        Config::new(dir.path())
            .coprocessor_loader(registry)
            .row_lock_wait_ms(200),
    )
    .await
    .unwrap();
    conn.admin()
        .create_table(
            table("cat", &["parent", "child"])
                .coprocessor(tree_links("parent", "child"))
                .coprocessor(
                    basalt_core::CoprocessorDescriptor::new("gate")
                        .priority(MAINTAINER_PRIORITY + 1),
                ),
        )
        .await
        .unwrap();
    let cat = conn.table("cat").unwrap();
    // a under b, held in flight: checked and registered, not yet visible.
    let mover = cat.clone();
    let first =
        tokio::spawn(async move { mover.put(Put::new("a").add_column("parent", "b", "")).await });
    gate.entered.notified().await;
    // b under a: the committed tree has no edge yet, the move in flight closes the cycle.
    let e = cat
        .put(Put::new("b").add_column("parent", "a", ""))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "cycle"), "{e}");
    gate.release.notify_one();
    first.await.unwrap().unwrap();
    assert_eq!(links(&cat, "b", "child").await, map(&[("a", "")]));
    assert!(links(&cat, "a", "child").await.is_empty());
    // Once visible, the edge counts as committed; the registry is empty again.
    let e = cat
        .put(Put::new("b").add_column("parent", "a", ""))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "cycle"), "{e}");
    cat.put(Put::new("c").add_column("parent", "a", ""))
        .await
        .unwrap();
    conn.close().await.unwrap();
}

#[tokio::test]
async fn moving_back_at_once_stays_symmetric() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let cat = tree(&conn).await;
    for round in 0..30 {
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        cat.put(Put::new("c").add_column("parent", "p1", ""))
            .await
            .unwrap();
        cat.put(Put::new("c").add_column("parent", "p2", ""))
            .await
            .unwrap();
        cat.put(Put::new("c").add_column("parent", "p1", ""))
            .await
            .unwrap();
        assert_eq!(
            links(&cat, "c", "parent").await,
            map(&[("p1", "")]),
            "round {round}"
        );
        assert_eq!(
            links(&cat, "p1", "child").await,
            map(&[("c", "")]),
            "round {round}"
        );
        assert!(links(&cat, "p2", "child").await.is_empty(), "round {round}");
    }
    conn.close().await.unwrap();
}
