"""Issue 11 items 2-3: an agent that fronts a stdio MCP server, whose processes are supervised.

``hivegate serve`` runs ``tests/upstreams/mcp_stdio_upstream.py`` as its child, started by the first
request, reused by every call, started again after it crashes, stopped when idle, and stopped with the
gateway (even by ``kill -9``). The tests count the gateway's child processes (``/proc``) before, during
and after 1,000 calls and a crash: one child at a time, none left behind. A child that floods its stdout
or writes garbage is cut off (``agent_service_unavailable``) while the gateway goes on serving; its
stderr is in the gateway's log with the agent id. Each agent's children are told apart by the
``TEST_AGENT`` variable of their environment.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import ROOT, GatewayProcess, run_gateway
from tests.upstreams.running import run_mcp_http_upstream

TIMEOUT = 60
MODERN = "2026-07-28"
UPSTREAM = ROOT / "tests" / "upstreams" / "mcp_stdio_upstream.py"
RAW_UPSTREAM = ROOT / "tests" / "upstreams" / "raw_stdio_upstream.py"


@dataclass
class World:
    gateway: GatewayProcess
    alice: str


def children(pid: int, agent: str | None = None) -> list[int]:
    """The live child processes of ``pid`` (from /proc; zombies are not counted as live); with ``agent``,
    only those whose environment has ``TEST_AGENT={agent}``."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            environ = (entry / "environ").read_bytes().split(b"\0") if agent is not None else []
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        mine = agent is None or f"TEST_AGENT={agent}".encode() in environ
        if int(fields[1]) == pid and fields[0] != "Z" and mine:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 15) -> None:
    """Poll ``condition`` (the process table, changed by other processes), bounded."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)


async def eventually(call: Callable[[], Awaitable[str]], seconds: float = 15) -> str:
    """``call``'s result once it is not ``agent_service_unavailable`` (a restart back-off is running), bounded."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await call()
        except MCPError as exc:
            if exc.error.data != {"code": "agent_service_unavailable"} or time.monotonic() > deadline:
                raise
        await anyio.sleep(0.1)


def peak_memory_kib(pid: int) -> int:
    """The process's peak resident memory (``VmHWM``), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("mcp-stdio")
    url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    config = folder / "agents.toml"
    config.write_text(
        f"""
[[agents]]
id = "local"
name = "A stdio MCP server"
owner = "alice"
[agents.backend]
type = "mcp"
command = ["{sys.executable}", "{UPSTREAM}"]
env = {{ UPSTREAM_GREETING = "hi", TEST_AGENT = "local" }}

[[agents]]
id = "flood"
name = "A stdio MCP server that floods on demand, 1 MiB messages"
owner = "alice"
invoke_timeout_seconds = 30
[agents.backend]
type = "mcp"
command = ["{sys.executable}", "{UPSTREAM}"]
env = {{ TEST_AGENT = "flood" }}
max_result_bytes = 1048576

[[agents]]
id = "mine"
name = "A stdio MCP server, one process per user"
owner = "alice"
[agents.backend]
type = "mcp"
command = ["{sys.executable}", "{UPSTREAM}"]
env = {{ TEST_AGENT = "mine" }}
isolation = "per_user"

[[agents]]
id = "idle"
name = "A stdio MCP server stopped after half a second without calls"
owner = "alice"
[agents.backend]
type = "mcp"
command = ["{sys.executable}", "{UPSTREAM}"]
env = {{ TEST_AGENT = "idle" }}
idle_stop_seconds = 0.5

