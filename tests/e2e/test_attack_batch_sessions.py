"""A 2025-03-26 batch on a session that has ended gets 404, so the client starts a new session.

Found by the attack trial of issue 7 (item 13, batches): after ``DELETE``, idle expiry or a
gateway restart, a batch POSTed with the old ``Mcp-Session-Id`` got 400 ``batch_not_supported``
(as if the revision forbade batches), while the same request sent alone got 404. A client learns
that its session is gone only from the 404 ("When a client receives HTTP 404 in response to a
request containing an Mcp-Session-Id, it MUST start a new session"), so a batching client was
stuck on 400 after every restart. And on ``/mcp`` a batch with another user's live session id was
answered 200 with one "Session not found" error per element, instead of the 404 a single request
gets.

Spec: MCP 2025-03-26 basic/transports#session-management ("MUST respond to requests containing
that session ID with HTTP 404 Not Found").
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from hivegate.auth.passwords import hash_password
from hivegate.storage import open_storage
from tests.e2e.registry_seed import add_key
from tests.e2e.wire_gateway import WireWorld, wire_gateway

VERSION = "2025-03-26"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
BATCH = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireWorld]:
    with wire_gateway(tmp_path_factory.mktemp("batch-sessions")) as world:
        yield world


async def _bob_key(world: WireWorld) -> str:
    """A second user's ``oag_`` key, written to the running server's database."""
    args = [str(arg) for arg in world.gateway.process.args]  # type: ignore[union-attr]  # a list: Popen([...])
    database_url = args[args.index("--database-url") + 1]
    storage = await open_storage(database_url)
    credentials = storage.credentials
    try:
        bob = await credentials.create_user("bob", hash_password("bob pw"))
        return await add_key(credentials, bob.id)
    finally:
        await storage.close()


async def _session(http: httpx.AsyncClient, path: str, credential: dict[str, str]) -> dict[str, str]:
    opened = await http.post(path, content=json.dumps(INITIALIZE), headers={**HEADERS, **credential})
    assert opened.status_code == 200, opened.text
    headers = {**HEADERS, **credential, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    headers["MCP-Protocol-Version"] = VERSION
    ready = await http.post(
        path, content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers=headers
    )
    assert ready.status_code == 202, ready.text
    return headers


def _session_not_found(response: httpx.Response) -> None:
    assert response.status_code == 404, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("path", "credential"),
    [("/echo/mcp", None), ("/notes/mcp", None), ("/keyed/mcp", "bak"), ("/keyed-notes/mcp", "oag"), ("/mcp", "oag")],
)
async def test_a_batch_on_an_ended_session_is_404(world: WireWorld, path: str, credential: str | None) -> None:
    """Issue 7 item 13: after DELETE, a batch gets the 404 a single request gets (lean, SDK, /mcp)."""
    header = {} if credential is None else {"Authorization": f"Bearer {world.keys[credential]}"}
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as http:
        session = await _session(http, path, header)
        live = await http.post(path, content=json.dumps(BATCH), headers=session)
        assert live.status_code == 200, live.text
        assert [answer["id"] for answer in live.json()] == [1, 2]
        deleted = await http.delete(path, headers=session)
        assert deleted.status_code == 200, deleted.text
        single = await http.post(path, content=json.dumps(BATCH[0]), headers=session)
        _session_not_found(single)
        _session_not_found(await http.post(path, content=json.dumps(BATCH), headers=session))
        never = {**session, "Mcp-Session-Id": "0" * 32}
        _session_not_found(await http.post(path, content=json.dumps(BATCH), headers=never))


async def test_a_batch_with_another_users_session_is_404(world: WireWorld) -> None:
    """Issue 7 item 13: on /mcp, bob's batch on alice's live 2025-03-26 session is 404 as a whole."""
    bob = {"Authorization": f"Bearer {await _bob_key(world)}"}
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as http:
        alice = await _session(http, "/mcp", {"Authorization": f"Bearer {world.keys['oag']}"})
        stolen = {**alice, **bob}
        _session_not_found(await http.post("/mcp", content=json.dumps(BATCH[0]), headers=stolen))
        _session_not_found(await http.post("/mcp", content=json.dumps(BATCH), headers=stolen))
        still = await http.post("/mcp", content=json.dumps(BATCH), headers=alice)
        assert still.status_code == 200, still.text
