"""Issue 7 item 2 (the event store): SSE events kept for resumption are bounded in bytes per
principal and in total, and a session's events are freed when it ends.

A real server per test, with small budgets (256 KiB per principal, 300 KiB in all). Three
principals: bob (``oag_``, the victim, on ``/mcp``), alice's ``bak_`` key and alice's ``oag_`` key
(the flooders, on ``/alpha/mcp``). A flood is ``tools/call``s with a progress token and a 48 KiB
one-word message: each keeps a priming event, a progress notification and a result (~97 KiB).
What is kept is observed the way a client sees it: a cursor still kept resumes (200, the later
events), an evicted one is refused (400 ``unknown_event_id``).

Before the fix the store was bounded by count (10,000 events per agent) and never freed a
session's events: the issue measured 300 such calls with 3.5 MB bodies taking RSS from 227 to
1,257 MiB, not freed by DELETE.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.e2e.sse_session import SseSession, open_session
from tests.e2e.sse_world import SseWorld, serve_sse_world

KIB = 1024
PER_PRINCIPAL = 256 * KIB
TOTAL = 300 * KIB
"""Below two flooders' floors (each keeps > 200 KiB after its own evictions), above one flooder plus the victim."""
FLOOD_CALLS = 5
FLOOD_MESSAGE = "x" * (48 * KIB)
TIMEOUT_SECONDS = 30
EXPIRY_SECONDS = 3


def _world(folder: Path, idle_timeout_seconds: float) -> Iterator[SseWorld]:
    env = {
        "HIVEGATE_MCP__EVENT_STORE_BYTES_PER_PRINCIPAL": str(PER_PRINCIPAL),
        "HIVEGATE_MCP__EVENT_STORE_BYTES_TOTAL": str(TOTAL),
        "HIVEGATE_MCP__SESSION_IDLE_TIMEOUT_SECONDS": str(idle_timeout_seconds),
    }
    with serve_sse_world(folder, env) as served:
        yield served


@pytest.fixture
def world(tmp_path: Path) -> Iterator[SseWorld]:
    yield from _world(tmp_path, 1800)


@pytest.fixture
def expiring_world(tmp_path: Path) -> Iterator[SseWorld]:
    yield from _world(tmp_path, EXPIRY_SECONDS)


@asynccontextmanager
async def _http() -> AsyncGenerator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
        yield http


async def _flood(session: SseSession) -> tuple[str, str]:
    """``FLOOD_CALLS`` large calls; the first and the last cursor issued."""
    for n in range(FLOOD_CALLS):
        await session.call(100 + n, "alpha", FLOOD_MESSAGE)
    return session.cursors[100][0], session.cursors[100 + FLOOD_CALLS - 1][0]


async def _victim(http: httpx2.AsyncClient, world: SseWorld) -> tuple[SseSession, str]:
    victim = await open_session(http, world.mcp, world.credentials["bob"])
    await victim.call(1, "beta", "bob's words")
    return victim, victim.cursors[1][0]


async def _still_served(victim: SseSession, cursor: str) -> None:
    resumed = await victim.resume(cursor)
    assert resumed.status == 200
    assert resumed.messages[-1]["result"]["content"][0]["text"] == "bob's words"


async def test_a_flooding_principal_evicts_only_its_own_events(world: SseWorld) -> None:
    """Issue 7 item 2: a flood past the per-principal budget drops the flooder's oldest events; the
    victim's older events stay resumable, and its initialize and tools/call are served."""
    async with _http() as http:
        victim, cursor = await _victim(http, world)
        flooder = await open_session(http, world.alpha, world.credentials["alice"])
        first, last = await _flood(flooder)

        (await flooder.resume(first)).assert_refused()
        resumed = await flooder.resume(last)
        assert resumed.status == 200
        assert resumed.messages[-1]["result"]["content"][0]["text"] == FLOOD_MESSAGE
        await _still_served(victim, cursor)
        again = await open_session(http, world.mcp, world.credentials["bob"])  # initialize is still served
        answered = await again.call(2, "beta", "still here")
        assert answered[-1]["result"]["content"][0]["text"] == "still here"


async def test_delete_frees_the_sessions_events(world: SseWorld) -> None:
    """Issue 7 item 2: after DELETE, a session's events no longer count against the total. Two floods
    would exceed it (pushing out the victim's, the oldest of all) unless the first was freed."""
    async with _http() as http:
        victim, cursor = await _victim(http, world)
        first = await open_session(http, world.alpha, world.credentials["alice_bak"])
        await _flood(first)
        assert await first.delete() == 200
        second = await open_session(http, world.alpha, world.credentials["alice"])
        await _flood(second)
        await _still_served(victim, cursor)


async def test_expiry_frees_the_sessions_events(expiring_world: SseWorld) -> None:
    """Issue 7 item 2: an idle session that expires frees its events too (the victim's session is
    kept alive by its open GET stream)."""
    world = expiring_world
    async with _http() as http:
        victim, cursor = await _victim(http, world)
        async with victim.listening():
            first = await open_session(http, world.alpha, world.credentials["alice_bak"])
            await _flood(first)
            expired = f"Session {first.session_id} idle timeout"
            await anyio.to_thread.run_sync(world.gateway.wait_for, expired, EXPIRY_SECONDS + 10)
            second = await open_session(http, world.alpha, world.credentials["alice"])
            await _flood(second)
            await _still_served(victim, cursor)
