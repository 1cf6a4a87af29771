//! Tests of the store's operations through the port, on a temp directory: writes,
//! digest checks, hard links and the `latest` link, garbage collection and removal.

#![allow(clippy::unwrap_used)]

use std::fs::{self, File};
use std::io::Write;
use std::time::{Duration, SystemTime};

use super::super::tests::store;
use super::*;

#[test]
fn commit_renames_into_place_with_digest_and_size() {
    let (_d, s) = store();
    let rel = Storage::artifact_path("ns", "app", "abc.tar.gz").unwrap();
    let mut p = s.begin_write(&rel, None).unwrap();
    p.write_all(b"hello world").unwrap();
    let stored = p.commit().unwrap();
    assert_eq!(stored.size, 11);
    assert_eq!(stored.digest, Digest::of(b"hello world"));
    assert_eq!(fs::read(s.resolve(&rel).unwrap()).unwrap(), b"hello world");
    assert!(s.verify(&rel, &stored.digest).unwrap());
    assert!(!s.verify(&rel, &Digest::of(b"other")).unwrap());
    assert_eq!(s.list_artifacts().unwrap(), vec![rel]);
}

/// team-a's build of "shared bytes" and team-b's own artifact of `own` bytes at the
/// path a link would take.
fn build_and_own(s: &Storage, own: &[u8]) -> (StoredFile, StoredFile) {
    let from = Storage::artifact_path("team-a", "app", "d.tar.gz").unwrap();
    let to = Storage::artifact_path("team-b", "app", "d.tar.gz").unwrap();
    (
        s.write_file(&from, b"shared bytes").unwrap(),
        s.write_file(&to, own).unwrap(),
    )
}

#[test]
fn a_linked_artifact_is_one_file_under_two_names_and_outlives_the_first() {
    use std::os::unix::fs::MetadataExt;
    let (_d, s) = store();
    let (built, at_to) = build_and_own(&s, b"an older build");
    let (from, to) = (built.path.clone(), at_to.path.clone());
    let (a, b) = (s.resolve(&from).unwrap(), s.resolve(&to).unwrap());
    let past = SystemTime::now() - Duration::from_secs(3600);
    File::options()
        .write(true)
        .open(&a)
        .unwrap()
        .set_modified(past)
        .unwrap();
    let before = SystemTime::now() - Duration::from_secs(1);
    s.link_artifact(&built, &to).unwrap();
    // Modified as a new file would be, not an hour ago.
    assert!(fs::metadata(&b).unwrap().modified().unwrap() >= before);
    assert_eq!(fs::read(&b).unwrap(), b"shared bytes");
    assert_eq!(
        fs::metadata(&a).unwrap().ino(),
        fs::metadata(&b).unwrap().ino()
    );
    s.remove_dir(&Storage::object_dir("team-a", "app").unwrap())
        .unwrap();
    assert!(s.verify(&to, &Digest::of(b"shared bytes")).unwrap());
    // Gone or of another size: refused, and nothing is left behind.
    let other = Storage::artifact_path("team-c", "app", "d.tar.gz").unwrap();
    assert!(s.link_artifact(&built, &other).is_err());
    let shorter = StoredFile {
        size: 11,
        ..at_to.clone()
    };
    assert!(s.link_artifact(&shorter, &other).is_err());
    assert!(!s.exists(&other));
    let dir = s.resolve("ocirepository/team-b/app").unwrap();
    let names: Vec<_> = fs::read_dir(dir).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "a temp link was left behind");
}

#[test]
fn a_file_whose_bytes_changed_since_its_build_is_not_linked() {
    let (_d, s) = store();
    let (built, own) = build_and_own(&s, b"team b's own");
    let (from, to) = (built.path.clone(), own.path);
    // Rewritten in place, same size, same inode: only the bytes tell.
    fs::write(s.resolve(&from).unwrap(), b"SHARED BYTES").unwrap();
    let e = s.link_artifact(&built, &to).unwrap_err();
    let text = crate::domain::error_chain::chain(&e);
    assert!(text.contains(&built.digest.to_string()), "{text}");
    assert_eq!(fs::read(s.resolve(&to).unwrap()).unwrap(), b"team b's own");
    let dir = s.resolve("ocirepository/team-b/app").unwrap();
    assert_eq!(
        fs::read_dir(dir).unwrap().count(),
        1,
        "a temp link was left"
    );
    // Its own bytes again: linked.
    fs::write(s.resolve(&from).unwrap(), b"shared bytes").unwrap();
    s.link_artifact(&built, &to).unwrap();
    assert_eq!(fs::read(s.resolve(&to).unwrap()).unwrap(), b"shared bytes");
}

