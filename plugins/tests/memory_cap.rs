//! A plugin that allocates without bound stops at its memory cap, measured in resident
//! memory: alone in its test binary, so no other test's allocations count.

mod common;

use basalt::client::Put;
use basalt::{
    plugin_coprocessor_name, ColumnFamilyDescriptor, CoprocessorDescriptor, TableDescriptor,
    TableName,
};
use basalt_plugins::PluginLimits;
use common::{hog, open};

/// A figure of this process's `/proc/self/status`, in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// A plugin that allocates without bound stops at its memory cap: the process's peak
/// resident memory while it runs again and again stays within the cap (and a margin for
/// the engine's own allocations), far below what the plugin asks for (4 GiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_under_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 32 << 20;
    let limits = PluginLimits {
        memory_bytes: cap,
        idle_instances: 1,
        ..PluginLimits::default()
    };
    let (conn, _registry) = open(dir.path(), limits).await;
    let id = conn
        .admin()
        .upload_plugin(hog().component())
        .await
        .unwrap()
        .id;
    let cp = CoprocessorDescriptor::new(plugin_coprocessor_name(&id));
    let d = TableDescriptor::new(TableName::parse("hog").unwrap())
        .family(ColumnFamilyDescriptor::new("f"))
        .coprocessor(cp);
    conn.admin().create_table(d).await.unwrap();
    let t = conn.table("hog").unwrap();
    // One fault first: the code and the first instance are in place before measuring.
    assert!(t
        .put(Put::new("warm").add_column("f", "q", "v"))
        .await
        .is_err());
    // Linux resets the peak (VmHWM) to the current resident size on "5".
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_bytes("VmRSS:");
    for i in 0..10 {
        let err = t
            .put(Put::new(format!("r{i}")).add_column("f", "q", "v"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("memory"), "{err}");
    }
    let peak = status_bytes("VmHWM:");
    let grown = peak.saturating_sub(before);
    println!("peak resident memory grew {} MiB", grown >> 20);
    assert!(
        grown < cap as u64 + (16 << 20),
        "peak resident memory grew {} MiB with a {} MiB cap",
        grown >> 20,
        cap >> 20
    );
    conn.close().await.unwrap();
}
