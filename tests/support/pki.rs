//! Test PKI made with `openssl` at test time (a CA, a server certificate for
//! `IP:127.0.0.1,DNS:localhost`, a client certificate for mTLS), the rustls server
//! configuration of such a certificate, plus small process and port helpers for the
//! registry harness.

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

/// The key options of every test key: P-256, unencrypted.
const EC: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// Makes a CA named `cn` in `dir`: `ca.pem`/`ca.key`.
pub fn make_ca(dir: &Path, cn: &str) {
    let subj = format!("/CN={cn}");
    let mut ca = vec!["req", "-x509"];
    ca.extend(EC);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        &subj,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca);
}

/// Makes `<name>.pem`/`<name>.key` in `dir`, signed by its CA, with the extensions `ext`
/// (an `openssl x509 -extfile` text).
pub fn make_cert(dir: &Path, name: &str, ext: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    let (key, csr, pem, extf) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
    );
    let subj = format!("/CN={name}");
    let mut req = vec!["req"];
    req.extend(EC);
    req.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
    openssl(dir, &req);
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            &extf,
        ],
    );
}

/// Makes `ca.pem`/`ca.key`, `server.pem`/`server.key` and `client.pem`/`client.key`.
pub fn make_pki(dir: &Path) {
    make_ca(dir, "ocisource test CA");
    make_cert(dir, "server", "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:index.docker.io\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
    make_cert(
        dir,
        "client",
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    );
}

/// A rustls server configuration serving `dir/<name>.pem` with its key `<name>.key`
/// (one certificate, PKCS#8 as `openssl req -nodes` writes it), for test TLS servers.
pub fn server_config(dir: &Path, name: &str) -> tokio_rustls::rustls::ServerConfig {
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let der = |file: String| {
        pem::parse(std::fs::read(dir.join(file)).unwrap())
            .unwrap()
            .into_contents()
    };
    tokio_rustls::rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(der(format!("{name}.pem")))],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der(format!("{name}.key")))),
        )
        .unwrap()
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
