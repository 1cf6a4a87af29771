//! The flags of `ocisource controller` (in the spirit of Flux's source-controller, whose
//! Deployment arguments it accepts) and of `ocisource rbac`, which prints the rules those
//! flags need. Parsing only; the controller command (`app::controller_cmd`) acts on them.

use std::path::PathBuf;

use clap::Args;

use super::{gates, parse_duration, FeatureGates};
use crate::domain::requeue::RetryDelays;

/// `ocisource rbac`.
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// The controller's `--feature-gates`: the rules a gate needs are printed too
    /// (ObjectLevelWorkloadIdentity: `create` on `serviceaccounts/token`).
    #[arg(long, value_name = "GATES", default_value = "", value_parser = gates::parse)]
    pub feature_gates: FeatureGates,
    /// The rules of the drop-in mode too (`--flux-drop-in-selector`): Flux's own
    /// OCIRepository objects and their status.
    #[arg(long)]
    pub flux_drop_in: bool,
}

/// `ocisource controller`: flags in the spirit of Flux's source-controller. Boolean flags
/// take Go's forms too: `--leader-elect`, `--leader-elect=true`, `--leader-elect=false`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Objects reconciled at once.
    #[arg(long, default_value_t = 4)]
    pub concurrent: u16,
    /// Artifact store directory.
    #[arg(long, default_value = "/data")]
    pub storage_path: PathBuf,
    /// Address the artifact server listens on.
    #[arg(long, default_value = "0.0.0.0:9090")]
    pub storage_addr: String,
    /// Address written into artifact URLs (host[:port]); default: the pod's service name.
    #[arg(long, env = "STORAGE_ADV_ADDR")]
    pub storage_adv_addr: Option<String>,
    /// Age after which older artifacts are garbage-collected.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub artifact_retention_ttl: std::time::Duration,
    /// Artifacts kept per object.
    #[arg(long, default_value_t = 2)]
    pub artifact_retention_records: usize,
    /// Wait after an object's first failure in a row; it doubles at each further one, up
    /// to --max-retry-delay, whatever the object's interval (Flux's flag and default).
    #[arg(long, default_value = "750ms", value_parser = parse_duration)]
    pub min_retry_delay: std::time::Duration,
    /// Longest wait between retries of a failing object (Flux's flag and default).
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub max_retry_delay: std::time::Duration,
    /// Watch OCIRepositories in every namespace (else only the runtime namespace).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub watch_all_namespaces: bool,
    /// Only reconcile objects matching this label selector (sharding).
    #[arg(long)]
    pub watch_label_selector: Option<String>,
    /// Drop-in mode: also reconcile Flux's own `source.toolkit.fluxcd.io/v1`
    /// OCIRepository objects that match this label selector, e.g.
    /// `sharding.fluxcd.io/key=ocisource` (give Flux's source-controller
    /// `--watch-label-selector='!sharding.fluxcd.io/key'` so it leaves them alone). Their
    /// status is written as Flux's source-controller writes it, and Flux's consumers read
    /// them unchanged. Off when unset.
    #[arg(long, value_name = "SELECTOR")]
    pub flux_drop_in_selector: Option<String>,
    /// Refuse references to objects in other namespaces. OCIRepository only references
    /// Secrets in its own namespace, so this is accepted for compatibility with Flux.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub no_cross_namespace_refs: bool,
    /// Take a Lease before reconciling, so only one replica works at a time.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Address of the Prometheus /metrics endpoint.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: String,
    /// Address of /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:9440")]
    pub health_addr: String,
    /// Publish a Flux ExternalArtifact for each OCIRepository.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub external_artifact: bool,
    /// Also post every event to this URL in Flux's event format, as source-controller's
    /// `--events-addr` (e.g. `http://notification-controller.flux-system.svc.cluster.local./`),
    /// so Flux Alerts fire for these objects. Unset: Kubernetes Events only.
    #[arg(long, value_name = "URL", value_parser = events_addr)]
    pub events_addr: Option<url::Url>,
    /// Namespace of this controller (for the Lease and the default watch scope).
    #[arg(long, env = "RUNTIME_NAMESPACE", default_value = "ocisource-system")]
    pub runtime_namespace: String,
    /// Feature gates, as Flux's source-controller takes them: `Name=true|false` (or Go's
    /// other boolean forms: 1, 0, t, f), comma-separated; every gate it knows is accepted,
    /// others are refused. ObjectLevelWorkloadIdentity (default false): objects with
    /// `spec.provider` and `spec.serviceAccountName` log in to cloud registries as that
    /// ServiceAccount (needs `create` on `serviceaccounts/token`).
    /// CacheSecretsAndConfigMaps (default false): accepted without effect (ocisource keeps
    /// no cache of Secrets; it reads them at each reconcile, as Flux does with the gate
    /// off); logged at start-up.
    #[arg(long, value_name = "GATES", default_value = "", value_parser = gates::parse)]
    pub feature_gates: FeatureGates,
    /// Flux's multi-tenancy lockdown for cloud logins: an object with `spec.provider` and
    /// no `spec.serviceAccountName` logs in as this ServiceAccount of its own namespace,
    /// never with the controller's identity (and fails when its namespace has no such
    /// ServiceAccount). Needs --feature-gates=ObjectLevelWorkloadIdentity=true, as in
    /// Flux. Image pull secrets are still read only from `spec.serviceAccountName`.
    /// Empty: off.
    #[arg(long, env = "DEFAULT_SERVICE_ACCOUNT", value_name = "NAME", value_parser = service_account)]
    pub default_service_account: Option<String>,
}

