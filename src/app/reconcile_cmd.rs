//! `ocisource reconcile -f FILE...`: the one-shot mode (see `crate::oneshot`), wired to the
//! real registry connector, cosign verifier and a disk store. The objects are printed as
//! one `kind: List` (yaml or json); events go to stderr.

use std::sync::Arc;

use crate::cli::ReconcileArgs;
use crate::domain::error_chain::chain;
use crate::domain::status::EventType;
use crate::oneshot;
use crate::reconcile::{Context, Settings};
use crate::registry::HttpConnector;
use crate::server::Metrics;
use crate::storage::Storage;
use crate::verify::CosignVerifier;

use super::AppError;

/// Several objects as one document, the way kubectl prints them.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct List<'a, T> {
    api_version: &'static str,
    kind: &'static str,
    items: &'a [T],
}

/// Runs the one-shot reconcile and prints the objects with their new status.
pub async fn run(args: ReconcileArgs) -> Result<(), AppError> {
    let input = oneshot::read_inputs(&args.files).map_err(|e| AppError::Input(chain(&e)))?;
    let connector = HttpConnector::new();
    let counter = connector.counter();
    let verifier = CosignVerifier::new().map_err(|e| AppError::Failed(e.to_string()))?;
    let storage = Storage::new(&args.storage);
    let ctx = Context::new(
        Arc::new(connector),
        Arc::new(verifier),
        Arc::new(input.secrets),
        storage.clone(),
        Settings {
            advertised_addr: args.storage_adv_addr.clone(),
            ..Settings::default()
        },
        Arc::new(Metrics::default()),
    )
    .with_cloud_login(super::cloud_login(None)?);
    let total = input.objects.len();
    let started = std::time::Instant::now();
    let results = oneshot::run(input.objects, &ctx, &storage).await;
    let mut not_ready = 0;
    let mut objects = Vec::with_capacity(results.len());
    for (obj, report) in results {
        let name = obj.key();
        for ev in &report.events {
            let kind = if ev.type_ == EventType::Warning {
                "Warning"
            } else {
                "Normal"
            };
            eprintln!("{name}: {kind} {}: {}", ev.reason, ev.message);
        }
        if !report.ready() {
            not_ready += 1;
        }
        objects.push(obj);
    }
    if args.stats {
        eprintln!(
            "registry requests: {} ({} objects, {:.3} ms wall per object)",
            counter.load(std::sync::atomic::Ordering::Relaxed),
            total,
            started.elapsed().as_secs_f64() * 1000.0 / total.max(1) as f64
        );
    }
    // One `kind: List`, as `kubectl get -o yaml|json` prints several objects.
    super::print(
        &List {
            api_version: "v1",
            kind: "List",
            items: &objects,
        },
        args.output,
    )?;
    if not_ready > 0 {
        return Err(AppError::NotReady(not_ready, total));
    }
    Ok(())
}
