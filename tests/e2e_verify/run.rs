//! Running the `ocisource` binary for the verification end-to-end tests: the CLI
//! commands, one-shot reconciles with `spec.verify` and its key Secret, and the shared
//! assertion that a rejected signature leaves the last good artifact in place.
//! Must not import ocisource: the binary is the unit under test.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;

use crate::cosign::KeyPair;
use crate::support::{LoggedRequest, TestRegistry};

/// Exit code and output of one `ocisource` run.
pub struct Out {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs the `ocisource` binary under test.
pub fn ocisource(args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_ocisource"))
        .args(args)
        .env_remove("OCISOURCE_CREDS")
        .output()
        .expect("run ocisource");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A path as a command-line argument.
pub fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `ocisource verify oci://HOST/repo:tag --key K... --insecure`.
pub fn verify(reg: &TestRegistry, image: &str, keys: &[&KeyPair]) -> Out {
    let url = format!("oci://{}/{image}", reg.host());
    let mut args = vec!["verify", url.as_str(), "--insecure"];
    for k in keys {
        args.extend(["--key", path(&k.public)]);
    }
    ocisource(&args)
}

/// The registry's requests after the first `mark` ones.
pub fn since(reg: &TestRegistry, mark: usize) -> Vec<LoggedRequest> {
    reg.request_log().into_iter().skip(mark).collect()
}

/// `ocisource pull oci://HOST/team/pull --tag TAG --key K --output-file OUT --insecure -o json`.
pub fn pull(reg: &TestRegistry, tag: &str, out: &Path, key: &KeyPair) -> Out {
    let url = format!("oci://{}/team/pull", reg.host());
    ocisource(&[
        "pull",
        &url,
        "--tag",
        tag,
        "--insecure",
        "--key",
        path(&key.public),
        "--output-file",
        path(out),
        "-o",
        "json",
    ])
}

/// Relative paths of every file under `dir`, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walk(dir)
        .iter()
        .map(|p| p.strip_prefix(dir).unwrap().display().to_string())
        .collect();
    v.sort();
    v
}

/// Every file (not directory) under `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// OCIRepository `team/app` (tag v1, plain HTTP) with `verify` as its `spec.verify` body.
pub fn object(reg: &TestRegistry, repo: &str, verify: &str) -> String {
    format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: app\n  namespace: team\n  generation: 1\nspec:\n  url: oci://{}/{repo}\n  interval: 5m\n  insecure: true\n  ref:\n    tag: v1\n  verify:\n{verify}\n",
        reg.host()
    )
}

/// A Secret `cosign-keys` holding the public keys under the given entry names.
pub fn keys_secret(keys: &[(&str, &KeyPair)]) -> String {
    let mut s =
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cosign-keys\n  namespace: team\ndata:\n"
            .to_string();
    for (name, k) in keys {
        s.push_str(&format!("  {name}: {}\n", B64.encode(k.public_pem())));
    }
    s
}

/// `spec.verify` in key mode with the `cosign-keys` Secret.
pub const KEY_VERIFY: &str = "    provider: cosign\n    secretRef:\n      name: cosign-keys";

/// A working directory and artifact store for `ocisource reconcile -f` runs.
pub struct OneShot {
    /// Where inputs and keys are written.
    pub dir: tempfile::TempDir,
    /// The `--storage` directory.
    pub storage: PathBuf,
}

impl OneShot {
    /// A fresh directory.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        Self { dir, storage }
    }

    /// Runs the one-shot reconcile over `docs`; returns the exit code and the status.
    pub fn run(&self, docs: &[&str]) -> (i32, serde_json::Value) {
        let mut args = vec![
            "reconcile".to_string(),
            "--storage".into(),
            path(&self.storage).into(),
            "--output".into(),
            "json".into(),
        ];
        for (i, doc) in docs.iter().enumerate() {
            let f = self.dir.path().join(format!("doc{i}.yaml"));
            std::fs::write(&f, doc).unwrap();
            args.extend(["-f".into(), path(&f).to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ocisource(&args);
        let v: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}\n{}", out.stdout, out.stderr));
        assert_eq!(v["kind"], "List", "{v}");
        (out.code, v["items"][0]["status"].clone())
    }

    /// The stored artifact files (the `latest.tar.gz` link of `status.url` is not one).
    pub fn store_files(&self) -> Vec<String> {
        let mut files = listing(&self.storage.join("ocirepository"));
        files.retain(|f| !f.ends_with("/latest.tar.gz"));
        files
    }
}

/// The condition of `type_` in `status`.
pub fn condition<'a>(status: &'a serde_json::Value, type_: &str) -> &'a serde_json::Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
}

/// SourceVerified False (VerificationError) naming `check`, Ready False, and the
/// previous artifact still in status and on disk, with no new file in the store.
pub fn assert_rejected(
    oneshot: &OneShot,
    (code, st): (i32, serde_json::Value),
    good: &serde_json::Value,
    files: &[String],
    check: &str,
) {
    assert_eq!(code, 1, "not Ready must exit 1: {st}");
    let verified = condition(&st, "SourceVerified");
    assert_eq!(verified["status"], "False", "{st}");
    assert_eq!(verified["reason"], "VerificationError", "{st}");
    assert!(
        verified["message"].as_str().unwrap().contains(check),
        "SourceVerified must name '{check}': {verified}"
    );
    let ready = condition(&st, "Ready");
    assert_eq!(ready["status"], "False", "{st}");
    assert_eq!(ready["reason"], "VerificationError", "{st}");
    assert_eq!(
        st["artifact"], good["artifact"],
        "the last good artifact must stay"
    );
    let stored = oneshot
        .storage
        .join(st["artifact"]["path"].as_str().unwrap());
    assert!(stored.exists(), "{} is gone", stored.display());
    assert_eq!(oneshot.store_files(), files, "a new file was stored");
}
