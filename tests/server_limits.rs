//! The listeners against hostile clients, over real TCP: the artifact listener
//! (`server::serve_artifacts`) and, where it applies too, the probe and metrics listeners
//! (`server::serve` under a router). 200 slowloris connections are closed by the
//! header-read timeout; an endless request head is refused; a client that stops reading a
//! download is dropped by the idle timeout; the connection cap makes the next client wait
//! while every slot is busy, and sheds the idle kept-alive connection for it otherwise; a
//! peer past its share is refused while another is served; a connection ends after its
//! request budget or age; a FIFO in the store is a 404, not a hung request; and shutdown
//! returns within the grace period while slow clients are still connected. Clients come
//! from several loopback addresses (127.0.0.2, 127.0.0.3, ...) where a test needs peers.
//!
//! Timeouts here are hang guards (a broken server fails the test instead of blocking it),
//! never assertions about speed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use ocisource::server::{
    router, serve, serve_artifacts, ConnectionLimits, Metrics, ARTIFACT_CONNECTIONS, MAX_HEAD,
};
use rstest::rstest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const GUARD: Duration = Duration::from_secs(30);
const BIG: &str = "ocirepository/ns/app/big.tar.gz";
const BIG_LEN: usize = 16 << 20;
/// A small file on the artifact listener.
const SMALL: &str = "/ocirepository/ns/app/small.tar.gz";

/// Which listener a test runs against.
#[derive(Clone, Copy, Debug)]
enum Listener {
    /// The artifact listener (`serve_artifacts`).
    Artifacts,
    /// A router listener (`serve`), probes and metrics.
    Router,
}

impl Listener {
    /// A path that answers 200 on this listener.
    fn ok_path(self) -> &'static str {
        match self {
            Self::Artifacts => SMALL,
            Self::Router => "/healthz",
        }
    }
}

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(limits: ConnectionLimits) -> Self {
        Self::start_as(Listener::Artifacts, limits).await
    }

    async fn start_as(kind: Listener, limits: ConnectionLimits) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join(BIG);
        std::fs::create_dir_all(big.parent().unwrap()).unwrap();
        std::fs::write(&big, vec![7u8; BIG_LEN]).unwrap();
        std::fs::write(dir.path().join(&SMALL[1..]), b"small").unwrap();
        mkfifo(&dir.path().join("ocirepository/ns/app/fifo.tar.gz"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let stopped = async {
            let _ = stopped.await;
        };
        let task = match kind {
            Listener::Artifacts => tokio::spawn(serve_artifacts(
                listener,
                dir.path().to_path_buf(),
                limits,
                stopped,
            )),
            Listener::Router => {
                let routes = router(Arc::new(AtomicBool::new(true)), Arc::new(Metrics::new()));
                tokio::spawn(serve(listener, routes, limits, stopped))
            }
        };
        Self {
            addr,
            stop: Some(stop),
            task,
            _dir: dir,
        }
    }

    /// Starts the shutdown and waits for `serve` to return.
    async fn shut_down(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(GUARD, self.task)
            .await
            .expect("serve did not return after its grace period")
            .unwrap();
    }
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

fn limits(header: u64, idle: u64, max: usize) -> ConnectionLimits {
    ConnectionLimits {
        header_read_timeout: Duration::from_secs(header),
        idle_timeout: Duration::from_secs(idle),
        max_connections: max,
        grace_period: Duration::from_secs(1),
        ..ConnectionLimits::default()
    }
}

/// A connection from the loopback address 127.0.0.`host`: a peer of its own.
async fn connect_from(host: u8, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, host), 0)))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

/// Sends a keep-alive GET of `path` and reads its whole response (head and body);
/// `None` when the server closed the connection or failed it.
async fn keep_alive_get(s: &mut TcpStream, path: &str) -> Option<String> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length: usize = text[..end]
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map_or(0, |v| v.trim().parse().unwrap());
        if got.len() >= end + 4 + length {
            return Some(text);
        }
    }
}

/// Sends a whole GET and reads the whole response (`Connection: close`).
async fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(GUARD, s.read_to_end(&mut out))
        .await
        .expect("no response")
        .unwrap();
    String::from_utf8_lossy(&out[..out.len().min(200)]).into_owned()
}

