//! `ocisource controller`: wires the Kubernetes client, the HTTP registry connector, the
//! cosign verifier and the disk store into the controller; starts the artifact, metrics
//! and health servers; runs the start-up storage check; takes the leader Lease if asked.
//! SIGTERM or SIGINT stops it at any point, also while it waits for the Lease; the
//! servers then get their grace period and the command returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube::api::ListParams;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::OciRepository;
use crate::cli::ControllerArgs;
use crate::controller::leader::{self, LeaseConfig};
use crate::controller::secrets::KubeSecrets;
use crate::controller::{self, startup, KubeContext, WatchScope};
use crate::reconcile::{Context, Settings};
use crate::registry::HttpConnector;
use crate::server::{self, Limits, Metrics};
use crate::storage::Storage;
use crate::verify::CosignVerifier;

use super::AppError;

/// Binds `addr` and serves `router` there until `stop` changes or closes.
async fn serve(
    addr: &str,
    router: axum::Router,
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
        server::serve(listener, router, Limits::default(), stopped).await;
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

/// Runs the controller until SIGTERM/SIGINT, or until the leader Lease is lost.
pub async fn run(args: ControllerArgs) -> Result<(), AppError> {
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
    let router = server::router(args.storage_path.clone(), ready.clone(), metrics.clone());
    let (stop_tx, stop_rx) = watch::channel(());
    let mut servers = Vec::new();
    for (addr, what) in [
        (&args.storage_addr, "artifact"),
        (&args.metrics_addr, "metrics"),
        (&args.health_addr, "health"),
    ] {
        servers.push(serve(addr, router.clone(), what, stop_rx.clone()).await?);
    }
    // Until the controller runs (it watches the signals itself), a signal stops here.
    let result = tokio::select! {
        prepared = prepare(args, client, metrics) => match prepared {
            Ok((kctx, scope)) => {
                ready.store(true, Ordering::Relaxed);
                controller::run(kctx, scope).await;
                Ok(())
            }
            Err(e) => Err(e),
        },
        () = terminated() => {
            tracing::info!("stopping before the controller started");
            Ok(())
        }
    };
    drop(stop_tx);
    for s in servers {
        let _ = s.await;
    }
    result
}

/// The Lease (when asked), the start-up storage check, and the controller's context.
async fn prepare(
    args: ControllerArgs,
    client: Client,
    metrics: Arc<Metrics>,
) -> Result<(Arc<KubeContext>, WatchScope), AppError> {
    let storage = Storage::new(&args.storage_path);
    let namespace = (!args.watch_all_namespaces).then(|| args.runtime_namespace.clone());
    if args.leader_elect {
        let identity = leader::identity().map_err(|e| AppError::Failed(e.to_string()))?;
        let cfg = LeaseConfig {
            namespace: args.runtime_namespace.clone(),
            name: "ocisource-leader-election".into(),
            identity,
            duration: Duration::from_secs(15),
        };
        let mut lost = leader::acquire_and_hold(client.clone(), cfg).await;
        tokio::spawn(async move {
            if lost.changed().await.is_ok() && *lost.borrow() {
                tracing::error!("lost the leader lease; exiting so another replica takes over");
                std::process::exit(1);
            }
        });
    }

    let api: Api<OciRepository> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let list = api.list(&ListParams::default()).await.map_err(|e| {
        AppError::Failed(format!("failed to list OCIRepositories (is the CRD installed? run 'ocisource crd | kubectl apply -f -'): {e}"))
    })?;
    let check = storage.clone();
    match tokio::task::spawn_blocking(move || startup::check_storage(&check, &list.items)).await {
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
    let core = Arc::new(Context::new(
        Arc::new(HttpConnector::new()),
        Arc::new(verifier),
        Arc::new(KubeSecrets::new(client.clone())),
        storage,
        Settings {
            advertised_addr: advertised,
            retention_records: args.artifact_retention_records,
            retention_ttl: args.artifact_retention_ttl,
            ..Settings::default()
        },
        metrics,
    ));
    let kctx = Arc::new(KubeContext {
        client: client.clone(),
        core,
        external_artifact: args.external_artifact,
        external_artifact_missing: AtomicBool::new(false),
    });
    let scope = WatchScope {
        namespace,
        label_selector: args.watch_label_selector,
        concurrency: args.concurrent,
    };
    Ok((kctx, scope))
}
