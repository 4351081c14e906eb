"""An agent module that shows the call contract at work (issue 10 items 1-2), and the test's side of its markers.

A test writes :data:`CONTRACT_AGENT` as ``contract_agent.py`` into a folder that has a ``marks``
subfolder and puts that folder on the gateway's ``PYTHONPATH``. ``contract_agent:reply``:

- appends ``"AGENT_ID CONTEXT_ID"`` as a line to ``marks/calls-TAG`` (``TAG``: :func:`tag` of the
  message) each time it runs, so the test reads how often the backend ran and in which conversation
  (:func:`calls_of`);
- for a message starting with ``hold:``, waits (30 s at most) until ``marks/release-TAG`` exists
  (:func:`release`), so calls overlap for real;
- replies with JSON: ``{"message", "agent", "context_id", "earlier": [[role, text], ...]}``, the
  earlier turns being ``await invocation.earlier_turns(20)`` (:func:`parse_reply`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, cast

import orjson

__all__ = ["CONTRACT_AGENT", "calls_of", "parse_reply", "release", "tag"]

CONTRACT_AGENT = '''
import hashlib
import json
import pathlib

import anyio

MARKS = pathlib.Path(__file__).parent / "marks"


def _tag(message):
    return hashlib.sha256(message.encode("utf-8")).hexdigest()[:24]


async def reply(invocation):
    """Record the call, hold on "hold:" until released, and reply with what the call carried."""
    tag = _tag(invocation.message)
    with open(MARKS / f"calls-{tag}", "a", encoding="utf-8") as calls:
        calls.write(f"{invocation.agent_id} {invocation.context_id}\\n")
    if invocation.message.startswith("hold:"):
        released = anyio.Path(MARKS / f"release-{tag}")
        with anyio.fail_after(30):
            while not await released.exists():
                await anyio.sleep(0.02)
    earlier = await invocation.earlier_turns(20)
    return json.dumps(
        {
            "message": invocation.message,
            "agent": invocation.agent_id,
            "context_id": invocation.context_id,
            "earlier": [[str(turn.role), turn.text] for turn in earlier],
        }
    )
'''


def tag(message: str) -> str:
    """The marker files' name part for ``message`` (the agent module's ``_tag``)."""
    return hashlib.sha256(message.encode("utf-8")).hexdigest()[:24]


def calls_of(folder: Path, message: str) -> list[tuple[str, str]]:
    """The backend's runs for ``message`` so far, in order: ``(agent_id, context_id)`` each."""
    calls = folder / "marks" / f"calls-{tag(message)}"
    if not calls.exists():
        return []
    lines = calls.read_text(encoding="utf-8").splitlines()
    return [(agent, context_id) for agent, context_id in (line.split(" ", 1) for line in lines)]


def release(folder: Path, message: str) -> None:
    """Let the held calls of ``message`` (a ``hold:`` message) reply."""
    (folder / "marks" / f"release-{tag(message)}").write_text("", encoding="utf-8")


def parse_reply(text: str) -> dict[str, Any]:
    """The agent's reply as JSON: ``message``, ``agent``, ``context_id`` and ``earlier`` ([role, text] pairs)."""
    decoded = orjson.loads(text)
    assert isinstance(decoded, dict), text
    return cast(dict[str, Any], decoded)
