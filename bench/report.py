"""Markdown tables from ``bench/run.py`` results, for docs/performance.md.

python bench/report.py bench/results/NAME.json [...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def table(report: dict) -> str:
    hivegate = report["hivegate"]
    title = hivegate.get("label") or f"hivegate {hivegate.get('commit') or hivegate['tree']}"
    settings = report["settings"]
    lines = [
        f"**{title}** — {report['started']}, {settings['connections']} connections, "
        f"{settings['duration_s']} s per run, {settings.get('rounds', 1)} rounds (medians; req/s range)",
        "",
        "| server | workload | req/s | p50 ms | p99 ms | p99/p50 | server CPU µs/req |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in report["results"]:
        lat = row["latency_ms"]
        spread = ""
        if "rounds" in row:
            rps = [r["rps"] for r in row["rounds"]]
            spread = f" ({min(rps):,.0f}–{max(rps):,.0f})"
        lines.append(
            f"| {row['server']} | {row['label']} | {row['rps']:,.0f}{spread} | {lat['p50']:.2f} | "
            f"{lat['p99']:.2f} | {lat['p99'] / lat['p50']:.1f} | {row['server_cpu_us_per_request']:.0f} |"
        )
    lines.append("")
    summary = report["summary"]
    for key, value in summary.items():
        if key.endswith("_over_sdk"):
            rounds = ", ".join(f"{r:.2f}" for r in summary.get(f"{key}_rounds", []))
            lines.append(f"- `{key}`: **{value:.2f}×** (per round: {rounds})")
    for target, met in summary["targets_met"].items():
        lines.append(f"- target {target}: **{'met' if met else 'missed'}**")
    for workload, servers in summary.get("over_gate_none", {}).items():
        lines += [
            "",
            f"{workload}: ratio to `gate-none` in the same round (median of the per-round ratios; each round's)",
            "",
            "| server | req/s | p50 | p99 |",
            "| --- | ---: | ---: | ---: |",
        ]
        for server, r in servers.items():
            cells = [
                f"**{r[k]:.2f}×** ({', '.join(f'{x:.2f}' for x in r[f'{k}_rounds'])})" for k in ("rps", "p50", "p99")
            ]
            lines.append(f"| {server} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    for path in sys.argv[1:]:
        print(table(json.loads(Path(path).read_text())))


if __name__ == "__main__":
    main()
