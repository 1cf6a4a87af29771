//! Hostile names and extension records, merged through the production bridge: deep and
//! long paths, GNU long-name and PAX records over their caps (refused from the header, so
//! a truncated layer claiming a huge record fails the same way), NUL, control characters,
//! names Flux's consumers refuse, PAX sparse files, and the bookkeeping budget. Every
//! error names the layer digest and the entry, escaped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tar::EntryType;

use super::test_layers::{done, extended, gz, listing, merge, pax_records, raw_header, tar_of, E};
use super::tests_hostile::{refused, refused_with};
use super::*;

fn limits(f: impl FnOnce(&mut Limits)) -> MergeOptions {
    let mut limits = Limits::default();
    f(&mut limits);
    MergeOptions {
        ignore: IgnoreRules::none(),
        limits,
    }
}

#[test]
fn a_path_thirty_thousand_directories_deep_is_refused_by_its_length() {
    let deep = format!("{}/f", vec!["d"; 30_000].join("/"));
    let layer = gz(&extended(
        EntryType::GNULongName,
        deep.as_bytes(),
        "short",
        b"x",
    ));
    assert!(layer.len() < 1024, "a small layer: {}", layer.len());
    let (err, msg) = refused(&[layer], 0, "d/d/d/d");
    assert!(
        matches!(
            err,
            ArchiveError::NameTooLong {
                bytes: 60_001,
                limit: 4096,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(msg.contains("… (60001 bytes)"), "{msg}");
}

#[test]
fn depth_is_capped_and_a_tree_at_the_cap_merges() {
    let too_deep = format!("{}/f", vec!["d"; 300].join("/"));
    let layer = extended(EntryType::GNULongName, too_deep.as_bytes(), "short", b"x");
    let (err, _) = refused(&[layer], 0, "d/d/d");
    assert!(
        matches!(err, ArchiveError::PathTooDeep { limit: 256, .. }),
        "{err:?}"
    );
    let at_cap = format!("{}/f", vec!["d"; 255].join("/"));
    let layer = extended(EntryType::GNULongName, at_cap.as_bytes(), "short", b"ok");
    let (out, stats) = done(merge(&[layer], limits(|_| {})).unwrap());
    assert_eq!((stats.dirs, stats.files), (255, 1));
    assert_eq!(listing(&out).last().map(|e| e.0.clone()), Some(at_cap));
}

#[test]
fn a_huge_gnu_long_name_is_refused_from_its_header() {
    // The header claims 256 MiB; only one block follows. Refused before reading it, so the
    // truncation is never met.
    let mut layer = raw_header(b"././@LongLink", EntryType::GNULongName, 256 << 20).to_vec();
    layer.extend_from_slice(&[b'a'; 512]);
    let (err, msg) = refused(&[layer], 0, "aaaa");
    assert!(
        matches!(
            err,
            ArchiveError::NameTooLong {
                bytes: 268_435_456,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        msg.len() < 1024,
        "the message stays short: {} bytes",
        msg.len()
    );
    // A whole 64 MiB record, gzip'd: the same refusal, whatever follows.
    let name = vec![b'n'; 64 << 20];
    let layer = gz(&extended(EntryType::GNULongName, &name, "x", b""));
    let (err, _) = refused(&[layer], 0, "nnnn");
    assert!(matches!(err, ArchiveError::NameTooLong { .. }), "{err:?}");
}

#[test]
fn long_link_names_are_capped_too() {
    let link = vec![b'l'; 5000];
    let mut layer = extended(EntryType::GNULongLink, &link, "ln", b"");
    // The entry after the record becomes a symlink.
    let at = 512 + link.len().div_ceil(512) * 512;
    let mut h = tar::Header::from_byte_slice(&layer[at..at + 512]).clone();
    h.set_entry_type(EntryType::Symlink);
    h.set_cksum();
    layer[at..at + 512].copy_from_slice(h.as_bytes());
    let (err, _) = refused(&[layer], 0, "'ln'");
    assert!(
        matches!(err, ArchiveError::NameTooLong { bytes: 5000, .. }),
        "{err:?}"
    );
}

#[test]
fn an_oversized_pax_header_is_refused_from_its_header_and_names_the_path() {
    let mut layer = raw_header(b"PaxHeaders/x", EntryType::XHeader, 268_435_466).to_vec();
    layer.extend_from_slice(b"268435466 path=deep/secret/name");
    layer.resize(1024, b'a');
    let (err, msg) = refused(&[layer], 0, "deep/secret/name");
    assert!(
        matches!(
            err,
            ArchiveError::PaxTooLarge {
                bytes: 268_435_466,
                limit: 65_536,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        msg.contains("bytes)"),
        "the cut name says how long it was: {msg}"
    );
}

#[test]
fn pax_path_and_linkpath_within_the_header_cap_are_still_name_capped() {
    let long = vec![b'p'; 5000];
    let layer = extended(
        EntryType::XHeader,
        &pax_records(&[("path", long.as_slice())]),
        "short",
        b"x",
    );
    let (err, _) = refused(&[layer], 0, "pppp");
    assert!(
        matches!(err, ArchiveError::NameTooLong { bytes: 5000, .. }),
        "{err:?}"
    );
    let layer = extended(
        EntryType::XHeader,
        &pax_records(&[("linkpath", long.as_slice())]),
        "has-long-link",
        b"",
    );
    let (err, _) = refused(&[layer], 0, "has-long-link");
    assert!(matches!(err, ArchiveError::NameTooLong { .. }), "{err:?}");
}

#[test]
fn a_nul_or_a_newline_in_a_pax_path_is_refused_clearly() {
    let layer = extended(
        EntryType::XHeader,
        &pax_records(&[("path", &b"dir/evil\0.yaml"[..])]),
        "short",
        b"x",
    );
    let (err, msg) = refused(&[layer], 0, "dir/evil\\u{0}.yaml");
    assert!(
        matches!(err, ArchiveError::UnsafePath { .. }) && msg.contains("NUL"),
        "{msg}"
    );
    let layer = extended(
        EntryType::XHeader,
        &pax_records(&[("path", &b"dir/two\nlines"[..])]),
        "short",
        b"x",
    );
    let (_, msg) = refused(&[layer], 0, "dir/two\\u{a}lines");
    assert!(msg.contains("control characters"), "{msg}");
}

#[test]
fn control_characters_never_reach_a_message_raw() {
    let name = b"ok/\x1b[2J\x1b[31mred.yaml";
    let layer = tar_of(&[E::Raw(name, EntryType::Regular, "x")]);
    let (err, msg) = refused(&[layer], 0, "ok/\\u{1b}[2J\\u{1b}[31mred.yaml");
    assert!(matches!(err, ArchiveError::UnsafePath { .. }), "{err:?}");
    assert!(!msg.chars().any(char::is_control), "{msg:?}");
}

#[test]
fn names_flux_consumers_refuse_are_refused_at_pull_time() {
    for (name, shown) in [
        (&b"dir\\file.yaml"[..], "dir\\file.yaml"),
        (b"x../y.yaml", "x../y.yaml"),
        (b"a/b..//c", "a/b..//c"),
    ] {
        let layer = tar_of(&[E::File("ok", "1"), E::Raw(name, EntryType::Regular, "x")]);
        let (err, msg) = refused(&[layer], 0, shown);
        assert!(
            matches!(err, ArchiveError::UnsafePath { .. }) && msg.contains("validRelPath"),
            "{msg}"
        );
    }
    let fine = tar_of(&[
        E::File("x../", ""),
        E::File("y..", "1"),
        E::File("a..b/c", "2"),
    ]);
    assert!(merge(&[fine], limits(|_| {})).is_ok());
}

#[test]
fn pax_sparse_files_are_refused_not_stored_encoded() {
    let records = pax_records(&[
        ("GNU.sparse.major", &b"1"[..]),
        ("GNU.sparse.minor", b"0"),
        ("GNU.sparse.name", b"data/disk.img"),
        ("GNU.sparse.realsize", b"1048576"),
    ]);
    let layer = extended(
        EntryType::XHeader,
        &records,
        "GNUSparseFile.0/disk.img",
        b"1\n0\n0\n",
    );
    let (err, msg) = refused(&[layer], 0, "data/disk.img");
    assert!(
        matches!(err, ArchiveError::SpecialFile { .. }) && msg.contains("sparse"),
        "{msg}"
    );
}

#[test]
fn a_pax_size_overrides_the_header_size() {
    let layer = extended(
        EntryType::XHeader,
        &pax_records(&[("size", &b"5"[..])]),
        "f",
        b"",
    );
    // The entry header says 0 bytes, PAX says 5: give it a data block holding them.
    let mut fixed = layer[..1536].to_vec();
    fixed.extend_from_slice(b"hello");
    fixed.resize(2048 + 1024, 0);
    let (out, _) = done(merge(&[fixed], limits(|_| {})).unwrap());
    assert_eq!(listing(&out)[0].3, "hello");
}

/// Empty files named `names`, long names written by the `tar` crate's builder.
fn files(names: &[String]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for name in names {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(0);
        b.append_data(&mut h, name, std::io::empty()).unwrap();
    }
    b.into_inner().unwrap()
}

#[test]
fn remembered_paths_are_capped_with_a_clear_error() {
    let names: Vec<String> = (0..2000)
        .map(|i| format!("d{i}/{}", "n".repeat(200)))
        .collect();
    let layer = files(&names);
    let small = limits(|l| l.max_remembered_bytes = 256 << 10);
    let (err, msg) = refused_with(std::slice::from_ref(&layer), small, 0, "/nnnn");
    assert!(
        matches!(err, ArchiveError::TooManyPaths { limit: 262_144, .. }),
        "{err:?}"
    );
    assert!(msg.contains("262144 bytes"), "{msg}");
    assert!(
        merge(&[layer], limits(|_| {})).is_ok(),
        "the default budget holds them"
    );
    // Whiteouts are remembered paths too.
    let names: Vec<String> = (0..2000)
        .map(|i| format!("w{i}/.wh.{}", "n".repeat(200)))
        .collect();
    let small = limits(|l| l.max_remembered_bytes = 256 << 10);
    let (err, _) = refused_with(&[files(&names)], small, 0, ".wh.nnn");
    assert!(matches!(err, ArchiveError::TooManyPaths { .. }), "{err:?}");
}
