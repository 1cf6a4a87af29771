"""Runs a command and measures it the way GNU time does, with more precision.

Each command runs under `/usr/bin/time -f %M`: its peak RSS (`%M`) is that of the largest
single process of the command (for a `bash -c` pipeline, the largest stage). The command
is not spawned straight from Python because a child forked from this ~25 MiB interpreter
keeps the interpreter's RSS high-water mark across `exec`. `os.wait4` on `time` gives
user+sys CPU of the command and every descendant it waited for, in microseconds. Wall
time comes from a monotonic clock around spawn and reap.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Sample:
    wall: float
    cpu: float
    rss_kib: int
    stderr: str = ""
    stdout_path: str | None = None


@dataclass
class Result:
    """Medians over the runs of one command."""

    name: str
    samples: list[Sample] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.samples)

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def cpu(self) -> float:
        return statistics.median(s.cpu for s in self.samples)

    @property
    def rss_mib(self) -> float:
        return max(s.rss_kib for s in self.samples) / 1024


TIME = "/usr/bin/time"


class CommandFailed(Exception):
    pass


def run_once(argv: list[str], cwd: Path | None = None, env: dict | None = None,
             stdout_path: Path | None = None, log_dir: Path | None = None,
             timeout: float = 900) -> Sample:
    """Runs `argv` once; raises CommandFailed with its stderr tail on a non-zero exit.

    A command still running after `timeout` seconds is killed (and so fails)."""
    err_path = (log_dir or Path("/tmp")) / f"stderr-{os.getpid()}.txt"
    rss_path = (log_dir or Path("/tmp")) / f"rss-{os.getpid()}.txt"
    argv = [TIME, "-f", "%M", "-o", str(rss_path), *argv]
    with open(err_path, "wb") as err, open(stdout_path or os.devnull, "wb") as out:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL)
        except OSError as e:
            raise CommandFailed(f"failed to start {argv[0]}: {e}") from e
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = err_path.read_text(errors="replace")
    if proc.returncode != 0:
        raise CommandFailed(f"exit {proc.returncode}: {' '.join(argv[5:])[:200]}\n{stderr[-1500:]}")
    rss_kib = int(rss_path.read_text().split()[-1])
    return Sample(wall, usage.ru_utime + usage.ru_stime, rss_kib, stderr,
                  str(stdout_path) if stdout_path else None)


def bench(name: str, argv: list[str], runs: int, before=None, **kw) -> Result:
    """Runs `argv` `runs` times (calling `before()` untimed before each) and keeps samples."""
    res = Result(name)
    for _ in range(runs):
        if before:
            before()
        try:
            res.samples.append(run_once(argv, **kw))
        except CommandFailed as e:
            res.error = str(e)
            break
    return res
