"""Assertions on one rendered set of chart objects.

Each function records named checks in a `Report`; `scenario` prefixes the names so a
failure says which values set broke. The expected values come from the values passed to
the render, never from the rendered output itself.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate

from rbac import Grant, describe, grants, is_cluster_scoped, wildcards
from render import NAMESPACE, find
from report import Report

KUBE_VERSIONS = ["1.30.0", "1.37.0"]
# Volume types the Pod Security Standard `restricted` profile allows.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def validate_objects(objs: list[dict[str, Any]], report: Report, scenario: str) -> None:
    """Validate every object against the Kubernetes OpenAPI schemas (strict: no unknown fields).

    Kinds the schemas do not know (ServiceMonitor) are recorded as skipped, never passed.
    """
    for obj in objs:
        name = f"{scenario}: schema {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                report.skip(name, f"kubernetes-validate has no schema for {obj.get('apiVersion')} {obj.get('kind')}")
                break
            except kubernetes_validate.ValidationError as e:
                path = "/".join(str(p) for p in e.path)
                report.check(f"{name} (k8s {version})", False, f"{path}: {e.message}")
            else:
                report.check(f"{name} (k8s {version})", True)


def container_args(deploy: dict[str, Any]) -> dict[str, str]:
    """The manager container's `--flag=value` arguments as a mapping (a bare flag maps to "")."""
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    out: dict[str, str] = {}
    for arg in args[1:]:
        key, _, value = arg.partition("=")
        out[key] = value
    return out


