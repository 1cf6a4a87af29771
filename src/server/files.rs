//! The artifact listener's HTTP/1.1 server: GET and HEAD of stored files, with the bodies
//! sent by `sendfile(2)` straight from the page cache to the socket.
//!
//! Why not hyper, as the metrics and probe listeners use: a hyper body is a stream of byte
//! buffers, so every artifact byte crossed user space twice (read into a buffer, written
//! from it), in hand-offs to the blocking pool, and every request took one more hand-off to
//! open its file. Measured against Go's `http.FileServer` (what source-controller serves
//! with, which uses `sendfile`) in `hack/bench.sh` scenario 9, that design reached 0.69x its
//! requests/s, 0.74x its MiB/s and 3.8x its memory under slow readers. Serving static files
//! is a small part of HTTP/1.1 and is all this does: requests are parsed by `httparse`
//! (hyper's own parser); no request body is ever read (a request that announces one is
//! answered and its connection closed, so a body can never be taken for a request); no
//! chunked encoding, upgrade or trailer. Keep-alive and pipelining work as in HTTP/1.1.
//!
//! Bounds, as for the other listeners (`listen.rs` owns the accept loop: connection cap,
//! share per peer, `TCP_NODELAY`, bounded shutdown): a request head must arrive whole within
//! the header timeout (which also ends idle kept-alive connections) and within [`MAX_HEAD`]
//! bytes; a response on which no byte moved for the idle timeout is abandoned with its
//! connection; a connection carries at most `max_requests` requests and is closed between
//! requests once past `max_age`. While it waits for a request with nothing buffered it tells its [`Slot`] it is
//! idle, and closes when the accept loop sheds it for a new client.
//! A connection holds a small head buffer and no body buffer while a slow reader drains
//! its download.
//!
//! The file is opened and sent on the connection's task, not in the blocking pool: from
//! the page cache these calls take microseconds, less than a hand-off to a thread. On a
//! storage volume that must go to a slow disk, they stall a runtime worker for that read,
//! as nginx's workers are stalled without `aio threads`.

use std::cell::RefCell;
use std::fs::File;
use std::future::Future;
use std::io::{self, Write as _};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

use super::artifact::{self, Answer, Conditions, Root, StoredFile, Wanted};
use super::listen::{self, ConnectionLimits, Slot};

/// Largest request head accepted (a 431 past it); artifact requests are a few hundred
/// bytes, and nginx's default is 8 KiB per header line.
pub const MAX_HEAD: usize = 16 << 10;
/// Most header fields in one request (a 431 past it).
const MAX_HEADERS: usize = 64;
/// A body up to this size is read and written with its head in one write.
const SMALL: u64 = 16 << 10;
/// The most one `sendfile` call is asked for (the kernel sends what the socket takes):
/// a fast reader's transfer is cut into such steps, and the connection lets the other
/// connections on its thread run between two (tokio's cooperative budget), so one
/// client draining a large file at memory speed cannot hold a worker thread for all of it.
const SENDFILE_CHUNK: u64 = 1 << 20;

/// Serves the files under `storage_root` on `listener` within `limits` until `shutdown`
/// completes, then stops accepting, lets responses in flight finish for the grace period
/// and drops the rest.
pub async fn serve_artifacts(
    listener: TcpListener,
    storage_root: PathBuf,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let root = Arc::new(Root::new(storage_root));
    listen::accept_loop(listener, limits, shutdown, move |stream, slot, stop| {
        connection(stream, slot, root.clone(), limits, stop)
    })
    .await;
}

/// What one request gets.
struct Reply {
    /// Status line, header fields and, for a small body, the body.
    head: Vec<u8>,
    /// A larger body, sent from the file after the head.
    file: Option<(File, u64, u64)>,
    /// The connection ends after this reply.
    close: bool,
}

impl Reply {
    /// A reply whose bytes are all in `head`.
    fn head_only(head: Vec<u8>, keep_alive: bool) -> Self {
        Self {
            head,
            file: None,
            close: !keep_alive,
        }
    }
}

/// The next step on a connection's buffered bytes.
enum Step {
    /// The head is not complete yet.
    Partial,
    /// A reply, and how many buffered bytes its request used.
    Reply(Reply, usize),
}

