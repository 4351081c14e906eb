"""Cancelling lean-path calls: on ``http.disconnect``, and by ``notifications/cancelled`` (issue 8 item 4).

A real ASGI-shaped ``receive`` (a memory stream the test feeds); every wait is bounded.
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.types import Message

from hivegate.auth.principal import ANONYMOUS, CredentialKind, Principal, principal_scope
from hivegate.calls.cancel import LeanCalls, cancel_on_disconnect

ALICE = Principal(kind=CredentialKind.USER_KEY, user_id="u-alice", username="alice", agents=None)
MALLORY = Principal(kind=CredentialKind.USER_KEY, user_id="u-mallory", username="mallory", agents=None)


class Wire:
    """The client's side of one request: ``receive`` replays the body, then waits for :meth:`disconnect`."""

    def __init__(self) -> None:
        self._body_sent = False
        self._gone = anyio.Event()
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": b"{}", "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    def disconnect(self) -> None:
        self._gone.set()

    async def send(self, message: Message) -> None:
        self.sent.append(message)


async def test_a_disconnect_cancels_the_work() -> None:
    wire = Wire()
    started = anyio.Event()
    cancelled = anyio.Event()

    async def work() -> None:
        started.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                assert not await cancel_on_disconnect(wire.receive, work)

            tg.start_soon(run)
            await started.wait()
            wire.disconnect()
    assert cancelled.is_set()


async def test_work_that_ends_first_is_not_cancelled() -> None:
    wire = Wire()
    done: list[bool] = []

    async def work() -> None:
        await anyio.lowlevel.checkpoint()
        done.append(True)

    with anyio.fail_after(5):
        assert await cancel_on_disconnect(wire.receive, work)
    assert done == [True]


def _cancel(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


async def _serve_until_cancelled(calls: LeanCalls, wire: Wire, canceller: Principal, request_id: Any) -> bool:
    """Run a waiting request 7 of session ``s1`` as alice; ``canceller`` cancels ``request_id``. True if it was."""
    started = anyio.Event()
    finished = anyio.Event()

    async def work(send: Any) -> None:
        started.set()
        await anyio.sleep(30)

    async def serve() -> None:
        with principal_scope(ALICE):
            await calls.serve("s1", 7, wire.receive, wire.send, work)
        finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        await started.wait()
        with principal_scope(canceller):
            hit = calls.cancel("s1", _cancel(request_id))
        if not hit:
            tg.cancel_scope.cancel()
            return False
        with anyio.fail_after(5):
            await finished.wait()
    return True


async def test_notifications_cancelled_cancels_the_named_request_which_gets_no_answer() -> None:
    calls = LeanCalls()
    wire = Wire()
    assert await _serve_until_cancelled(calls, wire, ALICE, 7)
    assert wire.sent[0]["status"] == 202  # no JSON-RPC answer for a cancelled request
    assert wire.sent[1] == {"type": "http.response.body", "body": b""}


async def test_a_cancel_from_another_caller_or_for_another_id_is_ignored() -> None:
    calls = LeanCalls()
    assert not await _serve_until_cancelled(calls, Wire(), MALLORY, 7)
    assert not await _serve_until_cancelled(calls, Wire(), ALICE, "7")  # "7" is not 7
    assert not await _serve_until_cancelled(calls, Wire(), ANONYMOUS, 7)


def test_other_messages_cancel_nothing() -> None:
    calls = LeanCalls()
    assert not calls.cancel("s1", {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
    assert not calls.cancel(None, _cancel(1))
    assert not calls.cancel("s1", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": []})
