//! The command line's conventions, run on the real binary against the real registry:
//! `-o/--output` is the output format of every command and a path given to it fails
//! naming `--output-file`; pull, push and verify take `oci://repo:tag` and
//! `oci://repo@sha256:…`; verify refuses a bare repository instead of assuming `latest`;
//! every command's `--help` carries examples. JSON and YAML output shapes (Flux's push
//! fields, pull's two digests, cosign's verify list, reconcile's `kind: List`) are
//! checked with `jq` as a script would read them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
#[allow(dead_code)] // the signature upload helpers are for the e2e_verify tests
#[path = "e2e_verify/cosign.rs"]
mod cosign;
mod support;

use std::process::Command;

use cli_common::{arg, ocisource, Out};
use support::{sha256, RegistryOpts, TestRegistry};

/// `jq -r FILTER` over `json`.
fn jq(filter: &str, json: &str) -> String {
    let mut child = Command::new("jq")
        .args(["-r", filter])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("jq");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), json.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "jq {filter} failed on {json}");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn output_is_a_format_and_a_path_there_fails_naming_the_flag_for_paths() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.tar.gz");
    let f = arg(&file);
    for args in [
        vec!["pull", "oci://reg.example.com/app:v1", "-o", f],
        vec![
            "pull",
            "oci://reg.example.com/app:v1",
            "--output",
            arg(dir.path()),
        ],
        vec![
            "push",
            "oci://reg.example.com/app:v1",
            "--path",
            ".",
            "-o",
            f,
        ],
        vec![
            "verify",
            "oci://reg.example.com/app:v1",
            "--key",
            f,
            "-o",
            f,
        ],
        vec!["reconcile", "-f", f, "-o", f],
    ] {
        let out = ocisource(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("-o/--output takes yaml or json")
                && out.stderr.contains("--output-file"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(!file.exists(), "{args:?} wrote {f}");
    }
    for command in ["pull", "push", "verify", "reconcile"] {
        let out = ocisource(&[command, "--help"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stdout.contains("-o, --output <FORMAT>")
                && out.stdout.contains("Examples:")
                && out.stdout.contains(&format!("ocisource {command} ")),
            "{command} --help: {}",
            out.stdout
        );
    }
    let pull = ocisource(&["pull", "--help"]).stdout;
    assert!(pull.contains("--output-file <FILE.tar.gz>"), "{pull}");
}

/// A directory with one manifest, pushed with ocisource as `team/app:v1` and signed.
struct Pushed {
    dir: tempfile::TempDir,
    public: String,
    json: String,
}

fn push_signed(reg: &TestRegistry) -> Pushed {
    let dir = tempfile::tempdir().unwrap();
    let pair = cosign::KeyPair::generate(dir.path(), "key");
    let (key, public) = (arg(&pair.key).to_string(), arg(&pair.public).to_string());
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("app.yaml"), "kind: ConfigMap\n").unwrap();
    let url = format!("oci://{}/team/app:v1", reg.host());
    let out = ocisource(&[
        "push",
        &url,
        "--path",
        arg(&src),
        "--sign-key",
        &key,
        "--insecure",
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    Pushed {
        dir,
        public,
        json: out.stdout,
    }
}

#[tokio::test]
async fn pull_push_and_verify_take_tags_and_digests_in_the_url() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let pushed = push_signed(&reg);
    let digest = jq(".digest", &pushed.json);
    let repo = format!("oci://{}/team/app", reg.host());
    let file = pushed.dir.path().join("out.tar.gz");
    let pull = |url: &str, extra: &[&str]| -> Out {
        let mut args = vec![
            "pull",
            url,
            "--insecure",
            "--output-file",
            arg(&file),
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        ocisource(&args)
    };

    for (url, tag) in [
        (format!("{repo}:v1"), Some("v1")),
        (format!("{repo}@{digest}"), None),
    ] {
        let out = pull(&url, &[]);
        assert_eq!(out.code, 0, "{url}: {}", out.stderr);
        let v = out.json();
        assert_eq!(v["manifestDigest"], digest.as_str(), "{url}: {v}");
        assert_eq!(v["tag"].as_str(), tag, "{url}: {v}");
    }
    // A reference in the URL and another in the flags: which one? Refused.
    let out = pull(&format!("{repo}:v1"), &["--tag", "v1"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("already names a tag or digest"),
        "{}",
        out.stderr
    );
    // The flags still work on a bare repository.
    assert_eq!(pull(&repo, &["--digest", &digest]).code, 0);

    let verify = |url: &str| ocisource(&["verify", url, "--insecure", "--key", &pushed.public]);
    assert_eq!(verify(&format!("{repo}:v1")).code, 0);
    assert_eq!(verify(&format!("{repo}@{digest}")).code, 0);
    // No tag and no digest: an error before any request, not a silent `latest`.
    let mark = reg.request_log().len();
    let out = verify(&repo);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("names no tag or digest") && out.stderr.contains("@sha256:"),
        "{}",
        out.stderr
    );
    assert_eq!(
        reg.request_log().len(),
        mark,
        "verify asked the registry anyway"
    );

    // push writes a tag; a digest or a bare repository is refused with the reason.
    let src = pushed.dir.path().join("src");
    for (url, why) in [
        (
            format!("{repo}@{digest}"),
            "a digest names content that exists already",
        ),
        (repo.clone(), "push needs a tag"),
    ] {
        let out = ocisource(&["push", &url, "--path", arg(&src), "--insecure"]);
        assert_eq!(out.code, 2, "{url}: {}", out.stderr);
        assert!(out.stderr.contains(why), "{url}: {}", out.stderr);
    }
}

#[tokio::test]
async fn json_and_yaml_output_read_like_flux_cosign_and_kubectl() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let pushed = push_signed(&reg);
    let host = reg.host();

    // push: Flux's four fields (plus the signature tag), and the pipeline from Flux's docs.
    let p: serde_json::Value = serde_json::from_str(&pushed.json).unwrap();
    assert_eq!(
        keys(&p),
        ["digest", "repository", "signature", "tag", "url"]
    );
    let digest = p["digest"].as_str().unwrap();
    assert_eq!(p["repository"], format!("{host}/team/app"));
    assert_eq!(p["tag"], "v1");
    assert_eq!(p["url"], format!("oci://{host}/team/app@{digest}"));
    assert_eq!(
        jq(r#".repository + "@" + .digest"#, &pushed.json),
        format!("{host}/team/app@{digest}")
    );

    // pull: the manifest digest and the tar.gz digest, each under its own name.
    let file = pushed.dir.path().join("out.tar.gz");
    let url = format!("oci://{host}/team/app:v1");
    let out = ocisource(&[
        "pull",
        &url,
        "--insecure",
        "--output-file",
        arg(&file),
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["manifestDigest"], digest);
    assert_eq!(v["archiveDigest"], sha256(&std::fs::read(&file).unwrap()));
    assert_ne!(v["archiveDigest"], v["manifestDigest"]);
    assert_eq!(v["archivePath"], arg(&file));
    assert_eq!(v["revision"], format!("v1@{digest}"));
    assert!(
        v.get("digest").is_none(),
        "an ambiguous 'digest' field: {v}"
    );
    let out = ocisource(&["pull", &url, "--insecure", "--output-file", arg(&file)]);
    let yaml: serde_json::Value = serde_yaml::from_str(&out.stdout).unwrap();
    assert_eq!(yaml["manifestDigest"], digest, "{}", out.stdout);

    // verify: cosign's list of verified payloads, on stdout (the human line on stderr).
    let out = ocisource(&["verify", &url, "--insecure", "--key", &pushed.public]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        jq(
            r#".[0].critical.image["docker-manifest-digest"]"#,
            &out.stdout
        ),
        digest
    );
    assert_eq!(
        jq(r#".[0].critical.identity["docker-reference"]"#, &out.stdout),
        format!("{host}/team/app")
    );
    assert_eq!(
        jq(".[0].critical.type", &out.stdout),
        "cosign container image signature"
    );
    assert!(
        jq(".[0].optional.Key", &out.stdout).contains("key.pub"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("verified signature of"),
        "{}",
        out.stderr
    );
    let out = ocisource(&[
        "verify",
        &url,
        "--insecure",
        "--key",
        &pushed.public,
        "-o",
        "yaml",
    ]);
    let yaml: serde_json::Value = serde_yaml::from_str(&out.stdout).unwrap();
    assert_eq!(
        yaml[0]["critical"]["image"]["docker-manifest-digest"],
        digest
    );

    // reconcile: one kind: List in either format.
    let obj = pushed.dir.path().join("o.yaml");
    std::fs::write(
        &obj,
        format!("apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: app\n  namespace: team\nspec:\n  url: oci://{host}/team/app\n  interval: 5m\n  insecure: true\n  ref:\n    tag: v1\n"),
    )
    .unwrap();
    let storage = pushed.dir.path().join("storage");
    for format in ["json", "yaml"] {
        let out = ocisource(&[
            "reconcile",
            "-f",
            arg(&obj),
            "--storage",
            arg(&storage),
            "-o",
            format,
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let list: serde_json::Value = serde_yaml::from_str(&out.stdout).unwrap();
        assert_eq!(
            (list["apiVersion"].as_str(), list["kind"].as_str()),
            (Some("v1"), Some("List"))
        );
        assert_eq!(list["items"][0]["kind"], "OCIRepository", "{}", out.stdout);
        assert_eq!(
            list["items"][0]["status"]["artifact"]["revision"],
            format!("v1@{digest}")
        );
        if format == "json" {
            assert_eq!(jq(".items[0].metadata.name", &out.stdout), "app");
        }
    }
}

#[test]
fn version_prints_like_flux_and_as_an_object_with_o() {
    let line = ocisource(&["version"]);
    assert_eq!(line.code, 0, "{}", line.stderr);
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(line.stdout, format!("ocisource: {version}\n"));
    let json = ocisource(&["version", "-o", "json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    assert_eq!(jq(".clientVersion.version", &json.stdout), version);
    assert_eq!(
        keys(&json.json()["clientVersion"]),
        ["arch", "os", "version"]
    );
    let yaml: serde_json::Value =
        serde_yaml::from_str(&ocisource(&["version", "-o", "yaml"]).stdout).unwrap();
    assert_eq!(yaml, json.json());
    let path = ocisource(&["version", "-o", "out.txt"]);
    assert_eq!(path.code, 2);
    assert!(
        path.stderr.contains("-o/--output takes yaml or json"),
        "{}",
        path.stderr
    );
}

/// `ocisource completion SHELL` parses in that shell (`bash -n`; zsh and fish when
/// installed) and completes the subcommands and pull's flags.
#[test]
fn completion_scripts_parse_in_their_shell_and_name_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = ocisource(&["completion", shell]);
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        for word in ["version", "completion", "pull", "output-file"] {
            assert!(out.stdout.contains(word), "{shell} script lacks {word}");
        }
        let installed = Command::new(shell).arg("-c").arg("true").output().is_ok();
        if !installed {
            continue;
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &out.stdout).unwrap();
        let check = Command::new(shell)
            .arg("-n")
            .arg(file.path())
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{shell} -n: {}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    let bad = ocisource(&["completion", "tcsh"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

/// `--output-file DIR` is refused before any registry request (nothing listens on the
/// registry's port), naming the flag and what it takes.
#[test]
fn output_file_refuses_a_directory_before_the_registry_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("oci://127.0.0.1:{port}/team/app:v1");
    let out = ocisource(&["pull", &url, "--output-file", arg(dir.path())]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("--output-file")
            && out.stderr.contains("is a directory")
            && out.stderr.contains("--extract DIR"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
