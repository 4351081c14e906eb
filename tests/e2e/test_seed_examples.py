"""Issue 7 item 14: the original platform's documented calls work as written.

Every ``curl`` example of the two seed documents (``/work/shared/seeds/000_…`` and ``002_…``,
copied as ``tests/e2e/seeds/``) is replayed verbatim against a real hivegate server — only the host
replaced, the placeholder keys substituted by real ones, and the brand's resource scheme
(``beeos://``) by hivegate's. The examples send no ``initialize``, no session, no ``Accept`` and no
``MCP-Protocol-Version``: hivegate answers them as one-shot requests at the newest handshake
revision with one JSON object (docs/protocol-support.md, "Requests without a session"). Each answer
must be a success in the shape the seed shows (what its ``jq`` filter reads, or the documented
response).

The 002 examples post to ``https://mcp.beeos.ai//mcp``: the documentation's ``/{agentId}/mcp``
template with the id lost ("All requests are POST to ``/{agentId}/mcp``", same page §1 and §3), so
the agent id goes where the template had it, as for the 000 examples' ``${AGENT_ID}``.

Also the root protected-resource metadata document the seed lists (RFC 9728 §3).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.wire_gateway import WireWorld, wire_gateway

SEEDS = Path(__file__).parent / "seeds"
SEED_FILES = ("000_22dcde6f9fae3a3a.txt", "002_32dc29bf6903dca4.txt")
SEED_HOST = "https://mcp.beeos.ai"
TIMEOUT_SECONDS = 15.0


@dataclass
class CurlExample:
    """One documented ``curl`` call: method, URL, headers, body and the ``jq`` filter it pipes into."""

    source: str
    method: str
    url: str
    headers: dict[str, str]
    body: str
    jq: str | None


def _commands(text: str) -> Iterator[str]:
    """Each ``curl`` command of ``text`` with its continuation lines joined."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith("curl "):
            i += 1
            continue
        parts = [lines[i]]
        while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            parts[-1] = parts[-1].rstrip()[:-1]
            i += 1
            parts.append(lines[i])
        i += 1
        yield " ".join(parts)


def _parse(source: str, command: str) -> CurlExample:
    pipeline = command.split(" | ", 1)
    jq = None
    if len(pipeline) == 2:
        filters = shlex.split(pipeline[1])
        assert filters[0] == "jq", command
        jq = filters[1] if len(filters) > 1 else "."
    words = shlex.split(pipeline[0])
    assert words[0] == "curl", command
    method, url, headers, body = "GET", "", {}, ""
    it = iter(words[1:])
    for word in it:
        if word == "-s":
            continue
        if word == "-X":
            method = next(it)
        elif word == "-H":
            name, _, value = next(it).partition(":")
            headers[name.strip()] = value.strip()
        elif word == "-d":
            body = next(it)
        else:
            assert not url, command
            url = word
    return CurlExample(source, method, url, headers, body, jq)


def seed_examples() -> list[CurlExample]:
    examples = [
        _parse(name, command) for name in SEED_FILES for command in _commands((SEEDS / name).read_text("utf-8"))
    ]
    assert len(examples) == 5, examples  # 000: resources/list, resources/read, prompts/list; 002: tools/list ×2
    return examples


def _localise(example: CurlExample, base: str, agent: str, keys: dict[str, str]) -> tuple[str, dict[str, str], str]:
    """The example with the host, the elided or placeholder agent id, the keys and the URI scheme replaced."""
    url = example.url.replace("${AGENT_ID}", agent)
    assert url.startswith(SEED_HOST + "/"), url
    path = url[len(SEED_HOST) :]
    if path == "//mcp":
        path = f"/{agent}/mcp"
    headers: dict[str, str] = {}
    for name, value in example.headers.items():
        if value.startswith("bak_"):
            value = keys["bak" if agent == "keyed" else "bak_notes"]
        elif value.startswith("Bearer oag_"):
            value = f"Bearer {keys['oag']}"
        headers[name] = value
    return base + path, headers, example.body.replace("beeos://", "hivegate://")


