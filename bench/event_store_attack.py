"""Memory under attack, event store: RSS of a real server before and after a flood of SSE events.

The attack of issue 7 item 2: one anonymous client (an ``auth = "none"`` echo agent), one
2025-11-25 session, N ``tools/call``s with a progress token and a one-word message of SIZE bytes
(each keeps a priming event, a progress notification and a result carrying the message twice),
then ``DELETE`` of the session. RSS (``VmRSS`` of the server process) is read after a warm-up
call, after the flood and after the DELETE.

    python bench/event_store_attack.py [--calls 300] [--size 3500000] [--clients 1] [--tree DIR] [--env K=V ...]

``--clients N`` spreads the calls over N client addresses (127.0.0.2 …), N principals of the
anonymous agent, to reach the global budget rather than one principal's.

``--tree`` runs another checkout's ``src`` (e.g. ``git archive COMMIT | tar -x -C DIR``). Prints
one JSON object: the RSS readings in MiB and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
AGENT = """
[[agents]]
id = "open"
name = "Open echo"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "echo_agent:reply" }
"""
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
VERSION = "2025-11-25"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _start(tree: Path, folder: Path, extra_env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    config = folder / "agents.toml"
    config.write_text(AGENT, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(ROOT / "examples")]),
        "HIVEGATE_SERVER__LOG_LEVEL": "warning",
        **extra_env,
    }
    argv = [sys.executable, "-m", "hivegate", "serve", "--dev", "--port", "0", "--config", str(config)]
    argv += ["--database-url", f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"]
    process = subprocess.Popen(argv, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    for line in process.stdout:
        if line.startswith("hivegate listening on "):
            return process, line.removeprefix("hivegate listening on ").strip()
        if time.monotonic() > deadline:
            break
    process.kill()
    raise RuntimeError("the server did not start")


def _call(client: httpx.Client, url: str, session: dict[str, str], request_id: int, message: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "open", "arguments": {"message": message}, "_meta": {"progressToken": request_id}},
    }
    with client.stream("POST", url, json=body, headers={**HEADERS, **session}) as response:
        response.raise_for_status()
        for _ in response.iter_bytes():  # read the whole SSE stream (it ends after the result)
            pass


def _open(client: httpx.Client, url: str) -> dict[str, str]:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "a", "version": "0"}},
    }
    opened = client.post(url, json=initialize, headers=HEADERS)
    session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": VERSION}
    client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**HEADERS, **session})
    return session


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls in all (split evenly between the clients)")
    parser.add_argument("--size", type=int, default=3_500_000)
    parser.add_argument("--clients", type=int, default=1, help="client addresses 127.0.0.2, .3, … (one session each)")
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--env", action="append", default=[], help="K=V for the server's environment")
    args = parser.parse_args()
    extra_env = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory() as tmp:
        process, base = _start(args.tree.resolve(), Path(tmp), extra_env)
        url = f"{base}/open/mcp"
        clients = [
            httpx.Client(timeout=120, transport=httpx.HTTPTransport(local_address=f"127.0.0.{2 + n}"))
            for n in range(args.clients)
        ]
        try:
            sessions = [_open(client, url) for client in clients]
            _call(clients[0], url, sessions[0], 1, "warm up")
            before = _rss_mib(process.pid)
            message = "x" * args.size
            started = time.monotonic()
            for n in range(args.calls):
                _call(clients[n % args.clients], url, sessions[n % args.clients], 10 + n, message)
            seconds = time.monotonic() - started
            after = _rss_mib(process.pid)
            deleted = sorted({c.delete(url, headers=s).status_code for c, s in zip(clients, sessions, strict=True)})
            after_delete = _rss_mib(process.pid)
        finally:
            for client in clients:
                client.close()
            process.terminate()
            process.wait(timeout=30)
    result = {
        "tree": str(args.tree),
        "calls": args.calls,
        "size": args.size,
        "clients": args.clients,
        "env": extra_env,
        "rss_before_mib": round(before),
        "rss_after_flood_mib": round(after),
        "delete_status": deleted,
        "rss_after_delete_mib": round(after_delete),
        "flood_seconds": round(seconds, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