/// Serves one connection: request heads are read, answered in order, until the client
/// closes, a timeout fires, a reply closes it (the last its request budget allows says
/// `Connection: close`), it is past its age between two requests, the accept loop sheds it
/// while it waits for a request with nothing buffered, or shutdown comes between two
/// requests.
async fn connection(
    mut stream: TcpStream,
    slot: Slot,
    root: Arc<Root>,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<()>,
) {
    let mut buf: Vec<u8> = Vec::new();
    let opened = Instant::now();
    let mut served: u32 = 0;
    loop {
        let now = Instant::now();
        if now - opened >= limits.max_age {
            // Between requests, as the header timeout closes it.
            return;
        }
        let deadline = now + limits.header_read_timeout;
        served = served.saturating_add(1);
        let may_keep_alive = served < limits.max_requests;
        let (reply, used) = loop {
            if !buf.is_empty() {
                if let Step::Reply(reply, used) = step(&root, &buf, may_keep_alive) {
                    break (reply, used);
                }
            }
            if buf.len() >= MAX_HEAD {
                let reply = error(431, "request header fields too large", "", false);
                let _ = write_all(&mut stream, &reply.head, limits.idle_timeout).await;
                return;
            }
            // Nothing in flight and nothing buffered: the accept loop may shed it.
            let idle = buf.is_empty();
            if idle {
                slot.idle(now);
            }
            buf.reserve((MAX_HEAD - buf.len()).min(4096));
            tokio::select! {
                read = tokio::time::timeout_at(deadline, stream.read_buf(&mut buf)) => match read {
                    // A request began; unless the connection was shed just before.
                    Ok(Ok(n)) if n > 0 => if idle && !slot.busy() {
                        return;
                    },
                    // Closed, failed, or the head did not come in time.
                    _ => return,
                },
                // Shed for a new client, or shutdown: a connection between requests is
                // closed at once.
                () = slot.shed(), if idle => return,
                _ = stop.changed() => return,
            }
        };
        buf.drain(..used);
        if let Err(e) = send(&mut stream, reply.head, reply.file, limits.idle_timeout).await {
            tracing::debug!(error = %e, "artifact response abandoned");
            return;
        }
        if reply.close || stop.has_changed().unwrap_or(true) {
            return;
        }
    }
}

/// Writes a reply: its head (with a small body), then the file's bytes if any.
async fn send(
    stream: &mut TcpStream,
    head: Vec<u8>,
    file: Option<(File, u64, u64)>,
    idle: Duration,
) -> io::Result<()> {
    write_all(stream, &head, idle).await?;
    drop(head);
    if let Some((file, offset, len)) = file {
        send_file(stream, &file, offset, len, idle).await?;
    }
    Ok(())
}

/// `write_all`, abandoned when the client takes nothing for `idle`.
async fn write_all(stream: &mut TcpStream, mut bytes: &[u8], idle: Duration) -> io::Result<()> {
    while !bytes.is_empty() {
        let n = tokio::time::timeout(idle, stream.write(bytes))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
    }
    Ok(())
}

