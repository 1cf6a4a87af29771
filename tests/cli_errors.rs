//! Errors as a shell user meets them, on the real binary: they name the flag to change
//! (`--semver`, `--ca-file`, `--creds`), not the OCIRepository field; stderr carries no
//! ANSI colour unless it is a terminal (and `NO_COLOR` is unset); no line is printed
//! twice; and failures no retry can cure (a host name that does not exist, a
//! certificate for another name, a TLS handshake answered in plain HTTP) fail after one
//! attempt, while a refused connection is still retried. Attempts are counted by
//! in-process listeners on 127.0.0.1 that see every TLS ClientHello.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
mod support;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cli_common::{arg, command, ocisource, run, Out};
use support::{tar_gz, RegistryOpts, TestRegistry};
use tokio::io::AsyncWriteExt;
use tokio_rustls::rustls;

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// No non-empty line of stderr appears twice.
fn assert_no_repeated_lines(out: &Out) {
    let mut seen = std::collections::HashSet::new();
    for line in out.stderr.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            seen.insert(line),
            "line printed twice: {line}\n{}",
            out.stderr
        );
    }
}

/// CLI words present, OCIRepository words absent, exit code as given.
fn assert_speaks_cli(out: &Out, code: i32, flag: &str) {
    assert_eq!(out.code, code, "{}", out.stderr);
    assert!(out.stderr.contains(flag), "expected {flag}: {}", out.stderr);
    for spec_word in [
        "spec.",
        "certSecretRef",
        "secretRef",
        "matchOIDCIdentity",
        "ca.crt",
    ] {
        assert!(
            !out.stderr.contains(spec_word),
            "{spec_word} in: {}",
            out.stderr
        );
    }
    assert_no_repeated_lines(out);
}

#[tokio::test]
async fn errors_name_the_flags_of_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("o.tar.gz");
    let o = arg(&file);

    let a = "oci://127.0.0.1:1/a";
    for (args, said) in [
        (
            vec!["pull", a, "--semver", "1.x.y.z"],
            "invalid --semver '1.x.y.z'",
        ),
        (vec!["pull", a, "--tag=-v1"], "invalid --tag '-v1'"),
        (
            vec!["pull", "oci://127.0.0.1:1/a:v1", "--ignore", "{a"],
            "invalid --ignore pattern '{a'",
        ),
    ] {
        let out = ocisource(&[&args[..], &["--output-file", o]].concat());
        assert_speaks_cli(&out, 2, said);
    }
    let out = ocisource(&[
        "verify",
        "oci://127.0.0.1:1/a:v1",
        "--certificate-identity-regexp",
        "([",
        "--certificate-oidc-issuer",
        "https://issuer.example",
    ]);
    assert_speaks_cli(&out, 2, "invalid --certificate-identity-regexp '(['");

    // A TLS registry whose CA the client does not know: the hint is --ca-file.
    let tls = TestRegistry::start(RegistryOpts::plain().with_tls());
    tls.push_artifact("team/app", "v1", &[(LAYER, tar_gz(&[("a", b"1")]))], &[])
        .await;
    let url = format!("oci://{}/team/app:v1", tls.host());
    let out = ocisource(&["pull", &url, "--output-file", o]);
    assert_speaks_cli(&out, 1, "--ca-file");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, tls.ca_pem().unwrap()).unwrap();
    let out = ocisource(&["pull", &url, "--ca-file", arg(&ca), "--output-file", o]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    // A registry that wants a login: the hint is --creds.
    let auth = TestRegistry::start(RegistryOpts::plain().with_basic_auth("bob", "pa55"));
    auth.push_artifact("team/app", "v1", &[(LAYER, tar_gz(&[("a", b"1")]))], &[])
        .await;
    let url = format!("oci://{}/team/app:v1", auth.host());
    let mut cmd = command(&["pull", &url, "--insecure", "--output-file", o]);
    cmd.env("DOCKER_CONFIG", dir.path()).env("HOME", dir.path());
    let out = run(cmd, None);
    assert_speaks_cli(&out, 1, "--creds");
}

/// The drop-in mode takes only Flux objects labelled for ocisource: a selector that an
/// unlabelled object also matches (empty, or only negative requirements) would make
/// ocisource and Flux's source-controller both reconcile it; and the multi-tenancy
/// lockdown without its feature gate is refused as Flux refuses it. Both before the
/// controller connects to anything (no kubeconfig is needed to see the refusal).
#[test]
fn flags_that_would_mix_tenants_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("none");
    let controller = |flag: &str| {
        let mut cmd = command(&["controller", flag]);
        cmd.env("KUBECONFIG", &kubeconfig);
        run(cmd, None)
    };
    for (flag, says) in [
        ("--flux-drop-in-selector=", "it is empty"),
        (
            "--flux-drop-in-selector=!sharding.fluxcd.io/key",
            "without the label too",
        ),
        (
            "--flux-drop-in-selector=sharding.fluxcd.io/key!=flux",
            "without the label too",
        ),
        ("--flux-drop-in-selector=a=b,,c", "an empty requirement"),
        ("--watch-label-selector=a in (b", "unbalanced parentheses"),
        (
            "--default-service-account=tenant",
            "ObjectLevelWorkloadIdentity",
        ),
    ] {
        let out = controller(flag);
        let name = flag.split('=').next().unwrap();
        assert_eq!(out.code, 2, "{flag}: {}", out.stderr);
        assert!(out.stderr.contains(name), "{flag}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{flag}: {}", out.stderr);
    }
    // A selector that requires the label gets past the check (and fails later, on the
    // missing cluster, with another message).
    let out = controller("--flux-drop-in-selector=sharding.fluxcd.io/key=ocisource");
    assert!(
        !out.stderr.contains("--flux-drop-in-selector"),
        "{}",
        out.stderr
    );
}

