"""The invocation layer against a real server and the official MCP client (issue 8 item 4).

- timeout: a backend that sleeps past its agent's 1 s ``invoke_timeout_seconds`` gets -32003
  "Agent reply timeout" with ``data.code = "service_timeout"``, and the backend saw the cancel;
- unavailable: a backend module that raises on import gives ``agent_service_unavailable`` (503);
  one that fails its first start and can start later is retried after the back-off;
- cancel: a call the client cancels (each era, each path) cancels the backend call, which records it.

The agents' modules live in a temporary folder; each writes marker files there, which the tests
poll with a deadline.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.e2e.marker_agent import WAITER_AGENT, wait_for_marker
from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import GatewayProcess, run_gateway

MODES = ["legacy", "2026-07-28"]

BROKEN = """
raise RuntimeError("this module cannot be imported")
"""

LATE = """
import pathlib

if not (pathlib.Path(__file__).parent / "late_ready").exists():
    raise RuntimeError("not ready yet")


def reply(invocation):
    return "ready now"
"""

CONFIG = """
[[agents]]
id = "slow"
name = "Slow"
owner = "alice"
auth = "none"
invoke_timeout_seconds = 1
backend = { type = "python", callable = "waiter_agent:reply" }

[[agents]]
id = "waiter"
name = "Waiter"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "waiter_agent:reply" }

[[agents]]
id = "broken"
name = "Broken"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "broken_agent:reply" }

[[agents]]
id = "late"
name = "Late"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "late_agent:reply" }
"""


USER_CONFIG = """
[[agents]]
id = "slow"
name = "Slow"
owner = "alice"
invoke_timeout_seconds = 1
backend = { type = "python", callable = "waiter_agent:reply" }

