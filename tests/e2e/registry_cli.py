"""Seed a gateway's registry through the real CLI: ``python -m hivegate ARGS --database-url URL``.

The e2e tests create users, mint keys and apply agent files the way an operator does, in a
subprocess of this checkout's ``src`` (plus the folders a test names, for the agents' modules),
each call bounded by ``CLI_TIMEOUT_SECONDS``. A call that fails fails the test with its output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

from tests.gateway_process import ROOT

__all__ = ["CLI_TIMEOUT_SECONDS", "cli_at_once", "create_user_with_key", "first_line", "run_cli"]

CLI_TIMEOUT_SECONDS = 90


def _env(pythonpath: Sequence[str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *pythonpath]), "NO_COLOR": "1"}


def _command(database_url: str, args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "hivegate", *args, "--database-url", database_url]


def run_cli(database_url: str, *args: str, stdin: str = "", pythonpath: Sequence[str] = ()) -> str:
    """``python -m hivegate ARGS --database-url URL``; its stdout (it must exit 0).

    ``pythonpath``: folders after this checkout's ``src`` on the CLI's ``PYTHONPATH`` (where
    ``agents apply`` finds the agents' modules).
    """
    result = subprocess.run(
        _command(database_url, args),
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(pythonpath),
        cwd=ROOT,
        timeout=CLI_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return result.stdout


def cli_at_once(database_url: str, *commands: tuple[tuple[str, ...], str], pythonpath: Sequence[str] = ()) -> list[str]:
    """Run ``python -m hivegate ARGS`` for each ``(args, stdin)`` at once; their stdouts, in order (each exits 0)."""
    env = _env(pythonpath)
    processes = [
        subprocess.Popen(
            _command(database_url, args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for args, _ in commands
    ]
    outputs: list[str] = []
    for process, (args, stdin) in zip(processes, commands, strict=True):
        out, err = process.communicate(stdin, timeout=CLI_TIMEOUT_SECONDS)
        assert process.returncode == 0, f"{args}: {out}{err}"
        outputs.append(out)
    return outputs


def first_line(stdout: str) -> str:
    """The first line of a CLI's output, stripped: the key ``keys create`` prints."""
    return stdout.splitlines()[0].strip()


def create_user_with_key(database_url: str, user: str, *, pythonpath: Sequence[str] = ()) -> str:
    """Create ``user`` (password ``"{user}'s password"``) and mint an ``oag_`` key of theirs; the key."""
    run_cli(
        database_url, "users", "create", user, "--password-stdin", stdin=f"{user}'s password\n", pythonpath=pythonpath
    )
    return first_line(run_cli(database_url, "keys", "create", "--user", user, pythonpath=pythonpath))
