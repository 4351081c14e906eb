"""``POST /{agentId}/v1/invoke`` on a real server (issue 9 item 2): blocking JSON, SSE frames, refusals.

One gateway, a SQLite registry with two users (alice, bob), each with an ``oag_`` key, and alice's
``bak_`` key for ``echo``. Agents: alice's ``echo`` and ``echo2`` (the demo echo agent, streaming a
reply word by word), ``waiter`` (waits until cancelled, recording start and cancellation in marker
files), ``slow`` (the same with a 1 s deadline), ``failing`` (raises an AgentError), ``notes`` (an
MCP server only), ``off`` (``a2a_enabled = false``), ``nomcp`` (``mcp_enabled = false``), ``open``
(``auth = "none"``); bob's ``bobecho``. OAuth tokens are minted with the server's signing key.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import httpx2
import orjson
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from hivegate.auth.tokens import TokenCodec
from hivegate.storage import open_storage
from hivegate.storage.oauth import GrantRecord
from tests.e2e.invoke_world import ALICE_AGENTS, OPEN_AND_BOB_AGENTS, InvokeWorld, serve_invoke_world
from tests.e2e.marker_agent import wait_for_marker

CONFIG = (
    """
[server]
max_body_bytes = 65536
"""
    + ALICE_AGENTS
    + """
