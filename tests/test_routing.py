"""The one route table (issue 8 item 5): every path reaches its plane through ``RouteTable``, on a real server.

An agent may be named ``agents``: ``/agents/mcp`` and ``/agents/agents/mcp`` both serve it, and the
alias ``/agents/{agentId}/mcp`` serves every other agent as ``/{agentId}/mcp`` does.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from mcp import Client
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hivegate.routing import RouteTable, agent_in_path
from tests.gateway_process import GatewayProcess, run_gateway

TIMEOUT_SECONDS = 10


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = tmp_path_factory.mktemp("routing") / "agents.toml"
    config.write_text(
        "".join(
            f"""
[[agents]]
id = "{agent_id}"
name = "{agent_id.title()}"
owner = "alice"
auth = "none"

[[agents.prompts]]
name = "from-{agent_id}"
messages = [{{ text = "{agent_id}" }}]
"""
            for agent_id in ("agents", "echo")
        ),
        encoding="utf-8",
    )
    with run_gateway(config) as running:
        yield running


@pytest.mark.parametrize(
    ("path", "agent_id"),
    [
        ("/agents/mcp", "agents"),
        ("/agents/agents/mcp", "agents"),
        ("/echo/mcp", "echo"),
        ("/agents/echo/mcp", "echo"),
    ],
)
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_each_agent_path_serves_its_agent(gateway: GatewayProcess, path: str, agent_id: str, mode: str) -> None:
    async with Client(f"{gateway.url}{path}", mode=mode) as client:  # type: ignore[arg-type]
        prompts = await client.list_prompts()
    assert [prompt.name for prompt in prompts.prompts] == [f"from-{agent_id}"]


def test_an_unknown_agent_gets_the_agent_planes_answer_on_both_paths(gateway: GatewayProcess) -> None:
    """Anonymous callers learn nothing about which agents exist: 401 from the credential gate, on either path."""
    answers = [
        httpx.post(
            f"{gateway.url}{path}",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
            timeout=TIMEOUT_SECONDS,
        )
        for path in ("/nobody/mcp", "/agents/nobody/mcp")
    ]
    assert [answer.status_code for answer in answers] == [401, 401]
    assert answers[0].json() == answers[1].json()
    assert answers[0].json()["error"]["data"]["code"] == "unauthorized"


@pytest.mark.parametrize("path", ["/agents/echo/mcp/x", "//mcp", "/agents//mcp", "/nothing"])
def test_other_paths_are_the_rest_planes_404(gateway: GatewayProcess, path: str) -> None:
    """(An MCP endpoint with a trailing slash, ``/mcp/``, is a JSON-RPC 404: tests/e2e/test_attack_unrouted.py.)
    Before issue 9's attack trial this was Starlette's plain-text "Not Found"."""
    response = httpx.get(f"{gateway.url}{path}", timeout=TIMEOUT_SECONDS)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_fixed_routes_keep_their_methods(gateway: GatewayProcess) -> None:
    assert httpx.get(f"{gateway.url}/healthz", timeout=TIMEOUT_SECONDS).json() == {"status": "ok"}
    refused = httpx.post(f"{gateway.url}/healthz", timeout=TIMEOUT_SECONDS)
    assert refused.status_code == 405
    assert set(refused.headers["allow"].split(", ")) == {"GET", "HEAD"}
    ready = httpx.get(f"{gateway.url}/readyz", timeout=TIMEOUT_SECONDS)
    assert ready.json() == {"status": "ok", "store": "ok", "agents": 2}
    metadata = httpx.get(f"{gateway.url}/.well-known/oauth-protected-resource/agents/mcp", timeout=TIMEOUT_SECONDS)
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == f"{gateway.url}/agents/mcp"


@pytest.mark.parametrize(
    ("path", "agent_id"),
    [
        ("/echo/mcp", "echo"),
        ("/agents/mcp", "agents"),
        ("/agents/echo/mcp", "echo"),
        ("/agents/agents/mcp", "agents"),
        ("/mcp", None),
        ("/agents//mcp", None),
        ("//mcp", None),
        ("/echo/mcp/", None),
        ("/a/b/mcp", None),
        ("/", None),
    ],
)
def test_agent_in_path(path: str, agent_id: str | None) -> None:
    assert agent_in_path(path.split("/")) == agent_id


@pytest.mark.parametrize(
    ("path", "plane"),
    [
        ("/echo/a2a", "a2a"),
        ("/echo/a2a/tasks", "a2a"),
        ("/oauth/a2a", "a2a"),  # an agent named like a prefix has its bindings
        ("/agents/a2a/message:send", "a2a"),
        ("/echo/mcp", "agent"),
        ("//a2a", "rest"),
        ("/echo/a2ax", "rest"),
        ("/a2a", "rest"),
        ("/oauth/token", "oauth"),
    ],
)
async def test_a2a_paths_reach_the_a2a_bindings(path: str, plane: str) -> None:
    reached: list[str] = []

    def app(name: str) -> ASGIApp:
        async def record(scope: Scope, receive: Receive, send: Send) -> None:
            reached.append(name)

        return record

    table = RouteTable(agent=app("agent"), exact={}, prefixes={"oauth": app("oauth")}, rest=app("rest"), a2a=app("a2a"))

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        pass

    await table({"type": "http", "path": path, "method": "POST", "headers": []}, receive, send)
    assert reached == [plane]


@pytest.mark.parametrize(
    ("path", "plane"),
    [
        ("/echo/v1/invoke", "invoke"),
        ("/oauth/v1/invoke", "invoke"),  # an agent named like a prefix has its REST invoke
        ("/agents/v1/invoke", "invoke"),  # the agent named "agents"
        ("/agents/echo/v1/invoke", "rest"),  # no /agents/ alias for the REST invoke (docs/rest.md)
        ("//v1/invoke", "rest"),
        ("/echo/v1/invoke/", "rest"),
    ],
)
async def test_invoke_paths_reach_the_rest_invoke(path: str, plane: str) -> None:
    reached: list[str] = []

    def app(name: str) -> ASGIApp:
        async def record(scope: Scope, receive: Receive, send: Send) -> None:
            reached.append(name)

        return record

    table = RouteTable(
        agent=app("agent"),
        exact={},
        prefixes={"oauth": app("oauth")},
        rest=app("rest"),
        agent_documents={"v1/invoke": app("invoke")},
    )

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        pass

    await table({"type": "http", "path": path, "method": "POST", "headers": []}, receive, send)
    assert reached == [plane]
