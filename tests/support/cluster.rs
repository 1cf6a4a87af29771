//! The real control plane for end-to-end tests: kube-apiserver, etcd, the garbage
//! collector and Flux's kustomize-, helm- and notification-controllers, all built from
//! pinned upstream modules and started on 127.0.0.1 by `hack/cluster.sh` (which
//! `hack/test.sh` runs before these tests and whose `env` output they read).
//!
//! Every test gets its own namespace, the chart's RBAC rendered into it with the Helm SDK,
//! and its own `ocisource controller` process that runs as the chart's ServiceAccount with
//! a token from the TokenRequest API: never as cluster admin, so a rule missing from the
//! chart fails the test. Setup goes through the `kubectl` built with the API server, as a
//! user would; assertions read objects back as JSON.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

mod controller;
pub use controller::Controller;

/// Where the repository is (for the chart, the CRDs and the render script).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The running test cluster, as `hack/cluster.sh env` describes it.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// Admin kubeconfig (client certificate in system:masters): for test setup only.
    pub admin_kubeconfig: PathBuf,
    /// kubectl built from the same Kubernetes release as the API server.
    pub kubectl: PathBuf,
    /// The API server's URL.
    pub server: String,
    /// The cluster's CA certificate (PEM file).
    pub ca_file: PathBuf,
    /// hack/cluster.sh's state directory.
    pub dir: PathBuf,
    /// The flux CLI built from its module.
    pub flux: PathBuf,
}

impl Cluster {
    /// The cluster from the environment `hack/cluster.sh env` prints. Returns `None` (the
    /// caller skips with a message) when it is not set, unless `OCISOURCE_REQUIRE_CLUSTER=1`
    /// (set by `hack/test.sh`), in which case a missing cluster fails the test.
    pub fn from_env() -> Option<Self> {
        let Ok(dir) = std::env::var("OCISOURCE_TEST_CLUSTER") else {
            assert!(
                std::env::var("OCISOURCE_REQUIRE_CLUSTER").as_deref() != Ok("1"),
                "OCISOURCE_REQUIRE_CLUSTER=1 but no cluster: run `eval \"$(hack/cluster.sh env)\"` after `hack/cluster.sh up`"
            );
            eprintln!(
                "skipped: no test cluster (run `hack/cluster.sh up && eval \"$(hack/cluster.sh env)\"`, or hack/test.sh)"
            );
            return None;
        };
        let dir = PathBuf::from(dir);
        let cluster = Self {
            admin_kubeconfig: dir.join("admin.kubeconfig"),
            kubectl: std::env::var("OCISOURCE_TEST_KUBECTL").unwrap().into(),
            server: std::env::var("OCISOURCE_TEST_APISERVER").unwrap(),
            ca_file: dir.join("pki/ca.crt"),
            flux: std::env::var("OCISOURCE_TEST_FLUX")
                .unwrap_or_default()
                .into(),
            dir,
        };
        cluster.ensure_crds();
        Some(cluster)
    }

