"""Run a real hivegate server (``python -m hivegate serve``) on a free loopback port for a test.

The server prints ``hivegate listening on URL`` once it accepts connections; we wait for that
line (bounded), so no test sleeps or polls.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ROOT", "GatewayProcess", "run_gateway"]

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_SECONDS = 30.0


class GatewayProcess:
    """A running server: ``url`` (base, no trailing slash) and its captured output."""

    def __init__(self, process: subprocess.Popen[str], url: str, lines: queue.Queue[str | None]) -> None:
        self.process = process
        self.url = url
        self._lines = lines

    def output(self) -> str:
        """What the server printed so far (stdout and stderr)."""
        out: list[str] = []
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return "".join(out)
            if line is not None:
                out.append(line)

    def wait_for(self, text: str, timeout_seconds: float = STARTUP_TIMEOUT_SECONDS) -> str:
        """Read the server's output until a line containing ``text``; return that line.

        Raises:
            AssertionError: the server exits, or ``timeout_seconds`` pass first (with what it printed).
        """
        seen: list[str] = []
        deadline = time.monotonic() + timeout_seconds
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} in {timeout_seconds} s:\n" + "".join(seen)) from None
            if line is None:
                raise AssertionError(f"hivegate exited before printing {text!r}:\n" + "".join(seen))
            seen.append(line)
            if text in line:
                return line


def _pump(stream: object, lines: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]  # a text-mode pipe
        lines.put(line)
    lines.put(None)


@contextmanager
def run_gateway(
    config: Path | None,
    *,
    database_url: str = "memory://",
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    dev: bool = True,
) -> Generator[GatewayProcess]:
    """Start ``hivegate serve`` with ``config`` on port 0 and yield it once it listens; stop it afterwards.

    ``dev=False`` runs without ``--dev``: the environment must then carry real secrets. The rate limit is
    1,000,000 calls per minute unless ``env`` (or the config file, for an agent) sets another.
    """
    args = [sys.executable, "-m", "hivegate", "serve", "--port", "0", "--database-url", database_url]
    if dev:
        args.append("--dev")
    if config is not None:
        args += ["--config", str(config)]
    args += list(extra_args)
    # Tests not about rate limits make many calls a minute: a limit they never reach, unless they set one.
    proc_env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "HIVEGATE_RATE_LIMITS__CALLS_PER_MINUTE": "1000000",
        **(env or {}),
    }
    # this checkout's src first, whatever PYTHONPATH the test passes (else a worktree runs another install's code)
    proc_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), proc_env.get("PYTHONPATH")) if p)
    process = subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=proc_env
    )
    lines: queue.Queue[str | None] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
    pump.start()
    seen: list[str] = []
    url = None
    try:
        while url is None:
            try:
                line = lines.get(timeout=STARTUP_TIMEOUT_SECONDS)
            except queue.Empty:
                raise RuntimeError("hivegate did not start in time:\n" + "".join(seen)) from None
            if line is None:
                raise RuntimeError("hivegate exited during start-up:\n" + "".join(seen))
            seen.append(line)
            if line.startswith("hivegate listening on "):
                url = line.removeprefix("hivegate listening on ").strip()
        yield GatewayProcess(process, url, lines)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        pump.join(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
