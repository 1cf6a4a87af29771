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
}
