//! Test proxies on 127.0.0.1. `ConnectProxy`: a minimal HTTP `CONNECT` proxy that
//! records the `host:port` each tunnel asks for and sends every tunnel to one local
//! upstream (a test registry). It lets a test pull `oci://docker.io/...` without the
//! network: the client believes it talks to `index.docker.io:443`, the registry's
//! certificate names `index.docker.io`, and the recorded targets show which host the
//! client chose. `Gate`: a plain TCP forwarder to a registry that holds the requests
//! whose request line contains a chosen text (e.g. `/blobs/`) until the test releases
//! them, so a reconcile can be stopped half-way and its intermediate status observed
//! without any timing.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A running proxy; its task ends with the test's runtime.
pub struct ConnectProxy {
    /// `http://127.0.0.1:<port>`, the proxy address for clients.
    pub address: String,
    targets: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    /// Starts the proxy; every tunnel goes to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let targets = Arc::new(Mutex::new(Vec::new()));
        let seen = targets.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let _ = tunnel(client, &upstream, &seen).await;
                });
            }
        });
        Self { address, targets }
    }

    /// The `host:port` of every CONNECT so far, in order.
    pub fn targets(&self) -> Vec<String> {
        self.targets.lock().unwrap().clone()
    }
}

async fn tunnel(
    client: TcpStream,
    upstream: &str,
    seen: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut client = BufReader::new(client);
    let mut line = String::new();
    client.read_line(&mut line).await?;
    let target = line
        .strip_prefix("CONNECT ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    // Skip the request headers up to the empty line.
    loop {
        let mut header = String::new();
        if client.read_line(&mut header).await? == 0 || header == "\r\n" {
            break;
        }
    }
    let mut client = client.into_inner();
    if target.is_empty() {
        client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            .await?;
        return Ok(());
    }
    seen.lock().unwrap().push(target);
    let mut server = TcpStream::connect(upstream).await?;
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

/// A TCP forwarder to `upstream` that holds client bytes containing a chosen text (a
/// request line such as `GET /v2/app/blobs/...`) until [`Gate::release`]. Forwarding
/// runs on plain threads, independent of the test's runtime.
pub struct Gate {
    /// `127.0.0.1:<port>`, the registry address to give the client.
    pub addr: String,
    state: Arc<(Mutex<GateState>, std::sync::Condvar)>,
}

#[derive(Default)]
struct GateState {
    hold: Option<String>,
    held: usize,
}

impl Gate {
    /// Starts forwarding to `upstream` (`host:port`), holding nothing.
    pub fn start(upstream: String) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let state = Arc::new((Mutex::new(GateState::default()), std::sync::Condvar::new()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(&upstream) else {
                    continue;
                };
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let gate = shared.clone();
                std::thread::spawn(move || {
                    let _ = forward_gated(client, server, &gate);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s2, &mut c2);
                    let _ = c2.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Self { addr, state }
    }

    /// Holds every request whose bytes contain `text` from now on.
    pub fn hold(&self, text: &str) {
        self.state.0.lock().unwrap().hold = Some(text.to_string());
    }

    /// Lets everything through, held requests first.
    pub fn release(&self) {
        let (lock, cvar) = &*self.state;
        lock.lock().unwrap().hold = None;
        cvar.notify_all();
    }

    /// How many requests are being held now.
    pub fn held(&self) -> usize {
        self.state.0.lock().unwrap().held
    }
}

fn forward_gated(
    mut client: std::net::TcpStream,
    mut server: std::net::TcpStream,
    gate: &(Mutex<GateState>, std::sync::Condvar),
) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = client.read(&mut buf)?;
        if n == 0 {
            return server.shutdown(std::net::Shutdown::Write);
        }
        let chunk = &buf[..n];
        let text = String::from_utf8_lossy(chunk);
        let (lock, cvar) = gate;
        let mut state = lock.lock().unwrap();
        let matches = |s: &GateState| s.hold.as_ref().is_some_and(|h| text.contains(h.as_str()));
        if matches(&state) {
            state.held += 1;
            state = cvar.wait_while(state, |s| matches(s)).unwrap();
            state.held -= 1;
        }
        drop(state);
        server.write_all(chunk)?;
    }
}
