"""The ``mcp`` backend's own stdio transport (``hivegate.backends.stdio_upstream``), in process, on real child
processes: the line splitter (hypothesis: any chunking of a stream gives the same lines; a line past the
cap always cuts off, and nothing past the cap is ever held), the cut-off of a child that floods or
garbles its stdout, stderr in the log with the agent id (rate-limited), and the stop (stdin, SIGTERM,
SIGKILL, the child's own children, no zombie).
"""

from __future__ import annotations

import itertools
import logging
import os
import resource
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from hivegate.backends.base import failure_line
from hivegate.backends.stdio_upstream import (
    KILL_GRACE_SECONDS,
    LOG_LINES_PER_SECOND,
    MAX_BAD_LINES,
    STOP_GRACE_SECONDS,
    LineSplitter,
    StdioTransport,
)

TIMEOUT = 30
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


# -- the line splitter -------------------------------------------------------------------------------------


def chunked(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """``data`` cut at the positions ``cuts`` (any order, repeats allowed)."""
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def split_all(splitter: LineSplitter, chunks: Sequence[bytes], limit: int) -> list[bytes]:
    lines: list[bytes] = []
    for chunk in chunks:
        lines += splitter.feed(chunk)
        assert len(splitter.rest()) <= limit  # never more than the cap held
    return lines


LIMIT = 16
short_line = st.binary(max_size=LIMIT).map(lambda b: b.replace(b"\n", b" "))
any_line = st.binary(max_size=3 * LIMIT).map(lambda b: b.replace(b"\n", b" "))
cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=40)


@given(lines=st.lists(short_line, max_size=20), cuts=cuts, last=short_line)
@settings(max_examples=300, deadline=None)
def test_any_chunking_of_a_stream_gives_the_same_lines(lines: list[bytes], cuts: list[int], last: bytes) -> None:
    data = b"".join(line + b"\n" for line in lines) + last  # ``last``: an unfinished line
    splitter = LineSplitter(LIMIT)
    assert split_all(splitter, chunked(data, cuts), LIMIT) == lines
    assert not splitter.too_long
    assert splitter.rest() == last


@given(
    before=st.lists(short_line, max_size=10),
    long=st.binary(min_size=LIMIT + 1, max_size=4 * LIMIT).map(lambda b: b.replace(b"\n", b" ")),
    after=st.lists(any_line, max_size=5),
    newline=st.booleans(),
    cuts=cuts,
)
@settings(max_examples=300, deadline=None)
def test_a_line_past_the_cap_always_cuts_off(
    before: list[bytes], long: bytes, after: list[bytes], newline: bool, cuts: list[int]
) -> None:
    data = b"".join(line + b"\n" for line in before) + long + (b"\n" + b"\n".join(after) if newline else b"")
    splitter = LineSplitter(LIMIT)
    assert split_all(splitter, chunked(data, cuts), LIMIT) == before  # the lines before it, nothing after
    assert splitter.too_long
    assert splitter.feed(b"more\n") == []


