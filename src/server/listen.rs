//! The accept loop of every listener ([`accept_loop`]), and the connections of the metrics
//! and probe listeners under their axum routes, bounded against slow and greedy clients: hyper's
//! HTTP/1 connection with a header-read timeout (which also ends idle keep-alive
//! connections), an idle timeout on every connection (no byte moved either way: a client
//! that stops reading a download is dropped), a cap on open connections, a share of them per
//! peer address (the peer's next connection is answered 503 with `Retry-After` and closed),
//! `TCP_NODELAY`, and a shutdown that lets in-flight responses finish for a grace period and
//! then drops whatever is left, whatever the clients do. When every slot is held, the
//! connection idle longest is shed for the new one (`slots.rs`; only the artifact listener
//! says when its connections are idle); with none idle, the new client waits for a slot.
//! `axum::serve` exposes none of these settings, so this uses hyper and hyper-util directly,
//! as axum's own `serve` does underneath.
//!
//! `/healthz` stays 200 while the artifact listener is full: a new client is then only kept
//! waiting when every slot is in the middle of a response (idle ones are shed, and one peer
//! holds at most a quarter of them), and restarting the pod would abort every one of those
//! downloads and serve nobody sooner; the idle timeout bounds how long a stalled download
//! keeps its slot.

use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub(super) use super::slots::Slot;
use super::slots::Slots;

/// Bounds on the server's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time a client has to send a request's headers; also how long a kept-alive
    /// connection may wait for its next request.
    pub header_read_timeout: Duration,
    /// A connection on which no byte moved either way for this long is closed.
    pub idle_timeout: Duration,
    /// Connections served at once; past it the connection idle longest is shed, or with
    /// none idle the next client waits in the listen backlog.
    pub max_connections: usize,
    /// Connections one peer address may hold; its next one is answered 503 and closed.
    pub max_per_peer: usize,
    /// Requests one connection may carry (artifact listener): the last answer says
    /// `Connection: close`, as nginx's `keepalive_requests`.
    pub max_requests: u32,
    /// Age past which a connection is closed once it is between requests (artifact
    /// listener), as nginx's `keepalive_time`: a reply in flight is never cut.
    pub max_age: Duration,
    /// After shutdown starts, in-flight responses get this long to finish.
    pub grace_period: Duration,
}

impl Default for ConnectionLimits {
    /// 10 s for headers, 60 s idle, 256 connections and no share per peer, 1,000
    /// requests or one hour per connection (nginx's defaults), 5 s grace (the chart gives
    /// the pod 10 s to stop). The probe listener's: its client, the kubelet, is one peer
    /// (the node's address) that opens a connection per probe, so a share would only
    /// ever limit the kubelet itself.
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 256,
            max_per_peer: 256,
            max_requests: 1000,
            max_age: Duration::from_secs(3600),
            grace_period: Duration::from_secs(5),
        }
    }
}

impl ConnectionLimits {
    /// The metrics listener's: [`ConnectionLimits::default`] with at most
    /// [`METRICS_CONNECTIONS`] connections. Its page is rendered whole per request (one
    /// line per object per gauge, ~4 MiB at 10,000 objects) and held until the client
    /// has read it, so 256 slow readers could hold a GiB; a scraper needs one connection.
    /// The probe listener keeps the default: its answers are a few bytes, and a small cap
    /// would let a few idle connections starve the kubelet's probes.
    pub fn metrics() -> Self {
        Self {
            max_connections: METRICS_CONNECTIONS,
            max_per_peer: METRICS_CONNECTIONS,
            ..Self::default()
        }
    }

    /// The artifact listener's: [`ConnectionLimits::default`] with [`ARTIFACT_CONNECTIONS`]
    /// connections, a quarter of them per peer address. A connection costs at most 34 KiB
    /// (a 16 KiB request head buffer and a reply head carrying at most 16 KiB of small
    /// body; larger bodies go by `sendfile`), so 1,024 cost at most 34 MiB, the serving
    /// term of the memory bound (docs/performance.md). A quarter (256) is far more than
    /// one consumer pod needs (a Flux controller fetches at most `--concurrent`
    /// artifacts at once, and Go keeps few idle connections per host) and still leaves
    /// room behind a NAT or an ingress that shows many clients as one address, while no
    /// single address can take more than a quarter of the server.
    pub fn artifacts() -> Self {
        Self {
            max_connections: ARTIFACT_CONNECTIONS,
            max_per_peer: ARTIFACT_CONNECTIONS / 4,
            ..Self::default()
        }
    }
}

/// Connections the metrics listener serves at once.
pub const METRICS_CONNECTIONS: usize = 8;
/// Connections the artifact listener serves at once ([`ConnectionLimits::artifacts`]).
pub const ARTIFACT_CONNECTIONS: usize = 1024;

