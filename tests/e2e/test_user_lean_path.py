"""The user-level endpoint ``/mcp`` on the lean paths answers exactly as on the SDK path (issue 8 item 3).

Two real servers on copies of one SQLite database (the agents and keys of
:mod:`tests.e2e.test_user_endpoint`), one with ``mcp.fast_path`` on and one with it off, get the
same raw requests with the same ``oag_`` keys; status and JSON-RPC messages must be equal. On the
handshake era the lean server answers with ``application/json`` where the SDK streams SSE (proof
the lean path served it), and a session is served only for the user who opened it: bob sending
alice's session id gets the SDK's 404 from both servers.

Spec: MCP 2026-07-28 basic/transports; MCP 2025-11-25 basic/transports#session-management.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.e2e.registry_cli import first_line, run_cli
from tests.e2e.test_user_endpoint import AGENTS
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TIMEOUT_SECONDS = 30
CLI_TIMEOUT_SECONDS = 90

CALLS: dict[str, tuple[str, dict[str, Any], str | None]] = {
    "tools/call": ("tools/call", {"name": "alice-echo", "arguments": {"message": "hi there"}}, "alice-echo"),
    "tools/call missing message": ("tools/call", {"name": "alice-echo", "arguments": {}}, "alice-echo"),
    "tools/call bad arguments": ("tools/call", {"name": "alice-echo", "arguments": 3}, "alice-echo"),
    "tools/call unknown tool": ("tools/call", {"name": "nope", "arguments": {}}, "nope"),
    "tools/call someone else's agent": ("tools/call", {"name": "bob-echo", "arguments": {"message": "x"}}, "bob-echo"),
    "tools/call disabled agent": ("tools/call", {"name": "alice-quiet", "arguments": {"message": "x"}}, "alice-quiet"),
    "tools/list": ("tools/list", {}, None),
}
SDK_SERVED = frozenset({"tools/call disabled agent", "tools/call unknown tool"})
"""Cases the lean server leaves to the SDK too: a call of an agent whose runtime is not running."""


@dataclass(frozen=True)
class Pair:
    lean: GatewayProcess
    sdk: GatewayProcess
    alice: str
    bob: str


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response, whether one JSON object or an SSE stream."""
    if response.headers["content-type"].startswith("application/json"):
        return [response.json()]
    return [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
    ]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    folder = tmp_path_factory.mktemp("user-lean")
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    database = folder / "lean.db"
    database_url = f"sqlite+aiosqlite:///{database}"
    examples = (str(ROOT / "examples"),)
    for user in ("alice", "bob"):
        run_cli(
            database_url, "users", "create", user, "--password-stdin", stdin=f"{user}'s password\n", pythonpath=examples
        )
    run_cli(database_url, "agents", "apply", str(config), pythonpath=examples)
    alice, bob = (
        first_line(run_cli(database_url, "keys", "create", "--user", user, pythonpath=examples))
        for user in ("alice", "bob")
    )
    shutil.copyfile(database, folder / "sdk.db")
    env = {"PYTHONPATH": str(ROOT / "examples"), "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0"}
    with (
        run_gateway(config, database_url=database_url, env={**env, "HIVEGATE_MCP__FAST_PATH": "true"}) as lean,
        run_gateway(
            config,
            database_url=f"sqlite+aiosqlite:///{folder / 'sdk.db'}",
            env={**env, "HIVEGATE_MCP__FAST_PATH": "false"},
        ) as sdk,
    ):
        world = Pair(lean, sdk, alice, bob)
        for gateway in (lean, sdk):  # start every agent's runtime: a call of an agent not running takes the SDK
            for agent, key in (("alice-echo", world.alice), ("bob-echo", world.bob)):
                _modern(gateway, key, "tools/call", {"name": agent, "arguments": {"message": "warm"}}, agent)
        yield world


def _modern(gateway: GatewayProcess, key: str, method: str, params: dict[str, Any], name: str | None) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {key}", "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": META}}
    return httpx.post(f"{gateway.url}/mcp", json=body, headers=headers, timeout=TIMEOUT_SECONDS)


def _open_session(gateway: GatewayProcess, key: str) -> dict[str, str]:
    headers = {**HEADERS, "Authorization": f"Bearer {key}"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "parity", "version": "0"}},
    }
    opened = httpx.post(f"{gateway.url}/mcp", json=initialize, headers=headers, timeout=TIMEOUT_SECONDS)
    assert opened.status_code == 200, opened.text
    session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    ready = httpx.post(f"{gateway.url}/mcp", json=note, headers=session, timeout=TIMEOUT_SECONDS)
    assert ready.status_code == 202, ready.text
    return session


@pytest.mark.parametrize("case", sorted(CALLS))
def test_modern_lean_path_matches_sdk_path(pair: Pair, case: str) -> None:
    method, params, name = CALLS[case]
    lean, sdk = (_modern(gateway, pair.alice, method, params, name) for gateway in (pair.lean, pair.sdk))
    assert (lean.status_code, _same_conversation(lean.json())) == (sdk.status_code, _same_conversation(sdk.json()))


@pytest.mark.parametrize("case", sorted(CALLS))
def test_legacy_lean_path_matches_sdk_path(pair: Pair, case: str) -> None:
    method, params, _ = CALLS[case]
    answers: list[list[dict[str, Any]]] = []
    content_types: list[str] = []
    for gateway in (pair.lean, pair.sdk):
        session = _open_session(gateway, pair.alice)
        body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
        response = httpx.post(f"{gateway.url}/mcp", json=body, headers=session, timeout=TIMEOUT_SECONDS)
        assert response.status_code == 200, response.text
        answers.append([_same_conversation(message) for message in _messages(response)])
        content_types.append(response.headers["content-type"])
    assert answers[0] == answers[1]
    assert content_types[0].startswith("text/event-stream" if case in SDK_SERVED else "application/json")
    assert content_types[1].startswith("text/event-stream")


def _same_conversation(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with a ``tools/call`` result's conversation id (issue 10: a new one per stateless call,
    one per session, so each gateway's differs) checked as a UUID and replaced by a placeholder."""
    result = message.get("result")
    if not isinstance(result, dict) or "context_id" not in result.get("structuredContent", {}):
        return message
    meta: dict[str, Any] = result["_meta"]
    structured: dict[str, Any] = result["structuredContent"]
    assert meta["context_id"] == structured["context_id"]
    uuid.UUID(meta["context_id"])
    same = {
        **result,
        "_meta": {**meta, "context_id": "<id>"},
        "structuredContent": {**structured, "context_id": "<id>"},
    }
    return {**message, "result": same}


def test_another_users_session_is_404_on_both_paths(pair: Pair) -> None:
    """Bob with alice's live session id: the lean server leaves it to the SDK, which answers 404 as unknown."""
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": CALLS["tools/call"][1]}
    refusals: list[tuple[int, Any]] = []
    for gateway in (pair.lean, pair.sdk):
        session = _open_session(gateway, pair.alice)
        stolen = {**session, "Authorization": f"Bearer {pair.bob}"}
        refused = httpx.post(f"{gateway.url}/mcp", json=call, headers=stolen, timeout=TIMEOUT_SECONDS)
        refusals.append((refused.status_code, refused.json()))
        served = httpx.post(f"{gateway.url}/mcp", json=call, headers=session, timeout=TIMEOUT_SECONDS)
        assert served.status_code == 200, served.text  # alice's session is untouched
    assert refusals[0] == refusals[1]
    assert refusals[0][0] == 404
    assert refusals[0][1]["error"]["message"] == "Session not found"
