//! Plugins in the sandbox: upload, attach, veto, swap and roll back, detach and delete; a
//! plugin that loops, allocates, traps or recurses without bound fails only its own
//! operation, within its deadline, under the attachment's failure policy.

use crate::common;

use basalt::client::{BatchOp, Get, Put};
use basalt::{
    plugin_coprocessor_name, ColumnFamilyDescriptor, Connection, CoprocessorDescriptor, Error,
    FailurePolicy, PluginKind, TableDescriptor, TableName,
};
use basalt_plugins::PluginLimits;
use common::{open, Observer};
use std::time::{Duration, Instant};

async fn table(conn: &Connection, name: &str, cps: Vec<CoprocessorDescriptor>) {
    let desc = cps.into_iter().fold(
        TableDescriptor::new(TableName::parse(name).unwrap())
            .family(ColumnFamilyDescriptor::new("f")),
        |d, c| d.coprocessor(c),
    );
    conn.admin().create_table(desc).await.unwrap();
}

fn put(row: &str) -> Put {
    Put::new(row).add_column("f", "q", row)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploaded_plugins_attach_veto_swap_and_detach() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, registry) = open(dir.path(), PluginLimits::default()).await;
    let admin = conn.admin();

    // Not a component: refused, nothing stored.
    let err = admin.upload_plugin(b"not wasm".to_vec()).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    assert!(admin.list_plugins().await.unwrap().is_empty());

    let keep = admin
        .upload_plugin(Observer::keep_all().component())
        .await
        .unwrap();
    let veto = admin
        .upload_plugin(Observer::veto_first("no thanks").component())
        .await
        .unwrap();
    assert_eq!(keep.kind, PluginKind::Observer);
    assert_eq!(
        keep.id,
        basalt::plugin_id(&Observer::keep_all().component())
    );
    // The same bytes again answer the stored plugin.
    let again = admin
        .upload_plugin(Observer::keep_all().component())
        .await
        .unwrap();
    assert_eq!(again, keep);
    assert_eq!(admin.list_plugins().await.unwrap().len(), 2);

    let keep_name = plugin_coprocessor_name(&keep.id);
    let veto_name = plugin_coprocessor_name(&veto.id);
    table(&conn, "t", vec![CoprocessorDescriptor::new(&keep_name)]).await;
    let t = conn.table("t").unwrap();
    t.put(put("a")).await.unwrap();
    assert!(t.exists(Get::new("a")).await.unwrap());
    let calls = registry.metrics(&TableName::parse("t").unwrap());
    assert_eq!(calls.len(), 1);
    assert!(calls[0].calls > 0, "{calls:?}");
    assert_eq!(
        admin.describe_plugin(&keep.id).await.unwrap().tables,
        vec!["default:t".to_string()]
    );

    // Hot swap to the vetoing version: the next put is refused with its message.
    admin
        .swap_coprocessor("t", &keep_name, CoprocessorDescriptor::new(&veto_name))
        .await
        .unwrap();
    match t.put(put("b")).await {
        Err(Error::Coprocessor { name, msg }) => {
            assert_eq!(name, veto_name);
            assert_eq!(msg, "no thanks");
        }
        other => panic!("{other:?}"),
    }
    assert!(!t.exists(Get::new("b")).await.unwrap());
    // In a batch only the first operation is vetoed.
    let out = t
        .batch(vec![BatchOp::Put(put("c")), BatchOp::Put(put("d"))])
        .await
        .unwrap();
    assert!(out[0].is_err() && out[1].is_ok(), "{out:?}");

    // A version that refuses its configuration cannot be swapped in: the old one serves.
    let mut refuses = Observer::keep_all();
    refuses.configure = Some(
        r#"(i32.store8 (i32.const 128) (i32.const 1)) (i32.store (i32.const 132) (i32.const 480))
           (i32.store (i32.const 136) (i32.const 3)) (i32.const 128)"#
            .into(),
    );
    refuses.extra = r#"(data (i32.const 480) "bad")"#.into();
    let bad = admin.upload_plugin(refuses.component()).await.unwrap();
    let err = admin
        .swap_coprocessor(
            "t",
            &veto_name,
            CoprocessorDescriptor::new(plugin_coprocessor_name(&bad.id)),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("bad"), "{err}");
    assert!(
        t.put(put("e")).await.is_err(),
        "the vetoing version still serves"
    );

    // Roll back: attach the previous hash again.
    admin
        .swap_coprocessor("t", &veto_name, CoprocessorDescriptor::new(&keep_name))
        .await
        .unwrap();
    t.put(put("f")).await.unwrap();

    // Reopened, the attachment loads again from the catalog's object space.
    conn.close().await.unwrap();
    let (conn, _registry) = open(dir.path(), PluginLimits::default()).await;
    let admin = conn.admin();
    let t = conn.table("t").unwrap();
    t.put(put("g")).await.unwrap();
    // An attached plugin is not deleted; once detached it is.
    assert!(admin.delete_plugin(&keep.id).await.is_err());
    admin.remove_coprocessor("t", &keep_name).await.unwrap();
    admin.delete_plugin(&keep.id).await.unwrap();
    assert!(matches!(
        admin.describe_plugin(&keep.id).await,
        Err(Error::PluginNotFound(_))
    ));
    assert_eq!(admin.list_plugins().await.unwrap().len(), 2);
    conn.close().await.unwrap();
}

