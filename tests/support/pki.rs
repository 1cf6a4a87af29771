//! Test PKI made with `openssl` at test time (a CA, a server certificate for
//! `IP:127.0.0.1,DNS:localhost`, a client certificate for mTLS), plus small process and
//! port helpers for the registry harness.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

/// Runs `cmd`, asserts success, returns its stdout.
pub fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("failed to run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs `openssl args` in `dir`, asserts success, returns its stdout.
pub fn openssl(dir: &Path, args: &[&str]) -> Vec<u8> {
    run(Command::new("openssl").current_dir(dir).args(args))
}

/// Makes `ca.pem`/`ca.key`, `server.pem`/`server.key` and `client.pem`/`client.key`.
pub fn make_pki(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=ocisource test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca);
    for (name, ext) in [
        ("server", "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:index.docker.io\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"),
        ("client", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let (key, csr, pem, extf) =
            (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"), format!("{name}.ext"));
        let subj = format!("/CN={name}");
        let mut req = vec!["req"];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(dir, &req);
        openssl(dir, &[
            "x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", &pem, "-days", "2", "-extfile", &extf,
        ]);
    }
}

pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
