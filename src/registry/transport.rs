//! Builds the `reqwest` client for one session from `RegistryOptions`: extra CA roots,
//! client identity (mTLS), proxy, connect and read timeouts. TLS verification is always
//! on: there is deliberately no switch to skip it. No registry protocol here.

use std::time::Duration;

use crate::ports::{RegistryError, RegistryErrorKind, RegistryOptions};

/// Default per-request timeout for small requests, and the read (idle) timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for a TCP/TLS connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

fn config_err(message: impl Into<String>) -> RegistryError {
    RegistryError::new(RegistryErrorKind::Config, message)
}

/// A `reqwest::Client` for `options`. The client has a connect timeout and a read
/// timeout (no bytes for that long), but no total timeout, so long blob downloads
/// survive while bytes flow; small requests set their own total timeout.
pub fn build_http(options: &RegistryOptions) -> Result<reqwest::Client, RegistryError> {
    let timeout = options.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let mut ua = format!("ocisource/{}", env!("CARGO_PKG_VERSION"));
    if let Some(extra) = &options.user_agent {
        ua.push(' ');
        ua.push_str(extra);
    }
    let mut b = reqwest::Client::builder()
        .user_agent(ua)
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .read_timeout(timeout)
        .redirect(reqwest::redirect::Policy::limited(10));
    if let Some(ca) = &options.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(ca)
            .map_err(|e| config_err(format!("failed to parse the CA certificate (PEM): {e}")))?;
        if certs.is_empty() {
            return Err(config_err(
                "failed to parse the CA certificate: no PEM certificate found",
            ));
        }
        b = b.tls_certs_merge(certs);
    }
    if let Some(id) = &options.client_identity {
        let mut pem = id.cert_pem.clone();
        pem.push(b'\n');
        pem.extend_from_slice(id.key_pem.expose());
        let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
            config_err(format!(
                "failed to load the client certificate and key (PEM): {}",
                chain(&e)
            ))
        })?;
        b = b.identity(identity);
    }
    // Without an explicit proxy, the `HTTPS_PROXY`/`NO_PROXY` environment applies, as in
    // Go's default transport that Flux uses.
    if let Some(p) = &options.proxy {
        let mut proxy = reqwest::Proxy::all(&p.address)
            .map_err(|_| config_err("failed to configure the proxy: invalid proxy address"))?;
        if let Some(c) = &p.credentials {
            proxy = proxy.basic_auth(&c.username, c.password.expose());
        }
        b = b.proxy(proxy);
    }
    b.build()
        .map_err(|e| config_err(format!("failed to build the HTTP client: {}", chain(&e))))
}

/// An error and its sources joined with ": ", without repeats.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let msg = s.to_string();
        if !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        cur = s.source();
    }
    out
}
