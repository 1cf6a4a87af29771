"""CRDs: the chart's `files/crds/` copy against the repository's `crds/`, the CRD template
that renders it (behind `crds.install`, kept on uninstall), and validation of custom
objects against a CRD's OpenAPI schema.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from report import Report


def sync(source: Path, target: Path) -> None:
    """Replace the chart's CRD copies with the repository's `crds/*.yaml`."""
    for old in target.glob("*.yaml"):
        old.unlink()
    for crd in sorted(source.glob("*.yaml")):
        shutil.copyfile(crd, target / crd.name)
        print(f"synced {crd.name}")


def check_drift(source: Path, target: Path, report: Report) -> None:
    """The chart ships exactly the repository's CRDs, byte for byte."""
    src = {p.name: p.read_bytes() for p in sorted(source.glob("*.yaml"))}
    dst = {p.name: p.read_bytes() for p in sorted(target.glob("*.yaml"))}
    if not report.check("crds: the repository's crds/ holds CRDs", bool(src),
                        f"{source} has no *.yaml (generate them with `ocisource crd`)"):
        return
    report.check("crds: chart files/crds/ has the same files as crds/", set(src) == set(dst),
                 f"only in crds/: {sorted(set(src) - set(dst))}, only in chart: {sorted(set(dst) - set(src))}"
                 " (run hack/chart-check.sh --sync-crds)")
    for name in sorted(set(src) & set(dst)):
        report.check(f"crds: chart copy of {name} is identical", src[name] == dst[name],
                     "differs (run hack/chart-check.sh --sync-crds)")


KEEP = ("helm.sh/resource-policy", "keep")


def check_rendered(source: Path, objs: list[dict[str, Any]], values: dict[str, Any], helm_crds: list[Any],
                   report: Report, scenario: str) -> None:
    """With `crds.install` every CRD of `crds/` is rendered, unchanged but for labels and the
    keep annotation (so upgrades update it and uninstall leaves it); without it none is.
    Helm's own `crds/` folder stays empty: a CRD there would be created at install before
    the template's copy, and the install would fail on the existing object."""
    want = {d["metadata"]["name"]: d for p in sorted(source.glob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text()) if d}
    got = {c["metadata"]["name"]: c for c in objs
           if c.get("kind") == "CustomResourceDefinition" and c["metadata"]["name"] in want}
    p = f"{scenario}: crds"
    report.check(f"{p} Helm's crds/ folder is empty (CRDs are templates)", not helm_crds, f"{len(helm_crds)} loaded")
    if not values["crds"]["install"]:
        report.check(f"{p} none rendered with crds.install=false", not got, f"rendered {sorted(got)}")
        return
    report.check(f"{p} every CRD of crds/ rendered with crds.install=true", set(got) == set(want),
                 f"rendered {sorted(got)}, want {sorted(want)}")
    for name in sorted(set(got) & set(want)):
        meta = got[name]["metadata"]
        report.check(f"{p} {name} kept on uninstall ({KEEP[0]}: {KEEP[1]})",
                     (meta.get("annotations") or {}).get(KEEP[0]) == KEEP[1], f"annotations {meta.get('annotations')}")
        other = {k: v for k, v in (meta.get("annotations") or {}).items() if k != KEEP[0]}
        report.check(f"{p} {name} keeps the generated annotations",
                     other == (want[name]["metadata"].get("annotations") or {}), f"got {other}")
        report.check(f"{p} {name} spec identical to crds/", got[name]["spec"] == want[name]["spec"], "spec differs")
        report.check(f"{p} {name} labelled as part of the release",
                     (meta.get("labels") or {}).get("app.kubernetes.io/managed-by") == "Helm", f"labels {meta.get('labels')}")


def reference_dir() -> Path:
    """Where Flux's reference CRDs are (shared/ sits beside the repository in CI)."""
    root = Path(__file__).resolve().parents[2]
    return Path(os.environ.get("FLUX_REFERENCE_DIR", root.parent / "shared" / "reference" / "flux"))


def _closed(schema: Any) -> Any:
    """Make objects with listed properties reject unknown fields (catches typos in examples)."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


def validate_custom(obj: dict[str, Any], crd: dict[str, Any]) -> list[str]:
    """Validate a custom object against the CRD version it names; return error messages."""
    version = obj["apiVersion"].split("/")[-1]
    matches = [v for v in crd["spec"]["versions"] if v["name"] == version]
    if not matches:
        return [f"CRD {crd['metadata']['name']} has no version {version}"]
    schema = _closed(copy.deepcopy(matches[0]["schema"]["openAPIV3Schema"]))
    props = schema.setdefault("properties", {})
    # The API server always accepts these, whatever the CRD's schema lists.
    props["metadata"] = {"type": "object"}
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'/'.join(str(p) for p in e.path)}: {e.message}" for e in validator.iter_errors(obj)]
