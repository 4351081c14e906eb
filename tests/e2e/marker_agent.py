"""An agent module that records its calls in marker files, and the bounded wait for a marker.

A test writes :data:`WAITER_AGENT` as ``waiter_agent.py`` into a folder that has a ``marks``
subfolder and puts that folder on the gateway's ``PYTHONPATH``. Its agents:

- ``waiter_agent:reply`` writes ``marks/started-MESSAGE``, waits (120 s) until cancelled, then
  writes ``marks/cancelled-MESSAGE`` and lets the cancellation through;
- ``waiter_agent:fail`` raises an ``AgentError`` naming the message.

The gateway's process writes the markers; :func:`wait_for_marker` polls for one with a deadline.
"""

from __future__ import annotations

from pathlib import Path

import anyio

__all__ = ["WAITER_AGENT", "wait_for_marker"]

WAITER_AGENT = '''
import pathlib

import anyio

MARKS = pathlib.Path(__file__).parent / "marks"


async def reply(invocation):
    """Wait until cancelled; record the start and the cancellation (the tests read the marker files)."""
    (MARKS / f"started-{invocation.message}").write_text("", encoding="utf-8")
    try:
        await anyio.sleep(120)
    except anyio.get_cancelled_exc_class():
        (MARKS / f"cancelled-{invocation.message}").write_text("", encoding="utf-8")
        raise
    return "too late"


def fail(invocation):
    from hivegate.errors import AgentError

    raise AgentError(f"cannot answer {invocation.message}")
'''


async def wait_for_marker(path: Path, seconds: float = 10.0) -> None:
    """Poll for ``path`` (the gateway's process writes it) until it exists; fail after ``seconds``.

    Raises:
        TimeoutError: ``path`` did not appear within ``seconds``.
    """
    marker = anyio.Path(path)
    with anyio.fail_after(seconds):
        while not await marker.exists():  # noqa: ASYNC110  # another process writes it: nothing to wait on here
            await anyio.sleep(0.05)
