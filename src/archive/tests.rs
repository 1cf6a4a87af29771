//! Behaviour tests of the merge on tars built in memory, merged through the production
//! bridge (`test_layers::merge`): layer order, whiteouts, parents, normalisation, ignore
//! rules, `.sourceignore` passes, determinism, formats.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tar::Header;

use super::test_layers::{done, gz, listing, merge, no_ignores, tar_of, E};
use super::*;

fn paths(targz: &[u8]) -> Vec<String> {
    listing(targz).into_iter().map(|e| e.0).collect()
}

fn content<'a>(list: &'a [(String, char, u32, String)], path: &str) -> Option<&'a str> {
    list.iter().find(|e| e.0 == path).map(|e| e.3.as_str())
}

/// Runs the first pass, which must ask for a second one, then the second pass with the
/// found `.sourceignore` files preloaded on `base`; returns the output paths.
fn two_passes(layers: &[Vec<u8>], base: IgnoreRules) -> Vec<String> {
    let first = MergeOptions {
        ignore: base.clone(),
        limits: Limits::default(),
    };
    let found = match merge(layers, first).unwrap() {
        MergeOutcome::NeedsSecondPass { sourceignore } => sourceignore,
        MergeOutcome::Done { .. } => panic!("an entry was decided before the rule that changes it"),
    };
    let mut ignore = base;
    for (dir, text) in &found {
        ignore.add_sourceignore(dir, text);
    }
    let second = MergeOptions {
        ignore,
        limits: Limits::default(),
    };
    paths(&done(merge(layers, second).unwrap()).0)
}

#[test]
fn higher_layers_override_lower_ones_across_four_layers() {
    // Manifest order, bottom first.
    let l1 = tar_of(&[
        E::Dir("app"),
        E::File("app/a", "1"),
        E::File("app/b", "1"),
        E::File("app/c", "1"),
        E::File("app/d", "1"),
    ]);
    let l2 = tar_of(&[
        E::File("app/b", "2"),
        E::File("app/c", "2"),
        E::File("app/d", "2"),
    ]);
    let l3 = tar_of(&[E::File("app/c", "3"), E::File("app/d", "3"), E::Dir("app")]);
    let l4 = tar_of(&[E::File("app/d", "4"), E::File("top", "4")]);
    let (out, stats) = done(merge(&[gz(&l4), l3, gz(&l2), l1], no_ignores()).unwrap());
    let list = listing(&out);
    for (p, want) in [
        ("app/a", "1"),
        ("app/b", "2"),
        ("app/c", "3"),
        ("app/d", "4"),
        ("top", "4"),
    ] {
        assert_eq!(content(&list, p), Some(want), "{p}");
    }
    let mut all = paths(&out);
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "each path exactly once");
    assert_eq!(all, vec!["app", "app/a", "app/b", "app/c", "app/d", "top"]);
    assert_eq!((stats.files, stats.dirs, stats.entries), (5, 1, 6));
}

#[test]
fn whiteouts_hide_lower_layers_but_not_their_own() {
    let bottom = tar_of(&[
        E::File("gone/x", "x"),
        E::File("gone/y/z", "z"),
        E::File("keep", "k"),
        E::File("file", "f"),
    ]);
    let top = tar_of(&[
        E::File(".wh.gone", ""),
        E::File("gone/new", "n"),
        E::File(".wh.file", ""),
    ]);
    let (out, _) = done(merge(&[top, bottom], no_ignores()).unwrap());
    assert_eq!(paths(&out), vec!["gone", "gone/new", "keep"]);
}

#[test]
fn opaque_directory_hides_all_lower_content() {
    let bottom = tar_of(&[
        E::Dir("d"),
        E::File("d/old", "o"),
        E::File("d/sub/old", "o"),
        E::File("other", "o"),
    ]);
    let top = tar_of(&[
        E::Dir("d"),
        E::File("d/.wh..wh..opq", ""),
        E::File("d/new", "n"),
    ]);
    let (out, _) = done(merge(&[top, bottom], no_ignores()).unwrap());
    assert_eq!(paths(&out), vec!["d", "d/new", "other"]);
}