/// Reads until the server closes the connection; returns the bytes read.
async fn until_closed(s: &mut TcpStream) -> usize {
    let mut total = 0;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match tokio::time::timeout(GUARD, s.read(&mut buf))
            .await
            .expect("the server kept the connection open")
        {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}

/// A client whose receive buffer is tiny, so a download stalls as soon as it stops reading.
async fn small_window_client(addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(addr).await.unwrap()
}

#[rstest]
#[case(Listener::Artifacts)]
#[case(Listener::Router)]
#[tokio::test]
async fn slowloris_connections_are_closed_by_the_header_timeout(#[case] kind: Listener) {
    let server = Server::start_as(kind, limits(1, 60, 256)).await;
    let path = kind.ok_path();
    let mut clients = Vec::new();
    for _ in 0..200 {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        // Headers that never end.
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nX-Slow: a").as_bytes())
            .await
            .unwrap();
        clients.push(s);
    }
    for s in &mut clients {
        let bytes = until_closed(s).await;
        // hyper may answer 408 before closing; never a 200.
        assert!(
            bytes < 200,
            "the server answered a request it never received"
        );
    }
    assert!(get(server.addr, path).await.starts_with("HTTP/1.1 200"));
    server.shut_down().await;
}

#[tokio::test]
async fn an_endless_request_head_is_refused_at_its_bound() {
    let server = Server::start(limits(30, 30, 16)).await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(format!("GET {SMALL} HTTP/1.1\r\n").as_bytes())
        .await
        .unwrap();
    // Header fields past the bound, sent while the server still reads them.
    let field = format!("X-Pad: {}\r\n", "a".repeat(1000));
    let mut sent = 0;
    while sent <= MAX_HEAD {
        if s.write_all(field.as_bytes()).await.is_err() {
            break;
        }
        sent += field.len();
    }
    let mut out = Vec::new();
    let _ = tokio::time::timeout(GUARD, s.read_to_end(&mut out))
        .await
        .expect("the server kept reading an endless head");
    let answer = String::from_utf8_lossy(&out);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert!(get(server.addr, SMALL).await.starts_with("HTTP/1.1 200"));
    server.shut_down().await;
}

#[tokio::test]
async fn a_client_that_stops_reading_a_download_is_dropped_when_idle() {
    let server = Server::start(limits(30, 1, 16)).await;
    let mut s = small_window_client(server.addr).await;
    s.write_all(format!("GET /{BIG} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    // Not reading: the server's writes stall, nothing moves, the idle timeout fires.
    // Wait for that by reading nothing until the peer is gone: poll the socket for
    // readiness only after the server had to give up, observed as a truncated body.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let received = until_closed(&mut s).await;
    assert!(
        received < BIG_LEN,
        "the whole {BIG_LEN}-byte body arrived ({received} bytes): the stalled connection was kept"
    );
    assert!(get(server.addr, SMALL).await.starts_with("HTTP/1.1 200"));
    server.shut_down().await;
}

#[rstest]
#[case(Listener::Artifacts)]
#[case(Listener::Router)]
#[tokio::test]
async fn the_connection_cap_makes_the_next_client_wait_while_every_slot_is_busy(
    #[case] kind: Listener,
) {
    let server = Server::start_as(kind, limits(30, 30, 1)).await;
    let request = format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", kind.ok_path());
    let mut buf = vec![0u8; 4096];
    // The first connection holds the only slot. On the artifact listener, in the middle of
    // a download it does not read (a connection with a response in flight is never shed);
    // the router listeners' connections are never shed, so a kept-alive one holds it.
    let mut first = match kind {
        Listener::Artifacts => {
            let mut s = small_window_client(server.addr).await;
            s.write_all(format!("GET /{BIG} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
                .await
                .unwrap();
            s
        }
        Listener::Router => TcpStream::connect(server.addr).await.unwrap(),
    };
    let n = match kind {
        Listener::Artifacts => first.read(&mut buf).await.unwrap(),
        Listener::Router => {
            first.write_all(request.as_bytes()).await.unwrap();
            first.read(&mut buf).await.unwrap()
        }
    };
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The second asks and has no answer while the first holds the slot.
    let mut second = TcpStream::connect(server.addr).await.unwrap();
    second.write_all(request.as_bytes()).await.unwrap();
    let early = tokio::time::timeout(Duration::from_millis(500), second.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "the second connection was answered past the cap: {early:?}"
    );
    // Once the first goes, the second gets its turn.
    drop(first);
    let n = tokio::time::timeout(GUARD, second.read(&mut buf))
        .await
        .expect("the second connection was never served")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    server.shut_down().await;
}

/// Keep-alive clients, each on its own connection, asking every two seconds and
/// reconnecting when the server closes theirs (as Go's client does), spread over 8 peers.
fn keep_alive_clients(addr: SocketAddr, count: usize) -> tokio::task::JoinSet<()> {
    let mut clients = tokio::task::JoinSet::new();
    for i in 0..count {
        let host = 2 + (i % 8) as u8;
        clients.spawn(async move {
            loop {
                let mut s = connect_from(host, addr).await;
                while keep_alive_get(&mut s, SMALL).await.is_some() {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        });
    }
    clients
}

#[rstest]
// Past a small cap by a few.
#[case(limits(10, 60, 32), 40)]
// The case: 260 clients against the artifact listener's own limits.
#[case(ConnectionLimits::artifacts(), 260)]
#[tokio::test]
async fn a_new_client_is_answered_within_a_second_while_keep_alive_clients_hold_the_slots(
    #[case] limits: ConnectionLimits,
    #[case] clients: usize,
) {
    let server = Server::start(limits).await;
    let clients = keep_alive_clients(server.addr, clients);
    // Every client has connected and asked at least once.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for _ in 0..3 {
        let mut s = connect_from(100, server.addr).await;
        let answer = tokio::time::timeout(Duration::from_secs(1), keep_alive_get(&mut s, SMALL))
            .await
            .expect("a new client waited more than a second behind idle kept-alive ones");
        assert!(answer.unwrap().starts_with("HTTP/1.1 200"));
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    drop(clients);
    server.shut_down().await;
}

#[tokio::test]
async fn a_peer_past_its_share_is_refused_while_another_peer_is_served() {
    let server = Server::start(ConnectionLimits {
        max_per_peer: 2,
        ..limits(30, 30, 16)
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = connect_from(2, server.addr).await;
        assert!(keep_alive_get(&mut s, SMALL)
            .await
            .unwrap()
            .starts_with("HTTP/1.1 200"));
        held.push(s);
    }
    // The third connection of 127.0.0.2 is answered 503 with Retry-After, and closed.
    let mut third = connect_from(2, server.addr).await;
    let refusal = keep_alive_get(&mut third, SMALL).await.unwrap();
    assert!(refusal.starts_with("HTTP/1.1 503 "), "{refusal}");
    assert!(refusal.contains("\r\nRetry-After: 1\r\n"), "{refusal}");
    assert!(refusal.ends_with("too many connections from this address; retry later"));
    assert_eq!(until_closed(&mut third).await, 0);
    // Another peer is served meanwhile.
    let mut other = connect_from(3, server.addr).await;
    assert!(keep_alive_get(&mut other, SMALL)
        .await
        .unwrap()
        .starts_with("HTTP/1.1 200"));
    // Once one of its connections ends, the first peer is served again.
    drop(held.pop());
    let served = tokio::time::timeout(GUARD, async {
        loop {
            let mut s = connect_from(2, server.addr).await;
            if let Some(answer) = keep_alive_get(&mut s, SMALL).await {
                if answer.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        served.is_ok(),
        "the peer's freed share was never given back"
    );
    server.shut_down().await;
}

#[tokio::test]
async fn a_connection_is_closed_after_its_request_budget() {
    let server = Server::start(ConnectionLimits {
        max_requests: 3,
        ..limits(30, 30, 16)
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    for request in 1..=3 {
        let answer = keep_alive_get(&mut s, SMALL).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // The last one the budget allows says so.
        assert_eq!(
            answer.contains("\r\nConnection: close\r\n"),
            request == 3,
            "request {request}: {answer}"
        );
    }
    assert_eq!(until_closed(&mut s).await, 0);
    server.shut_down().await;
}

#[tokio::test]
async fn a_connection_past_its_age_is_closed_between_requests() {
    let server = Server::start(ConnectionLimits {
        max_age: Duration::from_secs(1),
        ..limits(30, 30, 16)
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    assert!(keep_alive_get(&mut s, SMALL)
        .await
        .unwrap()
        .starts_with("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Its request in flight is answered; then it is closed, long before the header timeout.
    assert!(keep_alive_get(&mut s, SMALL)
        .await
        .unwrap()
        .starts_with("HTTP/1.1 200"));
    let mut buf = [0u8; 64];
    let end = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf)).await;
    assert!(
        matches!(end, Ok(Ok(0))),
        "the connection outlived its age: {end:?}"
    );
    server.shut_down().await;
}

#[test]
fn the_artifact_listener_takes_more_connections_than_one_peer_may_hold() {
    let limits = ConnectionLimits::artifacts();
    assert_eq!(limits.max_connections, ARTIFACT_CONNECTIONS);
    assert!(limits.max_per_peer >= 64 && limits.max_per_peer * 4 <= limits.max_connections);
}

#[tokio::test]
async fn a_fifo_in_the_store_is_not_found_and_does_not_hang() {
    let server = Server::start(ConnectionLimits::default()).await;
    let fifo = server._dir.path().join("ocirepository/ns/app/fifo.tar.gz");
    let asked = get(server.addr, "/ocirepository/ns/app/fifo.tar.gz");
    let Ok(answer) = tokio::time::timeout(GUARD / 2, asked).await else {
        // Release the server's blocked open (a writer arrives), or the runtime never ends.
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        panic!("a request for a FIFO hung");
    };
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let answer = get(server.addr, "/ocirepository/ns/app").await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    server.shut_down().await;
}

#[rstest]
#[case(Listener::Artifacts)]
#[case(Listener::Router)]
#[tokio::test]
async fn shutdown_ends_within_the_grace_period_whatever_clients_do(#[case] kind: Listener) {
    let server = Server::start_as(kind, limits(60, 60, 16)).await;
    let addr = server.addr;
    let path = kind.ok_path();
    // A stalled download, a half-sent request and an idle kept-alive connection.
    let mut stalled = small_window_client(addr).await;
    stalled
        .write_all(format!("GET /{BIG} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(format!("GET {path} HTTP/1.1\r\nHo").as_bytes())
        .await
        .unwrap();
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));

    // The timeouts are a minute; the grace period is one second.
    server.shut_down().await;
    for s in [&mut stalled, &mut slow, &mut idle] {
        until_closed(s).await;
    }
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener still accepts after shutdown"
    );
}
