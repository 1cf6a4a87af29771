//! cosign v2 signatures: one layer of the `sha256-<hex>.sig` manifest, i.e. a
//! SimpleSigning payload plus its annotations. Key mode checks the signature with a
//! trusted key; keyless mode rebuilds a Sigstore v0.1 bundle from the certificate, chain
//! and Rekor bundle annotations so that `sigstore-verify` checks chain, SCT, SET, log
//! time and signature together. Both modes then check that the payload names the image
//! digest. Nothing here fetches anything: `mod.rs` does discovery.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;
use sha2::Digest as _;
use sigstore_verify::types::{Artifact, Bundle};

use super::keys::ParsedKey;
use super::trust::Trust;
use super::Rejection;
use crate::domain::digest::Digest;
use crate::domain::verification::IdentityMatch;

/// Media type of a cosign SimpleSigning layer.
pub const SIMPLESIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// Annotation holding the base64 signature over the payload.
pub const ANN_SIGNATURE: &str = "dev.cosignproject.cosign/signature";
/// Annotation holding the Fulcio certificate (PEM).
pub const ANN_CERTIFICATE: &str = "dev.sigstore.cosign/certificate";
/// Annotation holding the certificate chain (PEM).
pub const ANN_CHAIN: &str = "dev.sigstore.cosign/chain";
/// Annotation holding the Rekor bundle (SET + entry payload) as JSON.
pub const ANN_BUNDLE: &str = "dev.sigstore.cosign/bundle";

/// One `.sig` layer as fetched: the payload bytes and the layer's annotations.
#[derive(Clone, Debug, Default)]
pub struct SignatureLayer {
    /// Exact bytes of the SimpleSigning payload blob.
    pub payload: Vec<u8>,
    /// The layer descriptor's annotations.
    pub annotations: BTreeMap<String, String>,
}

impl SignatureLayer {
    fn signature(&self, source: &str) -> Result<Vec<u8>, Rejection> {
        let b64 = self.annotations.get(ANN_SIGNATURE).ok_or_else(|| {
            Rejection::new(
                source,
                "signature",
                format!("layer has no '{ANN_SIGNATURE}' annotation"),
            )
        })?;
        B64.decode(b64.trim()).map_err(|e| {
            Rejection::new(source, "signature", format!("signature is not base64: {e}"))
        })
    }
}

/// Key mode: the signature verifies with one of `keys`, and the payload names `digest`.
pub fn verify_with_keys(
    layer: &SignatureLayer,
    digest: &Digest,
    keys: &[ParsedKey],
    source: &str,
) -> Result<String, Rejection> {
    let signature = layer.signature(source)?;
    let Some(key) = keys
        .iter()
        .find(|k| k.verify(&layer.payload, &signature).is_ok())
    else {
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        return Err(Rejection::new(
            source,
            "signature",
            format!(
                "signature does not verify with any trusted key ({})",
                names.join(", ")
            ),
        ));
    };
    check_payload_digest(&layer.payload, digest, source)?;
    Ok(key.describe())
}

/// Keyless mode: the rebuilt bundle verifies against the trusted root, the identity
/// matches, and the payload names `digest`.
pub fn verify_keyless(
    layer: &SignatureLayer,
    digest: &Digest,
    trust: &Trust,
    identities: &[IdentityMatch],
    source: &str,
) -> Result<String, Rejection> {
    let bundle = rebuild_bundle(layer, source)?;
    let identity =
        trust.verify_keyless(Artifact::Blob(&layer.payload), &bundle, identities, source)?;
    check_payload_digest(&layer.payload, digest, source)?;
    Ok(identity)
}

