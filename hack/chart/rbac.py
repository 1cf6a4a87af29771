"""RBAC rules: what the controller says it calls (`ocisource rbac`) versus what the chart grants.

Rules are compared as sets of (apiGroup, resource, verb) grants, so grouping and order do
not matter but every extra or missing verb does. Wildcards are refused outright.
"""

from __future__ import annotations

import subprocess
from typing import Any, Iterable

import yaml

Grant = tuple[str, str, str]

# Resources that are not namespaced: a Role cannot grant them, so they must sit in the
# ClusterRole. Anything else the controller uses is namespaced.
CLUSTER_SCOPED = {("apiextensions.k8s.io", "customresourcedefinitions")}


class RulesUnavailable(Exception):
    """`ocisource rbac` could not be run or printed something that is not a rule list."""


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def grants(rules: Iterable[dict[str, Any]]) -> set[Grant]:
    """Expand rules into single grants.

    Accepts Kubernetes PolicyRules (`apiGroups`, `resources`, `verbs`) and the singular
    spelling (`group`, `resource`, optional `subresource`, `verbs`).
    """
    out: set[Grant] = set()
    for rule in rules:
        if not isinstance(rule, dict):
            raise RulesUnavailable(f"a rule is not a mapping: {rule!r}")
        if rule.get("resourceNames") or rule.get("nonResourceURLs"):
            raise RulesUnavailable(f"resourceNames/nonResourceURLs are not modelled by this check: {rule!r}")
        groups = _as_list(rule.get("apiGroups", rule.get("group", rule.get("apiGroup"))))
        resources = _as_list(rule.get("resources", rule.get("resource")))
        sub = rule.get("subresource")
        if sub:
            resources = [f"{r}/{sub}" for r in resources]
        verbs = _as_list(rule.get("verbs"))
        if not groups or not resources or not verbs:
            raise RulesUnavailable(f"a rule lacks groups, resources or verbs: {rule!r}")
        for g in groups:
            for r in resources:
                for v in verbs:
                    out.add((g, r, v))
    return out


def parse_rules_yaml(text: str) -> list[dict[str, Any]]:
    """Parse `ocisource rbac` output: a list of rules, or a mapping with `rules:`."""
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    rules: list[dict[str, Any]] = []
    for doc in docs:
        if isinstance(doc, list):
            rules.extend(doc)
        elif isinstance(doc, dict) and "rules" in doc:
            rules.extend(doc["rules"])
        else:
            raise RulesUnavailable(f"unexpected document: {str(doc)[:200]}")
    if not rules:
        raise RulesUnavailable("no rules in the output")
    return rules


def rules_from_binary(binary: str, *args: str) -> set[Grant]:
    """Run `<binary> rbac [args]` and return its grants."""
    try:
        proc = subprocess.run(
            [binary, "rbac", *args], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as e:
        raise RulesUnavailable(f"cannot run {binary} rbac: {e}") from e
    if proc.returncode != 0:
        raise RulesUnavailable(
            f"{binary} rbac exited {proc.returncode}: {proc.stderr.strip()[:300]}"
        )
    return grants(parse_rules_yaml(proc.stdout))


def wildcards(g: set[Grant]) -> set[Grant]:
    """Grants that use `*` anywhere."""
    return {x for x in g if "*" in x}


def describe(g: set[Grant]) -> str:
    """Short, sorted text of a set of grants for failure messages."""
    return ", ".join(f"{grp or 'core'}/{res}:{verb}" for grp, res, verb in sorted(g)) or "-"


def is_cluster_scoped(grant: Grant) -> bool:
    """True for grants on resources that only a ClusterRole can give."""
    group, resource, _ = grant
    return (group, resource.split("/")[0]) in CLUSTER_SCOPED