#[test]
fn latest_link_follows_the_current_artifact_and_gc_leaves_it() {
    let (_d, s) = store();
    let put = |name: &str, body: &[u8]| {
        let rel = Storage::artifact_path("ns", "app", name).unwrap();
        let mut p = s.begin_write(&rel, None).unwrap();
        p.write_all(body).unwrap();
        p.commit().unwrap().path
    };
    let first = put("a.tar.gz", b"one");
    let link = s.link_latest(&first).unwrap();
    assert_eq!(link, "ocirepository/ns/app/latest.tar.gz");
    assert_eq!(fs::read(s.resolve(&link).unwrap()).unwrap(), b"one");
    assert_eq!(s.link_latest(&first).unwrap(), link, "idempotent");
    let second = put("b.tar.gz", b"two");
    s.link_latest(&second).unwrap();
    assert_eq!(fs::read(s.resolve(&link).unwrap()).unwrap(), b"two");
    let dir = Storage::object_dir("ns", "app").unwrap();
    let gone = s
        .garbage_collect(
            &dir,
            &second,
            0,
            Duration::ZERO,
            SystemTime::now() + Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(gone, vec![first]);
    assert_eq!(fs::read(s.resolve(&link).unwrap()).unwrap(), b"two");
}

#[test]
fn known_digest_files_report_it_and_their_size() {
    let (_d, s) = store();
    let s = s.without_fsync();
    let rel = Storage::artifact_path("ns", "app", "layer.tgz").unwrap();
    let mut p = s.begin_write(&rel, Some(Digest::of(b"blob"))).unwrap();
    p.write_all(b"blob").unwrap();
    assert_eq!(p.written(), 4);
    let stored = p.commit().unwrap();
    assert_eq!((stored.digest, stored.size), (Digest::of(b"blob"), 4));
    assert!(s.verify(&rel, &Digest::of(b"blob")).unwrap());
}

#[test]
fn a_fifo_is_neither_an_artifact_nor_readable() {
    let (d, s) = store();
    let rel = "ocirepository/ns/app/fifo.tar.gz";
    fs::create_dir_all(d.path().join("ocirepository/ns/app")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(d.path().join(rel))
        .status()
        .unwrap();
    assert!(status.success());
    assert!(!s.exists(rel));
    // Opening a FIFO for reading would block until a writer comes; this returns.
    assert!(!s.verify(rel, &Digest::of(b"")).unwrap());
}

#[test]
fn gc_keeps_current_and_newest_records_and_drops_old_ones() {
    let (_d, s) = store();
    let dir = Storage::object_dir("ns", "app").unwrap();
    for n in ["a", "b", "c", "d"] {
        s.write_file(&format!("{dir}/{n}.tar.gz"), n.as_bytes())
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let later = SystemTime::now() + Duration::from_secs(3600);
    // records = 2: d (newest) and c stay by count, a is current; b goes.
    let removed = s
        .garbage_collect(
            &dir,
            &format!("{dir}/a.tar.gz"),
            2,
            Duration::from_secs(60),
            later,
        )
        .unwrap();
    assert_eq!(removed, vec![format!("{dir}/b.tar.gz")]);
    // Nothing is old yet: nothing goes, whatever the count.
    let removed = s
        .garbage_collect(
            &dir,
            &format!("{dir}/d.tar.gz"),
            1,
            Duration::from_secs(60),
            SystemTime::now(),
        )
        .unwrap();
    assert!(removed.is_empty());
}

#[test]
fn remove_dir_deletes_an_objects_artifacts() {
    let (_d, s) = store();
    let rel = Storage::artifact_path("ns", "app", "a.tar.gz").unwrap();
    s.write_file(&rel, b"x").unwrap();
    let dir = Storage::object_dir("ns", "app").unwrap();
    s.remove_dir(&dir).unwrap();
    assert!(!s.exists(&rel));
    s.remove_dir(&dir).unwrap();
}

#[test]
fn writes_through_the_port_land_where_the_adapter_reads() {
    let dir = tempfile::tempdir().unwrap();
    let concrete = Storage::new(dir.path());
    let store: &dyn ArtifactStore = &concrete;
    let rel = crate::ports::store::artifact_path("ns", "app", "a.tar.gz").unwrap();
    let mut pending = store.begin_write(&rel, None).unwrap();
    pending.write_all(b"one").unwrap();
    assert_eq!(pending.written(), 3);
    let stored = pending.commit().unwrap();
    assert_eq!(
        (stored.digest.clone(), stored.size),
        (Digest::of(b"one"), 3)
    );
    assert!(store.exists(&rel) && store.verify(&rel, &stored.digest).unwrap());
    assert_eq!(store.list_artifacts().unwrap(), vec![rel.clone()]);
    store.remove_object(&rel).unwrap();
    assert!(!concrete.exists(&rel));
    store.remove_object(&rel).unwrap();
}
