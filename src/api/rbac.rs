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
        verbs: &["get", "list", "watch", "patch", "update"],
        why: "watch OCIRepository objects and manage their finalizer",
    },
    Rule {
        group: "ocisource.dev",
        resources: &["ocirepositories/status", "ocirepositories/finalizers"],
        verbs: &["get", "patch", "update"],
        why: "publish status and the finalizer",
    },
    Rule {
        group: "",
        resources: &["secrets"],
        verbs: &["get"],
        why: "read credentials, certificates, proxy and keys",
    },
    Rule {
        group: "",
        resources: &["serviceaccounts"],
        verbs: &["get"],
        why: "read imagePullSecrets of spec.serviceAccountName",
    },
    Rule {
        group: "",
        resources: &["events"],
        verbs: &["create", "patch"],
        why: "record events (core API)",
    },
    Rule {
        group: "events.k8s.io",
        resources: &["events"],
        verbs: &["create", "patch"],
        why: "record events (events.k8s.io API)",
    },
    Rule {
        group: "source.toolkit.fluxcd.io",
        resources: &["externalartifacts"],
        verbs: &["get", "create", "patch", "delete"],
        why: "publish each artifact as a Flux ExternalArtifact",
    },
    Rule {
        group: "source.toolkit.fluxcd.io",
        resources: &["externalartifacts/status"],
        verbs: &["get", "patch"],
        why: "publish the ExternalArtifact status",
    },
    Rule {
        group: "coordination.k8s.io",
        resources: &["leases"],
        verbs: &["get", "create", "update"],
        why: "leader election",
    },
    Rule {
        group: "apiextensions.k8s.io",
        resources: &["customresourcedefinitions"],
        verbs: &["get"],
        why: "detect whether the ExternalArtifact CRD is installed",
    },
];

/// [`RULES`] as the YAML list that goes under a Role's or ClusterRole's `rules:`, one
/// comment line per rule saying why.
pub fn rules_yaml() -> String {
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|i| format!("\"{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    for rule in RULES {
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
        let parsed: Vec<Parsed> = serde_yaml::from_str(&rules_yaml()).unwrap();
        assert_eq!(parsed.len(), RULES.len());
        for (p, r) in parsed.iter().zip(RULES) {
            assert_eq!(p.api_groups, vec![r.group.to_string()]);
            assert_eq!(p.resources, r.resources);
            assert_eq!(p.verbs, r.verbs);
        }
        let secrets = parsed.iter().find(|p| p.resources == ["secrets"]).unwrap();
        assert_eq!(
            secrets.verbs,
            ["get"],
            "secrets are read-only and never listed"
        );
    }
}