    /// Our CRD (from `crds/`) and Flux's ExternalArtifact CRD (applied by hack/cluster.sh
    /// from source-controller's module), server-side applied: idempotent across tests.
    fn ensure_crds(&self) {
        self.kubectl_ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            repo_root().join("crds").to_str().unwrap(),
        ]);
        self.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/ocirepositories.ocisource.dev",
        ]);
    }

    /// Runs kubectl as admin; returns the output whatever the exit status.
    pub fn kubectl(&self, args: &[&str]) -> std::process::Output {
        Command::new(&self.kubectl)
            .arg(format!("--kubeconfig={}", self.admin_kubeconfig.display()))
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs kubectl as admin and fails the test with its stderr when it fails.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kubectl apply -f -` of a YAML stream, as admin.
    pub fn apply(&self, yaml: &str) {
        self.apply_as(&self.admin_kubeconfig, yaml).unwrap();
    }

    /// `kubectl apply -f -` with another kubeconfig; `Err(stderr)` when it is refused.
    pub fn apply_as(&self, kubeconfig: &Path, yaml: &str) -> Result<String, String> {
        self.kubectl_stdin(kubeconfig, &["apply", "-f", "-"], yaml)
    }

    /// `kubectl ARGS` as admin with `input` on stdin; `Err(stderr)` when it fails.
    pub fn kubectl_input(&self, args: &[&str], input: &str) -> Result<String, String> {
        self.kubectl_stdin(&self.admin_kubeconfig, args, input)
    }

    fn kubectl_stdin(
        &self,
        kubeconfig: &Path,
        args: &[&str],
        input: &str,
    ) -> Result<String, String> {
        use std::io::Write;
        let mut child = Command::new(&self.kubectl)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// The object as JSON, or `None` when it does not exist.
    pub fn get(&self, resource: &str, ns: &str, name: &str) -> Option<Value> {
        let out = self.kubectl(&["get", resource, "-n", ns, name, "-o", "json"]);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("NotFound"),
                "kubectl get {resource} {ns}/{name}: {err}"
            );
            return None;
        }
        Some(serde_json::from_slice(&out.stdout).unwrap())
    }

    /// Asks for a reconcile now, as `flux reconcile` does: sets the
    /// `reconcile.fluxcd.io/requestedAt` annotation of `resource ns/name` to `token`.
    pub fn request_reconcile(&self, resource: &str, ns: &str, name: &str, token: &str) {
        self.kubectl_ok(&[
            "annotate",
            "--overwrite",
            "-n",
            ns,
            &format!("{resource}/{name}"),
            &format!("reconcile.fluxcd.io/requestedAt={token}"),
        ]);
    }

    /// The Events (events.k8s.io) in namespace `ns`.
    pub fn events(&self, ns: &str) -> Vec<Value> {
        let args = ["get", "events.events.k8s.io", "-n", ns, "-o", "json"];
        let list: Value = serde_json::from_str(&self.kubectl_ok(&args)).unwrap();
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// Polls `resource ns/name` until `cond` holds (up to `timeout`); returns the object.
    /// On timeout, fails with the last object seen and `what`.
    pub fn wait_for(
        &self,
        resource: &str,
        ns: &str,
        name: &str,
        timeout: Duration,
        what: &str,
        cond: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let obj = self.get(resource, ns, name);
            if let Some(o) = &obj {
                if cond(o) {
                    return o.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "{resource} {ns}/{name} never reached: {what}; last seen:\n{}",
                serde_json::to_string_pretty(&obj).unwrap()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Polls until `resource ns/name` is gone.
    pub fn wait_gone(&self, resource: &str, ns: &str, name: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.get(resource, ns, name).is_some() {
            assert!(
                Instant::now() < deadline,
                "{resource} {ns}/{name} was never deleted"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// A fresh namespace named after the test, with the chart's RBAC and ServiceAccount
    /// rendered into it by the Helm SDK (`values` as JSON), applied as admin.
    pub fn namespace(&self, test: &str, values: &Value) -> TestNamespace {
        static N: AtomicU32 = AtomicU32::new(0);
        let ns = format!(
            "{}-{}-{}",
            test.replace('_', "-"),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.kubectl_ok(&["create", "namespace", &ns]);
        let rbac = render_chart(
            &ns,
            values,
            &[
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "ClusterRole",
                "ClusterRoleBinding",
            ],
        );
        self.apply(&rbac);
        TestNamespace {
            cluster: self.clone(),
            name: ns,
        }
    }

    /// A kubeconfig for `ns/sa` holding a token from the TokenRequest API (what a pod's
    /// projected service-account token is), written under `dir`.
    pub fn service_account_kubeconfig(&self, ns: &str, sa: &str, dir: &Path) -> PathBuf {
        let token = self.kubectl_ok(&["create", "token", sa, "-n", ns, "--duration=2h"]);
        let path = dir.join(format!("{ns}-{sa}.kubeconfig"));
        let cfg = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: {sa}\n  user:\n    token: {}\ncontexts:\n- name: test\n  context: {{cluster: test, user: {sa}, namespace: {ns}}}\n\
             current-context: test\n",
            self.server,
            self.ca_file.display(),
            token.trim()
        );
        std::fs::write(&path, cfg).unwrap();
        path
    }
}

/// Renders the chart into `ns` with `values` and keeps only `kinds` (empty: all).
pub fn render_chart(ns: &str, values: &Value, kinds: &[&str]) -> String {
    let root = repo_root();
    let python = root.join(".venv/bin/python");
    let out = Command::new(if python.exists() {
        python
    } else {
        "python3".into()
    })
    .arg(root.join("hack/chart/render.py"))
    .arg(root.join("charts/ocisource"))
    .arg(ns)
    .arg(values.to_string())
    .args(kinds)
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "rendering the chart: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A namespace of one test; deleted (with everything in it) on drop.
pub struct TestNamespace {
    cluster: Cluster,
    /// Its name.
    pub name: String,
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let _ = self
            .cluster
            .kubectl(&["delete", "namespace", &self.name, "--wait=false"]);
    }
}

/// HTTP registry), reconciled every 5 s.
pub fn oci_repository_yaml(ns: &str, name: &str, url: &str, tag: &str) -> String {
    format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  url: {url}\n  interval: 5s\n  insecure: true\n  ref:\n    tag: {tag}\n"
    )
}

/// The first YAML document of `text` as JSON.
pub fn serde_yaml_doc(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

/// `127.0.0.1:<free port>`.
pub fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

/// The condition `type` of an object's status, if any.
pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether condition `type_` has `status` ("True", "False", "Unknown").
pub fn has_condition(obj: &Value, type_: &str, status: &str) -> bool {
    condition(obj, type_).is_some_and(|c| c["status"] == status)
}

/// Ready=True for the object's current generation.
pub fn ready_now(obj: &Value) -> bool {
    condition(obj, "Ready").is_some_and(|c| {
        c["status"] == "True" && c["observedGeneration"] == obj["metadata"]["generation"]
    }) && obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
}

/// A Service in front of replicas: a loopback TCP proxy that sends each connection to
/// the first backend that accepts it (a dead pod is skipped, as endpoints drop it).
pub struct Service {
    listener: std::net::TcpListener,
    /// Its address, to advertise before the replicas start.
    pub addr: String,
}

impl Service {
    /// Reserves the Service address.
    pub fn bind() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        Self { listener, addr }
    }

    /// Starts forwarding to `backends`; it lives as long as the test process.
    pub fn serve(self, backends: Vec<String>) {
        std::thread::spawn(move || {
            for client in self.listener.incoming().flatten() {
                let Some(upstream) = backends
                    .iter()
                    .find_map(|b| std::net::TcpStream::connect(b).ok())
                else {
                    continue;
                };
                let (mut c2, mut u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                let (mut c1, mut u1) = (client, upstream);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c1, &mut u1);
                    let _ = u1.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut u2, &mut c2);
                    let _ = c2.shutdown(std::net::Shutdown::Write);
                });
            }
        });
    }
}

/// The usual test setup: the cluster, a real registry, a namespace with the chart's RBAC
/// (rendered from `values`) and one controller running as its ServiceAccount.
pub struct Env {
    /// The cluster.
    pub cluster: Cluster,
    /// A plain-HTTP registry on 127.0.0.1.
    pub registry: super::TestRegistry,
    /// The test's namespace.
    pub ns: TestNamespace,
    /// The controller.
    pub controller: Controller,
    /// Holds the store and the kubeconfig.
    pub work: tempfile::TempDir,
}

impl Env {
    /// `None` (skip) when there is no cluster; see [`Cluster::from_env`].
    pub fn start(test: &str, values: &Value) -> Option<Self> {
        let cluster = Cluster::from_env()?;
        let registry = super::TestRegistry::start(super::RegistryOpts::plain());
        let ns = cluster.namespace(test, values);
        let work = tempfile::tempdir().unwrap();
        let controller = Controller::start(
            &cluster,
            &ns.name,
            values,
            &work.path().join("data"),
            "ocisource-0",
        );
        Some(Self {
            cluster,
            registry,
            ns,
            controller,
            work,
        })
    }

    /// The store of the controller.
    pub fn storage(&self) -> &Path {
        &self.controller.storage
    }

    /// `oci://<registry>/<repo>`.
    pub fn url(&self, repo: &str) -> String {
        format!("oci://{}/{repo}", self.registry.host())
    }
}
