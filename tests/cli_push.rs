//! What `ocisource push --path` publishes, run on the real binary against the real
//! registry and read back with `ocisource pull` and GNU tar: VCS files and Flux's default
//! media and archive patterns are left out of a directory, `--ignore-paths` (comma-
//! separated or repeated, gitignore syntax) replaces the default patterns but never lets
//! VCS files in, a single file is stored under its name, and `-` stores standard input
//! as `stdin.yaml`. Bad paths and patterns fail with exit code 2 naming the flag.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
mod support;

use std::path::Path;
use std::process::Command;

use cli_common::{arg, command, ocisource, run, tar_names};
use support::{RegistryOpts, TestRegistry};

fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

/// A checkout-like tree: manifests, VCS files, an image, a README.
fn checkout(root: &Path) {
    for (rel, content) in [
        ("apps/web.yaml", "kind: Deployment\n"),
        ("apps/.gitattributes", "* text=auto\n"),
        ("README.md", "# config\n"),
        ("logo.png", "png"),
        ("kustomization.yaml", "resources: [apps/web.yaml]\n"),
        (".gitignore", "*.tmp\n"),
        (".gitmodules", "\n"),
        (".git/config", "[core]\n"),
        (".git/objects/ab/cdef", "blob"),
        ("tests/smoke.yaml", "kind: Pod\n"),
    ] {
        write(root, rel, content);
    }
}

/// Pushes with `extra` flags to `tag`, pulls the layer back byte for byte (`copy`, so
/// pull's own exclusions do not interfere), and lists it.
fn push_and_list(
    reg: &TestRegistry,
    work: &Path,
    tag: &str,
    extra: &[&str],
    stdin: Option<&[u8]>,
) -> Vec<String> {
    let url = format!("oci://{}/team/pushed:{tag}", reg.host());
    let mut args = vec!["push", url.as_str(), "--insecure", "-o", "json"];
    args.extend_from_slice(extra);
    let out = run(command(&args), stdin);
    assert_eq!(out.code, 0, "push {extra:?}: {}", out.stderr);
    let file = work.join(format!("{tag}.tar.gz"));
    let out = ocisource(&[
        "pull",
        &url,
        "--insecure",
        "--layer-operation",
        "copy",
        "--output-file",
        arg(&file),
    ]);
    assert_eq!(out.code, 0, "pull {tag}: {}", out.stderr);
    tar_names(&file)
}

fn cat(archive: &Path, name: &str) -> Vec<u8> {
    let out = Command::new("tar")
        .arg("-xzOf")
        .arg(archive)
        .arg(name)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name} not in {}", archive.display());
    out.stdout
}

#[tokio::test]
async fn directories_leave_out_vcs_files_and_ignore_paths_replace_the_default_patterns() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    checkout(&src);
    let path = arg(&src);

    // Flux's defaults: VCS files, images and archives stay out; the rest goes in.
    let names = push_and_list(&reg, work.path(), "default", &["--path", path], None);
    assert_eq!(
        names,
        [
            "README.md",
            "apps",
            "apps/web.yaml",
            "kustomization.yaml",
            "tests",
            "tests/smoke.yaml"
        ]
    );

    // Own patterns replace the media defaults (the image is back) but not the VCS rules.
    let expected = ["apps", "apps/web.yaml", "kustomization.yaml", "logo.png"];
    let names = push_and_list(
        &reg,
        work.path(),
        "own",
        &["--path", path, "--ignore-paths", "*.md,tests/"],
        None,
    );
    assert_eq!(names, expected);
    let names = push_and_list(
        &reg,
        work.path(),
        "repeated",
        &[
            "--path",
            path,
            "--ignore-paths",
            "*.md",
            "--ignore-paths",
            "tests/",
        ],
        None,
    );
    assert_eq!(names, expected);
}

#[tokio::test]
async fn a_single_file_and_standard_input_are_pushed_as_one_file() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    checkout(&src);

    let file = src.join("kustomization.yaml");
    let names = push_and_list(&reg, work.path(), "file", &["--path", arg(&file)], None);
    assert_eq!(names, ["kustomization.yaml"]);
    assert_eq!(
        cat(&work.path().join("file.tar.gz"), "kustomization.yaml"),
        std::fs::read(&file).unwrap()
    );

    let manifests = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n";
    let names = push_and_list(
        &reg,
        work.path(),
        "stdin",
        &["--path", "-"],
        Some(manifests),
    );
    assert_eq!(names, ["stdin.yaml"]);
    assert_eq!(
        cat(&work.path().join("stdin.tar.gz"), "stdin.yaml"),
        manifests
    );
}

#[test]
fn bad_paths_and_patterns_exit_2_naming_the_flag() {
    let work = tempfile::tempdir().unwrap();
    checkout(work.path());
    let url = "oci://127.0.0.1:1/team/x:v1";
    let logo = work.path().join("logo.png");
    let missing = work.path().join("missing");
    for (args, needle) in [
        (vec!["push", url, "--path", arg(&logo)], "--ignore-paths"),
        (vec!["push", url, "--path", arg(&missing)], "invalid --path"),
        (
            vec![
                "push",
                url,
                "--path",
                arg(work.path()),
                "--ignore-paths",
                "ok,{a",
            ],
            "invalid --ignore-paths pattern '{a'",
        ),
    ] {
        let out = ocisource(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
    // With --ignore-paths the image is no longer excluded: it is pushed (and fails only
    // at the unreachable registry, exit 1).
    let out = ocisource(&[
        "push",
        url,
        "--path",
        arg(&logo),
        "--ignore-paths",
        "*.md",
        "--timeout",
        "2s",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
}
