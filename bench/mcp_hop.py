"""Issue 11: what the ``mcp`` backend's hop costs: ``tools/call`` through hivegate versus straight to the
upstream SDK server, in one run.

    python bench/mcp_hop.py [--rounds 3] [--duration 5] [--connections 1,16] [--out bench/results/NAME.json]
                            [--fastmcp-python .bench-fastmcp/bin/python]

Starts the bare official-SDK echo server (``bench/sdk_echo_server.py``: ``MCPServer``, JSON responses,
uvicorn with uvloop and httptools) and ``hivegate serve`` on a SQLite database in a temporary folder,
with the agent ``fed`` fronting that server (``backend = { type = "mcp", url = … }``) and a user
``bench`` whose ``oag_`` key every request through the gateway carries (credentials on, as users
run it). Then, for each connection count and each round, ``wrk`` (``bench/wrk/mcp.lua``, every
response checked) runs the same 2026-07-28 ``tools/call echo("hello")`` against the server directly
and through the gateway, one after the other. Reported: req/s, p50 and p99 of each, and what the
gateway adds (through minus direct) per round and as the median over the rounds. Target (issue 11):
at most 1 ms added at p50 and 2 ms at p99, at 1 and at 16 connections.

With ``--fastmcp-python`` (the Python of a separate virtual environment holding FastMCP 4.1.6:
``python3 -m venv .bench-fastmcp && .bench-fastmcp/bin/pip install fastmcp==4.1.6``), FastMCP's proxy
(``bench/fastmcp_proxy.py``: ``create_proxy``) runs in front of the same SDK server and is measured in
the same rounds, for comparison. It speaks the handshake era only: its ``tools/call`` runs in one
session (``initialize`` first), as a 2025-11-25 client's would.

Loopback only; bounded (every run has a duration, every wait a timeout). Both servers and wrk share
this machine's cores (no pinning): run it on a quiet machine, and read the per-round figures.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
MODERN = "2026-07-28"
BODY = (
    ',"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},'
    f'"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}'
)
LEGACY = "2025-11-25"
LEGACY_BODY = ',"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}'
HEADERS = [
    "Accept: application/json, text/event-stream",
    "Content-Type: application/json",
    f"MCP-Protocol-Version: {MODERN}",
    "Mcp-Method: tools/call",
    "Mcp-Name: echo",
]
START_SECONDS = 60.0


class BenchError(RuntimeError):
    pass


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def start(argv: list[str], ready: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Start ``argv``; its URL once it prints a line starting with ``ready``."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    deadline = time.monotonic() + START_SECONDS
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            process.kill()
            raise BenchError(f"{argv[1]} did not start:\n{''.join(seen)}") from None
        if line is None:
            raise BenchError(f"{argv[1]} exited during start-up:\n{''.join(seen)}")
        seen.append(line)
        if ready in line:
            return process, line.split(ready, 1)[1].strip().split()[0].rstrip("/")


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


def cli(env: dict[str, str], database_url: str, *args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-m", "hivegate", *args, "--database-url", database_url],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"hivegate {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def wrk(url: str, connections: int, duration: int, auth: str | None, session: str | None = None) -> dict[str, Any]:
    """One ``wrk`` run of the tools/call against ``url`` (the 2026-07-28 wire; in the handshake-era
    ``session`` when given); its BENCH_JSON summary."""
    binary = shutil.which("wrk")
    if binary is None:
        raise BenchError("wrk is not installed (apt-get install wrk)")
    env = {**os.environ, **({"MCP_BENCH_HEADER": f"Authorization: {auth}"} if auth else {})}
    argv = [binary, "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "10s", "--latency"]
    if session is None:
        argv += ["-s", str(BENCH / "wrk" / "mcp.lua"), url, "--", '"text":"hello"', BODY, *HEADERS]
    else:
        legacy = [HEADERS[0], HEADERS[1], f"MCP-Protocol-Version: {LEGACY}", f"Mcp-Session-Id: {session}"]
        argv += ["-s", str(BENCH / "wrk" / "mcp.lua"), url, "--", '"text":"hello"', LEGACY_BODY, *legacy]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=duration + 60, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            result: dict[str, Any] = json.loads(line.removeprefix("BENCH_JSON "))
            if result.get("bad") or any(result.get("errors", {}).values()):
                raise BenchError(f"bad responses from {url}: {result}")
            return result
    raise BenchError(f"wrk printed no summary for {url}:\n{done.stdout}\n{done.stderr}")


def legacy_session(url: str) -> str:
    """A handshake-era session at ``url`` (``initialize``, then ``notifications/initialized``); its id."""
    import httpx  # the bench's own venv has it (hivegate's dependencies)

    accept = {"Accept": "application/json, text/event-stream"}
    hello = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "mcp_hop", "version": "1"}}
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            answer = httpx.post(
                url,
                json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
                headers=accept,
                timeout=10,
            )
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise BenchError(f"no answer to initialize from {url}") from None
            time.sleep(0.2)
    session = answer.headers.get("mcp-session-id")
    if answer.status_code != 200 or not session:
        raise BenchError(f"initialize at {url} failed: {answer.status_code} {answer.text[:300]}")
    headers = {**accept, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
    httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=10)
    return str(session)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--connections", default="1,16")
    parser.add_argument("--out", default=str(BENCH / "results" / "mcp-hop-latest.json"))
    parser.add_argument("--fastmcp-python", help="a Python with fastmcp 4.1.6: its proxy is measured too")
    args = parser.parse_args()
    counts = [int(c) for c in args.connections.split(",")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(BENCH)]), "NO_COLOR": "1"}
    env["HIVEGATE_RATE_LIMITS__ENABLED"] = "false"
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hivegate-hop-") as folder:
        upstream, upstream_url = start(
            [sys.executable, str(BENCH / "sdk_echo_server.py"), "0"], "sdk listening on ", env
        )
        gateway = None
        proxy = None
        try:
            database_url = f"sqlite+aiosqlite:///{folder}/gate.db"
            cli(env, database_url, "users", "create", "bench", "--password-stdin", stdin="bench password\n")
            key = cli(env, database_url, "keys", "create", "--user", "bench").splitlines()[0].strip()
            agents = Path(folder) / "agents.toml"
            agents.write_text(
                f'[[agents]]\nid = "fed"\nname = "Federated"\nowner = "bench"\n'
                f'backend = {{ type = "mcp", url = "{upstream_url}/mcp" }}\n',
                encoding="utf-8",
            )
            cli(env, database_url, "agents", "apply", str(agents))
            serve = [sys.executable, "-m", "hivegate", "serve", "--port", "0", "--dev", "--database-url", database_url]
            gateway, gateway_url = start(serve, "hivegate listening on ", env)
            wrk(f"{gateway_url}/fed/mcp", 1, 1, f"Bearer {key}")  # warm: the upstream client opens
            wrk(f"{upstream_url}/mcp", 1, 1, None)
            proxy_url = session = None
            if args.fastmcp_python:
                port = free_port()
                proxy, _ = start(
                    [args.fastmcp_python, str(BENCH / "fastmcp_proxy.py"), f"{upstream_url}/mcp", str(port)],
                    "fastmcp-proxy listening on ",
                    {k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                )
                proxy_url = f"http://127.0.0.1:{port}/mcp"
                session = legacy_session(proxy_url)
                wrk(proxy_url, 1, 1, None, session)
            for connections in counts:
                for round_ in range(1, args.rounds + 1):
                    direct = wrk(f"{upstream_url}/mcp", connections, args.duration, None)
                    through = wrk(f"{gateway_url}/fed/mcp", connections, args.duration, f"Bearer {key}")
                    row: dict[str, Any] = {
                        "connections": connections,
                        "round": round_,
                        "direct": _figures(direct),
                        "through": _figures(through),
                    }
                    row["added_p50_ms"] = round(row["through"]["p50_ms"] - row["direct"]["p50_ms"], 3)
                    row["added_p99_ms"] = round(row["through"]["p99_ms"] - row["direct"]["p99_ms"], 3)
                    if proxy_url is not None:
                        fastmcp = _figures(wrk(proxy_url, connections, args.duration, None, session))
                        row["fastmcp"] = fastmcp
                        print(
                            f"c={connections:<3} round {round_}: FastMCP proxy {fastmcp['rps']:>8,.1f} req/s "
                            f"p50 {fastmcp['p50_ms']:.2f} p99 {fastmcp['p99_ms']:.2f} ms",
                            flush=True,
                        )
                    rows.append(row)
                    print(
                        f"c={connections:<3} round {round_}: direct {row['direct']['rps']:>8,.0f} req/s "
                        f"p50 {row['direct']['p50_ms']:.2f} p99 {row['direct']['p99_ms']:.2f} ms | through "
                        f"{row['through']['rps']:>8,.0f} req/s p50 {row['through']['p50_ms']:.2f} "
                        f"p99 {row['through']['p99_ms']:.2f} ms | added p50 {row['added_p50_ms']:+.2f} "
                        f"p99 {row['added_p99_ms']:+.2f} ms",
                        flush=True,
                    )
        finally:
            if proxy is not None:
                stop(proxy)
            if gateway is not None:
                stop(gateway)
            stop(upstream)
    summary = {}
    for connections in counts:
        mine = [r for r in rows if r["connections"] == connections]
        summary[str(connections)] = {
            "added_p50_ms_median": round(statistics.median(r["added_p50_ms"] for r in mine), 3),
            "added_p99_ms_median": round(statistics.median(r["added_p99_ms"] for r in mine), 3),
            "direct_rps_median": round(statistics.median(r["direct"]["rps"] for r in mine)),
            "through_rps_median": round(statistics.median(r["through"]["rps"] for r in mine)),
        }
        if all("fastmcp" in r for r in mine) and mine:
            summary[str(connections)]["fastmcp_rps_median"] = round(
                statistics.median(r["fastmcp"]["rps"] for r in mine), 1
            )
            summary[str(connections)]["fastmcp_p50_ms_median"] = round(
                statistics.median(r["fastmcp"]["p50_ms"] for r in mine), 2
            )
            summary[str(connections)]["fastmcp_p99_ms_median"] = round(
                statistics.median(r["fastmcp"]["p99_ms"] for r in mine), 2
            )
        got = summary[str(connections)]
        met = got["added_p50_ms_median"] <= 1.0 and got["added_p99_ms_median"] <= 2.0
        print(
            f"c={connections}: added p50 {got['added_p50_ms_median']:+.2f} ms, "
            f"p99 {got['added_p99_ms_median']:+.2f} ms "
            f"(medians of {len(mine)} rounds); target <= 1 / <= 2 ms: {'MET' if met else 'MISSED'}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join([Path(sys.executable).name, "bench/mcp_hop.py", *sys.argv[1:]])
    out.write_text(json.dumps({"command": command, "rows": rows, "summary": summary}, indent=2) + "\n")
    print(f"results: {out}")
    return 0


def _figures(result: dict[str, Any]) -> dict[str, float]:
    latency = result["latency_ms"]
    return {"rps": float(result["rps"]), "p50_ms": float(latency["p50"]), "p99_ms": float(latency["p99"])}


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"mcp_hop: {exc}", file=sys.stderr)
        sys.exit(1)
