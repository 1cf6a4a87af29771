//! Running the `ocisource` binary for the command-line convention tests (`cli_*.rs`):
//! arguments, optional standard input and environment, and the exit code and output
//! back. Must not import ocisource: the binary is the unit under test.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Exit code and output of one run.
pub struct Out {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Out {
    /// Standard output parsed as JSON (panics with both streams when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }
}

/// A command line for the binary under test, with no inherited credentials or colour
/// settings.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ocisource"));
    cmd.args(args)
        .env_remove("OCISOURCE_CREDS")
        .env_remove("COSIGN_PASSWORD")
        .env_remove("NO_COLOR")
        .env_remove("OCISOURCE_LOG");
    cmd
}

/// Runs `cmd` with `stdin` piped in (or /dev/null), and collects its output.
pub fn run(mut cmd: Command, stdin: Option<&[u8]>) -> Out {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run ocisource");
    let mut pipe = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        pipe.write_all(bytes).unwrap();
    }
    drop(pipe);
    let out = child.wait_with_output().unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the binary with `args` and an empty standard input.
pub fn ocisource(args: &[&str]) -> Out {
    run(command(args), None)
}

/// A path as an argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Entry names of a tar.gz, listed by GNU tar, sorted, without trailing slashes.
pub fn tar_names(archive: &Path) -> Vec<String> {
    let out = Command::new("tar")
        .arg("-tzf")
        .arg(archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "GNU tar could not list {}",
        archive.display()
    );
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_end_matches('/').to_string())
        .collect();
    v.sort();
    v
}

/// `len` bytes that gzip cannot shrink (xorshift), so the layer is about `len` bytes.
pub fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `ocisource pull oci://HOST/REPO --insecure --output-file OUT -o json EXTRA...`.
pub fn pull(host: &str, repo: &str, out: &Path, extra: &[&str]) -> Out {
    let url = format!("oci://{host}/{repo}");
    let mut args = vec![
        "pull",
        url.as_str(),
        "--insecure",
        "--output-file",
        arg(out),
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    ocisource(&args)
}

/// A file tree: relative path → content (`None` for a directory).
pub fn tree(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut m = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, m: &mut BTreeMap<String, Option<Vec<u8>>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                m.insert(rel, None);
                walk(root, &p, m);
            } else {
                m.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    walk(root, root, &mut m);
    m
}
