//! Layer decoding (tar, gzip, zstd) and the streaming merge into one tar.gz, driven the
//! way `pipeline::fetch::store_layers` drives it: `Merger::add_layer` top layer first,
//! `finish`, and one more pass when a `.sourceignore` asks for it.
//!
//! Input: one flags byte, then layers separated by `LAYER`. Each layer starts with a codec
//! byte: `g` gzips the rest, `z` wraps it in a zstd frame (`Z`: stored blocks), anything
//! else hands the rest over as it is (so the merger sniffs raw gzip/zstd/tar bytes).
//! Flags: bits 0-1 pick the ignore rules (Flux defaults, none, or `spec.ignore` from the
//! first section), bit 2 a tiny entry cap, bit 3 a tiny uncompressed-size cap.
//!
//! Checked on success: the output is a valid tar.gz of regular files and directories
//! only, with normalised headers, relative unique names without `.`/`..`/empty
//! components, parents before children, no whiteouts, nothing the final ignore rules
//! exclude, and counts equal to the merge's statistics.
#![no_main]

use std::collections::HashSet;
use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use ocisource::archive::{MergeOptions, MergeOutcome, MergeStats, Merger, MAX_SOURCEIGNORE_BYTES};
use ocisource::domain::digest::Digest;
use ocisource::domain::ignore::{IgnoreRules, SOURCEIGNORE};
use ocisource::domain::limits::Limits;
use ocisource::domain::manifest::{Descriptor, FLUX_CONTENT};
use ocisource_fuzz::{split, LAYER};

const MAX_LAYERS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut sections = split(rest, LAYER, MAX_LAYERS + 1);
    let base = match flags & 3 {
        0 => IgnoreRules::flux_default(),
        1 => IgnoreRules::none(),
        _ => {
            let spec = String::from_utf8_lossy(sections.remove(0)).into_owned();
            match IgnoreRules::from_spec(&spec) {
                Ok(rules) => rules,
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    return;
                }
            }
        }
    };
    let limits = Limits {
        max_entries: if flags & 4 != 0 { 3 } else { 5_000 },
        max_uncompressed_bytes: if flags & 8 != 0 { 4_096 } else { 8 << 20 },
        ..Limits::default()
    };
    // Manifest order is bottom first; the merger takes the top layer first.
    let layers: Vec<(Descriptor, Vec<u8>)> = sections.iter().rev().map(|s| layer(s)).collect();
    if layers.is_empty() {
        return;
    }

    let mut rules = base.clone();
    for pass in 0..2 {
        let mut merger = Merger::new(
            Vec::new(),
            MergeOptions {
                ignore: rules.clone(),
                limits: limits.clone(),
            },
        );
        let mut failed = None;
        for (descriptor, blob) in &layers {
            if let Err(e) = merger.add_layer(descriptor, &blob[..]) {
                failed = Some(e);
                break;
            }
        }
        if let Some(e) = failed {
            // Errors must render (they become condition messages).
            assert!(!e.to_string().is_empty());
            return;
        }
        match merger.finish() {
            Ok(MergeOutcome::Done { out, stats }) => {
                check_output(&out, &stats, &rules, &limits);
                return;
            }
            Ok(MergeOutcome::NeedsSecondPass { sourceignore }) => {
                assert_eq!(pass, 0, "a second pass asked for a third");
                assert!(
                    !sourceignore.is_empty(),
                    "a second pass without .sourceignore files"
                );
                rules = base.clone();
                for (dir, content) in &sourceignore {
                    rules.add_sourceignore(dir, content);
                }
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                return;
            }
        }
    }
});

/// Builds one layer blob from a section: codec byte, then payload.
fn layer(section: &[u8]) -> (Descriptor, Vec<u8>) {
    let blob = match section.split_first() {
        Some((b'g', payload)) => {
            let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
            let _ = gz.write_all(payload);
            gz.finish().unwrap_or_default()
        }
        Some((b'z', payload)) => {
            ruzstd::encoding::compress_to_vec(payload, ruzstd::encoding::CompressionLevel::Fastest)
        }
        Some((b'Z', payload)) => ruzstd::encoding::compress_to_vec(
            payload,
            ruzstd::encoding::CompressionLevel::Uncompressed,
        ),
        Some((_, payload)) => payload.to_vec(),
        None => Vec::new(),
    };
    let descriptor = Descriptor {
        media_type: FLUX_CONTENT.into(),
        digest: Digest::of(&blob),
        size: blob.len() as u64,
        annotations: Default::default(),
        platform: None,
        artifact_type: None,
    };
    (descriptor, blob)
}

