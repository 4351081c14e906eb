"""``hivegate … --help`` as printed: Markdown help renders, flags carry no type (issue 7 item 17)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hivegate

TIMEOUT_SECONDS = 60
SRC = Path(hivegate.__file__).resolve().parent.parent
COMMANDS = [(), ("serve",), ("agents", "apply"), ("users", "create"), ("grants", "revoke")]
"""A sample of the command tree: every command is built by the same helpers (``hivegate.cli.options``)."""


@functools.cache
def _help(*command: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "hivegate", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        env={**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "hivegate")
def test_help_renders_markup_and_shows_flags_without_a_type(command: tuple[str, ...]) -> None:
    """Issue 7 item 17: no flag (``--help``, ``--dev``, ``--prune``…) is labelled ``<bool>``; backticks
    render as code rather than showing; ``[[agents]]`` is printed as written (not eaten as Rich markup)."""
    text = _help(*command)
    assert "<bool>" not in text
    assert "`" not in text
    assert "[]" not in text
    if command and command[-1] not in ("agents", "users", "keys", "grants"):
        assert "--config" in text
        assert "TOML file with settings and [[agents]]" in text
        assert "--database-url" in text


def test_value_options_name_their_value() -> None:
    """Issue 7 item 17: options that take a value show what (``--port PORT``), flags show nothing."""
    serve = _help("serve")
    for option, metavar in (("--config", "FILE"), ("--host", "HOST"), ("--port", "PORT"), ("--database-url", "URL")):
        line = next(line for line in serve.splitlines() if line.lstrip("│ ").startswith(option))
        assert metavar in line, line
    dev = next(line for line in serve.splitlines() if line.lstrip("│ ").startswith("--dev"))
    assert dev.split("--dev", 1)[1].strip().startswith("Development mode"), dev
    apply = _help("agents", "apply")
    assert "TOML file with [[agents]] tables" in apply
    assert "--no-prune" not in apply


def test_version_prints_the_package_version() -> None:
    """Found by issue 7's fresh-clone trial: there was no ``--version``."""
    result = subprocess.run(
        [sys.executable, "-m", "hivegate", "--version"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, f"hivegate {hivegate.__version__}\n"), result.stderr
