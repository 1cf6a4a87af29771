//! The cloud login step (`spec.provider: aws|gcp|azure`): when neither `spec.secretRef`
//! nor the ServiceAccount's image pull secrets hold a login for the registry, a workload
//! identity logs in through `ports::CloudLogin`, as Flux does. Whose identity:
//!
//! - `spec.serviceAccountName` asks for object-level workload identity (Flux's
//!   `ObjectLevelWorkloadIdentity` feature gate): that ServiceAccount logs in. With the
//!   gate off, the object stalls with `ProviderNotSupported`, naming the field and how to
//!   turn the gate on.
//! - Without it, `--default-service-account` (Flux's multi-tenancy lockdown) makes that
//!   ServiceAccount of the object's namespace log in instead, never the controller.
//! - Otherwise the controller's own identity logs in, but only when the object leaves the
//!   way to the registry to the controller: with `spec.insecure`, `spec.proxySecretRef` or
//!   a CA of its own (`ca.crt` in `spec.certSecretRef`), the object decides who can read
//!   the registry traffic, and with it the controller's ECR, Google or ACR token (issue
//!   31). Such an object fails before any token is requested.

use crate::api::validate::{FieldError, InvalidSpec};
use crate::domain::cloud_hosts;
use crate::domain::desired::Access;
use crate::domain::reference::RepositoryUrl;
use crate::ports::{CloudIdentity, CloudLoginError, CloudLoginRequest, RegistryOptions};

use super::context::Context;
use super::error::ReconcileError;

/// Sets `options.credentials` from the cloud identity when `spec.provider` (in `access`)
/// asks for it and no Secret gave a login.
pub async fn login(
    access: &Access,
    namespace: &str,
    url: &RepositoryUrl,
    ctx: &Context,
    options: &mut RegistryOptions,
) -> Result<(), ReconcileError> {
    let Some(provider) = access.cloud else {
        return Ok(());
    };
    if options.credentials.is_some() {
        return Ok(());
    }
    let enabled = ctx
        .cloud
        .as_ref()
        .is_some_and(|c| c.object_level_identity());
    let lockdown = ctx.default_service_account.as_ref();
    let identity = match (&access.service_account, lockdown) {
        (Some(sa), _) if !enabled => {
            return Err(InvalidSpec {
                errors: vec![FieldError {
                    field: "spec.serviceAccountName",
                    message: format!(
                        "logging in to a '{provider}' registry as ServiceAccount '{sa}' \
                         (object-level workload identity) needs the ObjectLevelWorkloadIdentity \
                         feature gate, which is off: start the controller with \
                         --feature-gates=ObjectLevelWorkloadIdentity=true (chart value \
                         controller.objectLevelWorkloadIdentity: true), or remove spec.serviceAccountName \
                         to log in with the controller's identity"
                    ),
                    unsupported: true,
                }],
            }
            .into());
        }
        (Some(name), _) | (None, Some(name)) => CloudIdentity::ServiceAccount {
            namespace: namespace.to_string(),
            name: name.clone(),
        },
        (None, None) => CloudIdentity::Controller,
    };
    let registry = cloud_hosts::registry(provider, &url.host)
        .map_err(|e| InvalidSpec::field("spec.provider", e.to_string()))?;
    let failed = |message: String| CloudLoginError {
        provider: provider.name(),
        registry: url.host.clone(),
        message,
    };
    if identity == CloudIdentity::Controller {
        let chosen = object_chosen_transport(access, options);
        if !chosen.is_empty() {
            // Retried with backoff rather than stalled: the CA half of this comes from a
            // Secret's content (`ca.crt`), which can change without a new generation, and
            // a retry requests no token, so it costs nothing but the Secret reads.
            return Err(failed(refusal(provider.name(), &chosen)).into());
        }
    }
    let cloud = ctx
        .cloud
        .as_ref()
        .ok_or_else(|| failed("this process was started without cloud logins".into()))?;
    let credentials = cloud
        .registry_credentials(&CloudLoginRequest {
            registry: &registry,
            identity: &identity,
        })
        .await
        .map_err(|mut e| {
            if access.service_account.is_none() {
                if let CloudIdentity::ServiceAccount { name, .. } = &identity {
                    e.message = format!(
                        "as the default ServiceAccount '{name}' of namespace '{namespace}' \
                         (the controller's --default-service-account: multi-tenant workload \
                         identity lockdown; create that ServiceAccount with the cloud \
                         identity annotations, or ask the cluster administrator): {}",
                        e.message
                    );
                }
            }
            e
        })?;
    options.credentials = Some(credentials);
    Ok(())
}

/// The fields by which the object chose how the registry is reached, each with how it
/// does: with any of them, the controller's own token would travel a way the object's
/// author controls (their proxy; TLS they can intercept with their CA, or unverified).
/// A client certificate alone (`tls.crt`/`tls.key` without `ca.crt`) chooses nothing.
fn object_chosen_transport(access: &Access, options: &RegistryOptions) -> Vec<String> {
    let mut chosen = Vec::new();
    if access.insecure {
        chosen.push("spec.insecure is true".to_string());
    }
    if let Some(name) = &access.proxy_secret {
        chosen.push(format!("spec.proxySecretRef names Secret '{name}'"));
    }
    if let (Some(name), Some(_)) = (&access.cert_secret, &options.ca_pem) {
        chosen.push(format!("spec.certSecretRef Secret '{name}' holds a ca.crt"));
    }
    chosen
}

/// The message refusing the controller's identity because of `chosen`.
fn refusal(provider: &str, chosen: &[String]) -> String {
    format!(
        "refusing to log in with the controller's own {provider} identity because the \
         object chooses how the registry is reached ({}): the controller's token would go \
         where that choice sends it. Set spec.serviceAccountName to log in as a \
         ServiceAccount of this namespace (the ObjectLevelWorkloadIdentity feature gate), \
         or remove spec.insecure, spec.proxySecretRef and the ca.crt of spec.certSecretRef",
        chosen.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> Access {
        Access {
            secret: None,
            service_account: None,
            cert_secret: None,
            proxy_secret: None,
            insecure: false,
            cloud: None,
        }
    }

    #[test]
    fn a_client_certificate_alone_chooses_nothing_but_a_ca_proxy_or_insecure_do() {
        let plain = RegistryOptions::default();
        assert!(object_chosen_transport(&access(), &plain).is_empty());
        let mtls_only = Access {
            cert_secret: Some("mtls".into()),
            ..access()
        };
        assert!(object_chosen_transport(&mtls_only, &plain).is_empty());

        let with_ca = RegistryOptions {
            ca_pem: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
            ..RegistryOptions::default()
        };
        let all = Access {
            insecure: true,
            proxy_secret: Some("hostile".into()),
            ..mtls_only
        };
        assert_eq!(
            object_chosen_transport(&all, &with_ca),
            [
                "spec.insecure is true",
                "spec.proxySecretRef names Secret 'hostile'",
                "spec.certSecretRef Secret 'mtls' holds a ca.crt",
            ]
        );
    }
}
