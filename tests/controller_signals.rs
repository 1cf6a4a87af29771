//! `ocisource controller` and SIGTERM, through the real binary: while it waits for the
//! leader Lease (its API server refuses connections) and a slow client holds a
//! half-sent request on the artifact port, SIGTERM stops it cleanly (exit 0) after the
//! servers' grace period, instead of the signal's default death or a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::pki::free_port;

/// Hang guard, not a speed assertion.
const GUARD: Duration = Duration::from_secs(60);

const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: refused
  cluster:
    server: http://127.0.0.1:1
users:
- name: nobody
  user: {}
contexts:
- name: refused
  context:
    cluster: refused
    user: nobody
    namespace: default
current-context: refused
";

fn wait_for_health(port: u16, child: &mut std::process::Child) {
    let started = Instant::now();
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            if out.starts_with("HTTP/1.1 200") {
                return;
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the controller exited before serving"
        );
        assert!(
            started.elapsed() < GUARD,
            "the health server never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_while_waiting_for_the_lease_stops_cleanly_despite_a_slow_client() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let (artifact, metrics, health) = (free_port(), free_port(), free_port());
    let mut child = Command::new(support::oneshot::bin())
        .arg("controller")
        .arg("--leader-elect")
        .arg("--log-level=info")
        .arg(format!(
            "--storage-path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--storage-addr=127.0.0.1:{artifact}"))
        .arg(format!("--metrics-addr=127.0.0.1:{metrics}"))
        .arg(format!("--health-addr=127.0.0.1:{health}"))
        .env("KUBECONFIG", &kubeconfig)
        .env("RUNTIME_NAMESPACE", "default")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_health(health, &mut child);
    // A client that never finishes its request headers.
    let mut slow = TcpStream::connect(("127.0.0.1", artifact)).unwrap();
    slow.write_all(b"GET /ocirepository/a/b/c.tar.gz HTTP/1.1\r\nHo")
        .unwrap();

    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > GUARD {
            child.kill().unwrap();
            panic!("the controller ignored SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("stopping before the controller started"),
        "{stderr}"
    );
    // The slow client's connection is gone with the process.
    let mut rest = Vec::new();
    slow.set_read_timeout(Some(GUARD)).unwrap();
    assert!(
        slow.read_to_end(&mut rest).is_ok(),
        "the slow client is still connected"
    );
}
