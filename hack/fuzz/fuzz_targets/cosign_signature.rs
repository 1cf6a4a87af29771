//! cosign v2 signatures as `verify` receives them from a `.sig` manifest: the
//! SimpleSigning payload and the layer annotations (base64 signature, PEM certificate and
//! chain, Rekor bundle JSON) through `CosignVerifier::verify_simple_signing`, the
//! trusted key PEM, and the payload's digest check on its own.
//!
//! Input: a mode byte, then fields (separated by `FIELD`): payload, signature, certificate
//! PEM, chain PEM, Rekor bundle JSON, public key PEM, image digest. Mode bit 0: key mode
//! (with the key of field 5) instead of keyless (public-good root). Bit 1: no chain
//! annotation.
//!
//! Checked: a signature that verifies names its method and fails for any other image
//! digest; the payload check accepts no digest but the one the payload names.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use ocisource::domain::digest::Digest;
use ocisource::domain::verification::{IdentityMatch, TrustedKey, VerifyPolicy};
use ocisource::fuzzing::check_payload_digest;
use ocisource::verify::{SignatureLayer, ANN_BUNDLE, ANN_CERTIFICATE, ANN_CHAIN, ANN_SIGNATURE};
use ocisource_fuzz::{bytes, field, split, verifier, FIELD};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let parts = split(rest, FIELD, 7);
    let payload = bytes(&parts, 0).to_vec();
    let digest = field(&parts, 6)
        .trim()
        .parse::<Digest>()
        .unwrap_or_else(|_| Digest::of(&payload));

    // The payload check alone: it accepts no digest but the one the payload names. (Read
    // lossily: serde skips fields it ignores without checking their UTF-8, as Go's JSON
    // decoder would replace it; the payload is signed, so that leniency is harmless.)
    let lossy = String::from_utf8_lossy(&payload);
    let named = serde_json::from_str::<Value>(&lossy).ok().and_then(|v| {
        v.pointer("/critical/image/docker-manifest-digest")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    match check_payload_digest(&payload, &digest, "fuzz") {
        Ok(()) => assert_eq!(named.as_deref(), Some(digest.to_string().as_str())),
        Err(r) => assert!(!r.to_string().is_empty()),
    }

    let mut annotations = BTreeMap::new();
    for (i, key) in [
        (1, ANN_SIGNATURE),
        (2, ANN_CERTIFICATE),
        (3, ANN_CHAIN),
        (4, ANN_BUNDLE),
    ] {
        if key == ANN_CHAIN && mode & 2 != 0 {
            continue;
        }
        if parts.len() > i {
            annotations.insert(key.to_string(), field(&parts, i));
        }
    }
    let layer = SignatureLayer {
        payload,
        annotations,
    };
    let policy = if mode & 1 != 0 {
        VerifyPolicy::Keys(vec![TrustedKey {
            name: "fuzz.pub".into(),
            pem: bytes(&parts, 5).to_vec(),
        }])
    } else {
        VerifyPolicy::Keyless {
            identities: vec![IdentityMatch::new(".*", ".*").expect("'.*' compiles")],
            trusted_root_json: None,
        }
    };
    match verifier().verify_simple_signing(&layer, &digest, &policy) {
        Ok(v) => {
            assert!(v.method.starts_with("cosign v2 "), "method {}", v.method);
            assert!(!v.identity.is_empty());
            let other = Digest::of(digest.to_string().as_bytes());
            assert!(
                verifier()
                    .verify_simple_signing(&layer, &other, &policy)
                    .is_err(),
                "a signature verified for two image digests"
            );
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
