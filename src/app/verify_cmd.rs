//! `ocisource verify`, and the verification step `pull` shares with it. The result is
//! printed in the shape of `cosign verify -o json`, a list of verified payloads, so
//! scripts written against cosign read it unchanged.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::cli::{VerifyArgs, VerifyFlags};
use crate::domain::digest::Digest;
use crate::domain::error_chain::chain;
use crate::domain::reference::RepositoryUrl;
use crate::domain::verification::{IdentityMatch, KeySet, TrustedKey, VerifyPolicy};
use crate::pipeline;
use crate::ports::{
    Registry, RegistryConnector, SignatureVerifier, VerifiedSignature, VerifyFailureKind,
};
use crate::registry::HttpConnector;
use crate::verify::CosignVerifier;

use super::{reference, registry_args, AppError};

fn read(path: &Path, flag: &str) -> Result<Vec<u8>, AppError> {
    std::fs::read(path)
        .map_err(|e| AppError::Input(format!("failed to read {flag} '{}': {e}", path.display())))
}

/// An exact value as a regex matching only itself (anchored here: the policy searches,
/// as cosign and Flux do); a `-regexp` flag as written.
fn exact_or_regex(exact: Option<&String>, regex: Option<&String>) -> Option<String> {
    exact
        .map(|e| format!("^{}$", regex::escape(e)))
        .or_else(|| regex.cloned())
}

