//! `hack/release.sh` end to end against the real registry: it ships the test binary
//! (a prebuilt binary, `OCISOURCE_BIN`, to keep a release build out of the test run),
//! builds the image with buildah, pushes and signs it, and pushes the chart. Then the
//! image verifies with `ocisource verify --key` (and not with another key), skopeo
//! inspects the image manifest, and the Helm SDK pulls the chart from `oci://` (Helm's
//! media types) and renders it with the released image as its default.
//!
//! Needs root, buildah, skopeo and the chart venv (`.venv`); without them the test says
//! so and passes, unless `OCISOURCE_REQUIRE_RELEASE=1` makes it fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "e2e_verify/cosign.rs"]
#[allow(dead_code)] // only the key pair is used here
mod cosign;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cosign::KeyPair;
use support::{RegistryOpts, TestRegistry};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn missing_tools() -> Option<String> {
    let is_root = Command::new("id").arg("-u").output().ok()?.stdout == b"0\n";
    if !is_root {
        return Some("not root (buildah needs it)".into());
    }
    for tool in ["buildah", "skopeo", "openssl"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("{tool} is not installed"));
        }
    }
    (!root().join(".venv/bin/python").exists()).then(|| "no .venv (run hack/chart-check.sh)".into())
}

/// Pulls the chart with the Helm SDK, renders it, and reports the manifest's media types
/// and the rendered Deployment image as JSON.
const HELM_CHECK: &str = r#"
import json, os, sys, tempfile, urllib.request
import helm_python as helm, yaml
host, version = sys.argv[1], sys.argv[2]
dest = tempfile.mkdtemp()
helm.pull(f"oci://{host}/rel/charts/ocisource", version=version, destination=dest, plain_http=True)
with open(os.path.join(dest, f"ocisource-{version}.tgz"), "rb") as f:
    data = f.read()
with helm.Chart.load_archive(data) as chart:
    rendered = chart.render({}, name="ocisource", namespace="flux-system", is_install=True)
deploy = yaml.safe_load(rendered["ocisource/templates/deployment.yaml"])
req = urllib.request.Request(f"http://{host}/v2/rel/charts/ocisource/manifests/{version}",
                             headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
manifest = json.load(urllib.request.urlopen(req))
print(json.dumps({"image": deploy["spec"]["template"]["spec"]["containers"][0]["image"],
                  "config": manifest["config"]["mediaType"],
                  "layers": [l["mediaType"] for l in manifest["layers"]],
                  "crd": any("CustomResourceDefinition" in t for t in rendered.values())}))
"#;

#[test]
fn release_publishes_a_signed_image_and_a_helm_oci_chart() {
    if let Some(why) = missing_tools() {
        assert!(
            std::env::var("OCISOURCE_REQUIRE_RELEASE").as_deref() != Ok("1"),
            "release test required but: {why}"
        );
        eprintln!("skipping the release test: {why}");
        return;
    }
    let reg = TestRegistry::start(RegistryOpts::plain());
    let host = reg.host();
    let work = tempfile::tempdir().unwrap();
    let KeyPair { key, public } = KeyPair::generate(work.path(), "release");
    let other = KeyPair::generate(work.path(), "other").public;
    let bin = env!("CARGO_BIN_EXE_ocisource");

    let out = Command::new(root().join("hack/release.sh"))
        .args([format!("{host}/rel"), "0.3.1".into()])
        .env("SIGN_KEY", &key)
        .env("OCISOURCE_BIN", bin)
        .env("RELEASE_PLAIN_HTTP", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "release.sh: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pushed = format!("release: pushed {host}/rel/ocisource:0.3.1@");
    let digest = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&pushed))
        .unwrap_or_else(|| panic!("no `{pushed}<digest>` line: {stdout}"))
        .to_string();

    // The image verifies with the release key, and only with it.
    let image = format!("oci://{host}/rel/ocisource@{digest}");
    let verify = |public: &Path| {
        Command::new(bin)
            .args([
                "verify",
                &image,
                "--plain-http",
                "-o",
                "json",
                "--key",
                public.to_str().unwrap(),
            ])
            .output()
            .unwrap()
    };
    let ok = verify(&public);
    assert!(
        ok.status.success(),
        "verify: {}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let payloads: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(
        payloads[0]["critical"]["image"]["docker-manifest-digest"],
        digest.as_str()
    );
    assert_eq!(
        verify(&other).status.code(),
        Some(3),
        "another key must not verify"
    );

    // skopeo reads the image: the digest pushed, an OCI manifest, the non-root entrypoint.
    let skopeo = |extra: &[&str]| -> serde_json::Value {
        let out = Command::new("skopeo")
            .arg("inspect")
            .args(extra)
            .args([
                "--tls-verify=false",
                &format!("docker://{host}/rel/ocisource:0.3.1"),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "skopeo: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let inspected = skopeo(&[]);
    assert_eq!(inspected["Digest"], digest.as_str());
    let raw = skopeo(&["--raw"]);
    assert_eq!(
        raw["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    let config = skopeo(&["--config"]);
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/ocisource"])
    );

    // The chart: Helm's media types, pulled from oci:// and rendered with this image.
    let out = Command::new(root().join(".venv/bin/python"))
        .args(["-c", HELM_CHECK, &host, "0.3.1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm check: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chart: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(chart["config"], "application/vnd.cncf.helm.config.v1+json");
    assert_eq!(
        chart["layers"],
        serde_json::json!(["application/vnd.cncf.helm.chart.content.v1.tar+gzip"])
    );
    assert_eq!(
        chart["image"],
        format!("{host}/rel/ocisource:0.3.1").as_str()
    );
    assert_eq!(
        chart["crd"], true,
        "the chart installs the OCIRepository CRD"
    );

    // The local build is not needed any more (disk); failing to remove it fails nothing.
    let _ = Command::new("buildah")
        .args(["rmi", "localhost/ocisource:0.3.1"])
        .env("STORAGE_DRIVER", "vfs")
        .output();
}
