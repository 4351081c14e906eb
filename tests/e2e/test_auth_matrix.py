"""The auth matrix: every protected route × every kind of credential, with the status expected in each cell.

A real ``hivegate serve`` on a SQLite file. Users, keys and OAuth grants are written to that file
by the stores themselves; access tokens are minted with the server's signing key (the OAuth flow
that issues them is tested in ``tests/e2e/test_oauth_flow.py``). Besides the status, each cell
checks the challenge (``WWW-Authenticate``) and that a 200 shows nothing beyond the grant.

Spec: MCP 2025-11-25 authorization "Error Handling" (401 invalid/expired, 403 insufficient scope),
RFC 6750 §3, RFC 8707 §2 (audience), RFC 9728 §5.1 (``resource_metadata``).
"""

from __future__ import annotations

import json
import secrets
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.auth.api_keys import KeyKind, mint_key
from hivegate.auth.passwords import hash_password
from hivegate.auth.tokens import TokenCodec
from hivegate.storage import open_storage
from hivegate.storage.oauth import GrantRecord
from tests.conftest import POSTGRES_ENV, postgres_url
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

SIGNING_KEY = "matrix-signing-key-0123456789abcdef0123456789"
AGENTS = """
[[agents]]
id = "alpha"
name = "Alpha"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "gamma"
name = "Gamma"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "off"
name = "Off"
owner = "alice"
mcp_enabled = false
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "beta"
name = "Beta"
owner = "bob"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "open"
name = "Open"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "echo_agent:reply" }
"""
MODERN = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
LIST_TOOLS = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "matrix", "version": "0"}},
}


@dataclass
class World:
    gateway: GatewayProcess
    database_url: str
    credentials: dict[str, dict[str, str]]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _seed(database_url: str, base: str) -> dict[str, dict[str, str]]:
    """Users alice, bob and carol (disabled); their keys; alice's grants; the tokens of the matrix."""
    storage = await open_storage(database_url)
    credentials = storage.credentials
    oauth = storage.oauth
    try:
        alice = await credentials.create_user("alice", hash_password("alice pw"))
        bob = await credentials.create_user("bob", hash_password("bob pw"))
        carol = await credentials.create_user("carol", hash_password("carol pw"))

        async def key(user_id: str, agent_id: str | None) -> tuple[str, str]:
            minted = mint_key(KeyKind.USER if agent_id is None else KeyKind.AGENT)
            stored = await credentials.create_api_key(
                user_id=user_id, agent_id=agent_id, name="", key_hash=minted.digest, prefix=minted.prefix
            )
            return minted.plaintext, stored.id

        alice_oag, _ = await key(alice.id, None)
        alice_bak, _ = await key(alice.id, "alpha")
        alice_bak_gamma, _ = await key(alice.id, "gamma")
        revoked_oag, revoked_id = await key(alice.id, None)
        await credentials.revoke_api_key(revoked_id)
        bob_oag, _ = await key(bob.id, None)
        carol_oag, _ = await key(carol.id, None)
        await credentials.set_user_disabled("carol", True)

        async def grant(grant_id: str, agents: tuple[str, ...]) -> GrantRecord:
            record = GrantRecord(
                id=grant_id,
                user_id=alice.id,
                client_id="matrix-client",
                client_name="Matrix",
                agents=agents,
                scopes=tuple(f"agent:{a}" for a in agents),
                resource=None,
                created_at=datetime.now(UTC),
            )
            await oauth.create_grant(record)
            return record

        codec = TokenCodec(base, SIGNING_KEY.encode(), 3600)

        def token(record: GrantRecord, audience: list[str], codec: TokenCodec = codec) -> str:
            minted, _ = codec.mint(
                subject=record.user_id,
                audience=audience,
                client_id=record.client_id,
                scopes=record.scopes,
                grant_id=record.id,
            )
            return minted

        full = await grant("grt_full", ("alpha", "off"))
        narrow = await grant("grt_narrow", ("gamma",))
        revoked = await grant("grt_revoked", ("alpha",))
        await oauth.revoke_grant(revoked.id, datetime.now(UTC))
        audience = [f"{base}/alpha/mcp", f"{base}/agents/alpha/mcp", f"{base}/off/mcp", f"{base}/mcp"]
        expired = TokenCodec(base, SIGNING_KEY.encode(), -120)
        forged = TokenCodec(base, b"another-key-entirely-0123456789abcdef", 3600)
        foreign = TokenCodec("http://issuer.example", SIGNING_KEY.encode(), 3600)
        return {
            "none": {},
            "oauth": _bearer(token(full, audience)),
            "oag": _bearer(alice_oag),
            "bak": {"X-Agent-API-Key": alice_bak},
            "expired": _bearer(token(full, audience, expired)),
            "revoked": _bearer(revoked_oag),
            "revoked_grant": _bearer(token(revoked, audience)),
            "other_user": _bearer(bob_oag),
            "other_agent": {"X-Agent-API-Key": alice_bak_gamma},
            "wrong_audience": _bearer(token(narrow, [f"{base}/gamma/mcp"])),
            "forged": _bearer(token(full, audience, forged)),
            "wrong_issuer": _bearer(token(full, audience, foreign)),
            "disabled_user": _bearer(carol_oag),
            "two_credentials": {"Authorization": f"Bearer {alice_oag}", "X-Agent-API-Key": alice_bak},
            "malformed": {"Authorization": "Basic YWxpY2U6cHc="},
        }
    finally:
        await storage.close()