[[agents]]
id = "waiter"
name = "Waiter"
owner = "alice"
backend = { type = "python", callable = "waiter_agent:reply" }
"""
"""The user-level endpoint ``/mcp`` serves alice's agents with her ``oag_`` key."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("calls")
    (root / "marks").mkdir()
    (root / "waiter_agent.py").write_text(WAITER_AGENT, encoding="utf-8")
    (root / "broken_agent.py").write_text(BROKEN, encoding="utf-8")
    (root / "late_agent.py").write_text(LATE, encoding="utf-8")
    (root / "agents.toml").write_text(CONFIG, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def gateway(folder: Path) -> Iterator[GatewayProcess]:
    with run_gateway(folder / "agents.toml") as running:
        yield running


@pytest.fixture(scope="module")
def user_gateway(folder: Path) -> Iterator[tuple[GatewayProcess, str]]:
    """A gateway whose registry holds alice's slow and waiter agents; alice's ``oag_`` key."""
    config = folder / "user-agents.toml"
    config.write_text(USER_CONFIG, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    key = create_user_with_key(database_url, "alice")
    run_cli(database_url, "agents", "apply", str(config))
    with run_gateway(config, database_url=database_url) as running:
        yield running, key


@asynccontextmanager
async def _user_client(user_gateway: tuple[GatewayProcess, str], mode: str) -> AsyncGenerator[Client]:
    gateway, key = user_gateway
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http,
        Client(streamable_http_client(f"{gateway.url}/mcp", http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        yield client


def _mcp_error(exc: BaseException) -> MCPError:
    """The MCPError inside ``exc`` (the client raises it from within its task groups)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    assert isinstance(exc, MCPError), repr(exc)
    return exc


async def _start_error(url: str, mode: str = "2026-07-28") -> MCPError | None:
    """The MCPError the official client raises when it opens ``url`` and lists tools; None if that succeeds."""
    try:
        async with Client(url, mode=mode) as client:  # type: ignore[arg-type]
            await client.list_tools()
    except Exception as exc:  # the client raises the MCPError from within its task groups
        return _mcp_error(exc)
    return None


PATHS = [
    pytest.param("legacy", False, id="legacy-lean"),
    pytest.param("legacy", True, id="legacy-sdk"),
    pytest.param("2026-07-28", False, id="modern-lean"),
    pytest.param("2026-07-28", True, id="modern-sdk"),
]
"""Each era, on hivegate's lean path (no progress asked) and on the SDK's transport (progress asked)."""


async def _ignore_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


@pytest.mark.parametrize(("mode", "progress"), PATHS)
async def test_a_backend_past_its_deadline_is_cancelled_and_answered_32003(
    gateway: GatewayProcess, folder: Path, mode: str, progress: bool
) -> None:
    message = f"timeout-{mode}-{progress}"
    async with Client(f"{gateway.url}/slow/mcp", mode=mode) as client:  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(MCPError) as caught:
            await client.call_tool(
                "slow", {"message": message}, progress_callback=_ignore_progress if progress else None
            )
        elapsed = time.monotonic() - started
    assert caught.value.code == -32003
    assert caught.value.message == "Agent reply timeout"
    assert caught.value.data == {"code": "service_timeout", "timeout_seconds": 1.0}
    assert 1.0 <= elapsed < 10.0
    await wait_for_marker(folder / "marks" / f"cancelled-{message}")


@pytest.mark.parametrize(("mode", "progress"), PATHS)
async def test_a_cancelled_call_cancels_the_backend_call(
    gateway: GatewayProcess, folder: Path, mode: str, progress: bool
) -> None:
    message = f"cancel-{mode}-{progress}"
    async with Client(f"{gateway.url}/waiter/mcp", mode=mode) as client:  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: client.call_tool(
                    "waiter", {"message": message}, progress_callback=_ignore_progress if progress else None
                )
            )
            await wait_for_marker(folder / "marks" / f"started-{message}")
            tg.cancel_scope.cancel()
        await wait_for_marker(folder / "marks" / f"cancelled-{message}")
        # the session is still usable after the cancel
        assert [t.name for t in (await client.list_tools()).tools] == ["waiter"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_backend_that_raises_on_import_is_agent_service_unavailable(gateway: GatewayProcess, mode: str) -> None:
    error = await _start_error(f"{gateway.url}/broken/mcp", mode)
    assert error is not None
    assert error.code == -32603
    assert error.data == {"code": "agent_service_unavailable"}
    assert "cannot be imported" not in error.message
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{gateway.url}/broken/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"},
            timeout=10,
        )
    assert response.status_code == 503
    assert response.json()["error"]["data"]["code"] == "agent_service_unavailable"


async def test_a_backend_that_failed_to_start_is_retried_after_the_back_off(
    gateway: GatewayProcess, folder: Path
) -> None:
    """The first start fails (503); once the module can load, a request after the back-off starts it."""
    url = f"{gateway.url}/late/mcp"
    first = await _start_error(url)
    assert first is not None
    assert first.data == {"code": "agent_service_unavailable"}
    (folder / "late_ready").write_text("", encoding="utf-8")
    with anyio.fail_after(15):  # the first back-off is 1 s
        while (error := await _start_error(url)) is not None:
            assert error.data == {"code": "agent_service_unavailable"}  # until the back-off has passed
            await anyio.sleep(0.2)
    async with Client(url, mode="2026-07-28") as client:
        result = await client.call_tool("late", {"message": "hi"})
    assert result.content[0].text == "ready now"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_on_the_user_endpoint_the_deadline_and_the_cancel_are_the_same(
    user_gateway: tuple[GatewayProcess, str], folder: Path, mode: str
) -> None:
    """``/mcp`` calls the invocation layer too: -32003 past the deadline, and a cancel reaches the backend."""
    timed_out = f"user-timeout-{mode}"
    cancelled = f"user-cancel-{mode}"
    async with _user_client(user_gateway, mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("slow", {"message": timed_out})
        assert (caught.value.code, caught.value.message) == (-32003, "Agent reply timeout")
        assert caught.value.data == {"code": "service_timeout", "timeout_seconds": 1.0}
        await wait_for_marker(folder / "marks" / f"cancelled-{timed_out}")
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: client.call_tool("waiter", {"message": cancelled}))
            await wait_for_marker(folder / "marks" / f"started-{cancelled}")
            tg.cancel_scope.cancel()
        await wait_for_marker(folder / "marks" / f"cancelled-{cancelled}")
