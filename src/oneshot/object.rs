//! One object of the one-shot mode: ocisource's OCIRepository, or Flux's own
//! (`source.toolkit.fluxcd.io/v1`), which runs with Flux's defaults as in the controller's
//! drop-in mode, so a Flux user can check an object unchanged before moving it. Printed
//! back in its own kind, with its own status keys.

use kube::api::ObjectMeta;
use serde::Serialize;

use crate::api::{Flavour, FluxOciRepository, OciRepository, OciRepositoryStatus};

/// An object read from the input files.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Object {
    /// `ocisource.dev/v1beta1`.
    Ours(OciRepository),
    /// `source.toolkit.fluxcd.io/v1`.
    Flux(FluxOciRepository),
}

impl Object {
    /// The object as the reconciler reads it, and whose defaults apply.
    pub fn view(&self) -> (OciRepository, Flavour) {
        match self {
            Self::Ours(o) => (o.clone(), Flavour::Ocisource),
            Self::Flux(o) => o.view(),
        }
    }

    /// The object's metadata, to fill in the defaults the API server would.
    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Self::Ours(o) => &mut o.metadata,
            Self::Flux(o) => &mut o.metadata,
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        let meta = match self {
            Self::Ours(o) => &o.metadata,
            Self::Flux(o) => &o.metadata,
        };
        format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or_default()
        )
    }

    /// The status, as the kind's schema holds it (Flux's has no `observedPlatform`).
    pub fn status(&self) -> Option<&OciRepositoryStatus> {
        match self {
            Self::Ours(o) => o.status.as_ref(),
            Self::Flux(o) => o.status.as_ref(),
        }
    }

    /// Sets the status.
    pub fn set_status(&mut self, status: OciRepositoryStatus) {
        match self {
            Self::Ours(o) => o.status = Some(status),
            Self::Flux(o) => {
                o.status = Some(OciRepositoryStatus {
                    observed_platform: None,
                    ..status
                })
            }
        }
    }

    /// The folder of the saved state under `.state/`: Flux's kind apart, as in the store.
    pub fn state_folder(&self) -> &'static str {
        match self {
            Self::Ours(_) => ".state",
            Self::Flux(_) => ".state/flux",
        }
    }
}
