#!/usr/bin/env python3
"""Push files as layers of one OCI artifact with oras-py, an OCI client independent of
ocisource. Usage:
  oras_push.py [--insecure] [--user U --password P] [--annotation k=v]... HOST:PORT/REPO:TAG FILE:MEDIATYPE...
Prints the manifest digest."""
import argparse
import sys

import oras.provider


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--insecure", action="store_true", help="plain HTTP")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--annotation", action="append", default=[])
    p.add_argument("target")
    p.add_argument("files", nargs="+", help="PATH:MEDIATYPE, bottom layer first")
    a = p.parse_args()
    host = a.target.split("/", 1)[0]
    reg = oras.provider.Registry(hostname=host, insecure=a.insecure, auth_backend="basic")
    if a.user:
        reg.set_basic_auth(a.user, a.password)
    annotations = dict(kv.split("=", 1) for kv in a.annotation)
    resp = reg.push(target=a.target, files=a.files, disable_path_validation=True,
                    manifest_annotations=annotations or None, quiet=True)
    print(resp.headers.get("Docker-Content-Digest", ""))
    return 0 if resp.status_code < 300 else 1


if __name__ == "__main__":
    sys.exit(main())