/// Largest request head kept in memory per connection (hyper's floor is 8 KiB; artifact
/// requests are a few hundred bytes).
const MAX_HEAD_BYTES: usize = 64 << 10;
/// Pause after a failed `accept` (e.g. out of file descriptors) before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// While every slot is busy, how often the accept loop looks again for an idle one.
const SHED_RETRY: Duration = Duration::from_millis(50);
/// Refusals (503 to a peer past its share) in flight at once; past it a refused
/// connection is closed without an answer.
const REFUSALS: usize = 64;
/// How long a refused connection is kept for its client to read the 503.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);
/// The answer to a peer past its share. A 503 with `Retry-After` rather than a bare close:
/// Go's client reports a close on a fresh connection as an unexplained EOF, while Flux's
/// artifact fetcher (go-retryablehttp) retries a 503 after the `Retry-After` it names.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
Connection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 51\r\n\r\n\
too many connections from this address; retry later";

/// Serves `router` on `listener` within `limits` until `shutdown` completes, then stops
/// accepting, lets open connections finish for the grace period and drops the rest.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    accept_loop(listener, limits, shutdown, move |stream, slot, stop| {
        connection(stream, slot, router.clone(), limits, stop)
    })
    .await;
}

/// The accept loop of every listener: accepts, refuses a peer past its share, takes a free
/// slot (shedding the connection idle longest when none is free, or waiting for one when
/// all are busy), sets `TCP_NODELAY`, runs `serve_one` on each connection with its [`Slot`]
/// and a receiver that changes (its sender is dropped) when shutdown starts; once
/// `shutdown` completes, stops accepting, gives open connections the grace period and
/// drops the rest.
pub(super) async fn accept_loop<F, C>(
    listener: TcpListener,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
    mut serve_one: F,
) where
    F: FnMut(TcpStream, Slot, watch::Receiver<()>) -> C,
    C: Future<Output = ()> + Send + 'static,
{
    let free = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let held = Arc::new(Slots::new());
    let refusals = Arc::new(Semaphore::new(REFUSALS));
    let (stop_tx, stop_rx) = watch::channel(());
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let peer = peer.ip().to_canonical();
        if held.held_by(peer) >= limits.max_per_peer.max(1) {
            tracing::debug!(%peer, "refusing a connection past the peer's share");
            if let Ok(permit) = refusals.clone().try_acquire_owned() {
                connections.spawn(refuse(stream, permit));
            }
            continue;
        }
        let permit = match free.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => tokio::select! {
                () = &mut shutdown => break,
                permit = freed_slot(&free, &held) => match permit {
                    Some(permit) => permit,
                    None => break,
                },
            },
        };
        // Nagle's algorithm holds small writes back for the peer's delayed ACK: with
        // keep-alive, every response head would wait ~40 ms.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "failed to set TCP_NODELAY");
        }
        let served = serve_one(stream, held.hold(peer, permit), stop_rx.clone());
        connections.spawn(served);
    }
    drop(listener);
    drop(stop_tx);
    let drained = tokio::time::timeout(limits.grace_period, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::info!(
            connections = connections.len(),
            "grace period over; dropping the remaining connections"
        );
        connections.shutdown().await;
    }
}

/// A slot for the connection just accepted while all are held: the idle connection shed
/// for it, or the first to end when all are busy; `None` if the semaphore closed.
async fn freed_slot(free: &Arc<Semaphore>, held: &Slots) -> Option<OwnedSemaphorePermit> {
    loop {
        if held.shed_oldest_idle() {
            // It closes as soon as it is woken, or as soon as its request arrives.
            return free.clone().acquire_owned().await.ok();
        }
        tokio::select! {
            permit = free.clone().acquire_owned() => return permit.ok(),
            () = tokio::time::sleep(SHED_RETRY) => {}
        }
    }
}

/// Answers a connection past its peer's share with [`REFUSED`], then reads what the client
/// sent until it closes or [`REFUSAL_LINGER`] passes: closing with its request unread
/// would reset the connection, and the client could lose the answer.
async fn refuse(mut stream: TcpStream, _permit: OwnedSemaphorePermit) {
    let _ = tokio::time::timeout(REFUSAL_LINGER, async {
        stream.write_all(REFUSED).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 512];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), io::Error>(())
    })
    .await;
}

/// Serves one connection until it ends, stays idle too long, or shutdown (then gracefully);
/// it never says it is idle, so it is never shed.
async fn connection(
    stream: TcpStream,
    _slot: Slot,
    router: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<()>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Tracked {
        inner: stream,
        activity: activity.clone(),
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let mut conn = pin!(builder.serve_connection(io, TowerToHyperService::new(router)));
    let mut idle = pin!(activity.idle_for(limits.idle_timeout));
    let mut stopping = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = &mut idle => {
                tracing::debug!("closing an idle connection");
                return;
            }
            _ = stop.changed(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// When a connection last moved a byte, in milliseconds since it opened.
struct Activity {
    opened: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            opened: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Completes once no byte moved for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = self.opened + last + timeout;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A TCP stream that records every read or write that moved bytes.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.moved(&polled);
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.moved(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl Tracked {
    fn moved(&self, polled: &Poll<io::Result<usize>>) {
        if matches!(polled, Poll::Ready(Ok(n)) if *n > 0) {
            self.activity.touch();
        }
    }
}
