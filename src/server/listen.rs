//! The accept loop of every listener ([`accept_loop`]), and the connections of the metrics
//! and probe listeners under their axum routes, bounded against slow and greedy clients: hyper's
//! HTTP/1 connection with a header-read timeout (which also ends idle keep-alive
//! connections), an idle timeout on every connection (no byte moved either way: a client
//! that stops reading a download is dropped), a cap on open connections (the next one
//! waits in the listen backlog until a slot frees), `TCP_NODELAY`, and a shutdown that
//! lets in-flight responses finish for a grace period and then drops whatever is left,
//! whatever the clients do. `axum::serve` exposes none of these settings, so this uses
//! hyper and hyper-util directly, as axum's own `serve` does underneath.

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
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Bounds on the server's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Time a client has to send a request's headers; also how long a kept-alive
    /// connection may wait for its next request.
    pub header_read_timeout: Duration,
    /// A connection on which no byte moved either way for this long is closed.
    pub idle_timeout: Duration,
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// After shutdown starts, in-flight responses get this long to finish.
    pub grace_period: Duration,
}

impl Default for Limits {
    /// 10 s for headers, 60 s idle, 256 connections, 5 s grace (the chart gives the pod
    /// 10 s to stop).
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 256,
            grace_period: Duration::from_secs(5),
        }
    }
}

impl Limits {
    /// The metrics listener's: [`Limits::default`] with at most
    /// [`METRICS_CONNECTIONS`] connections. Its page is rendered whole per request (one
    /// line per object per gauge, ~4 MiB at 10,000 objects) and held until the client
    /// has read it, so 256 slow readers could hold a GiB; a scraper needs one connection.
    /// The probe listener keeps the default: its answers are a few bytes, and a small cap
    /// would let a few idle connections starve the kubelet's probes.
    pub fn metrics() -> Self {
        Self {
            max_connections: METRICS_CONNECTIONS,
            ..Self::default()
        }
    }
}

/// Connections the metrics listener serves at once.
pub const METRICS_CONNECTIONS: usize = 8;

/// Largest request head kept in memory per connection (hyper's floor is 8 KiB; artifact
/// requests are a few hundred bytes).
const MAX_HEAD_BYTES: usize = 64 << 10;
/// Pause after a failed `accept` (e.g. out of file descriptors) before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` within `limits` until `shutdown` completes, then stops
/// accepting, lets open connections finish for the grace period and drops the rest.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    accept_loop(listener, limits, shutdown, move |stream, stop| {
        connection(stream, router.clone(), limits, stop)
    })
    .await;
}

/// The accept loop of every listener: accepts while a connection slot is free, sets
/// `TCP_NODELAY`, runs `serve_one` on each connection with a receiver that changes (its
/// sender is dropped) when shutdown starts; once `shutdown` completes, stops accepting,
/// gives open connections the grace period and drops the rest.
pub(super) async fn accept_loop<F, C>(
    listener: TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    mut serve_one: F,
) where
    F: FnMut(TcpStream, watch::Receiver<()>) -> C,
    C: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(());
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(s) => s,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        // Nagle's algorithm holds small writes back for the peer's delayed ACK: with
        // keep-alive, every response head would wait ~40 ms.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "failed to set TCP_NODELAY");
        }
        let served = serve_one(stream, stop_rx.clone());
        connections.spawn(held(served, slot));
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

/// Runs a connection, holding its slot until it ends.
async fn held(served: impl Future<Output = ()>, _slot: OwnedSemaphorePermit) {
    served.await;
}

/// Serves one connection until it ends, stays idle too long, or shutdown (then gracefully).
async fn connection(
    stream: TcpStream,
    router: Router,
    limits: Limits,
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
