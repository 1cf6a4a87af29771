//! One-shot mode, `ocisource reconcile -f FILE...`: the controller's reconcile steps with
//! no cluster. OCIRepository objects (ours, or Flux's own kind, which runs with Flux's
//! defaults as in drop-in mode), Secrets and ServiceAccounts come from YAML files;
//! each object is printed back with its new status; the exit code says whether all are
//! Ready. The previous status of each object is kept under the storage directory, so a
//! second run over unchanged digests costs one manifest HEAD per object, as in a cluster.
//! Names are checked as the API server checks them before any becomes a path, the saved
//! statuses are read and written beneath the store's root without following a symlink
//! (`state`), and a run starts by removing the temp files a killed run left in the store.

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;
use base64::Engine as _;
use kube::ResourceExt;
use serde::Deserialize;
use tracing::Instrument;

pub mod object;
mod state;

use crate::api::{OciRepository, OciRepositoryStatus};
use crate::domain::names::{self, NameError, Rule};
use crate::domain::secret::Redacted;
use crate::ports::{ArtifactStore, SecretData, Secrets, SecretsError};
use crate::reconcile::{self, Context, Report};
use crate::storage::{Storage, StorageError};

/// Failed to read the input files or the saved state.
#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    /// A file could not be read.
    #[error("failed to read '{path}'")]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A YAML document could not be parsed.
    #[error("failed to parse document {index} of '{path}': {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based document number.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// A document of a kind this mode does not take.
    #[error("document {index} of '{path}' is a {kind} ({api_version}); expected OCIRepository (ocisource.dev/v1beta1 or source.toolkit.fluxcd.io/v1), Secret or ServiceAccount")]
    Kind {
        /// The file.
        path: PathBuf,
        /// 1-based document number.
        index: usize,
        /// Its kind.
        kind: String,
        /// Its apiVersion.
        api_version: String,
    },
    /// A name or namespace the API server would refuse.
    #[error("document {index} of '{path}': {problem}")]
    Name {
        /// The file.
        path: PathBuf,
        /// 1-based document number.
        index: usize,
        /// Which field and rule.
        problem: NameError,
    },
    /// No OCIRepository in the input.
    #[error("no OCIRepository found in the given files")]
    Empty,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SecretDoc {
    metadata: Meta,
    #[serde(default)]
    data: BTreeMap<String, String>,
    #[serde(default)]
    string_data: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ServiceAccountDoc {
    metadata: Meta,
    #[serde(default)]
    image_pull_secrets: Vec<NameRef>,
}

#[derive(Deserialize, Default)]
struct Meta {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize, Default)]
struct NameRef {
    name: String,
}

/// Secrets and ServiceAccounts read from files.
#[derive(Default)]
pub struct FileSecrets {
    secrets: BTreeMap<(String, String), SecretData>,
    service_accounts: BTreeMap<(String, String), Vec<String>>,
}

#[async_trait]
impl Secrets for FileSecrets {
    async fn secret(&self, namespace: &str, name: &str) -> Result<SecretData, SecretsError> {
        self.secrets
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| SecretsError::NotFound {
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
    }

    async fn image_pull_secrets(
        &self,
        namespace: &str,
        service_account: &str,
    ) -> Result<Vec<String>, SecretsError> {
        self.service_accounts
            .get(&(namespace.to_string(), service_account.to_string()))
            .cloned()
            .ok_or_else(|| SecretsError::NotFound {
                namespace: namespace.to_string(),
                name: format!("serviceaccount/{service_account}"),
            })
    }
}

pub use object::Object;

/// The parsed input: objects in file order, and the Secrets they may reference.
pub struct Input {
    /// OCIRepository objects.
    pub objects: Vec<Object>,
    /// Secrets and ServiceAccounts.
    pub secrets: FileSecrets,
}

/// Reads every YAML document of `paths`.
pub fn read_inputs(paths: &[PathBuf]) -> Result<Input, OneShotError> {
    let mut objects = Vec::new();
    let mut secrets = FileSecrets::default();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| OneShotError::Read {
            path: path.clone(),
            source,
        })?;
        for (i, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let index = i + 1;
            let perr = |e: &dyn std::fmt::Display| OneShotError::Parse {
                path: path.clone(),
                index,
                message: e.to_string(),
            };
            let value = serde_yaml::Value::deserialize(doc).map_err(|e| perr(&e))?;
            if value.is_null() {
                continue;
            }
            let tm: TypeMeta = serde_yaml::from_value(value.clone()).map_err(|e| perr(&e))?;
            let named = |ns: &str, name: &str| {
                names::check("metadata.namespace", ns, Rule::Label)
                    .and_then(|()| names::check("metadata.name", name, Rule::Subdomain))
                    .map_err(|problem| OneShotError::Name {
                        path: path.clone(),
                        index,
                        problem,
                    })
            };
            match (tm.api_version.as_str(), tm.kind.as_str()) {
                (
                    api_version @ ("ocisource.dev/v1beta1" | "source.toolkit.fluxcd.io/v1"),
                    "OCIRepository",
                ) => {
                    let mut obj = if api_version.starts_with("ocisource.dev/") {
                        Object::Ours(serde_yaml::from_value(value).map_err(|e| perr(&e))?)
                    } else {
                        Object::Flux(serde_yaml::from_value(value).map_err(|e| perr(&e))?)
                    };
                    let meta = obj.metadata_mut();
                    let ns = meta
                        .namespace
                        .get_or_insert_with(|| "default".into())
                        .clone();
                    meta.generation.get_or_insert(1);
                    // As `ResourceExt::name_any`: the name, else the generateName.
                    let name = meta.name.as_deref().or(meta.generate_name.as_deref());
                    named(&ns, name.unwrap_or_default())?;
                    objects.push(obj);
                }
                ("v1", "Secret") => {
                    let s: SecretDoc = serde_yaml::from_value(value).map_err(|e| perr(&e))?;
                    let mut data = SecretData::new();
                    for (k, v) in s.data {
                        let bytes = base64::engine::general_purpose::STANDARD
                            .decode(v.trim())
                            .map_err(|e| perr(&format!("data.{k} is not base64: {e}")))?;
                        data.insert(k, Redacted::new(bytes));
                    }
                    for (k, v) in s.string_data {
                        data.insert(k, Redacted::new(v.into_bytes()));
                    }
                    let ns = s.metadata.namespace.unwrap_or_else(|| "default".into());
                    named(&ns, &s.metadata.name)?;
                    secrets.secrets.insert((ns, s.metadata.name), data);
                }
                ("v1", "ServiceAccount") => {
                    let sa: ServiceAccountDoc =
                        serde_yaml::from_value(value).map_err(|e| perr(&e))?;
                    let ns = sa.metadata.namespace.unwrap_or_else(|| "default".into());
                    named(&ns, &sa.metadata.name)?;
                    secrets.service_accounts.insert(
                        (ns, sa.metadata.name),
                        sa.image_pull_secrets.into_iter().map(|r| r.name).collect(),
                    );
                }
                (api_version, kind) => {
                    return Err(OneShotError::Kind {
                        path: path.clone(),
                        index,
                        kind: kind.to_string(),
                        api_version: api_version.to_string(),
                    })
                }
            }
        }
    }
    if objects.is_empty() {
        return Err(OneShotError::Empty);
    }
    Ok(Input { objects, secrets })
}

