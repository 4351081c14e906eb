#!/usr/bin/env python3
"""Summarise MCP conformance results and fail on unexpected failures.

Usage: ``scripts/conformance_report.py OUTDIR [--expected-failures FILE] [--json FILE]``

Reads every ``checks.json`` below OUTDIR (as written by ``conformance server -o DIR``; the runner
``scripts/conformance.sh`` puts each wire in ``OUTDIR/<spec-version>/``), prints a per-scenario
summary with totals per wire, and writes the same numbers to ``OUTDIR/summary.json``. Exits 1 when
a check FAILED in a scenario that is not allow-listed in ``scripts/conformance-expected-failures.txt``
(one scenario name per line, each with a ``# reason`` comment), or when OUTDIR holds no results.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_EXPECTED = Path(__file__).with_name("conformance-expected-failures.txt")
RESULT_DIR = re.compile(r"^(?:server-)?(?P<scenario>.+?)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:-\d+)?Z?$")
STATUSES = ("SUCCESS", "FAILURE", "WARNING", "SKIPPED")


@dataclass
class ScenarioResult:
    wire: str
    scenario: str
    counts: Counter[str] = field(default_factory=Counter[str])
    failures: list[str] = field(default_factory=list[str])

    @property
    def failed(self) -> int:
        return self.counts["FAILURE"]


def load_expected(path: Path) -> dict[str, str]:
    """Allow-listed scenario names mapped to their reasons."""
    expected: dict[str, str] = {}
    if not path.exists():
        return expected
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        name, _, reason = raw.partition("#")
        name = name.strip()
        if not name:
            continue
        if not reason.strip():
            print(f"warning: {path.name}:{number}: {name!r} has no '# reason' comment", file=sys.stderr)
        expected[name] = reason.strip()
    return expected


def wire_of(checks_file: Path, outdir: Path) -> str:
    """The spec-version folder a result sits in (``OUTDIR/<wire>/<result>/checks.json``), else ``-``."""
    relative = checks_file.relative_to(outdir).parts
    return relative[0] if len(relative) >= 3 else "-"


def scenario_of(checks_file: Path) -> str:
    folder = checks_file.parent.name
    match = RESULT_DIR.match(folder)
    return match.group("scenario") if match else folder


def collect(outdir: Path) -> dict[tuple[str, str], ScenarioResult]:
    results: dict[tuple[str, str], ScenarioResult] = {}
    for checks_file in sorted(outdir.rglob("checks.json")):
        key = (wire_of(checks_file, outdir), scenario_of(checks_file))
        result = results.setdefault(key, ScenarioResult(*key))
        try:
            checks: list[dict[str, Any]] = json.loads(checks_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            result.counts["FAILURE"] += 1
            result.failures.append(f"unreadable {checks_file}: {exc}")
            continue
        for check in checks:
            status = str(check.get("status", "?"))
            result.counts[status] += 1
            if status == "FAILURE":
                result.failures.append(f"{check.get('id')}: {check.get('errorMessage') or ''}".strip())
    return results


def mark(result: ScenarioResult, expected: dict[str, str]) -> str:
    if result.failed == 0:
        return "ok  " if result.counts["WARNING"] == 0 else "warn"
    return "xfail" if result.scenario in expected else "FAIL"


def report(results: dict[tuple[str, str], ScenarioResult], expected: dict[str, str]) -> tuple[dict[str, Any], int]:
    """Print the summary; return the JSON summary and the number of unexpected failures."""
    summary: dict[str, Any] = {"wires": {}}
    unexpected = 0
    for wire in sorted({wire for wire, _ in results}, reverse=True):
        rows = sorted((r for (w, _), r in results.items() if w == wire), key=lambda r: r.scenario)
        totals: Counter[str] = Counter()
        print(f"\n== wire {wire}: {len(rows)} scenarios")
        print(f"   {'':5} {'scenario':<52} {'pass':>4} {'fail':>4} {'warn':>4} {'skip':>4}")
        scenarios: dict[str, Any] = {}
        for row in rows:
            totals.update({status: row.counts[status] for status in STATUSES})
            status_mark = mark(row, expected)
            print(
                f"   {status_mark:<5} {row.scenario:<52} {row.counts['SUCCESS']:>4} {row.failed:>4} "
                f"{row.counts['WARNING']:>4} {row.counts['SKIPPED']:>4}"
            )
            for failure in row.failures:
                print(f"         - {failure[:300]}")
            if status_mark == "FAIL":
                unexpected += row.failed
            scenarios[row.scenario] = {status.lower(): row.counts[status] for status in STATUSES}
            scenarios[row.scenario]["expected_failure"] = row.scenario in expected
        print(
            f"   total {wire}: {totals['SUCCESS']} passed, {totals['FAILURE']} failed, "
            f"{totals['WARNING']} warnings, {totals['SKIPPED']} skipped"
        )
        summary["wires"][wire] = {
            "passed": totals["SUCCESS"],
            "failed": totals["FAILURE"],
            "warnings": totals["WARNING"],
            "skipped": totals["SKIPPED"],
            "scenarios": scenarios,
        }
    return summary, unexpected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Summarise MCP conformance checks.json files.")
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--expected-failures", type=Path, default=DEFAULT_EXPECTED)
    parser.add_argument("--json", type=Path, help="summary file (default OUTDIR/summary.json)")
    args = parser.parse_args(argv)

    expected = load_expected(args.expected_failures)
    results = collect(args.outdir)
    if not results:
        print(f"conformance_report: no checks.json under {args.outdir}", file=sys.stderr)
        return 1
    summary, unexpected = report(results, expected)

    print("\n== summary")
    for wire, numbers in summary["wires"].items():
        print(f"   {wire}: {numbers['passed']} passed, {numbers['failed']} failed, {numbers['warnings']} warnings")
    failing = {r.scenario for r in results.values() if r.failed}
    stale = sorted({r.scenario for r in results.values()} & expected.keys() - failing)
    if stale:
        print(f"   note: allow-listed scenarios that passed (consider removing): {', '.join(stale)}")
    summary["unexpected_failures"] = unexpected
    (args.json or args.outdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if unexpected:
        print(f"   RESULT: {unexpected} unexpected failed check(s)")
        return 1
    print("   RESULT: no unexpected failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
