//! The `OCIRepository` custom resource (`ocisource.dev/v1beta1`): every field of Flux's
//! v1 `OCIRepository` spec with the same names, defaults and schema validation, plus
//! `platform`, and Flux's v1 status. Doc comments here become the CRD's descriptions.
//! Checks the schema cannot express live in `validate.rs`, which imports this file (this
//! file does not import it: `OciRepository::validate` is defined there). Wire types only:
//! no kube client, no I/O.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::artifact::Artifact;

/// Annotation whose changed value requests an immediate reconcile; the handled value is
/// echoed in `status.lastHandledReconcileAt`.
pub const RECONCILE_REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// Finalizer that makes deletion remove the object's stored artifacts first.
pub const FINALIZER: &str = "ocisource.dev/finalizer";

/// OCIRepositorySpec defines the desired state of OCIRepository.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ocisource.dev",
    version = "v1beta1",
    kind = "OCIRepository",
    root = "OciRepository",
    plural = "ocirepositories",
    singular = "ocirepository",
    namespaced,
    status = "OciRepositoryStatus",
    shortname = "ocirepo",
    shortname = "ocisrc",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-sources",
    annotation("kustomize.toolkit.fluxcd.io/substitute", "disabled"),
    doc = "OCIRepository pulls an OCI artifact, verifies it and publishes it as one tar.gz artifact",
    derive = "PartialEq",
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OciRepositorySpec {
    /// URL is a reference to an OCI artifact repository hosted on a remote container
    /// registry: `oci://host[:port]/path`, without tag or digest.
    #[schemars(regex(pattern = r"^oci://.*$"))]
    pub url: String,
    /// The OCI reference to pull and monitor for changes, defaults to the latest tag.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<OciRepositoryRef>,
    /// LayerSelector specifies which layers are taken from the OCI artifact. Unlike Flux,
    /// which takes the first matching layer, every layer of `mediaType` is selected and
    /// merged in order (later layers override earlier ones). When not specified, every
    /// layer of the artifact is selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_selector: Option<OciLayerSelector>,
    /// Platform (`os/arch[/variant]`, e.g. `linux/amd64`) selects one manifest when the
    /// reference resolves to an image index. Not a Flux field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$"))]
    pub platform: Option<String>,
    /// The provider used for authentication, can be 'aws', 'azure', 'gcp' or 'generic'.
    /// When not specified, defaults to 'generic'.
    #[serde(default)]
    pub provider: Provider,
    /// SecretRef contains the secret name containing the registry login credentials to
    /// resolve image metadata. The secret must be of type kubernetes.io/dockerconfigjson.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Verify contains the secret name containing the trusted public keys used to verify
    /// the signature and specifies which provider to use to check whether OCI image is
    /// authentic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<OciRepositoryVerification>,
    /// ServiceAccountName is the name of the Kubernetes ServiceAccount used to authenticate
    /// the image pull if the service account has attached pull secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// CertSecretRef can be given the name of a Secret containing either or both of a
    /// PEM-encoded client certificate (`tls.crt`) and private key (`tls.key`), and a
    /// PEM-encoded CA certificate (`ca.crt`), used for connecting to the registry. The
    /// Secret must be of type `Opaque` or `kubernetes.io/tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalObjectReference>,
    /// ProxySecretRef specifies the Secret containing the proxy configuration (`address`,
    /// `username`, `password`) to use while communicating with the container registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_secret_ref: Option<LocalObjectReference>,
    /// Interval at which the OCIRepository URL is checked for updates. This interval is
    /// approximate and may be subject to jitter to ensure efficient use of resources.
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub interval: String,
    /// The timeout for remote OCI Repository operations like pulling, defaults to 60s.
    #[serde(default = "default_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m))+$"))]
    pub timeout: String,
    /// Ignore overrides the set of excluded patterns in the .sourceignore format (which is
    /// the same as .gitignore). If not provided, a default will be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore: Option<String>,
    /// Insecure allows connecting to a non-TLS HTTP container registry.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// This flag tells the controller to suspend the reconciliation of this source.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
}

fn default_timeout() -> String {
    "60s".to_string()
}

/// OCIRepositoryRef defines the image reference for the OCIRepository's URL. Precedence:
/// digest, then semver, then tag; nothing set means tag `latest`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciRepositoryRef {
    /// Digest is the image digest to pull, takes precedence over SemVer. The value should
    /// be in the format 'sha256:<HASH>'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// SemVer is the range of tags to pull selecting the latest within the range, takes
    /// precedence over Tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// SemverFilter is a regex pattern to filter the tags within the SemVer range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver_filter: Option<String>,
    /// Tag is the image tag to pull, defaults to latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// OCILayerSelector specifies which layers are taken from the OCI artifact.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciLayerSelector {
    /// MediaType specifies the OCI media type of the layers to take from the OCI artifact.
    /// EVERY layer of this type is selected (Flux takes only the first), in manifest
    /// order, later layers overriding earlier ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Operation specifies how the selected layers are processed. By default
    /// ('extract'), their content is extracted and merged into the stored artifact. With
    /// 'copy', the first matching layer is stored as it is (byte for byte), as Flux does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<LayerOperation>,
}

impl OciLayerSelector {
    /// The operation in effect (`extract` when unset).
    pub fn effective_operation(&self) -> LayerOperation {
        self.operation.unwrap_or_default()
    }
}

/// Operation specifies how the selected layers are processed: 'extract' (the default)
/// merges their content into the stored artifact; 'copy' stores the first matching
/// compressed layer as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LayerOperation {
    /// Extract and merge the layers' tar content.
    #[default]
    Extract,
    /// Store the compressed layer blob byte-for-byte.
    Copy,
}

