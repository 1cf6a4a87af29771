//! `hack/release.sh` end to end against the real registry: it ships the test binary
//! (a prebuilt binary, `OCISOURCE_BIN`, to keep a release build out of the test run),
//! builds the image with buildah, pushes and signs it, and pushes the chart. Then the
//! image verifies with `ocisource verify --key` (and not with another key), skopeo
//! inspects the image manifest, and the Helm SDK pulls the chart from `oci://` (Helm's
//! media types) and renders it with the released image as its default.
//!
//! Needs root, buildah, skopeo and the chart venv (`.venv`); without them the test says
//! so and passes, unless `OCISOURCE_REQUIRE_RELEASE=1` makes it fail.
//!
//! The CI workflow that calls the script on tags (`.github/workflows/release.yml`) is read
//! here too: it fires on version tags only, may write packages, and its publish step runs
//! this script with the registry and the tag's name, the key coming from a secret.

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
        // The tag's name, as the workflow passes `$GITHUB_REF_NAME`: the script drops the v.
        .args([format!("{host}/rel"), "v0.3.1".into()])
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

/// GitHub's filter pattern (`[0-9]`, `+` for one or more, `*` for any run without `/`,
/// other characters literal) as a regular expression.
fn github_tag_filter(pattern: &str) -> regex::Regex {
    let mut re = String::from("^");
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                re.push('[');
                for d in chars.by_ref() {
                    re.push(d);
                    if d == ']' {
                        break;
                    }
                }
            }
            '+' | '?' => re.push(c),
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                re.push_str(".*");
            }
            '*' => re.push_str("[^/]*"),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    regex::Regex::new(&re).unwrap()
}

#[test]
fn the_release_workflow_runs_release_sh_on_version_tags() {
    let text = std::fs::read_to_string(root().join(".github/workflows/release.yml")).unwrap();
    let wf: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let on = &wf["on"];
    assert!(
        on.get("pull_request").is_none() && on["push"].get("branches").is_none(),
        "the release runs on tags only: {on:?}"
    );
    let filters: Vec<regex::Regex> = on["push"]["tags"]
        .as_sequence()
        .expect("on.push.tags")
        .iter()
        .map(|p| github_tag_filter(p.as_str().unwrap()))
        .collect();
    let fires = |tag: &str| filters.iter().any(|f| f.is_match(tag));
    for tag in ["v0.3.1", "v1.0.0", "v1.0.0-rc.1", "v10.20.30"] {
        assert!(
            fires(tag),
            "a release tag {tag} does not start the workflow"
        );
    }
    for tag in ["0.3.1", "latest", "v1", "v1.2", "test-v1.2.3", "vx.y.z"] {
        assert!(
            !fires(tag),
            "{tag} is not a version tag but starts the workflow"
        );
    }
    assert_eq!(wf["permissions"]["packages"].as_str(), Some("write"));

    let steps = wf["jobs"]["release"]["steps"].as_sequence().expect("steps");
    let runs: Vec<&str> = steps.iter().filter_map(|s| s["run"].as_str()).collect();
    let publish = runs
        .iter()
        .find(|r| r.contains("hack/release.sh"))
        .expect("a step runs hack/release.sh");
    assert!(
        publish.contains(r#"hack/release.sh "$REGISTRY" "$GITHUB_REF_NAME""#),
        "the publish step passes the registry and the tag: {publish}"
    );
    let before: String = runs
        .iter()
        .take_while(|r| !r.contains("hack/release.sh"))
        .copied()
        .collect();
    for set in ["SIGN_KEY=", "REGISTRY="] {
        assert!(
            before.contains(&format!("echo \"{set}")) && before.contains("$GITHUB_ENV"),
            "no earlier step sets {set} for the publish step"
        );
    }
    assert!(
        text.contains("${{ secrets.COSIGN_PRIVATE_KEY }}") && !before.contains("echo \"$COSIGN"),
        "the signing key comes from a secret and is never echoed"
    );
}
