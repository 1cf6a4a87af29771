//! Objects that follow the same artifact share one build (`reconcile::shared`): through
//! the one-shot mode against the real registry, the second object of a manifest, repository
//! and recipe gets the first one's file under its own path (one file, two names) and
//! costs no blob request; another recipe or repository builds its own; and a tenant whose
//! registry answers arrive through a proxy of its choosing (which may answer anything in
//! the registry's name) never obtains another tenant's build: it must pull, and fails.
//! Nor does a tenant whose login the registry lets read manifests but not blobs (as ECR's
//! IAM actions can be granted apart): a registry that authorises by repository, as the
//! real one here does, cannot be made to answer so, so an in-process one does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fake_registry;
mod support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use fake_registry::{respond, serve};
use support::oneshot_parity::{object, reconcile, write, Run};
use support::{tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn basic(user_password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(user_password)
}

/// A docker-config Secret `name` logging in to `host` as `user_password` ("user:password").
fn login_secret_as(name: &str, host: &str, user_password: &str) -> String {
    let auth = basic(user_password);
    let json = format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: team\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{json}'\n"
    )
}

fn login_secret(host: &str) -> String {
    login_secret_as("login", host, "alice:s3cret")
}

/// Every object's status from a one-shot run, by name.
fn statuses(run: &Run) -> std::collections::HashMap<String, serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", run.stdout, run.stderr));
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["status"].clone(),
            )
        })
        .collect()
}

