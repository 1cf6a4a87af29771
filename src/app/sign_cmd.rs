//! `ocisource sign`: attach a cosign v2 key signature (`sha256-<hex>.sig`, the simple
//! signing payload cosign writes) to any manifest in a registry, an ocisource artifact or
//! a container image, as `cosign sign --key` does; `push --sign-key` shares the code.
//! A tag is resolved to its digest first and the digest is what gets signed.

use bytes::Bytes;
use serde::Serialize;

use crate::cli::SignArgs;
use crate::domain::digest::Digest;
use crate::domain::manifest::OCI_MANIFEST;
use crate::domain::reference::{RefSpec, RepositoryUrl};
use crate::ports::RegistryConnector;
use crate::registry::{HttpConnector, RegistryClient};
use crate::verify::sign::{self, SigningKey};

use super::{reference, registry_args, AppError};

/// What `sign` prints.
#[derive(Debug, Serialize)]
pub struct Signed {
    /// `host/repo`.
    pub repository: String,
    /// The manifest digest signed.
    pub digest: String,
    /// Tag of the cosign signature (`sha256-<hex>.sig`).
    pub signature: String,
}

/// Reads a signing key given with `flag`: cosign's encrypted `cosign.key` (password in
/// `COSIGN_PASSWORD`, as cosign reads it), PKCS#8 or SEC1 PEM.
pub fn read_key(path: &std::path::Path, flag: &str) -> Result<SigningKey, AppError> {
    let pem = std::fs::read(path)
        .map_err(|e| AppError::Input(format!("failed to read {flag} '{}': {e}", path.display())))?;
    let password = std::env::var_os("COSIGN_PASSWORD").map(|v| v.into_encoded_bytes());
    SigningKey::from_pem_with_password(&pem, password.as_deref())
        .map_err(|e| AppError::Input(format!("invalid {flag} '{}': {e}", path.display())))
}

/// Signs `digest` of `url` with `key` and uploads the signature; returns its tag.
pub async fn attach(
    client: &RegistryClient,
    url: &RepositoryUrl,
    digest: &Digest,
    key: &SigningKey,
) -> Result<String, AppError> {
    let failed = |e: crate::ports::RegistryError| {
        AppError::Failed(format!(
            "failed to attach the signature of {digest} to {url}: {e}"
        ))
    };
    let reference = format!("{}/{}", url.host, url.repository);
    let sig = sign::sign(key, &reference, digest)
        .map_err(|e| AppError::Failed(format!("failed to sign {digest}: {e}")))?;
    client
        .push_blob(Bytes::from(sig.payload.clone()))
        .await
        .map_err(failed)?;
    client
        .push_blob(Bytes::from(sig.config.clone()))
        .await
        .map_err(failed)?;
    client
        .put_manifest(&sig.tag, OCI_MANIFEST, Bytes::from(sig.manifest.clone()))
        .await
        .map_err(failed)?;
    Ok(sig.tag)
}

/// Runs `sign`.
pub async fn run(args: SignArgs) -> Result<(), AppError> {
    let (url, spec) = reference::for_verify(&args.url)?;
    let key = read_key(&args.key, "--key")?;
    let options = registry_args::options(&args.registry, &url.host)?;
    let digest = match spec {
        RefSpec::Digest(d) => d,
        RefSpec::Tag(tag) => {
            let registry = HttpConnector::new()
                .connect(&url.host, &url.repository, &options)
                .map_err(|e| AppError::Input(e.to_string()))?;
            registry
                .manifest_digest(&tag)
                .await
                .map_err(|e| AppError::Failed(format!("failed to resolve {tag} in {url}: {e}")))?
        }
        RefSpec::Semver(_) => {
            return Err(AppError::Input(format!(
            "'{}' names no tag or digest: sign oci://host/repo:tag or oci://host/repo@sha256:<hex>",
            args.url
        )))
        }
    };
    let client = HttpConnector::new()
        .client(&url.host, &url.repository, &options)
        .map_err(|e| AppError::Input(e.to_string()))?;
    let signature = attach(&client, &url, &digest, &key).await?;
    super::print(
        &Signed {
            repository: format!("{}/{}", url.host, url.repository),
            digest: digest.to_string(),
            signature,
        },
        args.output,
    )
}