#[test]
fn parents_are_synthesised_before_children_and_normalised() {
    let layer = tar_of(&[
        E::File("a/b/c.yaml", "c"),
        E::Exec("a/run.sh", "#!"),
        E::Dir("a/b"),
        E::Link("a/l", "c.yaml"),
    ]);
    let (out, stats) = done(merge(&[layer], no_ignores()).unwrap());
    let list = listing(&out);
    let got: Vec<(&str, char, u32)> = list.iter().map(|e| (e.0.as_str(), e.1, e.2)).collect();
    assert_eq!(
        got,
        vec![
            ("a", 'd', 0o750),
            ("a/b", 'd', 0o750),
            ("a/b/c.yaml", 'f', 0o600),
            ("a/run.sh", 'f', 0o700)
        ]
    );
    assert_eq!(
        stats.skipped, 2,
        "the explicit dir already written and the symlink"
    );
}

#[test]
fn default_exclusions_apply_and_spec_ignore_replaces_them() {
    let layer = tar_of(&[
        E::File(".git/config", "g"),
        E::File("logo.png", "p"),
        E::File(".github/workflows/ci.yml", "c"),
        E::File("deploy/app.yaml", "a"),
        E::File("notes.md", "n"),
    ]);
    let defaults = MergeOptions::default();
    let (out, stats) = done(merge(std::slice::from_ref(&layer), defaults).unwrap());
    assert_eq!(paths(&out), vec!["deploy", "deploy/app.yaml", "notes.md"]);
    assert!(stats.skipped >= 3);
    let spec = MergeOptions {
        ignore: IgnoreRules::from_spec("*.md\n").unwrap(),
        limits: Limits::default(),
    };
    let (out, _) = done(merge(&[layer], spec).unwrap());
    // spec.ignore replaces the defaults, never the VCS patterns (Flux).
    assert_eq!(
        paths(&out),
        vec![
            "logo.png",
            ".github",
            ".github/workflows",
            ".github/workflows/ci.yml",
            "deploy",
            "deploy/app.yaml"
        ]
    );
}

#[test]
fn sourceignore_seen_first_applies_in_one_pass_and_is_kept() {
    let top = tar_of(&[
        E::File("sub/.sourceignore", "*.txt\n"),
        E::File("sub/a.txt", "t"),
        E::File("b.txt", "b"),
    ]);
    let bottom = tar_of(&[E::File("sub/c.txt", "t"), E::File("sub/keep.yaml", "k")]);
    let (out, _) = done(merge(&[top, bottom], no_ignores()).unwrap());
    assert_eq!(
        paths(&out),
        vec!["sub", "sub/.sourceignore", "b.txt", "sub/keep.yaml"]
    );
}

#[test]
fn late_sourceignore_asks_for_a_second_pass_that_then_converges() {
    // A lower layer's .sourceignore excludes a file a higher layer already wrote.
    let top = tar_of(&[E::File("x.txt", "x"), E::File("y.yaml", "y")]);
    let bottom = tar_of(&[E::File(".sourceignore", "*.txt\n"), E::File("z.txt", "z")]);
    let layers = [top, bottom];
    match merge(&layers, no_ignores()).unwrap() {
        MergeOutcome::NeedsSecondPass { sourceignore } => {
            assert_eq!(sourceignore, vec![(String::new(), "*.txt\n".to_string())]);
        }
        MergeOutcome::Done { .. } => panic!("x.txt was written before the rule that excludes it"),
    }
    assert_eq!(
        two_passes(&layers, IgnoreRules::none()),
        vec!["y.yaml", ".sourceignore"]
    );
}

#[test]
fn late_sourceignore_that_reincludes_a_skipped_file_also_needs_a_second_pass() {
    let layer = tar_of(&[
        E::File("logo.png", "p"),
        E::File(".sourceignore", "!logo.png\n"),
    ]);
    assert_eq!(
        two_passes(&[layer], IgnoreRules::flux_default()),
        vec!["logo.png", ".sourceignore"]
    );
}

