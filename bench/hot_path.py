"""CPU per MCP request (or A2A ``SendMessage``) through hivegate's whole ASGI app, in process (no sockets).

    PYTHONPATH=src taskset -c 1 .venv/bin/python bench/hot_path.py [--rounds 7] [--calls 5000]
        [--endpoint agent|user] [--workload tools_call|legacy_tools_call|a2a_send] [--profile FILE.prof]

The gate set-up of ``bench/run.py --gate`` (``bench/gate_setup.py``: the echo agent requiring
credentials, user ``bench``, one ``oag_`` key, SQLite in a temporary folder) is opened with
:meth:`hivegate.gateway.Gateway.open` and served by :func:`hivegate.app.create_app`, lifespan
running. Each call is the request wrk sends in ``bench/run.py`` (same headers, ``Authorization:
Bearer oag_…``), fed as one ASGI ``http.request`` and answered into a list; every answer is
checked (status 200, the echo text, no error). The figure is CPU seconds (``time.process_time``)
per call over ``--calls`` calls, per round; the median and range over ``--rounds`` are printed,
so a change can be compared with its parent under the same conditions (``--tree`` runs another
checkout's ``src``, e.g. ``git archive COMMIT | tar -x -C DIR``). HTTP parsing and socket I/O
(about 15 µs and more per request, see ``bench/http_protocol_overhead.py``) are not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
_Headers = list[tuple[bytes, bytes]]
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def _scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "server": ("127.0.0.1", 8094),
        "client": ("127.0.0.1", 50000),
        "state": {},
    }


class _Exchange:
    """One request's receive and send."""

    __slots__ = ("body", "delivered", "sent", "status")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent: list[bytes] = []
        self.status = 0
        self.delivered = False

    async def receive(self) -> dict[str, Any]:
        if not self.delivered:
            self.delivered = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await asyncio.Event().wait()  # a client that stays connected
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.sent.append(message.get("body", b""))


async def _call(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    exchange = _Exchange(body)
    await app(_scope(path, headers), exchange.receive, exchange.send)
    answer = b"".join(exchange.sent)
    if exchange.status != 200 or b'"hello"' not in answer or b'"error"' in answer or b'"isError":true' in answer:
        raise SystemExit(f"bad answer {exchange.status}: {answer[:400]!r}")
    return answer


async def _session(app: Any, path: str, base: list[tuple[bytes, bytes]]) -> str:
    """Open a handshake-era session (initialize + initialized) the way the SDK client does."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    def receive_of(body: bytes) -> Any:
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        return receive

    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
    }
    headers = [*base, (b"accept", b"application/json, text/event-stream"), (b"content-type", b"application/json")]
    task = asyncio.ensure_future(app(_scope(path, headers), receive_of(json.dumps(init).encode()), send))
    for _ in range(1000):
        if any(m["type"] == "http.response.body" and not m.get("more_body") for m in sent):
            break
        await asyncio.sleep(0.001)
    task.cancel()
    start = next(m for m in sent if m["type"] == "http.response.start")
    session = dict(start["headers"])[b"mcp-session-id"].decode()
    sent.clear()
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers2 = [*headers, (b"mcp-session-id", session.encode()), (b"mcp-protocol-version", LEGACY.encode())]
    await app(_scope(path, headers2), receive_of(json.dumps(initialized).encode()), send)
    return session


def _request(args: argparse.Namespace, auth: list[tuple[bytes, bytes]], session: str | None) -> tuple[_Headers, bytes]:
    """The headers and body wrk sends for ``args.workload`` (``session``: the legacy session's id)."""
    if args.workload == "a2a_send":  # bench/wrk/a2a.lua's request (one messageId here: the task ids differ)
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}})
        return [*auth, (b"a2a-version", b"1.0"), (b"content-type", b"application/json")], body.encode()
    params: dict[str, Any] = {"name": "echo", "arguments": {"message": "hello"}}
    if session is None:
        params["_meta"] = META
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    common = [(b"accept", b"application/json, text/event-stream"), (b"content-type", b"application/json")]
    if session is not None:
        return [*auth, (b"mcp-protocol-version", LEGACY.encode()), (b"mcp-session-id", session.encode()), *common], body
    modern = [(b"mcp-protocol-version", MODERN.encode()), (b"mcp-method", b"tools/call"), (b"mcp-name", b"echo")]
    return [*auth, *modern, *common, (b"content-length", str(len(body)).encode())], body


