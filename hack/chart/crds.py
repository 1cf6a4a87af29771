"""CRDs: the chart's `crds/` copy against the repository's `crds/`, and validation of
custom objects against a CRD's OpenAPI schema.
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


def check_drift(source: Path, target: Path, helm_loaded: list[dict[str, Any]], report: Report) -> None:
    """The chart ships exactly the repository's CRDs, byte for byte, and Helm loads them all."""
    src = {p.name: p.read_bytes() for p in sorted(source.glob("*.yaml"))}
    dst = {p.name: p.read_bytes() for p in sorted(target.glob("*.yaml"))}
    if not report.check("crds: the repository's crds/ holds CRDs", bool(src),
                        f"{source} has no *.yaml (generate them with `ocisource crd`)"):
        return
    report.check("crds: chart crds/ has the same files as crds/", set(src) == set(dst),
                 f"only in crds/: {sorted(set(src) - set(dst))}, only in chart: {sorted(set(dst) - set(src))}"
                 " (run hack/chart-check.sh --sync-crds)")
    for name in sorted(set(src) & set(dst)):
        report.check(f"crds: chart copy of {name} is identical", src[name] == dst[name],
                     "differs (run hack/chart-check.sh --sync-crds)")
    names = {d["metadata"]["name"] for b in src.values() for d in yaml.safe_load_all(b) if d}
    loaded = {d["metadata"]["name"] for d in helm_loaded}
    report.check("crds: Helm installs every CRD", names == loaded, f"loaded {sorted(loaded)}, want {sorted(names)}")


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
