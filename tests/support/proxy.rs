//! A minimal HTTP `CONNECT` proxy on 127.0.0.1 that records the `host:port` each tunnel
//! asks for and sends every tunnel to one local upstream (a test registry). It lets a
//! test pull `oci://docker.io/...` without the network: the client believes it talks to
//! `index.docker.io:443`, the registry's certificate names `index.docker.io`, and the
//! recorded targets show which host the client chose.

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