/// Sends `len` bytes of `file` from `offset` with `sendfile`, abandoned when the client
/// takes nothing for `idle`; a file shorter than promised is an error (found at once, or
/// after `idle` when it ends in the middle of a send: stored files are replaced by rename,
/// never cut short, so only a file altered behind the controller's back can).
async fn send_file(
    stream: &TcpStream,
    file: &File,
    mut offset: u64,
    mut left: u64,
    idle: Duration,
) -> io::Result<()> {
    // A short send means the socket buffer was full when the kernel stopped. A reader
    // that keeps up has already taken more by the next call, so that call goes at once;
    // a slow one has not, and every wakeup would cost a second sendfile that only learns
    // EAGAIN. So once a retry found the socket still full, the connection is `patient`:
    // a short send then counts its bytes and answers WouldBlock, tokio clears the write
    // readiness and the wait below sleeps at once, until a whole step goes through again.
    let mut patient = false;
    while left > 0 {
        let count = usize::try_from(left.min(SENDFILE_CHUNK)).unwrap_or(usize::MAX);
        let mut short = 0;
        let sent = stream.try_io(Interest::WRITABLE, || {
            let n = rustix::fs::sendfile(stream, file, Some(&mut offset), count)?;
            if patient && n > 0 && n < count {
                short = n;
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        left -= short as u64;
        match sent {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                left -= n as u64;
                // Not patient: a short send is retried at once. Patient: a whole step
                // went through, so the reader keeps up again.
                patient = false;
                tokio::task::consume_budget().await;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                patient = true;
                tokio::time::timeout(idle, stream.writable())
                    .await
                    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The artifact listener's reply to the first request in `sent`, for the files under
/// `storage_root`: the reply's head (with a small body, or followed by `file_bytes`
/// bytes from the file), whether the connection ends after it, and how many bytes of
/// `sent` the request used; `None` while the head is incomplete. The fuzz targets' entry.
#[cfg(feature = "fuzzing")]
pub fn artifact_reply(
    storage_root: &std::path::Path,
    sent: &[u8],
) -> Option<(Vec<u8>, u64, bool, usize)> {
    let root = Root::new(storage_root.to_path_buf());
    match step(&root, sent, true) {
        Step::Partial => None,
        Step::Reply(r, used) => {
            let file_bytes = r.file.as_ref().map_or(0, |f| f.2);
            Some((r.head, file_bytes, r.close, used))
        }
    }
}

/// Parses the head at the start of `buf` and decides its reply; with `may_keep_alive`
/// false, the reply closes the connection whatever the request asked.
fn step(root: &Root, buf: &[u8], may_keep_alive: bool) -> Step {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    let used = match request.parse(buf) {
        Ok(httparse::Status::Partial) => return Step::Partial,
        Ok(httparse::Status::Complete(n)) => n,
        Err(httparse::Error::TooManyHeaders) => {
            return Step::Reply(error(431, "too many header fields", "", false), buf.len())
        }
        Err(_) => return Step::Reply(error(400, "malformed request", "", false), buf.len()),
    };
    Step::Reply(reply(root, &request, may_keep_alive), used)
}

/// The reply to one parsed request.
fn reply(root: &Root, request: &httparse::Request<'_, '_>, may_keep_alive: bool) -> Reply {
    let (Some(method), Some(target), Some(version)) =
        (request.method, request.path, request.version)
    else {
        return error(400, "malformed request", "", false);
    };
    let mut keep_alive = version == 1;
    let mut has_body = false;
    let mut asked = Conditions::default();
    for field in request.headers.iter() {
        let name = field.name;
        // Body framing first, whatever the value's bytes: a body announced in a value
        // that is not text still ends the connection.
        if name.eq_ignore_ascii_case("transfer-encoding") {
            has_body = true;
            continue;
        }
        if name.eq_ignore_ascii_case("content-length") {
            has_body |= field.value.trim_ascii() != b"0";
            continue;
        }
        let Ok(value) = std::str::from_utf8(field.value) else {
            continue;
        };
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") && version == 0 {
                    keep_alive = true;
                }
            }
        } else {
            asked.note(name, value);
        }
    }
    // A body is never read: the connection ends after the reply, so it is never parsed
    // as the next request.
    let keep_alive = keep_alive && !has_body && may_keep_alive;
    let head = method == "HEAD";
    if method != "GET" && !head {
        return error(
            405,
            "method not allowed",
            "Allow: GET, HEAD\r\n",
            keep_alive,
        );
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let Some(stored) = super::safe_relative(path).and_then(|r| artifact::open_checked(root, &r))
    else {
        return not_found(head, keep_alive);
    };
    file_reply(stored, &asked, head, keep_alive)
}

/// The reply for an opened file, by its preconditions and range.
fn file_reply(stored: StoredFile, asked: &Conditions<'_>, head: bool, keep_alive: bool) -> Reply {
    let tag = artifact::etag(stored.modified, stored.len);
    let mut out = Vec::with_capacity(320);
    let wanted = match artifact::answer(asked, &tag, stored.modified, stored.len) {
        Answer::NotModified => {
            status_line(&mut out, 304, keep_alive);
            validators(&mut out, &tag, stored.modified);
            out.extend_from_slice(b"\r\n");
            return Reply::head_only(out, keep_alive);
        }
        Answer::Send(w) => w,
    };
    let len = stored.len;
    let code = match wanted {
        Wanted::Whole => 200,
        Wanted::Part { .. } => 206,
        Wanted::Unsatisfiable => 416,
    };
    status_line(&mut out, code, keep_alive);
    validators(&mut out, &tag, stored.modified);
    let _ = write!(out, "Content-Type: {}\r\n", stored.content_type);
    match wanted {
        Wanted::Part { start, end } => {
            let _ = write!(out, "Content-Range: bytes {start}-{end}/{len}\r\n");
        }
        Wanted::Unsatisfiable => {
            let _ = write!(
                out,
                "Content-Range: bytes */{len}\r\nContent-Length: 0\r\n\r\n"
            );
            return Reply::head_only(out, keep_alive);
        }
        Wanted::Whole => {}
    }
    let (start, n) = artifact::span(wanted, len);
    let _ = write!(out, "Content-Length: {n}\r\n\r\n");
    if head || n == 0 {
        return Reply::head_only(out, keep_alive);
    }
    if n <= SMALL {
        let at = out.len();
        // n <= SMALL fits in usize.
        out.resize(at + n as usize, 0);
        if stored.file.read_exact_at(&mut out[at..], start).is_err() {
            // Shorter than its metadata said (it is being replaced): nothing sent yet.
            return not_found(head, keep_alive);
        }
        return Reply::head_only(out, keep_alive);
    }
    Reply {
        head: out,
        file: Some((stored.file, start, n)),
        close: !keep_alive,
    }
}

/// `Cache-Control`, `Accept-Ranges`, `Last-Modified` and `ETag`, sent with every file reply.
fn validators(out: &mut Vec<u8>, tag: &str, modified: SystemTime) {
    out.extend_from_slice(b"Cache-Control: no-cache\r\nAccept-Ranges: bytes\r\nLast-Modified: ");
    MODIFIED.with(|cached| http_date(cached, modified, out));
    let _ = write!(out, "\r\nETag: {tag}\r\n");
}

fn not_found(head: bool, keep_alive: bool) -> Reply {
    let mut r = error(404, "not found", "", keep_alive);
    if head {
        // The same head, without the body.
        let end = r.head.len() - "not found".len();
        r.head.truncate(end);
    }
    r
}

/// A short plain-text reply, with `fields` (each ending in CRLF) in its head; `keep_alive`
/// false closes the connection after it.
fn error(code: u16, text: &str, fields: &str, keep_alive: bool) -> Reply {
    let mut out = Vec::with_capacity(160);
    status_line(&mut out, code, keep_alive);
    let _ = write!(
        out,
        "{fields}Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    );
    Reply::head_only(out, keep_alive)
}

/// The status line, `Date` and, when the connection ends after it, `Connection: close`.
fn status_line(out: &mut Vec<u8>, code: u16, keep_alive: bool) {
    let reason = match code {
        200 => "OK",
        206 => "Partial Content",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        416 => "Range Not Satisfiable",
        431 => "Request Header Fields Too Large",
        _ => "",
    };
    let _ = write!(out, "HTTP/1.1 {code} {reason}\r\nDate: ");
    date_now(out);
    out.extend_from_slice(b"\r\n");
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
}

thread_local! {
    /// The current second's HTTP date, formatted once per second per thread.
    static DATE: DateCache = const { RefCell::new((u64::MAX, String::new())) };
    /// The last served file's `Last-Modified`: a thread mostly serves the same few files.
    static MODIFIED: DateCache = const { RefCell::new((u64::MAX, String::new())) };
}

/// A second since the epoch and its HTTP date.
type DateCache = RefCell<(u64, String)>;

fn date_now(out: &mut Vec<u8>) {
    DATE.with(|cached| http_date(cached, SystemTime::now(), out));
}

/// Appends `at`'s HTTP date (whole seconds), formatting it only when its second differs
/// from the one `cached` holds.
fn http_date(cached: &DateCache, at: SystemTime, out: &mut Vec<u8>) {
    let second = artifact::seconds(at);
    let (seen, text) = &mut *cached.borrow_mut();
    if *seen != second {
        *seen = second;
        *text = httpdate::fmt_http_date(at);
    }
    out.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
#[path = "files_tests.rs"]
mod tests;
