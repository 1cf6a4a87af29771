"""The user guide, README.md and every docs/*.md: every shell block says where it runs, the
`# runs here` blocks are run (from the root of the checkout, as the guide says), every
relative link and `#anchor` leads to a file and a heading that exist, README.md links every
docs page, and the example YAML in the guide is the YAML in testdata/flux/.

`self_test` runs the same checks on a small guide of its own, broken one way at a time,
and requires each break to be caught (a docs page is scanned like README.md).
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
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


def pages(root: Path) -> list[Path]:
    """The guide: README.md, then every docs/*.md in name order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def blocks(text: str) -> list[tuple[str, str, int]]:
    """Fenced blocks as (language, body, line number)."""
    return [(m.group(1), m.group(2), text[: m.start()].count("\n") + 1) for m in FENCE.finditer(text)]


def prose(text: str) -> str:
    """The text outside fenced blocks and code spans (fences blanked, line numbers kept)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return CODE_SPAN.sub("", text)


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to
    `-`, a repeated heading numbered `-1`, `-2`, ..."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(prose(text)):
        title = m.group(1).replace("`", "").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def check_shell(root: Path, page: Path, text: str, binary: str, report: Report) -> None:
    """Every shell block names where it runs; the `# runs here` ones run and succeed."""
    rel = page.relative_to(root)
    shell = [(body, line) for lang, body, line in blocks(text) if lang in ("sh", "bash", "console")]
    for body, line in shell:
        first = body.splitlines()[0] if body.strip() else ""
        report.check(f"guide: {rel}: shell block at line {line} says where it runs", first.startswith(MARKERS),
                     f"first line {first!r}; start it with one of {MARKERS}")

    with tempfile.TemporaryDirectory() as bindir:
        if os.path.exists(binary):
            os.symlink(os.path.abspath(binary), os.path.join(bindir, "ocisource"))
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "OCISOURCE_BIN": os.path.abspath(binary)}
        for body, line in shell:
            if not body.startswith("# runs here"):
                continue
            name = f"guide: {rel}: block at line {line} runs"
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


def check_links(root: Path, texts: dict[Path, str], report: Report) -> None:
    """Relative links reach a file (and, with `#anchor`, a heading of it); README.md links
    every docs page, so none is left where nobody finds it."""
    known = {page.resolve(): text for page, text in texts.items()}
    linked: set[Path] = set()
    for page, text in texts.items():
        rel = page.relative_to(root)
        body = prose(text)
        for m in LINK.finditer(body):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto: ...
            line = body[: m.start()].count("\n") + 1
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page.resolve()
            if page == root / "README.md":
                linked.add(dest)
            ok = dest.exists()
            detail = f"{target}: no such file from {rel}"
            if ok and anchor and dest.suffix == ".md":
                ok = anchor in anchors(known.get(dest) or dest.read_text())
                detail = f"{target}: {dest.name} has no heading with the anchor #{anchor}"
            report.check(f"guide: {rel}: link at line {line} to {target} resolves", ok, detail)
    for page in texts:
        if page.parent.name == "docs":
            report.check(f"guide: README.md links docs/{page.name}", page.resolve() in linked,
                         f"add a link to docs/{page.name} in README.md's Documentation table")


def check_examples(root: Path, texts: dict[Path, str], report: Report, minimum: int = 4) -> None:
    """Every OCIRepository, Kustomization and HelmRelease shown equals its testdata/flux file."""
    examples = {}
    for path in sorted((root / "testdata" / "flux").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                examples[(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])] = (path.name, doc)
    shown = 0
    for page, text in texts.items():
        rel = page.relative_to(root)
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
                    report.check(f"guide: {rel}: {key[1]} {key[2]} at line {line} equals testdata/flux/{name}",
                                 doc == want, "the guide and testdata/flux differ" if want else "not in testdata/flux")
    report.check("guide: shows the example manifests", shown >= minimum, f"{shown} shown, want {minimum}")


def check(root: Path, binary: str, report: Report, minimum_examples: int = 4) -> None:
    """Record the guide checks in `report`."""
    texts = {page: page.read_text() for page in pages(root)}
    report.check("guide: docs/ has pages", len(texts) > 1, f"no docs/*.md under {root}")
    for page, text in texts.items():
        check_shell(root, page, text, binary, report)
    check_links(root, texts, report)
    check_examples(root, texts, report, minimum_examples)


def self_test(report: Report) -> None:
    """Break a small guide in known ways; each break must make a check fail."""
    example = {"apiVersion": "ocisource.dev/v1beta1", "kind": "OCIRepository", "metadata": {"name": "x"},
               "spec": {"url": "oci://example.com/x"}}
    good = {
        "README.md": "# Demo\n\n## Start here\n\nSee [the page](docs/page.md#a-section) and [top](#start-here).\n",
        "docs/page.md": ("# Page\n\n## A section\n\nBack to [README](../README.md#demo).\n\n"
                         "```sh\n# runs here\ntrue\n```\n\n```yaml\n" + yaml.safe_dump(example) + "```\n"),
        "testdata/flux/x.yaml": yaml.safe_dump(example),
    }
    breaks = {
        "unmarked shell block in docs/": ("docs/page.md", "```sh\n# runs here\ntrue\n```", "```sh\ntrue\n```"),
        "failing runs-here block in docs/": ("docs/page.md", "# runs here\ntrue", "# runs here\nfalse"),
        "link to a missing file": ("README.md", "docs/page.md#", "docs/gone.md#"),
        "link to a missing heading in another page": ("README.md", "#a-section", "#no-such-section"),
        "link to a missing heading in the same page": ("README.md", "(#start-here)", "(#start)"),
        "docs page not linked from README.md": ("README.md", "[the page](docs/page.md#a-section)", "the page"),
        "example differs from testdata/flux": ("docs/page.md", "oci://example.com/x\n", "oci://example.com/y\n"),
    }

    def run(files: dict[str, str]) -> Report:
        probe = Report(quiet=True)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp).resolve()
            for name, text in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(text)
            check(root, "/nonexistent", probe, minimum_examples=1)
        return probe

    clean = run(good)
    report.check("self-test: the small guide passes the guide checks", not clean.failed, ", ".join(clean.failed))
    for label, (name, old, new) in breaks.items():
        assert old in good[name], f"self-test {label!r}: {old!r} is not in {name}"
        probe = run({**good, name: good[name].replace(old, new)})
        # Caught: the break adds a failure the unbroken guide does not have.
        report.check(f"self-test: caught: guide {label}", bool(set(probe.failed) - set(clean.failed)))
