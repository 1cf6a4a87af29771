"""The chart on OpenShift, rendered by Helm against the real API server (hack/cluster.sh).

The chart leaves fsGroup to the cluster when it serves `security.openshift.io/v1`
(OpenShift's restricted-v2 SCC assigns fsGroup and UID from the namespace's range and
refuses a fixed one outside it). That branch reads `.Capabilities.APIVersions`, which
only a cluster provides, so this check installs the chart with a server-side dry run
(Helm SDK `Config.install(dry_run="server")`: Helm reads the API groups from discovery)
twice on the test cluster: first as it is (a claim gets fsGroup 65532), then after
registering the `securitycontextconstraints.security.openshift.io` CRD, with which
discovery answers as OpenShift's does for that group. The second rendering must carry no
fsGroup and no fixed UID, and pass restricted-v2's rules as OpenShift documents them.

Needs a cluster (KUBECONFIG and OCISOURCE_TEST_KUBECTL from `hack/cluster.sh env`);
without one the checks are skipped, unless OCISOURCE_REQUIRE_CLUSTER=1 makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from report import Report

NAMESPACE = "chart-openshift"
SCC_CRD = "securitycontextconstraints.security.openshift.io"
# A claim (the case with an fsGroup to leave out). The CRD and a release name of its own
# stay out of the way of what the cluster tests applied: the CRD (applied with kubectl,
# which Helm refuses to adopt) and RBAC named after the default release.
VALUES = {"storage": {"type": "pvc"}, "crds": {"install": False}}
RELEASE = "ocisource-openshift"

# OpenShift's restricted-v2 SCC (the default for authenticated users since 4.11).
SCC_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
               "projected", "secret"}
SCC_ALLOWED_CAPS = {"NET_BIND_SERVICE"}

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": SCC_CRD},
    "spec": {
        "group": "security.openshift.io",
        "scope": "Cluster",
        "names": {"plural": "securitycontextconstraints", "singular": "securitycontextconstraints",
                  "kind": "SecurityContextConstraints", "listKind": "SecurityContextConstraintsList"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def restricted_v2_violations(pod: dict[str, Any]) -> list[str]:
    """What restricted-v2 would refuse in a pod spec whose namespace range OpenShift assigns
    (no fixed UID or fsGroup may be asked for, since the range is not known in advance)."""
    bad: list[str] = []
    psc = pod.get("securityContext") or {}
    for key in ("fsGroup", "runAsUser", "runAsGroup"):
        if key in psc:
            bad.append(f"pod securityContext.{key}={psc[key]} (the SCC assigns it from the namespace's range)")
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            bad.append(flag)
    for v in pod.get("volumes") or []:
        kind = next(k for k in v if k != "name")
        if kind not in SCC_VOLUMES:
            bad.append(f"volume {v['name']} of type {kind}")
    seccomp = (psc.get("seccompProfile") or {}).get("type")
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        csc = c.get("securityContext") or {}
        name = c["name"]
        if csc.get("privileged"):
            bad.append(f"{name}: privileged")
        if csc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = csc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{name}: capabilities.drop lacks ALL")
        extra = set(caps.get("add") or []) - SCC_ALLOWED_CAPS
        if extra:
            bad.append(f"{name}: adds capabilities {sorted(extra)}")
        if "runAsUser" in csc or "runAsGroup" in csc:
            bad.append(f"{name}: fixed runAsUser/runAsGroup")
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                bad.append(f"{name}: hostPort {p['hostPort']}")
        profile = (csc.get("seccompProfile") or {}).get("type") or seccomp
        if profile not in (None, "RuntimeDefault"):
            bad.append(f"{name}: seccomp profile {profile}")
    return bad


def _kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.environ["OCISOURCE_TEST_KUBECTL"], *args], input=stdin, text=True,
                          capture_output=True, timeout=60, check=False)


def _pod_spec(chart: Path, values: dict[str, Any]) -> dict[str, Any]:
    """The Deployment's pod spec of a server-side dry-run install. The chart is installed
    from a copy without `kubeVersion`: the harness's kube-apiserver, built from its Go
    module without version stamping, reports v0.0.0-master, which `>=1.28.0-0` refuses."""
    import helm_python as helm

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "ocisource"
        shutil.copytree(chart, copy)
        meta = copy / "Chart.yaml"
        lines = meta.read_text().splitlines(keepends=True)
        meta.write_text("".join(line for line in lines if not line.startswith("kubeVersion:")))
        with helm.Config(kubeconfig_path=os.environ["KUBECONFIG"], namespace=NAMESPACE) as cfg, \
                helm.Chart.load(str(copy)) as loaded:
            release = cfg.install(loaded, RELEASE, values, namespace=NAMESPACE, dry_run="server")
    manifest = release["manifest"]
    deploys = [d for d in yaml.safe_load_all(manifest) if d and d.get("kind") == "Deployment"]
    return deploys[0]["spec"]["template"]["spec"]


def _served(group_version: str, want: bool) -> bool:
    for _ in range(100):
        out = _kubectl("api-versions").stdout.split()
        if (group_version in out) == want:
            return True
        time.sleep(0.2)
    return False


def check(chart: Path, report: Report) -> None:
    """The OpenShift branch of the pod securityContext, on the real API server."""
    label = "openshift: restricted-v2 SCC admits the chart (server dry run)"
    if not os.environ.get("KUBECONFIG") or not os.environ.get("OCISOURCE_TEST_KUBECTL"):
        why = "no test cluster (eval \"$(hack/cluster.sh env)\" after hack/cluster.sh start)"
        if os.environ.get("OCISOURCE_REQUIRE_CLUSTER") == "1":
            report.check(label, False, why)
        else:
            report.skip(label, why)
        return
    _kubectl("create", "namespace", NAMESPACE)
    if not report.check("openshift: the test cluster does not serve security.openshift.io/v1 yet",
                        _served("security.openshift.io/v1", False)):
        return
    try:
        plain = _pod_spec(chart, VALUES)
    except Exception as e:  # the Helm SDK's errors: report them as a failed check
        report.check("openshift: server dry-run install", False, str(e)[:400])
        return
    report.check("openshift: on Kubernetes a claim gets fsGroup 65532 (server dry run)",
                 (plain.get("securityContext") or {}).get("fsGroup") == 65532, f"got {plain.get('securityContext')}")
    report.check("openshift: restricted-v2 would refuse that fixed fsGroup (the check can fail)",
                 any("fsGroup" in v for v in restricted_v2_violations(plain)))
    created = _kubectl("apply", "-f", "-", stdin=yaml.safe_dump(CRD))
    try:
        if not report.check("openshift: security.openshift.io/v1 served after the SCC CRD",
                            created.returncode == 0 and _served("security.openshift.io/v1", True),
                            created.stderr.strip()):
            return
        try:
            pod = _pod_spec(chart, VALUES)
        except Exception as e:
            report.check(label, False, str(e)[:400])
            return
        violations = restricted_v2_violations(pod)
        report.check(label, not violations, "; ".join(violations))
    finally:
        _kubectl("delete", "crd", SCC_CRD, "--wait=true")
        _kubectl("delete", "namespace", NAMESPACE, "--wait=false")