[[agents]]
id = "nomcp"
name = "No MCP"
owner = "alice"
mcp_enabled = false
backend = { type = "python", callable = "echo_agent:reply" }
"""
    + OPEN_AND_BOB_AGENTS
)

MESSAGE = "hello over rest invoke"
SIGNING_KEY = "rest-invoke-signing-key-0123456789abcdef0123"
TIMEOUT = 30


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InvokeWorld]:
    with serve_invoke_world(
        tmp_path_factory.mktemp("rest"), CONFIG, {"HIVEGATE_SECURITY__TOKEN_SIGNING_KEY": SIGNING_KEY}
    ) as world:
        yield world


def _auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _post(served: InvokeWorld, agent_id: str, body: Any, key: str | None, **headers: str) -> httpx.Response:
    return httpx.post(served.invoke_url(agent_id), json=body, headers={**_auth(key), **headers}, timeout=TIMEOUT)


def _frames(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON payloads of the ``data:`` lines of an SSE body (comments and blank lines skipped)."""
    return [orjson.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == code, body
    return body["error"]


def test_blocking_call_returns_the_reply_and_a_context_id(served: InvokeWorld) -> None:
    response = _post(served, "echo", {"message": MESSAGE}, served.alice)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["message"] == "ok"
    assert (body["text"], body["is_error"]) == (MESSAGE, False)
    assert isinstance(body["context_id"], str)
    assert body["context_id"]
    again = _post(served, "echo", {"message": "next", "context_id": body["context_id"]}, served.alice).json()
    assert (again["text"], again["context_id"]) == ("next", body["context_id"])


def test_sse_sends_a_delta_per_word_then_one_done(served: InvokeWorld) -> None:
    response = _post(served, "echo", {"message": MESSAGE}, served.alice, accept="text/event-stream")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "event:" not in response.text  # unnamed frames: the client switches on "type"
    frames = _frames(response)
    deltas = frames[:-1]
    assert [frame["type"] for frame in deltas] == ["delta"] * len(MESSAGE.split(" "))
    assert "".join(frame["text"] for frame in deltas) == MESSAGE
    done = frames[-1]
    assert (done["type"], done["text"], done["is_error"]) == ("done", MESSAGE, False)
    assert done["context_id"]


def test_accept_chooses_json_or_sse(served: InvokeWorld) -> None:
    for accept in ("application/json, text/event-stream", "*/*", "application/json"):
        response = _post(served, "echo", {"message": "both"}, served.alice, accept=accept)
        assert response.headers["content-type"].startswith("application/json"), accept
    for accept in ("text/event-stream", "text/event-stream, */*;q=0.1", "application/json;q=0, text/event-stream"):
        response = _post(served, "echo", {"message": "sse"}, served.alice, accept=accept)
        assert response.headers["content-type"].startswith("text/event-stream"), accept


def test_credentials_of_every_kind(served: InvokeWorld) -> None:
    assert _post(served, "echo", {"message": "a"}, served.alice_echo_bak).json()["text"] == "a"
    via_header = _post(served, "echo", {"message": "b"}, None, **{"X-Agent-API-Key": served.alice_echo_bak})
    assert via_header.json()["text"] == "b"
    assert _post(served, "open", {"message": "c"}, None).json()["text"] == "c"


async def test_oauth_access_token_for_the_agents_resource(served: InvokeWorld) -> None:
    """An OAuth access token with the agent's MCP endpoint in its audience and scope ``agent:echo``."""
    storage = await open_storage(served.database_url)
    try:
        alice = await storage.credentials.get_user_by_username("alice")
        assert alice is not None
        grant = GrantRecord(
            id=f"grt_{uuid.uuid4().hex[:12]}",
            user_id=alice.id,
            client_id="rest-client",
            client_name=None,
            agents=("echo",),
            scopes=("agent:echo",),
            resource=None,
            created_at=datetime.now(UTC),
        )
        await storage.oauth.create_grant(grant)
    finally:
        await storage.close()
    codec = TokenCodec(served.gateway.url, SIGNING_KEY.encode(), 3600)
    base = served.gateway.url
    token, _ = codec.mint(
        subject=alice.id, audience=[f"{base}/echo/mcp"], client_id="rest-client", scopes=grant.scopes, grant_id=grant.id
    )
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        accepted = await http.post(served.invoke_url("echo"), json={"message": "by token"}, headers=_auth(token))
        assert (accepted.status_code, accepted.json()["text"]) == (200, "by token")
        other = await http.post(served.invoke_url("echo2"), json={"message": "x"}, headers=_auth(token))
    error = _error(other, 401, "unauthorized")  # the token was not issued for echo2's resource
    assert error["type"] == "authentication_error"
    assert 'error="invalid_token"' in other.headers["www-authenticate"]


def test_mcp_disabled_does_not_switch_rest_invoke_off(served: InvokeWorld) -> None:
    assert _post(served, "nomcp", {"message": "still here"}, served.alice).json()["text"] == "still here"


def test_refusals(served: InvokeWorld) -> None:
    missing = _post(served, "echo", {"message": "x"}, None)
    _error(missing, 401, "unauthorized")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "resource_metadata=" in missing.headers["www-authenticate"]
    _error(_post(served, "echo", {"message": "x"}, "oag_not-a-key"), 401, "unauthorized")
    scope = _error(_post(served, "echo2", {"message": "x"}, served.alice_echo_bak), 403, "insufficient_scope")
    assert scope["type"] == "permission_error"
    _error(_post(served, "echo", {"message": "x"}, served.bob), 404, "agent_not_found")
    _error(_post(served, "nobody", {"message": "x"}, served.alice), 404, "agent_not_found")
    _error(_post(served, "off", {"message": "x"}, served.alice), 404, "agent_not_found")
    _error(_post(served, "notes", {"message": "x"}, served.alice), 501, "agent_not_invocable")
    wrong_method = httpx.get(served.invoke_url("echo"), headers=_auth(served.alice), timeout=TIMEOUT)
    _error(wrong_method, 405, "method_not_allowed")
    assert wrong_method.headers["allow"] == "POST"
    text = httpx.post(
        served.invoke_url("echo"), content=b"hi", headers={**_auth(served.alice), "content-type": "text/plain"}
    )
    _error(text, 415, "unsupported_media_type")
    _error(_post(served, "echo", {"message": "x"}, served.alice, accept="image/png"), 406, "not_acceptable")
    big = _post(served, "echo", {"message": "x" * 70_000}, served.alice)
    assert _error(big, 413, "payload_too_large")["type"] == "invalid_request_error"
    broken = httpx.post(
        served.invoke_url("echo"), content=b"{", headers={**_auth(served.alice), "content-type": "application/json"}
    )
    _error(broken, 400, "parse_error")
    _error(_post(served, "echo", [1], served.alice), 400, "invalid_request")
    assert _error(_post(served, "echo", {}, served.alice), 400, "invalid_params")["param"] == "message"
    assert _error(_post(served, "echo", {"message": 1}, served.alice), 400, "invalid_params")["param"] == "message"
    bad_timeout = _post(served, "echo", {"message": "x", "timeout_ms": "soon"}, served.alice)
    assert _error(bad_timeout, 400, "invalid_params")["param"] == "timeout_ms"
    file_ref = _post(served, "echo", {"message": "x", "attachments": [{"file_id": "f1"}]}, served.alice)
    assert _error(file_ref, 400, "invalid_params")["param"] == "attachments[0].file_id"  # no such upload


def test_agent_failure_is_a_200_with_is_error(served: InvokeWorld) -> None:
    body = _post(served, "failing", {"message": "this"}, served.alice).json()
    assert (body["message"], body["is_error"], body["text"]) == ("ok", True, "cannot answer this")
    assert (body["code"], body["error"]) == ("agent_error", "cannot answer this")
    frames = _frames(_post(served, "failing", {"message": "that"}, served.alice, accept="text/event-stream"))
    assert [frame["type"] for frame in frames] == ["done"]  # only done: the agent's own failure
    assert (frames[0]["is_error"], frames[0]["code"], frames[0]["text"]) == (True, "agent_error", "cannot answer that")


async def test_deadline_is_504_or_error_then_done(served: InvokeWorld) -> None:
    text = f"slow-{uuid.uuid4().hex[:8]}"
    _error(_post(served, "slow", {"message": text}, served.alice), 504, "service_timeout")
    await wait_for_marker(served.folder / "marks" / f"cancelled-{text}")  # the deadline cancelled the backend call
    text = f"short-{uuid.uuid4().hex[:8]}"
    streamed = _post(served, "waiter", {"message": text, "timeout_ms": 300}, served.alice, accept="text/event-stream")
    frames = _frames(streamed)
    assert [frame["type"] for frame in frames] == ["error", "done"]
    assert (frames[0]["code"], frames[0]["status_code"]) == ("service_timeout", 504)
    assert (frames[1]["code"], frames[1]["is_error"]) == ("service_timeout", True)
    await wait_for_marker(served.folder / "marks" / f"cancelled-{text}")  # timeout_ms shortened the agent's deadline


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
async def test_a_client_that_disconnects_cancels_the_call(served: InvokeWorld, accept: str) -> None:
    text = f"leave-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(headers=_auth(served.alice), timeout=TIMEOUT) as http, anyio.create_task_group() as tg:

        async def call() -> None:
            await http.post(served.invoke_url("waiter"), json={"message": text}, headers={"accept": accept})

        tg.start_soon(call)
        await wait_for_marker(served.folder / "marks" / f"started-{text}")
        tg.cancel_scope.cancel()  # the request is abandoned: httpx closes its connection
    await wait_for_marker(served.folder / "marks" / f"cancelled-{text}")
    assert "Traceback" not in served.gateway.output()


async def test_same_reply_over_mcp_a2a_and_rest(served: InvokeWorld) -> None:
    """Issue 9 acceptance: the same message gets the same reply text over MCP tools/call, A2A
    SendMessage and /v1/invoke."""
    text = "the same words three ways"
    async with (
        httpx2.AsyncClient(headers=_auth(served.alice), timeout=TIMEOUT) as http2,
        McpClient(streamable_http_client(f"{served.gateway.url}/echo/mcp", http_client=http2)) as mcp,  # type: ignore[arg-type]
    ):
        with anyio.fail_after(TIMEOUT):
            result = await mcp.call_tool("echo", {"message": text})
    mcp_text: str = result.content[0].text  # type: ignore[union-attr]
    async with httpx.AsyncClient(headers=_auth(served.alice), timeout=TIMEOUT) as http:
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(f"{served.gateway.url}/echo", client_config=config)
        try:
            message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
            request = SendMessageRequest(message=message, configuration=SendMessageConfiguration())
            with anyio.fail_after(TIMEOUT):
                events = [event async for event in client.send_message(request)]
        finally:
            await client.close()
        task = [event.task for event in events if event.HasField("task")][-1]
        a2a_text = get_artifact_text(task.artifacts[0])
        rest = (await http.post(f"{served.gateway.url}/echo/v1/invoke", json={"message": text})).json()
    assert rest["text"] == a2a_text == mcp_text == text


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
_FIELDS = ("message", "context_id", "timeout_ms", "idempotency_key", "metadata", "attachments")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(_FIELDS), _JSON, max_size=6) | _JSON)
def test_hostile_bodies_never_500(served: InvokeWorld, body: Any) -> None:
    """Any JSON body gets a 200 (a reply) or a 400 in the envelope, never a server error."""
    if isinstance(body, dict) and "timeout_ms" in body:
        body = {**body, "timeout_ms": 100}  # keep a call short if the rest of the body is valid
    response = httpx.post(
        served.invoke_url("open"),
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        timeout=TIMEOUT,
    )
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        # parse_error: an infinite float (json.dumps writes Infinity); invalid_request: beyond 64 bits
        assert response.json()["error"]["code"] in {"invalid_params", "invalid_request", "parse_error"}
    else:
        assert response.json()["is_error"] is False
