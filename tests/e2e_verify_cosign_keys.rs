//! cosign key compatibility on the real binary and the real registry: `push --sign-key`
//! with cosign's encrypted `cosign.key` (made here by Python's OpenSSL-backed scrypt and
//! libsodium's secretbox, not by ocisource; both the current `ENCRYPTED SIGSTORE` and the
//! older `ENCRYPTED COSIGN` labels; password from `COSIGN_PASSWORD`) and with a SEC1
//! `EC PRIVATE KEY` from `openssl ecparam`, each verified with the matching public key;
//! and `verify`'s exact `--certificate-identity`/`--certificate-oidc-issuer` beside the
//! regexp forms, on a real GitHub Actions keyless signature from the shared vectors
//! (skipped with a message when they are absent).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
#[allow(dead_code)] // the signature upload helpers are for the e2e_verify tests
#[path = "e2e_verify/cosign.rs"]
mod cosign;
mod support;
mod verify_common;

use std::path::Path;
use std::process::Command;

use cli_common::{arg, command, ocisource, run, Out};
use support::{pki::openssl, RegistryOpts, TestRegistry};

/// Writes cosign's encrypted key envelope around the PKCS#8 DER `der`, as cosign's
/// go-securesystemslib `encrypted` package does (scrypt N=32768 r=8 p=1, NaCl
/// secretbox), under the PEM label `label`.
const SEAL: &str = r#"
import base64, ctypes, ctypes.util, hashlib, json, os, sys
der, password, label, out = open(sys.argv[1], "rb").read(), sys.argv[2].encode(), sys.argv[3], sys.argv[4]
salt, nonce = os.urandom(32), os.urandom(24)
key = hashlib.scrypt(password, salt=salt, n=32768, r=8, p=1, maxmem=64 << 20, dklen=32)
name = ctypes.util.find_library("sodium") or "libsodium.so.23"
sodium = ctypes.CDLL(name)
assert sodium.sodium_init() >= 0
box = ctypes.create_string_buffer(len(der) + 16)
assert sodium.crypto_secretbox_easy(box, der, ctypes.c_ulonglong(len(der)), nonce, key) == 0
b64 = lambda b: base64.b64encode(b).decode()
envelope = {"kdf": {"name": "scrypt", "params": {"N": 32768, "r": 8, "p": 1}, "salt": b64(salt)},
            "cipher": {"name": "nacl/secretbox", "nonce": b64(nonce)}, "ciphertext": b64(box.raw)}
body = b64(json.dumps(envelope).encode())
lines = [f"-----BEGIN {label}-----"] + [body[i:i + 64] for i in range(0, len(body), 64)] + [f"-----END {label}-----", ""]
open(out, "w").write("\n".join(lines))
"#;

/// `name.key` (cosign's encrypted format under `label`, sealed with `password`) and
/// `name.pub`, from a fresh openssl P-256 key.
fn cosign_key(dir: &Path, name: &str, password: &str, label: &str) -> (String, String) {
    let pair = cosign::KeyPair::generate(dir, name);
    let der = dir.join(format!("{name}.der"));
    openssl(
        dir,
        &[
            "pkcs8",
            "-topk8",
            "-nocrypt",
            "-in",
            arg(&pair.key),
            "-outform",
            "DER",
            "-out",
            arg(&der),
        ],
    );
    let key = dir.join(format!("{name}.key"));
    let sealed = Command::new("python3")
        .args(["-c", SEAL, arg(&der), password, label, arg(&key)])
        .output()
        .expect("python3");
    assert!(
        sealed.status.success(),
        "sealing a cosign key needs python3 and libsodium (apt-get install libsodium23): {}",
        String::from_utf8_lossy(&sealed.stderr)
    );
    (arg(&key).to_string(), arg(&pair.public).to_string())
}

/// `push --sign-key KEY` of a one-file directory to `repo:v1`, with `COSIGN_PASSWORD`.
fn push_signed(
    reg: &TestRegistry,
    dir: &Path,
    repo: &str,
    key: &str,
    password: Option<&str>,
) -> Out {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("app.yaml"), "kind: ConfigMap\n").unwrap();
    let url = format!("oci://{}/{repo}:v1", reg.host());
    let mut cmd = command(&[
        "push",
        &url,
        "--path",
        arg(&src),
        "--sign-key",
        key,
        "--insecure",
        "-o",
        "json",
    ]);
    if let Some(p) = password {
        cmd.env("COSIGN_PASSWORD", p);
    }
    run(cmd, None)
}

fn verify_key(reg: &TestRegistry, repo: &str, public: &str) -> Out {
    let url = format!("oci://{}/{repo}:v1", reg.host());
    ocisource(&["verify", &url, "--insecure", "--key", public])
}

