//! Serving one stored artifact with the HTTP semantics consumers and caches expect from a
//! static file server (Go's `http.FileServer`, what Flux's source-controller serves with,
//! and nginx): `Last-Modified` and `If-Modified-Since`, an `ETag` (nginx's form, from the
//! modification time and length) and `If-None-Match`, both answering 304; a single
//! `Range` (206 with `Content-Range`, 416 when unsatisfiable, `If-Range` honoured);
//! `Accept-Ranges: bytes`. Several ranges in one request are answered with the whole
//! file, which RFC 9110 allows.
//!
//! Each request costs one hand-off to the blocking pool to check and open the file (its
//! path is canonicalised and must stay under the storage root, itself canonicalised once;
//! the file is opened
//! non-blocking and checked through its handle, so a FIFO or device is a 404, not a hung
//! request), which also reads a small file or range whole; larger bodies are read with
//! positioned reads (`pread`) of [`CHUNK`] bytes, one hand-off each, never the whole file.
//! tower-http's `ServeFile` has most of these semantics but opens the path it is given
//! as it is (a FIFO there blocks a thread until a writer appears) and reads through
//! `tokio::fs::File`'s extra buffer copy, so serving stays here.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

/// A body up to this size is read in the same hand-off that opens the file.
const SMALL: usize = 64 * 1024;

/// Read size per chunk when streaming a larger body: fewer hand-offs to the blocking pool
/// (each costs two thread wake-ups), at the price of this much memory per download that
/// waits on a slow client.
const CHUNK: usize = 256 * 1024;

/// The storage root, canonicalised once it exists: it does not move while the server
/// runs, so each request resolves only its own path.
pub(super) struct Root {
    given: PathBuf,
    canonical: OnceLock<PathBuf>,
}

impl Root {
    /// The root at `given` (which may not exist yet).
    pub(super) fn new(given: PathBuf) -> Self {
        Self {
            given,
            canonical: OnceLock::new(),
        }
    }

    /// The canonical root, or `None` while it does not exist.
    fn canonical(&self) -> Option<&Path> {
        if let Some(c) = self.canonical.get() {
            return Some(c);
        }
        let c = std::fs::canonicalize(&self.given).ok()?;
        Some(self.canonical.get_or_init(|| c))
    }
}

/// A stored file, checked and opened.
struct Opened {
    file: File,
    len: u64,
    modified: SystemTime,
    content_type: &'static str,
}

/// What the request's `Range` asks for, against a file of a known length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wanted {
    /// The whole file (no `Range`, one the server ignores, or several ranges).
    Whole,
    /// Bytes `start..=end`.
    Part { start: u64, end: u64 },
    /// No byte of the file is in the range: 416.
    Unsatisfiable,
}

/// The response to `method` for the file at `relative` under `root` (404 for anything
/// that is not a visible regular file inside it).
pub(super) async fn serve(
    root: Arc<Root>,
    relative: PathBuf,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let head = method == Method::HEAD;
    let opened = tokio::task::spawn_blocking(move || {
        let opened = open_checked(&root, &relative)?;
        let tag = etag(opened.modified, opened.len);
        let answered = answer(&headers, &tag, opened.modified, opened.len);
        // A small body is read right away, saving a second hand-off.
        let body = match (head, answered) {
            (false, Answer::Send(w)) => {
                let (start, n) = span(w, opened.len);
                (n <= SMALL as u64)
                    .then(|| read_at(&opened.file, start, n))
                    .transpose()
                    .ok()?
            }
            _ => None,
        };
        Some((opened, tag, answered, body))
    })
    .await
    .ok()
    .flatten();
    let Some((opened, tag, answered, small)) = opened else {
        return super::not_found();
    };
    let mut out = HeaderMap::new();
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(opened.content_type),
    );
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(opened.modified)) {
        out.insert(header::LAST_MODIFIED, v);
    }
    if let Ok(v) = HeaderValue::from_str(&tag) {
        out.insert(header::ETAG, v);
    }
    let wanted = match answered {
        Answer::NotModified => return (StatusCode::NOT_MODIFIED, out).into_response(),
        Answer::Send(w) => w,
    };
    let status = match wanted {
        Wanted::Whole => StatusCode::OK,
        Wanted::Part { start, end } => {
            let range = format!("bytes {start}-{end}/{}", opened.len);
            if let Ok(v) = HeaderValue::from_str(&range) {
                out.insert(header::CONTENT_RANGE, v);
            }
            StatusCode::PARTIAL_CONTENT
        }
        Wanted::Unsatisfiable => {
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{}", opened.len)) {
                out.insert(header::CONTENT_RANGE, v);
            }
            return (StatusCode::RANGE_NOT_SATISFIABLE, out).into_response();
        }
    };
    let (start, n) = span(wanted, opened.len);
    out.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    let body = match small {
        _ if head => Body::empty(),
        Some(bytes) => Body::from(bytes),
        None => Body::from_stream(chunks(Arc::new(opened.file), start, n)),
    };
    (status, out, body).into_response()
}

