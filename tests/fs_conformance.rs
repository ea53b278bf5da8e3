//! Conformance suite of the filesystem interface ([`basalt::fs::FileSystem`]): the same
//! checks run against the real filesystem ([`StdFs`], in a temporary directory) and the
//! fault-injecting one ([`FaultFs`]). They pin down the guarantees the module doc lists and
//! the engine relies on; any new implementation must pass them. `FaultFs`-only tests check
//! its crash model and every fault knob.

use basalt::fs::{CrashKind, FaultFs, FileSystem, StdFs};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Every check, against one filesystem rooted at `root` (an existing, empty directory).
fn conformance(fs: &dyn FileSystem, root: &Path) {
    let dir = root.join("d");
    fs.create_dir_all(&dir.join("sub")).unwrap();
    fs.create_dir_all(&dir).unwrap(); // idempotent
    assert!(fs.exists(&dir).unwrap());

    // Writes are visible at once, through a new read handle, before any sync.
    let a = dir.join("a");
    let w = fs.create(&a).unwrap();
    w.write_all(b"hello ").unwrap();
    w.write_all(b"world").unwrap();
    assert_eq!(fs.read(&a).unwrap(), b"hello world");
    let r = fs.open_read(&a).unwrap();
    assert_eq!(r.size().unwrap(), 11);
    let mut buf = [0u8; 5];
    r.read_exact_at(&mut buf, 6).unwrap();
    assert_eq!(&buf, b"world");
    // A read past the end is UnexpectedEof.
    let e = r.read_exact_at(&mut buf, 8).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    // `read_vec_at` reads exactly the same bytes (StdFs into unzeroed memory), and fails the
    // same way past the end.
    assert_eq!(r.read_vec_at(5, 6).unwrap(), b"world");
    assert_eq!(r.read_vec_at(11, 0).unwrap(), b"hello world");
    assert!(r.read_vec_at(0, 11).unwrap().is_empty());
    let e = r.read_vec_at(5, 8).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    w.sync_data().unwrap();
    w.sync_all().unwrap();
    // A read handle sees later writes too.
    w.write_all(b"!").unwrap();
    assert_eq!(r.size().unwrap(), 12);

    // create truncates; create_new refuses an existing file.
    fs.create(&a).unwrap().write_all(b"x").unwrap();
    assert_eq!(fs.read(&a).unwrap(), b"x");
    let e = fs.create_new(&a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);

    // open_append appends; set_len cuts and later writes go after the cut.
    let w = fs.open_append(&a).unwrap();
    w.write_all(b"yz").unwrap();
    assert_eq!(fs.read(&a).unwrap(), b"xyz");
    w.set_len(1).unwrap();
    w.write_all(b"Q").unwrap();
    w.sync_all().unwrap();
    assert_eq!(fs.read(&a).unwrap(), b"xQ");

    // Missing files are NotFound.
    let missing = dir.join("missing");
    assert_eq!(
        fs.open_read(&missing).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        fs.open_append(&missing).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        fs.remove_file(&missing).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert!(!fs.exists(&missing).unwrap());

    // rename replaces the target atomically.
    let b = dir.join("b");
    let w = fs.create_new(&b).unwrap();
    w.write_all(b"new").unwrap();
    w.sync_all().unwrap();
    fs.rename(&b, &a).unwrap();
    assert!(!fs.exists(&b).unwrap());
    assert_eq!(fs.read(&a).unwrap(), b"new");
    fs.sync_dir(&dir).unwrap();

    // link gives a file a second name, create-if-absent; both names read the same bytes.
    let c = dir.join("c");
    fs.link(&a, &c).unwrap();
    assert_eq!(fs.read(&c).unwrap(), b"new");
    assert_eq!(
        fs.link(&a, &c).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        fs.link(&missing, &dir.join("d2")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    fs.remove_file(&c).unwrap();
    assert_eq!(fs.read(&a).unwrap(), b"new");

    // list_dir names files and subdirectories, not deeper entries.
    fs.create(&dir.join("sub").join("deep")).unwrap();
    let mut names: Vec<String> = fs
        .list_dir(&dir)
        .unwrap()
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "sub"]);

    fs.remove_file(&a).unwrap();
    assert!(!fs.exists(&a).unwrap());

    // One lock holder at a time; dropping the guard releases it.
    let lock_path = dir.join("LOCK");
    let guard = fs.lock(&lock_path).unwrap();
    assert_eq!(
        fs.lock(&lock_path).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    drop(guard);
    drop(fs.lock(&lock_path).unwrap());
}

#[test]
fn std_fs_conforms() {
    let tmp = tempfile::tempdir().unwrap();
    conformance(&StdFs, tmp.path());
}

#[test]
fn fault_fs_conforms() {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/root")).unwrap();
    conformance(&fs, Path::new("/root"));
}

/// A directory with one synced file `f` holding "durable", then "+live" written unsynced.
fn setup() -> (FaultFs, PathBuf) {
    let fs = FaultFs::new();
    let dir = PathBuf::from("/d");
    fs.create_dir_all(&dir).unwrap();
    let f = dir.join("f");
    let w = fs.create_new(&f).unwrap();
    w.write_all(b"durable").unwrap();
    w.sync_data().unwrap();
    fs.sync_dir(&dir).unwrap();
    w.write_all(b"+live").unwrap();
    (fs, f)
}

#[test]
fn process_crash_keeps_everything_written() {
    let (fs, f) = setup();
    let unsynced = Path::new("/d/unsynced");
    fs.create(unsynced).unwrap().write_all(b"x").unwrap();
    let fs = fs.crash(CrashKind::Process);
    assert_eq!(fs.read(&f).unwrap(), b"durable+live");
    assert_eq!(fs.read(unsynced).unwrap(), b"x");
}

#[test]
fn machine_crash_keeps_only_what_was_synced() {
    let (fs, f) = setup();
    // A file synced but whose directory entry was not: lost.
    let g = Path::new("/d/g");
    let w = fs.create_new(g).unwrap();
    w.write_all(b"g").unwrap();
    w.sync_all().unwrap();
    // A rename not followed by a directory sync: undone.
    fs.rename(&f, Path::new("/d/renamed")).unwrap();
    let fs = fs.crash(CrashKind::Machine);
    assert_eq!(fs.read(&f).unwrap(), b"durable");
    assert!(!fs.exists(g).unwrap());
    assert!(!fs.exists(Path::new("/d/renamed")).unwrap());
}

#[test]
fn a_synced_rename_survives_a_machine_crash() {
    let (fs, f) = setup();
    let to = Path::new("/d/to");
    fs.rename(&f, to).unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    let fs = fs.crash(CrashKind::Machine);
    assert!(!fs.exists(&f).unwrap());
    assert_eq!(fs.read(to).unwrap(), b"durable");
}

#[test]
fn a_link_survives_a_machine_crash_only_after_its_directory_sync() {
    let (fs, f) = setup();
    fs.link(&f, Path::new("/d/unsynced")).unwrap();
    let fs = fs.crash(CrashKind::Machine);
    assert!(!fs.exists(Path::new("/d/unsynced")).unwrap());
    fs.link(&f, Path::new("/d/synced")).unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    let fs = fs.crash(CrashKind::Machine);
    assert_eq!(fs.read(Path::new("/d/synced")).unwrap(), b"durable");
    assert_eq!(fs.read(&f).unwrap(), b"durable");
}

#[test]
fn crash_at_sync_stops_the_world_and_fences_old_handles() {
    let (fs, f) = setup();
    let w = fs.open_append(&f).unwrap();
    let lock = fs.lock(Path::new("/d/LOCK")).unwrap();
    fs.crash_at_sync(2);
    w.sync_data().unwrap(); // sync 1
    w.write_all(b"+more").unwrap();
    assert!(w.sync_data().is_err()); // sync 2: the crash point, nothing made durable
    assert!(fs.is_stopped());
    assert!(w.write_all(b"x").is_err());
    assert!(fs.read(&f).is_err());
    let after = fs.crash(CrashKind::Machine);
    assert_eq!(after.read(&f).unwrap(), b"durable+live");
    // The dead world's handles stay dead; its lock was released.
    assert!(w.write_all(b"x").is_err());
    assert!(fs.read(&f).is_err());
    let _relock = after.lock(Path::new("/d/LOCK")).unwrap();
    drop(lock);
    assert_eq!(
        after.lock(Path::new("/d/LOCK")).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

#[test]
fn failed_sync_makes_nothing_durable() {
    let (fs, f) = setup();
    let w = fs.open_append(&f).unwrap();
    fs.fail_sync(1);
    assert!(w.sync_data().is_err());
    w.sync_data().unwrap(); // only the armed one fails
    let (fs2, f2) = setup();
    fs2.fail_sync(1);
    assert!(fs2.open_append(&f2).unwrap().sync_all().is_err());
    let fs2 = fs2.crash(CrashKind::Machine);
    assert_eq!(fs2.read(&f2).unwrap(), b"durable");
    let fs = fs.crash(CrashKind::Machine);
    assert_eq!(fs.read(&f).unwrap(), b"durable+live");
}

#[test]
fn torn_write_writes_a_prefix_and_fails() {
    let (fs, f) = setup();
    let w = fs.open_append(&f).unwrap();
    fs.tear_write(2);
    w.write_all(b"12").unwrap();
    assert!(w.write_all(b"abcd").is_err());
    assert_eq!(fs.read(&f).unwrap(), b"durable+live12ab");
}

#[test]
fn full_disk_fails_writes_with_storage_full() {
    let (fs, f) = setup();
    let w = fs.open_append(&f).unwrap();
    fs.disk_full_after(Some(3));
    let e = w.write_all(b"12345").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::StorageFull);
    assert_eq!(fs.read(&f).unwrap(), b"durable+live123");
    assert!(w.write_all(b"x").is_err());
    fs.disk_full_after(None);
    w.write_all(b"x").unwrap();
}

#[test]
fn flipped_bytes_on_read_and_on_disk() {
    let (fs, f) = setup();
    let r = fs.open_read(&f).unwrap();
    fs.flip_read(2);
    let mut buf = [0u8; 7];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"durable");
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_ne!(&buf, b"durable");
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"durable");
    fs.corrupt(&f, 0).unwrap();
    assert_ne!(fs.read(&f).unwrap(), b"durable+live");
    let fs = fs.crash(CrashKind::Machine);
    assert_ne!(fs.read(&f).unwrap(), b"durable");
}