#[test]
fn no_colour_unless_stderr_is_a_terminal() {
    let args = [
        "pull",
        "oci://127.0.0.1:1/a:v1",
        "--output-file",
        "/nonexistent/o.tar.gz",
    ];
    let mut cmd = command(&args);
    cmd.args(["--log-level", "debug", "--timeout", "1s"]);
    let out = run(cmd, None);
    assert!(out.stderr.contains("DEBUG"), "{}", out.stderr);
    assert!(
        !out.stderr.contains('\x1b'),
        "ANSI escape in piped stderr: {:?}",
        out.stderr
    );

    // On a terminal (a pseudo-terminal made by script(1)) the log is coloured, unless
    // NO_COLOR says otherwise.
    let line = format!(
        "{} {} --log-level debug --timeout 1s",
        env!("CARGO_BIN_EXE_ocisource"),
        args.join(" ")
    );
    let on_tty = |no_color: bool| {
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"])
            .env_remove("NO_COLOR");
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        String::from_utf8_lossy(&cmd.output().expect("script(1)").stdout).into_owned()
    };
    let coloured = on_tty(false);
    assert!(
        coloured.contains("DEBUG") && coloured.contains('\x1b'),
        "{coloured:?}"
    );
    let plain = on_tty(true);
    assert!(
        plain.contains("DEBUG") && !plain.contains('\x1b'),
        "{plain:?}"
    );
}

/// A listener on 127.0.0.1 that counts TLS ClientHellos (first byte 0x16). With a TLS
/// configuration it completes handshakes; without, it answers every connection with a
/// plain `HTTP/1.1 404`, as a plain-HTTP server does.
async fn hello_counter(tls: Option<rustls::ServerConfig>) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let hellos = Arc::new(AtomicUsize::new(0));
    let counted = hellos.clone();
    let acceptor = tls.map(|c| tokio_rustls::TlsAcceptor::from(Arc::new(c)));
    tokio::spawn(async move {
        loop {
            let Ok((mut io, _)) = listener.accept().await else {
                continue;
            };
            let mut first = [0u8; 1];
            if io.peek(&mut first).await.unwrap_or(0) == 1 && first[0] == 0x16 {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            match &acceptor {
                Some(a) if first[0] == 0x16 => {
                    let _ = a.accept(io).await;
                }
                _ => {
                    let _ = io
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                }
            }
        }
    });
    (host, hellos)
}

/// A server certificate for `DNS:registry.example` only, signed by the test CA in `dir`.
fn config_for_another_name(dir: &Path) -> rustls::ServerConfig {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    support::pki::make_pki(dir);
    support::pki::make_cert(
        dir,
        "other",
        "subjectAltName=DNS:registry.example\nextendedKeyUsage=serverAuth\n",
    );
    let der = |name: &str| {
        pem::parse(std::fs::read(dir.join(name)).unwrap())
            .unwrap()
            .into_contents()
    };
    rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(der("other.pem"))],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der("other.key"))),
        )
        .unwrap()
}

/// `pull oci://HOST/team/app:v1` that must fail with exit 1, each line once, and the
/// cause (`phrase`) told on one line only (not also in a library's log line).
fn failing_pull(o: &Path, host: &str, extra: &[&str], phrase: &str) -> Out {
    let url = format!("oci://{host}/team/app:v1");
    let mut args = vec!["pull", url.as_str(), "--output-file", arg(o)];
    args.extend_from_slice(extra);
    let out = ocisource(&args);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_no_repeated_lines(&out);
    let telling = out.stderr.lines().filter(|l| l.contains(phrase)).count();
    assert_eq!(telling, 1, "'{phrase}' on {telling} lines: {}", out.stderr);
    out
}

#[tokio::test]
async fn failures_no_retry_can_cure_fail_after_one_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("o.tar.gz");

    // TLS spoken to a plain-HTTP server: rustls reads "InvalidContentType".
    let (host, hellos) = hello_counter(None).await;
    let file = o.clone();
    let out =
        tokio::task::spawn_blocking(move || failing_pull(&file, &host, &[], "InvalidContentType"))
            .await
            .unwrap();
    assert_eq!(hellos.load(Ordering::SeqCst), 1, "{}", out.stderr);

    // A certificate, from a trusted CA, for another name.
    let pki = dir.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    let (host, hellos) = hello_counter(Some(config_for_another_name(&pki))).await;
    let (file, ca) = (o.clone(), pki.join("ca.pem"));
    let out = tokio::task::spawn_blocking(move || {
        failing_pull(&file, &host, &["--ca-file", arg(&ca)], "not valid for name")
    })
    .await
    .unwrap();
    assert!(
        out.stderr.contains("not valid for name") && !out.stderr.contains("--ca-file"),
        "{}",
        out.stderr
    );
    assert_eq!(hellos.load(Ordering::SeqCst), 1, "{}", out.stderr);

    // A name that does not exist (.invalid is reserved, RFC 2606).
    let out = failing_pull(
        &o,
        "registry.nonexistent.invalid",
        &[],
        "after 1 attempt(s)",
    );
    assert!(out.stderr.contains("after 1 attempt(s)"), "{}", out.stderr);

    // A refused connection can heal (the registry restarts): it is retried.
    let out = failing_pull(
        &o,
        "127.0.0.1:1",
        &["--timeout", "2s"],
        "after 4 attempt(s)",
    );
    assert!(out.stderr.contains("after 4 attempt(s)"), "{}", out.stderr);
}
