//! `ocisource reconcile -f` (the one-shot mode) run as a process for the Flux parity
//! tests: write manifests, run it with `--output json` and extra flags, read the object's
//! status and conditions back. (`oneshot` drives the same mode for the store-safety tests.)

use std::path::Path;
use std::process::Command;

/// The ocisource binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ocisource")
}

/// What one run printed and returned.
pub struct Run {
    /// Exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// `ocisource reconcile --storage STORAGE --output json -f FILE... EXTRA...`.
pub fn reconcile(files: &[&Path], storage: &Path, extra: &[&str]) -> Run {
    let mut cmd = Command::new(bin());
    cmd.arg("reconcile")
        .arg("--storage")
        .arg(storage)
        .arg("--output")
        .arg("json");
    for f in files {
        cmd.arg("-f").arg(f);
    }
    cmd.args(extra);
    let out = cmd.output().expect("run ocisource");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// An OCIRepository `team/<name>` (generation 1) with `reference` lines under `ref:` and
/// `extra` spec lines.
pub fn object(name: &str, url: &str, reference: &str, extra: &str) -> String {
    format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: team\n  generation: 1\nspec:\n  url: {url}\n  interval: 5m\n  ref:\n{reference}\n{extra}\n"
    )
}

/// Writes `text` to `dir/name`, returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The status of the first object printed.
pub fn status(run: &Run) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            run.stdout, run.stderr
        )
    });
    assert_eq!(v["kind"], "List", "{v}");
    v["items"][0]["status"].clone()
}

/// The condition of `type_`; panics naming the status when it is absent.
pub fn condition<'a>(status: &'a serde_json::Value, type_: &str) -> &'a serde_json::Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
}