#[derive(Deserialize)]
struct RekorBundle {
    #[serde(rename = "SignedEntryTimestamp")]
    set: String,
    #[serde(rename = "Payload")]
    payload: RekorPayload,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RekorPayload {
    body: String,
    integrated_time: i64,
    log_index: i64,
    #[serde(rename = "logID")]
    log_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RekorBody {
    api_version: String,
    kind: String,
}

/// Turns the layer's annotations into a Sigstore bundle v0.1 (message signature,
/// certificate chain, one tlog entry with its SET).
fn rebuild_bundle(layer: &SignatureLayer, source: &str) -> Result<Bundle, Rejection> {
    let bad = |check: &'static str, detail: String| Rejection::new(source, check, detail);
    let signature = layer.signature(source)?;
    let cert_pem = layer.annotations.get(ANN_CERTIFICATE).ok_or_else(|| {
        bad(
            "certificate chain",
            format!("keyless verification needs a '{ANN_CERTIFICATE}' annotation"),
        )
    })?;
    let mut certs = pem::parse_many(cert_pem.as_bytes()).map_err(|e| {
        bad(
            "certificate chain",
            format!("failed to parse certificate PEM: {e}"),
        )
    })?;
    if certs.len() != 1 {
        return Err(bad(
            "certificate chain",
            format!("expected one certificate, found {}", certs.len()),
        ));
    }
    if let Some(chain) = layer.annotations.get(ANN_CHAIN) {
        let chain = pem::parse_many(chain.as_bytes()).map_err(|e| {
            bad(
                "certificate chain",
                format!("failed to parse chain PEM: {e}"),
            )
        })?;
        certs.extend(chain);
    }
    if certs.iter().any(|c| c.tag() != "CERTIFICATE") {
        return Err(bad(
            "certificate chain",
            "certificate annotation holds a non-certificate PEM block".into(),
        ));
    }
    let rekor_json = layer.annotations.get(ANN_BUNDLE).ok_or_else(|| {
        bad(
            "transparency log",
            format!("keyless verification needs a Rekor '{ANN_BUNDLE}' annotation"),
        )
    })?;
    let rekor: RekorBundle = serde_json::from_str(rekor_json).map_err(|e| {
        bad(
            "transparency log",
            format!("failed to parse Rekor bundle annotation: {e}"),
        )
    })?;
    let body_bytes = B64.decode(&rekor.payload.body).map_err(|e| {
        bad(
            "transparency log",
            format!("Rekor entry body is not base64: {e}"),
        )
    })?;
    let body: RekorBody = serde_json::from_slice(&body_bytes).map_err(|e| {
        bad(
            "transparency log",
            format!("failed to parse Rekor entry body: {e}"),
        )
    })?;
    let log_id = hex::decode(&rekor.payload.log_id)
        .map_err(|e| bad("transparency log", format!("Rekor logID is not hex: {e}")))?;
    let payload_hash = sha2::Sha256::digest(&layer.payload);
    let bundle = json!({
        "mediaType": "application/vnd.dev.sigstore.bundle+json;version=0.1",
        "verificationMaterial": {
            "x509CertificateChain": {
                "certificates": certs.iter().map(|c| json!({"rawBytes": B64.encode(c.contents())})).collect::<Vec<_>>()
            },
            "tlogEntries": [{
                "logIndex": rekor.payload.log_index.to_string(),
                "logId": {"keyId": B64.encode(log_id)},
                "kindVersion": {"kind": body.kind, "version": body.api_version},
                "integratedTime": rekor.payload.integrated_time.to_string(),
                "inclusionPromise": {"signedEntryTimestamp": rekor.set},
                "canonicalizedBody": rekor.payload.body,
            }]
        },
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": B64.encode(payload_hash)},
            "signature": B64.encode(signature),
        }
    });
    Bundle::from_json(&bundle.to_string()).map_err(|e| {
        bad(
            "bundle",
            format!("failed to rebuild a Sigstore bundle from the annotations: {e}"),
        )
    })
}

#[derive(Deserialize)]
struct SimpleSigning {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    image: CriticalImage,
}

#[derive(Deserialize)]
struct CriticalImage {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The payload's `critical.image.docker-manifest-digest` equals `digest`.
pub fn check_payload_digest(
    payload: &[u8],
    digest: &Digest,
    source: &str,
) -> Result<(), Rejection> {
    let parsed: SimpleSigning = serde_json::from_slice(payload).map_err(|e| {
        Rejection::new(
            source,
            "payload digest",
            format!("failed to parse SimpleSigning payload: {e}"),
        )
    })?;
    let named = parsed.critical.image.docker_manifest_digest;
    if named == digest.to_string() {
        Ok(())
    } else {
        Err(Rejection::new(
            source,
            "payload digest",
            format!("payload signs image digest {named}, not the verified digest {digest}"),
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn payload_digest_must_match_exactly() {
        let d = Digest::of(b"image");
        let payload = format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"r"}},"image":{{"docker-manifest-digest":"{d}"}},"type":"cosign container image signature"}},"optional":null}}"#
        );
        assert!(check_payload_digest(payload.as_bytes(), &d, "t").is_ok());
        let err = check_payload_digest(payload.as_bytes(), &Digest::of(b"other"), "t").unwrap_err();
        assert_eq!(err.check, "payload digest");
        assert!(check_payload_digest(b"{}", &d, "t").is_err());
    }

    #[test]
    fn keyless_without_certificate_names_the_check() {
        let mut layer = SignatureLayer {
            payload: b"{}".to_vec(),
            annotations: BTreeMap::new(),
        };
        layer
            .annotations
            .insert(ANN_SIGNATURE.into(), B64.encode(b"sig"));
        let err = rebuild_bundle(&layer, "t").unwrap_err();
        assert_eq!(err.check, "certificate chain");
        assert!(err.to_string().contains(ANN_CERTIFICATE));
    }
}
