//! Classification of real transport failures: each test makes the failure happen against
//! a local listener (a TLS server with a self-signed certificate the client does not
//! trust, or trusts but for another name; a plain-HTTP server; a closed port; a silent server; a name that
//! does not exist) through the session's real HTTP client, and checks the cause.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_rustls::rustls as server_tls;

use super::{Cause, TransportFailure};
use crate::ports::{RegistryErrorKind, RegistryOptions};
use crate::registry::dns::NameNotResolved;
use crate::registry::transport::build_http;

/// A self-signed certificate (`cert.pem`, not a CA) for `DNS:registry.example` only, and
/// a TLS server configuration presenting it.
fn server_config(dir: &Path) -> server_tls::ServerConfig {
    use server_tls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let out = Command::new("openssl")
        .current_dir(dir)
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=registry.example",
            "-addext",
            "subjectAltName=DNS:registry.example",
        ])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let der = |name: &str| {
        pem::parse(std::fs::read(dir.join(name)).unwrap())
            .unwrap()
            .into_contents()
    };
    server_tls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(der("cert.pem"))],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der("key.pem"))),
        )
        .unwrap()
}

/// A listener on 127.0.0.1 that hands each connection to `serve`; its address.
async fn listen<F, Fut>(serve: F) -> String
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((io, _)) = listener.accept().await {
            tokio::spawn(serve(io));
        }
    });
    host
}

async fn failure_of(url: &str, options: &RegistryOptions) -> TransportFailure {
    let client = build_http(options).unwrap();
    let e = client
        .get(url)
        .send()
        .await
        .expect_err("the request must fail");
    TransportFailure::of(e)
}

#[tokio::test]
async fn certificates_refused_by_the_client_are_tls_failures() {
    let dir = tempfile::tempdir().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config(dir.path())));
    let host = listen(move |io| {
        let acceptor = acceptor.clone();
        async move {
            let _ = acceptor.accept(io).await;
        }
    })
    .await;
    let url = format!("https://{host}/v2/");

    let unknown_ca = failure_of(&url, &RegistryOptions::default()).await;
    assert_eq!(unknown_ca.cause, Cause::Tls, "{}", unknown_ca.message);
    assert_eq!(unknown_ca.cause.kind(), RegistryErrorKind::Tls);
    assert!(!unknown_ca.cause.retryable());

    let trusted = RegistryOptions {
        ca_pem: Some(std::fs::read(dir.path().join("cert.pem")).unwrap()),
        ..Default::default()
    };
    let other_name = failure_of(&url, &trusted).await;
    assert_eq!(
        other_name.cause,
        Cause::CertificateName,
        "{}",
        other_name.message
    );
    assert_eq!(other_name.cause.kind(), RegistryErrorKind::Tls);
}

#[tokio::test]
async fn a_plain_http_answer_to_https_is_not_tls() {
    let host = listen(|mut io| async move {
        let _ = io
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            .await;
    })
    .await;
    let f = failure_of(&format!("https://{host}/v2/"), &RegistryOptions::default()).await;
    assert_eq!(f.cause, Cause::NotTls, "{}", f.message);
    assert_eq!(f.cause.kind(), RegistryErrorKind::Tls);
    assert!(!f.cause.retryable());
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_connect_failure() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = closed.local_addr().unwrap().to_string();
    drop(closed);
    let f = failure_of(&format!("https://{host}/v2/"), &RegistryOptions::default()).await;
    assert_eq!(f.cause, Cause::Refused, "{}", f.message);
    assert_eq!(f.cause.kind(), RegistryErrorKind::Connect);
    assert!(f.cause.retryable());
}

#[tokio::test]
async fn a_silent_server_is_a_retryable_timeout() {
    let host = listen(|io| async move {
        // Holds the connection open and never answers.
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(io);
    })
    .await;
    let quick = RegistryOptions {
        timeout: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    let f = failure_of(&format!("https://{host}/v2/"), &quick).await;
    assert_eq!(f.cause, Cause::Timeout, "{}", f.message);
    assert_eq!(f.cause.kind(), RegistryErrorKind::Timeout);
    assert!(f.cause.retryable());
}

#[tokio::test]
async fn a_failed_name_lookup_is_typed_by_the_resolver() {
    let client = build_http(&RegistryOptions::default()).unwrap();
    let e = client
        .get("https://no-such-host.invalid/v2/")
        .send()
        .await
        .expect_err("the name does not exist");
    let mut found = None;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(link) = cur {
        found = found.or_else(|| {
            link.downcast_ref::<NameNotResolved>()
                .map(|n| n.host.clone())
        });
        cur = link.source();
    }
    assert_eq!(found.as_deref(), Some("no-such-host.invalid"), "{e:?}");
    let cause = Cause::of(&e);
    assert!(
        matches!(cause, Cause::NoSuchHost | Cause::Connect),
        "{cause:?}"
    );
    assert_eq!(cause.kind(), RegistryErrorKind::Connect);
}

#[test]
fn a_failed_fallback_keeps_the_first_cause_and_says_what_the_fallback_did() {
    let f = TransportFailure::new(Cause::Tls, "invalid peer certificate: UnknownIssuer".into())
        .with_failed_fallback("the registry answered 400 Bad Request");
    assert_eq!(f.cause, Cause::Tls);
    assert!(f.fallback_failed);
    assert_eq!(
        f.message,
        "invalid peer certificate: UnknownIssuer (plain HTTP fallback failed too: the registry answered 400 Bad Request)"
    );
}