/// Registry authentication provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Credentials from `secretRef` / `serviceAccountName`, or anonymous.
    #[default]
    Generic,
    /// The controller's AWS identity logs in to ECR.
    Aws,
    /// The controller's Microsoft Entra workload identity logs in to ACR.
    Azure,
    /// The controller's Google identity logs in to GCR and Artifact Registry.
    Gcp,
}

impl Provider {
    /// The cloud whose identity logs in, or `None` for `generic`.
    pub fn cloud(self) -> Option<crate::domain::cloud_hosts::CloudProvider> {
        use crate::domain::cloud_hosts::CloudProvider;
        match self {
            Self::Generic => None,
            Self::Aws => Some(CloudProvider::Aws),
            Self::Azure => Some(CloudProvider::Azure),
            Self::Gcp => Some(CloudProvider::Gcp),
        }
    }
}

/// OCIRepositoryVerification verifies the authenticity of an OCI Artifact.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciRepositoryVerification {
    /// Provider specifies the technology used to sign the OCI Artifact. Only 'cosign' is
    /// supported so far.
    #[serde(default)]
    pub provider: VerificationProvider,
    /// SecretRef specifies the Kubernetes Secret containing the trusted public keys
    /// (every `*.pub` key in the Secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// MatchOIDCIdentity specifies the identity matching criteria to use while verifying
    /// an OCI artifact which was signed using Cosign keyless signing. The artifact's
    /// identity is deemed to be verified if any of the specified matchers match against
    /// the identity.
    #[serde(
        default,
        rename = "matchOIDCIdentity",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub match_oidc_identity: Vec<OidcIdentityMatch>,
    /// TrustedRootSecretRef specifies the Kubernetes Secret containing a Sigstore
    /// trusted_root.json file, for self-hosted Sigstore infrastructure. The Secret must
    /// contain a key named "trusted_root.json".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_root_secret_ref: Option<LocalObjectReference>,
}

/// The signing technology.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerificationProvider {
    /// Sigstore cosign signatures.
    #[default]
    Cosign,
    /// Notary Project signatures (not supported yet).
    Notation,
}

/// OIDCIdentityMatch specifies options for verifying the certificate identity, i.e. the
/// issuer and the subject of the certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OidcIdentityMatch {
    /// Issuer specifies the regex pattern to match against to verify the OIDC issuer in
    /// the Fulcio certificate.
    pub issuer: String,
    /// Subject specifies the regex pattern to match against to verify the identity
    /// subject in the Fulcio certificate.
    pub subject: String,
}

/// A reference to a Secret in the object's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectReference {
    /// Name of the referent.
    pub name: String,
}

/// OCIRepositoryStatus defines the observed state of OCIRepository.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciRepositoryStatus {
    /// ObservedGeneration is the last observed generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions holds the conditions for the OCIRepository.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// URL is the download link for the artifact output of the last OCI Repository sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Artifact represents the output of the last successful OCI Repository sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// ObservedIgnore is the observed exclusion patterns used for constructing the source
    /// artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_ignore: Option<String>,
    /// ObservedLayerSelector is the observed layer selector used for constructing the
    /// source artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_layer_selector: Option<OciLayerSelector>,
    /// ObservedPlatform is the observed platform used to pick from an image index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_platform: Option<String>,
    /// LastHandledReconcileAt holds the value of the most recent reconcile request value,
    /// so a change of the annotation value can be detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

impl OciRepository {
    /// The value of the `reconcile.fluxcd.io/requestedAt` annotation, if any.
    pub fn requested_at(&self) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()?
            .get(RECONCILE_REQUESTED_AT)
            .map(String::as_str)
    }

    /// True when `requestedAt` holds a value not yet echoed in
    /// `status.lastHandledReconcileAt`.
    pub fn reconcile_requested(&self) -> bool {
        let handled = self
            .status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref());
        self.requested_at().is_some_and(|at| Some(at) != handled)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn repo(yaml_metadata: &str, handled: Option<&str>) -> OciRepository {
        let mut repo: OciRepository = serde_yaml::from_str(&format!(
            "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata: {yaml_metadata}\n\
             spec: {{interval: 5m, url: 'oci://r/a'}}\n"
        ))
        .unwrap();
        repo.status = Some(OciRepositoryStatus {
            last_handled_reconcile_at: handled.map(String::from),
            ..OciRepositoryStatus::default()
        });
        repo
    }

    #[test]
    fn requested_at_triggers_until_handled() {
        let meta =
            "{name: a, annotations: {reconcile.fluxcd.io/requestedAt: '2026-07-02T10:00:00Z'}}";
        assert!(repo(meta, None).reconcile_requested());
        assert!(repo(meta, Some("earlier")).reconcile_requested());
        assert!(!repo(meta, Some("2026-07-02T10:00:00Z")).reconcile_requested());
        assert!(!repo("{name: a}", None).reconcile_requested());
    }

    #[test]
    fn defaults_match_flux() {
        let r = repo("{name: a}", None);
        assert_eq!(r.spec.timeout, "60s");
        let desired = super::super::validate::desired(&r.spec, &Default::default()).unwrap();
        assert_eq!(desired.timeout, Duration::from_secs(60));
        assert_eq!(r.spec.provider, Provider::Generic);
        assert_eq!(
            OciLayerSelector::default().effective_operation(),
            LayerOperation::Extract
        );
        let v: OciRepositoryVerification = serde_yaml::from_str("secretRef: {name: keys}").unwrap();
        assert_eq!(v.provider, VerificationProvider::Cosign);
        let wire = serde_json::to_value(&r.spec).unwrap();
        assert!(
            wire.get("suspend").is_none() && wire.get("insecure").is_none(),
            "false flags are omitted"
        );
    }
}
