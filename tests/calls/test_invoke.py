"""The invocation layer in process: deltas, the outcome, the deadline, the caller's cancel (issue 8 item 4).

Real backends (``CallableBackend`` around plain functions), no mocks; every wait is bounded.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from hivegate.agents.model import AgentSpec
from hivegate.auth.principal import ANONYMOUS, CredentialKind, Principal
from hivegate.backends.base import Invocation
from hivegate.backends.python import CallableBackend
from hivegate.calls.events import CallFailed, FinalResult, ReplyDelta
from hivegate.calls.invoke import CallTarget, invoke
from hivegate.errors import AgentError, ServiceTimeoutError

ALICE = Principal(kind=CredentialKind.USER_KEY, user_id="u-alice", username="alice", agents=None)


def _target(function: Callable[..., Any], timeout: float = 60.0) -> CallTarget:
    spec = AgentSpec.model_validate({"id": "a", "name": "A", "owner": "alice", "invoke_timeout_seconds": timeout})
    return CallTarget(spec, CallableBackend(function))


REQUEST = Invocation(agent_id="a", message="hello")


async def test_deltas_reach_the_sink_in_order_then_the_whole_reply() -> None:
    async def words(invocation: Invocation) -> AsyncIterator[str]:
        for word in invocation.message.split():
            yield word + " "

    seen: list[ReplyDelta] = []

    async def sink(delta: ReplyDelta) -> None:
        seen.append(delta)

    request = Invocation(agent_id="a", message="one two")
    outcome = await invoke(ANONYMOUS, _target(words), request, sink)
    assert outcome == FinalResult("one two ")
    assert seen == [ReplyDelta("one ", 1), ReplyDelta("two ", 2)]


async def test_the_backend_sees_the_callers_principal() -> None:
    def who(invocation: Invocation) -> str:
        return str(invocation.principal.username)

    assert await invoke(ALICE, _target(who), REQUEST) == FinalResult("alice")


async def test_an_agent_failure_is_a_failed_call_the_caller_reads() -> None:
    def fails(invocation: Invocation) -> str:
        raise AgentError("no can do")

    outcome = await invoke(ANONYMOUS, _target(fails), REQUEST)
    assert isinstance(outcome, CallFailed)
    assert outcome.agent_failed
    assert outcome.error.message == "no can do"


async def test_past_the_deadline_the_backend_is_cancelled_and_the_call_times_out() -> None:
    cancelled = anyio.Event()

    async def waits(invocation: Invocation) -> str:
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return "late"

    with anyio.fail_after(5):
        outcome = await invoke(ANONYMOUS, _target(waits, timeout=0.2), REQUEST)
    assert isinstance(outcome, CallFailed)
    assert not outcome.agent_failed
    assert isinstance(outcome.error, ServiceTimeoutError)
    assert (outcome.error.code, outcome.error.jsonrpc_code, outcome.error.message) == (
        "service_timeout",
        -32003,
        "Agent reply timeout",
    )
    assert outcome.error.data == {"code": "service_timeout", "timeout_seconds": 0.2}
    assert cancelled.is_set()


async def test_a_sync_callable_past_the_deadline_is_answered_without_waiting_for_its_thread() -> None:
    release = threading.Event()
    done = threading.Event()

    def blocks(invocation: Invocation) -> str:
        release.wait(10)
        done.set()
        return "late"

    try:
        with anyio.fail_after(5):
            outcome = await invoke(ANONYMOUS, _target(blocks, timeout=0.2), REQUEST)
        assert isinstance(outcome, CallFailed)
        assert isinstance(outcome.error, ServiceTimeoutError)
        assert not done.is_set()  # answered while the thread still runs
    finally:
        release.set()


async def test_a_cancelled_caller_cancels_the_backend_call() -> None:
    started = anyio.Event()
    cancelled = anyio.Event()

    async def waits(invocation: Invocation) -> str:
        started.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return "late"

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(invoke, ANONYMOUS, _target(waits), REQUEST)
            await started.wait()
            tg.cancel_scope.cancel()
    assert cancelled.is_set()


@pytest.mark.parametrize("value", [0, -1, 3601])
def test_invoke_timeout_must_be_positive_and_at_most_an_hour(value: float) -> None:
    with pytest.raises(ValidationError):
        AgentSpec.model_validate({"id": "a", "name": "A", "owner": "alice", "invoke_timeout_seconds": value})


def test_invoke_timeout_defaults_to_60_seconds() -> None:
    assert AgentSpec.model_validate({"id": "a", "name": "A", "owner": "alice"}).invoke_timeout_seconds == 60
