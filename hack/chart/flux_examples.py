"""The user guide's example manifests in testdata/flux/: valid, and wired together.

OCIRepositories validate against the repository's generated CRD (crds/) and, with only
the apiVersion changed, against Flux's OCIRepository CRD: that is the migration claim of
the guide. Consumers point at the ExternalArtifact ocisource publishes, which carries the
OCIRepository's name and namespace.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from crds import reference_dir, validate_custom
from report import Report

OURS = "ocisource.dev/v1beta1"
FLUX = "source.toolkit.fluxcd.io/v1"
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


def _load(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))}


def _crd_for(folder: Path, group: str, kind: str) -> dict[str, Any] | None:
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition" \
                    and doc["spec"]["group"] == group and doc["spec"]["names"]["kind"] == kind:
                return doc
    return None


def check(root: Path, report: Report) -> None:
    """Record the example checks in `report`."""
    files = _load(root / "testdata" / "flux")
    ours = {n: o for n, o in files.items() if o.get("apiVersion") == OURS and o.get("kind") == "OCIRepository"}
    report.check("examples: ocisource OCIRepositories present", len(ours) >= 2, f"found {sorted(ours)}")

    crd = _crd_for(root / "crds", "ocisource.dev", "OCIRepository")
    if report.check("examples: crds/ has the ocisource.dev OCIRepository CRD", crd is not None,
                    "generate crds/ with `ocisource crd`"):
        for name, obj in ours.items():
            errors = validate_custom(obj, crd)
            report.check(f"examples: {name} validates against crds/", not errors, "; ".join(errors))

    flux_crd = _crd_for(reference_dir(), "source.toolkit.fluxcd.io", "OCIRepository")
    for name, obj in ours.items():
        label = f"examples: {name} with apiVersion {FLUX} is a valid Flux OCIRepository"
        if flux_crd is None:
            report.skip(label, f"Flux reference CRD not found in {reference_dir()}")
            continue
        as_flux = copy.deepcopy(obj)
        as_flux["apiVersion"] = FLUX
        errors = validate_custom(as_flux, flux_crd)
        report.check(label, not errors, "; ".join(errors))
        typo = copy.deepcopy(as_flux)
        typo["spec"]["intervall"] = typo["spec"].pop("interval")
        report.check(f"self-test: caught: a misspelt field in {name}", bool(validate_custom(typo, flux_crd)))

    flux = files.get("flux-ocirepository.yaml")
    mine = files.get("ocirepository.yaml")
    same = flux is not None and mine is not None and {**flux, "apiVersion": OURS} == mine
    report.check("examples: migration changes only the apiVersion (flux-ocirepository.yaml vs ocirepository.yaml)",
                 same)

    by_key = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in ours.values()}

    def source_for(obj: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any] | None:
        ns = ref.get("namespace", obj["metadata"]["namespace"])
        return by_key.get((ns, ref.get("name")))

    ks = files.get("kustomization.yaml") or {}
    ref = (ks.get("spec") or {}).get("sourceRef") or {}
    src = source_for(ks, ref) if ks else None
    report.check("examples: Kustomization kustomize.toolkit.fluxcd.io/v1 sourceRef.kind ExternalArtifact",
                 ks.get("apiVersion") == "kustomize.toolkit.fluxcd.io/v1" and ref.get("kind") == "ExternalArtifact")
    report.check("examples: Kustomization's ExternalArtifact is published for an example OCIRepository that extracts",
                 src is not None and (src["spec"].get("layerSelector") or {}).get("operation", "extract") == "extract",
                 f"sourceRef {ref}")

    hr = files.get("helmrelease.yaml") or {}
    cref = (hr.get("spec") or {}).get("chartRef") or {}
    csrc = source_for(hr, cref) if hr else None
    report.check("examples: HelmRelease helm.toolkit.fluxcd.io/v2 chartRef.kind ExternalArtifact",
                 hr.get("apiVersion") == "helm.toolkit.fluxcd.io/v2" and cref.get("kind") == "ExternalArtifact")
    sel = (csrc or {}).get("spec", {}).get("layerSelector") or {}
    report.check("examples: HelmRelease's ExternalArtifact copies a Helm chart layer",
                 csrc is not None and sel.get("mediaType") == HELM_CHART_LAYER and sel.get("operation") == "copy",
                 f"chartRef {cref}, layerSelector {sel}")
    for name, obj in ours.items():
        verify = obj["spec"].get("verify") or {}
        report.check(f"examples: {name} verifies cosign signatures",
                     verify.get("provider") == "cosign" and bool(verify.get("matchOIDCIdentity") or verify.get("secretRef")))
