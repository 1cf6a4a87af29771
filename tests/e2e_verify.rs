//! Cosign signature verification end to end against the real registry, with keys and
//! signatures made by `openssl` and `.sig` images uploaded by the harness's raw HTTP
//! client (helpers in `e2e_verify/cosign.rs`): `ocisource verify`, `pull --key`
//! (verification before any layer byte, nothing written on failure), the one-shot
//! reconcile with `spec.verify` (two keys, wrong key, unsigned, replayed payload, the
//! verdict cache seen in the registry's access log, keyless without identities), and
//! `push --sign-key` checked with `openssl dgst -verify`. Runners and shared assertions
//! live in `e2e_verify/run.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "e2e_verify/cosign.rs"]
mod cosign;
#[path = "e2e_verify/run.rs"]
mod run;
mod support;

use std::process::Command;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use cosign::{attach, payload, sig_tag, sign_and_attach, KeyPair};
use run::{
    assert_rejected, condition, keys_secret, listing, object, ocisource, path, pull, since, verify,
    OneShot, KEY_VERIFY,
};
use support::{tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// Pushes a one-layer artifact holding `file` = `content`; returns its manifest digest.
async fn push(reg: &TestRegistry, repo: &str, tag: &str, content: &str) -> (String, Vec<String>) {
    let p = reg
        .push_artifact(
            repo,
            tag,
            &[(LAYER, tar_gz(&[("app/config.yaml", content.as_bytes())]))],
            &[],
        )
        .await;
    (p.manifest_digest, p.layer_digests)
}

#[tokio::test]
async fn cli_verify_accepts_openssl_signatures_and_names_each_failed_check() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let dir = tempfile::tempdir().unwrap();
    let good = KeyPair::generate(dir.path(), "good");
    let wrong = KeyPair::generate(dir.path(), "wrong");

    let (signed, _) = push(&reg, "team/app", "signed", "a: 1\n").await;
    sign_and_attach(&reg, "team/app", &signed, &good).await;
    let out = verify(&reg, "team/app:signed", &[&good]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("cosign v2 key"), "{}", out.stderr);
    assert!(out.stderr.contains(&signed), "{}", out.stderr);
    // By digest as well as by tag.
    let out = verify(&reg, &format!("team/app@{signed}"), &[&good]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    // Wrong key: exit 3, the signature check is named.
    let out = verify(&reg, "team/app:signed", &[&wrong]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("signature check failed"),
        "{}",
        out.stderr
    );

    // A valid signature by the trusted key whose payload names another digest (a .sig
    // copied from another image): exit 3, the payload digest check is named.
    let (replayed, _) = push(&reg, "team/app", "replayed", "a: 2\n").await;
    let p = payload(&format!("{}/team/app", reg.host()), &signed);
    attach(&reg, "team/app", &replayed, &p, &good.sign(&p)).await;
    let out = verify(&reg, "team/app:replayed", &[&good]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("payload digest check failed"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&signed), "{}", out.stderr);

    // Two signers (cosign appends a layer per signature): the untrusted one comes first,
    // the trusted one second; any one passing suffices.
    let (cosigned, _) = push(&reg, "team/app", "cosigned", "a: 4\n").await;
    let p = payload(&format!("{}/team/app", reg.host()), &cosigned);
    let (by_wrong, by_good) = (wrong.sign(&p), good.sign(&p));
    cosign::attach_all(
        &reg,
        "team/app",
        &cosigned,
        &[(&p, &by_wrong), (&p, &by_good)],
    )
    .await;
    let out = verify(&reg, "team/app:cosigned", &[&good]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = verify(&reg, "team/app:cosigned", &[&wrong]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let third = KeyPair::generate(dir.path(), "third");
    let out = verify(&reg, "team/app:cosigned", &[&third]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("layer 0") && out.stderr.contains("layer 1"),
        "{}",
        out.stderr
    );

    // Unsigned: exit 3.
    push(&reg, "team/app", "unsigned", "a: 3\n").await;
    let out = verify(&reg, "team/app:unsigned", &[&good]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("no cosign signature found"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn pull_with_key_verifies_before_any_layer_byte_and_writes_nothing_on_failure() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let dir = tempfile::tempdir().unwrap();
    let good = KeyPair::generate(dir.path(), "good");
    let wrong = KeyPair::generate(dir.path(), "wrong");
    let (d1, _) = push(&reg, "team/pull", "v1", "version: 1\n").await;
    sign_and_attach(&reg, "team/pull", &d1, &good).await;
    let work = dir.path().join("out");
    std::fs::create_dir_all(&work).unwrap();
    let file = work.join("artifact.tar.gz");

    let out = pull(&reg, "v1", &file, &good);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let printed: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(
        printed["verified"]
            .as_str()
            .is_some_and(|v| v.contains("cosign v2 key")),
        "{printed}"
    );
    let first = std::fs::read(&file).unwrap();
    let extracted = Command::new("tar")
        .arg("-xzOf")
        .arg(&file)
        .arg("app/config.yaml")
        .output()
        .unwrap();
    assert_eq!(extracted.stdout, b"version: 1\n");
    let files_before = listing(&work);

    // v2 is signed by another key: exit 3, the -o file keeps v1, no layer is fetched.
    let (d2, layers2) = push(&reg, "team/pull", "v2", "version: 2\n").await;
    sign_and_attach(&reg, "team/pull", &d2, &wrong).await;
    let mark = reg.request_log().len();
    let out = pull(&reg, "v2", &file, &good);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("signature check failed"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read(&file).unwrap(), first, "the -o file changed");
    assert_eq!(listing(&work), files_before, "files appeared beside -o");
    let log = since(&reg, mark);
    assert!(
        log.iter().any(|r| r.path.contains(&sig_tag(&d2))),
        "the signature was never looked up: {log:?}"
    );
    for layer in &layers2 {
        assert!(
            !log.iter()
                .any(|r| r.method == "GET" && r.path.ends_with(&format!("/blobs/{layer}"))),
            "layer {layer} was downloaded before verification failed: {log:?}"
        );
    }
}

#[tokio::test]
async fn oneshot_two_keys_one_matching_then_wrong_key_unsigned_and_replayed_payload_fail() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let oneshot = OneShot::new();
    let good = KeyPair::generate(oneshot.dir.path(), "good");
    let other = KeyPair::generate(oneshot.dir.path(), "other");
    let obj = object(&reg, "team/app", KEY_VERIFY);
    let both = keys_secret(&[("a-other.pub", &other), ("b-good.pub", &good)]);
    let only_other = keys_secret(&[("other.pub", &other)]);

    let (d1, _) = push(&reg, "team/app", "v1", "v: 1\n").await;
    sign_and_attach(&reg, "team/app", &d1, &good).await;
    let (code, first) = oneshot.run(&[&obj, &both]);
    assert_eq!(code, 0, "{first}");
    assert_eq!(condition(&first, "Ready")["status"], "True", "{first}");
    let verified = condition(&first, "SourceVerified");
    assert_eq!(verified["status"], "True", "{first}");
    assert_eq!(verified["reason"], "Succeeded", "{first}");
    let message = verified["message"].as_str().unwrap();
    assert!(message.contains("cosign v2 key"), "{message}");
    assert!(message.contains("b-good.pub"), "{message}");
    assert!(message.contains(&d1), "{message}");
    assert_eq!(first["artifact"]["revision"], format!("v1@{d1}"));
    let files = oneshot.store_files();
    assert_eq!(files.len(), 1, "{files:?}");

    // v1 moves to a new digest signed by `good`, but the Secret trusts only `other`.
    let (d2, _) = push(&reg, "team/app", "v1", "v: 2\n").await;
    sign_and_attach(&reg, "team/app", &d2, &good).await;
    let run = oneshot.run(&[&obj, &only_other]);
    assert_rejected(&oneshot, run, &first, &files, "signature check failed");

    // Unsigned new digest, both keys trusted.
    push(&reg, "team/app", "v1", "v: 3\n").await;
    let run = oneshot.run(&[&obj, &both]);
    assert_rejected(&oneshot, run, &first, &files, "no cosign signature found");

    // A new digest carrying a valid signature by `good` over a payload naming d1.
    let (d4, _) = push(&reg, "team/app", "v1", "v: 4\n").await;
    let p = payload(&format!("{}/team/app", reg.host()), &d1);
    attach(&reg, "team/app", &d4, &p, &good.sign(&p)).await;
    let run = oneshot.run(&[&obj, &both]);
    assert_rejected(&oneshot, run, &first, &files, "payload digest check failed");

    // Signed properly again: the new digest is stored.
    sign_and_attach(&reg, "team/app", &d4, &good).await;
    let (code, st) = oneshot.run(&[&obj, &both]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["artifact"]["revision"], format!("v1@{d4}"));
    assert_eq!(condition(&st, "SourceVerified")["status"], "True");
}

#[tokio::test]
async fn verdict_recorded_for_this_generation_skips_the_signature_fetch() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let oneshot = OneShot::new();
    let good = KeyPair::generate(oneshot.dir.path(), "good");
    let obj = object(&reg, "team/cached", KEY_VERIFY);
    let secret = keys_secret(&[("good.pub", &good)]);
    let (d1, _) = push(&reg, "team/cached", "v1", "v: 1\n").await;
    sign_and_attach(&reg, "team/cached", &d1, &good).await;
    let sig = sig_tag(&d1);

    let mark = reg.request_log().len();
    let (code, first) = oneshot.run(&[&obj, &secret]);
    assert_eq!(code, 0, "{first}");
    let log = since(&reg, mark);
    assert!(
        log.iter().any(|r| r.path.contains(&sig)),
        "the first run must fetch {sig}: {log:?}"
    );

    let mark = reg.request_log().len();
    let (code, second) = oneshot.run(&[&obj, &secret]);
    assert_eq!(code, 0, "{second}");
    let log = since(&reg, mark);
    assert!(
        !log.iter().any(|r| r.path.contains(&sig)),
        "an unchanged digest verified for this generation must not be re-verified: {log:?}"
    );
    assert_eq!(
        condition(&second, "SourceVerified"),
        condition(&first, "SourceVerified")
    );
    assert_eq!(second["artifact"], first["artifact"]);
}

#[tokio::test]
async fn recorded_verdict_is_bound_to_the_trusted_keys() {
    // Removing the signing key from the Secret (key revocation) changes neither the
    // digest nor the generation; the recorded verdict must not outlive the key.
    let reg = TestRegistry::start(RegistryOpts::plain());
    let oneshot = OneShot::new();
    let good = KeyPair::generate(oneshot.dir.path(), "good");
    let other = KeyPair::generate(oneshot.dir.path(), "other");
    let obj = object(&reg, "team/revoked", KEY_VERIFY);
    let (d1, _) = push(&reg, "team/revoked", "v1", "v: 1\n").await;
    sign_and_attach(&reg, "team/revoked", &d1, &good).await;
    let (code, first) = oneshot.run(&[&obj, &keys_secret(&[("good.pub", &good)])]);
    assert_eq!(code, 0, "{first}");
    let files = oneshot.store_files();

    let mark = reg.request_log().len();
    let run = oneshot.run(&[&obj, &keys_secret(&[("other.pub", &other)])]);
    let log = since(&reg, mark);
    assert!(
        log.iter().any(|r| r.path.contains(&sig_tag(&d1))),
        "a changed trust policy must re-verify: {log:?}"
    );
    assert_rejected(&oneshot, run, &first, &files, "signature check failed");
}

#[tokio::test]
async fn keyless_without_match_oidc_identity_stalls() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let oneshot = OneShot::new();
    let (d1, _) = push(&reg, "team/keyless", "v1", "v: 1\n").await;
    let obj = object(&reg, "team/keyless", "    provider: cosign");
    let mark = reg.request_log().len();
    let (code, st) = oneshot.run(&[&obj]);
    assert_eq!(code, 1, "{st}");
    let stalled = condition(&st, "Stalled");
    assert_eq!(stalled["status"], "True", "{st}");
    assert!(
        stalled["message"]
            .as_str()
            .unwrap()
            .contains("keyless verification requires at least one matchOIDCIdentity entry"),
        "{stalled}"
    );
    assert_eq!(condition(&st, "SourceVerified")["status"], "False", "{st}");
    assert_eq!(condition(&st, "Ready")["status"], "False", "{st}");
    assert!(st.get("artifact").is_none_or(|a| a.is_null()), "{st}");
    let log = since(&reg, mark);
    assert!(
        !log.iter().any(|r| r.path.contains("/blobs/")),
        "nothing may be downloaded for an unusable verify spec: {log:?}"
    );
    assert!(
        !log.iter().any(|r| r.path.contains(&sig_tag(&d1))),
        "{log:?}"
    );
}

#[tokio::test]
async fn push_sign_key_signature_verifies_with_openssl_and_ocisource_verify() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let dir = tempfile::tempdir().unwrap();
    let key = KeyPair::generate(dir.path(), "cosign");
    let other = KeyPair::generate(dir.path(), "other");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("apps")).unwrap();
    std::fs::write(src.join("apps/app.yaml"), "kind: ConfigMap\n").unwrap();
    let url = format!("oci://{}/team/signed:v1", reg.host());
    let out = ocisource(&[
        "push",
        &url,
        "--path",
        path(&src),
        "--sign-key",
        path(&key.key),
        "--insecure",
        "--output",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pushed: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let digest = pushed["digest"].as_str().unwrap().to_string();
    assert_eq!(pushed["signature"], sig_tag(&digest));

    // The .sig image as any cosign client would read it, with raw HTTP.
    let manifest: serde_json::Value =
        serde_json::from_slice(&cosign::get_manifest(&reg, "team/signed", &sig_tag(&digest)).await)
            .unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], cosign::SIMPLESIGNING);
    let payload_bytes =
        cosign::get_blob(&reg, "team/signed", layers[0]["digest"].as_str().unwrap()).await;
    let signed: serde_json::Value = serde_json::from_slice(&payload_bytes).unwrap();
    assert_eq!(
        signed["critical"]["image"]["docker-manifest-digest"],
        digest
    );
    assert_eq!(
        signed["critical"]["identity"]["docker-reference"],
        format!("{}/team/signed", reg.host())
    );
    assert_eq!(
        signed["critical"]["type"],
        "cosign container image signature"
    );
    let sig_b64 = layers[0]["annotations"][cosign::ANN_SIGNATURE]
        .as_str()
        .unwrap();
    let check = tempfile::tempdir().unwrap();
    std::fs::write(check.path().join("payload"), &payload_bytes).unwrap();
    std::fs::write(check.path().join("sig.der"), B64.decode(sig_b64).unwrap()).unwrap();
    let ok = cosign::openssl(
        check.path(),
        &[
            "dgst",
            "-sha256",
            "-verify",
            path(&key.public),
            "-signature",
            "sig.der",
            "payload",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&ok).trim(), "Verified OK");
    let refused = Command::new("openssl")
        .args(["dgst", "-sha256", "-verify", path(&other.public)])
        .args(["-signature", "sig.der", "payload"])
        .current_dir(check.path())
        .output()
        .unwrap();
    assert!(!refused.status.success(), "another key must not verify it");

    let out = verify(&reg, "team/signed:v1", &[&key]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains(&digest), "{}", out.stderr);
    let out = verify(&reg, "team/signed:v1", &[&other]);
    assert_eq!(out.code, 3, "{}", out.stderr);
}
