//! Conformance of every [`Objects`] backend to the contract in `basalt::objects`: the local
//! directory on the real filesystem and on the fault-injecting one, and the `object_store`
//! crate's in-memory store (at its root and in a folder) and local directory. A model
//! proptest checks each against a map; crash tests check that a stored object survives a
//! machine crash whole and an unfinished one leaves nothing visible.

use basalt::fs::{CrashKind, FaultFs, FileSystem, StdFs};
use basalt::objects::{LocalObjects, Objects, PutMode, StoreObjects};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

/// A backend under test and what keeps it alive (a temporary directory).
struct Backend {
    name: &'static str,
    objects: Arc<dyn Objects>,
    _dir: Option<tempfile::TempDir>,
}

fn backends() -> Vec<Backend> {
    let std_dir = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let fault = FaultFs::new();
    fault.create_dir_all(Path::new("/objects")).unwrap();
    let memory = Arc::new(basalt::objects::object_store::memory::InMemory::new());
    vec![
        Backend {
            name: "local on StdFs",
            objects: Arc::new(LocalObjects::new(StdFs::shared(), std_dir.path())),
            _dir: Some(std_dir),
        },
        Backend {
            name: "local on FaultFs",
            objects: Arc::new(LocalObjects::new(fault.as_dyn(), "/objects")),
            _dir: None,
        },
        Backend {
            name: "object_store InMemory",
            objects: Arc::new(StoreObjects::in_memory()),
            _dir: None,
        },
        Backend {
            name: "object_store InMemory, in a folder",
            objects: Arc::new(StoreObjects::in_folder(memory, "engine-1").unwrap()),
            _dir: None,
        },
        Backend {
            name: "object_store LocalFileSystem",
            objects: Arc::new(StoreObjects::local_directory(store_dir.path()).unwrap()),
            _dir: Some(store_dir),
        },
    ]
}

