"""The in-flight request-body byte budget (:class:`hivegate.mcp.budgets.Charge`, ``body_bytes``).

Issue 7 item 2 ("memory is bounded in bytes, per principal"): request bodies in flight were
bounded only by connections × ``server.max_body_bytes`` (100 connections from one anonymous
address, each holding an unfinished 4 MiB body, raised the server's RSS from 124 to 529 MiB).
Each chunk is now charged to the caller's and the process's byte budget as it arrives, and the
bytes are returned when the request ends, however it ends.
"""

from __future__ import annotations

from functools import partial

import anyio
import anyio.lowlevel
import pytest
from pydantic import ValidationError
from starlette.types import Message, Receive

from hivegate.auth.principal import ANONYMOUS, CredentialKind, Principal
from hivegate.errors import BudgetExceededError, CapacityExhaustedError, PayloadTooLargeError
from hivegate.mcp.budgets import Budget, McpBudgets
from hivegate.mcp.transport import read_body
from hivegate.settings import McpSettings

KIB = 1024
READERS = 9
"""The finite requests of the concurrency test (the unfinished one is not counted)."""
WAIT_SECONDS = 10


def _bytes_budget(per_principal: int = 10 * KIB, total: int = 16 * KIB, anonymous_total: int | None = None) -> Budget:
    return Budget(
        "body_bytes",
        per_principal=per_principal,
        total=total,
        retry_after_seconds=7,
        anonymous_total=anonymous_total,
        noun="request body bytes in flight",
    )


def _receive(chunks: list[bytes], budget: Budget, *, stall: anyio.Event | None = None) -> Receive:
    """A ``receive`` yielding ``chunks`` (``more_body`` until the last), checking the caps at each call.

    With ``stall``, the last chunk is held back until the event is set (an unfinished body).
    """
    pending = list(chunks)

    async def receive() -> Message:
        assert budget.total_held <= budget.total
        assert all(budget.held(key) <= budget.per_principal for key in ("user:a", "user:b", "user:c"))
        await anyio.lowlevel.checkpoint()  # let the other readers interleave
        if stall is not None and len(pending) == 1:
            await stall.wait()
        chunk = pending.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    return receive


def test_chunks_are_charged_until_the_cap_then_429_and_release_returns_all() -> None:
    """Issue 7 item 2: the chunk that would pass one's own byte budget is refused (429, Retry-After)."""
    budget = _bytes_budget()
    with budget.charge("user:a") as charge:
        charge.add(6 * KIB)
        charge.add(4 * KIB)  # exactly at the cap
        with pytest.raises(BudgetExceededError) as refused:
            charge.add(1)
        assert (refused.value.code, refused.value.http_status) == ("budget_exceeded", 429)
        assert refused.value.headers == {"Retry-After": "7"}
        assert refused.value.data == {"budget": "body_bytes", "limit": 10 * KIB}
        assert "request body bytes in flight" in refused.value.message
        assert (charge.held, budget.held("user:a"), budget.total_held) == (10 * KIB, 10 * KIB, 10 * KIB)
        other = budget.charge("user:b")
        other.add(6 * KIB)  # the total (16 KiB) is reached
        with pytest.raises(CapacityExhaustedError) as full:
            budget.charge("user:c").add(1)
        assert (full.value.code, full.value.http_status) == ("capacity_exhausted", 503)
        assert full.value.data == {"budget": "body_bytes", "limit": 16 * KIB}
        other.release()
        other.release()  # idempotent
    assert (budget.held("user:a"), budget.held("user:b"), budget.total_held) == (0, 0, 0)


def test_anonymous_callers_together_hold_only_their_share_of_bytes() -> None:
    """Issue 7 item 2: many client addresses cannot add up to the whole byte total."""
    budgets = McpBudgets(
        McpSettings(
            max_body_bytes_in_flight_per_principal=4 * KIB,
            max_body_bytes_in_flight_total=10 * KIB,
            anonymous_budget_share=0.5,
        )
    )
    assert budgets.body_bytes.anonymous_total == 5 * KIB
    first = budgets.body_charge({"client": ("127.0.0.1", 1)}, ANONYMOUS)
    first.add(4 * KIB)
    with pytest.raises(CapacityExhaustedError):
        budgets.body_charge({"client": ("127.0.0.2", 1)}, ANONYMOUS).add(2 * KIB)
    user = Principal(kind=CredentialKind.USER_KEY, user_id="u1", credential_id="k1")
    budgets.body_charge({"client": ("127.0.0.2", 1)}, user).add(4 * KIB)  # users still find room
    first.release()
    assert budgets.body_bytes.total_held == 4 * KIB


