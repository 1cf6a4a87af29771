//! A real distribution registry (`/usr/bin/docker-registry serve`) per test, on
//! 127.0.0.1 and a free port, with our own config (temp storage, deletes enabled, access
//! log captured), optional htpasswd basic auth, TLS with a CA made by `openssl` at test
//! time, and optional client-certificate checking (mTLS); or, for the referrers API, the
//! Go registry `hack/referrers-registry.sh` builds. Fixtures are pushed with a raw
//! reqwest uploader written here and with `skopeo`, never with ocisource's adapter.

use std::io::BufRead;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::pki::{free_port, make_pki, run};
use super::sha256;

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// How to start a [`TestRegistry`].
#[derive(Clone, Debug, Default)]
pub struct RegistryOpts {
    /// htpasswd basic auth with this user and password.
    pub basic_auth: Option<(String, String)>,
    /// Serve HTTPS with a certificate signed by a fresh test CA.
    pub tls: bool,
    /// Require a client certificate signed by the test CA (implies `tls`).
    pub client_ca: bool,
}

impl RegistryOpts {
    /// Plain HTTP, anonymous.
    pub fn plain() -> Self {
        Self::default()
    }
    /// Adds htpasswd basic auth.
    pub fn with_basic_auth(mut self, user: &str, password: &str) -> Self {
        self.basic_auth = Some((user.into(), password.into()));
        self
    }
    /// Serves HTTPS.
    pub fn with_tls(mut self) -> Self {
        self.tls = true;
        self
    }
    /// Serves HTTPS and requires a client certificate.
    pub fn with_mtls(mut self) -> Self {
        self.tls = true;
        self.client_ca = true;
        self
    }
}

/// One request as the registry's access log recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Response status.
    pub status: u16,
}

/// What [`TestRegistry::push_artifact`] pushed.
#[derive(Clone, Debug)]
pub struct Pushed {
    /// Digest of the manifest.
    pub manifest_digest: String,
    /// Manifest bytes as pushed.
    pub manifest: Vec<u8>,
    /// Config blob digest.
    pub config_digest: String,
    /// Layer digests, in order.
    pub layer_digests: Vec<String>,
}

/// A running registry; killed on drop.
pub struct TestRegistry {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    opts: RegistryOpts,
    http: reqwest::Client,
}