/// The runaway bodies of `pre-batch`, with what their fault says.
fn runaways() -> Vec<(&'static str, Observer, &'static str)> {
    vec![
        (
            "loops forever",
            Observer::pre_batch_runs("(loop $l (br $l))", ""),
            "deadline",
        ),
        ("allocates without bound", common::hog(), "memory"),
        ("traps", Observer::pre_batch_runs("unreachable", ""), "unreachable"),
        (
            "recurses without bound",
            Observer::pre_batch_runs(
                "(drop (call $deep (i32.const 0)))",
                "(func $deep (param i32) (result i32) (i32.add (call $deep (i32.add (local.get 0) (i32.const 1))) (i32.const 1)))",
            ),
            "stack",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_plugins_fail_only_their_own_operation() {
    let dir = tempfile::tempdir().unwrap();
    // A deadline long enough that the hog meets its memory cap first even on a loaded
    // machine (at 50 ms a CI run under load once saw the deadline first).
    let limits = PluginLimits {
        call_deadline: Duration::from_millis(400),
        ..PluginLimits::default()
    };
    let (conn, registry) = open(dir.path(), limits).await;
    let admin = conn.admin();
    table(&conn, "plain", vec![]).await;
    let plain = conn.table("plain").unwrap();
    for (i, (what, plugin, says)) in runaways().into_iter().enumerate() {
        let id = admin.upload_plugin(plugin.component()).await.unwrap().id;
        let name = format!("fail{i}");
        let skip = format!("skip{i}");
        let cp = CoprocessorDescriptor::new(plugin_coprocessor_name(&id));
        table(&conn, &name, vec![cp.clone()]).await;
        table(&conn, &skip, vec![cp.policy(FailurePolicy::SkipHook)]).await;

        let start = Instant::now();
        let err = conn.table(&name).unwrap().put(put("r")).await.unwrap_err();
        let took = start.elapsed();
        match &err {
            Error::Coprocessor { msg, .. } => assert!(msg.contains(says), "{what}: {msg}"),
            other => panic!("{what}: {other:?}"),
        }
        assert!(took < Duration::from_secs(5), "{what} took {took:?}");
        assert!(!conn
            .table(&name)
            .unwrap()
            .exists(Get::new("r"))
            .await
            .unwrap());
        // The next operation gets a fresh instance, and faults the same way.
        assert!(
            conn.table(&name).unwrap().put(put("s")).await.is_err(),
            "{what}"
        );
        // Under SkipHook the write goes on without the hook.
        conn.table(&skip).unwrap().put(put("r")).await.unwrap();
        assert!(conn
            .table(&skip)
            .unwrap()
            .exists(Get::new("r"))
            .await
            .unwrap());
        // Every other table keeps serving.
        plain.put(put(what)).await.unwrap();
        let m = registry.metrics(&TableName::parse(&name).unwrap());
        assert_eq!(m[0].faults, 2, "{what}: {m:?}");
    }
    // UnloadAfter(2): the first fault fails its operation, the second unloads the plugin.
    let id = admin
        .upload_plugin(runaways()[2].1.component())
        .await
        .unwrap()
        .id;
    let cp = CoprocessorDescriptor::new(plugin_coprocessor_name(&id))
        .policy(FailurePolicy::UnloadAfter(2));
    table(&conn, "unload", vec![cp]).await;
    let t = conn.table("unload").unwrap();
    assert!(t.put(put("a")).await.is_err());
    t.put(put("b")).await.unwrap();
    t.put(put("c")).await.unwrap();
    let m = registry.metrics(&TableName::parse("unload").unwrap());
    assert!(!m[0].loaded, "{m:?}");
    conn.close().await.unwrap();
}

/// The host's counters of an attachment: calls, faults, mean and p99 latency, memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_counts_calls_faults_latency_and_memory_per_attachment() {
    let dir = tempfile::tempdir().unwrap();
    let host = basalt_plugins::PluginHost::with_defaults().unwrap();
    let registry = std::sync::Arc::new(basalt::coprocessors::Registry::new());
    registry.set_plugin_runtime(host.clone());
    let config = basalt::Config::new(dir.path()).coprocessor_loader(registry);
    let conn = Connection::open_with(config).await.unwrap();
    let admin = conn.admin();
    let keep = admin
        .upload_plugin(Observer::keep_all().component())
        .await
        .unwrap()
        .id;
    let trap = admin
        .upload_plugin(Observer::pre_batch_runs("unreachable", "").component())
        .await
        .unwrap()
        .id;
    table(
        &conn,
        "k",
        vec![CoprocessorDescriptor::new(plugin_coprocessor_name(&keep))],
    )
    .await;
    table(
        &conn,
        "x",
        vec![CoprocessorDescriptor::new(plugin_coprocessor_name(&trap))],
    )
    .await;
    for i in 0..20 {
        conn.table("k")
            .unwrap()
            .put(put(&format!("r{i}")))
            .await
            .unwrap();
    }
    assert!(conn.table("x").unwrap().put(put("r")).await.is_err());
    let stats = host.plugin_stats();
    let k = stats.iter().find(|s| s.table == "default:k").unwrap();
    // One pre-batch call per put (configure is not a hook call).
    assert_eq!((k.calls, k.faults), (20, 0), "{k:?}");
    assert_eq!(k.name, plugin_coprocessor_name(&keep));
    assert!(k.mean.is_some() && k.p99 >= k.mean.map(|m| m / 2), "{k:?}");
    assert!(k.memory_bytes >= 65536, "{k:?}");
    let x = stats.iter().find(|s| s.table == "default:x").unwrap();
    assert_eq!((x.calls, x.faults), (1, 1), "{x:?}");
    // Detached, its counters go.
    admin
        .remove_coprocessor("k", &plugin_coprocessor_name(&keep))
        .await
        .unwrap();
    assert!(host.plugin_stats().iter().all(|s| s.table != "default:k"));
    conn.close().await.unwrap();
}

/// Deny by default: a plugin that reads WASI's wall clock loads, but its call traps until
/// its attachment grants `clock`; an unknown grant refuses the attachment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clock_is_reached_only_when_granted() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, _registry) = open(dir.path(), PluginLimits::default()).await;
    let mut clocked = Observer::pre_batch_runs(
        "(call $now (i32.const 800)) (if (i64.eqz (i64.load (i32.const 800))) (then unreachable))",
        "",
    );
    clocked.imports =
        r#"(import "wasi:clocks/wall-clock@0.2.0" "now" (func $now (param i32)))"#.into();
    let bytes = common::component(&clocked.wat(), "clocked");
    let id = conn.admin().upload_plugin(bytes).await.unwrap().id;
    let name = plugin_coprocessor_name(&id);
    table(&conn, "denied", vec![CoprocessorDescriptor::new(&name)]).await;
    let err = conn
        .table("denied")
        .unwrap()
        .put(put("a"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Coprocessor { .. }), "{err:?}");
    let granted = CoprocessorDescriptor::new(&name).arg(basalt_plugins::GRANTS_ARG, "clock");
    table(&conn, "granted", vec![granted]).await;
    conn.table("granted").unwrap().put(put("a")).await.unwrap();
    let bad = CoprocessorDescriptor::new(&name).arg(basalt_plugins::GRANTS_ARG, "files");
    let err = conn
        .admin()
        .add_coprocessor("denied", bad.clone().priority(7))
        .await;
    assert!(err.is_err(), "{err:?}");
    conn.close().await.unwrap();
}

/// A component built against an earlier version of the interface (0.1.0 passed hooks a
/// list of records where 0.2.0 passes packed bytes) is refused at upload, never run
/// against a layout it does not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_of_an_earlier_interface_version_is_refused_at_upload() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, _registry) = open(dir.path(), PluginLimits::default()).await;
    let old_wit = basalt_plugins::WIT.replace("@0.2.0", "@0.1.0");
    let old_wat = Observer::keep_all().wat().replace("@0.2.0", "@0.1.0");
    let old = common::component_of(&old_wat, "region-observer", &old_wit);
    let err = conn.admin().upload_plugin(old).await.unwrap_err();
    assert!(err.to_string().contains("0.2.0"), "{err}");
    assert!(conn.admin().list_plugins().await.unwrap().is_empty());
    // The same module against the current interface is taken.
    conn.admin()
        .upload_plugin(Observer::keep_all().component())
        .await
        .unwrap();
    conn.close().await.unwrap();
}
