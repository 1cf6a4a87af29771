//! A fake of the Google endpoints object-level GCP identity calls, under their real names:
//! Google STS (`https://sts.googleapis.com/v1/token`) and the IAM credentials API
//! (`https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/<email>:generateAccessToken`)
//! over TLS, with a certificate for both names signed by a CA made with `openssl` for
//! this fake only (the client is told to trust it with `SSL_CERT_FILE`, as a user trusts
//! a private CA); and the GKE metadata server over plain HTTP (`GCE_METADATA_HOST`)
//! answering the cluster's project, location and name. The TLS names reach the fake
//! through a resolver override (in process) or a CONNECT proxy (the controller binary),
//! never the hosts file. Everything received is recorded; STS answers `sts-token-<n>`,
//! the IAM credentials API `impersonated-token` (what the registry accepts).

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::Path as UrlPath;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::json;

use crate::cloud_common::{form, json_response, serve};
use crate::support::pki::{make_ca, make_cert};

/// Google STS's host.
pub const STS_HOST: &str = "sts.googleapis.com";
/// The IAM credentials API's host.
pub const IAM_HOST: &str = "iamcredentials.googleapis.com";
/// The GKE cluster the metadata server describes.
pub const PROJECT: &str = "ocisource-test";
/// Its location.
pub const LOCATION: &str = "europe-west1";
/// Its name.
pub const CLUSTER: &str = "fleet";
/// The access token the IAM credentials API hands out.
pub const IMPERSONATED_TOKEN: &str = "impersonated-token";

/// The TokenRequest audience on GKE: the workload identity pool.
pub fn gke_pool() -> String {
    format!("{PROJECT}.svc.id.goog")
}

/// The STS audience on GKE, as Flux builds it from the metadata server.
pub fn gke_sts_audience() -> String {
    format!(
        "identitynamespace:{}:https://container.googleapis.com/v1/projects/{PROJECT}/locations/{LOCATION}/clusters/{CLUSTER}",
        gke_pool()
    )
}

/// What the fake received.
#[derive(Default)]
pub struct Received {
    /// Each STS form.
    pub sts: Mutex<Vec<HashMap<String, String>>>,
    /// Each impersonation: (`<email>:generateAccessToken`, `Authorization`).
    pub impersonation: Mutex<Vec<(String, String)>>,
    /// Each metadata path asked for.
    pub metadata: Mutex<Vec<String>>,
}

/// The running fake.
pub struct GoogleFake {
    /// The TLS listener serving both Google API hosts.
    pub tls: SocketAddr,
    /// The metadata server (`GCE_METADATA_HOST`).
    pub metadata: SocketAddr,
    /// The PEM file of the CA that signed the TLS certificate.
    pub ca: PathBuf,
    /// What was received.
    pub received: Arc<Received>,
    _dir: tempfile::TempDir,
}

impl GoogleFake {
    /// Starts the fake.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        make_certificate(dir.path());
        let received = Arc::new(Received::default());
        let tls =
            crate::fake_registry::serve_router_tls(api(received.clone()), dir.path(), "google")
                .await;
        let metadata = serve(metadata(received.clone())).await;
        Self {
            tls,
            metadata,
            ca: dir.path().join("ca.pem"),
            received,
            _dir: dir,
        }
    }

    /// Resolver overrides sending both Google API hosts to the fake.
    pub fn resolve(&self) -> Vec<(String, SocketAddr)> {
        [STS_HOST, IAM_HOST]
            .iter()
            .map(|h| ((*h).to_string(), self.tls))
            .collect()
    }

    /// The STS forms so far.
    pub fn sts(&self) -> Vec<HashMap<String, String>> {
        self.received.sts.lock().unwrap().clone()
    }

    /// The impersonations so far.
    pub fn impersonations(&self) -> Vec<(String, String)> {
        self.received.impersonation.lock().unwrap().clone()
    }
}

/// `ca.pem` and `google.pem`/`google.key` for both Google API hosts in `dir`.
fn make_certificate(dir: &std::path::Path) {
    make_ca(dir, "ocisource fake Google CA");
    let ext = format!(
        "subjectAltName=DNS:{STS_HOST},DNS:{IAM_HOST}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    );
    make_cert(dir, "google", &ext);
}

/// STS and the IAM credentials API (one listener: the paths differ).
fn api(received: Arc<Received>) -> axum::Router {
    let sts = received.clone();
    axum::Router::new()
        .route(
            "/v1/token",
            post(move |body: String| {
                let mut seen = sts.sts.lock().unwrap();
                seen.push(form(&body));
                let n = seen.len();
                async move {
                    json_response(
                        json!({"access_token": format!("sts-token-{n}"), "expires_in": 3600,
                        "token_type": "Bearer",
                        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
                    )
                }
            }),
        )
        .route(
            "/v1/projects/-/serviceAccounts/{target}",
            post(
                move |UrlPath(target): UrlPath<String>, headers: HeaderMap| {
                    let auth = headers
                        .get("authorization")
                        .map(|v| v.to_str().unwrap().to_string())
                        .unwrap_or_default();
                    received.impersonation.lock().unwrap().push((target, auth));
                    async move {
                        json_response(json!({"accessToken": IMPERSONATED_TOKEN,
                        "expireTime": "2099-01-01T00:00:00Z"}))
                    }
                },
            ),
        )
}

/// The GKE metadata server's cluster attributes.
fn metadata(received: Arc<Received>) -> axum::Router {
    axum::Router::new().route(
        "/computeMetadata/v1/{*path}",
        get(move |UrlPath(path): UrlPath<String>, headers: HeaderMap| {
            received.metadata.lock().unwrap().push(path.clone());
            async move {
                if headers.get("metadata-flavor").map(|v| v.as_bytes()) != Some(b"Google") {
                    return (StatusCode::FORBIDDEN, "missing Metadata-Flavor").into_response();
                }
                match path.as_str() {
                    "project/project-id" => PROJECT.into_response(),
                    "instance/attributes/cluster-location" => LOCATION.into_response(),
                    "instance/attributes/cluster-name" => CLUSTER.into_response(),
                    _ => StatusCode::NOT_FOUND.into_response(),
                }
            }
        }),
    )
}
