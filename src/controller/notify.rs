//! Notifications to Flux's notification-controller (`--events-addr`): every event the
//! controller records as a Kubernetes Event is also POSTed, as Flux's `eventv1.Event`
//! JSON, to that address, the way `fluxcd/pkg/runtime/events.Recorder` does for
//! source-controller: same keys, `info`/`error` severity, the involved object's
//! `event.toolkit.fluxcd.io/` annotations and `<group>/revision` + `<group>/digest`
//! metadata on new-artifact and recovery events, a 5 s timeout per attempt, up to 4
//! retries with 1 s..30 s exponential backoff on connection errors and 5xx (not 501),
//! and no retry on 429, which the notification-controller answers to a duplicate inside
//! its rate-limit window. Flux applies no other rate limit or de-duplication on the
//! sending side (its Kubernetes event correlator only throttles Kubernetes Events); the
//! status fold already drops repeats of one failure.
//!
//! Unlike Flux, which posts inside the reconcile (a dead receiver holds a reconcile for
//! the whole retry budget), posting never waits: events go through a bounded queue to one
//! background task, which posts them in order; a full queue drops the event with a
//! warning. The poster is built from a generic `ObjectReference`, so it serves every
//! kind the controller reconciles. A message is escaped and cut to a condition
//! message's length (`domain::text::bounded`), as in the object's status. Imports the
//! domain's events and no adapter.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::domain::status::{Event, EventType};
use crate::domain::text::{bounded, CONDITION_MESSAGE_MAX};

/// Object annotations with this prefix are copied into every event's metadata
/// (Flux's `eventv1.Group + "/"`).
pub const EVENT_ANNOTATION_PREFIX: &str = "event.toolkit.fluxcd.io/";

/// Events waiting to be posted; one more is dropped with a warning.
pub const QUEUE_CAPACITY: usize = 256;

/// Why a notification could not be posted.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The HTTP client could not be built (TLS roots).
    #[error("failed to build the HTTP client for --events-addr")]
    Client(#[source] reqwest::Error),
    /// The event could not be encoded.
    #[error("failed to encode the {reason} event of {object} as JSON")]
    Encode {
        /// `Kind namespace/name`.
        object: String,
        /// The event reason.
        reason: String,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// The request failed (after the retries, when the failure was retryable).
    #[error("failed to post the {reason} event of {object} to {address}")]
    Post {
        /// `Kind namespace/name`.
        object: String,
        /// The event reason.
        reason: String,
        /// `--events-addr`.
        address: String,
        /// Cause.
        #[source]
        source: reqwest::Error,
    },
    /// The receiver kept answering 5xx through the retries.
    #[error("{address} answered HTTP {status} to the {reason} event of {object}")]
    Status {
        /// `Kind namespace/name`.
        object: String,
        /// The event reason.
        reason: String,
        /// `--events-addr`.
        address: String,
        /// The last status code.
        status: u16,
    },
}

/// Flux's `eventv1.Event` (fluxcd/pkg/apis/event/v1beta1), field for field and in its
/// order; `metadata` and `reportingInstance` are `omitempty` there, so left out when empty.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FluxEvent {
    /// The object the event is about.
    pub involved_object: ObjectReference,
    /// `info` or `error`.
    pub severity: &'static str,
    /// RFC 3339, seconds, UTC (a `metav1.Time`).
    pub timestamp: String,
    /// The event's message.
    pub message: String,
    /// The event's reason.
    pub reason: String,
    /// Annotations and controller metadata (see [`metadata`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// The controller's name.
    pub reporting_controller: String,
    /// The host (pod) name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reporting_instance: String,
}

/// Flux's severity of an event type: Normal is `info`, Warning is `error` (Trace is
/// `trace`, never posted: see `events.rs`).
pub fn severity(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "info",
        EventType::Warning => "error",
        EventType::Trace => "trace",
    }
}

/// The API group of `apiVersion` (`source.toolkit.fluxcd.io/v1` → `source.toolkit.fluxcd.io`,
/// `v1` → empty), as Go's `schema.ParseGroupVersion` reads it.
fn api_group(object: &ObjectReference) -> &str {
    object
        .api_version
        .as_deref()
        .and_then(|v| v.split_once('/'))
        .map_or("", |(group, _)| group)
}