async def _timed(args: argparse.Namespace, app: Any, path: str, headers: _Headers, body: bytes) -> list[float]:
    """CPU µs per call, per round (after a warm-up of 500 calls and a frozen heap, as ``serve`` freezes it)."""
    for _ in range(500):  # warm-up: caches, lazy builds
        await _call(app, path, headers, body)
    gc.collect()
    gc.freeze()
    per_round: list[float] = []
    profiler = cProfile.Profile() if args.profile else None
    for _ in range(args.rounds):
        if profiler:
            profiler.enable()
        start = time.process_time()
        for _ in range(args.calls):
            await _call(app, path, headers, body)
        per_round.append((time.process_time() - start) / args.calls * 1e6)
        if profiler:
            profiler.disable()
    if profiler:
        profiler.dump_stats(args.profile)
    return per_round


async def _run(args: argparse.Namespace, config: Path, creds: dict[str, Any]) -> list[float]:
    from hivegate.app import create_app
    from hivegate.cli.options import settings_from

    settings = settings_from(config, announce=False)
    try:
        from hivegate.gateway import Gateway
    except ImportError:  # a tree from before issue 8 (--tree): create_app(settings) opened everything itself
        gateway = None
        app: Any = create_app(settings)  # type: ignore[arg-type]
    else:
        gateway = await Gateway.open(settings)
        app = create_app(gateway)
    path = "/echo/mcp" if args.endpoint == "agent" else "/mcp"
    if args.workload == "a2a_send":
        path = "/echo/a2a"
    auth = [(b"host", b"127.0.0.1:8094"), (b"authorization", f"Bearer {creds['key']}".encode())]
    started = asyncio.Event()
    stop = asyncio.Event()

    async def lifespan_receive() -> dict[str, Any]:
        if not started.is_set():
            started.set()
            return {"type": "lifespan.startup"}
        await stop.wait()
        return {"type": "lifespan.shutdown"}

    async def lifespan_send(message: Any) -> None:
        pass

    life = asyncio.ensure_future(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, lifespan_receive, lifespan_send)
    )
    await asyncio.sleep(0.2)  # the lifespan's start-up (agent runtimes) before the first call
    session = await _session(app, path, auth) if args.workload == "legacy_tools_call" else None
    headers, body = _request(args, auth, session)
    try:
        return await _timed(args, app, path, headers, body)
    finally:
        stop.set()
        await life
        if gateway is not None:
            await gateway.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--endpoint", choices=["agent", "user"], default="agent")
    parser.add_argument("--workload", choices=["tools_call", "legacy_tools_call", "a2a_send"], default="tools_call")
    parser.add_argument("--tree", help="a checkout whose bench/gate_setup.py set-up and examples to use")
    parser.add_argument("--profile", help="write cProfile stats of the timed calls to this file")
    args = parser.parse_args()
    import uvloop

    with tempfile.TemporaryDirectory(prefix="hivegate-hot-path-") as tmp:
        tree = Path(args.tree).resolve() if args.tree else BENCH.parent
        out = subprocess.run(
            [sys.executable, str(BENCH / "gate_setup.py"), "setup", tmp, str(tree)],
            check=True,
            capture_output=True,
            text=True,
        )
        sys.path.insert(0, tmp)  # the echo agent's module
        if args.tree:
            sys.path.insert(0, str(tree / "src"))
        per_round = uvloop.run(_run(args, Path(tmp) / "gate.toml", json.loads(out.stdout)))
    shown = ", ".join(f"{x:.1f}" for x in per_round)
    print(f"{args.endpoint} {args.workload}: {statistics.median(per_round):.1f} µs CPU per call (rounds: {shown})")


if __name__ == "__main__":
    main()