@given(lines=st.lists(any_line, max_size=20), cuts=cuts)
@settings(max_examples=300, deadline=None)
def test_truncating_keeps_the_head_of_each_line(lines: list[bytes], cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    splitter = LineSplitter(LIMIT, truncate=True)
    assert split_all(splitter, chunked(data, cuts), LIMIT) == [line[:LIMIT] for line in lines]
    assert not splitter.too_long


def test_a_line_of_exactly_the_cap_passes() -> None:
    splitter = LineSplitter(4)
    assert splitter.feed(b"abcd\nab") == [b"abcd"]
    assert splitter.feed(b"cd\n") == [b"abcd"]
    assert splitter.feed(b"abcde") == []
    assert splitter.too_long


# -- the transport, on real children ------------------------------------------------------------------------


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def exists(pid: int) -> bool:
    """Whether ``pid`` is in the process table at all (a zombie is: nobody waited for it)."""
    return Path(f"/proc/{pid}").exists()


@asynccontextmanager
async def opened(
    command: list[str], max_message_bytes: int = 8 << 20
) -> AsyncGenerator[tuple[StdioTransport, AsyncIterator[object]]]:
    transport = StdioTransport(command, env=ENV, agent_id="t1", max_message_bytes=max_message_bytes)
    async with transport as (read_stream, write_stream):

        async def messages() -> AsyncIterator[object]:
            async for message in read_stream:
                yield message.message if isinstance(message, SessionMessage) else message

        yield transport, messages()
        await write_stream.aclose()


NOTE = '{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": %d}}'


async def test_messages_pass_and_blank_lines_and_a_stray_line_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'\\n  \\r\\n\\xff\\xfe not utf-8\\nnot json\\n')\n"
        f"sys.stdout.buffer.write(({NOTE!r} % 1).encode() + b'\\n')\n"
        "sys.stdout.flush()\n"
        "sys.stdin.read()\n"
    )
    with anyio.fail_after(TIMEOUT):
        async with opened(python(code)) as (transport, messages):
            first = await anext(messages)
            assert isinstance(first, types.JSONRPCNotification)
            assert first.params == {"level": "info", "data": 1}
            assert transport.cut_off is None
    shown = [r.getMessage() for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert len(shown) == 2
    assert all("agent t1" in m for m in shown)
    assert "\\xff" not in shown[0]
    assert "\ufffd" in shown[0]


async def test_a_flood_of_stdout_without_a_newline_cuts_the_child_off_with_bounded_memory() -> None:
    code = "import os, sys\nblock = b'x' * (1 << 20)\nfor _ in range(100):\n    os.write(1, block)\nsys.stdin.read()\n"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = time.monotonic()
    with anyio.fail_after(TIMEOUT):
        async with opened(python(code), max_message_bytes=1 << 20) as (transport, messages):
            assert [m async for m in messages] == []  # the stream ends: cut off
            assert transport.cut_off is not None
            assert "passed 1048576 bytes" in transport.cut_off
            assert transport.pid is not None
            pid = transport.pid
    assert time.monotonic() - started < 10
    assert not exists(pid)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 32 * 1024, f"the test process grew by {grown} KiB"


async def test_a_stream_of_garbage_cuts_the_child_off(caplog: pytest.LogCaptureFixture) -> None:
    code = "import os, sys\nos.write(1, b'garbage\\n' * 100000)\nsys.stdin.read()\n"
    with anyio.fail_after(TIMEOUT):
        async with opened(python(code)) as (transport, messages):
            assert [m async for m in messages] == []
            assert transport.cut_off is not None
            assert "not JSON-RPC" in transport.cut_off
            assert transport.pid is not None
            pid = transport.pid
    assert not exists(pid)
    assert len([r for r in caplog.records if "a line is not JSON-RPC" in r.getMessage()]) == MAX_BAD_LINES + 1


async def test_stderr_goes_to_the_log_with_the_agent_id_and_a_flood_is_rate_limited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hivegate.backends.stdio_upstream")
    code = (
        "import sys\n"
        "sys.stderr.write('hello from the child\\x1b[31m\\n' + 'y' * 10000 + '\\n')\n"
        "sys.stderr.write('flood\\n' * 20000)\n"
        "sys.stderr.flush()\n"
    )
    with anyio.fail_after(TIMEOUT):
        async with opened(python(code)) as (transport, messages):
            assert [m async for m in messages] == []  # the child exits: its stdout ends
            pid = transport.pid
    lines = [r.getMessage() for r in caplog.records if "stderr:" in r.getMessage()]
    assert lines[0] == f"agent t1: stdio upstream (pid {pid}) stderr: hello from the child\\x1b[31m"
    assert len(lines[1]) < 4200  # a long line is shortened
    assert len(lines) <= 4 * LOG_LINES_PER_SECOND  # not 20,000
    suppressed = [r.getMessage() for r in caplog.records if "suppressed" in r.getMessage()]
    assert suppressed
    assert all("agent t1" in m for m in suppressed)


async def test_a_child_that_ignores_its_stdin_and_sigterm_is_killed_with_its_own_children() -> None:
    code = (
        "import json, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        f"print({NOTE!r} % grandchild.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    with anyio.fail_after(TIMEOUT):
        async with opened(python(code)) as (transport, messages):
            note = await anext(messages)
            assert isinstance(note, types.JSONRPCNotification)
            assert note.params is not None
            grandchild = note.params["data"]
            assert transport.pid is not None
            pid = transport.pid
            assert alive(pid)
            assert alive(grandchild)
            started = time.monotonic()
    took = time.monotonic() - started
    assert took < STOP_GRACE_SECONDS + KILL_GRACE_SECONDS + 3
    assert not exists(pid)  # killed and waited for: not even a zombie
    assert not alive(grandchild)  # the group went with it (init reaps it)


async def test_a_child_that_exits_on_eof_is_stopped_at_once() -> None:
    with anyio.fail_after(TIMEOUT):
        async with opened(python("import sys\nsys.stdin.read()\n")) as (transport, _):
            assert transport.pid is not None
            pid = transport.pid
            started = time.monotonic()
    assert time.monotonic() - started < STOP_GRACE_SECONDS
    assert not exists(pid)
    assert transport.ended.is_set()


async def test_a_program_that_does_not_exist_fails_to_open() -> None:
    with pytest.raises(FileNotFoundError) as raised:
        async with StdioTransport(["/nonexistent/program"], env=ENV, agent_id="t1"):
            pass
    line = failure_line(raised.value)  # what the log says: the program and where it was looked for
    assert "'/nonexistent/program'" in line
    assert f"working directory {os.getcwd()}" in line


def test_the_log_line_of_a_task_groups_failure_names_its_cause() -> None:
    cause = ConnectionRefusedError(111, "Connection refused")
    nested = BaseExceptionGroup("unhandled errors in a TaskGroup", [ExceptionGroup("inner", [cause])])
    assert failure_line(nested) == "ConnectionRefusedError: [Errno 111] Connection refused"
    two = ExceptionGroup("unhandled errors in a TaskGroup", [cause, ValueError("x")])
    assert failure_line(two).startswith("ExceptionGroup: unhandled errors in a TaskGroup")