/// `.state/<namespace>/<name>.json` in the store (`.state/flux/...` for Flux's kind):
/// hidden, so never served.
fn state_path(folder: &str, obj: &OciRepository) -> Result<String, NameError> {
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    names::check_object(&ns, &name)?;
    Ok(format!("{folder}/{ns}/{name}.json"))
}

/// The status saved by the previous run in `folder`, when the object carries none: set
/// on `obj` and returned (`None`: the object's own status, or nothing saved).
pub fn load_state(
    storage: &Storage,
    folder: &str,
    obj: &mut OciRepository,
) -> Option<OciRepositoryStatus> {
    if obj.status.is_some() {
        return None;
    }
    let saved: Option<OciRepositoryStatus> = state_path(folder, obj).ok().and_then(|rel| {
        match state::read(storage.root(), &rel) {
            Ok(bytes) => bytes.and_then(|b| serde_json::from_slice(&b).ok()),
            Err(e) => {
                tracing::warn!(error = %crate::domain::error_chain::chain(&e), "ignoring the saved one-shot state");
                None
            }
        }
    });
    obj.status = saved.clone();
    saved
}

/// Saves the status for the next run in `folder` (a locked temp file, then a rename).
pub fn save_state(
    storage: &Storage,
    folder: &str,
    obj: &OciRepository,
) -> Result<(), StorageError> {
    let rel = state_path(folder, obj)?;
    let bytes = serde_json::to_vec(&obj.status).map_err(|e| StorageError::Write {
        path: storage.root().join(&rel),
        source: std::io::Error::other(e),
    })?;
    state::write(storage.root(), &rel, &bytes, storage.durable())
}

/// Reconciles every object once, in order, and returns them with their reports.
/// `storage` is the store `ctx` writes to (one-shot keeps each object's last status in it
/// under `.state/`, which the port does not offer).
pub async fn run(objects: Vec<Object>, ctx: &Context, storage: &Storage) -> Vec<(Object, Report)> {
    match storage.remove_stale_temps() {
        Ok(removed) if !removed.is_empty() => {
            tracing::info!(
                files = removed.len(),
                "removed temp files left by an earlier run"
            )
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %crate::domain::error_chain::chain(&e), "failed to remove stale temp files")
        }
    }
    let mut out = Vec::with_capacity(objects.len());
    for mut obj in objects {
        let span = tracing::info_span!("reconcile", object = %obj.key());
        let (mut view, flavour) = obj.view();
        let report = async {
            // An unchanged saved status (a no-op run) is not written again, so a no-op
            // costs its one request and no write.
            let saved = load_state(storage, obj.state_folder(), &mut view);
            let report = reconcile::reconcile_as(
                &view,
                &flavour,
                ctx,
                chrono::Utc::now(),
                &reconcile::Silent,
            )
            .await;
            if saved.as_ref() != Some(&report.status) {
                view.status = Some(report.status.clone());
                if let Err(e) = save_state(storage, obj.state_folder(), &view) {
                    tracing::warn!(error = %crate::domain::error_chain::chain(&e), "failed to save one-shot state");
                }
            }
            report
        }
        .instrument(span)
        .await;
        obj.set_status(report.status.clone());
        out.push((obj, report));
    }
    out
}
