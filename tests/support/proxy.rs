//! Test proxies on 127.0.0.1. `ConnectProxy`: a minimal HTTP proxy that records every
//! request it gets and acts in one of three [`Mode`]s: `Tunnel` sends every `CONNECT`
//! tunnel to one local upstream (a test registry), which lets a test pull
//! `oci://docker.io/...` without the network (the client believes it talks to
//! `index.docker.io:443`, the registry's certificate names `index.docker.io`, and the
//! recorded targets show which host the client chose); `Refuse` answers `CONNECT` with
//! 403 and every plain-HTTP request itself with a 404, as a hostile or broken proxy of a
//! tenant's choosing may; `Intercept` accepts the tunnel and terminates its TLS with a
//! certificate of its own CA, recording the decrypted request lines and answering 404.
//! `Gate`: a plain TCP forwarder to a registry that holds the requests whose request line
//! contains a chosen text (e.g. `/blobs/`) until the test releases them, so a reconcile
//! can be stopped half-way and its intermediate status observed without any timing.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// What a [`ConnectProxy`] does with what it is asked.
#[derive(Clone)]
pub enum Mode {
    /// Every `CONNECT` tunnel goes to this `host:port`; other requests get 405.
    Tunnel(String),
    /// `CONNECT` gets 403 Forbidden; a plain-HTTP request (absolute URL) gets 404 from the
    /// proxy itself.
    Refuse,
    /// `CONNECT` gets 200, then the proxy terminates TLS with its own CA's certificate
    /// (`IP:127.0.0.1`, `localhost`; made by `pki::make_pki`) and answers 404.
    Intercept,
}

/// One request the proxy got, as it saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// `CONNECT <host:port>`.
    Connect(String),
    /// A plain-HTTP request line, e.g. `GET http://127.0.0.1:5000/v2/ HTTP/1.1`.
    Plain(String),
    /// A request line read inside an intercepted tunnel.
    Intercepted(String),
}

/// A running proxy; its task ends with the test's runtime.
pub struct ConnectProxy {
    /// `http://127.0.0.1:<port>`, the proxy address for clients.
    pub address: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// The interceptor's own CA (`ca.pem`), kept while the proxy runs.
    _pki: Option<tempfile::TempDir>,
}

impl ConnectProxy {
    /// Starts the proxy; every tunnel goes to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        Self::start_with(Mode::Tunnel(upstream)).await
    }

    /// Starts the proxy in `mode`.
    pub async fn start_with(mode: Mode) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (pki, tls) = match mode {
            Mode::Intercept => {
                let dir = tempfile::tempdir().unwrap();
                super::pki::make_pki(dir.path());
                let tls = tokio_rustls::TlsAcceptor::from(Arc::new(super::pki::server_config(
                    dir.path(),
                    "server",
                )));
                (Some(dir), Some(tls))
            }
            _ => (None, None),
        };
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (mode, log, tls) = (mode.clone(), log.clone(), tls.clone());
                tokio::spawn(async move {
                    let _ = serve(client, &mode, &log, tls).await;
                });
            }
        });
        Self {
            address,
            seen,
            _pki: pki,
        }
    }

    /// The `host:port` of every CONNECT so far, in order.
    pub fn targets(&self) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter_map(|s| match s {
                Seen::Connect(t) => Some(t),
                _ => None,
            })
            .collect()
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Reads a request head; returns its first line, or `None` at the end of the stream.
async fn request_head<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    if r.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    loop {
        let mut header = String::new();
        if r.read_line(&mut header).await? == 0 || header == "\r\n" {
            break;
        }
    }
    Ok(Some(line.trim_end().to_string()))
}

const NOT_FOUND: &[u8] = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";

async fn serve(
    client: TcpStream,
    mode: &Mode,
    seen: &Mutex<Vec<Seen>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> std::io::Result<()> {
    let mut client = BufReader::new(client);
    let Some(line) = request_head(&mut client).await? else {
        return Ok(());
    };
    let target = line
        .strip_prefix("CONNECT ")
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_string);
    let mut client = client.into_inner();
    let Some(target) = target else {
        seen.lock().unwrap().push(Seen::Plain(line));
        let answer: &[u8] = match mode {
            Mode::Tunnel(_) => b"HTTP/1.1 405 Method Not Allowed\r\n\r\n",
            _ => NOT_FOUND,
        };
        return client.write_all(answer).await;
    };
    seen.lock().unwrap().push(Seen::Connect(target));
    match (mode, tls) {
        (Mode::Tunnel(upstream), _) => {
            let mut server = TcpStream::connect(upstream).await?;
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await?;
            tokio::io::copy_bidirectional(&mut client, &mut server).await?;
            Ok(())
        }
        (Mode::Intercept, Some(tls)) => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await?;
            intercept(tls.accept(client).await?, seen).await
        }
        _ => {
            client
                .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
                .await
        }
    }
}

/// Answers every request of a terminated tunnel with 404, recording its line.
async fn intercept<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    seen: &Mutex<Vec<Seen>>,
) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    while let Some(line) = request_head(&mut stream).await? {
        seen.lock().unwrap().push(Seen::Intercepted(line));
        stream.get_mut().write_all(NOT_FOUND).await?;
        stream.get_mut().flush().await?;
    }
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
