//! Hostile artifacts against the real `ocisource pull`: each case is a layer written byte
//! by byte, pushed to the real registry, and pulled by the built binary under `prlimit`
//! (CPU seconds and address space). Each run must end in a clear error naming the layer
//! digest and the entry (escaped: no raw control character reaches the output), or in a
//! clean success; with a peak RSS (VmHWM, read from /proc while it runs) under
//! [`RSS_BOUND_KIB`]; and with nothing left in its sandbox (cwd, HOME, TMPDIR) but the
//! artifact of a success. The unit tests in `src/archive` cover the same rules one by one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod hostile;
mod support;

use std::path::PathBuf;

use hostile::{pull_limited, Layer, Limited, CPU_SECONDS};
use support::{RegistryOpts, TestRegistry};
use tar::EntryType;

const GZ: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
/// Peak resident memory allowed to one pull, KiB.
const RSS_BOUND_KIB: u64 = 128 << 10;

/// Pushes `layer` as `hostile/<name>:v1` and pulls it under the limits.
async fn pull_case(
    reg: &TestRegistry,
    name: &str,
    media: &str,
    layer: Vec<u8>,
) -> (String, Limited) {
    pull_case_with(reg, name, media, layer, &[]).await
}

/// [`pull_case`] with more `pull` flags.
async fn pull_case_with(
    reg: &TestRegistry,
    name: &str,
    media: &str,
    layer: Vec<u8>,
    extra: &[String],
) -> (String, Limited) {
    let repo = format!("hostile/{name}");
    let pushed = reg.push_artifact(&repo, "v1", &[(media, layer)], &[]).await;
    let url = format!("oci://{}/{repo}", reg.host());
    let extra = extra.to_vec();
    let run = tokio::task::spawn_blocking(move || pull_limited(&url, &extra))
        .await
        .unwrap();
    let bound = RSS_BOUND_KIB;
    assert!(
        run.code.is_some(),
        "{name}: killed by a signal (SIGXCPU past {CPU_SECONDS} s of CPU?): {}",
        run.stderr
    );
    assert!(
        run.peak_rss_kib > 0 && run.peak_rss_kib < bound,
        "{name}: peak RSS {} KiB, bound {bound} KiB",
        run.peak_rss_kib
    );
    eprintln!(
        "{name}: exit {:?}, peak RSS {} KiB, CPU {} ms: {}",
        run.code,
        run.peak_rss_kib,
        run.cpu_ms,
        run.stderr.trim()
    );
    (pushed.layer_digests[0].clone(), run)
}

/// Checks a refusal: exit 1, the layer and `needles` named, no raw control character,
/// nothing left behind.
fn assert_refused(name: &str, digest: &str, run: &Limited, needles: &[&str]) {
    assert_eq!(run.code, Some(1), "{name}: {}", run.stderr);
    assert!(
        run.stderr.contains(digest),
        "{name}: layer not named: {}",
        run.stderr
    );
    for needle in needles {
        assert!(
            run.stderr.contains(needle),
            "{name}: no '{needle}' in: {}",
            run.stderr
        );
    }
    let raw = run
        .stderr
        .chars()
        .filter(|c| c.is_control() && *c != '\n')
        .count();
    assert_eq!(
        raw, 0,
        "{name}: raw control characters in: {:?}",
        run.stderr
    );
    assert!(
        run.stderr.len() < 4096,
        "{name}: a {}-byte message",
        run.stderr.len()
    );
    assert!(run.files.is_empty(), "{name}: files left: {:?}", run.files);
}

#[tokio::test]
async fn hostile_names_are_refused_with_the_entry_named() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let deep = format!("{}f", "d/".repeat(30_000));
    let cases: Vec<(&str, Vec<u8>, Vec<&str>)> = vec![
        (
            "deep-30000",
            Layer::new().long_named(deep.as_bytes(), b"x").finish(),
            vec!["'d/d/d/d/d", "60002 bytes", "PATH_MAX"],
        ),
        (
            "ansi-escape",
            Layer::new()
                .file("ok.yaml", b"1")
                .file("evil\x1b[2J\x1b[31m.yaml", b"x")
                .finish(),
            vec!["evil\\u{1b}[2J\\u{1b}[31m.yaml", "control characters"],
        ),
        (
            "pax-nul",
            Layer::new()
                .pax(&[("path", &b"dir/evil\0.yaml"[..])], "short", b"x")
                .finish(),
            vec!["dir/evil\\u{0}.yaml", "NUL"],
        ),
        (
            "pax-sparse",
            Layer::new()
                .pax(
                    &[
                        ("GNU.sparse.major", &b"1"[..]),
                        ("GNU.sparse.name", b"data/disk.img"),
                    ],
                    "GNUSparseFile.0/disk.img",
                    b"1\n0\n0\n",
                )
                .finish(),
            vec!["data/disk.img", "sparse"],
        ),
        (
            "backslash",
            Layer::new().file("dir\\evil.yaml", b"x").finish(),
            vec!["dir\\evil.yaml", "validRelPath"],
        ),
        (
            "dotdot-suffix",
            Layer::new().file("x../y.yaml", b"x").finish(),
            vec!["x../y.yaml", "validRelPath"],
        ),
    ];
    for (name, layer, needles) in cases {
        let (digest, run) = pull_case(&reg, name, GZ, layer).await;
        assert_refused(name, &digest, &run, &needles);
    }
}

