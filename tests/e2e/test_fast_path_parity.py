"""The lean 2026-07-28 path answers exactly as the SDK path does.

Two real servers with the demo agents, one with ``mcp.fast_path`` on and one with it off,
get the same raw requests (valid ones, and each rung of the validation ladder failing);
status and JSON body must be equal.

Spec: MCP 2026-07-28 basic/transports (SEP-2575 envelope, SEP-2243 headers, SEP-2549 cache hints).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.gateway_process import ROOT, GatewayProcess, run_gateway

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _request(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    header_overrides: dict[str, str] | None = None,
) -> tuple[dict[str, str], dict[str, Any]]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"_meta": META, **(params or {})}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    headers.update(header_overrides or {})
    return headers, body


CASES: dict[str, tuple[str, tuple[dict[str, str], dict[str, Any]]]] = {
    "discover": ("echo", _request("server/discover")),
    "tools/list": ("echo", _request("tools/list")),
    "tools/call": ("echo", _request("tools/call", {"name": "echo", "arguments": {"message": "hi"}}, name="echo")),
    "tools/call base64 name": (
        "echo",
        _request(
            "tools/call",
            {"name": "echo", "arguments": {"message": "hi"}},
            name="=?base64?" + base64.b64encode(b"echo").decode() + "?=",
        ),
    ),
    "tools/call skill": (
        "echo",
        _request("tools/call", {"name": "shout", "arguments": {"message": "x"}}, name="shout"),
    ),
    "tools/call missing message": ("echo", _request("tools/call", {"name": "echo", "arguments": {}}, name="echo")),
    "tools/call unknown tool": ("echo", _request("tools/call", {"name": "nope", "arguments": {}}, name="nope")),
    "tools/call bad arguments type": ("echo", _request("tools/call", {"name": "echo", "arguments": 5}, name="echo")),
    "resources/list": ("echo", _request("resources/list")),
    "resources/templates/list": ("echo", _request("resources/templates/list")),
    "resources/read": ("echo", _request("resources/read", {"uri": "echo://readme"}, name="echo://readme")),
    "resources/read missing": ("echo", _request("resources/read", {"uri": "echo://nope"}, name="echo://nope")),
    "prompts/list": ("echo", _request("prompts/list")),
    "prompts/get": (
        "echo",
        _request("prompts/get", {"name": "echo_twice", "arguments": {"phrase": "a"}}, name="echo_twice"),
    ),
    "prompts/get missing argument": ("echo", _request("prompts/get", {"name": "echo_twice"}, name="echo_twice")),
    "prompts/get non-string argument": (
        "echo",
        _request("prompts/get", {"name": "echo_twice", "arguments": {"phrase": 3}}, name="echo_twice"),
    ),
    "completion": (
        "echo",
        _request(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "echo_twice"}, "argument": {"name": "phrase", "value": "h"}},
        ),
    ),
    "bad cursor": ("echo", _request("tools/list", {"cursor": "forged"})),
    "header method mismatch": ("echo", _request("tools/list", header_overrides={"Mcp-Method": "prompts/list"})),
    "header name mismatch": (
        "echo",
        _request("tools/call", {"name": "echo", "arguments": {"message": "x"}}, name="other"),
    ),
    "missing name header": ("echo", _request("tools/call", {"name": "echo", "arguments": {"message": "x"}})),
    "unsupported version": (
        "echo",
        (
            {**_request("tools/list")[0], "MCP-Protocol-Version": "2099-01-01"},
            {
                **_request("tools/list")[1],
                "params": {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
            },
        ),
    ),
    "missing meta": ("echo", ({**_request("tools/list")[0]}, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})),
    "missing capabilities": (
        "echo",
        (
            _request("tools/list")[0],
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/list",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
            },
        ),
    ),
    "string id": ("echo", (_request("tools/list")[0], {**_request("tools/list")[1], "id": "abc"})),
}


@pytest.fixture(scope="module")
def gateways() -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    config = ROOT / "examples" / "hivegate.toml"
    with (
        run_gateway(config, env={"HIVEGATE_MCP__FAST_PATH": "true"}) as fast,
        run_gateway(config, env={"HIVEGATE_MCP__FAST_PATH": "false"}) as sdk,
    ):
        yield fast, sdk


@pytest.mark.parametrize("case", sorted(CASES))
def test_lean_path_matches_sdk_path(gateways: tuple[GatewayProcess, GatewayProcess], case: str) -> None:
    agent, (headers, body) = CASES[case]
    answers = []
    for gateway in gateways:
        response = httpx.post(f"{gateway.url}/{agent}/mcp", headers=headers, json=body, timeout=10)
        assert response.headers["content-type"].startswith("application/json"), response.text
        answers.append((response.status_code, response.json()))
    assert answers[0] == answers[1]
