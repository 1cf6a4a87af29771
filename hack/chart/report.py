"""Pass/fail/skip bookkeeping for hack/chart-check.sh.

Every check calls `Report.check(name, ok, detail)`; the summary line at the end is the
one CI reads: `chart-check: N passed, M failed, K skipped`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field


@dataclass
class Report:
    """Collects the outcome of each named check and prints it as it happens."""

    passed: int = 0
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    quiet: bool = False

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        """Record one check; `detail` says what was wrong when `ok` is false."""
        if ok:
            self.passed += 1
            if not self.quiet:
                print(f"ok    {name}")
        else:
            self.failed.append(name)
            if not self.quiet:
                print(f"FAIL  {name}" + (f": {detail}" if detail else ""))
        return ok

    def skip(self, name: str, why: str) -> None:
        """Record a check that could not be made, and why (never counted as passed)."""
        self.skipped.append(name)
        if not self.quiet:
            print(f"skip  {name}: {why}")

    def summary(self) -> int:
        """Print the closing line and return the process exit code."""
        line = f"chart-check: {self.passed} passed, {len(self.failed)} failed"
        if self.skipped:
            line += f", {len(self.skipped)} skipped"
        print(line)
        sys.stdout.flush()
        return 1 if self.failed else 0
