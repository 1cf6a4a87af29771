//! `--feature-gates`, as Flux's source-controller takes it: `Name=bool` pairs,
//! comma-separated, each value one of Go's `strconv.ParseBool` forms. Every gate Flux's
//! source-controller knows is accepted, so its Deployment's arguments start ocisource
//! unchanged: its own gates (`internal/features/features.go`: CacheSecretsAndConfigMaps)
//! and the one fluxcd/pkg's `auth.SetFeatureGates` adds (ObjectLevelWorkloadIdentity).
//! A gate ocisource does not act on is accepted with its value and named, with the reason,
//! in one log line at start-up ([`FeatureGates::log_inert`]). A gate Flux does not know, or
//! a malformed pair or value, is refused as Flux refuses it. Parsing is pure; only
//! `log_inert` writes (a log line).

/// What a gate does in ocisource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    /// Objects with `spec.provider` and `spec.serviceAccountName` log in as that
    /// ServiceAccount.
    ObjectLevelWorkloadIdentity,
    /// Nothing; why.
    None(&'static str),
}

/// One gate of Flux's source-controller.
struct Gate {
    name: &'static str,
    effect: Effect,
}

/// The gate Flux names `ObjectLevelWorkloadIdentity` (fluxcd/pkg `auth`).
pub const OBJECT_LEVEL_WORKLOAD_IDENTITY: &str = "ObjectLevelWorkloadIdentity";

/// The gate Flux names `CacheSecretsAndConfigMaps` (source-controller's own).
pub const CACHE_SECRETS_AND_CONFIG_MAPS: &str = "CacheSecretsAndConfigMaps";

/// Every gate Flux's source-controller knows (v1.9: its `features.go` and fluxcd/pkg
/// auth's), all off by default as there; sorted by name, as they are listed in errors.
const GATES: [Gate; 2] = [
    Gate {
        name: CACHE_SECRETS_AND_CONFIG_MAPS,
        effect: Effect::None(
            "ocisource reads the Secrets an object references from the API server at each reconcile, as Flux does with this gate off, and keeps no cache of Secrets or ConfigMaps, so there is nothing to turn on (and no list/watch permission to grant)",
        ),
    },
    Gate {
        name: OBJECT_LEVEL_WORKLOAD_IDENTITY,
        effect: Effect::ObjectLevelWorkloadIdentity,
    },
];

/// The feature gates of `ocisource controller` (`--feature-gates`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// `ObjectLevelWorkloadIdentity`: object-level workload identity for cloud registries.
    pub object_level_workload_identity: bool,
    /// Gates given that ocisource accepts without effect, with their values, in the
    /// order first given (a gate given twice keeps its last value, as in Flux).
    pub inert: Vec<(&'static str, bool)>,
}

impl FeatureGates {
    /// The gates given without effect in ocisource, each with its value and why it does
    /// nothing; empty when there are none.
    pub fn inert_reasons(&self) -> Vec<String> {
        self.inert
            .iter()
            .filter_map(|(name, on)| {
                GATES
                    .iter()
                    .find(|g| g.name == *name)
                    .and_then(|g| match g.effect {
                        Effect::None(why) => Some(format!("{name}={on}: {why}")),
                        Effect::ObjectLevelWorkloadIdentity => None,
                    })
            })
            .collect()
    }

    /// Logs, once (call it at start-up), which gates given have no effect in ocisource
    /// and why; a warning when one of them asks for something (is true).
    pub fn log_inert(&self) {
        let reasons = self.inert_reasons();
        if reasons.is_empty() {
            return;
        }
        let gates = reasons.join("; ");
        if self.inert.iter().any(|(_, on)| *on) {
            tracing::warn!(%gates, "feature gates of Flux's source-controller that have no effect in ocisource");
        } else {
            tracing::info!(%gates, "feature gates of Flux's source-controller that have no effect in ocisource");
        }
    }
}

/// Go's `strconv.ParseBool`, which Flux's `--feature-gates` uses for the values.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

fn known() -> String {
    GATES.iter().map(|g| g.name).collect::<Vec<_>>().join(", ")
}

