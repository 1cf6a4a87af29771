//! An in-process HTTP or HTTPS origin for registry faults a real registry will not
//! produce on demand (links and redirects to other origins, hostile tag pages). Each
//! test gives a handler; the origin records what every request carried (method, path and
//! query, `Authorization`), so a test asserts on what each origin received. HTTPS uses
//! the test PKI (`support::pki`) and rustls. Listens on 127.0.0.1 only.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use tokio_rustls::rustls;

/// One request as the origin saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `GET`, `HEAD`, ...
    pub method: Method,
    /// Path and query.
    pub uri: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// Answers one request: method, path and query, headers.
pub type Handler = Arc<dyn Fn(&Method, &Uri, &HeaderMap) -> Response + Send + Sync>;

/// A running origin.
pub struct Origin {
    /// `127.0.0.1:<port>`.
    pub host: String,
    /// `http://` or `https://` plus `host`.
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Origin {
    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests carried an `Authorization` header.
    pub fn authorized_requests(&self) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.authorization.is_some())
            .count()
    }
}

struct Shared {
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn handle(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    s.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        uri: uri.to_string(),
        authorization: headers
            .get("authorization")
            .map(|v| v.to_str().unwrap_or("<binary>").to_string()),
    });
    (s.handler)(&method, &uri, &headers)
}

fn app(handler: Handler) -> (axum::Router, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::new(Shared {
        handler,
        seen: seen.clone(),
    });
    (
        axum::Router::new().fallback(handle).with_state(shared),
        seen,
    )
}

/// Serves `handler` on `listener` in the background.
fn start<L>(listener: L, scheme: &str, handler: Handler) -> Origin
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    let host = listener.local_addr().unwrap().to_string();
    let (app, seen) = app(handler);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Origin {
        base: format!("{scheme}://{host}"),
        host,
        seen,
    }
}

/// Starts a plain-HTTP origin.
pub async fn serve(handler: Handler) -> Origin {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    start(listener, "http", handler)
}

/// A TLS listener for `axum::serve`: accepts TCP, then completes the handshake.
struct TlsListener {
    inner: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((io, addr)) = self.inner.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(io).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

fn der_blocks(path: &Path) -> Vec<Vec<u8>> {
    pem::parse_many(std::fs::read(path).unwrap())
        .unwrap()
        .into_iter()
        .map(|p| p.contents().to_vec())
        .collect()
}

/// A TLS listener on 127.0.0.1 with the certificate `dir/<name>.pem` and key
/// `dir/<name>.key` (PKCS#8, as `openssl req -nodes` writes it).
async fn tls_listener(dir: &Path, name: &str) -> TlsListener {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let certs: Vec<CertificateDer<'static>> = der_blocks(&dir.join(format!("{name}.pem")))
        .into_iter()
        .map(CertificateDer::from)
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        der_blocks(&dir.join(format!("{name}.key"))).remove(0),
    ));
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    TlsListener {
        inner: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    }
}

/// Starts an HTTPS origin with the server certificate in `pki` (made by
/// `support::pki::make_pki`; clients trust `pki/ca.pem`).
pub async fn serve_tls(handler: Handler, pki: &Path) -> Origin {
    start(tls_listener(pki, "server").await, "https", handler)
}

/// Serves `router` over HTTPS with certificate `dir/<name>.pem` (key `<name>.key`), for
/// fakes that need request bodies; returns the address.
pub async fn serve_router_tls(router: axum::Router, dir: &Path, name: &str) -> SocketAddr {
    let listener = tls_listener(dir, name).await;
    let addr = listener.inner.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A response with `status`, `headers` and `body`.
pub fn respond(status: StatusCode, headers: &[(&str, String)], body: Body) -> Response {
    let mut b = Response::builder().status(status);
    for (k, v) in headers {
        b = b.header(*k, v);
    }
    b.body(body).unwrap()
}

/// A JSON tag-list page with an optional `Link` to `next`.
pub fn tag_page(tags: &[&str], next: Option<&str>) -> Response {
    let body = serde_json::json!({"name": "a/b", "tags": tags}).to_string();
    let mut hs = vec![("content-type", "application/json".to_string())];
    if let Some(n) = next {
        hs.push(("link", format!(r#"<{n}>; rel="next""#)));
    }
    respond(StatusCode::OK, &hs, Body::from(body))
}

/// `401` with a `WWW-Authenticate` challenge.
pub fn challenge(value: String) -> Response {
    respond(
        StatusCode::UNAUTHORIZED,
        &[("www-authenticate", value)],
        Body::empty(),
    )
}
