#!/usr/bin/env python3
"""Module graph and layering check for src/ (the crate layout of src/lib.rs).

Reads every src/**/*.rs, maps it to its top-level module (src/reconcile/context.rs ->
reconcile, src/storage.rs -> storage), collects the project modules it names
(`use crate::X`, `crate::X::` paths, `use crate::{X, Y}` groups) and prints the module
graph as edges with reference counts. Test-only code is included on purpose: a test that
reaches past a port still couples the layers.

`--check` fails (exit 1) on a forbidden edge:
  - domain imports no other project module and no I/O crate (kube, tokio, reqwest, axum,
    hyper, sigstore*, oci-client; the grep the former hack/check-domain.sh ran);
  - ports import only domain;
  - reconcile, pipeline and controller import no adapter (registry, verify, storage,
    server, cloud, archive internals, app, cli);
  - adapters (registry, verify, storage, server, cloud, archive) import no reconcile,
    pipeline, controller, app or cli;
  - app, cli, oneshot, main and lib (the composition root and entry points) may import
    anything;
  - no two files of one module import each other (a circle such as api/ocirepository.rs
    <-> api/validate.rs); a child naming its parent (`mod.rs`) does not count.
Python 3 standard library only.
"""

import argparse
import collections
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

ADAPTERS = {"registry", "verify", "storage", "server", "cloud", "archive"}
COMPOSITION = {"app", "cli", "main", "lib", "oneshot"}
CORE = {"reconcile", "pipeline", "controller"}

# What each layer may name. A module missing here may name anything (the composition root).
ALLOWED = {
    "domain": set(),
    "ports": {"domain"},
    "api": {"domain"},
    # The artifact pipeline and the controller's steps: domain, the port traits, the CRD
    # wire types, and each other in the direction pipeline <- reconcile <- controller.
    "pipeline": {"domain", "ports", "api"},
    "reconcile": {"domain", "ports", "api", "pipeline"},
    "controller": {"domain", "ports", "api", "pipeline", "reconcile"},
    # Adapters implement ports over domain types; the archive is a leaf library the
    # pipeline and registry adapters share (it names no adapter either).
    "registry": {"domain", "ports", "api"},
    "verify": {"domain", "ports", "api"},
    "storage": {"domain", "ports", "api"},
    "server": {"domain", "ports", "api"},
    "cloud": {"domain", "ports", "api"},
    "archive": {"domain", "ports"},
}

# The archive is an adapter, but its streaming entry points are the one bridge between
# blocking tar code and async streams; the pipeline calls it through these:
# `archive::bridge` and the types `archive` re-exports (its other modules are private,
# so the compiler keeps the merge internals out of reach).
ARCHIVE_PUBLIC = {"pipeline"}
ARCHIVE_SURFACE = re.compile(r"bridge|[A-Z][A-Za-z0-9_]*")
ARCHIVE_ITEM = re.compile(r"\bcrate::archive::(?:\{|([A-Za-z_][A-Za-z0-9_]*))")

# I/O crates domain must not name (the former hack/check-domain.sh list, plus oci-client).
IO_CRATES = r"kube|k8s_openapi|tokio|reqwest|axum|hyper|sigstore[a-z_]*|oci_client|oci_distribution"
IO_USE = re.compile(r"^\s*(pub(\([a-z]+\))?\s+)?use\s+(::)?(" + IO_CRATES + r")\b", re.M)
IO_PATH = re.compile(r"(?<![\w:])(::)?(" + IO_CRATES + r")::")

CRATE_PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
LINE_COMMENT = re.compile(r"//[^\n]*")


def module_of(path: pathlib.Path) -> str:
    """Top-level module of a source file: its first path component under src/."""
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".rs")


def strip_comments(text: str) -> str:
    """Drops line comments (doc comments mention modules they do not import)."""
    return LINE_COMMENT.sub("", text)


def group_names(code: str, start: int) -> list:
    """Top-level names of the `{...}` group opening at `code[start]` (nested groups
    included: `{api::X, ports::{A, B}}` gives `api` and `ports`)."""
    names, depth, item = [], 0, ""
    for ch in code[start:]:
        if ch == "{":
            depth += 1
            if depth == 1:
                continue
        elif ch == "}":
            depth -= 1
            if depth == 0:
                break
        if depth == 1 and ch == ",":
            names.append(item)
            item = ""
        else:
            item += ch
    names.append(item)
    return [n.strip().split("::")[0].strip() for n in names if n.strip()]


