//! `--plain-http` (as in oras) against the real registry, run on the binary: plain HTTP
//! from the first request for any host, here a registry reached through 127.0.0.2 (a
//! loopback address that is not one of the local hosts allowed to fall back to plain HTTP
//! by themselves). Without the flag that host fails with an error naming `--plain-http`;
//! with it against a TLS registry the error says to drop it; a local plain registry works
//! with the flag without the HTTPS attempt and its warning.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
mod support;

use std::net::{TcpListener, TcpStream};

use cli_common::{arg, command, run, Out};
use support::{RegistryOpts, TestRegistry};

/// Forwards every connection to `127.0.0.2:<port>` to `upstream`; returns `127.0.0.2:<port>`.
fn forward_from_127_0_0_2(upstream: String) -> String {
    let listener = TcpListener::bind("127.0.0.2:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&upstream) else {
                continue;
            };
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut c1, mut s1) = (client, server);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c1, &mut s1);
                let _ = s1.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s2, &mut c2);
                let _ = c2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    host
}

/// Runs the binary at warn level (the plain-HTTP fallback warns there).
fn ocisource(args: &[&str]) -> Out {
    let mut cmd = command(args);
    cmd.args(["--log-level", "warn", "--timeout", "10s"]);
    run(cmd, None)
}

/// `pull URL -q --output-file OUT` plus `extra`.
fn pull(url: &str, out: &std::path::Path, extra: &[&str]) -> Out {
    ocisource(&[&["pull", url, "-q", "--output-file", arg(out)], extra].concat())
}

const FALLBACK_WARNING: &str = "does not answer HTTPS; using plain HTTP";

#[test]
fn plain_http_speaks_http_from_the_first_request_to_any_host() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let far = forward_from_127_0_0_2(reg.host());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("app.yaml");
    std::fs::write(&file, "kind: ConfigMap\n").unwrap();
    let out_file = work.path().join("o.tar.gz");

    // A host that may not fall back by itself: HTTPS fails, and the error names the flag.
    let url = format!("oci://{far}/team/app:v1");
    let out = ocisource(&["push", &url, "--path", arg(&file), "-q"]);
    assert_eq!(out.code, 1, "push without --plain-http: {}", out.stderr);
    assert!(
        out.stderr
            .contains("speaks plain HTTP, not HTTPS: set --plain-http"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("--plain-http").count(),
        1,
        "{}",
        out.stderr
    );

    // With the flag: push and pull work through the same host.
    let out = ocisource(&["push", &url, "--path", arg(&file), "--plain-http", "-q"]);
    assert_eq!(out.code, 0, "push --plain-http: {}", out.stderr);
    let out = pull(&url, &out_file, &["--plain-http"]);
    assert_eq!(out.code, 0, "pull --plain-http: {}", out.stderr);
    assert!(!out.stderr.contains(FALLBACK_WARNING), "{}", out.stderr);

    // A local registry falls back by itself (and says so); with the flag no HTTPS is tried.
    let local = format!("oci://{}/team/app:v1", reg.host());
    let out = pull(&local, &out_file, &[]);
    assert_eq!(out.code, 0, "pull: {}", out.stderr);
    assert!(out.stderr.contains(FALLBACK_WARNING), "{}", out.stderr);
    let out = pull(&local, &out_file, &["--plain-http"]);
    assert_eq!(out.code, 0, "pull --plain-http: {}", out.stderr);
    assert!(
        out.stderr.trim().is_empty(),
        "pull --plain-http warned: {}",
        out.stderr
    );
}

/// `--plain-http` to a host that may not fall back by itself, behind a login: the login
/// is bound to the origin actually spoken to (`http://host`), so the registry's 401 is
/// answered with it. It was bound only to `https://host` before, and the pull failed.
#[test]
fn plain_http_sends_the_login_to_a_host_that_may_not_fall_back() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("bob", "pa55"));
    let far = forward_from_127_0_0_2(reg.host());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("app.yaml");
    std::fs::write(&file, "kind: ConfigMap\n").unwrap();
    let url = format!("oci://{far}/team/app:v1");
    let login = ["--plain-http", "--creds", "bob:pa55"];
    let out = ocisource(&[&["push", &url, "--path", arg(&file), "-q"][..], &login].concat());
    assert_eq!(out.code, 0, "push --plain-http --creds: {}", out.stderr);
    let out = pull(&url, &work.path().join("o.tar.gz"), &login);
    assert_eq!(out.code, 0, "pull --plain-http --creds: {}", out.stderr);
}

#[test]
fn plain_http_against_a_tls_registry_says_to_drop_the_flag() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_tls());
    let work = tempfile::tempdir().unwrap();
    let ca = work.path().join("ca.pem");
    std::fs::write(&ca, reg.ca_pem().unwrap()).unwrap();
    let file = work.path().join("app.yaml");
    std::fs::write(&file, "kind: ConfigMap\n").unwrap();
    let url = format!("oci://{}/team/app:v1", reg.host());

    let out = ocisource(&[
        "push",
        &url,
        "--path",
        arg(&file),
        "--ca-file",
        arg(&ca),
        "-q",
    ]);
    assert_eq!(out.code, 0, "push over TLS: {}", out.stderr);
    let out_file = work.path().join("o.tar.gz");
    let out = pull(&url, &out_file, &["--plain-http"]);
    assert_eq!(
        out.code, 1,
        "pull --plain-http of a TLS registry: {}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("the registry speaks HTTPS: drop --plain-http"),
        "{}",
        out.stderr
    );
    assert!(!out_file.exists());

    // TLS files and plain HTTP exclude each other.
    let out = ocisource(&[
        "pull",
        &url,
        "--plain-http",
        "--ca-file",
        arg(&ca),
        "--output-file",
        arg(&out_file),
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--plain-http"), "{}", out.stderr);
}