#[tokio::test]
async fn names_of_256_mib_are_refused_before_they_are_read() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let size = 256u64 << 20;
    let gnu = Layer::new()
        .header(b"././@LongLink", EntryType::GNULongName, size + 1)
        .fill(b'a', size)
        .raw(&[0])
        .pad(size + 1)
        .file("x", b"x")
        .finish();
    let (digest, run) = pull_case(&reg, "gnu-name-256mib", GZ, gnu).await;
    assert_refused(
        "gnu",
        &digest,
        &run,
        &["'aaaaaaaa", "268435457 bytes", "4096-byte limit"],
    );

    // A PAX record "<len> path=<value>\n" of 256 MiB + 10 bytes in all.
    let len = size + 10;
    let prefix = format!("{len} path=");
    let pax = Layer::new()
        .header(b"PaxHeaders/x", EntryType::XHeader, len)
        .raw(prefix.as_bytes())
        .fill(b'p', len - prefix.len() as u64 - 1)
        .raw(b"\n")
        .pad(len)
        .file("x", b"x")
        .finish();
    let (digest, run) = pull_case(&reg, "pax-path-256mib", GZ, pax).await;
    assert_refused(
        "pax",
        &digest,
        &run,
        &["'pppppppp", "PAX extended header", "65536-byte limit"],
    );
}

#[tokio::test]
async fn many_long_unique_paths_stop_at_the_bookkeeping_cap() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    // 50,000 entries of ~4 KB unique paths (200 MB of names): the 16 MiB budget of
    // remembered paths ends the merge long before.
    let tail = vec!["p".repeat(250); 15].join("/");
    let mut layer = Layer::new();
    for i in 0..50_000 {
        layer.long_named(format!("{i:08}/{tail}").as_bytes(), b"");
    }
    let (digest, run) = pull_case(&reg, "many-long-paths", GZ, layer.finish()).await;
    assert_refused("many", &digest, &run, &["/pppp", "16777216 bytes"]);
}

#[tokio::test]
async fn a_zstd_frame_failing_its_checksum_is_refused() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(6);
    h.set_mode(0o644);
    tar.append_data(&mut h, "config.yaml", &b"a: b\n\n"[..])
        .unwrap();
    let tar = tar.into_inner().unwrap();
    let mut zstd = std::process::Command::new("zstd")
        .args(["-q", "-c", "--check", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the zstd CLI (apt-get install zstd)");
    std::io::Write::write_all(zstd.stdin.as_mut().unwrap(), &tar).unwrap();
    drop(zstd.stdin.take());
    let mut blob = zstd.wait_with_output().unwrap().stdout;
    let last = blob.len() - 1;
    blob[last] ^= 0x5a; // the stored checksum: the content still decodes
    let (digest, run) = pull_case(&reg, "zstd-checksum", ZSTD, blob).await;
    assert_refused(
        "zstd",
        &digest,
        &run,
        &["malformed zstd", "checksum mismatch"],
    );
}

#[tokio::test]
async fn a_deep_wide_tree_within_the_caps_pulls_in_linear_time() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    // 20,000 files 200 directories deep: a whole-path map would compare ~400-byte keys
    // 200 times per entry; the component tree walks each path once.
    let dirs = "d/".repeat(199);
    let mut layer = Layer::new();
    for i in 0..20_000 {
        layer.long_named(format!("{dirs}f{i}").as_bytes(), b"x");
    }
    let (_, run) = pull_case(&reg, "deep-wide", GZ, layer.finish()).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.files, vec![PathBuf::from("out/o.tar.gz")]);
}

/// Complex globs (the compiled form is what costs), just under `limit` bytes.
fn complex_rules(limit: usize, prefix: &str) -> String {
    let mut out = String::new();
    for i in 0.. {
        let line = format!("/{prefix}{i}/**/*.tmp{i}\n!/{prefix}{i}/keep[0-9]?.yaml\n");
        if out.len() + line.len() > limit {
            break;
        }
        out.push_str(&line);
    }
    out
}

#[tokio::test]
async fn ignore_rules_at_their_caps_pull_within_the_bound_and_past_them_are_refused() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    // MAX_SOURCEIGNORE_BYTES and MAX_SPEC_IGNORE_BYTES.
    let (cap, spec_cap) = (8 << 10, 32 << 10);
    let sourceignore = complex_rules(cap, "skip");
    let layer = Layer::new()
        .file(".sourceignore", sourceignore.as_bytes())
        .file("app.yaml", b"a: 1\n")
        .finish();
    let spec = vec!["--ignore".to_string(), complex_rules(spec_cap, "spec")];
    let (_, run) = pull_case_with(&reg, "rules-at-cap", GZ, layer, &spec).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.files, vec![PathBuf::from("out/o.tar.gz")]);

    let over = format!("{sourceignore}{}", complex_rules(1024, "more"));
    let layer = Layer::new()
        .file("d/.sourceignore", over.as_bytes())
        .finish();
    let (digest, run) = pull_case(&reg, "rules-over-cap", GZ, layer).await;
    assert_refused(
        "rules",
        &digest,
        &run,
        &["d/.sourceignore", "8192 bytes together"],
    );
}