async def _postgres_database(server: str, name: str, *, drop: bool) -> None:
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            statement = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)' if drop else f'CREATE DATABASE "{name}"'
            await conn.execute(text(statement))
    finally:
        await admin.dispose()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The matrix runs on a SQLite file and, with HIVEGATE_TEST_POSTGRES_URL, on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('matrix-db') / 'hivegate.db'}"
        return
    server = postgres_url()
    if server is None:
        pytest.skip(f"PostgreSQL runs need {POSTGRES_ENV} (e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test)")
    name = f"hivegate_matrix_{secrets.token_hex(4)}"
    anyio.run(partial(_postgres_database, server, name, drop=False))
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        anyio.run(partial(_postgres_database, server, name, drop=True))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("matrix")
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    env = {
        "PYTHONPATH": str(ROOT / "examples"),
        "HIVEGATE_SECURITY__TOKEN_SIGNING_KEY": SIGNING_KEY,
        "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0",
    }
    with run_gateway(config, database_url=database_url, env=env) as gateway:
        credentials = anyio.run(_seed, database_url, gateway.url)
        yield World(gateway, database_url, credentials)


CREDENTIALS = [
    "none",
    "oauth",
    "oag",
    "bak",
    "expired",
    "revoked",
    "revoked_grant",
    "other_user",
    "other_agent",
    "wrong_audience",
    "forged",
    "wrong_issuer",
    "disabled_user",
    "two_credentials",
    "malformed",
]
# What no credential or a bad one gets on every protected route.
REFUSED = {
    "none": 401,
    "expired": 401,
    "revoked": 401,
    "revoked_grant": 401,
    "forged": 401,
    "wrong_issuer": 401,
    "disabled_user": 401,
    "two_credentials": 401,
    "malformed": 401,
}
ROUTES: dict[str, dict[str, int]] = {
    # alice's agent, granted to the token, bound to the bak_ key
    "/alpha/mcp": {**REFUSED, "oauth": 200, "oag": 200, "bak": 200, "other_user": 404, "other_agent": 403,
                   "wrong_audience": 401},
    "/agents/alpha/mcp": {**REFUSED, "oauth": 200, "oag": 200, "bak": 200, "other_user": 404, "other_agent": 403,
                          "wrong_audience": 401},
    # bob's agent: alice's credentials must not reveal it
    "/beta/mcp": {**REFUSED, "oauth": 401, "oag": 404, "bak": 403, "other_user": 200, "other_agent": 403,
                  "wrong_audience": 401},
    # alice's agent with MCP switched off: 403 mcp_disabled to those who may see it, never 401
    "/off/mcp": {**REFUSED, "oauth": 403, "oag": 403, "bak": 403, "other_user": 404, "other_agent": 403,
                 "wrong_audience": 401},
    # no such agent: the same answers as for an agent of someone else
    "/nosuch/mcp": {**REFUSED, "oauth": 401, "oag": 404, "bak": 403, "other_user": 404, "other_agent": 403,
                    "wrong_audience": 401},
    # the user-level endpoint: user credentials only
    "/mcp": {**REFUSED, "oauth": 200, "oag": 200, "bak": 403, "other_user": 200, "other_agent": 403,
             "wrong_audience": 401},
}  # fmt: skip
# The tools each 200 may show: nothing beyond what the credential grants.
VISIBLE_TOOLS: dict[tuple[str, str], set[str]] = {
    ("/alpha/mcp", "oauth"): {"alpha"},
    ("/alpha/mcp", "oag"): {"alpha"},
    ("/alpha/mcp", "bak"): {"alpha"},
    ("/agents/alpha/mcp", "oauth"): {"alpha"},
    ("/agents/alpha/mcp", "oag"): {"alpha"},
    ("/agents/alpha/mcp", "bak"): {"alpha"},
    ("/beta/mcp", "other_user"): {"beta"},
    # /mcp also lists its own discover_agents tool (docs/a2a.md#discovery)
    ("/mcp", "oauth"): {"discover_agents", "alpha"},  # granted alpha and off; off has MCP switched off
    ("/mcp", "oag"): {"discover_agents", "alpha", "gamma", "open"},  # every MCP-enabled agent alice owns
    ("/mcp", "other_user"): {"discover_agents", "beta"},
}
CELLS = [(route, credential) for route in ROUTES for credential in CREDENTIALS]


