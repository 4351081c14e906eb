"""The ``mcp`` backend's stdio processes, in process, on real children (``tests/upstreams/mcp_stdio_upstream.py``):
``isolation = "per_user"`` (a process per user, the same one for the same user, a cap with the least
recently used idle one stopped), the idle stop, and ``aclose`` stopping them all. Which process answered is
read from the upstream's ``whoami`` description (it names the pid), through ``tools/list``.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from hivegate.agents.model import AgentSpec, McpBackendSpec
from hivegate.auth.principal import ANONYMOUS, CredentialKind, Principal, principal_scope
from hivegate.backends.mcp_upstream import McpUpstreamBackend
from hivegate.errors import AgentServiceUnavailableError

TIMEOUT = 30
UPSTREAM = Path(__file__).resolve().parent.parent / "upstreams" / "mcp_stdio_upstream.py"
ALICE = Principal(kind=CredentialKind.USER_KEY, user_id="u-alice", username="alice", agents=None)
BOB = Principal(kind=CredentialKind.USER_KEY, user_id="u-bob", username="bob", agents=None)
ALICE_AGAIN = Principal(kind=CredentialKind.AGENT_KEY, user_id="u-alice", username="alice", agents=frozenset({"a"}))


def spec(**options: Any) -> McpBackendSpec:
    return McpBackendSpec(type="mcp", command=(sys.executable, str(UPSTREAM)), **options)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def until(condition: Callable[[], bool], what: str, seconds: float = 15) -> None:
    """Poll ``condition`` (another process decides it: nothing to wait on here), bounded."""
    deadline = time.monotonic() + seconds
    while not condition():  # the process table changes in other processes
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        await anyio.sleep(0.05)


@asynccontextmanager
async def running(backend_spec: McpBackendSpec) -> AsyncGenerator[McpUpstreamBackend]:
    backend = McpUpstreamBackend("a", backend_spec)
    async with anyio.create_task_group() as tasks:
        await backend.start(tasks)
        try:
            yield backend
        finally:
            await backend.aclose()


async def pid_of(backend: McpUpstreamBackend, principal: Principal) -> int:
    """The pid of the process that serves ``principal`` (a list reused from the cache is that process's)."""
    with principal_scope(principal):
        page = await backend.request(cast(Any, None), "tools/list", {})
    (described,) = [tool.description for tool in page.tools if tool.name == "whoami"]
    found = re.search(r"pid=(\d+)", described)
    assert found is not None, described
    return int(found.group(1))


async def test_per_user_gives_each_user_a_process_and_reuses_it() -> None:
    with anyio.fail_after(TIMEOUT):
        async with running(spec(isolation="per_user")) as backend:
            alice = await pid_of(backend, ALICE)
            bob = await pid_of(backend, BOB)
            assert alice != bob
            assert await pid_of(backend, ALICE_AGAIN) == alice  # another credential of the same user
            assert alive(alice)
            assert alive(bob)
        # aclose waited: both are stopped
        assert not alive(alice)
        assert not alive(bob)


async def test_shared_gives_every_user_the_one_process() -> None:
    with anyio.fail_after(TIMEOUT):
        async with running(spec()) as backend:
            assert await pid_of(backend, ALICE) == await pid_of(backend, BOB)


async def test_per_user_refuses_an_anonymous_caller() -> None:
    with anyio.fail_after(TIMEOUT):
        async with running(spec(isolation="per_user")) as backend:
            with pytest.raises(AgentServiceUnavailableError):
                await pid_of(backend, ANONYMOUS)


def test_per_user_needs_an_agent_that_requires_credentials() -> None:
    with pytest.raises(ValueError, match="per_user"):
        AgentSpec(id="a", name="A", owner="alice", auth="none", backend=spec(isolation="per_user"))
    with pytest.raises(ValueError, match="isolation"):
        McpBackendSpec(type="mcp", url="https://mcp.example.com/mcp", isolation="per_user")


async def test_past_max_processes_the_least_recently_used_idle_process_makes_room() -> None:
    with anyio.fail_after(TIMEOUT):
        async with running(spec(isolation="per_user", max_processes=1)) as backend:
            alice = await pid_of(backend, ALICE)
            # Alice's process is evicted once it has had no request for a second; until then Bob is refused.
            deadline = time.monotonic() + 15
            while True:
                try:
                    bob = await pid_of(backend, BOB)
                    break
                except AgentServiceUnavailableError:
                    assert time.monotonic() < deadline
                    await anyio.sleep(0.1)
            assert bob != alice
            await until(lambda: not alive(alice), "the evicted process exits")
            assert alive(bob)


async def test_an_idle_process_is_stopped_and_the_next_call_starts_another() -> None:
    with anyio.fail_after(TIMEOUT):
        async with running(spec(idle_stop_seconds=0.5)) as backend:
            first = await pid_of(backend, ALICE)
            await until(lambda: not alive(first), "the idle process exits")
            second = await pid_of(backend, ALICE)
            assert second != first
            assert alive(second)