def pod_security(deploy: dict[str, Any], report: Report, scenario: str) -> None:
    """The Pod Security Standard `restricted` profile, field by field."""
    pod = deploy["spec"]["template"]["spec"]
    psc = pod.get("securityContext", {})
    c = pod["containers"][0]
    csc = c.get("securityContext", {})
    p = f"{scenario}: pod security"

    def eff(key: str) -> Any:
        return csc.get(key, psc.get(key))

    report.check(f"{p} runAsNonRoot", eff("runAsNonRoot") is True, f"got {eff('runAsNonRoot')!r}")
    uid = eff("runAsUser")
    report.check(f"{p} runAsUser not root (unset: the image's 65532 or the SCC's)", uid is None or uid > 0,
                 f"got {uid!r}")
    seccomp = (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    report.check(f"{p} seccompProfile RuntimeDefault", seccomp == "RuntimeDefault", f"got {seccomp!r}")
    report.check(f"{p} readOnlyRootFilesystem", csc.get("readOnlyRootFilesystem") is True,
                 f"got {csc.get('readOnlyRootFilesystem')!r}")
    report.check(f"{p} allowPrivilegeEscalation false", csc.get("allowPrivilegeEscalation") is False,
                 f"got {csc.get('allowPrivilegeEscalation')!r}")
    caps = csc.get("capabilities") or {}
    report.check(f"{p} capabilities drop ALL", caps.get("drop") == ["ALL"], f"got {caps.get('drop')!r}")
    report.check(f"{p} no added capabilities", not caps.get("add"), f"got {caps.get('add')!r}")
    report.check(f"{p} not privileged", not csc.get("privileged"), f"got {csc.get('privileged')!r}")
    host = [k for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]
    report.check(f"{p} no host namespaces", not host, f"set: {host}")
    hostports = [pt for pt in c.get("ports", []) if pt.get("hostPort")]
    report.check(f"{p} no hostPort", not hostports, f"got {hostports}")
    kinds = {k for v in pod.get("volumes", []) for k in v if k != "name"}
    report.check(f"{p} volume types allowed by the restricted profile", kinds <= RESTRICTED_VOLUMES,
                 f"got {sorted(kinds - RESTRICTED_VOLUMES)}")
    res = c.get("resources") or {}
    report.check(f"{p} resources requests and limits", bool(res.get("requests")) and bool(res.get("limits")),
                 f"got {res!r}")


def probes_and_mounts(deploy: dict[str, Any], values: dict[str, Any], report: Report, scenario: str) -> None:
    """Probes hit /healthz and /readyz on the health port; storage and /tmp are mounted."""
    pod = deploy["spec"]["template"]["spec"]
    c = pod["containers"][0]
    ports = {pt["name"]: pt["containerPort"] for pt in c["ports"]}
    health = values["ports"]["health"]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (c.get(probe) or {}).get("httpGet") or {}
        port = get.get("port")
        port = ports.get(port, port)
        report.check(f"{scenario}: {probe} GET {path} on {health}", get.get("path") == path and port == health,
                     f"got {get!r}")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    storage_path = values["controller"]["storagePath"]
    data = vols.get(mounts.get(storage_path, ""), {})
    kind = values["storage"]["type"]
    if kind == "emptyDir":
        ok = "emptyDir" in data
    else:
        claim = values["storage"].get("existingClaim") if kind == "existingClaim" else "ocisource"
        ok = (data.get("persistentVolumeClaim") or {}).get("claimName") == claim
    report.check(f"{scenario}: storage ({kind}) mounted at {storage_path}", ok, f"volume {data!r}")
    report.check(f"{scenario}: writable /tmp emptyDir", "emptyDir" in vols.get(mounts.get("/tmp", ""), {}),
                 f"mounts {mounts}")
    args = container_args(deploy)
    report.check(f"{scenario}: --storage-path matches the mount", args.get("--storage-path") == storage_path,
                 f"got {args.get('--storage-path')!r}")


def leader_election(deploy: dict[str, Any], values: dict[str, Any], report: Report, scenario: str) -> None:
    """`--leader-elect=true` when replicas > 1 or asked for, false otherwise."""
    replicas = replica_count(values)
    want = replicas > 1 or values["controller"]["leaderElect"]
    got = container_args(deploy).get("--leader-elect")
    report.check(f"{scenario}: --leader-elect={str(want).lower()} (replicas={replicas})",
                 got == str(want).lower(), f"got {got!r}")
    report.check(f"{scenario}: Deployment replicas={replicas}",
                 deploy["spec"]["replicas"] == replicas, f"got {deploy['spec']['replicas']}")
    # Each replica's Lease identity (and event reporter) starts with its own pod name.
    env = {e["name"]: e for e in deploy["spec"]["template"]["spec"]["containers"][0].get("env", [])}
    pod_name = env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    report.check(f"{scenario}: POD_NAME from the downward API (metadata.name)",
                 pod_name == "metadata.name", f"got {env.get('POD_NAME')!r}")


def _role_grants(obj: dict[str, Any]) -> set[Grant]:
    return grants(obj.get("rules") or [])


def rbac(objs: list[dict[str, Any]], expected: set[Grant], watch_all: bool, report: Report, scenario: str) -> None:
    """The chart grants exactly `expected`, with each grant in the narrowest scope."""
    roles = find(objs, "Role")
    croles = find(objs, "ClusterRole")
    granted_ns = set().union(*(_role_grants(r) for r in roles)) if roles else set()
    granted_cl = set().union(*(_role_grants(r) for r in croles)) if croles else set()
    granted = granted_ns | granted_cl
    p = f"{scenario}: rbac"
    report.check(f"{p} grants nothing the controller does not use", not (granted - expected),
                 f"extra: {describe(granted - expected)}")
    report.check(f"{p} grants everything the controller uses", not (expected - granted),
                 f"missing: {describe(expected - granted)}")
    report.check(f"{p} no wildcards", not wildcards(granted), describe(wildcards(granted)))
    report.check(f"{p} cluster-scoped resources only in the ClusterRole",
                 not any(is_cluster_scoped(g) for g in granted_ns), describe({g for g in granted_ns if is_cluster_scoped(g)}))
    leases = {g for g in granted if g[1] == "leases"}
    report.check(f"{p} leases only in the release namespace Role", not (leases & granted_cl),
                 describe(leases & granted_cl))
    if watch_all:
        ns_only = {g for g in granted_ns if g[1] != "leases"}
        report.check(f"{p} cluster-wide: Role holds only the Lease", not ns_only, describe(ns_only))
    else:
        wide = {g for g in granted_cl if not is_cluster_scoped(g)}
        report.check(f"{p} namespaced: ClusterRole holds only cluster-scoped grants", not wide, describe(wide))
    sa = find(objs, "ServiceAccount")
    sa_name = sa[0]["metadata"]["name"] if sa else None
    for kind, role_kind, pool in (("RoleBinding", "Role", roles), ("ClusterRoleBinding", "ClusterRole", croles)):
        names = {r["metadata"]["name"] for r in pool}
        bindings = find(objs, kind)
        if not pool:
            # No role of this kind (a namespaced install needs no ClusterRole): no binding either.
            report.check(f"{p} no {kind} without a {role_kind}", not bindings, f"{len(bindings)} rendered")
            continue
        ok = bool(bindings) and all(
            b["roleRef"]["kind"] == role_kind and b["roleRef"]["name"] in names
            and b["subjects"] == [{"kind": "ServiceAccount", "name": sa_name, "namespace": NAMESPACE}]
            for b in bindings)
        report.check(f"{p} {kind} binds the {role_kind} to the ServiceAccount only", ok,
                     f"bindings {[b.get('roleRef') for b in bindings]}, subjects {[b.get('subjects') for b in bindings]}")


def network_policy(objs: list[dict[str, Any]], values: dict[str, Any], report: Report, scenario: str) -> None:
    """Only the configured consumers reach the artifact port, only scrapers the metrics port."""
    pols = find(objs, "NetworkPolicy")
    p = f"{scenario}: networkpolicy"
    if not values["networkPolicy"]["enabled"]:
        report.check(f"{p} absent when disabled", not pols, f"{len(pols)} rendered")
        return
    if not report.check(f"{p} rendered", len(pols) == 1, f"{len(pols)} rendered"):
        return
    spec = pols[0]["spec"]
    deploy = find(objs, "Deployment")[0]
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    sel = spec["podSelector"].get("matchLabels", {})
    report.check(f"{p} selects the controller pods", bool(sel) and all(pod_labels.get(k) == v for k, v in sel.items()),
                 f"podSelector {sel}")
    report.check(f"{p} policyTypes Ingress", spec.get("policyTypes") == ["Ingress"], f"got {spec.get('policyTypes')}")
    by_port: dict[int, list[Any]] = {}
    for rule in spec.get("ingress", []):
        if not rule.get("from"):
            report.check(f"{p} every ingress rule names its peers", False, f"rule {rule} admits everyone")
        for port in rule.get("ports", []) or [{"port": "ANY"}]:
            by_port.setdefault(port["port"], []).extend(rule.get("from") or [])
    artifact, metrics = values["ports"]["artifact"], values["ports"]["metrics"]
    consumers = values["networkPolicy"]["artifactConsumers"] + values["networkPolicy"]["extraArtifactConsumers"]
    report.check(f"{p} artifact port {artifact} admits exactly the consumers (artifactConsumers + extraArtifactConsumers)",
                 by_port.get(artifact) == consumers, f"got {by_port.get(artifact)}")
    scrapers = values["networkPolicy"]["metricsScrapers"]
    report.check(f"{p} metrics port {metrics} admits exactly the scrapers",
                 by_port.get(metrics, []) == scrapers, f"got {by_port.get(metrics)}")
    others = set(by_port) - {artifact, metrics}
    report.check(f"{p} no other port opened", not others, f"ports {others}")


def replica_count(values: dict[str, Any]) -> int:
    """The replica count the values ask for: `replicas` (the older name) when set, else `replicaCount`."""
    return values["replicaCount"] if values.get("replicas") is None else values["replicas"]


def disruption_budget(objs: list[dict[str, Any]], values: dict[str, Any], report: Report, scenario: str) -> None:
    """A PodDisruptionBudget over the controller pods exactly when more than one replica runs."""
    pdbs = find(objs, "PodDisruptionBudget")
    replicas = replica_count(values)
    p = f"{scenario}: pdb"
    if not report.check(f"{p} rendered iff replicas > 1 (replicas={replicas})", len(pdbs) == (1 if replicas > 1 else 0),
                        f"{len(pdbs)} rendered"):
        return
    if not pdbs:
        return
    spec = pdbs[0]["spec"]
    pod_labels = find(objs, "Deployment")[0]["spec"]["template"]["metadata"]["labels"]
    sel = (spec.get("selector") or {}).get("matchLabels") or {}
    report.check(f"{p} selects the controller pods", bool(sel) and all(pod_labels.get(k) == v for k, v in sel.items()),
                 f"selector {sel}")
    want = values["podDisruptionBudget"]["maxUnavailable"]
    report.check(f"{p} maxUnavailable {want}", spec.get("maxUnavailable") == want and "minAvailable" not in spec,
                 f"got {spec}")


def security_contexts(deploy: dict[str, Any], values: dict[str, Any], report: Report, scenario: str) -> None:
    """The securityContexts are the values' ones; no fixed UID/GID unless the values set one
    (OpenShift's restricted SCC assigns its own); fsGroup 65532 only for a claim."""
    pod = deploy["spec"]["template"]["spec"]
    psc = dict(pod.get("securityContext") or {})
    csc = pod["containers"][0].get("securityContext") or {}
    p = f"{scenario}: securityContext"
    report.check(f"{p} container is containerSecurityContext", csc == values["containerSecurityContext"],
                 f"got {csc}")
    want = dict(values["podSecurityContext"])
    if values["storage"]["type"] != "emptyDir" and "fsGroup" not in want:
        want["fsGroup"] = 65532
    report.check(f"{p} pod is podSecurityContext (+ fsGroup 65532 with a claim)", psc == want, f"got {psc}, want {want}")
    for key in ("runAsUser", "runAsGroup"):
        fixed = [c for c in (psc, csc) if key in c]
        set_by_values = key in values["podSecurityContext"] or key in values["containerSecurityContext"]
        report.check(f"{p} no fixed {key} unless the values set one", bool(fixed) == set_by_values,
                     f"rendered {[c[key] for c in fixed]}")


def extra_volumes(deploy: dict[str, Any], values: dict[str, Any], report: Report, scenario: str) -> None:
    """extraVolumes and extraVolumeMounts land in the pod and the container, after the chart's own."""
    pod = deploy["spec"]["template"]["spec"]
    vols = pod.get("volumes", [])
    mounts = pod["containers"][0].get("volumeMounts", [])
    want_v, want_m = values["extraVolumes"], values["extraVolumeMounts"]
    report.check(f"{scenario}: extraVolumes rendered ({len(want_v)})",
                 vols[len(vols) - len(want_v):] == want_v and len(vols) == 2 + len(want_v), f"volumes {vols}")
    report.check(f"{scenario}: extraVolumeMounts rendered ({len(want_m)})",
                 mounts[len(mounts) - len(want_m):] == want_m and len(mounts) == 2 + len(want_m), f"mounts {mounts}")