def _check_shape(example: CurlExample, request: dict[str, Any], response: httpx.Response) -> None:
    """The answer is the documented success: JSON-RPC 2.0, the request's id, and what ``jq`` reads."""
    assert response.status_code == 200, (example, response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    assert "mcp-session-id" not in response.headers  # one-shot: no session was opened
    message = response.json()
    assert message["jsonrpc"] == "2.0", message
    assert message["id"] == request["id"], message
    assert "error" not in message, message
    result: dict[str, Any] = message["result"]
    method = request["method"]
    if method == "resources/list":
        assert example.jq == ".result.resources"
        assert isinstance(result["resources"], list), result
        assert result["resources"], result
        for resource in result["resources"]:
            assert {"uri", "name"} <= resource.keys(), resource
    elif method == "prompts/list":
        assert example.jq == ".result.prompts"
        assert isinstance(result["prompts"], list), result  # "an empty array is normal"
    elif method == "resources/read":
        (content,) = result["contents"]
        assert content["uri"] == request["params"]["uri"], content
        assert content["mimeType"] == "application/json", content
        json.loads(content["text"])
    elif method == "tools/list":
        assert result["tools"], result
        for tool in result["tools"]:
            assert {"name", "description", "inputSchema"} <= tool.keys(), tool
    else:
        pytest.fail(f"unexpected method in a seed example: {method}")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireWorld]:
    with wire_gateway(tmp_path_factory.mktemp("seed-examples")) as running:
        yield running


@pytest.mark.parametrize("agent", ["keyed", "keyed-notes"])
def test_every_seed_curl_example_succeeds_as_documented(world: WireWorld, agent: str) -> None:
    """Issue 7 item 14: each documented call, sessionless and without ``Accept``, gets the documented
    answer — on an agent served by the lean path (``keyed``) and one with an SDK server (``keyed-notes``)."""
    with httpx.Client(timeout=TIMEOUT_SECONDS) as client:
        for example in seed_examples():
            if agent == "keyed-notes" and json.loads(example.body)["method"] == "tools/list":
                continue  # the notes server lists no tools of its own; tools/list is covered on ``keyed``
            url, headers, body = _localise(example, world.url, agent, world.keys)
            assert "accept" not in {name.lower() for name in headers}  # as documented: no Accept
            response = client.request(example.method, url, headers=headers, content=body)
            _check_shape(example, json.loads(body), response)


def test_root_protected_resource_metadata(world: WireWorld) -> None:
    """Issue 7 item 14: ``GET /.well-known/oauth-protected-resource`` (RFC 9728 §3) names the gateway and its AS."""
    response = httpx.get(f"{world.url}/.well-known/oauth-protected-resource", timeout=TIMEOUT_SECONDS)
    assert response.status_code == 200, response.text
    metadata = response.json()
    assert metadata["resource"] == world.url
    assert metadata["authorization_servers"] == [world.url]
    assert metadata["bearer_methods_supported"] == ["header"]


def test_a_session_request_without_a_session_is_still_refused(world: WireWorld) -> None:
    """The one-shot rule stops where a client shows it speaks a session: with ``MCP-Protocol-Version``
    and no session, the SDK's answer stands (400, -32600); an ``initialize`` still opens a session."""
    headers = {"Content-Type": "application/json", "X-Agent-API-Key": world.keys["bak"]}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    with httpx.Client(timeout=TIMEOUT_SECONDS) as client:
        response = client.post(
            f"{world.url}/keyed/mcp", headers={**headers, "MCP-Protocol-Version": "2025-11-25"}, content=body
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == -32600, response.text
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        response = client.post(f"{world.url}/keyed/mcp", headers=headers, content=json.dumps(initialize))
        assert response.status_code == 200, response.text
        assert "mcp-session-id" in response.headers, response.text


def test_the_user_level_endpoint_serves_one_shot_requests(world: WireWorld) -> None:
    """Issue 7 item 14: the 002 ``oag_`` example's intent ("list this user's MCP-enabled agents") on the
    user-level ``/mcp``: a sessionless ``tools/list`` lists alice's agents as tools."""
    example = next(e for e in seed_examples() if "oag_" in json.dumps(e.headers))
    headers = {"Authorization": f"Bearer {world.keys['oag']}", "Content-Type": "application/json"}
    response = httpx.post(f"{world.url}/mcp", headers=headers, content=example.body, timeout=TIMEOUT_SECONDS)
    _check_shape(example, json.loads(example.body), response)
    names = {tool["name"] for tool in response.json()["result"]["tools"]}
    # the agents with a message tool (SDK-server agents have none), and issue 9's discover_agents
    assert names == {"discover_agents", "echo", "keyed"}, names
