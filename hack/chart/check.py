"""hack/chart-check.sh entry point: lint, render, validate and assert the ocisource chart.

Scenarios render the chart with default values and with PVC storage, a ServiceMonitor,
cluster-wide watching, two replicas (and the older `replicas` name), no CRDs, extra
volumes, other securityContexts and the optional ExternalArtifact CRD. A self-test
then breaks rendered objects on purpose and requires the assertions to notice, so a
check that cannot fail is caught here too.

Environment: OCISOURCE_BIN (default target/debug/ocisource) is asked for its RBAC rules
with `ocisource rbac`; FLUX_REFERENCE_DIR (default ../shared/reference/flux) holds Flux's
ExternalArtifact CRD for comparing the chart's own copy of that API.
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import checks
import crds
import flux_examples
import guide
import openshift
import values_doc
from rbac import RulesUnavailable, grants, rules_from_binary
from render import chart_crds, find, lint, render
from report import Report

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ocisource"

SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "pvc": {"storage": {"type": "pvc", "pvc": {"size": "20Gi", "storageClassName": "fast"}}},
    "existing-claim": {"storage": {"type": "existingClaim", "existingClaim": "artifacts"}},
    "servicemonitor": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    "cluster-wide": {"watchAllNamespaces": True},
    "replicas-2": {"replicaCount": 2},
    "replicas-alias-3": {"replicaCount": 1, "replicas": 3},
    "no-crds": {"crds": {"install": False}},
    "extra-volumes": {
        "extraVolumes": [{"name": "ca", "configMap": {"name": "registry-ca"}},
                         {"name": "cache", "emptyDir": {"sizeLimit": "100Mi"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/registry-ca", "readOnly": True},
                              {"name": "cache", "mountPath": "/cache"}]},
    "openshift-uid": {"podSecurityContext": {"runAsNonRoot": True, "runAsUser": 1000680000,
                                             "fsGroup": 1000680000, "seccompProfile": {"type": "RuntimeDefault"}},
                      "storage": {"type": "pvc"}},
    "custom-consumers": {"networkPolicy": {
        "artifactConsumers": [{"podSelector": {"matchLabels": {"app": "my-consumer"}}}],
        "metricsScrapers": []}},
    "object-identity": {"controller": {"objectLevelWorkloadIdentity": True}},
    "object-identity-cluster-wide": {"controller": {"objectLevelWorkloadIdentity": True},
                                     "watchAllNamespaces": True},
    "tenant-lockdown": {"controller": {"objectLevelWorkloadIdentity": True,
                                       "defaultServiceAccount": "flux-tenant"},
                        "watchAllNamespaces": True},
    "flux-drop-in": {"controller": {"fluxDropInSelector": "sharding.fluxcd.io/key=ocisource"}},
    "flux-drop-in-cluster-wide": {"controller": {"fluxDropInSelector": "sharding.fluxcd.io/key=ocisource",
                                                 "objectLevelWorkloadIdentity": True},
                                  "watchAllNamespaces": True},
    "flux-shards": {"networkPolicy": {"extraArtifactConsumers": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "flux-system"}},
         "podSelector": {"matchLabels": {"app": app}}}
        for app in ("kustomize-controller-shard1", "helm-controller-shard1")]}},
}

# The controller's feature gate for object-level workload identity (Flux's name).
OBJECT_IDENTITY_GATE = "ObjectLevelWorkloadIdentity"

# Flux's consumers: the `app` label of kustomize-controller and helm-controller pods in
# Flux's manifests, in the flux-system namespace.
FLUX_CONSUMERS = {("flux-system", "kustomize-controller"), ("flux-system", "helm-controller")}


def merged(overrides: dict[str, Any]) -> dict[str, Any]:
    """Chart defaults with `overrides` applied, as Helm composes them for an install."""
    import helm_python as helm

    with helm.Chart.load(str(CHART)) as loaded:
        return loaded.merge_values(overrides)


def controller_accepts_args(deploy: dict[str, Any], binary: str, report: Report, name: str) -> None:
    """The binary parses the rendered container args: `ocisource <args> --help` exits 0 only
    when every flag before `--help` is known and its value valid."""
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    label = f"{name}: the controller accepts the rendered args"
    if not os.path.exists(binary):
        report.skip(label, f"{binary} not built")
        return
    proc = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=60, check=False)
    report.check(label, proc.returncode == 0, (proc.stderr or proc.stdout).strip()[-300:])


def scenario_checks(name: str, objs: list[dict[str, Any]], values: dict[str, Any],
                    expected: set | None, report: Report, binary: str = "") -> None:
    """Every assertion that applies to one rendered scenario."""
    checks.validate_objects(objs, report, name)
    deploys = find(objs, "Deployment")
    if not report.check(f"{name}: one Deployment", len(deploys) == 1, f"{len(deploys)} rendered"):
        return
    deploy = deploys[0]
    checks.pod_security(deploy, report, name)
    checks.security_contexts(deploy, values, report, name)
    checks.extra_volumes(deploy, values, report, name)
    checks.disruption_budget(objs, values, report, name)
    crds.check_rendered(ROOT / "crds", objs, values, chart_crds(CHART), report, name)
    checks.probes_and_mounts(deploy, values, report, name)
    checks.leader_election(deploy, values, report, name)
    checks.network_policy(objs, values, report, name)
    if binary:
        controller_accepts_args(deploy, binary, report, name)
    if expected is not None:
        checks.rbac(objs, expected, values["watchAllNamespaces"], report, name)
    args = checks.container_args(deploy)
    want_all = str(values["watchAllNamespaces"]).lower()
    report.check(f"{name}: --watch-all-namespaces={want_all}", args.get("--watch-all-namespaces") == want_all,
                 f"got {args.get('--watch-all-namespaces')!r}")
    report.check(f"{name}: controller subcommand first",
                 deploy["spec"]["template"]["spec"]["containers"][0]["args"][0] == "controller")
    for flag in ("--concurrent", "--storage-addr", "--storage-adv-addr", "--artifact-retention-ttl",
                 "--artifact-retention-records", "--no-cross-namespace-refs", "--metrics-addr",
                 "--health-addr", "--log-level", "--log-encoding", "--external-artifact"):
        report.check(f"{name}: flag {flag} set", bool(args.get(flag)), f"args {sorted(args)}")
    pvcs = find(objs, "PersistentVolumeClaim")
    want_pvc = values["storage"]["type"] == "pvc"
    report.check(f"{name}: PVC rendered iff storage.type=pvc", bool(pvcs) == want_pvc, f"{len(pvcs)} PVCs")
    if want_pvc and pvcs:
        size = pvcs[0]["spec"]["resources"]["requests"]["storage"]
        report.check(f"{name}: PVC size {values['storage']['pvc']['size']}", size == values["storage"]["pvc"]["size"])
        report.check(f"{name}: Recreate strategy with a claim",
                     (deploy["spec"].get("strategy") or {}).get("type") == "Recreate")
    sms = find(objs, "ServiceMonitor")
    report.check(f"{name}: ServiceMonitor iff enabled", bool(sms) == values["serviceMonitor"]["enabled"])
    if sms:
        svc = [s for s in find(objs, "Service") if s["metadata"]["name"].endswith("-metrics")]
        sel = sms[0]["spec"]["selector"]["matchLabels"]
        ok = len(svc) == 1 and all(svc[0]["metadata"]["labels"].get(k) == v for k, v in sel.items()) \
            and sms[0]["spec"]["endpoints"][0]["port"] in {p["name"] for p in svc[0]["spec"]["ports"]}
        report.check(f"{name}: ServiceMonitor selects the metrics Service port", ok)
    eacrd = [c for c in find(objs, "CustomResourceDefinition")
             if c["metadata"]["name"] == "externalartifacts.source.toolkit.fluxcd.io"]
    # Flux's source-controller owns that CRD; kustomize-controller v1.9.5 exits when
    # source-controller's CRDs are missing, so the chart never installs a copy.
    report.check(f"{name}: no ExternalArtifact CRD (Flux installs it)", not eacrd)
    services = {s["metadata"]["name"]: s for s in find(objs, "Service")}
    art = services.get("ocisource", {}).get("spec", {}).get("ports", [{}])[0]
    report.check(f"{name}: artifact Service port {values['service']['artifact']['port']} -> http",
                 art.get("port") == values["service"]["artifact"]["port"] and art.get("targetPort") == "http")


def admitted(objs: list[dict[str, Any]], values: dict[str, Any]) -> set:
    """(namespace, app) of every peer the rendered NetworkPolicy admits on the artifact port."""
    port = values["ports"]["artifact"]
    return {((p.get("namespaceSelector") or {}).get("matchLabels", {}).get("kubernetes.io/metadata.name"),
             (p.get("podSelector") or {}).get("matchLabels", {}).get("app"))
            for pol in find(objs, "NetworkPolicy") for rule in pol["spec"].get("ingress", [])
            if any(x.get("port") == port for x in rule.get("ports", [])) for p in rule.get("from", [])}


def default_consumers(objs: list[dict[str, Any]], values: dict[str, Any], report: Report) -> None:
    """Out of the box, the artifact port admits kustomize-controller and helm-controller in flux-system."""
    got = admitted(objs, values)
    report.check("default: consumers are Flux's kustomize-controller and helm-controller", got == FLUX_CONSUMERS,
                 f"got {got}")


def shard_consumers(objs: list[dict[str, Any]], values: dict[str, Any], report: Report) -> None:
    """extraArtifactConsumers adds sharded controllers and keeps Flux's defaults."""
    shards = {("flux-system", "kustomize-controller-shard1"), ("flux-system", "helm-controller-shard1")}
    got = admitted(objs, values)
    report.check("flux-shards: shards admitted next to Flux's default consumers", got == FLUX_CONSUMERS | shards,
                 f"got {got}")


