"""``hivegate serve --reload``: an edit to an agent's module is served without restarting by hand (issue 7 item 16)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

import hivegate
from tests.gateway_process import GatewayProcess, run_gateway

RELOAD_TIMEOUT_SECONDS = 60.0
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "edited",
}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _reply(gateway: GatewayProcess) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "edited", "arguments": {"message": "hi"}, "_meta": META},
    }
    response = httpx.post(f"{gateway.url}/edited/mcp", json=body, headers=HEADERS, timeout=10)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result.get("isError") is not True, result
    text: str = result["content"][0]["text"]
    return text


def test_reload_serves_an_edited_agent_module(tmp_path: Path) -> None:
    """Issue 7 item 16: with --reload, saving the agent's module restarts the worker, which serves the new code."""
    module = tmp_path / "edited_agent.py"
    module.write_text("def reply(invocation):\n    return 'first version'\n", encoding="utf-8")
    config = tmp_path / "hivegate.toml"
    config.write_text(
        '[[agents]]\nid = "edited"\nname = "Edited"\nowner = "alice"\nauth = "none"\n'
        'backend = { type = "python", callable = "edited_agent:reply" }\n',
        encoding="utf-8",
    )
    src = str(Path(hivegate.__file__).resolve().parent.parent)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, (src, os.environ.get("PYTHONPATH"))))}
    with run_gateway(config, extra_args=["--reload"], env=env) as gateway:
        gateway.wait_for("Application startup complete", RELOAD_TIMEOUT_SECONDS)
        assert _reply(gateway) == "first version"
        module.write_text("def reply(invocation):\n    return 'second version'\n", encoding="utf-8")
        gateway.wait_for("Reloading", RELOAD_TIMEOUT_SECONDS)
        gateway.wait_for("Application startup complete", RELOAD_TIMEOUT_SECONDS)
        assert _reply(gateway) == "second version"
