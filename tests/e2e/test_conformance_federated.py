"""Issue 11 acceptance: the official MCP conformance suite through hivegate's ``mcp`` backend passes
what it passes against the upstream directly, on both wires.

The upstream is hivegate's conformance fixture (``examples/conformance_server.py``, an official-SDK
``MCPServer``) run as its own process on loopback; the gateway federates it as the agent ``fed``
(``backend = { type = "mcp", url = … }``, ``auth = "none"``: the suite connects without credentials).
The suite (``--suite all``) runs against both, for ``--spec-version 2026-07-28`` and ``2025-11-25``;
every check that succeeds directly must succeed through the gateway, and none may fail there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_conformance import NODE22, SUITE
from tests.e2e.test_mcp_backend import _free_port, _wait_until_listening
from tests.gateway_process import ROOT, run_gateway

pytestmark = pytest.mark.conformance

RESULT_DIR = re.compile(r"^(?:server-)?(?P<scenario>.+?)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:-\d+)?Z?$")
WIRES = ("2026-07-28", "2025-11-25")


def _run_suite(url: str, out: Path) -> dict[tuple[str, str, str], str]:
    """The suite against ``url``; every check's status by (wire, scenario, check id)."""
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "conformance.sh"), url, str(out)],
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    statuses: dict[tuple[str, str, str], str] = {}
    for wire in WIRES:
        for checks in (out / wire).glob("*/checks.json"):
            match = RESULT_DIR.match(checks.parent.name)
            assert match is not None, checks
            data = json.loads(checks.read_text())
            for check in data if isinstance(data, list) else data.get("checks", []):
                statuses[(wire, match["scenario"], str(check.get("id")))] = str(check.get("status"))
    return statuses


def test_the_suite_through_the_gateway_passes_what_it_passes_directly(tmp_path: Path) -> None:
    assert NODE22.exists(), "Node 22 missing: run `bash scripts/install-tools.sh`"
    assert SUITE.exists(), "conformance suite missing: run `bash scripts/install-tools.sh`"
    port = _free_port()
    upstream = f"http://127.0.0.1:{port}/mcp"
    fixture = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "conformance_server.py"), "--port", str(port)],
        cwd=ROOT / "examples",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_listening(upstream, fixture)
        config = tmp_path / "federated.toml"
        config.write_text(
            f"""
[database]
url = "memory://"

[[agents]]
id = "fed"
name = "The conformance fixture, federated"
owner = "conformance"
auth = "none"
backend = {{ type = "mcp", url = "{upstream}" }}
""",
            encoding="utf-8",
        )
        direct = _run_suite(upstream, tmp_path / "direct")
        with run_gateway(config) as gateway:
            through = _run_suite(f"{gateway.url}/fed/mcp", tmp_path / "through")
            log = gateway.output()
    finally:
        fixture.terminate()
        fixture.wait(timeout=10)
    for wire in WIRES:
        passed_directly = {k for k, status in direct.items() if k[0] == wire and status == "SUCCESS"}
        assert len(passed_directly) > (100 if wire == "2026-07-28" else 60), f"{wire}: the direct run did not run"
        lost = sorted(k for k in passed_directly if through.get(k) != "SUCCESS")
        assert not lost, f"{wire}: passed directly, not through the gateway: {[(k, through.get(k)) for k in lost]}"
    failed = sorted(k for k, status in through.items() if status == "FAILURE")
    assert not failed, f"failed through the gateway: {failed}"
    assert "Traceback" not in log