def references(text: str) -> collections.Counter:
    """Project modules a file names, with counts."""
    code = strip_comments(text)
    found = collections.Counter()
    for m in re.finditer(r"\bcrate::\{", code):
        for name in group_names(code, m.end() - 1):
            found[name] += 1
    for m in CRATE_PATH.finditer(code):
        found[m.group(1)] += 1
    return found


def graph():
    """Edges (from, to) -> count, and domain's I/O crate lines."""
    edges = collections.Counter()
    io_hits = []
    for path in sorted(SRC.rglob("*.rs")):
        src = module_of(path)
        text = path.read_text(encoding="utf-8")
        for dst, n in references(text).items():
            if dst != src and dst != "self":
                edges[(src, dst)] += n
        if src == "domain":
            code = strip_comments(text)
            for lineno, line in enumerate(code.splitlines(), 1):
                if IO_USE.search(line) or IO_PATH.search(line):
                    io_hits.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    return edges, io_hits


def file_key(path: pathlib.Path) -> str:
    """`api/validate` for src/api/validate.rs; `api` for src/api/mod.rs or src/api.rs."""
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    return "/".join(parts)


def sibling_cycles():
    """Files of one module that import each other (`a.rs` uses `super::b`, `b.rs` uses
    `super::a`), directly or around a longer loop. A parent file (`mod.rs`) is left out:
    children naming their parent's items is how Rust modules are built."""
    files = {file_key(p): p for p in SRC.rglob("*.rs")}
    edges = collections.defaultdict(set)
    for key, path in files.items():
        if "/" not in key:
            continue
        parent = key.rsplit("/", 1)[0]
        code = strip_comments(path.read_text(encoding="utf-8"))
        names = set(re.findall(r"^use\s+super::([a-z_][a-z0-9_]*)", code, re.M))
        names |= set(re.findall(r"\bsuper::([a-z_][a-z0-9_]*)::", code))
        names |= {m for m in re.findall(r"\bcrate::" + parent.replace("/", "::")
                                        + r"::([a-z_][a-z0-9_]*)", code)}
        for name in names:
            other = f"{parent}/{name}"
            if other in files and other != key:
                edges[key].add(other)
    # Tarjan's strongly connected components.
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(files):
        if v not in index:
            visit(v)
    return out


def archive_internals():
    """Pipeline references to archive items beyond its public surface."""
    bad = []
    for path in sorted(SRC.rglob("*.rs")):
        if module_of(path) not in ARCHIVE_PUBLIC:
            continue
        code = strip_comments(path.read_text(encoding="utf-8"))
        for m in ARCHIVE_ITEM.finditer(code):
            names = [m.group(1)] if m.group(1) else group_names(code, m.end() - 1)
            for name in names:
                if name != "self" and not ARCHIVE_SURFACE.fullmatch(name):
                    bad.append(f"{path.relative_to(ROOT)}: crate::archive::{name}")
    return bad


def forbidden(edges):
    """Edges the layering rules reject."""
    bad = []
    for (src, dst), n in sorted(edges.items()):
        if src in COMPOSITION or src not in ALLOWED:
            continue
        if dst in ALLOWED[src]:
            continue
        if dst == "archive" and src in ARCHIVE_PUBLIC:
            continue
        bad.append((src, dst, n))
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on a forbidden edge")
    args = parser.parse_args()
    edges, io_hits = graph()
    if not args.check:
        width = max(len(s) for s, _ in edges) if edges else 0
        for (src, dst), n in sorted(edges.items()):
            print(f"{src:<{width}} -> {dst:<12} {n}")
        for cycle in sibling_cycles():
            print(f"cycle: {' <-> '.join(cycle)}")
        return 0
    bad = forbidden(edges)
    cycles = sibling_cycles()
    for cycle in cycles:
        print(f"layers: files import each other: {' <-> '.join(cycle)}", file=sys.stderr)
    for src, dst, n in bad:
        why = "an adapter" if dst in ADAPTERS else "a layer"
        print(f"layers: {src} -> {dst} ({n} references) crosses {why} boundary", file=sys.stderr)
    internals = archive_internals()
    for hit in internals:
        print(f"layers: pipeline reaches past the archive's public surface: {hit}",
              file=sys.stderr)
    for hit in io_hits:
        print(f"layers: domain names an I/O crate: {hit}", file=sys.stderr)
    if bad or io_hits or cycles or internals:
        print("layers: see hack/layers.py for the rules; move the type to ports or domain, "
              "or do the wiring in app", file=sys.stderr)
        return 1
    print(f"layers: {len(edges)} module edges, none crosses a layer boundary; "
          "domain names no I/O crate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
