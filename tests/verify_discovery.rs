//! Discovery and key-mode checks through an in-memory `ports::Registry`, with keys and
//! signatures made by `openssl` (not our code), and our `sign.rs` output checked by
//! `openssl dgst -verify`. Needs the `openssl` binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)] // the registry upload helpers are for e2e_verify
#[path = "e2e_verify/cosign.rs"]
mod cosign;
mod support;
mod verify_common;

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use cosign::{openssl, KeyPair};
use ocisource::domain::digest::Digest;
use ocisource::domain::manifest::OCI_MANIFEST;
use ocisource::domain::verification::{TrustedKey, VerifyPolicy};
use ocisource::ports::SignatureVerifier;
use ocisource::verify::sign::{self, SigningKey};
use ocisource::verify::{CosignVerifier, VerifyError, ANN_SIGNATURE};
use verify_common::{vectors_dir, FakeRegistry};

/// `pair`'s public key as the verifier takes it, named after its file (`<name>.pub`).
fn trusted(pair: &KeyPair) -> TrustedKey {
    TrustedKey {
        name: pair
            .public
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        pem: pair.public_pem().into_bytes(),
    }
}

/// openssl's signature of `payload` with `pair`, base64 as cosign stores it.
fn openssl_sign(pair: &KeyPair, payload: &[u8]) -> String {
    B64.encode(pair.sign(payload))
}

fn layer(payload: Vec<u8>, sig_b64: String) -> (Vec<u8>, BTreeMap<String, String>) {
    (
        payload,
        BTreeMap::from([(ANN_SIGNATURE.to_string(), sig_b64)]),
    )
}

fn image() -> Digest {
    Digest::of(b"an image manifest")
}

#[tokio::test]
async fn openssl_signature_on_sig_tag_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let pair = KeyPair::generate(dir.path(), "a");
    let payload = sign::simple_signing_payload("127.0.0.1:5000/app", &image());
    let registry = FakeRegistry::default();
    registry.put_v2(
        &image(),
        &[layer(payload.clone(), openssl_sign(&pair, &payload))],
    );
    let verified = CosignVerifier::new()
        .unwrap()
        .verify(
            &registry,
            "127.0.0.1:5000/app",
            &image(),
            &VerifyPolicy::Keys(vec![trusted(&pair)]),
        )
        .await
        .unwrap();
    assert_eq!(verified.method, "cosign v2 key");
    assert!(
        verified.identity.starts_with("a.pub (sha256:"),
        "{}",
        verified.identity
    );
    assert_eq!(
        registry.asked.lock().unwrap()[0],
        format!("{}.sig", image().tag_form())
    );
}

#[tokio::test]
async fn two_keys_one_matching_passes_and_wrong_key_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (pair_a, pair_b) = (
        KeyPair::generate(dir.path(), "a"),
        KeyPair::generate(dir.path(), "b"),
    );
    let (a, b) = (trusted(&pair_a), trusted(&pair_b));
    let payload = sign::simple_signing_payload("r/app", &image());
    let registry = FakeRegistry::default();
    registry.put_v2(
        &image(),
        &[layer(payload.clone(), openssl_sign(&pair_b, &payload))],
    );
    let verifier = CosignVerifier::new().unwrap();
    let both = VerifyPolicy::Keys(vec![a.clone(), b]);
    let ok = verifier
        .verify(&registry, "r/app", &image(), &both)
        .await
        .unwrap();
    assert!(ok.identity.starts_with("b.pub"), "{}", ok.identity);
    let err = verifier
        .verify(&registry, "r/app", &image(), &VerifyPolicy::Keys(vec![a]))
        .await
        .unwrap_err()
        .downcast::<VerifyError>()
        .unwrap();
    let VerifyError::Invalid { failures, .. } = &err else {
        panic!("expected Invalid, got {err}")
    };
    assert_eq!(failures[0].check, "signature", "{err}");
}

#[tokio::test]
async fn payload_for_another_digest_fails_even_when_signed() {
    let dir = tempfile::tempdir().unwrap();
    let pair = KeyPair::generate(dir.path(), "a");
    let other = Digest::of(b"a different image");
    let payload = sign::simple_signing_payload("r/app", &other);
    let registry = FakeRegistry::default();
    // Attacker copies a valid signature of `other` onto `image()`'s .sig tag.
    registry.put_v2(
        &image(),
        &[layer(payload.clone(), openssl_sign(&pair, &payload))],
    );
    let err = CosignVerifier::new()
        .unwrap()
        .verify(
            &registry,
            "r/app",
            &image(),
            &VerifyPolicy::Keys(vec![trusted(&pair)]),
        )
        .await
        .unwrap_err()
        .downcast::<VerifyError>()
        .unwrap();
    let VerifyError::Invalid { failures, .. } = &err else {
        panic!("expected Invalid, got {err}")
    };
    assert_eq!(failures[0].check, "payload digest", "{err}");
    assert!(err.to_string().contains(&other.to_string()));
}

