//! `ocisource pull` of hostile layers from the real registry: absolute and escaping paths,
//! links out of the tree, devices and FIFOs, decompression bombs. Each fails with a clear
//! message and leaves the output file untouched.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
mod support;

use std::path::PathBuf;

use cli_common::pull;
use support::{tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn raw_tar_gz(entries: &[(&str, tar::EntryType, &str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, kind, link, data) in entries {
        let mut h = tar::Header::new_old();
        let b = h.as_old_mut();
        b.name[..name.len()].copy_from_slice(name.as_bytes());
        b.linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_entry_type(*kind);
        h.set_mtime(0);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &out).unwrap();
    gz.finish().unwrap()
}

#[tokio::test]
async fn hostile_layers_fail_clearly_and_leave_the_output_untouched() {
    use tar::EntryType::{Block, Char, Fifo, Link, Regular, Symlink};
    let reg = TestRegistry::start(RegistryOpts::plain());
    let cases: Vec<(&str, Vec<Vec<u8>>, &str)> = vec![
        (
            "absolute",
            vec![raw_tar_gz(&[("/etc/passwd", Regular, "", b"x")])],
            "/etc/passwd",
        ),
        (
            "dotdot",
            vec![raw_tar_gz(&[("a/../../escape", Regular, "", b"x")])],
            "a/../../escape",
        ),
        (
            "symlink",
            vec![
                raw_tar_gz(&[("link", Symlink, "/etc", b"")]),
                raw_tar_gz(&[("link/passwd", Regular, "", b"x")]),
            ],
            "symlink 'link'",
        ),
        (
            "hardlink",
            vec![raw_tar_gz(&[
                ("a", Regular, "", b"x"),
                ("b", Link, "a", b""),
            ])],
            "b",
        ),
        (
            "chardev",
            vec![raw_tar_gz(&[("dev/null", Char, "", b"")])],
            "dev/null",
        ),
        (
            "blockdev",
            vec![raw_tar_gz(&[("dev/sda", Block, "", b"")])],
            "dev/sda",
        ),
        ("fifo", vec![raw_tar_gz(&[("pipe", Fifo, "", b"")])], "pipe"),
        (
            "badgzip",
            vec![vec![
                0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef,
            ]],
            "gzip",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, layers, needle) in cases {
        let repo = format!("hostile/{name}");
        let pushed = reg
            .push_artifact(
                &repo,
                "v1",
                &layers
                    .iter()
                    .map(|l| (LAYER, l.clone()))
                    .collect::<Vec<_>>(),
                &[],
            )
            .await;
        let out = dir.path().join(format!("{name}.tar.gz"));
        std::fs::write(&out, b"last good").unwrap();
        let run = pull(&reg.host(), &repo, &out, &["--tag", "v1"]);
        assert_eq!(run.code, 1, "{name}: {}", run.stderr);
        assert!(
            run.stderr.contains(needle),
            "{name}: error must name the entry: {}",
            run.stderr
        );
        let named_layer = pushed
            .layer_digests
            .iter()
            .any(|d| run.stderr.contains(d.as_str()));
        assert!(
            named_layer,
            "{name}: error must name the layer digest: {}",
            run.stderr
        );
        assert_eq!(
            std::fs::read(&out).unwrap(),
            b"last good",
            "{name}: output changed"
        );
    }
    let leftovers: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[tokio::test]
async fn decompression_bomb_limits_fail_and_leave_the_output_untouched() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    // 8 MiB of zeros compress to a few KiB: a small bomb, and three entries.
    let zeros = vec![0u8; 8 << 20];
    let layer = tar_gz(&[("a", b"1"), ("b", b"2"), ("zeros", zeros.as_slice())]);
    assert!(
        layer.len() < 1 << 20,
        "the layer should inflate well over its size"
    );
    let pushed = reg
        .push_artifact("team/bomb", "v1", &[(LAYER, layer)], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tar.gz");
    for (flag, value) in [
        ("--max-uncompressed-bytes", "1048576"),
        ("--max-entries", "2"),
    ] {
        std::fs::write(&out, b"last good").unwrap();
        let run = pull(
            &reg.host(),
            "team/bomb",
            &out,
            &["--tag", "v1", flag, value],
        );
        assert_eq!(run.code, 1, "{flag}: {}", run.stderr);
        assert!(
            run.stderr.contains(&pushed.layer_digests[0]),
            "{flag}: {}",
            run.stderr
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"last good");
    }
    // Within the limits the same artifact pulls.
    assert_eq!(
        pull(&reg.host(), "team/bomb", &out, &["--tag", "v1"]).code,
        0
    );
}
