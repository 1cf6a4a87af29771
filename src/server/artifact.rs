//! What to answer for one stored artifact, with the HTTP semantics consumers and caches
//! expect from a static file server (Go's `http.FileServer`, what Flux's source-controller
//! serves with, and nginx): `Last-Modified` and `If-Modified-Since`, an `ETag` (nginx's
//! form, from the modification time and length) and `If-None-Match`, both answering 304;
//! a single `Range` (206 with `Content-Range`, 416 when unsatisfiable, `If-Range`
//! honoured); `Accept-Ranges: bytes`. Several ranges in one request are answered with the
//! whole file, which RFC 9110 allows. The bytes are written by `files.rs`.
//!
//! The file is opened relative to the storage root's directory handle with `openat2`'s
//! `RESOLVE_BENEATH` (one system call: no `..`, no absolute symlink, no symlink out of the
//! root; the `latest.tar.gz` links inside it resolve), non-blocking, and checked through
//! its handle, so a FIFO or device is a 404, not a hung request. A kernel without
//! `openat2` (before Linux 5.6, or a sandbox that refuses it) gets the same check the slow
//! way: the path canonicalised and compared with the canonical root.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// The storage root, opened once it exists: it does not move while the server runs, so
/// each request resolves only its own path, from the root's handle.
pub(super) struct Root {
    given: PathBuf,
    opened: OnceLock<Opened>,
}

/// The root's directory handle and canonical path (the latter for the fallback check).
struct Opened {
    dir: OwnedFd,
    canonical: PathBuf,
}

impl Root {
    /// The root at `given` (which may not exist yet).
    pub(super) fn new(given: PathBuf) -> Self {
        Self {
            given,
            opened: OnceLock::new(),
        }
    }

    /// The opened root, or `None` while it does not exist.
    fn opened(&self) -> Option<&Opened> {
        if let Some(o) = self.opened.get() {
            return Some(o);
        }
        let canonical = std::fs::canonicalize(&self.given).ok()?;
        let dir = rustix::fs::open(
            &canonical,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        Some(self.opened.get_or_init(|| Opened { dir, canonical }))
    }
}

/// A stored file, checked and opened.
pub(super) struct StoredFile {
    pub(super) file: File,
    pub(super) len: u64,
    pub(super) modified: SystemTime,
    pub(super) content_type: &'static str,
}

/// What the request's `Range` asks for, against a file of a known length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wanted {
    /// The whole file (no `Range`, one the server ignores, or several ranges).
    Whole,
    /// Bytes `start..=end`.
    Part { start: u64, end: u64 },
    /// No byte of the file is in the range: 416.
    Unsatisfiable,
}

/// The request headers the answer depends on (values as sent).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Conditions<'a> {
    pub(super) if_none_match: Option<&'a str>,
    pub(super) if_modified_since: Option<&'a str>,
    pub(super) range: Option<&'a str>,
    pub(super) if_range: Option<&'a str>,
}

impl<'a> Conditions<'a> {
    /// Takes `name: value` if it is one of the headers the answer depends on (names are
    /// case-insensitive); a repeated header keeps its first value.
    pub(super) fn note(&mut self, name: &str, value: &'a str) {
        let slot = if name.eq_ignore_ascii_case("if-none-match") {
            &mut self.if_none_match
        } else if name.eq_ignore_ascii_case("if-modified-since") {
            &mut self.if_modified_since
        } else if name.eq_ignore_ascii_case("range") {
            &mut self.range
        } else if name.eq_ignore_ascii_case("if-range") {
            &mut self.if_range
        } else {
            return;
        };
        slot.get_or_insert(value);
    }
}

/// What to answer once the conditional headers are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    NotModified,
    Send(Wanted),
}