def _check_challenge(route: str, credential: str, response: httpx.Response, base: str) -> None:
    challenge = response.headers.get("www-authenticate", "")
    if response.status_code == 401:
        assert challenge.startswith('Bearer realm="hivegate"'), challenge
        assert f'resource_metadata="{base}/.well-known/oauth-protected-resource{route}"' in challenge
        if credential == "none":
            assert "error=" not in challenge  # RFC 6750 §3.1: no error code without credentials
        elif credential in ("two_credentials", "malformed"):
            assert 'error="invalid_request"' in challenge
        else:
            assert 'error="invalid_token"' in challenge
    elif response.status_code == 403 and response.json()["error"]["data"]["code"] == "insufficient_scope":
        assert 'error="insufficient_scope"' in challenge
        assert f'resource_metadata="{base}/.well-known/oauth-protected-resource{route}"' in challenge
    else:
        assert challenge == ""


@pytest.mark.parametrize(("route", "credential"), CELLS, ids=[f"{r}-{c}" for r, c in CELLS])
def test_modern_post(world: World, route: str, credential: str) -> None:
    base = world.gateway.url
    headers = {**ACCEPT, **MODERN, **world.credentials[credential]}
    response = httpx.post(base + route, content=json.dumps(LIST_TOOLS), headers=headers, timeout=30)
    expected = ROUTES[route][credential]
    assert response.status_code == expected, response.text
    _check_challenge(route, credential, response, base)
    body: dict[str, Any] = response.json()
    if expected == 200:
        names = {tool["name"] for tool in body["result"]["tools"]}
        assert names == VISIBLE_TOOLS[(route, credential)]
    elif expected == 403 and route == "/off/mcp" and credential in ("oauth", "oag"):
        assert body["error"]["data"]["code"] == "mcp_disabled"
    elif expected == 404:
        assert body["error"]["data"]["code"] == "agent_not_found"
        assert route.split("/")[-2] in body["error"]["message"]