/// The policy the flags describe, or `None` when no verification was asked for. Built by
/// [`VerifyPolicy::new`], the constructor the controller's `spec.verify` goes through:
/// `--key` files make key mode, else the identity flags make keyless mode.
pub fn policy(flags: &VerifyFlags) -> Result<Option<VerifyPolicy>, AppError> {
    let keys = if flags.keys.is_empty() {
        None
    } else {
        let keys = flags
            .keys
            .iter()
            .map(|p| {
                read(p, "--key").map(|pem| TrustedKey {
                    name: p.display().to_string(),
                    pem,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Some(KeySet {
            origin: "the --key files".into(),
            keys,
        })
    };
    let (identities, trusted_root_json) = match &keys {
        Some(_) => (Vec::new(), None),
        None => match identity(flags)? {
            None => return Ok(None),
            Some(identity) => {
                let trusted_root_json = flags
                    .trusted_root
                    .as_deref()
                    .map(|p| read(p, "--trusted-root"))
                    .transpose()?;
                (vec![identity], trusted_root_json)
            }
        },
    };
    VerifyPolicy::new(keys, identities, trusted_root_json)
        .map(Some)
        .map_err(reference::policy_error)
}

/// The keyless identity the flags describe, or `None` when neither half is given.
fn identity(flags: &VerifyFlags) -> Result<Option<IdentityMatch>, AppError> {
    let subject = exact_or_regex(
        flags.certificate_identity.as_ref(),
        flags.certificate_identity_regexp.as_ref(),
    );
    let issuer = exact_or_regex(
        flags.certificate_oidc_issuer.as_ref(),
        flags.certificate_oidc_issuer_regexp.as_ref(),
    );
    let (subject, issuer) = match (subject, issuer) {
        (None, None) => return Ok(None),
        (Some(s), Some(i)) => (s, i),
        (Some(_), None) => return Err(AppError::Input(
            "keyless verification needs the issuer too: --certificate-oidc-issuer (or --certificate-oidc-issuer-regexp)".into(),
        )),
        (None, Some(_)) => return Err(AppError::Input(
            "keyless verification needs the identity too: --certificate-identity (or --certificate-identity-regexp)".into(),
        )),
    };
    IdentityMatch::new(&issuer, &subject)
        .map(Some)
        .map_err(reference::policy_error)
}

/// Verifies `digest`; maps failures to exit code 3 (2 for a bad policy, 1 for an outage).
pub async fn verify(
    registry: &dyn Registry,
    url: &RepositoryUrl,
    digest: &Digest,
    policy: &VerifyPolicy,
) -> Result<VerifiedSignature, AppError> {
    let verifier = CosignVerifier::new().map_err(|e| AppError::Failed(chain(&e)))?;
    let e = match verifier
        .verify(registry, &url.to_string(), digest, policy)
        .await
    {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    Err(match e.kind() {
        VerifyFailureKind::Spec => AppError::Input(chain(&e)),
        // An outage is not an untrusted artifact: exit 1, not 3.
        VerifyFailureKind::Registry => AppError::Failed(chain(&e)),
        VerifyFailureKind::NoSignature | VerifyFailureKind::Invalid => {
            AppError::Verification(chain(&e))
        }
    })
}

/// One line for people: what was verified, how, and by which key or identity.
pub fn describe(url: &RepositoryUrl, digest: &Digest, v: &VerifiedSignature) -> String {
    format!(
        "verified signature of {url}@{digest} ({}, {})",
        v.method, v.identity
    )
}

/// `critical` of a cosign SimpleSigning payload.
#[derive(Debug, Serialize)]
struct Critical {
    identity: BTreeMap<&'static str, String>,
    image: BTreeMap<&'static str, String>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// One entry of `cosign verify -o json`.
#[derive(Debug, Serialize)]
struct Payload {
    critical: Critical,
    optional: BTreeMap<&'static str, String>,
}

/// The verified signature as cosign prints it. `optional` holds `Subject` and `Issuer`
/// (cosign's names) for keyless signatures, `Key` for key signatures, and `Method`.
fn cosign_output(url: &RepositoryUrl, digest: &Digest, v: &VerifiedSignature) -> Vec<Payload> {
    let mut optional = BTreeMap::from([("Method", v.method.to_string())]);
    // Keyless identities read `<SAN> (issuer <issuer>)` (see verify/trust.rs).
    match v
        .identity
        .strip_suffix(')')
        .and_then(|s| s.rsplit_once(" (issuer "))
    {
        Some((subject, issuer)) if v.method.ends_with("keyless") => {
            optional.insert("Subject", subject.to_string());
            optional.insert("Issuer", issuer.to_string());
        }
        _ => {
            optional.insert("Key", v.identity.clone());
        }
    }
    vec![Payload {
        critical: Critical {
            identity: BTreeMap::from([(
                "docker-reference",
                format!("{}/{}", url.host, url.repository),
            )]),
            image: BTreeMap::from([("docker-manifest-digest", digest.to_string())]),
            kind: "cosign container image signature",
        },
        optional,
    }]
}

/// `ocisource verify oci://REPO(:TAG|@DIGEST) ...`.
pub async fn run(args: VerifyArgs) -> Result<(), AppError> {
    let (url, reference) = reference::for_verify(&args.url)?;
    let policy = policy(&args.verify)?.ok_or_else(|| {
        AppError::Input("nothing to verify with: give --key, or --certificate-identity with --certificate-oidc-issuer (or their -regexp forms)".into())
    })?;
    let options = registry_args::options(&args.registry, &url.host)?;
    let registry: Arc<dyn Registry> = HttpConnector::new()
        .connect(&url.host, &url.repository, &options)
        .map_err(|e| AppError::Input(e.to_string()))?;
    let resolved = pipeline::resolve(registry.as_ref(), &url, &reference)
        .await
        .map_err(|e| AppError::Failed(chain(&e)))?;
    let verified = verify(registry.as_ref(), &url, &resolved.digest, &policy).await?;
    eprintln!("{}", describe(&url, &resolved.digest, &verified));
    super::print(
        &cosign_output(&url, &resolved.digest, &verified),
        args.output,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn an_empty_key_file_is_refused_as_the_controller_refuses_an_empty_key() {
        let dir = tempfile::tempdir().unwrap();
        let good = file(dir.path(), "a.pub", b"-----BEGIN PUBLIC KEY-----\n");
        let empty = file(dir.path(), "b.pub", b" \n");
        let flags = VerifyFlags {
            keys: vec![good, empty.clone()],
            ..VerifyFlags::default()
        };
        let Err(e) = policy(&flags) else {
            panic!("an empty --key file made a policy")
        };
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            format!(
                "public key '{}' in the --key files is empty",
                empty.display()
            )
        );
    }

    #[test]
    fn keys_beat_identities_and_keyless_takes_the_identity_and_root() {
        let dir = tempfile::tempdir().unwrap();
        let key = file(dir.path(), "cosign.key.pem", b"PEM");
        let root = file(dir.path(), "root.json", b"{}");
        let keyless = VerifyFlags {
            certificate_identity: Some("me@example.com".into()),
            certificate_oidc_issuer_regexp: Some("^https://issuer".into()),
            trusted_root: Some(root),
            ..VerifyFlags::default()
        };
        let Some(VerifyPolicy::Keyless {
            identities,
            trusted_root_json,
        }) = policy(&keyless).unwrap()
        else {
            panic!("expected keyless")
        };
        assert_eq!(identities[0].subject_pattern(), "^me@example\\.com$");
        assert_eq!(identities[0].issuer_pattern(), "^https://issuer");
        assert_eq!(trusted_root_json.as_deref(), Some(&b"{}"[..]));
        // A key file of any name (not only `*.pub`) makes key mode; identities go unused.
        let keyed = VerifyFlags {
            keys: vec![key.clone()],
            ..keyless
        };
        assert_eq!(
            policy(&keyed).unwrap(),
            Some(VerifyPolicy::Keys(vec![TrustedKey {
                name: key.display().to_string(),
                pem: b"PEM".to_vec(),
            }]))
        );
        assert_eq!(policy(&VerifyFlags::default()).unwrap(), None);
    }
}