impl ControllerArgs {
    /// `--default-service-account` when set (empty counts as unset), refused without the
    /// ObjectLevelWorkloadIdentity gate as Flux's source-controller refuses it at start.
    pub fn lockdown_service_account(&self) -> Result<Option<&str>, String> {
        let name = self
            .default_service_account
            .as_deref()
            .filter(|s| !s.is_empty());
        if name.is_some() && !self.feature_gates.object_level_workload_identity {
            return Err(
                "--default-service-account needs the ObjectLevelWorkloadIdentity feature gate: \
                 add --feature-gates=ObjectLevelWorkloadIdentity=true (chart value \
                 controller.objectLevelWorkloadIdentity: true), or drop the flag"
                    .into(),
            );
        }
        Ok(name)
    }

    /// `--min-retry-delay` and `--max-retry-delay` as one value, refused when the first
    /// is zero or longer than the second.
    pub fn retry_delays(&self) -> Result<RetryDelays, String> {
        RetryDelays::new(self.min_retry_delay, self.max_retry_delay).map_err(|e| e.to_string())
    }
}

/// `--default-service-account`: a ServiceAccount name (a DNS-1123 subdomain), or empty.
fn service_account(s: &str) -> Result<String, String> {
    if !s.is_empty() {
        crate::domain::names::check(
            "--default-service-account",
            s,
            crate::domain::names::Rule::Subdomain,
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(s.to_string())
}

/// `--events-addr`: an absolute `http` or `https` URL.
fn events_addr(s: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(s).map_err(|e| format!("'{s}' is not a URL: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!(
            "'{s}' has scheme '{other}'; use http:// or https://"
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<ControllerArgs, String> {
        let cli = Cli::try_parse_from([&["ocisource", "controller"], args].concat())
            .map_err(|e| e.to_string())?;
        match cli.command {
            Command::Controller(a) => Ok(a),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_default_service_account_needs_the_gate_and_a_valid_name() {
        let gate = "--feature-gates=ObjectLevelWorkloadIdentity=true";
        let off = parse(&[]).unwrap();
        assert_eq!(off.lockdown_service_account(), Ok(None));
        let on = parse(&[gate, "--default-service-account=flux-tenant"]).unwrap();
        assert_eq!(on.lockdown_service_account(), Ok(Some("flux-tenant")));
        let empty = parse(&["--default-service-account="]).unwrap();
        assert_eq!(empty.lockdown_service_account(), Ok(None));

        let gateless = parse(&["--default-service-account=flux-tenant"]).unwrap();
        let e = gateless.lockdown_service_account().unwrap_err();
        assert!(
            e.contains("--feature-gates=ObjectLevelWorkloadIdentity=true"),
            "{e}"
        );
        let e = parse(&[gate, "--default-service-account=Bad_Name"]).unwrap_err();
        assert!(
            e.contains("invalid --default-service-account 'Bad_Name'"),
            "{e}"
        );
    }

    #[test]
    fn retry_delays_default_to_fluxs_and_a_min_above_the_max_is_refused() {
        use std::time::Duration;
        let defaults = parse(&[]).unwrap().retry_delays().unwrap();
        assert_eq!(defaults, RetryDelays::default());
        assert_eq!(defaults.backoff(1), Duration::from_millis(750));
        assert_eq!(defaults.backoff(100), Duration::from_secs(900));

        let custom = parse(&["--min-retry-delay=2s", "--max-retry-delay=1m30s"]).unwrap();
        let custom = custom.retry_delays().unwrap();
        assert_eq!(custom.backoff(1), Duration::from_secs(2));
        assert_eq!(custom.backoff(100), Duration::from_secs(90));

        let inverted = parse(&["--min-retry-delay=20m"]).unwrap();
        let e = inverted.retry_delays().unwrap_err();
        assert!(
            e.contains("--min-retry-delay 20m0s is longer than --max-retry-delay 15m0s"),
            "{e}"
        );
        let zero = parse(&["--min-retry-delay=0"]).unwrap().retry_delays();
        assert!(zero.unwrap_err().contains("above zero"));
        let e = parse(&["--max-retry-delay=soon"]).unwrap_err();
        assert!(e.contains("invalid duration 'soon'"), "{e}");
    }
}
