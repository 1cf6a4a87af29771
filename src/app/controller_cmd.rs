//! `ocisource controller`: wires the Kubernetes client, the HTTP registry connector, the
//! cosign verifier and the disk store into the controller; starts the artifact, metrics
//! and health servers, each on its own listener with only its own routes; runs the
//! start-up storage check; takes the leader Lease if asked. A replica that loses the
//! Lease stops reconciling and campaigns again (it keeps serving artifacts meanwhile).
//! SIGTERM or SIGINT stops it at any point, also while it waits for the Lease; the
//! servers then get their grace period and the command returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube::api::ListParams;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::{FluxOciRepository, OciRepository};
use crate::cli::ControllerArgs;
use crate::controller::leader::{self, LeaseConfig};
use crate::controller::secrets::KubeSecrets;
use crate::controller::service_account_tokens::KubeServiceAccountTokens;
use crate::controller::{self, startup, KubeContext, WatchScope};
use crate::reconcile::{Context, Settings};
use crate::registry::HttpConnector;
use crate::server::{self, ConnectionLimits, Metrics};
use crate::storage::Storage;
use crate::verify::CosignVerifier;

use super::AppError;

/// What a listener serves.
enum Routes {
    /// Stored artifacts, from this storage root (`server::serve_artifacts`).
    Artifacts(std::path::PathBuf),
    /// An axum router (metrics, probes), with the listener's limits.
    Router(axum::Router, ConnectionLimits),
}

/// The listener's limits: `/metrics` renders a page per object count and holds it for
/// slow readers, so its listener takes fewer connections ([`ConnectionLimits::metrics`]).
fn limits_of(what: &str) -> ConnectionLimits {
    match what {
        "metrics" => ConnectionLimits::metrics(),
        _ => ConnectionLimits::default(),
    }
}

/// Binds `addr` and serves `routes` there until `stop` changes or closes.
async fn serve(
    addr: &str,
    routes: Routes,
    what: &'static str,
    mut stop: watch::Receiver<()>,
) -> Result<JoinHandle<()>, AppError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| AppError::Input(format!("failed to listen on {addr} ({what}): {e}")))?;
    Ok(tokio::spawn(async move {
        let stopped = async move {
            let _ = stop.changed().await;
        };
        match routes {
            Routes::Artifacts(root) => {
                server::serve_artifacts(listener, root, ConnectionLimits::artifacts(), stopped)
                    .await;
            }
            Routes::Router(router, limits) => {
                server::serve(listener, router, limits, stopped).await;
            }
        }
        tracing::info!("{what} server stopped");
    }))
}

/// Completes on SIGTERM or SIGINT.
async fn terminated() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "failed to watch SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Refuses, before anything starts: `--default-service-account` without its feature gate
/// (as Flux's source-controller does at start), retry delays that cannot go together
/// (`--min-retry-delay` zero or above `--max-retry-delay`), a malformed
/// `--watch-label-selector`, and a `--flux-drop-in-selector` that could match an object
/// without the label (empty, or only `!key` / `key!=v` / `notin`): that would take Flux
/// objects which Flux's source-controller also reconciles, and the two would fight over
/// their status.
fn check_flags(args: &ControllerArgs) -> Result<(), AppError> {
    use crate::domain::label_selector;
    args.lockdown_service_account().map_err(AppError::Input)?;
    args.retry_delays().map_err(AppError::Input)?;
    if let Some(s) = &args.watch_label_selector {
        label_selector::parse(s)
            .map_err(|e| AppError::Input(format!("--watch-label-selector: {e}")))?;
    }
    if let Some(s) = &args.flux_drop_in_selector {
        label_selector::requires_label(s).map_err(|e| {
            AppError::Input(format!(
                "--flux-drop-in-selector: {e}; the drop-in mode must select only the Flux \
                 objects labelled for ocisource, and Flux's source-controller must run \
                 with the opposite selector (e.g. --watch-label-selector='!sharding.fluxcd.io/key')"
            ))
        })?;
    }
    Ok(())
}

/// Raises the soft limit of open files to the hard limit, as Go's runtime does for every
/// Go program (so for Flux's controllers) since Go 1.19. Container runtimes now leave the
/// soft limit at 1,024 (containerd 2 dropped `LimitNOFILE=infinity`), fewer than the
/// artifact listener's 1,024 connections plus the store's files and the API and registry
/// connections: past it `accept` fails and new clients wait. Returns the limit in force.
fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some() && limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %e, soft = ?limit.current, "failed to raise the open files limit");
            return limit.current;
        }
    }
    getrlimit(Resource::Nofile).current
}

