"""Count budgets (:mod:`hivegate.mcp.budgets`) and the session manager that holds a slot per session.

Issue 7 item 2: sessions, listen streams and GET streams were capped only per endpoint (10,000
sessions per agent, 1,024 listen streams shared by every user of ``/mcp``), so one client
locked everyone out. Each now has a budget per principal and one per process; a slot is
returned on every exit path.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from mcp.server.lowlevel.server import Server

from hivegate.auth.principal import ANONYMOUS, CredentialKind, Principal
from hivegate.errors import BudgetExceededError, CapacityExhaustedError
from hivegate.mcp.budgets import Budget, McpBudgets, opening_session, principal_key
from hivegate.mcp.legacy_sessions import BudgetedSessionManager
from hivegate.settings import McpSettings

WAIT_SECONDS = 10


def _budget(per_principal: int = 2, total: int = 3) -> Budget:
    return Budget("sessions", per_principal=per_principal, total=total, retry_after_seconds=7)


def test_a_principal_over_its_cap_is_429_with_retry_after_and_others_are_served() -> None:
    """Issue 7 item 2: one principal at its cap leaves room for another."""
    budget = _budget()
    budget.acquire("a")
    budget.acquire("a")
    with pytest.raises(BudgetExceededError) as refused:
        budget.acquire("a")
    assert refused.value.code == "budget_exceeded"
    assert refused.value.http_status == 429
    assert refused.value.headers == {"Retry-After": "7"}
    assert refused.value.data == {"budget": "sessions", "limit": 2}
    budget.acquire("b")
    assert (budget.held("a"), budget.held("b"), budget.total_held) == (2, 1, 3)


def test_the_process_cap_is_503_for_everyone() -> None:
    """Issue 7 item 2: the global cap answers 503 (capacity_exhausted), also to a principal holding nothing."""
    budget = _budget(per_principal=2, total=3)
    budget.acquire("a")
    budget.acquire("a")
    budget.acquire("b")
    with pytest.raises(CapacityExhaustedError) as refused:
        budget.acquire("c")
    assert (refused.value.code, refused.value.http_status) == ("capacity_exhausted", 503)
    assert refused.value.headers == {"Retry-After": "7"}
    assert refused.value.data == {"budget": "sessions", "limit": 3}


def test_release_returns_the_slot_once() -> None:
    budget = _budget()
    slot = budget.acquire("a")
    slot.release()
    slot.release()
    assert slot.released
    assert (budget.held("a"), budget.total_held) == (0, 0)
    budget.acquire("a")
    budget.acquire("a")  # the released slot was returned exactly once: two more fit, not three
    with pytest.raises(BudgetExceededError):
        budget.acquire("a")


def test_hold_releases_when_the_block_raises() -> None:
    budget = _budget()
    with pytest.raises(RuntimeError), budget.hold("a"):
        raise RuntimeError("boom")
    assert budget.total_held == 0


async def test_hold_releases_when_the_task_is_cancelled() -> None:
    """A client disconnect cancels the request's task: the stream's slot comes back."""
    budget = _budget()
    started = anyio.Event()

    async def stream() -> None:
        with budget.hold("a"):
            started.set()
            await anyio.sleep_forever()

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream)
            await started.wait()
            assert budget.held("a") == 1
            tg.cancel_scope.cancel()
    assert budget.total_held == 0


async def test_concurrent_openings_never_exceed_the_caps() -> None:
    """Issue 7 item 2: 400 concurrent openings by 4 principals (one greedy); at no point more than the caps are held."""
    budget = Budget("listen_streams", per_principal=5, total=12, retry_after_seconds=1)
    peak_total = 0
    peak: dict[str, int] = {}
    admitted = refused = 0

    async def open_stream(key: str) -> None:
        nonlocal peak_total, admitted, refused
        await anyio.lowlevel.checkpoint()
        try:
            with budget.hold(key):
                admitted += 1
                peak_total = max(peak_total, budget.total_held)
                peak[key] = max(peak.get(key, 0), budget.held(key))
                for _ in range(3):
                    await anyio.lowlevel.checkpoint()
        except (BudgetExceededError, CapacityExhaustedError):
            refused += 1

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg:
            for i in range(400):  # half of them by one greedy principal
                tg.start_soon(open_stream, "greedy" if i % 2 else f"p{i % 3}")
    assert peak_total == 12
    assert peak["greedy"] == 5
    assert max(peak.values()) == 5
    assert admitted + refused == 400
    assert refused > 0
    assert budget.total_held == 0


def test_principal_keys() -> None:
    """Users across their credentials, bak_ keys by key, anonymous callers by address (IPv6 by /64)."""
    oauth = Principal(kind=CredentialKind.OAUTH, user_id="u1", credential_id="jti-1")
    user_key = Principal(kind=CredentialKind.USER_KEY, user_id="u1", credential_id="k1")
    agent_key = Principal(kind=CredentialKind.AGENT_KEY, user_id="u1", credential_id="k2")
    assert principal_key(oauth, None) == principal_key(user_key, None) == "user:u1"
    assert principal_key(agent_key, None) == "key:k2"
    assert principal_key(ANONYMOUS, ("127.0.0.2", 5000)) == "addr:127.0.0.2"
    assert principal_key(ANONYMOUS, ("2001:db8:1:2:aaaa::1", 1)) == principal_key(ANONYMOUS, ("2001:db8:1:2::9", 2))
    assert principal_key(ANONYMOUS, ("2001:db8:1:2::1", 1)) != principal_key(ANONYMOUS, ("2001:db8:1:3::1", 1))
    assert principal_key(ANONYMOUS, ("::ffff:10.0.0.1", 1)) == "addr:10.0.0.1"
    assert principal_key(ANONYMOUS, None) == "addr:"


def test_settings_refuse_a_per_principal_cap_above_the_total() -> None:
    with pytest.raises(ValueError, match="max_sessions_per_principal"):
        McpSettings(max_sessions_per_principal=5, max_sessions_total=4)


def _scope(method: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
    }


def test_admit_draws_on_the_budget_the_request_opens() -> None:
    """initialize without a session → sessions; GET with one → get_streams; modern listen → listen_streams."""
    budgets = McpBudgets(
        McpSettings(max_sessions_per_principal=1, max_get_streams_per_principal=1, max_listen_streams_per_principal=1)
    )
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    listen = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen"}
    session = {"mcp-session-id": "s"}
    with budgets.admit(_scope("POST", {}), {}, initialize, ANONYMOUS, modern=False):
        assert budgets.sessions.held("addr:127.0.0.1") == 1
    assert budgets.sessions.total_held == 0  # offered, never taken by a session: returned
    with budgets.admit(_scope("GET", session), session, None, ANONYMOUS, modern=False):
        assert budgets.get_streams.total_held == 1
        with pytest.raises(BudgetExceededError):
            budgets.admit(_scope("GET", session), session, None, ANONYMOUS, modern=False).__enter__()
    with budgets.admit(_scope("POST", {}), {}, listen, ANONYMOUS, modern=True):
        assert budgets.listen_streams.total_held == 1
    for method, headers, message, modern in [
        ("POST", session, {"method": "tools/call"}, False),
        ("POST", {}, {"method": "tools/call"}, True),
        ("POST", {}, listen, False),
        ("DELETE", session, None, False),
        ("GET", {}, None, True),
    ]:
        with budgets.admit(_scope(method, headers), headers, message, ANONYMOUS, modern=modern):
            held = (budgets.sessions.total_held, budgets.get_streams.total_held, budgets.listen_streams.total_held)
            assert held == (0, 0, 0), (method, headers, message)


# -- the session manager: a slot per session, returned however the session ends ------------------------------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def _manager(
    idle_timeout_seconds: float = 60,
) -> AsyncGenerator[httpx.AsyncClient]:
    manager = BudgetedSessionManager(app=Server[Any]("t"), session_idle_timeout=idle_timeout_seconds)
    async with (
        manager.run(),
        httpx.AsyncClient(transport=httpx.ASGITransport(manager.handle_request), base_url="http://t") as http,
    ):
        yield http


async def _open(http: httpx.AsyncClient, budget: Budget, body: Any = INITIALIZE) -> httpx.Response:
    with opening_session(budget.acquire("a")):
        return await http.post("/mcp", content=json.dumps(body), headers=HEADERS)


async def test_a_session_holds_its_slot_until_delete() -> None:
    budget = _budget(per_principal=2, total=2)
    async with _manager() as http:
        opened = await _open(http, budget)
        assert opened.status_code == 200, opened.text
        assert budget.held("a") == 1
        session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        deleted = await http.delete("/mcp", headers=session)
        assert deleted.status_code == 200
        assert budget.held("a") == 0


async def test_a_refused_opening_returns_its_slot() -> None:
    budget = _budget()
    async with _manager() as http:
        refused = await _open(http, budget, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 400
        assert budget.total_held == 0


class _WatchedBudget(Budget):
    """A budget that says when a slot comes back (so the test waits for the event, not for time)."""

    def __init__(self) -> None:
        super().__init__("sessions", per_principal=2, total=2, retry_after_seconds=1)
        self.returned = anyio.Event()

    def give_back(self, key: str, amount: int = 1) -> None:
        super().give_back(key, amount)
        self.returned.set()


async def test_an_expired_session_returns_its_slot() -> None:
    """Issue 7 item 2: idle sessions are evicted and their slots returned."""
    budget = _WatchedBudget()
    async with _manager(idle_timeout_seconds=0.2) as http:
        opened = await _open(http, budget)
        assert opened.status_code == 200
        assert budget.held("a") == 1
        with anyio.fail_after(WAIT_SECONDS):
            await budget.returned.wait()
        assert budget.total_held == 0
        session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        assert (await http.post("/mcp", content=json.dumps(INITIALIZE), headers=session)).status_code == 404


async def test_shutdown_returns_every_slot() -> None:
    budget = _budget(per_principal=3, total=3)
    async with _manager() as http:
        for _ in range(3):
            assert (await _open(http, budget)).status_code == 200
        assert budget.total_held == 3
    assert budget.total_held == 0


def test_defaults_are_sane() -> None:
    """Idle sessions end within minutes; one principal's caps are far below the process's."""
    mcp = McpSettings()
    assert mcp.session_idle_timeout_seconds <= 600
    assert mcp.max_sessions_per_principal * 10 <= mcp.max_sessions_total
    assert mcp.max_listen_streams_per_principal * 10 <= mcp.max_listen_streams_total
    assert mcp.max_get_streams_per_principal * 10 <= mcp.max_get_streams_total


def test_anonymous_callers_together_hold_only_their_share() -> None:
    """Issue 7 item 2 (attack trial): anonymous addresses add up to at most ``anonymous_total``; users still fit.

    Each anonymous caller is budgeted by address, and an attacker has many addresses: without a
    share of their own, a few of them would hold the whole process total.
    """
    budget = Budget("sessions", per_principal=2, total=6, retry_after_seconds=7, anonymous_total=3)
    budget.acquire("addr:127.0.0.2")
    budget.acquire("addr:127.0.0.2")
    third = budget.acquire("addr:127.0.0.3")
    with pytest.raises(CapacityExhaustedError) as refused:
        budget.acquire("addr:127.0.0.4")  # an address holding nothing: the anonymous share is taken
    assert refused.value.data == {"budget": "sessions", "limit": 3}
    assert refused.value.headers == {"Retry-After": "7"}
    budget.acquire("user:alice")  # a user, and a bak_ key, still find room
    budget.acquire("key:key_1")
    third.release()
    budget.acquire("addr:127.0.0.4")  # a returned anonymous slot is anonymous room again
    assert budget.total_held == 5


def test_the_anonymous_share_comes_from_the_settings() -> None:
    """Issue 7 item 2: ``mcp.anonymous_budget_share`` of each total, rounded down, at least 1."""
    budgets = McpBudgets(
        McpSettings(
            max_sessions_per_principal=1,
            max_sessions_total=9,
            max_get_streams_per_principal=1,
            max_get_streams_total=1,
            anonymous_budget_share=0.5,
        )
    )
    assert budgets.sessions.anonymous_total == 4
    assert budgets.get_streams.anonymous_total == 1
    assert McpBudgets(McpSettings()).sessions.anonymous_total == 5000
    with pytest.raises(ValueError, match="anonymous_total"):
        Budget("sessions", per_principal=1, total=2, retry_after_seconds=1, anonymous_total=3)
