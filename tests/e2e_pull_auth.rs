//! `ocisource pull` logging in to the real registry (basic auth): `--creds`, a docker
//! config, and docker credential helpers named by it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
mod support;

use std::path::Path;
use std::process::Command;

use cli_common::ocisource;
use support::{tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

#[tokio::test]
async fn basic_auth_from_creds_and_docker_config() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("bob", "pa55"));
    reg.push_artifact("team/auth", "v1", &[(LAYER, tar_gz(&[("f", b"1")]))], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tar.gz");
    let url = format!("oci://{}/team/auth", reg.host());
    let o = out.to_str().unwrap();
    let args = [
        "pull",
        &url,
        "--insecure",
        "--tag",
        "v1",
        "--output-file",
        o,
    ];
    let anon = ocisource(&args);
    assert_eq!(anon.code, 1);
    assert!(
        anon.stderr.contains("requires a login") && anon.stderr.contains("--creds"),
        "{}",
        anon.stderr
    );
    let with = ocisource(&[&args[..], &["--creds", "bob:pa55"]].concat());
    assert_eq!(with.code, 0, "{}", with.stderr);
    assert!(!with.stderr.contains("pa55"));
    let cfg = dir.path().join("docker");
    std::fs::create_dir_all(&cfg).unwrap();
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("bob:pa55");
    std::fs::write(
        cfg.join("config.json"),
        format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, reg.host()),
    )
    .unwrap();
    let out2 = Command::new(env!("CARGO_BIN_EXE_ocisource"))
        .args(args)
        .env("DOCKER_CONFIG", &cfg)
        .output()
        .unwrap();
    assert!(
        out2.status.success(),
        "{}",
        String::from_utf8_lossy(&out2.stderr)
    );
}

/// Writes `docker-credential-<name>` into `dir`: it answers `user`/`secret` for `host`
/// and "credentials not found" (exit 1, as real helpers do) for anything else.
fn credential_helper(dir: &Path, name: &str, host: &str, user: &str, secret: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(format!("docker-credential-{name}"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 3\nread -r host\n\
             if [ \"$host\" = '{host}' ]; then\n\
             printf '{{\"ServerURL\":\"%s\",\"Username\":\"{user}\",\"Secret\":\"{secret}\"}}' \"$host\"\n\
             else echo 'credentials not found in native keychain'; exit 1; fi\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn credential_helpers_from_docker_config_log_in() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("carol", "h3lper"));
    reg.push_artifact("team/helper", "v1", &[(LAYER, tar_gz(&[("f", b"1")]))], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    credential_helper(&bin, "ocitest", &reg.host(), "carol", "h3lper");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let url = format!("oci://{}/team/helper", reg.host());
    let out = dir.path().join("o.tar.gz");
    let run_with = |config: &str| {
        let cfg = dir.path().join("docker");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(cfg.join("config.json"), config).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_ocisource"))
            .args(["pull", &url, "--insecure", "--tag", "v1", "--output-file"])
            .arg(&out)
            .env("DOCKER_CONFIG", &cfg)
            .env("PATH", &path)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // A per-registry helper (credHelpers) and the default store (credsStore) both work.
    let per_host = format!(r#"{{"credHelpers":{{"{}":"ocitest"}}}}"#, reg.host());
    let (code, stderr) = run_with(&per_host);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("h3lper"), "{stderr}");
    let (code, stderr) = run_with(r#"{"credsStore":"ocitest"}"#);
    assert_eq!(code, Some(0), "{stderr}");
    // A helper that knows no credentials for this host means anonymous: the registry's
    // refusal is what the user sees.
    credential_helper(&bin, "other", "elsewhere.example", "x", "y");
    let (code, stderr) = run_with(r#"{"credsStore":"other"}"#);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("requires a login"), "{stderr}");
    // A named helper that is not installed is an error naming it.
    let (code, stderr) = run_with(r#"{"credsStore":"not-installed"}"#);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("docker-credential-not-installed"),
        "{stderr}"
    );
}
