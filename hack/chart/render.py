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


def render(chart: Path, values: dict[str, Any], namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Render the templates (not NOTES.txt) into a list of objects, in template order."""
    with helm.Chart.load(str(chart)) as loaded:
        rendered = loaded.render(values, name=RELEASE, namespace=namespace, is_install=True)
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


def main() -> None:
    """`render.py CHART NAMESPACE VALUES_JSON [KIND ...]`: print the rendered objects (only
    those KINDs when given) as one YAML stream; the real-cluster tests apply them."""
    import json
    import sys

    chart, namespace, values = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    kinds = set(sys.argv[4:])
    objects = [o for o in render(Path(chart), values, namespace) if not kinds or o.get("kind") in kinds]
    yaml.safe_dump_all(objects, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
