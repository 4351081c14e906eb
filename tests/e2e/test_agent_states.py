"""Agents that exist but cannot serve: MCP switched off (403 ``mcp_disabled``), a backend that will not load (503).

Also: ``hivegate serve`` refuses an invalid agents file before it starts listening.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway_process import ROOT, GatewayProcess, run_gateway

CONFIG = """
[[agents]]
id = "quiet"
name = "Quiet"
owner = "alice"
auth = "none"
mcp_enabled = false
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "quiet-broken"
name = "Quiet and broken"
owner = "alice"
auth = "none"
mcp_enabled = false
backend = { type = "python", callable = "no_such_module_anywhere:reply" }

[[agents]]
id = "broken"
name = "Broken"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "no_such_module_anywhere:reply" }
"""
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = tmp_path_factory.mktemp("states") / "agents.toml"
    config.write_text(CONFIG, encoding="utf-8")
    with run_gateway(config, env={"PYTHONPATH": str(ROOT / "examples")}) as running:
        yield running


def test_mcp_disabled_agent_is_403(gateway: GatewayProcess) -> None:
    response = httpx.post(f"{gateway.url}/quiet/mcp", json=INITIALIZE, headers=HEADERS, timeout=10)
    assert response.status_code == 403
    assert response.json()["error"]["data"]["code"] == "mcp_disabled"


def test_mcp_disabled_is_decided_before_the_backend_starts(gateway: GatewayProcess) -> None:
    response = httpx.post(f"{gateway.url}/quiet-broken/mcp", json=INITIALIZE, headers=HEADERS, timeout=10)
    assert response.status_code == 403
    assert response.json()["error"]["data"]["code"] == "mcp_disabled"


def test_unloadable_backend_is_503_without_details(gateway: GatewayProcess) -> None:
    response = httpx.post(f"{gateway.url}/broken/mcp", json=INITIALIZE, headers=HEADERS, timeout=10)
    assert response.status_code == 503
    body = response.json()
    assert body["error"]["data"]["code"] == "agent_service_unavailable"  # issue 8 item 4: the original's name
    assert "no_such_module" not in response.text
    again = httpx.post(f"{gateway.url}/broken/mcp", json=INITIALIZE, headers=HEADERS, timeout=10)
    assert again.status_code == 503
    assert httpx.get(f"{gateway.url}/healthz", timeout=10).status_code == 200


def test_serve_refuses_an_invalid_agents_file(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[[agents]]\nid = "has spaces"\nname = "x"\nowner = "alice"\n', encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "hivegate", "serve", "--config", str(config), "--port", "0", "--dev"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "agents[0]" in result.stderr
    assert "Traceback" not in result.stderr