#[test]
fn the_first_sourceignore_pattern_anywhere_ends_the_defaults_for_the_whole_tree() {
    // logo.png is skipped by the defaults, then a .sourceignore elsewhere brings the first
    // pattern: Flux no longer applies the defaults, so logo.png must be in the artifact.
    let layer = tar_of(&[
        E::File("logo.png", "p"),
        E::File("sub/.sourceignore", "*.txt\n"),
        E::File("sub/a.txt", "t"),
    ]);
    assert_eq!(
        two_passes(&[layer], IgnoreRules::flux_default()),
        vec!["logo.png", "sub", "sub/.sourceignore"]
    );
}

#[test]
fn output_is_deterministic_whatever_the_input_metadata_and_compression() {
    let a = tar_of(&[E::Dir("d"), E::File("d/f", "data"), E::Exec("d/x", "run")]);
    let mut b = tar::Builder::new(Vec::new());
    for (p, d, mode, t) in [("d/f", "data", 0o640, 5), ("d/x", "run", 0o711, 9)] {
        let mut h = Header::new_ustar();
        h.set_path(p).unwrap();
        h.set_mode(mode);
        h.set_mtime(t);
        h.set_size(d.len() as u64);
        h.set_cksum();
        b.append(&h, d.as_bytes()).unwrap();
    }
    let b = b.into_inner().unwrap();
    let (one, _) = done(merge(std::slice::from_ref(&a), no_ignores()).unwrap());
    let (two, _) = done(merge(&[gz(&a)], no_ignores()).unwrap());
    let (three, _) = done(merge(&[b], no_ignores()).unwrap());
    assert_eq!(one, two);
    assert_eq!(one, three);
}

#[test]
fn empty_merge_is_a_valid_empty_archive() {
    let (out, stats) = done(merge(&[], no_ignores()).unwrap());
    assert!(listing(&out).is_empty());
    assert_eq!(stats, MergeStats::default());
}

#[test]
fn long_paths_survive() {
    let long = format!("{}/file.yaml", "d".repeat(150));
    let layer = {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_size(2);
        b.append_data(&mut h, &long, &b"ok"[..]).unwrap();
        b.into_inner().unwrap()
    };
    let (out, _) = done(merge(&[layer], no_ignores()).unwrap());
    assert_eq!(paths(&out), vec!["d".repeat(150), long]);
}

#[test]
fn large_layers_stream_through_the_compressor() {
    let big = "0123456789abcdef".repeat(300_000); // 4.8 MB, several chunks
    let layer = tar_of(&[E::File("big", &big), E::File("small", "s")]);
    let (out, stats) = done(merge(&[gz(&layer)], no_ignores()).unwrap());
    let list = listing(&out);
    assert_eq!(content(&list, "big").map(str::len), Some(big.len()));
    assert_eq!(stats.uncompressed_bytes, layer.len() as u64);
}

#[test]
fn a_higher_file_or_symlink_hides_a_lower_directory_tree() {
    let bottom = tar_of(&[
        E::File("conf/a.yaml", "a"),
        E::File("data/x", "x"),
        E::File("keep", "k"),
    ]);
    let top = tar_of(&[E::File("conf", "now a file"), E::Link("data", "elsewhere")]);
    let (out, _) = done(merge(&[top, bottom], no_ignores()).unwrap());
    let list = listing(&out);
    assert_eq!(paths(&out), vec!["conf", "keep"]);
    assert_eq!(content(&list, "conf"), Some("now a file"));
}

#[test]
fn a_higher_sourceignore_filters_lower_layers_in_one_pass() {
    let top = tar_of(&[E::File(".sourceignore", "/build/\n*.log\n")]);
    let bottom = tar_of(&[
        E::File("build/out.bin", "b"),
        E::File("x.log", "l"),
        E::File("src/a.rs", "a"),
    ]);
    let (out, stats) = done(merge(&[top, bottom], no_ignores()).unwrap());
    assert_eq!(paths(&out), vec![".sourceignore", "src", "src/a.rs"]);
    assert_eq!(
        stats.skipped, 2,
        "build/out.bin and x.log; the implied build/ is not an entry"
    );
}
