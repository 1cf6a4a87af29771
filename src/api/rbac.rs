//! The ONE list of Kubernetes API calls the controller makes (group, resource, verbs), as
//! data and as RBAC `rules:` YAML for the chart (`ocisource rbac`). Adding an API call to
//! the controller means adding it here. Pure data: no kube client.

use std::fmt::Write as _;

/// One RBAC rule: verbs on resources of an API group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resources, including subresources such as `ocirepositories/status`.
    pub resources: &'static [&'static str],
    /// Verbs.
    pub verbs: &'static [&'static str],
    /// Why the controller needs it.
    pub why: &'static str,
}

/// Every API call the controller makes, least privilege.
pub const RULES: &[Rule] = &[
    Rule {
        group: "ocisource.dev",
        resources: &["ocirepositories"],
        verbs: &["get", "list", "watch", "patch"],
        why: "watch OCIRepository objects and add or remove their finalizer (JSON patch)",
    },
    Rule {
        group: "ocisource.dev",
        resources: &["ocirepositories/status"],
        verbs: &["patch"],
        why: "publish status (one merge patch per reconcile)",
    },
    Rule {
        group: "ocisource.dev",
        resources: &["ocirepositories/finalizers"],
        verbs: &["update"],
        why: "set the blocking controller ownerReference on ExternalArtifacts",
    },
    Rule {
        group: "",
        resources: &["secrets", "serviceaccounts"],
        verbs: &["get"],
        why: "read credentials, certificates, proxy, keys and imagePullSecrets",
    },
    Rule {
        group: "events.k8s.io",
        resources: &["events"],
        verbs: &["create", "patch"],
        why: "record events",
    },
    Rule {
        group: "source.toolkit.fluxcd.io",
        resources: &["externalartifacts"],
        verbs: &["create", "patch"],
        why: "publish each artifact as a Flux ExternalArtifact (server-side apply)",
    },
    Rule {
        group: "source.toolkit.fluxcd.io",
        resources: &["externalartifacts/status"],
        verbs: &["patch"],
        why: "publish the ExternalArtifact status",
    },
    Rule {
        group: "coordination.k8s.io",
        resources: &["leases"],
        verbs: &["get", "create", "update"],
        why: "leader election",
    },
];

/// The API calls of object-level workload identity, only with the controller's
/// `--feature-gates=ObjectLevelWorkloadIdentity=true` (the chart's
/// `controller.objectLevelWorkloadIdentity`); the ServiceAccount itself is read with the
/// `get serviceaccounts` of [`RULES`].
pub const OBJECT_LEVEL_IDENTITY_RULES: &[Rule] = &[Rule {
    group: "",
    resources: &["serviceaccounts/token"],
    verbs: &["create"],
    why: "request tokens for objects' ServiceAccounts (object-level workload identity)",
}];

/// The API calls of the drop-in mode (`--flux-drop-in-selector`, the chart's
/// `fluxDropIn.enabled`): Flux's own OCIRepository objects, watched, their finalizer
/// (`finalizers.fluxcd.io`) added and removed, their status written.
pub const FLUX_DROP_IN_RULES: &[Rule] = &[
    Rule {
        group: "source.toolkit.fluxcd.io",
        resources: &["ocirepositories"],
        verbs: &["get", "list", "watch", "patch"],
        why: "drop-in mode: watch Flux's OCIRepository objects and add or remove their finalizer",
    },
    Rule {
        group: "source.toolkit.fluxcd.io",
        resources: &["ocirepositories/status"],
        verbs: &["patch"],
        why: "drop-in mode: publish the status of Flux's OCIRepository objects",
    },
];

/// Which optional rules a controller needs, after its flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Optional {
    /// `--feature-gates=ObjectLevelWorkloadIdentity=true`.
    pub object_level_identity: bool,
    /// `--flux-drop-in-selector` is set.
    pub flux_drop_in: bool,
}

/// [`RULES`] (and [`OBJECT_LEVEL_IDENTITY_RULES`], [`FLUX_DROP_IN_RULES`] when asked for)
/// as the YAML list that goes under a Role's or ClusterRole's `rules:`, one comment line
/// per rule saying why.
pub fn rules_yaml(optional: Optional) -> String {
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|i| format!("\"{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    let pick = |on: bool, rules: &'static [Rule]| if on { rules } else { &[] };
    let gated = pick(optional.object_level_identity, OBJECT_LEVEL_IDENTITY_RULES);
    let drop_in = pick(optional.flux_drop_in, FLUX_DROP_IN_RULES);
    for rule in RULES.iter().chain(gated).chain(drop_in) {
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "# {}\n- apiGroups: [{}]\n  resources: [{}]\n  verbs: [{}]\n",
            rule.why,
            list(&[rule.group]),
            list(rule.resources),
            list(rule.verbs)
        );
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn yaml_round_trips_to_the_same_rules() {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Parsed {
            api_groups: Vec<String>,
            resources: Vec<String>,
            verbs: Vec<String>,
        }
        let parsed: Vec<Parsed> = serde_yaml::from_str(&rules_yaml(Optional::default())).unwrap();
        assert_eq!(parsed.len(), RULES.len());
        for (p, r) in parsed.iter().zip(RULES) {
            assert_eq!(p.api_groups, vec![r.group.to_string()]);
            assert_eq!(p.resources, r.resources);
            assert_eq!(p.verbs, r.verbs);
        }
        let secrets = parsed
            .iter()
            .find(|p| p.resources.iter().any(|r| r == "secrets"))
            .unwrap();
        assert_eq!(
            secrets.verbs,
            ["get"],
            "secrets are read-only and never listed"
        );
    }

    #[test]
    fn the_token_rule_comes_only_with_the_gate() {
        let token = "resources: [\"serviceaccounts/token\"]\n  verbs: [\"create\"]";
        let off = rules_yaml(Optional::default());
        let on = rules_yaml(Optional {
            object_level_identity: true,
            ..Optional::default()
        });
        assert!(!off.contains("serviceaccounts/token"));
        assert!(on.contains(token), "{on}");
        assert!(on.starts_with(&off));
    }

    #[test]
    fn fluxs_kind_is_granted_only_in_drop_in_mode() {
        let flux = "apiGroups: [\"source.toolkit.fluxcd.io\"]\n  resources: [\"ocirepositories\"]";
        let off = rules_yaml(Optional::default());
        let on = rules_yaml(Optional {
            flux_drop_in: true,
            ..Optional::default()
        });
        assert!(!off.contains(flux), "{off}");
        assert!(on.contains(flux), "{on}");
        assert!(on.contains("\"ocirepositories/status\"]\n  verbs: [\"patch\"]"));
        assert!(on.starts_with(&off));
    }
}
