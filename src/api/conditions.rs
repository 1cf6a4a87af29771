//! Condition types and reasons on the wire (Flux's names; the reasons are
//! `domain::status::reason`), and the conversion between the pure conditions of `domain::status` and
//! Kubernetes' `meta/v1` `Condition`. The status rules themselves live in
//! `domain::status`; this file holds names and conversions only and imports no runtime
//! (no kube client, tokio or axum).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::domain::status::{self, ConditionStatus, ConditionType};
use crate::domain::text::{bounded, CONDITION_MESSAGE_MAX};

/// `Ready`: the summary condition.
pub const READY: &str = ConditionType::Ready.as_str();
/// `Reconciling`: work is in progress or being retried.
pub const RECONCILING: &str = ConditionType::Reconciling.as_str();
/// `Stalled`: the object cannot make progress until its spec changes.
pub const STALLED: &str = ConditionType::Stalled.as_str();
/// `ArtifactInStorage`: an artifact is stored and served.
pub const ARTIFACT_IN_STORAGE: &str = ConditionType::ArtifactInStorage.as_str();
/// `ArtifactOutdated`: the stored artifact is older than the upstream revision.
pub const ARTIFACT_OUTDATED: &str = ConditionType::ArtifactOutdated.as_str();
/// `FetchFailed`: resolving or pulling from the registry failed.
pub const FETCH_FAILED: &str = ConditionType::FetchFailed.as_str();
/// `StorageOperationFailed`: writing the artifact to storage failed.
pub const STORAGE_OPERATION_FAILED: &str = ConditionType::StorageOperationFailed.as_str();
/// `SourceVerified`: the signature check passed (True) or failed (False).
pub const SOURCE_VERIFIED: &str = ConditionType::SourceVerified.as_str();

/// Reasons, spelled as Flux spells them (the domain's one list).
pub use crate::domain::status::reason;

/// Converts a pure condition into the Kubernetes wire type. The message is escaped and
/// bounded once more (`domain::text::bounded`; the status fold already did, this is the
/// last guard): one message over the CRD's `maxLength` would lose the whole status write.
pub fn to_k8s(condition: &status::Condition) -> Condition {
    Condition {
        type_: condition.type_.as_str().to_string(),
        status: condition.status.as_str().to_string(),
        reason: condition.reason.clone(),
        message: bounded(&condition.message, CONDITION_MESSAGE_MAX).into_owned(),
        observed_generation: Some(condition.observed_generation),
        last_transition_time: Time(chrono_to_timestamp(condition.last_transition_time)),
    }
}

/// Converts Kubernetes conditions into pure ones; conditions of types ocisource does not
/// own (or with an unknown status) are skipped, exactly as `domain::status` would drop them.
pub fn from_k8s(conditions: &[Condition]) -> Vec<status::Condition> {
    conditions
        .iter()
        .filter_map(|c| {
            Some(status::Condition {
                type_: ConditionType::parse(&c.type_)?,
                status: ConditionStatus::parse(&c.status)?,
                reason: c.reason.clone(),
                message: c.message.clone(),
                observed_generation: c.observed_generation.unwrap_or(0),
                last_transition_time: timestamp_to_chrono(c.last_transition_time.0),
            })
        })
        .collect()
}

/// Converts a list of pure conditions into the wire type, in order.
pub fn all_to_k8s(conditions: &[status::Condition]) -> Vec<Condition> {
    conditions.iter().map(to_k8s).collect()
}

/// The `chrono` time of the domain as Kubernetes' `Time`.
pub fn to_time(at: chrono::DateTime<chrono::Utc>) -> Time {
    Time(chrono_to_timestamp(at))
}

fn chrono_to_timestamp(at: chrono::DateTime<chrono::Utc>) -> Timestamp {
    // Kubernetes serialises condition times with second precision; keep whole seconds so
    // a round trip through the API server compares equal.
    Timestamp::from_second(at.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn timestamp_to_chrono(at: Timestamp) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(at.as_second(), 0).unwrap_or_default()
}

/// Schema of `status.conditions` (Kubernetes' `metav1.Condition` list, as in Flux's CRD),
/// for `#[schemars(schema_with)]`: k8s-openapi is built without its schemars feature.
pub(crate) fn conditions_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Conditions holds the conditions for the object.",
        "type": "array",
        "items": {
            "description": "Condition contains details for one aspect of the current state of this API Resource.",
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {
                    "description": "lastTransitionTime is the last time the condition transitioned from one status to another.",
                    "type": "string",
                    "format": "date-time"
                },
                "message": {
                    "description": "message is a human readable message indicating details about the transition.",
                    "type": "string",
                    "maxLength": 32768
                },
                "observedGeneration": {
                    "description": "observedGeneration represents the .metadata.generation that the condition was set based upon.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0
                },
                "reason": {
                    "description": "reason contains a programmatic identifier indicating the reason for the condition's last transition.",
                    "type": "string",
                    "maxLength": 1024,
                    "minLength": 1,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
                },
                "status": {
                    "description": "status of the condition, one of True, False, Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"]
                },
                "type": {
                    "description": "type of condition in CamelCase or in foo.example.com/CamelCase.",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                }
            }
        }
    })
}

/// Schema of a `metav1.Time` field, for `#[schemars(schema_with)]`.
pub(crate) fn time_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "format": "date-time" })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn pure(type_: ConditionType, status: ConditionStatus, message: String) -> status::Condition {
        status::Condition {
            type_,
            status,
            reason: reason::AUTHENTICATION_FAILED.to_string(),
            message,
            observed_generation: 3,
            last_transition_time: chrono::Utc.with_ymd_and_hms(2026, 7, 2, 10, 0, 0).unwrap(),
        }
    }

    #[test]
    fn round_trip_keeps_every_field_and_drops_foreign_types() {
        let pure = pure(
            ConditionType::FetchFailed,
            ConditionStatus::True,
            "failed to log in".into(),
        );
        let mut wire = vec![to_k8s(&pure)];
        assert_eq!(wire[0].type_, "FetchFailed");
        assert_eq!(wire[0].status, "True");
        assert_eq!(wire[0].observed_generation, Some(3));
        assert_eq!(
            serde_json::to_value(&wire[0].last_transition_time).unwrap(),
            "2026-07-02T10:00:00Z"
        );
        wire.push(Condition {
            type_: "SomebodyElses".into(),
            ..wire[0].clone()
        });
        assert_eq!(from_k8s(&wire), vec![pure]);
    }

    #[test]
    fn the_wire_message_is_bounded_and_escaped() {
        let hostile = format!("\u{1b}[31m{}", "ü".repeat(40_000));
        let message = to_k8s(&pure(ConditionType::Ready, ConditionStatus::False, hostile)).message;
        // The CRD's maxLength counts characters; bytes are never fewer.
        assert!(message.len() <= CONDITION_MESSAGE_MAX && CONDITION_MESSAGE_MAX < 32_768);
        assert!(message.starts_with("\\x1b[31mü"), "{message}");
        assert!(message.ends_with(" more bytes)"), "{message}");
    }
}
