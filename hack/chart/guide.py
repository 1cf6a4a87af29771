"""README.md (the user guide): every shell block says where it runs, the `# runs here` blocks are
run, and the example YAML in the guide is the YAML in testdata/flux/.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from report import Report

MARKERS = ("# needs a cluster", "# needs registry access", "# runs here", "# builds the release binary",
           "# set-up", "# needs Go")  # "# needs Go": the real-cluster harness, which hack/test.sh runs
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(text: str) -> list[tuple[str, str, int]]:
    """Fenced blocks as (language, body, line number)."""
    return [(m.group(1), m.group(2), text[: m.start()].count("\n") + 1) for m in FENCE.finditer(text)]


def check(root: Path, binary: str, report: Report) -> None:
    """Record the guide checks in `report`."""
    guide = root / "README.md"
    text = guide.read_text()
    shell = [(body, line) for lang, body, line in blocks(text) if lang in ("sh", "bash", "console")]
    for body, line in shell:
        first = body.splitlines()[0] if body.strip() else ""
        report.check(f"guide: shell block at line {line} says where it runs", first.startswith(MARKERS),
                     f"first line {first!r}; start it with one of {MARKERS}")

    with tempfile.TemporaryDirectory() as bindir:
        if os.path.exists(binary):
            os.symlink(os.path.abspath(binary), os.path.join(bindir, "ocisource"))
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "OCISOURCE_BIN": os.path.abspath(binary)}
        for body, line in shell:
            if not body.startswith("# runs here"):
                continue
            name = f"guide: block at line {line} runs"
            if "hack/chart-check.sh" in body:
                print(f"note  {name}: that block is this check itself")
                continue
            if "image-build.sh" in body and shutil.which("buildah") is None:
                report.skip(name, "buildah is not installed (apt-get install buildah)")
                continue
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=600, check=False)
            tail = (proc.stderr.strip() or proc.stdout.strip())[-400:]
            report.check(name, proc.returncode == 0, f"exit {proc.returncode}: {tail}")

    examples = {}
    for path in sorted((root / "testdata" / "flux").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                examples[(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])] = (path.name, doc)
    shown = 0
    for lang, body, line in blocks(text):
        if lang != "yaml":
            continue
        for doc in yaml.safe_load_all(body):
            if not isinstance(doc, dict) or "metadata" not in doc:
                continue
            key = (doc.get("apiVersion"), doc.get("kind"), doc["metadata"].get("name"))
            if key[1] in ("OCIRepository", "Kustomization", "HelmRelease"):
                shown += 1
                name, want = examples.get(key, ("?", None))
                report.check(f"guide: {key[1]} {key[2]} at line {line} equals testdata/flux/{name}", doc == want,
                             "the guide and testdata/flux differ" if want else "not in testdata/flux")
    report.check("guide: shows the example manifests", shown >= 4, f"{shown} shown")
