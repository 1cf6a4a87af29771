//! Turns the spec's references (`secretRef`, `serviceAccountName`, `certSecretRef`,
//! `proxySecretRef`, `verify.secretRef`, `verify.trustedRootSecretRef`) into registry
//! options and a verification policy. Secrets are read through [`crate::ports::Secrets`]
//! on every reconcile and never written anywhere.
//!
//! Secrets are data only: a `dockerconfigjson` Secret is parsed into a
//! [`DockerConfig`], which cannot run a credential helper, so a tenant's `credsStore` or
//! `credHelpers` never makes the controller execute a program. When such a helper is the
//! only place the Secret keeps the login for the host, the condition says so.

use std::collections::BTreeMap;

use std::time::Duration;

use crate::domain::desired::{Access, VerifyRequest};
use crate::domain::docker_config::DockerConfig;
use crate::domain::secret::{Credentials, Redacted};
use crate::domain::verification::{VerifyPolicy, VerifySpec};
use crate::ports::{ClientIdentity, ProxySettings, RegistryOptions, SecretData, Secrets};

use super::error::ReconcileError;

/// Keys a dockerconfigjson Secret may hold its JSON under.
const DOCKER_CONFIG_KEYS: [&str; 2] = [".dockerconfigjson", "config.json"];

fn value<'a>(data: &'a SecretData, key: &str) -> Option<&'a [u8]> {
    data.get(key).map(|v| v.expose().as_slice())
}

fn text(data: &SecretData, key: &str) -> Option<String> {
    value(data, key)
        .map(|v| String::from_utf8_lossy(v).trim().to_string())
        .filter(|s| !s.is_empty())
}

async fn read(
    secrets: &dyn Secrets,
    namespace: &str,
    name: &str,
    field: &'static str,
) -> Result<SecretData, ReconcileError> {
    secrets
        .secret(namespace, name)
        .await
        .map_err(|source| ReconcileError::Secret { field, source })
}

fn docker_credentials(
    data: &SecretData,
    secret: &str,
    field: &'static str,
    host: &str,
) -> Result<Option<Credentials>, ReconcileError> {
    let bad = |e: &dyn std::fmt::Display| ReconcileError::SecretContent {
        field,
        secret: secret.to_string(),
        problem: e.to_string(),
    };
    let config = match DOCKER_CONFIG_KEYS.iter().find_map(|k| value(data, k)) {
        Some(json) => DockerConfig::parse(json),
        // A legacy `kubernetes.io/dockercfg` Secret, which Flux accepts too.
        None => match value(data, ".dockercfg") {
            Some(json) => DockerConfig::parse_legacy(json),
            None => return Err(ReconcileError::SecretContent {
                field,
                secret: secret.to_string(),
                problem:
                    "no '.dockerconfigjson' (or legacy '.dockercfg') key: create it with 'kubectl create secret docker-registry'"
                        .into(),
            }),
        },
    };
    let config = config.map_err(|e| bad(&e))?;
    let stored = config.credentials_for(host).map_err(|e| bad(&e))?;
    let Some(helper) = config.helper_for(host) else {
        return Ok(stored);
    };
    if stored.is_some() {
        tracing::info!(
            secret,
            field,
            helper = %helper.name,
            "ignoring the credential helper the Secret names ({}); credential helpers never run for Secrets, the login under 'auths' is used",
            helper.source.key()
        );
        return Ok(stored);
    }
    Err(ReconcileError::SecretContent {
        field,
        secret: secret.to_string(),
        problem: format!(
            "its docker config keeps the login for {host} in the credential helper 'docker-credential-{}' ({}); credential helpers are ignored for Secrets, which are data only: put the login under 'auths' (kubectl create secret docker-registry NAME --docker-server={host} --docker-username=... --docker-password=...)",
            helper.name,
            helper.source.key()
        ),
    })
}