/// An event's metadata as source-controller sends it: the object's annotations under
/// [`EVENT_ANNOTATION_PREFIX`], and for an event about a stored artifact
/// `<object group>/revision` and `<object group>/digest`. The notification-controller
/// keeps the keys under those two prefixes, drops `digest`, and strips the prefix
/// before handing the event to a provider (so a generic webhook sees `revision`).
pub fn metadata(
    object: &ObjectReference,
    annotations: &BTreeMap<String, String>,
    event: &Event,
) -> BTreeMap<String, String> {
    let mut metadata = BTreeMap::new();
    if let Some(artifact) = &event.artifact {
        let group = api_group(object);
        metadata.insert(format!("{group}/revision"), artifact.revision.clone());
        metadata.insert(format!("{group}/digest"), artifact.digest.clone());
    }
    metadata.extend(
        annotations
            .iter()
            .filter(|(k, _)| k.starts_with(EVENT_ANNOTATION_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    metadata
}

/// Timeout and retries of one post; [`Default`] is Flux's (`retryablehttp.NewClient()`
/// with a 5 s timeout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Timeout of one attempt, connection to response body.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub retries: u32,
    /// Wait before the first retry, doubled for each next one.
    pub wait_min: Duration,
    /// Longest wait, also the cap of a 503's `Retry-After`.
    pub wait_max: Duration,
}

impl Default for Delivery {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            retries: 4,
            wait_min: Duration::from_secs(1),
            wait_max: Duration::from_secs(30),
        }
    }
}

impl Delivery {
    /// The wait before retry `attempt + 1` (`attempt` counts from 0), as retryablehttp's
    /// `DefaultBackoff`: the server's `Retry-After` seconds on a 503, else
    /// `wait_min * 2^attempt`, both capped at `wait_max`.
    pub fn backoff(&self, attempt: u32, retry_after: Option<&str>) -> Duration {
        let wait = match retry_after.and_then(|v| v.trim().parse::<u64>().ok()) {
            Some(secs) => Duration::from_secs(secs),
            None => self.wait_min.saturating_mul(1u32 << attempt.min(16)),
        };
        wait.min(self.wait_max)
    }
}

/// Posts events to `--events-addr` in the background (see the module doc).
#[derive(Debug)]
pub struct Notifier {
    queue: mpsc::Sender<FluxEvent>,
    controller: String,
    instance: String,
}

impl Notifier {
    /// Starts the posting task (inside the current Tokio runtime) for `address`, reporting
    /// as `controller` from this host, with Flux's timeout and retries.
    pub fn start(address: url::Url, controller: &str) -> Result<Self, NotifyError> {
        Self::start_with(address, controller, Delivery::default())
    }

    /// [`Notifier::start`] with another timeout and retry budget.
    pub fn start_with(
        address: url::Url,
        controller: &str,
        delivery: Delivery,
    ) -> Result<Self, NotifyError> {
        let client = reqwest::Client::builder()
            .timeout(delivery.timeout)
            .build()
            .map_err(NotifyError::Client)?;
        let (queue, events) = mpsc::channel(QUEUE_CAPACITY);
        tokio::spawn(post_all(client, address, delivery, events));
        Ok(Self {
            queue,
            controller: controller.to_string(),
            instance: hostname::get()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
        })
    }

    /// Queues `event` about `object` (what `Resource::object_ref` gives), whose `meta`
    /// adds the resourceVersion (as client-go's `reference.GetReference` has it) and the
    /// annotations under [`EVENT_ANNOTATION_PREFIX`]; never waits. Like Flux, an object
    /// without kind, name or namespace is not posted.
    pub fn notify(&self, object: &ObjectReference, meta: &ObjectMeta, event: &Event) {
        let named = [&object.kind, &object.name, &object.namespace]
            .iter()
            .all(|f| f.as_deref().is_some_and(|v| !v.is_empty()));
        if !named {
            tracing::warn!(object = ?object, reason = %event.reason, "not posting an event about an object without kind, name or namespace");
            return;
        }
        let mut involved = object.clone();
        if involved.resource_version.is_none() {
            involved.resource_version = meta.resource_version.clone();
        }
        let annotations = meta.annotations.clone().unwrap_or_default();
        let flux_event = FluxEvent {
            metadata: metadata(object, &annotations, event),
            involved_object: involved,
            severity: severity(event.type_),
            timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            message: bounded(&event.message, CONDITION_MESSAGE_MAX).into_owned(),
            reason: event.reason.clone(),
            reporting_controller: self.controller.clone(),
            reporting_instance: self.instance.clone(),
        };
        if let Err(e) = self.queue.try_send(flux_event) {
            let full = matches!(e, mpsc::error::TrySendError::Full(_));
            tracing::warn!(object = %describe(object), reason = %event.reason, queue_full = full, "dropped an event for --events-addr: the queue is full or closed");
        }
    }
}