fn conformance(name: &str, o: &dyn Objects) {
    // Put and read back, whole and in ranges.
    o.put("d/a", b"hello world", PutMode::Create).unwrap();
    assert_eq!(o.read("d/a").unwrap(), b"hello world", "{name}");
    let f = o.open("d/a").unwrap();
    assert_eq!(f.size().unwrap(), 11);
    let mut buf = [0u8; 5];
    f.read_exact_at(&mut buf, 6).unwrap();
    assert_eq!(&buf, b"world");
    let e = f.read_exact_at(&mut buf, 8).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{name}");

    // Create refuses a taken name and keeps the first object; Overwrite replaces it.
    let e = o.put("d/a", b"other", PutMode::Create).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{name}: {e}");
    assert_eq!(o.read("d/a").unwrap(), b"hello world");
    o.put("d/a", b"replaced", PutMode::Overwrite).unwrap();
    assert_eq!(o.read("d/a").unwrap(), b"replaced");
    o.put("d/fresh", b"new", PutMode::Overwrite).unwrap();

    // A streamed object is invisible until finished; one dropped unfinished leaves nothing.
    let mut w = o.writer("d/e/streamed").unwrap();
    w.write_all(b"part one, ").unwrap();
    w.write_all(b"part two").unwrap();
    assert_eq!(w.written(), 18);
    assert!(!o.exists("d/e/streamed").unwrap(), "{name}");
    assert_eq!(o.list("d").unwrap(), ["d/a", "d/fresh"], "{name}");
    w.finish(PutMode::Create).unwrap();
    assert_eq!(o.read("d/e/streamed").unwrap(), b"part one, part two");
    let mut dropped = o.writer("d/dropped").unwrap();
    dropped.write_all(b"never stored").unwrap();
    drop(dropped);
    assert!(!o.exists("d/dropped").unwrap());

    // Listing: every object under a folder, at any depth, sorted; not a sibling folder
    // sharing a prefix.
    o.put("dd/x", b"", PutMode::Create).unwrap();
    o.put("top", b"t", PutMode::Create).unwrap();
    assert_eq!(
        o.list("d").unwrap(),
        ["d/a", "d/e/streamed", "d/fresh"],
        "{name}"
    );
    assert_eq!(o.list("d/e").unwrap(), ["d/e/streamed"]);
    assert_eq!(o.list("missing").unwrap(), Vec::<String>::new());
    assert_eq!(
        o.list("").unwrap(),
        ["d/a", "d/e/streamed", "d/fresh", "dd/x", "top"],
        "{name}"
    );
    assert_eq!(o.read("dd/x").unwrap(), b"", "an empty object reads empty");

    // Missing objects: NotFound to read, nothing to delete.
    assert_eq!(o.open("d/missing").unwrap_err().kind(), ErrorKind::NotFound);
    assert!(!o.exists("d/missing").unwrap());
    o.delete("d/missing").unwrap();
    o.delete("d/a").unwrap();
    assert!(!o.exists("d/a").unwrap());
    assert_eq!(o.list("d").unwrap(), ["d/e/streamed", "d/fresh"]);
    // A deleted name can be created again.
    o.put("d/a", b"again", PutMode::Create).unwrap();
    assert_eq!(o.read("d/a").unwrap(), b"again");

    // Names outside the rules are refused, never touched.
    for bad in [
        "",
        "/abs",
        "a//b",
        "a/../b",
        "./a",
        "a/",
        "with space",
        "x.tmp",
        "ü",
        "a\\b",
    ] {
        let e = o.put(bad, b"x", PutMode::Overwrite).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{name}: {bad:?}");
        assert_eq!(o.open(bad).unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(o.delete(bad).unwrap_err().kind(), ErrorKind::InvalidInput);
    }
    assert_eq!(o.list("a/..").unwrap_err().kind(), ErrorKind::InvalidInput);
}

#[test]
fn every_backend_conforms() {
    for b in backends() {
        conformance(b.name, b.objects.as_ref());
    }
}

#[test]
fn of_concurrent_creates_of_one_name_exactly_one_wins_whole() {
    for b in backends() {
        for round in 0..5 {
            let name = format!("race/{round}");
            let winners: Vec<usize> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|i| {
                        let o = &b.objects;
                        let name = &name;
                        s.spawn(move || {
                            let body = vec![i as u8; 1000 + i];
                            match o.put(name, &body, PutMode::Create) {
                                Ok(()) => Some(i),
                                Err(e) => {
                                    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
                                    None
                                }
                            }
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .filter_map(|h| h.join().unwrap())
                    .collect()
            });
            assert_eq!(winners.len(), 1, "{}: winners {winners:?}", b.name);
            let w = winners[0];
            assert_eq!(b.objects.read(&name).unwrap(), vec![w as u8; 1000 + w]);
        }
        assert_eq!(b.objects.list("race").unwrap().len(), 5, "{}", b.name);
    }
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Step {
    Put(usize, Vec<u8>, bool),
    Stream(usize, Vec<Vec<u8>>, bool),
    Abandon(usize, Vec<u8>),
    Delete(usize),
    Read(usize, u16, u8),
    List(usize),
}

/// Names no one of which is a folder of another (the engine never names both).
const NAMES: [&str; 6] = ["x", "d/a", "d/b", "d/e/f", "d/e/g", "g/h"];
const FOLDERS: [&str; 4] = ["", "d", "d/e", "g"];

fn step() -> impl Strategy<Value = Step> {
    let name = 0..NAMES.len();
    let bytes = proptest::collection::vec(any::<u8>(), 0..64);
    prop_oneof![
        (name.clone(), bytes.clone(), any::<bool>()).prop_map(|(n, b, c)| Step::Put(n, b, c)),
        (
            name.clone(),
            proptest::collection::vec(bytes.clone(), 0..4),
            any::<bool>()
        )
            .prop_map(|(n, p, c)| Step::Stream(n, p, c)),
        (name.clone(), bytes).prop_map(|(n, b)| Step::Abandon(n, b)),
        name.clone().prop_map(Step::Delete),
        (name, any::<u16>(), any::<u8>()).prop_map(|(n, o, l)| Step::Read(n, o, l)),
        (0..FOLDERS.len()).prop_map(Step::List),
    ]
}

fn stored(o: &dyn Objects, name: &str, body: &[u8], create: bool) -> std::io::Result<()> {
    let mode = if create {
        PutMode::Create
    } else {
        PutMode::Overwrite
    };
    o.put(name, body, mode)
}

fn run_model(o: &dyn Objects, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut model: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    for s in steps {
        match s {
            Step::Put(n, body, create) => {
                let name = NAMES[*n];
                let out = stored(o, name, body, *create);
                if *create && model.contains_key(name) {
                    prop_assert_eq!(out.unwrap_err().kind(), ErrorKind::AlreadyExists);
                } else {
                    out.unwrap();
                    model.insert(name, body.clone());
                }
            }
            Step::Abandon(n, body) => {
                let mut w = o.writer(NAMES[*n]).unwrap();
                w.write_all(body).unwrap();
                drop(w);
            }
            Step::Stream(n, parts, create) => {
                let name = NAMES[*n];
                let mut w = o.writer(name).unwrap();
                for p in parts {
                    w.write_all(p).unwrap();
                }
                let body = parts.concat();
                prop_assert_eq!(w.written(), body.len() as u64);
                let mode = if *create {
                    PutMode::Create
                } else {
                    PutMode::Overwrite
                };
                let out = w.finish(mode);
                if *create && model.contains_key(name) {
                    prop_assert_eq!(out.unwrap_err().kind(), ErrorKind::AlreadyExists);
                } else {
                    out.unwrap();
                    model.insert(name, body);
                }
            }
            Step::Delete(n) => {
                o.delete(NAMES[*n]).unwrap();
                model.remove(NAMES[*n]);
            }
            Step::Read(n, offset, len) => {
                let name = NAMES[*n];
                match model.get(name) {
                    None => prop_assert_eq!(o.open(name).unwrap_err().kind(), ErrorKind::NotFound),
                    Some(body) => {
                        let f = o.open(name).unwrap();
                        prop_assert_eq!(f.size().unwrap(), body.len() as u64);
                        let offset = usize::from(*offset) % (body.len() + 1);
                        let mut buf = vec![0; usize::from(*len)];
                        let out = f.read_exact_at(&mut buf, offset as u64);
                        match body.get(offset..offset + buf.len()) {
                            Some(want) => {
                                out.unwrap();
                                prop_assert_eq!(&buf[..], want);
                            }
                            None => {
                                prop_assert_eq!(out.unwrap_err().kind(), ErrorKind::UnexpectedEof)
                            }
                        }
                    }
                }
            }
            Step::List(f) => {
                let folder = FOLDERS[*f];
                let want: Vec<String> = model
                    .keys()
                    .filter(|n| folder.is_empty() || n.starts_with(&format!("{folder}/")))
                    .map(|n| n.to_string())
                    .collect();
                prop_assert_eq!(o.list(folder).unwrap(), want);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn every_backend_matches_a_map(steps in proptest::collection::vec(step(), 1..40)) {
        for b in backends() {
            run_model(b.objects.as_ref(), &steps)?;
        }
    }
}

/// Stores one object on a fresh local backend on `FaultFs`, crashing the machine at the
/// `n`th sync; returns the world after the crash and whether the put returned `Ok`.
fn put_crashing_at(n: u64, mode: PutMode) -> (FaultFs, bool) {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/o")).unwrap();
    let o = LocalObjects::new(fs.as_dyn(), "/o");
    o.put("d/old", b"old object", PutMode::Create).unwrap();
    if mode == PutMode::Overwrite {
        o.put("d/obj", b"first version", PutMode::Create).unwrap();
    }
    fs.crash_at_sync(n);
    let ok = o.put("d/obj", b"the new object", mode).is_ok();
    (fs.crash(CrashKind::Machine), ok)
}

#[test]
fn a_crash_during_a_put_leaves_the_object_old_or_new_whole_and_nothing_unfinished() {
    for mode in [PutMode::Create, PutMode::Overwrite] {
        let mut saw_new = false;
        for n in 1..=6 {
            let (fs, ok) = put_crashing_at(n, mode);
            let o = LocalObjects::new(fs.as_dyn(), "/o");
            let got = o.read("d/obj");
            match (&got, mode) {
                (Ok(b), _) if b == b"the new object" => saw_new = true,
                (Ok(b), PutMode::Overwrite) => assert_eq!(b, b"first version", "sync {n}"),
                (Err(e), PutMode::Create) => assert_eq!(e.kind(), ErrorKind::NotFound),
                other => panic!("sync {n}, {mode:?}: {other:?}"),
            }
            if ok {
                assert_eq!(got.unwrap(), b"the new object", "acknowledged, then lost");
            }
            assert_eq!(o.read("d/old").unwrap(), b"old object");
            // An unfinished object never lists; the sweep removes its temporary file.
            let listed = o.list("").unwrap();
            assert!(
                listed.iter().all(|n| n == "d/old" || n == "d/obj"),
                "{listed:?}"
            );
            o.sweep_unfinished("").unwrap();
            assert_eq!(fs.list_dir(Path::new("/o/d")).unwrap().len(), listed.len());
        }
        assert!(saw_new, "{mode:?}: no crash point kept the object");
    }
}

#[test]
fn an_unfinished_writer_of_a_dead_process_is_swept() {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/o")).unwrap();
    let o = LocalObjects::new(fs.as_dyn(), "/o");
    let mut w = o.writer("d/obj").unwrap();
    w.write_all(b"half").unwrap();
    let after = fs.crash(CrashKind::Process);
    drop(w); // the dead process's handle can no longer remove anything
    let o = LocalObjects::new(after.as_dyn(), "/o");
    assert_eq!(o.list("").unwrap(), Vec::<String>::new());
    assert_eq!(after.list_dir(Path::new("/o/d")).unwrap().len(), 1);
    assert_eq!(o.sweep_unfinished("d").unwrap(), 1);
    assert!(after.list_dir(Path::new("/o/d")).unwrap().is_empty());
}

#[test]
fn a_failed_sync_fails_the_put_and_stores_nothing() {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/o")).unwrap();
    let o = LocalObjects::new(fs.as_dyn(), "/o");
    fs.fail_sync(1);
    assert!(o.put("d/obj", b"x", PutMode::Create).is_err());
    assert!(!o.exists("d/obj").unwrap());
    assert!(fs.list_dir(Path::new("/o/d")).unwrap().is_empty());
    o.put("d/obj", b"x", PutMode::Create).unwrap();
}
