"""Anonymous callers on many addresses cannot take the capacity that credentialed users need (issue 7 item 2).

Found by the attack trial of issue 7: the per-principal caps key an anonymous caller of an
``auth = "none"`` agent by its client address, so an attacker with a handful of addresses (an
IPv4 range, or a few /64s of an IPv6 /48) adds up to every process total. With the defaults, 79
addresses hold all 10,000 sessions (64 all 4,096 GET streams, 64 all 1,024 listen streams) without
a credential, and every user's ``initialize`` then gets 503 until the sessions idle out — which
the attacker postpones by pinging. Anonymous callers together may hold only
``mcp.anonymous_budget_share`` of each total, so users always find room.

Here eight anonymous addresses (127.0.0.2-127.0.0.9) each open sessions until refused; then alice
(an ``oag_`` key) still initializes and calls her agent over the official client.

Spec: MCP 2025-11-25 basic/transports#session-management; RFC 9110 §15.6.4 (503).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import httpx
import pytest

from tests.e2e.test_resource_exhaustion import (
    BUDGET_ENV,
    HEADERS,
    INITIALIZE,
    LEGACY,
    PYTHONPATH,
    WAIT_SECONDS,
    World,
    call_echo,
    serve_world,
)

SESSIONS_PER_ADDRESS = 2
SESSIONS_TOTAL = 10
SHARE = 0.5
ANONYMOUS_TOTAL = int(SESSIONS_TOTAL * SHARE)
ADDRESSES = [f"127.0.0.{n}" for n in range(2, 10)]
"""Together they could hold 16 sessions, more than the process total of 10."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    env = {
        "PYTHONPATH": PYTHONPATH,
        **BUDGET_ENV,
        "HIVEGATE_MCP__MAX_SESSIONS_PER_PRINCIPAL": str(SESSIONS_PER_ADDRESS),
        "HIVEGATE_MCP__MAX_SESSIONS_TOTAL": str(SESSIONS_TOTAL),
        "HIVEGATE_MCP__ANONYMOUS_BUDGET_SHARE": str(SHARE),
    }
    with serve_world(tmp_path_factory.mktemp("anonymous-share"), env) as served:
        yield served


def _http(world: World, address: str, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=world.gateway.url, headers=headers, transport=transport, timeout=WAIT_SECONDS)


@asynccontextmanager
async def _held_session(http: httpx.AsyncClient, path: str) -> AsyncGenerator[httpx.Response]:
    """``initialize``; the response, and when it opened a session, ``DELETE`` at exit."""
    opened = await http.post(path, content=json.dumps(INITIALIZE), headers=HEADERS)
    try:
        yield opened
    finally:
        if "mcp-session-id" in opened.headers:
            headers = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
            await http.delete(path, headers=headers)


async def test_anonymous_addresses_together_leave_room_for_users(world: World) -> None:
    """Issue 7 item 2: anonymous callers on 8 addresses fill their share; alice still opens and calls."""
    statuses: list[int] = []
    async with AsyncExitStack() as held:
        for address in ADDRESSES:
            client = await held.enter_async_context(_http(world, address))
            for _ in range(SESSIONS_PER_ADDRESS):
                opened = await held.enter_async_context(_held_session(client, "/open-echo/mcp"))
                statuses.append(opened.status_code)
                if opened.status_code == 503:
                    body = opened.json()
                    assert body["error"]["data"]["code"] == "capacity_exhausted", body
                    assert body["error"]["data"]["limit"] == ANONYMOUS_TOTAL, body
        assert statuses.count(200) == ANONYMOUS_TOTAL, statuses
        assert set(statuses) == {200, 503}, statuses

        alice = await held.enter_async_context(_http(world, "127.0.0.1", world.alice))
        for _ in range(SESSIONS_PER_ADDRESS):
            opened = await held.enter_async_context(_held_session(alice, "/alice-echo/mcp"))
            assert opened.status_code == 200, opened.text
        with anyio.fail_after(WAIT_SECONDS):
            url = f"{world.gateway.url}/bob-echo/mcp"
            assert await call_echo(url, world.bob, "legacy", "127.0.0.1") == "still served"