/// `--feature-gates`: `Name=bool` pairs, comma-separated; a gate Flux's source-controller
/// does not know, a pair without `=`, or a value that is not a boolean is refused, naming
/// it.
pub fn parse(s: &str) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::default();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("'{pair}' is not Name=true|false"))?;
        let (name, value) = (name.trim(), value.trim());
        let on = parse_bool(value).ok_or_else(|| {
            format!("'{value}' for {name} is not true or false (Go's forms: true, false, 1, 0, t, f, TRUE, FALSE, True, False)")
        })?;
        let gate = GATES.iter().find(|g| g.name == name).ok_or_else(|| {
            format!(
                "unknown feature gate '{name}': Flux's source-controller knows {}",
                known()
            )
        })?;
        match gate.effect {
            Effect::ObjectLevelWorkloadIdentity => gates.object_level_workload_identity = on,
            Effect::None(_) => match gates.inert.iter_mut().find(|(n, _)| *n == gate.name) {
                Some(given) => given.1 = on,
                None => gates.inert.push((gate.name, on)),
            },
        }
    }
    Ok(gates)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_gate_flux_knows_is_accepted_with_its_value() {
        let g = parse("ObjectLevelWorkloadIdentity=true, CacheSecretsAndConfigMaps=1").unwrap();
        assert!(g.object_level_workload_identity);
        assert_eq!(g.inert, vec![(CACHE_SECRETS_AND_CONFIG_MAPS, true)]);
        let g = parse("CacheSecretsAndConfigMaps=False,ObjectLevelWorkloadIdentity=F").unwrap();
        assert!(!g.object_level_workload_identity);
        assert_eq!(g.inert, vec![(CACHE_SECRETS_AND_CONFIG_MAPS, false)]);
        assert_eq!(parse("").unwrap(), FeatureGates::default());
    }

    #[test]
    fn a_gate_given_twice_keeps_its_last_value() {
        let g = parse("CacheSecretsAndConfigMaps=true,CacheSecretsAndConfigMaps=false").unwrap();
        assert_eq!(g.inert, vec![(CACHE_SECRETS_AND_CONFIG_MAPS, false)]);
        let g = parse("ObjectLevelWorkloadIdentity=true,ObjectLevelWorkloadIdentity=0").unwrap();
        assert!(!g.object_level_workload_identity);
    }

    #[test]
    fn inert_gates_are_named_with_value_and_reason_and_acting_ones_are_not() {
        let g = parse("CacheSecretsAndConfigMaps=true,ObjectLevelWorkloadIdentity=true").unwrap();
        let reasons = g.inert_reasons();
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].starts_with("CacheSecretsAndConfigMaps=true: ")
                && reasons[0].contains("keeps no cache"),
            "{reasons:?}"
        );
        assert!(parse("ObjectLevelWorkloadIdentity=true")
            .unwrap()
            .inert_reasons()
            .is_empty());
    }

    #[test]
    fn unknown_gates_and_malformed_pairs_or_values_are_refused_naming_them() {
        for (bad, needles) in [
            (
                "OptimizedGitClones=true",
                &[
                    "unknown feature gate 'OptimizedGitClones'",
                    "knows CacheSecretsAndConfigMaps, ObjectLevelWorkloadIdentity",
                ][..],
            ),
            (
                "ExternalArtifact=true",
                &["unknown feature gate 'ExternalArtifact'"][..],
            ),
            (
                "CacheSecretsAndConfigMaps",
                &["'CacheSecretsAndConfigMaps' is not Name=true|false"][..],
            ),
            (
                "CacheSecretsAndConfigMaps=yes",
                &["'yes' for CacheSecretsAndConfigMaps is not true or false"][..],
            ),
            (
                "ObjectLevelWorkloadIdentity=tRUE",
                &["'tRUE' for ObjectLevelWorkloadIdentity"][..],
            ),
            (
                "ObjectLevelWorkloadIdentity=",
                &["'' for ObjectLevelWorkloadIdentity"][..],
            ),
        ] {
            let e = parse(bad).unwrap_err();
            for needle in needles {
                assert!(e.contains(needle), "{bad}: {e}");
            }
        }
    }
}
