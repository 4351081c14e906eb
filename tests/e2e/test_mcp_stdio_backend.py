"""Issue 11 items 2-3 (their first part): an agent that fronts a stdio MCP server.

``hivegate serve`` runs ``tests/upstreams/mcp_stdio_upstream.py`` as its child, started by the first
request, reused by every call, started again after it crashes, and stopped with the gateway. The
test counts the gateway's child processes (``/proc``) before, during and after many calls and a crash:
one child at a time, none left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator
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

TIMEOUT = 60
MODERN = "2026-07-28"
UPSTREAM = ROOT / "tests" / "upstreams" / "mcp_stdio_upstream.py"
RAW_UPSTREAM = ROOT / "tests" / "upstreams" / "raw_stdio_upstream.py"


@dataclass
class World:
    gateway: GatewayProcess
    alice: str


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc; zombies are not counted as live)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


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
backend = {{ type = "mcp", command = ["{sys.executable}", "{UPSTREAM}"], env = {{ UPSTREAM_GREETING = "hi" }} }}

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
            assert sorted(t.name for t in tools.tools) == ["add", "big", "crash", "leak_env", "whoami"]
            first = text(await client.call_tool("whoami", {}))
            assert first.endswith("greeting=hi")  # the agents file's env reached the process
            assert text(await client.call_tool("leak_env", {})) == "none"  # the gateway's own did not
            served = children(pid)
            assert len(served) == 1, served

            async def add(n: int) -> None:
                result = await client.call_tool("add", {"a": n, "b": 1})
                assert text(result) == str(n + 1)

            for round_ in range(10):  # 200 calls, 20 at a time, on the one child
                async with anyio.create_task_group() as tasks:
                    for n in range(20):
                        tasks.start_soon(add, round_ * 20 + n)
            assert children(pid) == served
            assert text(await client.call_tool("whoami", {})) == first

            with pytest.raises(MCPError) as crashed:
                await client.call_tool("crash", {})
            assert crashed.value.error.data == {"code": "agent_service_unavailable"}
            again = text(await client.call_tool("whoami", {}))  # a new child
            assert again != first
            after = children(pid)
            assert len(after) == 1, after
            assert after != served

            # A child that dies young again: the next start waits (1 s, doubling), so calls meanwhile are
            # refused at once instead of each starting a process.
            with pytest.raises(MCPError):
                await client.call_tool("crash", {})
            with pytest.raises(MCPError) as refused:
                await client.call_tool("whoami", {})
            assert refused.value.error.data == {"code": "agent_service_unavailable"}
            assert children(pid) == []


async def test_a_line_that_is_not_utf8_is_dropped_and_the_answer_after_it_arrives(world: World) -> None:
    """Found by the attack trial: one byte that is not UTF-8 on the child's stdout ended the SDK's stdio
    reader without closing the session, and every later call timed out on the live child. The line is
    now decoded with replacement (and dropped as not JSON); the answers after it arrive."""
    async with client_of(world, mode="legacy", agent="raw") as client:
        with anyio.fail_after(TIMEOUT):
            for n in range(3):
                assert text(await client.call_tool("echo", {"message": f"after {n}"})) == f"after {n}"


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
    upstream = subprocess.Popen(
        [sys.executable, str(UPSTREAM), "--http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert upstream.stdout is not None
        line = upstream.stdout.readline()  # the ready line (the process exits, and the read ends, on failure)
        assert line.startswith("mcp-upstream listening on "), line
        url = line.removeprefix("mcp-upstream listening on ").strip()
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

            anyio.run(calls)
            # Found while building this test: the cut-off connection's task ended the runtime's shared
            # task group, and no agent started after it could run. Another agent still starts and answers.
            other = World(gateway, alice)

            async def another() -> None:
                async with client_of(other, agent="other") as client:
                    with anyio.fail_after(TIMEOUT):
                        assert text(await client.call_tool("add", {"a": 1, "b": 1})) == "2"

            anyio.run(another)
            assert "Traceback" not in gateway.output()
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
        if upstream.stdout is not None:
            upstream.stdout.close()
