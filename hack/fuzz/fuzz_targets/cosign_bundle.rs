//! cosign v3 / Sigstore bundles as `verify` receives them from a registry:
//! `CosignVerifier::verify_bundle` parses the bundle JSON, its certificate chain (DER in
//! the bundle), tlog entries and DSSE envelope, and checks them against a key, the
//! public-good trusted root or a custom `trusted_root.json`.
//!
//! Input: a mode byte, then fields (separated by `FIELD`): bundle JSON, key PEM or
//! trusted root JSON, subject (a `sha256:` digest, or raw artifact bytes).
//! Mode bits 0-1: keyless with the public-good root, key mode with the key of field 1,
//! keyless with field 1 as the trusted root. Bit 2: the subject is raw bytes.
//!
//! Checked: a bundle that verifies names its method, and no longer verifies once the
//! subject changes (the digest binding); every refusal renders a message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ocisource::domain::digest::Digest;
use ocisource::domain::verification::{IdentityMatch, TrustedKey, VerifyPolicy};
use ocisource::verify::BundleSubject;
use ocisource_fuzz::{bytes, field, split, verifier, FIELD};

fn any_identity() -> Vec<IdentityMatch> {
    vec![IdentityMatch::new(".*", ".*").expect("'.*' compiles")]
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let parts = split(rest, FIELD, 3);
    let bundle = bytes(&parts, 0);
    let material = bytes(&parts, 1);
    let subject_field = bytes(&parts, 2);

    let policy = match mode & 3 {
        1 => VerifyPolicy::Keys(vec![TrustedKey {
            name: "fuzz.pub".into(),
            pem: material.to_vec(),
        }]),
        2 => VerifyPolicy::Keyless {
            identities: any_identity(),
            trusted_root_json: Some(material.to_vec()),
        },
        _ => VerifyPolicy::Keyless {
            identities: any_identity(),
            trusted_root_json: None,
        },
    };
    let digest = field(&parts, 2)
        .trim()
        .parse::<Digest>()
        .unwrap_or_else(|_| Digest::of(subject_field));
    let subject = if mode & 4 != 0 {
        BundleSubject::Blob(subject_field)
    } else {
        BundleSubject::Digest(&digest)
    };

    match verifier().verify_bundle(bundle, subject, &policy) {
        Ok(v) => {
            assert!(v.method.starts_with("cosign v3 "), "method {}", v.method);
            assert!(!v.identity.is_empty(), "verified without an identity");
            // The same bundle must not verify for another subject.
            let mut other = subject_field.to_vec();
            other.push(b'\n');
            let other_digest = Digest::of(&other);
            let changed = match subject {
                BundleSubject::Blob(_) => BundleSubject::Blob(&other),
                BundleSubject::Digest(_) => BundleSubject::Digest(&other_digest),
            };
            assert!(
                verifier().verify_bundle(bundle, changed, &policy).is_err(),
                "a bundle verified for two subjects"
            );
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(!shown.is_empty());
        }
    }
});
