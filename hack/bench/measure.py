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


# Figures read from /proc, for long-running processes (servers, controllers): the process
# is asked, never its own metrics endpoint.

def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of one process, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def proc_cpu(pid: int) -> float:
    """utime + stime of one process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (nginx's master and its workers)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += parents.get(p, [])
    return out


def rss_kib(pids: list[int]) -> int:
    """Sum of VmRSS over `pids` (0 for processes already gone)."""
    total = 0
    for p in pids:
        try:
            total += proc_status(p).get("VmRSS", 0)
        except OSError:
            pass
    return total


def tree_rss_kib(pid: int) -> int:
    """Sum of VmRSS over `pid` and its descendants."""
    return rss_kib(descendants(pid))


class RssSampler:
    """Samples the RSS of `pid` and its descendants every `period` seconds on a thread;
    `peak_kib` is the max.

    The process tree is listed from /proc at the start and again every `rescan` seconds;
    the samples between read only the listed processes' status. Listing the tree reads
    /proc/<pid>/stat of every process on the machine (~1.3 ms of CPU here with 65
    processes): done every 50 ms, it woke on the measured server's core 20 times a second
    and preempted it mid-request, and the p99 of scenario 9's small requests beside the
    slow readers (measured meanwhile) was that scan's length for all three servers
    (1.2-1.3 ms; 0.5-0.7 ms with the tree listed once a second). nginx starts its workers
    within its first second, so a rescan a second finds them.
    """

    def __init__(self, pid: int, period: float = 0.05, rescan: float = 1.0):
        self.pid, self.period, self.rescan, self.peak_kib = pid, period, rescan, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        listed, pids = float("-inf"), [self.pid]
        while not self._stop.is_set():
            if time.monotonic() - listed >= self.rescan:
                listed, pids = time.monotonic(), descendants(self.pid)
            self.peak_kib = max(self.peak_kib, rss_kib(pids))
            self._stop.wait(self.period)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_kib


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; reaps the process."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