[[agents]]
id = "raw"
name = "A stdio MCP server that writes bytes that are not UTF-8"
owner = "alice"
invoke_timeout_seconds = 10
backend = {{ type = "mcp", command = ["{sys.executable}", "{RAW_UPSTREAM}"] }}
""",
        encoding="utf-8",
    )
    alice = create_user_with_key(url, "alice")
    run_cli(url, "agents", "apply", str(config))
    with run_gateway(None, database_url=url, env={"HIVEGATE_SECRET_TEST_MARKER": "x"}) as gateway:
        yield World(gateway, alice)


@asynccontextmanager
async def client_of(world: World, mode: str = MODERN, agent: str = "local") -> AsyncGenerator[McpClient]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {world.alice}"}, timeout=TIMEOUT) as http,
        McpClient(streamable_http_client(f"{world.gateway.url}/{agent}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def text(result: object) -> str:
    block = result.content[0]  # type: ignore[attr-defined]
    assert isinstance(block, TextContent)
    return block.text


async def test_one_child_serves_every_call_and_is_started_again_after_a_crash(world: World) -> None:
    pid = world.gateway.process.pid
    async with client_of(world) as client:
        with anyio.fail_after(TIMEOUT):
            tools = await client.list_tools()
            assert sorted(t.name for t in tools.tools) == [
                "add",
                "big",
                "crash",
                "descriptors",
                "flood",
                "garbage",
                "leak_env",
                "shout",
                "slow",
                "whoami",
            ]
            first = text(await client.call_tool("whoami", {}))
            assert first.endswith("greeting=hi")  # the agents file's env reached the process
            assert text(await client.call_tool("leak_env", {})) == "none"  # the gateway's own did not
            served = children(pid, "local")
            assert len(served) == 1, served

            async def add(n: int) -> None:
                result = await client.call_tool("add", {"a": n, "b": 1})
                assert text(result) == str(n + 1)

            for round_ in range(50):  # 1,000 calls, 20 at a time, on the one child
                async with anyio.create_task_group() as tasks:
                    for n in range(20):
                        tasks.start_soon(add, round_ * 20 + n)
                assert children(pid, "local") == served
            assert text(await client.call_tool("whoami", {})) == first

            with pytest.raises(MCPError) as crashed:
                await client.call_tool("crash", {})
            assert crashed.value.error.data == {"code": "agent_service_unavailable"}
            again = text(await client.call_tool("whoami", {}))  # a new child
            assert again != first
            after = children(pid, "local")
            assert len(after) == 1, after
            assert after != served

            # A child that dies young again: the next start waits (1 s, doubling), so calls meanwhile are
            # refused at once instead of each starting a process.
            with pytest.raises(MCPError):
                await client.call_tool("crash", {})
            with pytest.raises(MCPError) as refused:
                await client.call_tool("whoami", {})
            assert refused.value.error.data == {"code": "agent_service_unavailable"}
            assert children(pid, "local") == []


async def test_a_line_that_is_not_utf8_is_dropped_and_the_answer_after_it_arrives(world: World) -> None:
    """Found by the attack trial: one byte that is not UTF-8 on the child's stdout ended the SDK's stdio
    reader without closing the session, and every later call timed out on the live child. The line is
    now decoded with replacement (and dropped as not JSON); the answers after it arrive."""
    async with client_of(world, mode="legacy", agent="raw") as client:
        with anyio.fail_after(TIMEOUT):
            for n in range(3):
                assert text(await client.call_tool("echo", {"message": f"after {n}"})) == f"after {n}"


async def test_stderr_reaches_the_log_with_the_agent_id(world: World) -> None:
    async with client_of(world) as client:
        with anyio.fail_after(TIMEOUT):

            async def shout() -> str:  # the first test left the agent in its restart back-off
                return text(await client.call_tool("shout", {"text": "marker-7f3a from the child", "n": 2}))

            assert await eventually(shout) == "done"
    line = await anyio.to_thread.run_sync(world.gateway.wait_for, "marker-7f3a")
    assert "agent local: stdio upstream (pid " in line
    assert "stderr: marker-7f3a from the child" in line


async def test_a_flood_or_garbage_is_cut_off_and_the_gateway_goes_on(world: World) -> None:
    """A 100 MB line without a newline, past the agent's 1 MiB ``max_result_bytes``: the child is cut off at
    once (its call is ``agent_service_unavailable``), the gateway's memory does not grow by the flood, and
    another agent answers meanwhile. Then a stream of lines that are not JSON-RPC: cut off too."""
    pid = world.gateway.process.pid
    async with client_of(world, agent="flood") as flood, client_of(world) as local:

        async def add(a: int) -> str:
            return text(await flood.call_tool("add", {"a": a, "b": 1}))

        async def local_add(a: int) -> str:
            return text(await local.call_tool("add", {"a": a, "b": 1}))

        with anyio.fail_after(TIMEOUT):
            assert await add(1) == "2"  # started
            assert await eventually(lambda: local_add(0)) == "1"  # (after a back-off the first test may leave)
            before = peak_memory_kib(pid)
            answers: list[str] = []

            async def others() -> None:
                for n in range(20):
                    answers.append(await local_add(n))

            started = time.monotonic()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(others)
                with pytest.raises(MCPError) as cut:
                    await flood.call_tool("flood", {"n": 100_000_000})
                assert cut.value.error.data == {"code": "agent_service_unavailable"}
            assert time.monotonic() - started < 10
            assert answers == [str(n + 1) for n in range(20)]
            grown = peak_memory_kib(pid) - before
            assert grown < 48 * 1024, f"the gateway grew by {grown} KiB"
            assert await eventually(lambda: add(2)) == "3"  # a new child serves the next call

            with pytest.raises(MCPError) as garbled:
                await flood.call_tool("garbage", {"n": 1000})
            assert garbled.value.error.data == {"code": "agent_service_unavailable"}
            assert await eventually(lambda: add(3)) == "4"
            assert len(children(pid, "flood")) == 1
    output = world.gateway.output()
    assert "agent flood: the stdio upstream (pid " in output
    assert "is cut off: a message passed 1048576 bytes" in output
    assert "lines in a row are not JSON-RPC" in output
    assert "Traceback" not in output


async def test_per_user_the_same_user_reuses_one_process(world: World) -> None:
    pid = world.gateway.process.pid
    with anyio.fail_after(TIMEOUT):
        async with client_of(world, agent="mine") as one:
            first = text(await one.call_tool("whoami", {}))
        async with client_of(world, agent="mine", mode="legacy") as another:  # another session, same user
            assert text(await another.call_tool("whoami", {})) == first
        assert len(children(pid, "mine")) == 1


async def test_an_idle_child_is_stopped_and_the_next_call_starts_another(world: World) -> None:
    pid = world.gateway.process.pid
    async with client_of(world, agent="idle") as client:
        with anyio.fail_after(TIMEOUT):
            first = text(await client.call_tool("whoami", {}))
            (child,) = children(pid, "idle")
            assert f"pid={child} " in first
            await anyio.to_thread.run_sync(lambda: wait_until(lambda: not alive(child), "the idle child exits"))
            assert children(pid, "idle") == []
            second = text(await client.call_tool("whoami", {}))
            assert second != first
            assert len(children(pid, "idle")) == 1


def test_kill_9_of_the_gateway_leaves_no_child(tmp_path: Path) -> None:
    """The gateway has no chance to stop its child, and the child would outlive its stdin ending
    (``UPSTREAM_LINGER``): the kernel stops it (``PR_SET_PDEATHSIG``)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'hivegate.db'}"
    config = tmp_path / "agents.toml"
    config.write_text(
        f"""
[[agents]]
id = "local"
name = "A stdio MCP server that lingers after its stdin ends"
owner = "alice"
backend = {{ type = "mcp", command = ["{sys.executable}", "{UPSTREAM}"], env = {{ UPSTREAM_LINGER = "1" }} }}
""",
        encoding="utf-8",
    )
    alice = create_user_with_key(url, "alice")
    run_cli(url, "agents", "apply", str(config))
    with run_gateway(None, database_url=url) as gateway:
        world = World(gateway, alice)

        async def start_child() -> None:
            async with client_of(world) as client:
                with anyio.fail_after(TIMEOUT):
                    await client.list_tools()

        anyio.run(start_child)
        (child,) = children(gateway.process.pid)
        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(timeout=30)
        try:
            wait_until(lambda: not alive(child), "the child dies with the gateway", seconds=10)
        finally:
            if alive(child):  # pragma: no cover - clean up after a failure
                os.kill(child, signal.SIGKILL)


