"""The stdio transport of the ``mcp`` backend: one run of an upstream MCP server as a supervised child process.

Spec: MCP 2025-11-25, basic/transports#stdio. The client launches the server as a subprocess and they
exchange JSON-RPC messages on its stdin and stdout, one per line (newline-delimited, no embedded
newline); the server MAY write UTF-8 strings to its stderr for logging, and MUST NOT write anything to
its stdout that is not a valid MCP message. Shutdown (basic/lifecycle#shutdown): close the child's
stdin, wait for it to exit, then SIGTERM, then SIGKILL.

:class:`StdioTransport` is the SDK ``Client``'s transport (an async context manager yielding its read and
write streams of ``SessionMessage``), as the SDK's own ``stdio_client`` is. hivegate has its own because
a gateway runs children it does not trust:

- **Bounded lines.** The SDK's reader joins decoded text chunks with no bound on a line: a child writing
  100 MB without a newline is held whole and re-split on every chunk (quadratic time), on the gateway's
  event loop. Here stdout is read as bytes and split by :class:`LineSplitter`, which never holds more
  than ``max_message_bytes`` of a line: a longer one cuts the child off (it is killed; the calls in
  flight end with the connection, and the backend answers them ``agent_service_unavailable``).
- **Garbage.** A line that is not a JSON-RPC message (not UTF-8, not JSON) is logged, shortened, and
  dropped; more than :data:`MAX_BAD_LINES` of them in a row cut the child off. A stray line (a banner, a
  debug print) is tolerated, a stream of garbage is not. A blank line is ignored.
- **stderr** goes to the log line by line, each with the agent id and the child's pid, at most
  :data:`STDERR_LINE_BYTES` a line and :data:`LOG_LINES_PER_SECOND` lines a second (then a count of the
  suppressed ones), instead of the gateway's own stderr.
- **Nothing outlives the gateway.** The child runs in its own session and process group, so a stop
  reaches its own children too; on Linux it is asked to be killed when the gateway dies
  (``PR_SET_PDEATHSIG``, so even ``kill -9`` of the gateway leaves it no orphan). That needs a
  ``preexec_fn``, which anyio's ``open_process`` does not take: the child is made with
  ``asyncio.create_subprocess_exec`` (the default loop and uvloop both take one). The signal reaches the
  child only; its own children see their stdin end (and are its business).
- **Stop.** On close: the child's stdin is closed, it has :data:`STOP_GRACE_SECONDS` to exit, then its
  process group gets SIGTERM and, :data:`KILL_GRACE_SECONDS` later, SIGKILL (the SDK's
  ``terminate_posix_process_tree``); whatever happens the child is waited for (no zombie). Every wait is
  bounded and shielded from the caller's cancellation.

Messages are parsed and written with the SDK's own ``mcp_types.jsonrpc_message_adapter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

TransportStreams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
"""What a transport of the SDK ``Client`` yields: the stream of the upstream's messages (or the errors
reading them) and the stream of messages to it."""

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "KILL_GRACE_SECONDS",
    "LOG_LINES_PER_SECOND",
    "MAX_BAD_LINES",
    "STDERR_LINE_BYTES",
    "STOP_GRACE_SECONDS",
    "LineSplitter",
    "StdioTransport",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""The longest line (one message) a child may write to its stdout, unless the backend says otherwise."""
MAX_BAD_LINES = 16
"""Lines in a row on a child's stdout that are not JSON-RPC messages before it is cut off."""
STDERR_LINE_BYTES = 4096
"""A longer stderr line is shortened to this in the log."""
LOG_LINES_PER_SECOND = 50
"""The most log lines one child's stderr and garbage make in a second; the rest are counted, not logged."""
STOP_GRACE_SECONDS = 2.0
"""How long a child has to exit after its stdin closes, before its process group gets SIGTERM."""
KILL_GRACE_SECONDS = 2.0
"""How long a process group has after SIGTERM, before SIGKILL."""
_REAP_SECONDS = 2.0
"""How long to wait for the event loop to see a killed child exit (only an unkillable one runs it out)."""
_READ_BYTES = 64 * 1024
_SHOWN_BYTES = 200
"""How much of a line that is not a message the log shows."""
_POLL_SECONDS = 0.01
_IGNORED = frozenset({"subscriptions/listen"})
"""Requests that stay open as long as the connection does: they do not make the child busy."""
_PR_SET_PDEATHSIG = 1


