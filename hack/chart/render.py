"""Lint and render the chart offline with the Helm SDK (PyPI `helm-python-sdk`).

No helm binary and no cluster: `helm_python.lint` and `Chart.render` call Helm's Go SDK
through its C ABI. Rendered templates are split into Kubernetes objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

RELEASE = "ocisource"
NAMESPACE = "flux-system"


def lint(chart: Path, values: dict[str, Any]) -> list[str]:
    """Run `helm lint --strict`; return the error and warning messages (empty when clean)."""
    report = helm.lint(str(chart), values, strict=True, namespace=NAMESPACE)
    problems = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]
    return problems + list(report.get("errors") or [])


def render(chart: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    """Render the templates (not NOTES.txt) into a list of objects, in template order."""
    with helm.Chart.load(str(chart)) as loaded:
        rendered = loaded.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects: list[dict[str, Any]] = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(rendered[path]):
            if doc:
                objects.append(doc)
    return objects


def chart_crds(chart: Path) -> list[dict[str, Any]]:
    """The objects Helm installs from the chart's `crds/` folder, as Helm loads them."""
    with helm.Chart.load(str(chart)) as loaded:
        return [doc for crd in loaded.crds for doc in yaml.safe_load_all(crd["data"]) if doc]


def find(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """All objects of one kind."""
    return [o for o in objects if o.get("kind") == kind]
