//! The traits the pipeline, the reconciler and the controller use to reach the world,
//! and every type that crosses those boundaries: a registry ([`registry`]), a signature
//! verifier ([`verify`]), the artifact store ([`store`]), Secrets ([`secrets`]), cloud
//! registry logins ([`cloud`]) and the metrics they record ([`metrics`]). Adapters
//! implement them (`registry`, `verify`, `storage`, `server`, `cloud`, the Kubernetes and
//! file-backed Secret readers); tests substitute their own. This module names no adapter
//! and imports only `domain` (`hack/layers.py --check` enforces it).
//!
//! Why `domain` and `ports` are not (yet) their own workspace crate, as linkerd keeps its
//! policy core free of kube and tokio: the compiler would then enforce the direction,
//! but the split renames `crate::domain`/`crate::ports` paths in about a hundred files
//! while other changes to `domain/status.rs`, `reconcile/` and `app/` are in flight, and
//! it adds a crate to a 2-core CI build for a guarantee the layering check already gives
//! (it reads every `crate::` path, tests included, and fails CI on a forbidden edge or a
//! domain import of an I/O crate). Both modules are ready for it: they name no other
//! project module, and their dependencies are std, `async-trait`, `bytes`, `futures`,
//! `thiserror` and what `domain` already uses. Do it when a second kind or a second
//! binary needs the core without the adapters.

pub mod cloud;
pub mod metrics;
pub mod registry;
pub mod secrets;
pub mod store;
pub mod verify;

pub use cloud::{
    CloudIdentity, CloudLogin, CloudLoginError, CloudLoginRequest, ServiceAccountError,
    ServiceAccountToken, ServiceAccountTokens,
};
pub use metrics::ReconcileMetrics;
pub use registry::{
    Audience, BlobStream, ClientIdentity, FetchedManifest, ProxySettings, Referrers, Registry,
    RegistryConnector, RegistryError, RegistryErrorKind, RegistryOptions,
};
pub use secrets::{SecretData, Secrets, SecretsError};
pub use store::{ArtifactStore, PendingWrite, StoreError, StoredFile};
pub use verify::{SignatureVerifier, VerifiedSignature, VerifyFailure, VerifyFailureKind};