class LineSplitter:
    """Splits a byte stream into its lines (without the ``\\n``), holding at most ``limit`` bytes of a line.

    A line longer than ``limit`` either ends the split (``truncate=False``: :attr:`too_long` is set, the
    lines before it were returned, nothing after it is) or is cut to its first ``limit`` bytes
    (``truncate=True``). An unfinished last line is :meth:`rest`.
    """

    __slots__ = ("_limit", "_pending", "_truncate", "too_long")

    def __init__(self, limit: int, *, truncate: bool = False) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._limit = limit
        self._truncate = truncate
        self._pending = bytearray()
        self.too_long = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines that ``chunk`` completes, in order."""
        lines: list[bytes] = []
        if self.too_long:
            return lines
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end
            room = self._limit - len(self._pending)
            if stop - start > room:
                if not self._truncate:
                    self.too_long = True
                    self._pending.clear()
                    return lines
                self._pending += chunk[start : start + room]
            elif end >= 0 and not self._pending:
                lines.append(chunk[start:end])
                start = end + 1
                continue
            else:
                self._pending += chunk[start:stop]
            if end < 0:
                return lines
            lines.append(bytes(self._pending))
            self._pending.clear()
            start = end + 1

    def rest(self) -> bytes:
        """The unfinished last line (what came after the last ``\\n``)."""
        return bytes(self._pending)


class _LogBudget:
    """At most ``per_second`` log lines a second; the others are counted and reported once a second passes."""

    __slots__ = ("_per_second", "_second", "_spent", "suppressed")

    def __init__(self, per_second: int) -> None:
        self._per_second = per_second
        self._second = 0.0
        self._spent = 0
        self.suppressed = 0

    def allow(self) -> bool:
        now = time.monotonic()
        if now - self._second >= 1.0:
            self._second, self._spent = now, 0
        if self._spent < self._per_second:
            self._spent += 1
            return True
        self.suppressed += 1
        return False


class StdioTransport:
    """One run of ``command`` as an upstream MCP server (module docstring); enter it once.

    Args:
        command: the program and its arguments.
        env: the child's whole environment.
        agent_id: the agent it serves (every log line names it).
        max_message_bytes: the longest line (message) the child may write to its stdout.
        cwd: the child's working directory (the gateway's when None).

    Attributes:
        pid: the child's pid once started.
        ended: set when the child's stdout ends: it exited, closed it, or was cut off.
        cut_off: why the child was cut off (None when it was not).
        last_active: ``time.monotonic()`` of the last request to the child or answer from it.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        agent_id: str,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        cwd: str | None = None,
    ) -> None:
        if not command:
            raise ValueError("an empty command")
        self._command = tuple(command)
        self._env = dict(env)
        self._agent_id = agent_id
        self._limit = max_message_bytes
        self._cwd = cwd
        self._budget = _LogBudget(LOG_LINES_PER_SECOND)
        self._in_flight: set[types.RequestId] = set()
        self._session: contextlib.AbstractAsyncContextManager[TransportStreams] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self.pid: int | None = None
        self.ended = anyio.Event()
        self.cut_off: str | None = None
        self.last_active = time.monotonic()

    @property
    def busy(self) -> bool:
        """Whether a request to the child is waiting for its answer (``subscriptions/listen`` aside)."""
        return bool(self._in_flight)

    async def __aenter__(self) -> TransportStreams:
        if self._session is not None:
            raise RuntimeError("a StdioTransport is entered once")
        self._session = self._run()
        return await self._session.__aenter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        assert self._session is not None
        return await self._session.__aexit__(kind, exc, traceback)

    @asynccontextmanager
    async def _run(self) -> AsyncGenerator[TransportStreams]:
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent(),
                limit=_READ_BYTES,
            )
        except OSError as exc:  # the program is missing or not executable: say which, and from where
            where = self._cwd or os.getcwd()
            raise OSError(
                exc.errno, f"cannot run {self._command[0]!r} (working directory {where}): {exc.strerror}"
            ) from None
        # Started: no await before the task group and its shielded stop, or a cancellation here would
        # leave the child running.
        self._process, self.pid = process, process.pid
        incoming, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._read_stdout, process, incoming)
            tasks.start_soon(self._write_stdin, process, outgoing, incoming)
            tasks.start_soon(self._read_stderr, process)
            logger.info("agent %s: started the stdio upstream (pid %d)", self._agent_id, process.pid)
            try:
                yield read_stream, write_stream
            finally:
                read_stream.close()  # a reader blocked on delivery drains stdout instead, so the child can exit
                write_stream.close()
                with anyio.CancelScope(shield=True):
                    await self._stop(process)
                tasks.cancel_scope.cancel()

    async def _read_stdout(
        self, process: asyncio.subprocess.Process, incoming: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert process.stdout is not None
        stdout = process.stdout
        splitter = LineSplitter(self._limit)
        bad = 0
        delivering = True
        try:
            async with incoming:
                while chunk := await stdout.read(_READ_BYTES):
                    if not delivering:  # the session is gone: drain, so the child is not stuck writing
                        continue
                    for line in splitter.feed(chunk):
                        message = self._message(line)
                        if message is None:
                            if line.strip():
                                bad += 1
                                if bad > MAX_BAD_LINES:
                                    self._cut(process, f"more than {MAX_BAD_LINES} lines in a row are not JSON-RPC")
                                    return
                            continue
                        bad = 0
                        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                            self._in_flight.discard(message.id)  # pyright: ignore[reportArgumentType]
                            self.last_active = time.monotonic()
                        try:
                            await incoming.send(SessionMessage(message))
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                            delivering = False
                            break
                    if splitter.too_long:
                        self._cut(process, f"a message passed {self._limit} bytes")
                        return
                if splitter.rest():
                    self._show("its stdout ended in the middle of a line", splitter.rest())
        except (OSError, ValueError) as exc:  # a broken pipe; asyncio's own ValueError on a read past its limit
            logger.warning("agent %s: reading the stdio upstream (pid %d) failed: %s", self._agent_id, process.pid, exc)
        finally:
            self._in_flight.clear()
            self.ended.set()

    async def _write_stdin(
        self,
        process: asyncio.subprocess.Process,
        outgoing: MemoryObjectReceiveStream[SessionMessage],
        incoming: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        assert process.stdin is not None
        stdin = process.stdin
        try:
            async with outgoing:
                async for session_message in outgoing:
                    message = session_message.message
                    if isinstance(message, types.JSONRPCRequest) and message.method not in _IGNORED:
                        self._in_flight.add(message.id)
                        self.last_active = time.monotonic()
                    elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                        self._in_flight.discard((message.params or {}).get("requestId"))  # pyright: ignore[reportArgumentType]
                    stdin.write(types.jsonrpc_message_adapter.dump_json(message, by_alias=True, exclude_unset=True))
                    stdin.write(b"\n")
                    await stdin.drain()
        except (OSError, RuntimeError) as exc:  # the child closed its stdin or is gone
            if not self.ended.is_set():
                logger.info(
                    "agent %s: writing to the stdio upstream (pid %d) failed: %s", self._agent_id, process.pid, exc
                )
            # The session must see the end (a child that closed its stdin may live on, saying nothing).
            incoming.close()

    async def _read_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        stderr = process.stderr
        splitter = LineSplitter(STDERR_LINE_BYTES, truncate=True)
        try:
            while chunk := await stderr.read(_READ_BYTES):
                for line in splitter.feed(chunk):
                    self._log_stderr(line)
            if splitter.rest():
                self._log_stderr(splitter.rest())
        except (OSError, ValueError):
            pass
        finally:
            if self._budget.suppressed:
                logger.info(
                    "agent %s: stdio upstream (pid %d): %d log lines suppressed (more than %d a second)",
                    self._agent_id,
                    process.pid,
                    self._budget.suppressed,
                    LOG_LINES_PER_SECOND,
                )
                self._budget.suppressed = 0

    def _log_stderr(self, line: bytes) -> None:
        text = _printable(line.rstrip(b"\r"))
        if text.strip() and self._allowed():
            logger.info("agent %s: stdio upstream (pid %s) stderr: %s", self._agent_id, self.pid, text)

    def _message(self, line: bytes) -> types.JSONRPCMessage | None:
        if not line.strip():
            return None
        try:
            return types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as exc:
            self._show(f"a line is not JSON-RPC ({exc.error_count()} errors)", line)
            return None

    def _show(self, what: str, line: bytes) -> None:
        if self._allowed():
            shown = _printable(line[:_SHOWN_BYTES]) + ("…" if len(line) > _SHOWN_BYTES else "")
            logger.warning("agent %s: stdio upstream (pid %s): %s: %s", self._agent_id, self.pid, what, shown)

    def _allowed(self) -> bool:
        suppressed = self._budget.suppressed
        allowed = self._budget.allow()
        if allowed and suppressed:
            self._budget.suppressed = 0
            logger.info(
                "agent %s: stdio upstream (pid %s): %d log lines suppressed (more than %d a second)",
                self._agent_id,
                self.pid,
                suppressed,
                LOG_LINES_PER_SECOND,
            )
        return allowed

    def _cut(self, process: asyncio.subprocess.Process, reason: str) -> None:
        """Cut the child off: its process group is killed at once (a child that floods or garbles its stdout
        is not asked to stop), and the session sees its stream end."""
        self.cut_off = reason
        logger.warning("agent %s: the stdio upstream (pid %d) is cut off: %s", self._agent_id, process.pid, reason)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    async def _stop(self, process: asyncio.subprocess.Process) -> None:
        """Close the child's stdin, give it :data:`STOP_GRACE_SECONDS`, then end its process group (SIGTERM,
        SIGKILL), and wait for the child (bounded)."""
        assert process.stdin is not None
        with contextlib.suppress(OSError, RuntimeError):
            process.stdin.close()
        if not await _exited(process, STOP_GRACE_SECONDS):
            logger.info(
                "agent %s: the stdio upstream (pid %d) did not exit within %.0f s of its stdin closing: stopping it",
                self._agent_id,
                process.pid,
                STOP_GRACE_SECONDS,
            )
        # Also when the child exited: its own children, left in its group, go with it. The helper reads only
        # the pid and the returncode of the process it is given.
        await terminate_posix_process_tree(cast(anyio.abc.Process, process), KILL_GRACE_SECONDS)
        if not await _exited(process, _REAP_SECONDS):
            logger.warning("agent %s: the stdio upstream (pid %d) survived SIGKILL", self._agent_id, process.pid)
        else:
            logger.info(
                "agent %s: the stdio upstream (pid %d) stopped (exit status %s)",
                self._agent_id,
                process.pid,
                process.returncode,
            )
        # A descendant that left the group can still hold a pipe: close the subprocess transport anyway
        # (nothing public reaches it).
        close: Any = getattr(getattr(process, "_transport", None), "close", None)
        if callable(close):
            with contextlib.suppress(OSError):
                close()


async def _exited(process: asyncio.subprocess.Process, seconds: float) -> bool:
    """Whether the child has exited (and been reaped) within ``seconds``: its returncode, polled (``wait()``
    also waits for its pipes, which a descendant may hold open)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110  # the child watcher sets it: nothing to wait on
            await anyio.sleep(_POLL_SECONDS)
    return process.returncode is not None


def _printable(line: bytes) -> str:
    """A line for the log: decoded with replacement, control characters escaped (no forged log lines)."""
    text = line.decode("utf-8", "replace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" for c in text)


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (Linux), loaded in the gateway: a forked child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` (POSIX; None elsewhere) that keeps the child to its own stdin, stdout and stderr
    and, on Linux, asks the kernel to SIGKILL it when the gateway dies.

    Every other descriptor of the gateway is marked close-on-exec in the child: uvloop's spawn ignores
    ``close_fds``, so without this the child inherited the gateway's listening socket (it could accept
    other callers' requests, credentials included, or shut the socket down) and the pipes of the other
    children (another user's, under ``per_user``), and a child that closed its stdout was not noticed
    (its inherited copy kept the pipe open).
    """
    if os.name != "posix":
        return None
    prctl = _prctl()
    parent = os.getpid()

    def arm() -> None:  # runs in the child, between fork and exec
        _close_on_exec_beyond_stdio()
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the gateway died before the request took effect
                os.kill(os.getpid(), signal.SIGKILL)

    return arm


def _close_on_exec_beyond_stdio() -> None:
    """Mark every open descriptor above 2 close-on-exec (in a child before its exec): the program run
    gets stdin, stdout and stderr only (descriptors set up as 0-2 after this are copies, not affected)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # no /proc: the descriptors up to the soft limit, at most 65,536
        names = [str(fd) for fd in range(3, min(os.sysconf("SC_OPEN_MAX"), 65536))]
    for name in names:
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
                os.set_inheritable(fd, False)
