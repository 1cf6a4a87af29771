//! The fingerprint of a session's trust settings: what decides whom its requests reach
//! and whom it trusts. Both the HTTP client cache (`transport`) and the scheme memory
//! (`insecure`) are keyed by it, so neither reaches into the other. Secrets go in hashed,
//! never kept as text.

use sha2::{Digest as _, Sha256};

use crate::ports::RegistryOptions;

/// Feeds `h` the settings that decide whom a session's requests reach and whom it trusts:
/// `insecure`, the CA, the client identity, the proxy address and login. The HTTP client
/// cache and the scheme memory (`insecure.rs`) are keyed by them; secrets go in hashed.
pub(crate) fn hash_trust(h: &mut Sha256, o: &RegistryOptions) {
    field(h, b"insecure", &[u8::from(o.insecure)]);
    field(h, b"ca", o.ca_pem.as_deref().unwrap_or_default());
    if let Some(id) = &o.client_identity {
        field(h, b"cert", &id.cert_pem);
        field(h, b"key", id.key_pem.expose());
    }
    if let Some(p) = &o.proxy {
        field(h, b"proxy", p.address.as_bytes());
        if let Some(c) = &p.credentials {
            field(h, b"proxy-user", c.username.as_bytes());
            field(h, b"proxy-pass", c.password.expose().as_bytes());
        }
    }
}

/// One tagged, length-prefixed field of a fingerprint.
pub(crate) fn field(h: &mut Sha256, tag: &[u8], bytes: &[u8]) {
    h.update(tag);
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}
