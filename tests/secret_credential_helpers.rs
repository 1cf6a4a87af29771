//! A tenant's `dockerconfigjson` Secret naming a credential helper (`credsStore`,
//! `credHelpers`) never makes the controller run a program: the controller's reconcile
//! (through the one-shot `ocisource reconcile -f`, Secrets from files) against the real
//! registry with basic auth, a `docker-credential-evil` on PATH that would hand out the
//! right login and leaves a marker file when run. The same helper, named in the CLI
//! user's own docker config, does run for `ocisource pull`: the marker can appear.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use support::{tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

struct Setup {
    dir: tempfile::TempDir,
    reg: TestRegistry,
    marker: PathBuf,
    path_env: String,
}

/// The registry (login alice/s3cret, one artifact), and `docker-credential-evil` first
/// on PATH: it touches the marker and answers the right login.
async fn setup() -> Setup {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("alice", "s3cret"));
    reg.push_artifact("team/app", "v1", &[(LAYER, tar_gz(&[("f", b"1")]))], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let marker = dir.path().join("helper-ran");
    let helper = bin.join("docker-credential-evil");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\ntouch '{}'\nprintf '{{\"Username\":\"alice\",\"Secret\":\"s3cret\"}}'\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path_env = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Setup {
        dir,
        reg,
        marker,
        path_env,
    }
}

/// `ocisource reconcile -f` over the object and a Secret holding `config_json`.
fn reconcile_with_secret(s: &Setup, name: &str, config_json: &str) -> (Output, serde_json::Value) {
    let d = s.dir.path();
    let object = format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: team\n  generation: 1\nspec:\n  url: oci://{}/team/app\n  interval: 5m\n  ref:\n    tag: v1\n  insecure: true\n  secretRef:\n    name: creds\n",
        s.reg.host()
    );
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: team\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{config_json}'\n"
    );
    let (o, sec) = (
        d.join(format!("{name}.yaml")),
        d.join(format!("{name}-secret.yaml")),
    );
    std::fs::write(&o, object).unwrap();
    std::fs::write(&sec, secret).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ocisource"))
        .args(["reconcile", "--output", "json", "--storage"])
        .arg(d.join("storage"))
        .arg("-f")
        .arg(&o)
        .arg("-f")
        .arg(&sec)
        .env("PATH", &s.path_env)
        .env("HOME", d)
        .env_remove("DOCKER_CONFIG")
        .output()
        .unwrap();
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, printed["items"][0]["status"].clone())
}

fn ready(status: &serde_json::Value) -> &serde_json::Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .unwrap_or_else(|| panic!("no Ready condition in {status}"))
}

#[tokio::test]
async fn a_helper_named_by_a_secret_never_runs_in_the_controller() {
    let s = setup().await;
    let host = s.reg.host();
    for (name, json) in [
        ("store", r#"{"credsStore":"evil"}"#.to_string()),
        (
            "perhost",
            format!(r#"{{"credHelpers":{{"{host}":"evil"}}}}"#),
        ),
    ] {
        let (out, status) = reconcile_with_secret(&s, name, &json);
        assert_eq!(out.status.code(), Some(1), "{name}: {status}");
        let ready = ready(&status);
        assert_eq!(ready["status"], "False", "{name}: {status}");
        assert_eq!(ready["reason"], "AuthenticationFailed", "{name}: {status}");
        let message = ready["message"].as_str().unwrap();
        assert!(
            message.contains("docker-credential-evil")
                && message.contains("credential helpers are ignored for Secrets"),
            "{name}: {message}"
        );
        assert!(!s.marker.exists(), "{name}: the Secret's helper was run");
    }
    // A login under 'auths' is used; the helper beside it is ignored, not run.
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
    let both = format!(r#"{{"credsStore":"evil","auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#);
    let (out, status) = reconcile_with_secret(&s, "both", &both);
    assert_eq!(out.status.code(), Some(0), "{status}");
    assert_eq!(ready(&status)["status"], "True");
    assert!(!s.marker.exists(), "the Secret's helper was run");
}

#[tokio::test]
async fn the_cli_still_runs_the_helper_of_the_users_own_config() {
    let s = setup().await;
    let cfg: &Path = &s.dir.path().join("docker");
    std::fs::create_dir_all(cfg).unwrap();
    std::fs::write(cfg.join("config.json"), r#"{"credsStore":"evil"}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ocisource"))
        .args(["pull", &format!("oci://{}/team/app", s.reg.host())])
        .args(["--insecure", "--tag", "v1", "--output-file"])
        .arg(s.dir.path().join("o.tar.gz"))
        .env("PATH", &s.path_env)
        .env("DOCKER_CONFIG", cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(s.marker.exists(), "the user's own helper did not run");
}
