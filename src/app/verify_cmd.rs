//! `ocisource verify`, and the verification step `pull` shares with it.

use std::sync::Arc;

use crate::cli::{VerifyArgs, VerifyFlags};
use crate::domain::digest::Digest;
use crate::domain::reference::{parse_image_ref, RepositoryUrl};
use crate::domain::verification::{IdentityMatch, TrustedKey, VerifyPolicy};
use crate::pipeline;
use crate::ports::{Registry, RegistryConnector};
use crate::registry::HttpConnector;
use crate::verify::{CosignVerifier, VerifyError};

use super::{registry_args, AppError};

/// The policy the flags describe, or `None` when no verification was asked for.
pub fn policy(flags: &VerifyFlags) -> Result<Option<VerifyPolicy>, AppError> {
    if !flags.keys.is_empty() {
        let keys = flags
            .keys
            .iter()
            .map(|p| {
                std::fs::read(p)
                    .map(|pem| TrustedKey {
                        name: p.display().to_string(),
                        pem,
                    })
                    .map_err(|e| {
                        AppError::Input(format!("failed to read --key '{}': {e}", p.display()))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Some(VerifyPolicy::Keys(keys)));
    }
    let (Some(subject), Some(issuer)) = (
        &flags.certificate_identity_regexp,
        &flags.certificate_oidc_issuer_regexp,
    ) else {
        return Ok(None);
    };
    let identity =
        IdentityMatch::new(issuer, subject).map_err(|e| AppError::Input(e.to_string()))?;
    let trusted_root_json = flags
        .trusted_root
        .as_deref()
        .map(|p| {
            std::fs::read(p).map_err(|e| {
                AppError::Input(format!(
                    "failed to read --trusted-root '{}': {e}",
                    p.display()
                ))
            })
        })
        .transpose()?;
    Ok(Some(VerifyPolicy::Keyless {
        identities: vec![identity],
        trusted_root_json,
    }))
}

/// Verifies `digest` and prints how; maps failures to exit code 3 (2 for a bad policy).
pub async fn verify(
    registry: &dyn Registry,
    url: &RepositoryUrl,
    digest: &Digest,
    policy: &VerifyPolicy,
) -> Result<String, AppError> {
    let verifier = CosignVerifier::new().map_err(|e| AppError::Failed(e.to_string()))?;
    match verifier
        .verify(registry, &url.to_string(), digest, policy)
        .await
    {
        Ok(v) => Ok(format!(
            "verified signature of {url}@{digest} ({}, {})",
            v.method, v.identity
        )),
        Err(e @ VerifyError::Spec(_)) => Err(AppError::Input(crate::reconcile::error::chain(&e))),
        // An outage is not an untrusted artifact: exit 1, not 3.
        Err(e @ VerifyError::Registry { .. }) => {
            Err(AppError::Failed(crate::reconcile::error::chain(&e)))
        }
        Err(e) => Err(AppError::Verification(crate::reconcile::error::chain(&e))),
    }
}

/// `ocisource verify oci://REPO(:TAG|@DIGEST) ...`.
pub async fn run(args: VerifyArgs) -> Result<(), AppError> {
    let (url, reference) =
        parse_image_ref(&args.url).map_err(|e| AppError::Input(e.to_string()))?;
    let policy = policy(&args.verify)?.ok_or_else(|| {
        AppError::Input("nothing to verify with: give --key, or --certificate-identity-regexp with --certificate-oidc-issuer-regexp".into())
    })?;
    let options = registry_args::options(&args.registry, &url.host)?;
    let registry: Arc<dyn Registry> = HttpConnector::new()
        .connect(&url.host, &url.repository, &options)
        .map_err(|e| AppError::Input(e.to_string()))?;
    let resolved = pipeline::resolve(registry.as_ref(), &url, &reference)
        .await
        .map_err(|e| AppError::Failed(crate::reconcile::error::chain(&e)))?;
    let message = verify(registry.as_ref(), &url, &resolved.digest, &policy).await?;
    eprintln!("{message}");
    Ok(())
}