@pytest.mark.parametrize(("route", "credential"), CELLS, ids=[f"{r}-{c}" for r, c in CELLS])
def test_legacy_initialize(world: World, route: str, credential: str) -> None:
    """The handshake era meets the same gate, before any session exists."""
    base = world.gateway.url
    headers = {**ACCEPT, **world.credentials[credential]}
    response = httpx.post(base + route, content=json.dumps(INITIALIZE), headers=headers, timeout=30)
    assert response.status_code == ROUTES[route][credential], response.text
    _check_challenge(route, credential, response, base)
    if response.status_code == 200:
        assert response.headers.get("mcp-session-id")
    else:
        assert "mcp-session-id" not in response.headers


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_auth_none_agent_ignores_credentials(world: World, credential: str) -> None:
    """``auth = "none"`` serves anyone; what a caller sends is not looked at."""
    headers = {**ACCEPT, **MODERN, **world.credentials[credential]}
    response = httpx.post(world.gateway.url + "/open/mcp", content=json.dumps(LIST_TOOLS), headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert [tool["name"] for tool in response.json()["result"]["tools"]] == ["open"]


def test_revocation_takes_effect_on_a_running_server(world: World) -> None:
    """A key revoked and a grant revoked in the database (as the CLI does) are refused on the next request.

    The server runs with ``security.credential_cache_seconds = 0``; with the default (1 s) the
    refusal comes within a second.
    """

    async def scenario() -> None:
        storage = await open_storage(world.database_url)
        credentials = storage.credentials
        oauth = storage.oauth
        try:
            alice = await credentials.get_user_by_username("alice")
            assert alice is not None
            minted = mint_key(KeyKind.USER)
            stored = await credentials.create_api_key(
                user_id=alice.id, agent_id=None, name="short-lived", key_hash=minted.digest, prefix=minted.prefix
            )
            headers = {**ACCEPT, **MODERN, **_bearer(minted.plaintext)}
            async with httpx.AsyncClient(timeout=30) as client:
                url = world.gateway.url + "/alpha/mcp"
                assert (await client.post(url, content=json.dumps(LIST_TOOLS), headers=headers)).status_code == 200
                await credentials.revoke_api_key(stored.id)
                refused = await client.post(url, content=json.dumps(LIST_TOOLS), headers=headers)
                assert refused.status_code == 401
                assert 'error="invalid_token"' in refused.headers["www-authenticate"]
                last_used = await credentials.get_api_key_by_hash(minted.digest)
                assert last_used is not None
                assert last_used.last_used_at is not None  # the one accepted use was recorded

                grant = GrantRecord(
                    id="grt_short_lived",
                    user_id=alice.id,
                    client_id="matrix-client",
                    client_name=None,
                    agents=("alpha",),
                    scopes=("agent:alpha",),
                    resource=None,
                    created_at=datetime.now(UTC),
                )
                await oauth.create_grant(grant)
                token, _ = TokenCodec(world.gateway.url, SIGNING_KEY.encode(), 3600).mint(
                    subject=alice.id, audience=[url], client_id="matrix-client", scopes=grant.scopes, grant_id=grant.id
                )
                token_headers = {**ACCEPT, **MODERN, **_bearer(token)}
                accepted = await client.post(url, content=json.dumps(LIST_TOOLS), headers=token_headers)
                assert accepted.status_code == 200
                await oauth.revoke_grant(grant.id, datetime.now(UTC))
                refused = await client.post(url, content=json.dumps(LIST_TOOLS), headers=token_headers)
                assert refused.status_code == 401
        finally:
            await storage.close()

    anyio.run(scenario)


@pytest.mark.parametrize(
    "path",
    ["/%E2%98%83/mcp", "/%FF/mcp", "/a%0d%0aSet-Cookie:%20x=1/mcp", "/x%22,%20resource_metadata=%22https:evil/mcp"],
)
def test_impossible_agent_ids_are_404_and_never_reach_a_header(world: World, path: str) -> None:
    """An id no agent can have is 404 for everyone, before credentials (nothing leaks, nothing is echoed)."""
    response = httpx.post(world.gateway.url + path, content=json.dumps(LIST_TOOLS), headers={**ACCEPT, **MODERN})
    assert response.status_code == 404
    assert response.json()["error"]["data"]["code"] == "agent_not_found"
    assert "www-authenticate" not in response.headers
    assert "set-cookie" not in response.headers


def test_asterisk_form_request_is_answered_not_crashed(world: World) -> None:
    """``OPTIONS *`` (RFC 9112 §3.2.4) has no path segments; it must not reach the routing code as one."""
    url = httpx.URL(world.gateway.url)
    assert url.port is not None
    with socket.create_connection((url.host, url.port), timeout=10) as conn:
        conn.sendall(b"OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    status_line = reply.split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 4"), reply[:200]


def test_no_redirect_is_built_from_an_unchecked_host(world: World) -> None:
    response = httpx.post(
        world.gateway.url + "/mcp/", content=b"{}", headers={**ACCEPT, "Host": "evil.example"}, timeout=10
    )
    assert response.status_code in (404, 421)
    assert "evil.example" not in response.headers.get("location", "")


# The A2A bindings (docs/a2a.md "Credentials"): the same gate, with the agent's MCP endpoint as the resource.
# An unknown agent is refused as on MCP (without a credential the same 401 as any protected agent, so no
# agent's existence leaks: issue 9's attack trial); mcp_enabled does not apply.
A2A_AGENTS: dict[str, dict[str, int]] = {
    "alpha": ROUTES["/alpha/mcp"],
    "beta": ROUTES["/beta/mcp"],
    "off": {**REFUSED, "oauth": 200, "oag": 200, "bak": 403, "other_user": 404, "other_agent": 403,
            "wrong_audience": 401},
    "nosuch": ROUTES["/nosuch/mcp"],
    "open": dict.fromkeys(CREDENTIALS, 200),
}  # fmt: skip
A2A_CELLS = [
    (agent, credential, binding)
    for agent in A2A_AGENTS
    for credential in CREDENTIALS
    for binding in ("jsonrpc", "rest")
]


@pytest.mark.parametrize(("agent", "credential", "binding"), A2A_CELLS, ids=["-".join(cell) for cell in A2A_CELLS])
def test_a2a_bindings(world: World, agent: str, credential: str, binding: str) -> None:
    base = world.gateway.url
    headers = {"A2A-Version": "1.0", **world.credentials[credential]}
    if binding == "jsonrpc":
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        response = httpx.post(f"{base}/{agent}/a2a", json=body, headers=headers, timeout=30)
    else:
        response = httpx.get(f"{base}/{agent}/a2a/tasks", headers=headers, timeout=30)
    expected = A2A_AGENTS[agent][credential]
    assert response.status_code == expected, response.text
    document: dict[str, Any] = response.json()
    challenge = response.headers.get("www-authenticate", "")
    if expected == 200:
        assert "tasks" in (document["result"] if binding == "jsonrpc" else document)
        assert challenge == ""
        return
    error = document["error"]
    info = error["data"][0] if binding == "jsonrpc" else error["details"][0]
    code = info["metadata"]["code"]
    if expected == 404:
        assert code == "agent_not_found"
    if expected == 401 or code == "insufficient_scope":
        assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/{agent}/mcp"' in challenge
    else:
        assert challenge == ""


@pytest.mark.parametrize("agent", ["alpha", "off"])
async def test_the_a2a_sdk_client_works_with_an_oauth_token(world: World, agent: str) -> None:
    """Issue 9 acceptance, the OAuth half (the ``oag_`` half is tests/e2e/test_a2a_bindings.py): the a2a-sdk
    client, from the card URL alone and with an OAuth access token of a grant naming both agents, sends
    (blocking), streams, gets, lists and cancels on two agents of one gateway (``off`` has MCP switched
    off: its token audience is its MCP endpoint all the same). The echo finishes before a cancel can
    reach it, so the cancel is answered TaskNotCancelable: the credential passed and the task was found."""
    headers = world.credentials["oauth"]
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        for streaming in (False, True):
            config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=["JSONRPC"])
            client = await create_client(f"{world.gateway.url}/{agent}", client_config=config)
            try:
                message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text="via oauth")])
                with anyio.fail_after(30):
                    events = [event async for event in client.send_message(SendMessageRequest(message=message))]
                    task = [event.task for event in events if event.HasField("task")][-1]
                    if streaming:
                        task = await client.get_task(GetTaskRequest(id=task.id))
                    assert task.status.state == TaskState.TASK_STATE_COMPLETED
                    assert get_artifact_text(task.artifacts[0]) == "via oauth"
                    assert (await client.get_task(GetTaskRequest(id=task.id))).id == task.id
                    assert task.id in [t.id for t in (await client.list_tasks(ListTasksRequest())).tasks]
                    with pytest.raises(TaskNotCancelableError):
                        await client.cancel_task(CancelTaskRequest(id=task.id))
            finally:
                await client.close()