impl TestRegistry {
    /// Starts a registry and waits until it accepts connections. Panics, naming
    /// `hack/test.sh`, when `/usr/bin/docker-registry` is not installed.
    pub fn start(opts: RegistryOpts) -> Self {
        assert!(
            Path::new(REGISTRY_BIN).exists(),
            "{REGISTRY_BIN} is missing: run hack/test.sh, which installs the docker-registry package these tests need"
        );
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let port = free_port();
        let mut cfg = format!(
            "version: 0.1\nlog:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:{port}\n  secret: ocisource-test\n",
            d.join("data").display()
        );
        if opts.tls || opts.client_ca {
            make_pki(d);
            cfg.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                d.join("server.pem").display(),
                d.join("server.key").display()
            ));
            if opts.client_ca {
                cfg.push_str(&format!(
                    "    clientcas:\n      - {}\n",
                    d.join("ca.pem").display()
                ));
            }
        }
        if let Some((user, pass)) = &opts.basic_auth {
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, pass])
                .output()
                .unwrap();
            assert!(out.status.success(), "htpasswd failed");
            std::fs::write(d.join("htpasswd"), out.stdout).unwrap();
            cfg.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: ocisource-test\n    path: {}\n",
                d.join("htpasswd").display()
            ));
        }
        std::fs::write(d.join("config.yml"), cfg).unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(d.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(d.join("access.log")).unwrap())
            .stderr(std::fs::File::create(d.join("registry.log")).unwrap())
            .spawn()
            .unwrap();
        let http = Self::raw_client(d, &opts);
        let mut reg = Self {
            child,
            dir,
            port,
            opts,
            http,
        };
        reg.wait_ready();
        reg
    }

    /// Starts the registry that serves the OCI v1.1 referrers API (built by
    /// `hack/referrers-registry.sh`, see [`referrers_registry_bin`]) on 127.0.0.1 and a port
    /// it picks, plain HTTP, anonymous; its log (one line per request) is
    /// [`Self::server_log`]. It keeps no access log: [`Self::request_log`] is for
    /// docker-registry only.
    pub fn start_referrers(bin: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(bin)
            .args(["-addr", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("registry.log")).unwrap())
            .spawn()
            .unwrap();
        // The first line, once the socket is bound: "listening on 127.0.0.1:<port>".
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on 127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{} printed {line:?}, not its address", bin.display()));
        let opts = RegistryOpts::plain();
        let http = Self::raw_client(dir.path(), &opts);
        Self {
            child,
            dir,
            port,
            opts,
            http,
        }
    }

    fn raw_client(d: &Path, opts: &RegistryOpts) -> reqwest::Client {
        let mut b = reqwest::Client::builder().no_proxy();
        if opts.tls || opts.client_ca {
            let ca = std::fs::read(d.join("ca.pem")).unwrap();
            b = b.tls_certs_only(reqwest::Certificate::from_pem_bundle(&ca).unwrap());
        }
        if opts.client_ca {
            let mut pem = std::fs::read(d.join("client.pem")).unwrap();
            pem.extend(std::fs::read(d.join("client.key")).unwrap());
            b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
        }
        b.build().unwrap()
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "docker-registry exited with {status}: {}",
                    self.server_log()
                );
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not listen: {}",
                self.server_log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `127.0.0.1:<port>`, the registry host as a reference would name it.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
    /// `http(s)://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        let scheme = if self.opts.tls || self.opts.client_ca {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.host())
    }
    /// True when serving plain HTTP.
    pub fn is_plain_http(&self) -> bool {
        !(self.opts.tls || self.opts.client_ca)
    }
    /// The test CA certificate (PEM), when serving TLS.
    pub fn ca_pem(&self) -> Option<Vec<u8>> {
        std::fs::read(self.dir.path().join("ca.pem")).ok()
    }
    /// Client certificate and key (PEM) signed by the test CA, when serving TLS.
    pub fn client_cert_and_key(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let d = self.dir.path();
        Some((
            std::fs::read(d.join("client.pem")).ok()?,
            std::fs::read(d.join("client.key")).ok()?,
        ))
    }
    /// The directory holding the registry's files (config, logs, storage, PKI).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
    /// The filesystem driver's root directory (the registry's storage).
    pub fn storage_root(&self) -> PathBuf {
        self.dir.path().join("data")
    }
    /// The registry's own log (stderr), for failure messages.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Every request the registry served so far (method, path, status), parsed from its
    /// access log. The registry logs a request once its response is written.
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        let f = std::fs::File::open(self.dir.path().join("access.log")).unwrap();
        std::io::BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| {
                // 127.0.0.1 - - [date] "GET /v2/ HTTP/1.1" 200 2 "" "ua"
                let (_, rest) = line.split_once('"')?;
                let (req, rest) = rest.split_once('"')?;
                let mut parts = req.split(' ');
                let method = parts.next()?.to_string();
                let path = parts.next()?.to_string();
                let status = rest.split_whitespace().next()?.parse().ok()?;
                Some(LoggedRequest {
                    method,
                    path,
                    status,
                })
            })
            .collect()
    }

    /// The raw reqwest client of the harness (trusts the test CA, presents the client
    /// certificate under mTLS). Independent of ocisource's adapter.
    pub fn raw_http(&self) -> &reqwest::Client {
        &self.http
    }

    fn auth(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.opts.basic_auth {
            Some((u, p)) => rb.basic_auth(u, Some(p)),
            None => rb,
        }
    }

    /// Uploads a blob monolithically (POST then PUT ?digest=) and returns its digest.
    pub async fn push_blob(&self, repo: &str, bytes: &[u8]) -> String {
        let digest = sha256(bytes);
        let url = format!("{}/v2/{repo}/blobs/uploads/", self.base_url());
        let resp = self.auth(self.http.post(&url)).send().await.unwrap();
        assert_eq!(
            resp.status(),
            202,
            "POST {url}: {}",
            resp.text().await.unwrap_or_default()
        );
        let loc = resp.headers()["location"].to_str().unwrap().to_string();
        let loc = if loc.starts_with('/') {
            format!("{}{loc}", self.base_url())
        } else {
            loc
        };
        let sep = if loc.contains('?') { '&' } else { '?' };
        let put = format!("{loc}{sep}digest={digest}");
        let resp = self
            .auth(self.http.put(&put))
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            201,
            "PUT blob: {}",
            resp.text().await.unwrap_or_default()
        );
        digest
    }

    /// PUTs a manifest under `reference` (tag or digest) and returns its digest.
    pub async fn put_manifest(
        &self,
        repo: &str,
        reference: &str,
        media_type: &str,
        body: &[u8],
    ) -> String {
        let url = format!("{}/v2/{repo}/manifests/{reference}", self.base_url());
        let resp = self
            .auth(self.http.put(&url))
            .header("content-type", media_type)
            .body(body.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            201,
            "PUT {url}: {}",
            resp.text().await.unwrap_or_default()
        );
        sha256(body)
    }

    /// Pushes an OCI image manifest with the Flux config media type and the given layers
    /// `(media type, bytes)`, tagged `tag`.
    pub async fn push_artifact(
        &self,
        repo: &str,
        tag: &str,
        layers: &[(&str, Vec<u8>)],
        annotations: &[(&str, &str)],
    ) -> Pushed {
        let config = b"{}".to_vec();
        let config_digest = self.push_blob(repo, &config).await;
        let mut layer_descs = Vec::new();
        let mut layer_digests = Vec::new();
        for (media, bytes) in layers {
            let d = self.push_blob(repo, bytes).await;
            layer_descs
                .push(serde_json::json!({"mediaType": media, "digest": d, "size": bytes.len()}));
            layer_digests.push(d);
        }
        let mut manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.cncf.flux.config.v1+json", "digest": config_digest, "size": config.len()},
            "layers": layer_descs,
        });
        if !annotations.is_empty() {
            let map: serde_json::Map<String, serde_json::Value> = annotations
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).into()))
                .collect();
            manifest["annotations"] = map.into();
        }
        let body = serde_json::to_vec(&manifest).unwrap();
        let manifest_digest = self
            .put_manifest(
                repo,
                tag,
                "application/vnd.oci.image.manifest.v1+json",
                &body,
            )
            .await;
        Pushed {
            manifest_digest,
            manifest: body,
            config_digest,
            layer_digests,
        }
    }

    /// `skopeo copy oci:<layout>:<tag> docker://<host>/<repo>:<dest_tag>`, with the TLS
    /// and credential flags this registry needs.
    pub fn skopeo_copy(&self, layout: &Path, tag: &str, repo: &str, dest_tag: &str) {
        let mut cmd = Command::new("skopeo");
        cmd.args(["--insecure-policy", "copy", "--quiet"]);
        if self.is_plain_http() {
            cmd.arg("--dest-tls-verify=false");
        } else {
            let certs = self.skopeo_cert_dir();
            cmd.arg("--dest-cert-dir").arg(certs);
        }
        if let Some((u, p)) = &self.opts.basic_auth {
            cmd.arg("--dest-creds").arg(format!("{u}:{p}"));
        }
        cmd.arg(format!("oci:{}:{tag}", layout.display()));
        cmd.arg(format!("docker://{}/{repo}:{dest_tag}", self.host()));
        run(&mut cmd);
    }

    /// A directory in the containers-certs.d layout: `ca.crt`, plus `client.cert` and
    /// `client.key` when the registry requires client certificates.
    pub fn skopeo_cert_dir(&self) -> PathBuf {
        let d = self.dir.path();
        let certs = d.join("certs.d");
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::copy(d.join("ca.pem"), certs.join("ca.crt")).unwrap();
        if self.opts.client_ca {
            std::fs::copy(d.join("client.pem"), certs.join("client.cert")).unwrap();
            std::fs::copy(d.join("client.key"), certs.join("client.key")).unwrap();
        }
        certs
    }
}

/// The referrers registry binary: `$OCISOURCE_REFERRERS_REGISTRY`, else where
/// `hack/referrers-registry.sh path` says. `None` (the caller skips, with a message) when
/// it is not built, unless `OCISOURCE_REQUIRE_CLUSTER=1` (set by `hack/test.sh`, which
/// builds it), in which case a missing binary fails the test.
pub fn referrers_registry_bin() -> Option<PathBuf> {
    let bin = std::env::var_os("OCISOURCE_REFERRERS_REGISTRY").map_or_else(
        || {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/referrers-registry.sh");
            let out = Command::new(script).arg("path").output().unwrap();
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        },
        PathBuf::from,
    );
    if bin.is_file() {
        return Some(bin);
    }
    assert!(
        std::env::var("OCISOURCE_REQUIRE_CLUSTER").as_deref() != Ok("1"),
        "OCISOURCE_REQUIRE_CLUSTER=1 but the referrers registry {} is not built: run `hack/referrers-registry.sh build`",
        bin.display()
    );
    eprintln!(
        "skipped: the referrers registry {} is not built (run `hack/referrers-registry.sh build`, or hack/test.sh)",
        bin.display()
    );
    None
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