/// `Kind namespace/name`, for messages.
fn describe(object: &ObjectReference) -> String {
    format!(
        "{} {}/{}",
        object.kind.as_deref().unwrap_or_default(),
        object.namespace.as_deref().unwrap_or_default(),
        object.name.as_deref().unwrap_or_default()
    )
}

/// Posts queued events one after the other until every [`Notifier`] is dropped.
async fn post_all(
    client: reqwest::Client,
    address: url::Url,
    delivery: Delivery,
    mut events: mpsc::Receiver<FluxEvent>,
) {
    while let Some(event) = events.recv().await {
        match post(&client, &address, &delivery, &event).await {
            Ok(()) => {
                tracing::debug!(object = %describe(&event.involved_object), reason = %event.reason, "posted event to --events-addr")
            }
            Err(e) => {
                tracing::warn!(error = %crate::reconcile::error::chain(&e), "unable to record event")
            }
        }
    }
}

/// One event, with Flux's retries. A 2xx, a 429 (a duplicate the receiver rate-limited)
/// and any other 4xx end it, as in Flux, which does not look at those answers.
async fn post(
    client: &reqwest::Client,
    address: &url::Url,
    delivery: &Delivery,
    event: &FluxEvent,
) -> Result<(), NotifyError> {
    let object = || describe(&event.involved_object);
    let body = serde_json::to_vec(event).map_err(|source| NotifyError::Encode {
        object: object(),
        reason: event.reason.clone(),
        source,
    })?;
    let mut attempt = 0;
    loop {
        let sent = client
            .post(address.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send()
            .await;
        let (error, retry_after) = match sent {
            Ok(resp) if retryable_status(resp.status()) => {
                let retry_after = (resp.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE)
                    .then(|| resp.headers().get(reqwest::header::RETRY_AFTER))
                    .flatten()
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let error = NotifyError::Status {
                    object: object(),
                    reason: event.reason.clone(),
                    address: address.to_string(),
                    status: resp.status().as_u16(),
                };
                (error, retry_after)
            }
            Ok(resp) => {
                if resp.status().is_client_error() {
                    tracing::debug!(object = %object(), status = resp.status().as_u16(), "--events-addr did not take the event");
                }
                return Ok(());
            }
            Err(source) => {
                let retry = retryable_error(&source);
                let error = NotifyError::Post {
                    object: object(),
                    reason: event.reason.clone(),
                    address: address.to_string(),
                    source,
                };
                if !retry {
                    return Err(error);
                }
                (error, None)
            }
        };
        if attempt >= delivery.retries {
            return Err(error);
        }
        tokio::time::sleep(delivery.backoff(attempt, retry_after.as_deref())).await;
        attempt += 1;
    }
}

/// retryablehttp's `baseRetryPolicy` for an answer: 5xx except 501 (Flux's `checkRetry`
/// turns its 429 retry off).
fn retryable_status(status: reqwest::StatusCode) -> bool {
    status.is_server_error() && status != reqwest::StatusCode::NOT_IMPLEMENTED
}

/// retryablehttp's `baseRetryPolicy` for a failed request: everything but too many
/// redirects, a request that cannot be built and an untrusted certificate. reqwest does
/// not type the TLS failure, so the certificate case is read from the error chain's text.
fn retryable_error(error: &reqwest::Error) -> bool {
    if error.is_redirect() || error.is_builder() {
        return false;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.to_string().contains("certificate") {
            return false;
        }
        cause = e.source();
    }
    true
}

#[cfg(test)]
#[path = "notify_tests.rs"]
mod tests;
