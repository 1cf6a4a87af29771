//! The controller's own API calls (watches, status writes, TokenRequests) follow the
//! proxy environment as Flux's controllers do: `HTTPS_PROXY` is used (a CONNECT to the API
//! server reaches the proxy) unless `NO_PROXY` names the API server. Before the kube
//! client's `http-proxy` feature was on, any `HTTPS_PROXY` stopped the controller at start.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `ocisource controller` against an API server address nothing listens on, with
/// `HTTPS_PROXY` at a local listener; returns the first request line the proxy received
/// (if any) and the controller's stderr.
fn run(no_proxy: Option<&str>) -> (Option<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}\n  name: c\ncontexts:\n- context: {cluster: c, user: u}\n  name: x\ncurrent-context: x\nusers:\n- name: u\n  user: {token: t}\n",
    )
    .unwrap();
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let seen = std::thread::spawn(move || {
        let (stream, _) = proxy.accept().ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).ok()?;
        Some(line.trim_end().to_string())
    });
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ocisource"));
    cmd.args(["controller", "--storage-path"])
        .arg(dir.path().join("storage"))
        .args([
            "--storage-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(["--health-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .env("HTTPS_PROXY", &proxy_url)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(n) = no_proxy {
        cmd.env("NO_PROXY", n);
    }
    let out = cmd.spawn().unwrap();
    let out = wait_with_deadline(out, Duration::from_secs(20));
    // Unblock the listener thread when nothing connected.
    let _ = std::net::TcpStream::connect(proxy_url.trim_start_matches("http://"));
    let line = seen.join().unwrap().filter(|l| !l.is_empty());
    (line, out)
}

/// The process's stderr once it exits (it does: the API server is unreachable), killing
/// it past `limit`.
fn wait_with_deadline(mut child: std::process::Child, limit: Duration) -> String {
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn api_calls_go_through_https_proxy() {
    let (line, stderr) = run(None);
    assert!(!stderr.contains("disabled feature"), "{stderr}");
    assert_eq!(
        line.as_deref(),
        Some("CONNECT 127.0.0.1:1 HTTP/1.1"),
        "the proxy saw no CONNECT to the API server; stderr: {stderr}"
    );
}

#[test]
fn no_proxy_naming_the_api_server_bypasses_the_proxy() {
    let (line, stderr) = run(Some("127.0.0.1"));
    // It tried the API server itself, and failed to reach it.
    assert!(
        stderr.contains("failed to list OCIRepositories") && !stderr.contains("disabled feature"),
        "{stderr}"
    );
    assert_eq!(
        line, None,
        "the proxy was used despite NO_PROXY; stderr: {stderr}"
    );
}