/// Applies RFC 9110's preconditions for GET and HEAD (If-None-Match over
/// If-Modified-Since), then `Range` unless `If-Range` names another version.
pub(super) fn answer(asked: &Conditions<'_>, tag: &str, modified: SystemTime, len: u64) -> Answer {
    if let Some(none_match) = asked.if_none_match {
        if etag_listed(none_match, tag) {
            return Answer::NotModified;
        }
    } else if let Some(since) = asked
        .if_modified_since
        .and_then(|s| httpdate::parse_http_date(s).ok())
    {
        if seconds(modified) <= seconds(since) {
            return Answer::NotModified;
        }
    }
    let Some(range) = asked.range else {
        return Answer::Send(Wanted::Whole);
    };
    let current = match asked.if_range {
        None => true,
        Some(v) if v.starts_with('"') => v == tag,
        Some(v) => httpdate::parse_http_date(v).is_ok_and(|d| seconds(d) == seconds(modified)),
    };
    Answer::Send(if current {
        byte_range(range, len)
    } else {
        Wanted::Whole
    })
}

/// Whether `tag` is in an `If-None-Match` list (weak comparison, `*` matches).
fn etag_listed(list: &str, tag: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/") == tag)
}

/// A single `bytes=` range against a file of `len` bytes; anything else is the whole file.
fn byte_range(value: &str, len: u64) -> Wanted {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Wanted::Whole;
    };
    if spec.contains(',') {
        return Wanted::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Wanted::Whole;
    };
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (first.trim(), last.trim()) {
        ("", suffix) => match number(suffix) {
            Some(0) => Wanted::Unsatisfiable,
            Some(n) if len > 0 => Wanted::Part {
                start: len.saturating_sub(n),
                end: len - 1,
            },
            Some(_) => Wanted::Unsatisfiable,
            None => Wanted::Whole,
        },
        (start, end) => {
            let Some(start) = number(start) else {
                return Wanted::Whole;
            };
            if start >= len {
                return Wanted::Unsatisfiable;
            }
            if end.is_empty() {
                return Wanted::Part {
                    start,
                    end: len - 1,
                };
            }
            match number(end) {
                Some(end) if end >= start => Wanted::Part {
                    start,
                    end: end.min(len - 1),
                },
                _ => Wanted::Whole,
            }
        }
    }
}

/// Offset and length of what `wanted` sends.
pub(super) fn span(wanted: Wanted, len: u64) -> (u64, u64) {
    match wanted {
        Wanted::Part { start, end } => (start, end - start + 1),
        _ => (0, len),
    }
}

/// nginx's ETag: modification time (seconds) and length, in hex.
pub(super) fn etag(modified: SystemTime, len: u64) -> String {
    format!("\"{:x}-{len:x}\"", seconds(modified))
}

/// Whole seconds since the epoch (0 before it): the resolution of HTTP dates.
pub(super) fn seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Opens `relative` under `root` if it is a regular file that stays inside the root once
/// symlinks are resolved. `relative` is a plain relative path (`safe_relative`).
pub(super) fn open_checked(root: &Root, relative: &Path) -> Option<StoredFile> {
    let root = root.opened()?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let file = match rustix::fs::openat2(
        &root.dir,
        relative,
        flags,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
            open_canonical(&root.canonical, relative)?
        }
        Err(_) => return None,
    };
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    Some(StoredFile {
        file,
        len: meta.len(),
        modified: http_time(meta.modified().unwrap_or(UNIX_EPOCH)),
        content_type: content_type(relative),
    })
}

/// `t` within what an HTTP date can say (1970 to 9999), so formatting it cannot fail: a
/// file's time is the operator's to set.
fn http_time(t: SystemTime) -> SystemTime {
    // 9999-12-31T23:59:59Z.
    let last = UNIX_EPOCH + Duration::from_secs(253_402_300_799);
    t.clamp(UNIX_EPOCH, last)
}

/// The fallback of [`open_checked`] without `openat2`: canonicalise, compare, open.
fn open_canonical(root: &Path, relative: &Path) -> Option<File> {
    let full = std::fs::canonicalize(root.join(relative)).ok()?;
    if !full.starts_with(root) {
        return None;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&full)
        .ok()
}

fn content_type(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        "application/gzip"
    } else {
        "application/octet-stream"
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "artifact_tests.rs"]
mod tests;