/// What to answer once the conditional headers are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    NotModified,
    Send(Wanted),
}

/// Applies RFC 9110's preconditions for GET and HEAD (If-None-Match over
/// If-Modified-Since), then `Range` unless `If-Range` names another version.
fn answer(headers: &HeaderMap, tag: &str, modified: SystemTime, len: u64) -> Answer {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(none_match) = text(header::IF_NONE_MATCH) {
        if etag_listed(none_match, tag) {
            return Answer::NotModified;
        }
    } else if let Some(since) =
        text(header::IF_MODIFIED_SINCE).and_then(|s| httpdate::parse_http_date(s).ok())
    {
        if seconds(modified) <= seconds(since) {
            return Answer::NotModified;
        }
    }
    let Some(range) = text(header::RANGE) else {
        return Answer::Send(Wanted::Whole);
    };
    let current = match text(header::IF_RANGE) {
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
fn span(wanted: Wanted, len: u64) -> (u64, u64) {
    match wanted {
        Wanted::Part { start, end } => (start, end - start + 1),
        _ => (0, len),
    }
}

/// nginx's ETag: modification time (seconds) and length, in hex.
fn etag(modified: SystemTime, len: u64) -> String {
    format!("\"{:x}-{len:x}\"", seconds(modified))
}

fn seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Opens `relative` under `root` if it is a regular file that stays inside the root once
/// symlinks are resolved. Blocking.
fn open_checked(root: &Root, relative: &Path) -> Option<Opened> {
    let root = root.canonical()?;
    let full = std::fs::canonicalize(root.join(relative)).ok()?;
    if !full.starts_with(root) {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&full)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    Some(Opened {
        file,
        len: meta.len(),
        modified: meta.modified().unwrap_or(UNIX_EPOCH),
        content_type: content_type(&full),
    })
}

/// `n` bytes at `offset`; a file that got shorter is an error (the response promised `n`).
fn read_at(file: &File, offset: u64, n: u64) -> std::io::Result<Bytes> {
    let mut buf = vec![0u8; usize::try_from(n).map_err(std::io::Error::other)?];
    file.read_exact_at(&mut buf, offset)?;
    Ok(Bytes::from(buf))
}

/// `n` bytes of `file` from `offset`, as chunks of at most [`CHUNK`] bytes.
fn chunks(
    file: Arc<File>,
    offset: u64,
    n: u64,
) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send {
    futures::stream::try_unfold((file, offset, n), |(file, offset, left)| async move {
        if left == 0 {
            return Ok(None);
        }
        let take = left.min(CHUNK as u64);
        let reader = file.clone();
        let bytes = tokio::task::spawn_blocking(move || read_at(&reader, offset, take))
            .await
            .map_err(std::io::Error::other)??;
        Ok(Some((bytes, (file, offset + take, left - take))))
    })
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
