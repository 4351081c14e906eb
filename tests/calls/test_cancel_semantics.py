"""Cancellation semantics of the invocation layer's scopes (invoke deadline, cancel_on_disconnect, LeanCalls).

A backend's own TimeoutError is not the deadline; outer (shutdown) cancellation propagates, also when it
coincides with the deadline; the deadline holds inside anyio task groups and around backends that use
anyio scopes themselves. And the scopes cancel at level, as anyio's do (the last section: asyncio.timeout
scopes, tried on the hot path, failed these): a backend that absorbs one cancellation is cancelled again
at its next await, for the deadline and for a client's disconnect, and an anyio-shielded section of a
backend is not interrupted by the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from starlette.types import Message

from hivegate.agents.model import AgentSpec
from hivegate.auth.principal import ANONYMOUS, principal_scope
from hivegate.backends.base import Invocation
from hivegate.backends.python import CallableBackend
from hivegate.calls.cancel import LeanCalls, cancel_on_disconnect
from hivegate.calls.events import CallFailed, FinalResult
from hivegate.calls.invoke import CallTarget, invoke
from hivegate.errors import ServiceTimeoutError

REQUEST = Invocation(agent_id="a", message="hello")


def _spec(timeout: float) -> AgentSpec:
    return AgentSpec.model_validate({"id": "a", "name": "A", "owner": "alice", "invoke_timeout_seconds": timeout})


def _target(function: Callable[..., Any], timeout: float = 0.2) -> CallTarget:
    return CallTarget(_spec(timeout), CallableBackend(function))


class _OwnTimeout:
    """A backend (not CallableBackend, which maps exceptions to AgentError) raising its own TimeoutError."""

    can_invoke = True

    async def invoke(self, invocation: Invocation, on_delta: Any) -> str:
        raise TimeoutError("the backend's own")


async def _sleeps(invocation: Invocation) -> str:
    await anyio.sleep(30)
    return "late"


def _timed_out(outcome: object) -> bool:
    return isinstance(outcome, CallFailed) and isinstance(outcome.error, ServiceTimeoutError)


# -- guards ----------------------------------------------------------------------------------------


async def test_a_backends_own_timeout_error_propagates_and_is_not_the_deadline() -> None:
    with pytest.raises(TimeoutError, match="the backend's own"):
        await invoke(ANONYMOUS, CallTarget(_spec(5), _OwnTimeout()), REQUEST)  # type: ignore[arg-type]


async def test_the_deadline_holds_in_an_anyio_task_group_child_and_around_anyio_scopes_in_the_backend() -> None:
    async def nested(invocation: Invocation) -> str:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.sleep, 30)
                await anyio.sleep(30)
        return "late"

    outcomes: list[object] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def child() -> None:
                with anyio.CancelScope():
                    outcomes.append(await invoke(ANONYMOUS, _target(nested), REQUEST))

            tg.start_soon(child)
    assert len(outcomes) == 1
    assert _timed_out(outcomes[0])


async def test_outer_cancellation_propagates_even_when_it_coincides_with_the_deadline() -> None:
    loop = asyncio.get_running_loop()
    for delay in (0.05, 0.2):  # before the deadline; at the deadline's loop turn
        task = asyncio.ensure_future(invoke(ANONYMOUS, _target(_sleeps, timeout=0.2), REQUEST))
        loop.call_later(delay, task.cancel)
        with pytest.raises(asyncio.CancelledError):
            await task


class _Wire:
    def __init__(self) -> None:
        self.gone = asyncio.Event()
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)


async def test_lean_scopes_let_the_works_own_timeout_error_and_outer_cancellation_through() -> None:
    wire = _Wire()

    async def own_timeout(*_: Any) -> None:
        raise TimeoutError("the work's own")

    with pytest.raises(TimeoutError, match="the work's own"):
        await cancel_on_disconnect(wire.receive, own_timeout)
    with principal_scope(ANONYMOUS), pytest.raises(TimeoutError, match="the work's own"):
        await LeanCalls().serve("s", 1, wire.receive, wire.send, own_timeout)
    assert wire.sent == []

    async def waits(*_: Any) -> None:
        await asyncio.sleep(30)

    async def lean() -> None:
        with principal_scope(ANONYMOUS):
            await LeanCalls().serve("s", 1, wire.receive, wire.send, waits)

    for run in (lambda: cancel_on_disconnect(wire.receive, waits), lean):
        task = asyncio.ensure_future(run())
        await asyncio.sleep(0.1)  # past WATCH_AFTER_SECONDS: the watcher runs
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert wire.sent == []  # a shut-down request is not answered 202


# -- regressions (edge-triggered asyncio cancellation) -------------------------------------------------


async def test_a_backend_that_absorbs_one_cancellation_still_gets_its_deadline() -> None:
    async def absorbs(invocation: Invocation) -> str:
        with contextlib.suppress(BaseException):  # e.g. a library that swallows a cancellation (or a bare except)
            await anyio.sleep(30)
        await anyio.sleep(2)  # further work, past the deadline
        return "late"

    started = time.monotonic()
    with anyio.fail_after(5):
        outcome = await invoke(ANONYMOUS, _target(absorbs, timeout=0.2), REQUEST)
    assert _timed_out(outcome), outcome  # asyncio.timeout: FinalResult('late') after 2.2 s
    assert time.monotonic() - started < 1.0


async def test_a_disconnect_cancels_work_that_absorbs_one_cancellation() -> None:
    wire = _Wire()
    finished: list[bool] = []

    async def absorbs() -> None:
        with contextlib.suppress(BaseException):  # it swallows the cancellation
            await asyncio.sleep(30)
        await asyncio.sleep(2)
        finished.append(True)

    async def disconnect() -> None:
        await asyncio.sleep(0.2)
        wire.gone.set()

    asyncio.get_running_loop().create_task(disconnect())
    started = time.monotonic()
    with anyio.fail_after(5):
        served = await cancel_on_disconnect(wire.receive, absorbs)
    assert not finished  # asyncio.timeout: the work ran on for 2 s
    assert not served
    assert time.monotonic() - started < 1.0


async def test_the_deadline_does_not_interrupt_an_anyio_shielded_section_of_the_backend() -> None:
    async def shielded(invocation: Invocation) -> str:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.5)  # e.g. a commit the backend must not leave half done
        return "committed"

    with anyio.fail_after(5):
        outcome = await invoke(ANONYMOUS, _target(shielded, timeout=0.2), REQUEST)
    assert outcome == FinalResult("committed")  # asyncio.timeout: -32003 at 0.2 s