async def test_concurrent_bodies_never_exceed_the_caps_and_every_exit_returns_the_bytes() -> None:
    """Issue 7 item 2: readers interleaving on one loop stay within both caps; finished, refused,
    too-large, failing and cancelled requests all give their bytes back."""
    budget = _bytes_budget(per_principal=10 * KIB, total=24 * KIB)  # user:a contends; the rest fit
    outcomes: list[str] = []
    stall = anyio.Event()
    all_read = anyio.Event()
    read = [0]

    async def request(
        key: str, chunks: list[bytes], *, limit: int = 8 * KIB, fail: bool = False, unfinished: bool = False
    ) -> None:
        with budget.charge(key) as charge:
            receive = _receive(chunks, budget, stall=stall if unfinished else None)
            try:
                body = await read_body({}, receive, limit, {}, charge)
            except (BudgetExceededError, CapacityExhaustedError, PayloadTooLargeError) as exc:
                outcomes.append(type(exc).__name__)
                return
            finally:
                read[0] += 1
                if read[0] == READERS:
                    all_read.set()
            assert charge.held == len(body)
            await all_read.wait()  # the handler holds its body until every reader is through
            if fail:
                raise RuntimeError("the handler failed")
            outcomes.append("served")

    async def failing() -> None:
        with pytest.raises(RuntimeError):
            await request("user:c", [b"x" * KIB] * 2, fail=True)

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as outer:
            outer.start_soon(partial(request, unfinished=True), "user:c", [b"c" * KIB, b"c"])  # cancelled below
            async with anyio.create_task_group() as group:
                for _ in range(4):  # user:a wants 4 × 3 KiB at once: its 10 KiB cannot hold them all
                    group.start_soon(request, "user:a", [b"a" * KIB] * 3)
                for _ in range(3):
                    group.start_soon(request, "user:b", [b"b" * KIB] * 3)
                group.start_soon(partial(request, limit=2 * KIB), "user:c", [b"c" * KIB] * 3)  # 413 at 3 KiB
                group.start_soon(failing)
            assert (budget.held("user:c"), budget.total_held) == (KIB, KIB)  # only the unfinished body
            outer.cancel_scope.cancel()
    assert budget.total_held == 0
    assert (budget.held("user:a"), budget.held("user:b"), budget.held("user:c")) == (0, 0, 0)
    assert outcomes.count("BudgetExceededError") >= 1
    assert outcomes.count("PayloadTooLargeError") == 1
    assert outcomes.count("served") >= 2 + 3


async def test_sequential_bodies_reuse_the_budget() -> None:
    """Issue 7 item 2: a principal that reads its budget's worth, one body after another, is never refused."""
    budget = _bytes_budget(per_principal=4 * KIB, total=4 * KIB)
    for _ in range(10):
        with budget.charge("user:a") as charge:
            assert await read_body({}, _receive([b"x" * 2 * KIB] * 2, budget), 8 * KIB, {}, charge) == b"x" * 4 * KIB
    assert budget.total_held == 0


def test_settings_refuse_a_per_principal_byte_budget_above_the_total() -> None:
    """Issue 7 item 2: the per-principal byte budget cannot exceed the process's."""
    with pytest.raises(ValidationError, match="max_body_bytes_in_flight_per_principal"):
        McpSettings(max_body_bytes_in_flight_per_principal=2 * KIB * KIB, max_body_bytes_in_flight_total=KIB * KIB)
    defaults = McpSettings()
    assert defaults.max_body_bytes_in_flight_per_principal == 32 * KIB * KIB
    assert defaults.max_body_bytes_in_flight_total == 256 * KIB * KIB