/// One entry of the merged archive.
struct Entry {
    path: String,
    dir: bool,
    data: Vec<u8>,
}

fn check_output(out: &[u8], stats: &MergeStats, pass_rules: &IgnoreRules, limits: &Limits) {
    let mut archive = tar::Archive::new(GzDecoder::new(out));
    let mut entries = Vec::new();
    for entry in archive.entries().expect("the output is a tar stream") {
        let mut entry = entry.expect("every output entry reads back");
        let header = entry.header();
        let kind = header.entry_type();
        let dir = match kind {
            tar::EntryType::Regular => false,
            tar::EntryType::Directory => true,
            other => panic!("output holds an entry of type {other:?}"),
        };
        let mode = header.mode().expect("mode");
        if dir {
            assert_eq!(mode, 0o750, "directory mode");
        } else {
            assert!(mode == 0o600 || mode == 0o700, "file mode {mode:o}");
        }
        assert_eq!(header.uid().expect("uid"), 0);
        assert_eq!(header.gid().expect("gid"), 0);
        assert_eq!(header.mtime().expect("mtime"), 0);
        let raw = entry.path_bytes().into_owned();
        let path = String::from_utf8(raw).expect("output names are UTF-8");
        let path = path.strip_suffix('/').unwrap_or(&path).to_string();
        let size = entry.size();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).expect("entry data reads back");
        assert_eq!(data.len() as u64, size, "entry {path:?} data length");
        entries.push(Entry { path, dir, data });
    }

    assert_eq!(entries.len() as u64, stats.entries, "entries vs stats");
    let files = entries.iter().filter(|e| !e.dir).count() as u64;
    assert_eq!(files, stats.files, "files vs stats");
    assert_eq!(entries.len() as u64 - files, stats.dirs, "dirs vs stats");
    assert!(
        files <= limits.max_entries,
        "more files out than entries allowed in"
    );
    let written: u64 = entries.iter().map(|e| e.data.len() as u64).sum();
    assert!(
        written <= stats.uncompressed_bytes,
        "more file bytes out than tar bytes in"
    );
    assert!(
        stats.uncompressed_bytes <= limits.max_uncompressed_bytes,
        "size cap"
    );

    // The rules the output was decided with: the pass's rules plus every .sourceignore
    // that made it into the output.
    let mut rules = pass_rules.clone();
    for e in entries.iter().filter(|e| !e.dir) {
        let (dir, name) = e.path.rsplit_once('/').unwrap_or(("", &e.path));
        if name == SOURCEIGNORE {
            assert!(e.data.len() as u64 <= MAX_SOURCEIGNORE_BYTES);
            rules.add_sourceignore(dir, &String::from_utf8_lossy(&e.data));
        }
    }

    let mut seen_dirs: HashSet<&str> = HashSet::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for e in &entries {
        let p = e.path.as_str();
        assert!(!p.is_empty(), "empty entry name");
        assert!(!p.starts_with('/'), "absolute entry name {p:?}");
        for comp in p.split('/') {
            assert!(
                !comp.is_empty() && comp != "." && comp != "..",
                "entry name {p:?} has an empty, '.' or '..' component"
            );
        }
        let base = p.rsplit('/').next().unwrap_or(p);
        assert!(!base.starts_with(".wh."), "whiteout {p:?} written");
        assert!(seen.insert(p), "entry {p:?} written twice");
        if let Some((parent, _)) = p.rsplit_once('/') {
            assert!(
                seen_dirs.contains(parent),
                "{p:?} comes before its directory"
            );
        }
        if e.dir {
            seen_dirs.insert(p);
        }
        assert!(!rules.is_ignored(p, e.dir), "ignored path {p:?} written");
    }
}