#[tokio::test]
async fn unsigned_image_is_no_signature_naming_the_tags() {
    let dir = tempfile::tempdir().unwrap();
    let key = trusted(&KeyPair::generate(dir.path(), "a"));
    let registry = FakeRegistry::default();
    let err = CosignVerifier::new()
        .unwrap()
        .verify(&registry, "r/app", &image(), &VerifyPolicy::Keys(vec![key]))
        .await
        .unwrap_err()
        .downcast::<VerifyError>()
        .unwrap();
    assert!(matches!(err, VerifyError::NoSignature { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("no cosign signature found for r/app@sha256:"),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("'{}.sig'", image().tag_form())),
        "{msg}"
    );
    assert!(msg.contains(&format!("'{}'", image().tag_form())), "{msg}");
}

#[tokio::test]
async fn our_signature_verifies_with_openssl_and_with_our_verifier() {
    let dir = tempfile::tempdir().unwrap();
    let pair = KeyPair::generate(dir.path(), "k");
    let key = SigningKey::from_pem(&std::fs::read(&pair.key).unwrap()).unwrap();
    let signed = sign::sign(&key, "127.0.0.1:5000/app", &image()).unwrap();
    assert_eq!(signed.tag, format!("{}.sig", image().tag_form()));
    std::fs::write(dir.path().join("payload"), &signed.payload).unwrap();
    std::fs::write(
        dir.path().join("sig.der"),
        B64.decode(&signed.signature_b64).unwrap(),
    )
    .unwrap();
    let out = openssl(
        dir.path(),
        &[
            "dgst",
            "-sha256",
            "-verify",
            "k.pub",
            "-signature",
            "sig.der",
            "payload",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out).trim(), "Verified OK");

    // The pushed bytes, laid out as the caller would push them, verify end to end.
    let registry = FakeRegistry::default();
    registry.put_blob("x", &signed.config, BTreeMap::new());
    registry.put_blob("x", &signed.payload, BTreeMap::new());
    registry.put_manifest(Some(&signed.tag), OCI_MANIFEST, &signed.manifest);
    let verified = CosignVerifier::new()
        .unwrap()
        .verify(
            &registry,
            "app",
            &image(),
            &VerifyPolicy::Keys(vec![trusted(&pair)]),
        )
        .await
        .unwrap();
    assert_eq!(verified.method, "cosign v2 key");
}

#[tokio::test]
async fn v3_bundle_found_through_fallback_tag() {
    let Some(vectors) = vectors_dir() else { return };
    let case = vectors.join("conformance/managed-key-happy-path");
    let bundle = std::fs::read(case.join("bundle.sigstore.json")).unwrap();
    let key = TrustedKey {
        name: "key.pub".into(),
        pem: std::fs::read(case.join("key.pub")).unwrap(),
    };
    // The bundle signs a.txt; treat its sha256 as the "image" digest.
    let digest = Digest::of(&std::fs::read(vectors.join("conformance/a.txt")).unwrap());
    let verifier = CosignVerifier::new().unwrap();
    let policy = VerifyPolicy::Keys(vec![key]);

    let registry = FakeRegistry::default();
    registry.put_v3(&digest, &digest, &[&bundle]);
    let ok = verifier
        .verify(&registry, "app", &digest, &policy)
        .await
        .unwrap();
    assert_eq!(ok.method, "cosign v3 key");
    assert!(registry.asked.lock().unwrap().contains(&digest.tag_form()));

    // A referrer whose subject is another digest is not accepted.
    let elsewhere = FakeRegistry::default();
    elsewhere.put_v3(&digest, &Digest::of(b"x"), &[&bundle]);
    let err = verifier
        .verify(&elsewhere, "app", &digest, &policy)
        .await
        .unwrap_err()
        .downcast::<VerifyError>()
        .unwrap();
    let VerifyError::Invalid { failures, .. } = &err else {
        panic!("expected Invalid, got {err}")
    };
    assert_eq!(failures[0].check, "referrer subject", "{err}");
}
