//! Driving the one-shot mode (`ocisource reconcile -f FILE --storage DIR`) as a user does:
//! the real binary, OCIRepository YAML written to a file, the status read back from its
//! JSON output; plus what store-safety tests look at (temp files under a store, the
//! published artifact of the saved state) and incompressible bytes for large layers.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ocisource")
}

/// An OCIRepository `namespace/name` for `url` at `tag` (`insecure: true`: plain HTTP).
pub fn object(namespace: &str, name: &str, url: &str, tag: &str, interval: &str) -> String {
    format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  url: {url}\n  interval: {interval}\n  insecure: true\n  ref:\n    tag: {tag}\n"
    )
}

/// `ocisource reconcile --output json --storage <storage> -f <file>`, output captured.
pub fn command(file: &Path, storage: &Path) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("reconcile")
        .arg("--storage")
        .arg(storage)
        .arg("--output")
        .arg("json")
        .arg("-f")
        .arg(file)
        .stdin(Stdio::null());
    cmd
}

/// A finished run.
pub struct Run {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs [`command`] to the end.
pub fn run(file: &Path, storage: &Path) -> Run {
    let out = command(file, storage).output().expect("run ocisource");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Run {
    /// The status of the first object printed.
    pub fn status(&self) -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        });
        assert_eq!(v["kind"], "List", "{v}");
        v["items"][0]["status"].clone()
    }

    /// The condition `type_` of [`Run::status`].
    pub fn condition(&self, type_: &str) -> serde_json::Value {
        let status = self.status();
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == type_))
            .cloned()
            .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
    }
}

/// The artifact (`path`, `digest`) that the saved one-shot state of `namespace/name`
/// publishes, if any.
pub fn published(storage: &Path, namespace: &str, name: &str) -> Option<(String, String)> {
    let state = storage
        .join(".state")
        .join(namespace)
        .join(format!("{name}.json"));
    let bytes = std::fs::read(&state).ok()?;
    let status: serde_json::Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("the saved state {} is not JSON: {e}", state.display()));
    let artifact = &status["artifact"];
    Some((
        artifact["path"].as_str()?.to_string(),
        artifact["digest"].as_str()?.to_string(),
    ))
}

/// Every file under `root` whose name starts with `.tmp` (a temp file).
pub fn temp_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(path);
            } else if entry.file_name().to_string_lossy().starts_with(".tmp") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A small deterministic generator (xorshift64*), for incompressible bytes and random
/// delays that a seed reproduces.
pub struct Rng(u64);

impl Rng {
    /// Seeded; a zero seed is moved off zero.
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `len` bytes that gzip cannot shrink.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}
