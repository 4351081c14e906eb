"""Memory under attack: handshake-era sessions, GET streams and listen streams opened by one client.

    python bench/attack_memory.py [--tree DIR] [--sessions 10000] [--get-streams 1000]
                                  [--listen-streams 2000] [--addresses 1] [--concurrency 32]
                                  [--time-limit 300] [--env NAME=VALUE ...]

Starts ``hivegate serve --dev`` of the checkout ``--tree`` (default: this one) with the demo
agents (``examples/hivegate.toml``, in-memory registry) on a loopback port, then, as anonymous
callers of the ``echo`` agent (``auth = "none"``), from 127.0.0.1 (or spread over
``--addresses`` loopback addresses 127.0.1.1, 127.0.1.2, ...):

1. ``--sessions`` ``initialize`` POSTs (never deleted), ``--concurrency`` at a time;
2. ``--get-streams`` GET (SSE) streams on the sessions that were opened, held open;
3. ``--listen-streams`` 2026-07-28 ``subscriptions/listen`` streams, held open;

and after each step prints the server's RSS (``VmRSS`` of /proc/PID/status), how the attempts
were answered, and whether a bystander at 127.0.0.2 still gets ``initialize`` + ``tools/call``
answered. Everything is bounded: the counts, and ``--time-limit`` seconds for the whole run.
Loopback only. Results: docs/performance.md, "Memory under attack: sessions and streams".
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent.parent
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "attack", "version": "0"}},
    }
)
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "attack", "version": "0"},
}
LISTEN = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": META},
    }
)
CALL = json.dumps(
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hi"}}}
)
PATH = "/echo/mcp"


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


def start_server(tree: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-m", "hivegate", "serve", "--dev", "--port", "0", "--database-url", "memory://"]
    args += ["--config", str(tree / "examples" / "hivegate.toml")]
    proc_env = {
        **os.environ,
        "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree / 'examples'}",
        "PYTHONUNBUFFERED": "1",
        "HIVEGATE_SERVER__LOG_LEVEL": "warning",
        **env,
    }
    process = subprocess.Popen(
        args, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=proc_env
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("hivegate listening on "):
            # Keep draining its output (refusals may be logged), so the server never blocks on a full pipe.
            threading.Thread(target=collections.deque, args=(process.stdout, 0), daemon=True).start()
            return process, line.removeprefix("hivegate listening on ").strip()
    process.kill()
    raise RuntimeError("the server did not start")


def client(url: str, address: str, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    transport = httpx.AsyncHTTPTransport(local_address=address, limits=limits)
    return httpx.AsyncClient(base_url=url, transport=transport, timeout=30)


async def bystander(url: str) -> str:
    """What 127.0.0.2 gets: ``initialize`` then ``tools/call`` in that session (statuses)."""
    async with client(url, "127.0.0.2", 4) as http:
        opened = await http.post(PATH, content=INITIALIZE, headers=HEADERS)
        if opened.status_code != 200:
            return f"initialize {opened.status_code}"
        session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        await http.post(PATH, content='{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=session)
        called = await http.post(PATH, content=CALL, headers=session)
        await http.delete(PATH, headers=session)
        return f"initialize 200, tools/call {called.status_code}"


async def open_sessions(clients: list[httpx.AsyncClient], count: int, concurrency: int) -> tuple[list[Any], Any]:
    statuses: collections.Counter[int] = collections.Counter()
    sessions: list[tuple[httpx.AsyncClient, str]] = []
    limiter = anyio.Semaphore(concurrency)

    async def one(http: httpx.AsyncClient) -> None:
        async with limiter:
            response = await http.post(PATH, content=INITIALIZE, headers=HEADERS)
            statuses[response.status_code] += 1
            if response.status_code == 200:
                sessions.append((http, response.headers["mcp-session-id"]))

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, clients[i % len(clients)])
    return sessions, dict(statuses)


@asynccontextmanager
async def held_stream(
    http: httpx.AsyncClient, method: str, headers: dict[str, str], body: str | None, tally: Any
) -> AsyncGenerator[None]:
    """Open one stream and keep it open until exit (a refused or failed one is only counted)."""
    async with AsyncExitStack() as stack:
        try:
            response = await stack.enter_async_context(http.stream(method, PATH, content=body, headers=headers))
            tally[response.status_code] += 1
            if response.status_code == 200:
                lines = response.aiter_lines()
                stack.push_async_callback(lines.aclose)  # type: ignore[attr-defined]  # an async generator
                if body is not None:  # a listen stream: wait for its acknowledgement
                    async for line in lines:
                        if "acknowledged" in line:
                            break
                        if '"error"' in line:  # refused inside the stream (the SDK's own cap)
                            tally[response.status_code] -= 1
                            tally["200 + JSON-RPC error"] += 1
                            break
            else:
                await response.aread()
        except httpx.HTTPError as exc:
            tally[type(exc).__name__] += 1
        yield


async def hold_streams(stack: AsyncExitStack, openers: list[Any], concurrency: int) -> dict[str, int]:
    tally: collections.Counter[Any] = collections.Counter()
    limiter = anyio.Semaphore(concurrency)

    async def one(opener: Any) -> None:
        async with limiter:
            await stack.enter_async_context(opener(tally))

    async with anyio.create_task_group() as tg:
        for opener in openers:
            tg.start_soon(one, opener)
    return {str(k): v for k, v in tally.items()}


async def attack(url: str, pid: int, options: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    async def record(step: str, **facts: Any) -> None:
        row = {"step": step, "rss_mib": rss_mib(pid), **facts, "bystander": await bystander(url)}
        rows.append(row)
        print(json.dumps(row), flush=True)

    addresses = [f"127.0.1.{i + 1}" for i in range(options.addresses)] if options.addresses > 1 else ["127.0.0.1"]
    room = options.sessions + options.get_streams + options.listen_streams + 64
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(client(url, a, room)) for a in addresses]
        await record("idle")
        started = time.monotonic()
        sessions, statuses = await open_sessions(clients, options.sessions, options.concurrency)
        await record(
            "sessions", attempts=options.sessions, answers=statuses, seconds=round(time.monotonic() - started, 1)
        )

        get_headers = {"Accept": "text/event-stream", "MCP-Protocol-Version": LEGACY}
        openers = [
            functools.partial(held_stream, http, "GET", {**get_headers, "Mcp-Session-Id": sid}, None)
            for http, sid in sessions[: options.get_streams]
        ]
        answers = await hold_streams(stack, openers, options.concurrency)
        await record("get_streams", attempts=len(openers), answers=answers)

        listen_headers = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}
        openers = [
            functools.partial(held_stream, clients[i % len(clients)], "POST", listen_headers, LISTEN)
            for i in range(options.listen_streams)
        ]
        answers = await hold_streams(stack, openers, options.concurrency)
        await record("listen_streams", attempts=len(openers), answers=answers)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tree", type=Path, default=HERE, help="hivegate checkout to run (default: this one)")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--get-streams", type=int, default=1_000)
    parser.add_argument("--listen-streams", type=int, default=2_000)
    parser.add_argument("--addresses", type=int, default=1, help="spread the attack over this many source addresses")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--time-limit", type=float, default=300)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server (e.g. a setting)")
    options = parser.parse_args()
    for limit in (options.sessions, options.get_streams, options.listen_streams):
        if not 0 <= limit <= 20_000:
            parser.error("counts are bounded to 20,000")
    env = dict(item.split("=", 1) for item in options.env)
    process, url = start_server(options.tree.resolve(), env)
    try:

        async def bounded() -> list[dict[str, Any]]:
            with anyio.fail_after(options.time_limit):
                return await attack(url, process.pid, options)

        anyio.run(bounded)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    main()
