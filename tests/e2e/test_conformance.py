"""The official MCP conformance suite against hivegate's conformance agent, on both wires.

Runs ``@modelcontextprotocol/conformance@0.2.0-alpha.12`` (``--suite all``) for
``--spec-version 2026-07-28`` and ``--spec-version 2025-11-25`` against
``/conformance/mcp`` of a real server started with ``examples/conformance.toml``.
Needs Node 22 and the suite under ``.tools/``: ``make test`` installs them
(``scripts/install-tools.sh``); without them this test fails and says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway_process import ROOT, run_gateway

NODE22 = ROOT / ".tools" / "node22" / "node_modules" / "node" / "bin" / "node"
SUITE = ROOT / ".tools" / "conformance" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

pytestmark = pytest.mark.conformance


def test_conformance_suite_passes_on_both_wires(tmp_path: Path) -> None:
    assert NODE22.exists(), "Node 22 missing: run `bash scripts/install-tools.sh`"
    assert SUITE.exists(), "conformance suite missing: run `bash scripts/install-tools.sh`"
    with run_gateway(ROOT / "examples" / "conformance.toml") as gateway:
        result = subprocess.run(
            ["bash", str(ROOT / "scripts" / "conformance.sh"), f"{gateway.url}/conformance/mcp", str(tmp_path)],
            env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
    summary = tmp_path / "summary.json"
    report = json.loads(summary.read_text()) if summary.exists() else None
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\nsummary: {report}"
    assert report is not None
    wires = report["wires"]
    for wire, at_least in (("2026-07-28", 152), ("2025-11-25", 84)):
        assert wires[wire]["failed"] == 0, wires[wire]
        assert wires[wire]["passed"] >= at_least, wires[wire]
