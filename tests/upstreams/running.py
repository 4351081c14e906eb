"""Run the test upstreams of this package as processes on loopback (bounded start, stopped afterwards)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

SCRIPT = Path(__file__).with_name("a2a_upstream.py")
READY = "a2a-upstream listening on "
STARTUP_TIMEOUT_SECONDS = 30.0


@dataclass
class Upstream:
    url: str  # base URL, no trailing slash; the agent is under /agent
    log: Path | None

    @property
    def agent(self) -> str:
        return f"{self.url}/agent"

    def log_lines(self) -> list[dict[str, Any]]:
        assert self.log is not None
        return [json.loads(line) for line in self.log.read_text("utf-8").splitlines()]


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


@contextmanager
def run_upstream(*args: str, log: Path | None = None) -> Generator[Upstream]:
    """Start the upstream on port 0 with ``args``; yield it once it listens; stop it afterwards."""
    command = [sys.executable, str(SCRIPT), "0", *args]
    if log is not None:
        command += ["--log", str(log)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
    pump.start()
    try:
        seen: list[str] = []
        while True:
            try:
                line = lines.get(timeout=STARTUP_TIMEOUT_SECONDS)
            except queue.Empty:
                raise AssertionError("the upstream did not start in time:\n" + "".join(seen)) from None
            if line is None:
                raise AssertionError("the upstream exited during start-up:\n" + "".join(seen))
            seen.append(line)
            if line.startswith(READY):
                break
        yield Upstream(line.removeprefix(READY).strip(), log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        pump.join(timeout=10)
        process.stdout.close()


MCP_SCRIPT = Path(__file__).with_name("mcp_stdio_upstream.py")
MCP_READY = "mcp-upstream listening on "


@contextmanager
def run_mcp_http_upstream() -> Generator[str]:
    """``mcp_stdio_upstream.py --http`` on a free loopback port: yield its base URL (the MCP endpoint is
    ``/mcp``) once it listens; stop it afterwards (killed when a request in flight keeps it, as uvicorn
    waits for those)."""
    process = subprocess.Popen(
        [sys.executable, str(MCP_SCRIPT), "--http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the ready line (the read ends when the process exits)
        assert line.startswith(MCP_READY), line
        yield line.removeprefix(MCP_READY).strip()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