def test_the_child_is_stopped_with_the_gateway(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'hivegate.db'}"
    config = tmp_path / "agents.toml"
    config.write_text(
        f"""
[[agents]]
id = "local"
name = "A stdio MCP server"
owner = "alice"
backend = {{ type = "mcp", command = ["{sys.executable}", "{UPSTREAM}"] }}
""",
        encoding="utf-8",
    )
    alice = create_user_with_key(url, "alice")
    run_cli(url, "agents", "apply", str(config))
    with run_gateway(None, database_url=url) as gateway:
        world = World(gateway, alice)

        async def start_child() -> None:
            async with client_of(world) as client:
                with anyio.fail_after(TIMEOUT):
                    await client.list_tools()

        anyio.run(start_child)
        child = children(gateway.process.pid)
        assert len(child) == 1
        gateway.process.send_signal(signal.SIGTERM)
        gateway.process.wait(timeout=30)

    def gone(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        return state == "Z"

    assert gone(child[0]), f"the stdio child {child[0]} outlived the gateway"
    if not gone(child[0]):  # pragma: no cover - clean up after a failure
        os.kill(child[0], signal.SIGKILL)


def test_an_answer_past_the_result_limit_is_cut_off_and_the_agent_goes_on(tmp_path: Path) -> None:
    """Issue 11 item 4: an HTTP upstream's 5 MB result, past the agent's ``max_result_bytes`` (64 KiB),
    is ``agent_service_unavailable`` without being read whole; the next call works."""
    with run_mcp_http_upstream() as url:
        database_url = f"sqlite+aiosqlite:///{tmp_path / 'hivegate.db'}"
        config = tmp_path / "agents.toml"
        config.write_text(
            f"""
[[agents]]
id = "local"
name = "An HTTP MCP server, 64 KiB results"
owner = "alice"
backend = {{ type = "mcp", url = "{url}/mcp", max_result_bytes = 65536 }}

[[agents]]
id = "other"
name = "The same server, another agent"
owner = "alice"
backend = {{ type = "mcp", url = "{url}/mcp" }}
""",
            encoding="utf-8",
        )
        alice = create_user_with_key(database_url, "alice")
        run_cli(database_url, "agents", "apply", str(config))
        with run_gateway(None, database_url=database_url) as gateway:
            world = World(gateway, alice)

            async def calls() -> None:
                async with client_of(world) as client:
                    with anyio.fail_after(TIMEOUT):
                        assert text(await client.call_tool("big", {"n": 20_000})) == "x" * 20_000
                        with pytest.raises(MCPError) as cut:
                            await client.call_tool("big", {"n": 5_000_000})
                        assert cut.value.error.data == {"code": "agent_service_unavailable"}
                        assert text(await client.call_tool("add", {"a": 2, "b": 3})) == "5"

            async def alongside() -> None:
                """The cut-off answer fails its own call only: 30 calls in flight beside it all answer (the
                attack trial saw one over-limit answer fail 30 of 30, the agent's connection with it)."""
                answers: list[str] = []
                async with client_of(world) as client:

                    async def add(i: int) -> None:
                        answers.append(text(await client.call_tool("add", {"a": i, "b": 1})))

                    async def too_big() -> None:
                        with pytest.raises(MCPError):
                            await client.call_tool("big", {"n": 5_000_000})

                    with anyio.fail_after(TIMEOUT):
                        for _ in range(3):
                            async with anyio.create_task_group() as tasks:
                                tasks.start_soon(too_big)
                                for i in range(30):
                                    tasks.start_soon(add, i)
                assert sorted(map(int, answers)) == sorted(list(range(1, 31)) * 3)

            anyio.run(calls)
            anyio.run(alongside)
            logged = gateway.output()
            assert "passed max_result_bytes (65536 bytes) and was cut off" in logged
            # Found while building this test: the cut-off connection's task ended the runtime's shared
            # task group, and no agent started after it could run. Another agent still starts and answers.
            other = World(gateway, alice)

            async def another() -> None:
                async with client_of(other, agent="other") as client:
                    with anyio.fail_after(TIMEOUT):
                        assert text(await client.call_tool("add", {"a": 1, "b": 1})) == "2"

            anyio.run(another)
            assert "Traceback" not in logged + gateway.output()


async def test_a_child_holds_no_descriptor_of_the_gateway(world: World) -> None:
    """A stdio child gets its stdin, stdout and stderr only: not the gateway's listening socket (from which
    it could accept other callers' requests, credentials included) nor other children's pipes. The
    gateway runs on uvloop, whose spawn ignores ``close_fds`` (found by the attack trial)."""
    with anyio.fail_after(TIMEOUT):
        async with client_of(world) as client, client_of(world, agent="mine") as other:
            await other.call_tool("whoami", {})  # a second child, started while the first may run
            held = json.loads(text(await client.call_tool("descriptors", {})))
            held_other = json.loads(text(await other.call_tool("descriptors", {})))
    assert held == {"listening": 0, "stdio_copies": 0}, held
    assert held_other == {"listening": 0, "stdio_copies": 0}, held_other