/// Runs the controller until SIGTERM/SIGINT.
pub async fn run(args: ControllerArgs) -> Result<(), AppError> {
    check_flags(&args)?;
    let open_files = raise_open_files_limit();
    tracing::debug!(limit = ?open_files, "open files limit");
    let client = Client::try_default()
        .await
        .map_err(|e| AppError::Input(format!("failed to configure the Kubernetes client: {e}")))?;
    std::fs::create_dir_all(&args.storage_path).map_err(|e| {
        AppError::Input(format!(
            "failed to create --storage-path '{}': {e}",
            args.storage_path.display()
        ))
    })?;
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = watch::channel(());
    let mut servers = Vec::new();
    for (addr, routes, what) in [
        (
            &args.storage_addr,
            Routes::Artifacts(args.storage_path.clone()),
            "artifact",
        ),
        (
            &args.metrics_addr,
            Routes::Router(
                server::metrics_router(metrics.clone()),
                limits_of("metrics"),
            ),
            "metrics",
        ),
        (
            &args.health_addr,
            Routes::Router(server::health_router(ready.clone()), limits_of("health")),
            "health",
        ),
    ] {
        servers.push(serve(addr, routes, what, stop_rx.clone()).await?);
    }
    let (term_tx, term_rx) = watch::channel(false);
    tokio::spawn(async move {
        terminated().await;
        let _ = term_tx.send(true);
    });
    let result = campaign_and_reconcile(args, client, metrics, ready, term_rx).await;
    drop(stop_tx);
    for s in servers {
        let _ = s.await;
    }
    result
}

