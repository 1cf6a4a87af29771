//! Support for `tests/hostile_artifacts.rs`: hostile layers written byte by byte (raw tar
//! headers, GNU long-name and PAX records, streamed through gzip so a 256 MiB name costs
//! the test no memory), and [`pull_limited`], which runs the real `ocisource pull` under
//! `prlimit` (CPU seconds and address space: limits the process runs under) in a sandbox
//! of its own (cwd, HOME, TMPDIR), measures its peak RSS from `/proc/<pid>/status`
//! (VmHWM) while it runs, and lists every file the run left in the sandbox.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use tar::EntryType;

use super::support::rawtar::{pax_records, raw_header};

/// CPU seconds a pull may use (RLIMIT_CPU; SIGXCPU past it).
pub const CPU_SECONDS: u64 = 20;
/// Address space a pull may map (RLIMIT_AS): a hard stop far above the RSS bound.
pub const ADDRESS_SPACE: u64 = 4 << 30;

/// A tar stream written into a gzip encoder as it is built.
pub struct Layer {
    gz: GzEncoder<Vec<u8>>,
}

impl Default for Layer {
    fn default() -> Self {
        Self::new()
    }
}

impl Layer {
    /// An empty layer.
    pub fn new() -> Self {
        Self {
            gz: GzEncoder::new(Vec::new(), Compression::fast()),
        }
    }

    /// A raw header block: `name` in the 100-byte name field, `kind`, `size`.
    pub fn header(&mut self, name: &[u8], kind: EntryType, size: u64) -> &mut Self {
        self.gz.write_all(&raw_header(name, kind, size)).unwrap();
        self
    }

    /// Data bytes, then padding.
    pub fn data(&mut self, bytes: &[u8]) -> &mut Self {
        self.raw(bytes).pad(bytes.len() as u64)
    }

    /// Bytes as they are, no padding.
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.gz.write_all(bytes).unwrap();
        self
    }

    /// `len` copies of `byte`, no padding.
    pub fn fill(&mut self, byte: u8, len: u64) -> &mut Self {
        let chunk = vec![byte; 1 << 20];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            self.gz.write_all(&chunk[..n]).unwrap();
            left -= n as u64;
        }
        self
    }

    /// Zeros up to the next block after `len` data bytes.
    pub fn pad(&mut self, len: u64) -> &mut Self {
        let pad = (512 - len % 512) % 512;
        self.gz.write_all(&vec![0u8; pad as usize]).unwrap();
        self
    }

    /// A regular file with a short name.
    pub fn file(&mut self, name: &str, content: &[u8]) -> &mut Self {
        self.header(name.as_bytes(), EntryType::Regular, content.len() as u64)
            .data(content)
    }

    /// A regular file whose name goes in a GNU long-name record.
    pub fn long_named(&mut self, name: &[u8], content: &[u8]) -> &mut Self {
        self.header(
            b"././@LongLink",
            EntryType::GNULongName,
            name.len() as u64 + 1,
        );
        self.gz.write_all(name).unwrap();
        self.gz.write_all(&[0]).unwrap();
        self.pad(name.len() as u64 + 1);
        self.file("short-name", content)
    }

    /// A PAX extended header holding `records`, then a file `name` with `content`.
    pub fn pax(&mut self, records: &[(&str, &[u8])], name: &str, content: &[u8]) -> &mut Self {
        let body = pax_records(records);
        self.header(b"PaxHeaders/x", EntryType::XHeader, body.len() as u64)
            .data(&body)
            .file(name, content)
    }

    /// The end-of-archive blocks and the gzip trailer.
    pub fn finish(&mut self) -> Vec<u8> {
        self.gz.write_all(&[0u8; 1024]).unwrap();
        let gz = std::mem::replace(
            &mut self.gz,
            GzEncoder::new(Vec::new(), Compression::fast()),
        );
        gz.finish().unwrap()
    }
}

/// What a limited pull did.
#[derive(Debug)]
pub struct Limited {
    /// Exit code; `None` when a signal ended it (SIGXCPU: the CPU limit).
    pub code: Option<i32>,
    /// Standard error.
    pub stderr: String,
    /// Peak resident memory (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// CPU time (user + system) at the last reading before the exit, milliseconds.
    pub cpu_ms: u64,
    /// Files left in the sandbox (cwd, HOME, TMPDIR), relative to it.
    pub files: Vec<PathBuf>,
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User + system CPU time from `/proc/<pid>/stat`, in clock ticks (1/100 s on Linux).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            walk(root, &p, out);
        } else {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// Runs `ocisource pull <url> --tag v1 --insecure --output-file out/o.tar.gz <extra>` under
/// `prlimit`, in a fresh sandbox directory used as cwd, HOME and TMPDIR.
pub fn pull_limited(url: &str, extra: &[String]) -> Limited {
    let sandbox = tempfile::tempdir().unwrap();
    let root = sandbox.path();
    for d in ["out", "home", "tmp"] {
        std::fs::create_dir(root.join(d)).unwrap();
    }
    let mut child = Command::new("prlimit")
        .arg(format!("--cpu={CPU_SECONDS}"))
        .arg(format!("--as={ADDRESS_SPACE}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_ocisource"))
        .args([
            "pull",
            url,
            "--tag",
            "v1",
            "--insecure",
            "--output-file",
            "out/o.tar.gz",
        ])
        .args(extra)
        .current_dir(root)
        .env("HOME", root.join("home"))
        .env("TMPDIR", root.join("tmp"))
        .env_remove("DOCKER_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(root.join("home/stderr")).unwrap())
        .spawn()
        .expect("run prlimit (util-linux)");
    // prlimit execs the command: the pid is ocisource's. VmHWM only grows, so the last
    // reading before the exit is the peak.
    let (mut peak, mut ticks) = (0, 0);
    let status = loop {
        if let Some(kib) = vm_hwm_kib(child.id()) {
            peak = peak.max(kib);
        }
        if let Some(t) = cpu_ticks(child.id()) {
            ticks = ticks.max(t);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stderr = std::fs::read_to_string(root.join("home/stderr")).unwrap();
    std::fs::remove_file(root.join("home/stderr")).unwrap();
    let mut files = Vec::new();
    walk(root, root, &mut files);
    Limited {
        code: status.code(),
        stderr,
        peak_rss_kib: peak,
        cpu_ms: ticks * 10,
        files,
    }
}
