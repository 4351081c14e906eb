"""Check, before agents are written, that their ``python`` backends load: the module imports and the
attribute exists and has the right type (a callable, or an SDK ``MCPServer`` / low-level ``Server``).

The check runs in a child process (``python -m hivegate.backends.check``): importing an agent's
module runs its code, and that code's side effects (threads, open files, ``sys.path`` changes,
prints) stay in the child instead of the CLI. The child builds each backend exactly as a server does
(:func:`hivegate.backends.python.create_python_backend`) without starting it, so a server's lifespan
is not entered here.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hivegate.agents.model import AgentSpec, PythonBackendSpec

__all__ = ["BackendProblem", "check_python_backends"]

CHECK_TIMEOUT_SECONDS = 60.0
"""How long the child may take to import every backend of one agents file."""


@dataclass(frozen=True, slots=True)
class BackendProblem:
    """Why one agent's backend cannot load: ``message`` names the exception, ``where`` the failing line."""

    agent_id: str
    message: str
    where: str | None = None

    def __str__(self) -> str:
        return f"agent {self.agent_id!r}: {self.message}" + (f" ({self.where})" if self.where else "")


def check_python_backends(
    specs: Sequence[AgentSpec], timeout_seconds: float = CHECK_TIMEOUT_SECONDS
) -> list[BackendProblem]:
    """Import every ``python`` backend of ``specs`` in a child process; the problems found, in spec order.

    An empty list means every backend loads. A child that crashes or outlives ``timeout_seconds``
    is reported as a problem of every agent it was checking (nothing can be said to load).
    """
    checked = [spec for spec in specs if isinstance(spec.backend, PythonBackendSpec)]
    if not checked:
        return []
    payload = json.dumps([spec.model_dump(mode="json", by_alias=True) for spec in checked])
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH"))))}
    with tempfile.TemporaryDirectory(prefix="hivegate-check-") as folder:
        out = Path(folder) / "result.json"
        try:
            completed = subprocess.run(
                [sys.executable, "-m", "hivegate.backends.check", str(out)],
                input=payload,
                capture_output=True,
                text=True,
                timeout=timeout_seconds,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return [
                BackendProblem(s.id, f"importing the backends took longer than {timeout_seconds:g} s") for s in checked
            ]
        if completed.returncode != 0 or not out.is_file():
            tail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
            return [
                BackendProblem(s.id, f"the backend check crashed (status {completed.returncode}): {tail}")
                for s in checked
            ]
        found = json.loads(out.read_text(encoding="utf-8"))
    return [BackendProblem(item["agent_id"], item["message"], item.get("where")) for item in found]


def _innermost_frame(exc: BaseException) -> str | None:
    """``file:line`` of the innermost frame of ``exc`` (or its cause), in the agent's code when it raised."""
    cause = exc.__cause__ or exc
    if isinstance(cause, SyntaxError) and cause.filename:
        return f"{cause.filename}:{cause.lineno}"
    package = str(Path(__file__).resolve().parent.parent)
    frames = [
        frame
        for frame in traceback.extract_tb(cause.__traceback__)
        if not frame.filename.startswith(("<", package)) and "importlib" not in frame.filename
    ]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def _main(out_file: str) -> int:
    """The child: specs as JSON on stdin; problems as JSON into ``out_file`` (stdout is the agents' own)."""
    from hivegate.backends.python import BackendLoadError, create_python_backend

    specs = [AgentSpec.model_validate(item) for item in json.loads(sys.stdin.read())]
    problems: list[dict[str, str | None]] = []
    with contextlib.redirect_stdout(sys.stderr):
        for spec in specs:
            try:
                create_python_backend(spec)
            except BackendLoadError as exc:
                problems.append({"agent_id": spec.id, "message": str(exc), "where": _innermost_frame(exc)})
    Path(out_file).write_text(json.dumps(problems), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
