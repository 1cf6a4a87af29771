"""values.yaml is documented field by field, and values.schema.json refuses bad values.

A key is documented when a `#` comment line sits directly above it (blank lines break
the link), group keys included. Keys inside list items (the default NetworkPolicy peers)
and under OPAQUE fields (resources, the securityContexts) are data documented by their field's comment.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from render import lint
from report import Report

KEY = re.compile(r"^(\s*)([A-Za-z][\w.-]*):")
# Fields whose children are Kubernetes data documented by the field's own comment.
OPAQUE = {"resources", "podSecurityContext", "containerSecurityContext"}


def undocumented(text: str) -> list[str]:
    """Dotted paths of keys without a comment line right above them."""
    missing: list[str] = []
    stack: list[tuple[int, str]] = []
    list_indent: int | None = None
    prev = ""
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if list_indent is not None and stripped and indent <= list_indent and not stripped.startswith("-"):
            list_indent = None
        if stripped.startswith("-"):
            list_indent = indent if list_indent is None else min(list_indent, indent)
        m = KEY.match(line)
        if m and list_indent is None:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if any(k in OPAQUE for _, k in stack):
                prev = stripped
                continue
            path = ".".join([k for _, k in stack] + [m.group(2)])
            if not prev.startswith("#"):
                missing.append(path)
            stack.append((indent, m.group(2)))
        prev = stripped
    return missing


def check(chart: Path, report: Report) -> None:
    """Record the values checks in `report`."""
    missing = undocumented((chart / "values.yaml").read_text())
    report.check("values: every field in values.yaml has a comment above it", not missing,
                 f"undocumented: {missing}")
    for label, bad in (("a misspelt top-level key", {"watchAllNamespace": True}),
                       ("an unknown log encoding", {"controller": {"logEncoding": "text"}}),
                       ("an unknown storage type", {"storage": {"type": "hostPath"}}),
                       ("an empty consumer peer (admits nothing or fails at apply)",
                        {"networkPolicy": {"extraArtifactConsumers": [{}]}}),
                       ("a misspelt peer selector",
                        {"networkPolicy": {"artifactConsumers": [{"podSelectors": {"matchLabels": {"app": "x"}}}]}})):
        report.check(f"values: values.schema.json refuses {label}", bool(lint(chart, bad)))
