//! The cloud login step (`spec.provider: aws|gcp|azure`): when neither `spec.secretRef`
//! nor the ServiceAccount's image pull secrets hold a login for the registry, the
//! controller's workload identity logs in through `ports::CloudLogin`, as Flux does.
//! `spec.serviceAccountName` with a provider asks for object-level workload identity
//! (Flux's `ObjectLevelWorkloadIdentity` feature gate): that ServiceAccount's identity
//! logs in. With the gate off, the object stalls with `ProviderNotSupported`, naming the
//! field and how to turn the gate on.

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
    let identity = match &access.service_account {
        None => CloudIdentity::Controller,
        Some(sa) if enabled => CloudIdentity::ServiceAccount {
            namespace: namespace.to_string(),
            name: sa.clone(),
        },
        Some(sa) => {
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
    };
    let registry = cloud_hosts::registry(provider, &url.host)
        .map_err(|e| InvalidSpec::field("spec.provider", e.to_string()))?;
    let cloud = ctx.cloud.as_ref().ok_or_else(|| CloudLoginError {
        provider: provider.name(),
        registry: url.host.clone(),
        message: "this process was started without cloud logins".into(),
    })?;
    let credentials = cloud
        .registry_credentials(&CloudLoginRequest {
            registry: &registry,
            identity: &identity,
            insecure: options.insecure,
        })
        .await?;
    options.credentials = Some(credentials);
    Ok(())
}
