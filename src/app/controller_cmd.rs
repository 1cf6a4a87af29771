//! `ocisource controller`: wires the Kubernetes client, the HTTP registry connector, the
//! cosign verifier and the disk store into the controller; starts the artifact, metrics
//! and health servers; runs the start-up storage check; takes the leader Lease if asked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube::api::ListParams;
use kube::{Api, Client};

use crate::api::OciRepository;
use crate::cli::ControllerArgs;
use crate::controller::leader::{self, LeaseConfig};
use crate::controller::secrets::KubeSecrets;
use crate::controller::{self, startup, KubeContext, WatchScope};
use crate::reconcile::{Context, Settings};
use crate::registry::HttpConnector;
use crate::server::{self, Metrics};
use crate::storage::Storage;
use crate::verify::CosignVerifier;

use super::AppError;

async fn serve(addr: &str, router: axum::Router, what: &'static str) -> Result<(), AppError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| AppError::Input(format!("failed to listen on {addr} ({what}): {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "{what} server stopped");
        }
    });
    Ok(())
}

/// Runs the controller until SIGTERM/SIGINT, or until the leader Lease is lost.
pub async fn run(args: ControllerArgs) -> Result<(), AppError> {
    let client = Client::try_default()
        .await
        .map_err(|e| AppError::Input(format!("failed to configure the Kubernetes client: {e}")))?;
    let storage = Storage::new(&args.storage_path);
    std::fs::create_dir_all(&args.storage_path).map_err(|e| {
        AppError::Input(format!(
            "failed to create --storage-path '{}': {e}",
            args.storage_path.display()
        ))
    })?;
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let router = server::router(args.storage_path.clone(), ready.clone(), metrics.clone());
    serve(&args.storage_addr, router.clone(), "artifact").await?;
    serve(&args.metrics_addr, router.clone(), "metrics").await?;
    serve(&args.health_addr, router, "health").await?;

    let namespace = (!args.watch_all_namespaces).then(|| args.runtime_namespace.clone());
    if args.leader_elect {
        let identity = std::env::var("POD_NAME")
            .unwrap_or_else(|_| format!("ocisource-{}", std::process::id()));
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
    match api.list(&ListParams::default()).await {
        Ok(list) => match startup::check_storage(&storage, &list.items) {
            Ok(r) => tracing::info!(tampered = r.tampered.len(), missing = r.missing.len(), orphans = r.orphans.len(), "start-up storage check done"),
            Err(e) => tracing::warn!(error = %e, "start-up storage check failed"),
        },
        Err(e) => return Err(AppError::Failed(format!("failed to list OCIRepositories (is the CRD installed? run 'ocisource crd | kubectl apply -f -'): {e}"))),
    }

    let advertised = args.storage_adv_addr.clone().unwrap_or_else(|| {
        let port = args.storage_addr.rsplit(':').next().unwrap_or("9090");
        format!(
            "ocisource.{}.svc.cluster.local.:{port}",
            args.runtime_namespace
        )
    });
    let verifier = CosignVerifier::new().map_err(|e| AppError::Failed(e.to_string()))?;
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
                ..Settings::default()
            },
            metrics,
        )
        .with_cloud_login(super::cloud_login()?),
    );
    let kctx = Arc::new(KubeContext {
        client: client.clone(),
        core,
        external_artifact: args.external_artifact,
        external_artifact_missing: AtomicBool::new(false),
    });
    ready.store(true, Ordering::Relaxed);
    controller::run(
        kctx,
        WatchScope {
            namespace,
            label_selector: args.watch_label_selector,
            concurrency: args.concurrent,
        },
    )
    .await;
    Ok(())
}