/// Completes once `rx` holds `true` (or its sender is gone).
async fn flagged(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// Takes the Lease when asked, then reconciles until SIGTERM (returns) or until the Lease
/// is lost (stops reconciling, becomes unready and campaigns again).
async fn campaign_and_reconcile(
    args: ControllerArgs,
    client: Client,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    term: watch::Receiver<bool>,
) -> Result<(), AppError> {
    let identity = match args.leader_elect {
        true => Some(leader::identity().map_err(|e| AppError::Failed(e.to_string()))?),
        false => None,
    };
    loop {
        let lost = if let Some(identity) = &identity {
            let cfg = LeaseConfig {
                namespace: args.runtime_namespace.clone(),
                name: "ocisource-leader-election".into(),
                identity: identity.clone(),
                duration: Duration::from_secs(15),
            };
            tokio::select! {
                lost = leader::acquire_and_hold(client.clone(), cfg) => Some(lost),
                () = flagged(term.clone()) => {
                    tracing::info!("stopping before the controller started");
                    return Ok(());
                }
            }
        } else {
            None
        };
        let (kctx, scope) = tokio::select! {
            prepared = prepare(&args, client.clone(), metrics.clone()) => prepared?,
            () = flagged(term.clone()) => return Ok(()),
        };
        ready.store(true, Ordering::Relaxed);
        let (lease_tx, lease_rx) = watch::channel(false);
        if let Some(mut lost) = lost {
            tokio::spawn(async move {
                let _ = lost.wait_for(|l| *l).await;
                let _ = lease_tx.send(true);
            });
        }
        let (t, l) = (term.clone(), lease_rx.clone());
        let stop = async move {
            tokio::select! {
                () = flagged(t) => {}
                () = flagged(l) => {}
            }
        };
        controller::run(kctx, scope, stop).await;
        ready.store(false, Ordering::Relaxed);
        if *term.borrow() || !*lease_rx.borrow() {
            return Ok(());
        }
        tracing::warn!("lost the leader lease: stopped reconciling; campaigning again");
    }
}

/// The start-up storage check, and the controller's context.
async fn prepare(
    args: &ControllerArgs,
    client: Client,
    metrics: Arc<Metrics>,
) -> Result<(Arc<KubeContext>, WatchScope), AppError> {
    let storage = Storage::new(&args.storage_path);
    let namespace = (!args.watch_all_namespaces).then(|| args.runtime_namespace.clone());
    let api: Api<OciRepository> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let list = api.list(&ListParams::default()).await.map_err(|e| {
        AppError::Failed(format!("failed to list OCIRepositories (is the CRD installed? run 'ocisource crd | kubectl apply -f -'): {e}"))
    })?;
    let flux = match &args.flux_drop_in_selector {
        Some(selector) => {
            let api: Api<FluxOciRepository> = match &namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            let list = api
                .list(&ListParams::default().labels(selector))
                .await
                .map_err(|e| {
                    AppError::Failed(format!(
                        "--flux-drop-in-selector is set but Flux's OCIRepository objects                          (source.toolkit.fluxcd.io/v1) cannot be listed (is Flux installed,                          and does the controller's role grant them? see 'ocisource rbac                          --flux-drop-in'): {e}"
                    ))
                })?;
            Some(list.items)
        }
        None => None,
    };
    let check = storage.clone();
    match tokio::task::spawn_blocking(move || {
        startup::check_storage_kinds(&check, &list.items, flux.as_deref())
    })
    .await
    {
        Ok(Ok(r)) => tracing::info!(
            tampered = r.tampered.len(),
            missing = r.missing.len(),
            orphans = r.orphans.len(),
            stale_temps = r.stale_temps.len(),
            "start-up storage check done"
        ),
        Ok(Err(e)) => {
            tracing::warn!(error = %crate::reconcile::error::chain(&e), "start-up storage check failed")
        }
        Err(e) => tracing::warn!(error = %e, "start-up storage check failed"),
    }

    let advertised = args.storage_adv_addr.clone().unwrap_or_else(|| {
        let port = args.storage_addr.rsplit(':').next().unwrap_or("9090");
        format!(
            "ocisource.{}.svc.cluster.local.:{port}",
            args.runtime_namespace
        )
    });
    let verifier = CosignVerifier::new().map_err(|e| AppError::Failed(e.to_string()))?;
    let lockdown = args
        .lockdown_service_account()
        .map_err(AppError::Input)?
        .map(str::to_string);
    let core = Arc::new(
        Context::new(
            Arc::new(HttpConnector::new()),
            Arc::new(verifier),
            Arc::new(KubeSecrets::new(client.clone())),
            storage,
            Settings {
                advertised_addr: advertised,
                retention_records: args.artifact_retention_records,
                retention_ttl: args.artifact_retention_ttl,
                retry: args.retry_delays().map_err(AppError::Input)?,
                ..Settings::default()
            },
            metrics,
        )
        .with_cloud_login(super::cloud_login(
            args.feature_gates.object_level_workload_identity.then(|| {
                Arc::new(KubeServiceAccountTokens::new(client.clone()))
                    as Arc<dyn crate::cloud::ServiceAccountTokens>
            }),
        )?)
        .with_lockdown(lockdown),
    );
    let notifier = match &args.events_addr {
        Some(addr) => Some(Arc::new(
            controller::notify::Notifier::start(addr.clone(), controller::MANAGER)
                .map_err(|e| AppError::Failed(crate::reconcile::error::chain(&e)))?,
        )),
        None => None,
    };
    let kctx = Arc::new(KubeContext {
        client: client.clone(),
        core,
        external_artifact: args.external_artifact,
        external_artifact_missing: AtomicBool::new(false),
        notifier,
        published: Default::default(),
    });
    let scope = WatchScope {
        namespace,
        label_selector: args.watch_label_selector.clone(),
        flux_selector: args.flux_drop_in_selector.clone(),
        concurrency: args.concurrent,
    };
    Ok((kctx, scope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_listener_takes_few_connections_and_the_probes_the_default() {
        assert_eq!(
            limits_of("metrics").max_connections,
            server::METRICS_CONNECTIONS
        );
        assert_eq!(limits_of("health"), ConnectionLimits::default());
        assert_eq!(limits_of("artifact"), ConnectionLimits::default());
    }

    /// A soft limit below the hard one (a container runtime's 1,024) is raised to it.
    /// The test lowers this process's soft limit by one file, never below what it uses.
    #[test]
    fn the_open_files_soft_limit_is_raised_to_the_hard_limit() {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let before = getrlimit(Resource::Nofile);
        let (Some(soft), Some(hard)) = (before.current, before.maximum) else {
            return; // an unlimited hard limit: nothing to raise to
        };
        let lowered = Rlimit {
            current: Some(soft.min(hard - 1)),
            maximum: Some(hard),
        };
        assert!(setrlimit(Resource::Nofile, lowered).is_ok());
        assert_eq!(raise_open_files_limit(), Some(hard));
        assert_eq!(getrlimit(Resource::Nofile).current, Some(hard));
    }
}
