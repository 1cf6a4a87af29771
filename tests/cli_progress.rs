//! Transfer progress as a CI log sees it: the binary runs against the real registry with
//! stderr on a pipe (not a terminal), so `push` and `pull` print plain per-layer lines
//! (started, done, or already in the registry) with no terminal escapes, only on stderr:
//! `-o json` output on stdout still parses. `-q` prints no progress at all.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
mod support;

use cli_common::{arg, command, noise, ocisource, run, Out};
use support::{RegistryOpts, TestRegistry};

/// The layer name (`sha256:` and 12 hex digits) of the line `<verb> <name>: <what>...`.
fn layer_with(out: &Out, verb: &str, what: &str) -> Option<String> {
    out.stderr.lines().find_map(|l| {
        let rest = l.strip_prefix(verb)?.strip_prefix(' ')?;
        let (name, tail) = rest.split_once(": ")?;
        (name.starts_with("sha256:") && name.len() == 19 && tail.starts_with(what))
            .then(|| name.to_string())
    })
}

fn no_escapes(out: &Out, what: &str) {
    assert!(
        !out.stderr.contains('\x1b') && !out.stderr.contains('\r'),
        "{what}: terminal control characters on a non-terminal stderr: {:?}",
        out.stderr
    );
}

#[test]
fn push_and_pull_print_plain_progress_lines_on_a_pipe() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("big.bin");
    std::fs::write(&file, noise(3 << 20)).unwrap();
    let url = format!("oci://{}/team/progress:v1", reg.host());

    let pushed = ocisource(&[
        "push",
        &url,
        "--path",
        arg(&file),
        "--insecure",
        "-o",
        "json",
    ]);
    assert_eq!(pushed.code, 0, "push: {}", pushed.stderr);
    assert!(pushed.json()["digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    no_escapes(&pushed, "push");
    let started = layer_with(&pushed, "push", "started, 3.").unwrap_or_else(|| {
        panic!(
            "no `push <layer>: started, 3.x MiB` line: {}",
            pushed.stderr
        )
    });
    let done = layer_with(&pushed, "push", "done, 3.").unwrap_or_else(|| {
        panic!(
            "no `push <layer>: done, 3.x MiB in ...` line: {}",
            pushed.stderr
        )
    });
    assert_eq!(started, done);

    // The same content under another tag: the layer is in the registry already.
    let again = format!("oci://{}/team/progress:v2", reg.host());
    let out = ocisource(&[
        "push",
        &again,
        "--path",
        arg(&file),
        "--insecure",
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 0, "second push: {}", out.stderr);
    assert_eq!(
        layer_with(&out, "push", "already in the registry").as_deref(),
        Some(started.as_str()),
        "second push: {}",
        out.stderr
    );

    let tgz = work.path().join("out.tar.gz");
    let pulled = ocisource(&[
        "pull",
        &url,
        "--insecure",
        "--output-file",
        arg(&tgz),
        "-o",
        "json",
    ]);
    assert_eq!(pulled.code, 0, "pull: {}", pulled.stderr);
    assert!(pulled.json()["archiveDigest"].as_str().is_some());
    no_escapes(&pulled, "pull");
    assert_eq!(
        layer_with(&pulled, "pull", "started, 3.").as_deref(),
        Some(started.as_str()),
        "pull: {}",
        pulled.stderr
    );
    assert_eq!(
        layer_with(&pulled, "pull", "done, 3.").as_deref(),
        Some(started.as_str()),
        "pull: {}",
        pulled.stderr
    );
}

#[test]
fn quiet_prints_no_progress() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("small.yaml");
    std::fs::write(&file, "kind: ConfigMap\n").unwrap();
    let url = format!("oci://{}/team/quiet:v1", reg.host());
    let mut push = command(&[
        "push",
        &url,
        "--path",
        arg(&file),
        "--insecure",
        "-q",
        "-o",
        "json",
    ]);
    push.env("OCISOURCE_LOG", "error");
    let out = run(push, None);
    assert_eq!(out.code, 0, "push -q: {}", out.stderr);
    assert!(
        out.stderr.trim().is_empty(),
        "push -q wrote to stderr: {:?}",
        out.stderr
    );
    let tgz = work.path().join("q.tar.gz");
    let mut pull = command(&[
        "pull",
        &url,
        "--insecure",
        "--output-file",
        arg(&tgz),
        "--quiet",
    ]);
    // Warnings (plain HTTP) are not progress: keep them out of this check.
    pull.env("OCISOURCE_LOG", "error");
    let out = run(pull, None);
    assert_eq!(out.code, 0, "pull --quiet: {}", out.stderr);
    assert!(
        out.stderr.trim().is_empty(),
        "pull --quiet wrote to stderr: {:?}",
        out.stderr
    );
    // Without -q the same pull reports its layer.
    let out = ocisource(&["pull", &url, "--insecure", "--output-file", arg(&tgz)]);
    assert!(
        layer_with(&out, "pull", "done, ").is_some(),
        "pull: {}",
        out.stderr
    );
}