def self_test(objs: list[dict[str, Any]], values: dict[str, Any], expected: set, report: Report) -> None:
    """Break the default render in known ways; each break must make a check fail."""
    def broken(mutate, run) -> bool:
        bad = copy.deepcopy(objs)
        mutate(bad)
        probe = Report(quiet=True)
        run(bad, probe)
        return bool(probe.failed)

    def deploy(o):
        return find(o, "Deployment")[0]

    def ctr(o):
        return deploy(o)["spec"]["template"]["spec"]["containers"][0]

    def role(o):
        return find(o, "Role")[0]

    cases = {
        "writable root filesystem": (lambda o: ctr(o)["securityContext"].pop("readOnlyRootFilesystem"),
                                     lambda o, r: checks.pod_security(deploy(o), r, "x")),
        "capability added": (lambda o: ctr(o)["securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
                             lambda o, r: checks.pod_security(deploy(o), r, "x")),
        "runs as root": (lambda o: ctr(o)["securityContext"].update(runAsUser=0),
                         lambda o, r: checks.pod_security(deploy(o), r, "x")),
        "extra verb on secrets": (lambda o: role(o)["rules"].append(
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}),
            lambda o, r: checks.rbac(o, expected, False, r, "x")),
        "missing verb": (lambda o: role(o)["rules"].pop(),
                         lambda o, r: checks.rbac(o, expected, False, r, "x")),
        "wildcard rule": (lambda o: role(o)["rules"].append(
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
            lambda o, r: checks.rbac(o, expected, False, r, "x")),
        "open ingress rule": (lambda o: find(o, "NetworkPolicy")[0]["spec"]["ingress"].append({}),
                              lambda o, r: checks.network_policy(o, values, r, "x")),
        "consumer dropped": (lambda o: find(o, "NetworkPolicy")[0]["spec"]["ingress"][0]["from"].pop(),
                             lambda o, r: checks.network_policy(o, values, r, "x")),
        "no leader election at 2 replicas": (lambda o: deploy(o)["spec"].update(replicas=2),
                                             lambda o, r: checks.leader_election(
                                                 deploy(o), {**values, "replicaCount": 2}, r, "x")),
        "POD_NAME dropped": (lambda o: ctr(o).update(env=[e for e in ctr(o)["env"] if e["name"] != "POD_NAME"]),
                             lambda o, r: checks.leader_election(deploy(o), values, r, "x")),
        "no PodDisruptionBudget at 2 replicas": (lambda o: None,
                                                 lambda o, r: checks.disruption_budget(
                                                     o, {**values, "replicaCount": 2}, r, "x")),
        "PodDisruptionBudget at 1 replica": (lambda o: o.append({"kind": "PodDisruptionBudget", "spec": {}}),
                                             lambda o, r: checks.disruption_budget(o, values, r, "x")),
        "fixed UID 65532 again": (lambda o: deploy(o)["spec"]["template"]["spec"]["securityContext"].update(
            runAsUser=65532), lambda o, r: checks.security_contexts(deploy(o), values, r, "x")),
        "CRD without the keep policy": (lambda o: find(o, "CustomResourceDefinition")[0]["metadata"][
            "annotations"].pop("helm.sh/resource-policy"),
            lambda o, r: crds.check_rendered(ROOT / "crds", o, values, [], r, "x")),
        "CRD rendered with crds.install=false": (lambda o: None, lambda o, r: crds.check_rendered(
            ROOT / "crds", o, {**values, "crds": {"install": False}}, [], r, "x")),
        "extra volume dropped": (lambda o: None, lambda o, r: checks.extra_volumes(
            deploy(o), {**values, "extraVolumes": [{"name": "ca", "configMap": {"name": "x"}}]}, r, "x")),
        "readiness on the wrong path": (lambda o: ctr(o)["readinessProbe"]["httpGet"].update(path="/healthz"),
                                        lambda o, r: checks.probes_and_mounts(deploy(o), values, r, "x")),
        "unknown field": (lambda o: find(o, "Service")[0]["spec"].update(bogus=1),
                          lambda o, r: checks.validate_objects(find(o, "Service")[:1], r, "x")),
    }
    for label, (mutate, run) in cases.items():
        report.check(f"self-test: caught: {label}", broken(mutate, run))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sync-crds", action="store_true", help="copy crds/*.yaml into the chart, then check")
    opts = parser.parse_args()
    if opts.sync_crds:
        crds.sync(ROOT / "crds", CHART / "files" / "crds")
    report = Report()

    binary = os.environ.get("OCISOURCE_BIN", str(ROOT / "target" / "debug" / "ocisource"))
    expected: set | None
    # The rules `ocisource rbac` prints for (object-level identity gate, drop-in mode).
    optional: dict[tuple[bool, bool], set] = {}
    try:
        expected = rules_from_binary(binary)
        report.check(f"rbac: rules read from `{binary} rbac`", True)
        for gate in (False, True):
            for drop_in in (False, True):
                flags = ([f"--feature-gates={OBJECT_IDENTITY_GATE}=true"] if gate else []) + \
                    (["--flux-drop-in"] if drop_in else [])
                optional[(gate, drop_in)] = rules_from_binary(binary, *flags)
    except RulesUnavailable as e:
        expected = None
        report.check("rbac: rules read from `ocisource rbac`", False, str(e))

    crds.check_drift(ROOT / "crds", CHART / "files" / "crds", report)
    values_doc.check(CHART, report)

    default_objs: list[dict[str, Any]] = []
    default_values: dict[str, Any] = {}
    for name, overrides in SCENARIOS.items():
        problems = lint(CHART, overrides)
        report.check(f"{name}: helm lint --strict", not problems, "; ".join(problems))
        values = merged(overrides)
        objs = render(CHART, overrides)
        gate_on = bool(values["controller"].get("objectLevelWorkloadIdentity"))
        drop_in = values["controller"].get("fluxDropInSelector") or ""
        wanted = optional.get((gate_on, bool(drop_in)), expected) if expected is not None else None
        scenario_checks(name, objs, values, wanted, report, binary)
        args = checks.container_args(find(objs, "Deployment")[0])
        report.check(f"{name}: --flux-drop-in-selector follows controller.fluxDropInSelector",
                     args.get("--flux-drop-in-selector", "") == drop_in,
                     f"got {args.get('--flux-drop-in-selector')!r}")
        lockdown = values["controller"].get("defaultServiceAccount") or ""
        report.check(f"{name}: --default-service-account follows controller.defaultServiceAccount",
                     args.get("--default-service-account", "") == lockdown,
                     f"got {args.get('--default-service-account')!r}")
        report.check(f"{name}: --feature-gates follows controller.objectLevelWorkloadIdentity",
                     (args.get("--feature-gates") == f"{OBJECT_IDENTITY_GATE}=true") == gate_on,
                     f"got {args.get('--feature-gates')!r}")
        if name == "default":
            default_objs, default_values = objs, values
            default_consumers(objs, values, report)
        if name == "flux-shards":
            shard_consumers(objs, values, report)

    flux_examples.check(ROOT, report)
    openshift.check(CHART, report)
    guide.check(ROOT, binary, report)

    self_expected = expected
    if self_expected is None:
        # The self-test exercises the assertions, not the chart: the chart's own grants will do.
        self_expected = grants(r for o in default_objs if o["kind"] in ("Role", "ClusterRole") for r in o["rules"])
    self_test(default_objs, default_values, self_expected, report)
    guide.self_test(report)
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())