fn ready(status: &serde_json::Value) -> (String, String) {
    let c = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .unwrap_or_else(|| panic!("no Ready in {status}"));
    (
        c["status"].as_str().unwrap().to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// The paths of the blob `GET`s the registry answered with `status` since request `before`
/// (200: a download; 206: a one-byte proof of pull access).
fn blob_gets(reg: &TestRegistry, before: usize, status: u16) -> Vec<String> {
    reg.request_log()[before..]
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/blobs/") && r.status == status)
        .map(|r| r.path.clone())
        .collect()
}

fn inode(storage: &Path, status: &serde_json::Value) -> u64 {
    let path = status["artifact"]["path"].as_str().unwrap();
    std::fs::metadata(storage.join(path)).unwrap().ino()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_one_manifest_share_a_build_only_with_proven_pull_access() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("alice", "s3cret"));
    let layer = tar_gz(&[
        ("app/deploy.yaml", b"replicas: 1\n"),
        ("README.md", b"hi\n"),
    ]);
    let app = reg
        .push_artifact("team/app", "v1", &[(LAYER, layer.clone())], &[])
        .await;
    let other = reg
        .push_artifact("team/other", "v1", &[(LAYER, layer)], &[])
        .await;
    assert_eq!(app.manifest_digest, other.manifest_digest);

    // What a proxy of the tenant's choosing can do: answer the manifest requests in the
    // registry's name (the manifest's bytes are no secret), while it has no blob to give.
    let manifest = app.manifest.clone();
    let digest = app.manifest_digest.clone();
    let proxy = serve(Arc::new(move |method, uri, _headers| {
        if uri.path().contains("/manifests/") {
            let headers = [
                (
                    "content-type",
                    "application/vnd.oci.image.manifest.v1+json".to_string(),
                ),
                ("docker-content-digest", digest.clone()),
            ];
            let body = if method == Method::HEAD {
                Body::empty()
            } else {
                Body::from(manifest.clone())
            };
            return respond(StatusCode::OK, &headers, body);
        }
        respond(StatusCode::NOT_FOUND, &[], Body::empty())
    }))
    .await;

    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    let url = |repo: &str| format!("oci://{}/{repo}", reg.host());
    let login = "  insecure: true\n  secretRef:\n    name: login\n";
    let docs = [
        object("first", &url("team/app"), "    tag: v1", login),
        object("second", &url("team/app"), "    tag: v1", login),
        object(
            "ignoring",
            &url("team/app"),
            "    tag: v1",
            &format!("{login}  ignore: \"*.md\"\n"),
        ),
        object("other-repo", &url("team/other"), "    tag: v1", login),
        object(
            "proxied",
            &url("team/app"),
            "    tag: v1",
            "  insecure: true\n  proxySecretRef:\n    name: proxy\n",
        ),
        login_secret(&reg.host()),
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: proxy\n  namespace: team\nstringData:\n  address: http://{}\n",
            proxy.host
        ),
    ];
    let file = write(dir.path(), "objects.yaml", &docs.join("---\n"));
    let before = reg.request_log().len();
    let run = reconcile(&[&file], &storage, &[]);
    let st = statuses(&run);
    let blob_gets = |status| blob_gets(&reg, before, status);

    for name in ["first", "second", "ignoring", "other-repo"] {
        assert_eq!(ready(&st[name]).0, "True", "{name}: {}", run.stderr);
    }
    // One download per repository and recipe: first, ignoring, other-repo. Not second,
    // whose proof of pull access is one ranged request for the layer's first byte.
    assert_eq!(blob_gets(200).len(), 3, "{:?}", blob_gets(200));
    assert_eq!(blob_gets(206).len(), 1, "{:?}", blob_gets(206));
    assert_eq!(
        inode(&storage, &st["first"]),
        inode(&storage, &st["second"])
    );
    assert_ne!(
        st["first"]["artifact"]["path"],
        st["second"]["artifact"]["path"]
    );
    assert_eq!(
        st["first"]["artifact"]["digest"],
        st["second"]["artifact"]["digest"]
    );
    assert_eq!(
        st["first"]["artifact"]["revision"],
        st["second"]["artifact"]["revision"]
    );
    for name in ["ignoring", "other-repo"] {
        assert_ne!(
            inode(&storage, &st["first"]),
            inode(&storage, &st[name]),
            "{name}"
        );
    }
    assert_ne!(
        st["first"]["artifact"]["digest"], st["ignoring"]["artifact"]["digest"],
        "spec.ignore must change the artifact"
    );

    // The proxied tenant's session was answered, but not by a party ocisource can trust
    // to be the registry: it pulls its own layers, and the proxy has none to give.
    let (status, message) = ready(&st["proxied"]);
    assert_eq!(status, "False", "{}", st["proxied"]);
    assert!(message.contains("blob"), "{message}");
    assert!(st["proxied"]["artifact"].is_null(), "{}", st["proxied"]);
    assert!(
        proxy.seen().iter().any(|s| s.uri.contains("/blobs/")),
        "the proxied object asked its proxy for the layer"
    );

    // The first object's folder removed (a deleted object): the second one's artifact is
    // whole, since it is the same file under its own name.
    let first = storage.join(st["first"]["artifact"]["path"].as_str().unwrap());
    std::fs::remove_dir_all(first.parent().unwrap()).unwrap();
    let second = storage.join(st["second"]["artifact"]["path"].as_str().unwrap());
    assert_eq!(
        support::sha256(&std::fs::read(second).unwrap()),
        st["second"]["artifact"]["digest"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_that_may_read_manifests_but_not_blobs_gets_no_shared_build() {
    let layer = tar_gz(&[("app/deploy.yaml", b"replicas: 1\n")]);
    let config = b"{}".to_vec();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.cncf.flux.config.v1+json",
                   "digest": support::sha256(&config), "size": config.len()},
        "layers": [{"mediaType": LAYER, "digest": support::sha256(&layer), "size": layer.len()}],
    }))
    .unwrap();
    let digest = support::sha256(&manifest);
    let (alice, mallory) = (
        format!("Basic {}", basic("alice:s3cret")),
        format!("Basic {}", basic("mallory:pw")),
    );
    let blobs = [
        (support::sha256(&layer), layer),
        (support::sha256(&config), config),
    ];
    // Alice may read everything; mallory the manifests only; anyone else nothing.
    let registry = serve(Arc::new(move |method, uri, headers| {
        let who = headers.get("authorization").and_then(|v| v.to_str().ok());
        let who = who.filter(|w| *w == alice || *w == mallory);
        let Some(who) = who else {
            return fake_registry::challenge(r#"Basic realm="fake""#.to_string());
        };
        let path = uri.path();
        if path.starts_with("/v2/team/app/manifests/") {
            let headers = [
                (
                    "content-type",
                    "application/vnd.oci.image.manifest.v1+json".to_string(),
                ),
                ("docker-content-digest", digest.clone()),
                ("content-length", manifest.len().to_string()),
            ];
            let body = if method == Method::HEAD {
                Body::empty()
            } else {
                Body::from(manifest.clone())
            };
            return respond(StatusCode::OK, &headers, body);
        }
        let blob = path
            .strip_prefix("/v2/team/app/blobs/")
            .and_then(|d| blobs.iter().find(|(digest, _)| digest == d));
        match blob {
            Some(_) if who == mallory => respond(StatusCode::FORBIDDEN, &[], Body::empty()),
            Some((_, bytes)) if headers.contains_key("range") => respond(
                StatusCode::PARTIAL_CONTENT,
                &[("content-range", format!("bytes 0-0/{}", bytes.len()))],
                Body::from(bytes[..1].to_vec()),
            ),
            Some((_, bytes)) => respond(StatusCode::OK, &[], Body::from(bytes.clone())),
            None => respond(StatusCode::NOT_FOUND, &[], Body::empty()),
        }
    }))
    .await;

    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    let url = format!("oci://{}/team/app", registry.host);
    let login = |secret: &str| format!("  insecure: true\n  secretRef:\n    name: {secret}\n");
    let docs = [
        object("first", &url, "    tag: v1", &login("alice")),
        object("second", &url, "    tag: v1", &login("alice")),
        object("manifests-only", &url, "    tag: v1", &login("mallory")),
        login_secret_as("alice", &registry.host, "alice:s3cret"),
        login_secret_as("mallory", &registry.host, "mallory:pw"),
    ];
    let file = write(dir.path(), "objects.yaml", &docs.join("---\n"));
    let run = reconcile(&[&file], &storage, &[]);
    let st = statuses(&run);

    for name in ["first", "second"] {
        assert_eq!(ready(&st[name]).0, "True", "{name}: {}", run.stderr);
    }
    assert_eq!(
        inode(&storage, &st["first"]),
        inode(&storage, &st["second"]),
        "alice's second object shares the first one's build"
    );
    // Mallory's session was answered for the manifest, but the registry refuses it the
    // layer: it must not obtain alice's build, and fails as its own pull does.
    let (status, message) = ready(&st["manifests-only"]);
    assert_eq!(status, "False", "{}", st["manifests-only"]);
    assert!(message.contains("blob"), "{message}");
    assert!(message.contains("403"), "{message}");
    assert!(
        st["manifests-only"]["artifact"].is_null(),
        "{}",
        st["manifests-only"]
    );
    let seen = registry.seen();
    let blob_requests = |user: &str| {
        seen.iter()
            .filter(|r| {
                r.uri.contains("/blobs/sha256:") && r.authorization.as_deref() == Some(user)
            })
            .count()
    };
    // The second object's proof is one ranged request; the first object downloads.
    assert!(blob_requests(&format!("Basic {}", basic("alice:s3cret"))) >= 2);
    assert!(blob_requests(&format!("Basic {}", basic("mallory:pw"))) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_objects_share_without_a_proof_request_and_a_login_proves_its_own() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let layer = tar_gz(&[("app/deploy.yaml", b"replicas: 1\n")]);
    for repo in ["team/app", "team/other"] {
        reg.push_artifact(repo, "v1", &[(LAYER, layer.clone())], &[])
            .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    let url = |repo: &str| format!("oci://{}/{repo}", reg.host());
    let anonymous = "  insecure: true\n";
    let login = "  insecure: true\n  secretRef:\n    name: login\n";
    // team/app is downloaded anonymously: the second anonymous object is the registry's
    // same anonymous client, with nothing to prove; the login is another client and
    // proves it may read the layer. team/other is downloaded with the login: an
    // anonymous object proves its own.
    let mut docs: Vec<String> = [
        ("first", "team/app", anonymous),
        ("second", "team/app", anonymous),
        ("with-login", "team/app", login),
        ("other-login", "team/other", login),
        ("other-anonymous", "team/other", anonymous),
    ]
    .iter()
    .map(|(name, repo, auth)| object(name, &url(repo), "    tag: v1", auth))
    .collect();
    docs.push(login_secret(&reg.host()));
    let file = write(dir.path(), "objects.yaml", &docs.join("---\n"));
    let before = reg.request_log().len();
    let run = reconcile(&[&file], &storage, &[]);
    let st = statuses(&run);
    for (name, builder) in [
        ("second", "first"),
        ("with-login", "first"),
        ("other-anonymous", "other-login"),
    ] {
        assert_eq!(ready(&st[name]).0, "True", "{name}: {}", run.stderr);
        assert_eq!(
            inode(&storage, &st[builder]),
            inode(&storage, &st[name]),
            "{name}"
        );
    }
    let blob_gets = |status| blob_gets(&reg, before, status);
    let (downloads, proofs) = (blob_gets(200), blob_gets(206));
    assert_eq!(downloads.len(), 2, "{downloads:?}");
    assert_eq!(
        proofs.iter().filter(|p| p.contains("/team/app/")).count(),
        1,
        "{proofs:?}"
    );
    assert_eq!(
        proofs.iter().filter(|p| p.contains("/team/other/")).count(),
        1,
        "{proofs:?}"
    );
}
