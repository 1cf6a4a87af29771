//! The merged archive against GNU tar: four overlapping layers are applied the way an
//! OCI runtime does (extract each layer in manifest order with GNU `tar`, honour opaque
//! markers and whiteouts), and the tree must equal what GNU `tar` extracts from our
//! single tar.gz, minus the default exclusions and symlinks, with normalised modes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use ocisource::archive::{MergeOptions, MergeOutcome, Merger};
use ocisource::domain::digest::Digest;
use ocisource::domain::manifest::{Descriptor, FLUX_CONTENT};
use tar::{EntryType, Header};

enum E<'a> {
    F(&'a str, &'a str, u32),
    D(&'a str),
    L(&'a str, &'a str),
}

fn layer(entries: &[E<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = Header::new_gnu();
        h.set_uid(1234);
        h.set_gid(99);
        h.set_mtime(1_600_000_000);
        match e {
            E::F(p, data, mode) => {
                h.set_entry_type(EntryType::Regular);
                h.set_mode(*mode);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, p, data.as_bytes()).unwrap();
            }
            E::D(p) => {
                h.set_entry_type(EntryType::Directory);
                h.set_mode(0o775);
                h.set_size(0);
                b.append_data(&mut h, p, &[][..]).unwrap();
            }
            E::L(p, target) => {
                h.set_entry_type(EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, p, target).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Applies one layer as an OCI runtime would.
fn apply(root: &Path, blob_path: &Path) {
    let names = run(Command::new("tar").arg("-tf").arg(blob_path));
    for name in names.lines() {
        let name = name.trim_end_matches('/');
        if let Some(dir) = name.strip_suffix(".wh..wh..opq") {
            let dir = root.join(dir.trim_end_matches('/'));
            if dir.is_dir() {
                for child in fs::read_dir(&dir).unwrap() {
                    let p = child.unwrap().path();
                    if p.is_dir() && !p.is_symlink() {
                        fs::remove_dir_all(p).unwrap()
                    } else {
                        fs::remove_file(p).unwrap()
                    }
                }
            }
        }
    }
    run(Command::new("tar")
        .arg("-xpf")
        .arg(blob_path)
        .arg("-C")
        .arg(root));
    for name in names.lines() {
        let path = Path::new(name);
        let Some(base) = path.file_name().and_then(|b| b.to_str()) else {
            continue;
        };
        if let Some(hidden) = base.strip_prefix(".wh.") {
            if hidden != ".wh..opq" {
                let target = root.join(path.with_file_name(hidden));
                if target.is_dir() && !target.is_symlink() {
                    fs::remove_dir_all(&target).unwrap();
                } else if target.symlink_metadata().is_ok() {
                    fs::remove_file(&target).unwrap();
                }
            }
            fs::remove_file(root.join(path)).unwrap();
        }
    }
}

/// path → (kind, content, mode) of a tree; symlinks left out.
fn tree(root: &Path) -> BTreeMap<String, (char, Vec<u8>, u32)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (char, Vec<u8>, u32)>) {
        for child in fs::read_dir(dir).unwrap() {
            let p = child.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let meta = p.symlink_metadata().unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                continue;
            } else if meta.is_dir() {
                out.insert(rel, ('d', Vec::new(), mode));
                walk(root, &p, out);
            } else {
                out.insert(rel, ('f', fs::read(&p).unwrap(), mode));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn normalised(
    mut t: BTreeMap<String, (char, Vec<u8>, u32)>,
) -> BTreeMap<String, (char, Vec<u8>, u32)> {
    for (_, (kind, _, mode)) in t.iter_mut() {
        *mode = match kind {
            'd' => 0o750,
            _ if *mode & 0o111 != 0 => 0o700,
            _ => 0o600,
        };
    }
    t
}

#[test]
fn merged_archive_matches_layers_applied_in_order_by_gnu_tar() {
    // Manifest order: bottom first.
    let layers = [
        gzip(&layer(&[
            E::D("app"),
            E::F("app/config.yaml", "v1", 0o644),
            E::F("app/old.yaml", "old", 0o644),
            E::D("app/legacy"),
            E::F("app/legacy/a.yaml", "a", 0o644),
            E::F("tools/run.sh", "#!/bin/sh\necho 1\n", 0o755),
            E::F("opaque/lower.yaml", "lower", 0o644),
        ])),
        layer(&[
            E::F("app/config.yaml", "v2", 0o600),
            E::F("app/.wh.old.yaml", "", 0o644),
            E::F(".git/config", "[core]", 0o644),
            E::L("link", "app/config.yaml"),
            E::F("opaque/mid.yaml", "mid", 0o644),
        ]),
        gzip(&layer(&[
            E::F("app/.wh.legacy", "", 0o644),
            E::F("docs/logo.png", "png", 0o644),
            E::F("docs/readme.md", "readme", 0o640),
            E::D("opaque"),
            E::F("opaque/.wh..wh..opq", "", 0o644),
            E::F("opaque/top.yaml", "top", 0o644),
        ])),
        gzip(&layer(&[
            E::F("app/config.yaml", "v4", 0o644),
            E::F("tools/run.sh", "#!/bin/sh\necho 4\n", 0o750),
            E::F(&format!("deep/{}/f.yaml", "x".repeat(120)), "long", 0o644),
        ])),
    ];

    let work = tempfile::tempdir().unwrap();
    let reference = work.path().join("reference");
    let ours = work.path().join("ours");
    fs::create_dir_all(&reference).unwrap();
    fs::create_dir_all(&ours).unwrap();
    for (i, blob) in layers.iter().enumerate() {
        let p = work.path().join(format!("layer{i}"));
        fs::write(&p, blob).unwrap();
        apply(&reference, &p);
    }

    let mut merger = Merger::new(Vec::new(), MergeOptions::default());
    for blob in layers.iter().rev() {
        let descriptor = Descriptor {
            media_type: FLUX_CONTENT.into(),
            digest: Digest::of(blob),
            size: blob.len() as u64,
            annotations: Default::default(),
            platform: None,
            artifact_type: None,
        };
        merger.add_layer(&descriptor, &blob[..]).unwrap();
    }
    let MergeOutcome::Done { out, stats } = merger.finish().unwrap() else {
        panic!("no second pass expected")
    };
    let out_path = work.path().join("merged.tar.gz");
    fs::write(&out_path, &out).unwrap();
    run(Command::new("tar")
        .arg("-xpzf")
        .arg(&out_path)
        .arg("-C")
        .arg(&ours));

    // Minus the default exclusions (.git/, *.png), which must be present in the reference.
    let mut want = normalised(tree(&reference));
    assert!(want.remove(".git/config").is_some() && want.remove(".git").is_some());
    assert!(want.remove("docs/logo.png").is_some());
    let got = tree(&ours);
    assert_eq!(got, want);
    assert_eq!(got["app/config.yaml"].1, b"v4");
    assert!(!got.contains_key("app/old.yaml") && !got.contains_key("app/legacy"));
    assert!(!got.contains_key("opaque/lower.yaml") && !got.contains_key("opaque/mid.yaml"));
    assert_eq!(
        stats.files as usize,
        got.values().filter(|v| v.0 == 'f').count()
    );

    // GNU tar sees owner 0/0 and the epoch on every entry, and each path once.
    let verbose = run(Command::new("tar")
        .args(["--numeric-owner", "--full-time", "-tvzf"])
        .arg(&out_path));
    for line in verbose.lines() {
        assert!(
            line.contains(" 0/0 ") && line.contains("1970-01-01 00:00:00"),
            "{line}"
        );
    }
    assert_eq!(verbose.lines().count(), got.len());

    // Same layers in, same bytes out.
    let mut again = Merger::new(Vec::new(), MergeOptions::default());
    for blob in layers.iter().rev() {
        let d = Descriptor {
            media_type: FLUX_CONTENT.into(),
            digest: Digest::of(blob),
            size: blob.len() as u64,
            annotations: Default::default(),
            platform: None,
            artifact_type: None,
        };
        again.add_layer(&d, &blob[..]).unwrap();
    }
    let MergeOutcome::Done { out: out2, .. } = again.finish().unwrap() else {
        panic!("no second pass expected")
    };
    assert_eq!(out, out2);
}
