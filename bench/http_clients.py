"""Issue 11: what one upstream request costs the gateway's HTTP client, by client, in one run.

    python bench/http_clients.py [--rounds 3] [--requests 3000] [--out bench/results/NAME.json]

Starts the bare official-SDK echo server (``bench/sdk_echo_server.py``, JSON responses) and sends the same
2026-07-28 ``tools/call echo("hello")`` POST to it, one request at a time on one pooled keep-alive
connection, with each client the gateway could use for the ``mcp`` backend's lean hop:

- ``httpx2``: ``AsyncClient.stream`` (the SDK client's HTTP client: httpx2 over httpcore2 and h11);
- ``httpcore2``: its ``AsyncConnectionPool.request`` (the same without httpx2's client layer);
- ``aiohttp``: ``ClientSession.post`` (what ``backends/upstream_http.py`` uses).

Reported per client and round: wall time and this process's CPU time (user + system) per request,
after 200 warm-up requests. The client runs under uvloop, as ``hivegate serve`` does. Loopback only;
bounded (a fixed number of requests, every start-up wait a timeout).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpcore2
import httpx2
import uvloop

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from mcp_hop import start, stop  # noqa: E402  (the bench folder is not a package)

BODY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},'
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},'
    b'"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}}}'
)
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "echo",
}
WARM = 200


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _measure(send: Callable[[], Awaitable[None]], requests: int) -> dict[str, float]:
    for _ in range(WARM):
        await send()
    cpu, wall = _cpu(), time.perf_counter()
    for _ in range(requests):
        await send()
    return {
        "wall_us": round(1e6 * (time.perf_counter() - wall) / requests, 1),
        "cpu_us": round(1e6 * (_cpu() - cpu) / requests, 1),
    }


async def _round(url: str, requests: int) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    async with httpx2.AsyncClient() as client:

        async def httpx2_post() -> None:
            async with client.stream("POST", url, content=BODY, headers=HEADERS) as response:
                await response.aread()

        figures["httpx2"] = await _measure(httpx2_post, requests)
    async with httpcore2.AsyncConnectionPool() as pool:

        async def httpcore2_post() -> None:
            await pool.request("POST", url, content=BODY, headers=list(HEADERS.items()))

        figures["httpcore2"] = await _measure(httpcore2_post, requests)
    async with aiohttp.ClientSession() as session:

        async def aiohttp_post() -> None:
            async with session.post(url, data=BODY, headers=HEADERS) as response:
                await response.read()

        figures["aiohttp"] = await _measure(aiohttp_post, requests)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--out", default=str(BENCH / "results" / "http-clients-latest.json"))
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(BENCH), "NO_COLOR": "1"}
    server, url = start([sys.executable, str(BENCH / "sdk_echo_server.py"), "0"], "sdk listening on ", env)
    rounds: list[dict[str, Any]] = []
    try:
        for number in range(1, args.rounds + 1):
            figures = uvloop.run(_round(f"{url}/mcp", args.requests))
            rounds.append(figures)
            print(
                f"round {number}: "
                + " | ".join(
                    f"{name} {f['cpu_us']:.0f} us CPU, {f['wall_us']:.0f} us wall" for name, f in figures.items()
                ),
                flush=True,
            )
    finally:
        stop(server)
    summary = {
        name: {
            "cpu_us_median": statistics.median(r[name]["cpu_us"] for r in rounds),
            "wall_us_median": statistics.median(r[name]["wall_us"] for r in rounds),
        }
        for name in rounds[0]
    }
    print("medians: " + " | ".join(f"{name} {s['cpu_us_median']:.0f} us CPU" for name, s in summary.items()))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join([Path(sys.executable).name, "bench/http_clients.py", *sys.argv[1:]])
    out.write_text(json.dumps({"command": command, "rounds": rounds, "summary": summary}, indent=2) + "\n")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