#[tokio::test]
async fn cosign_encrypted_and_sec1_keys_sign_what_their_public_keys_verify() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    for (i, (label, password)) in [
        ("ENCRYPTED SIGSTORE PRIVATE KEY", "s3cret"),
        ("ENCRYPTED COSIGN PRIVATE KEY", "older label"),
        ("ENCRYPTED SIGSTORE PRIVATE KEY", ""),
    ]
    .into_iter()
    .enumerate()
    {
        let (key, public) = cosign_key(d, &format!("k{i}"), password, label);
        let repo = format!("team/enc{i}");
        let out = push_signed(&reg, d, &repo, &key, Some(password));
        assert_eq!(out.code, 0, "{label} '{password}': {}", out.stderr);
        let out = verify_key(&reg, &repo, &public);
        assert_eq!(out.code, 0, "{label}: {}", out.stderr);
    }

    // Without COSIGN_PASSWORD, or with a wrong one: exit 2, nothing pushed.
    let (key, _) = cosign_key(d, "locked", "right", "ENCRYPTED SIGSTORE PRIVATE KEY");
    for (password, said) in [
        (None, "set COSIGN_PASSWORD"),
        (Some("wrong"), "wrong password"),
    ] {
        let mark = reg.request_log().len();
        let out = push_signed(&reg, d, "team/locked", &key, password);
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.stderr.contains(said), "{}", out.stderr);
        assert_eq!(reg.request_log().len(), mark, "pushed with an unusable key");
    }

    // SEC1, as `openssl ecparam -genkey` writes it.
    let sec1 = d.join("ec.pem");
    let public = d.join("ec.pub");
    openssl(
        d,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            arg(&sec1),
        ],
    );
    assert!(std::fs::read_to_string(&sec1)
        .unwrap()
        .contains("BEGIN EC PRIVATE KEY"));
    openssl(
        d,
        &["ec", "-in", arg(&sec1), "-pubout", "-out", arg(&public)],
    );
    let out = push_signed(&reg, d, "team/sec1", arg(&sec1), None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(verify_key(&reg, "team/sec1", arg(&public)).code, 0);
    // A key of another signer does not verify it.
    let other = cosign::KeyPair::generate(d, "other");
    assert_eq!(verify_key(&reg, "team/sec1", arg(&other.public)).code, 3);
    // A private key where the public one belongs is named as such.
    let out = verify_key(&reg, "team/sec1", arg(&sec1));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("this is a private key"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn exact_identity_flags_match_exactly_and_regexps_match_patterns() {
    let Some(vectors) = verify_common::vectors_dir() else {
        return;
    };
    let case = vectors.join("cosign-v2-keyless-gha");
    let identity = "https://github.com/salrashid123/go-bazel-github-workflow/.github/workflows/release.yaml@refs/tags/v0.0.30";
    let issuer = "https://token.actions.githubusercontent.com";
    let digest = "sha256:c05263d2ff654c3a94243662440913f045075d59c436e2c69e9145ec2b87a321";
    let repo = "salrashid123/server_image";

    // The .sig image as cosign made it: its payload and its four annotations, verbatim.
    let reg = TestRegistry::start(RegistryOpts::plain());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(case.join("sig-manifest.json")).unwrap()).unwrap();
    let payload = std::fs::read(case.join("payload.json")).unwrap();
    let annotations = manifest["layers"][0]["annotations"].clone();
    cosign::attach_layers(&reg, repo, digest, &[(&payload, annotations)]).await;

    let root = vectors.join("trusted-roots/public-good.trusted_root.json");
    let url = format!("oci://{}/{repo}@{digest}", reg.host());
    let verify = |flags: &[&str]| {
        let mut args = vec![
            "verify",
            url.as_str(),
            "--insecure",
            "--trusted-root",
            arg(&root),
        ];
        args.extend_from_slice(flags);
        ocisource(&args)
    };

    let out = verify(&[
        "--certificate-identity",
        identity,
        "--certificate-oidc-issuer",
        issuer,
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v[0]["optional"]["Subject"], identity, "{v}");
    assert_eq!(v[0]["optional"]["Issuer"], issuer, "{v}");
    assert_eq!(
        v[0]["critical"]["image"]["docker-manifest-digest"], digest,
        "{v}"
    );

    let prefix = identity.trim_end_matches("@refs/tags/v0.0.30");
    let prefix_re = format!("{prefix}.*");
    let dotted = identity.replace("v0.0.30", "v0.0.3.");
    let dotted_re = regex_escape_all_but_last_dot(&dotted);
    let (id, id_re) = ("--certificate-identity", "--certificate-identity-regexp");
    let (is, is_re) = (
        "--certificate-oidc-issuer",
        "--certificate-oidc-issuer-regexp",
    );
    for (flags, code) in [
        // Exact means exact: a prefix fails, and so does a '.' that a regexp would let
        // match the real identity's '0'; so does another issuer.
        ([id, prefix, is, issuer], 3),
        ([id, &dotted, is, issuer], 3),
        ([id, identity, is, "https://accounts.google.com"], 3),
        // The same strings as regexps match.
        ([id_re, &prefix_re, is_re, issuer], 0),
        ([id_re, &dotted_re, is_re, issuer], 0),
        // Exact identity with a regexp issuer: cosign takes each pair independently.
        ([id, identity, is_re, "https://token\\.actions\\..*"], 0),
    ] {
        let out = verify(&flags);
        assert_eq!(out.code, code, "{flags:?}: {}", out.stderr);
        assert!(
            code == 0 || out.stderr.contains("identity check failed"),
            "{}",
            out.stderr
        );
    }
    // An exact flag and its regexp form together is a usage error.
    let out = verify(&[
        "--certificate-identity",
        identity,
        "--certificate-identity-regexp",
        ".*",
        "--certificate-oidc-issuer",
        issuer,
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
}

/// `s` as a regexp matching itself, except that its last `.` stays a wildcard.
fn regex_escape_all_but_last_dot(s: &str) -> String {
    let (head, tail) = s.rsplit_once('.').unwrap();
    format!("{}.{}", escape(head), escape(tail))
}

/// Escapes the regexp metacharacters that occur in URLs.
fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '.' | '?' | '*' | '+' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' | '\\' => {
                vec!['\\', c]
            }
            c => vec![c],
        })
        .collect()
}