/// Registry options for registry `host` from the spec's `access` and its Secrets, with
/// `timeout` (`spec.timeout`) per registry request.
pub async fn registry_options(
    access: &Access,
    timeout: Duration,
    namespace: &str,
    host: &str,
    secrets: &dyn Secrets,
) -> Result<RegistryOptions, ReconcileError> {
    let mut options = RegistryOptions {
        insecure: access.insecure,
        timeout: Some(timeout),
        ..RegistryOptions::default()
    };
    if let Some(name) = &access.secret {
        let data = read(secrets, namespace, name, "spec.secretRef").await?;
        options.credentials = docker_credentials(&data, name, "spec.secretRef", host)?;
    }
    if options.credentials.is_none() {
        if let Some(sa) = &access.service_account {
            let names = secrets
                .image_pull_secrets(namespace, sa)
                .await
                .map_err(|source| ReconcileError::Secret {
                    field: "spec.serviceAccountName",
                    source,
                })?;
            for name in names {
                let data = read(secrets, namespace, &name, "spec.serviceAccountName").await?;
                if let Some(c) = docker_credentials(&data, &name, "spec.serviceAccountName", host)?
                {
                    options.credentials = Some(c);
                    break;
                }
            }
        }
    }
    if let Some(name) = &access.cert_secret {
        let data = read(secrets, namespace, name, "spec.certSecretRef").await?;
        options.ca_pem = value(&data, "ca.crt").map(<[u8]>::to_vec);
        options.client_identity = match (value(&data, "tls.crt"), value(&data, "tls.key")) {
            (Some(cert), Some(key)) => Some(ClientIdentity {
                cert_pem: cert.to_vec(),
                key_pem: Redacted::new(key.to_vec()),
            }),
            (None, None) => None,
            _ => {
                return Err(ReconcileError::SecretContent {
                    field: "spec.certSecretRef",
                    secret: name.clone(),
                    problem: "'tls.crt' and 'tls.key' must be set together".into(),
                })
            }
        };
        if options.ca_pem.is_none() && options.client_identity.is_none() {
            return Err(ReconcileError::SecretContent {
                field: "spec.certSecretRef",
                secret: name.clone(),
                problem: "neither 'ca.crt' nor 'tls.crt'/'tls.key' is set".into(),
            });
        }
    }
    if let Some(name) = &access.proxy_secret {
        let data = read(secrets, namespace, name, "spec.proxySecretRef").await?;
        let address = text(&data, "address").ok_or_else(|| ReconcileError::SecretContent {
            field: "spec.proxySecretRef",
            secret: name.clone(),
            problem: "'address' is required, e.g. http://proxy.example.com:3128".into(),
        })?;
        let credentials = text(&data, "username").map(|username| Credentials {
            username,
            password: Redacted::new(text(&data, "password").unwrap_or_default()),
        });
        options.proxy = Some(ProxySettings {
            address,
            credentials,
        });
    }
    Ok(options)
}

/// The verification policy of `spec.verify` (`verify`), with its Secrets read, or `None`
/// when it is not set.
pub async fn verify_policy(
    verify: Option<&VerifyRequest>,
    namespace: &str,
    secrets: &dyn Secrets,
) -> Result<Option<VerifyPolicy>, ReconcileError> {
    let Some(verify) = verify else {
        return Ok(None);
    };
    let keys: Option<(&str, BTreeMap<String, Vec<u8>>)> = match &verify.secret {
        Some(name) => {
            let data = read(secrets, namespace, name, "spec.verify.secretRef").await?;
            Some((
                name.as_str(),
                data.into_iter()
                    .map(|(k, v)| (k, v.expose().clone()))
                    .collect(),
            ))
        }
        None => None,
    };
    let trusted_root_json = match &verify.trusted_root_secret {
        Some(name) => {
            let data = read(secrets, namespace, name, "spec.verify.trustedRootSecretRef").await?;
            Some(
                value(&data, "trusted_root.json")
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| ReconcileError::SecretContent {
                        field: "spec.verify.trustedRootSecretRef",
                        secret: name.clone(),
                        problem: "no 'trusted_root.json' key".into(),
                    })?,
            )
        }
        None => None,
    };
    VerifyPolicy::from_spec(VerifySpec {
        secret: keys.as_ref().map(|(n, d)| (*n, d)),
        identities: verify.identities.clone(),
        trusted_root_json,
    })
    .map(Some)
    .map_err(ReconcileError::VerifyPolicy)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn data(json: &str) -> SecretData {
        [(
            ".dockerconfigjson".to_string(),
            Redacted::new(json.as_bytes().to_vec()),
        )]
        .into_iter()
        .collect()
    }

    #[test]
    fn a_helper_named_by_a_secret_is_an_error_saying_helpers_are_ignored() {
        for json in [
            r#"{"credsStore":"evil"}"#,
            r#"{"credHelpers":{"reg.example":"evil"},"auths":{"other.example":{"auth":"dTpw"}}}"#,
        ] {
            let e = docker_credentials(&data(json), "creds", "spec.secretRef", "reg.example")
                .unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains("docker-credential-evil")
                    && msg.contains("credential helpers are ignored for Secrets")
                    && msg.contains("'creds'"),
                "{msg}"
            );
        }
    }

    #[test]
    fn logins_under_auths_win_over_helpers_and_plain_configs_still_work() {
        let with_store = r#"{"credsStore":"evil","auths":{"reg.example":{"auth":"dTpw"}}}"#;
        let c = docker_credentials(&data(with_store), "creds", "spec.secretRef", "reg.example")
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.expose().as_str()),
            ("u", "p")
        );
        let none = docker_credentials(
            &data(r#"{"auths":{"other.example":{"auth":"dTpw"}}}"#),
            "creds",
            "spec.secretRef",
            "reg.example",
        )
        .unwrap();
        assert!(none.is_none());
    }
}
