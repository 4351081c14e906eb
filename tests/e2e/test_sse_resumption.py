"""Issue 7 item 1: SSE resumption stays inside its endpoint, session, stream and principal.

A real server; handshake-era (2025-11-25) sessions driven over raw HTTP, so a test can present
any ``Last-Event-ID``. Before the fix the event store was one per agent (and one for ``/mcp``),
shared by every session, and a stream was named by its JSON-RPC request id only: resuming one's
own cursor on stream "7" replayed every later event of every session's stream "7" (another
user's ``tools/call`` results), and another session's event id replayed that session's events.

Spec: MCP 2025-11-25 basic/transports#resumability-and-redelivery ("MUST NOT replay messages
that would have been delivered on a different stream"); basic/security_best_practices
#session-hijacking.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager

import httpx2
import pytest

from tests.e2e.sse_session import Resumed, open_session
from tests.e2e.sse_world import SseWorld, serve_sse_world

TIMEOUT_SECONDS = 30


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SseWorld]:
    with serve_sse_world(tmp_path_factory.mktemp("resumption")) as served:
        yield served


@asynccontextmanager
async def _http() -> AsyncGenerator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
        yield http


async def _two_callers(url: str, first: dict[str, str], second: dict[str, str], tools: tuple[str, str]) -> None:
    """``second`` holds a cursor on its stream 7; ``first`` then calls with request id 7 too. Neither may
    read the other's stream, by its own cursor or by the other's; each resumes its own."""
    async with _http() as http:
        attacker = await open_session(http, url, second)
        await attacker.call(7, tools[1], "attacker words")
        victim = await open_session(http, url, first)
        await victim.call(7, tools[0], "the victim's secret")
        assert attacker.session_id != victim.session_id

        own = await attacker.resume(attacker.cursors[7][0])
        assert own.status == 200
        assert "secret" not in own.text
        assert own.messages[-1]["id"] == 7
        assert own.messages[-1]["result"]["content"][0]["text"] == "attacker words"

        (await attacker.resume(victim.cursors[7][0])).assert_refused()
        (await attacker.resume(victim.cursors[7][-1])).assert_refused()

        theirs = await victim.resume(victim.cursors[7][0])
        assert theirs.status == 200
        assert theirs.messages[-1]["result"]["content"][0]["text"] == "the victim's secret"
        assert "attacker" not in theirs.text
        (await victim.resume(attacker.cursors[7][0])).assert_refused()


async def test_two_users_on_the_user_endpoint_resume_only_their_own_streams(world: SseWorld) -> None:
    """Issue 7 item 1: on ``/mcp``, bob's cursor never replays alice's results, nor alice's id."""
    c = world.credentials
    await _two_callers(f"{world.gateway.url}/mcp", c["alice"], c["bob"], ("alpha", "beta"))


async def test_an_oag_and_a_bak_caller_on_one_agent_resume_only_their_own_streams(world: SseWorld) -> None:
    """Issue 7 item 1: on ``/alpha/mcp``, a ``bak_`` caller cannot read an ``oag_`` caller's results (and back)."""
    c = world.credentials
    url = f"{world.gateway.url}/alpha/mcp"
    await _two_callers(url, c["alice"], c["alice_bak"], ("alpha", "alpha"))
    await _two_callers(url, c["alice_bak"], c["alice"], ("alpha", "alpha"))


async def test_a_session_id_presented_by_another_principal_replays_nothing(world: SseWorld) -> None:
    """Issue 7 item 1: a ``bak_`` caller holding an ``oag_`` caller's session id and event id gets nothing."""
    c = world.credentials
    async with _http() as http:
        victim = await open_session(http, f"{world.gateway.url}/alpha/mcp", c["alice"])
        await victim.call(3, "alpha", "private words")
        intruder = type(victim)(http, victim.url, c["alice_bak"], victim.session_id)
        (await intruder.resume(victim.cursors[3][0])).assert_refused()


async def test_a_resume_replays_only_the_later_events_of_that_stream_in_order(world: SseWorld) -> None:
    """Issue 7 item 1: streams of one session stay apart; a resume starts after its cursor, oldest first."""
    async with _http() as http:
        session = await open_session(http, f"{world.gateway.url}/alpha/mcp", world.credentials["alice"])
        first = await session.call(1, "alpha", "one two three")
        await session.call(2, "alpha", "four five")

        whole = await session.resume(session.cursors[1][0])
        assert whole.status == 200
        assert whole.messages == first
        assert [m["params"]["message"] for m in whole.messages[:3]] == ["one ", "two ", "three"]
        assert "four" not in whole.text

        after_two = await session.resume(session.cursors[1][2])  # priming, "one ", "two ": resume after "two "
        assert after_two.messages == first[2:]

        last = await session.resume(session.cursors[2][-1])
        assert last == Resumed(200, [], None)


async def test_an_unknown_event_id_is_refused_with_a_json_rpc_error(world: SseWorld) -> None:
    """Issue 7 item 1: an id never issued is 400 ``unknown_event_id``, before any stream opens."""
    for path in ("/mcp", "/alpha/mcp"):
        async with _http() as http:
            session = await open_session(http, f"{world.gateway.url}{path}", world.credentials["alice"])
            (await session.resume(secrets.token_urlsafe(16))).assert_refused()
