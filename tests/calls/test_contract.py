"""The call contract in process (issue 10 items 1-2): conversations and idempotency keys around real
backends (``CallableBackend`` around plain functions) and real stores (memory and a SQLite file).

No mocks; every wait is bounded (``anyio.fail_after``); overlapping calls are held by events, not sleeps.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from hypothesis import given
from hypothesis import strategies as st

from hivegate.agents.model import AgentSpec
from hivegate.auth.principal import ANONYMOUS, CredentialKind, Principal
from hivegate.backends.base import Attachment, Invocation
from hivegate.backends.python import CallableBackend
from hivegate.calls.contract import (
    CallContract,
    ContractLimits,
    check_context_id_argument,
    check_idempotency_key,
    fingerprint,
)
from hivegate.calls.events import CallFailed, FinalResult
from hivegate.calls.invoke import CallTarget
from hivegate.errors import AgentError, ConflictError, InvalidParamsError, ServiceTimeoutError
from hivegate.storage import open_storage
from hivegate.storage.calls import CallRecords, IdempotencyRecord, KeyState, TurnRole

ALICE = Principal(kind=CredentialKind.USER_KEY, user_id="u-alice", username="alice", agents=None)
BOB = Principal(kind=CredentialKind.USER_KEY, user_id="u-bob", username="bob", agents=None)


class Agent:
    """A backend function that counts its calls, can be held until released, and replies with what it saw."""

    def __init__(self) -> None:
        self.calls: list[Invocation] = []
        self.hold: anyio.Event | None = None
        self.started = anyio.Event()
        self.fail = False

    async def __call__(self, invocation: Invocation) -> str:
        self.calls.append(invocation)
        self.started.set()
        if self.hold is not None:
            await self.hold.wait()
        if self.fail:
            raise AgentError(f"cannot {invocation.message}")
        earlier = [f"{turn.role}:{turn.text}" for turn in await invocation.earlier_turns()]
        return f"{invocation.message}|{invocation.context_id}|{','.join(earlier)}"


def target(agent: Agent, agent_id: str = "a", timeout: float = 30.0) -> CallTarget:
    spec = AgentSpec.model_validate({"id": agent_id, "name": "A", "owner": "alice", "invoke_timeout_seconds": timeout})
    return CallTarget(spec, CallableBackend(agent.__call__))  # the bound coroutine function: an async backend


def call(message: str = "hello", agent_id: str = "a", **fields: Any) -> Invocation:
    return Invocation(agent_id=agent_id, message=message, **fields)


class SharedStore:
    """A real store presented as shared by replicas (``single_writer`` False), so the contract claims keys
    in it (RUNNING records) as it does on PostgreSQL; every method is the store's own."""

    def __init__(self, records: CallRecords) -> None:
        self._records = records

    @property
    def single_writer(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._records, name)


async def _open_records(kind: str, tmp_path: Path) -> AsyncGenerator[CallRecords]:
    url = "memory://" if kind.startswith("memory") else f"sqlite+aiosqlite:///{tmp_path / 'calls.db'}"
    storage = await open_storage(url)
    try:
        yield SharedStore(storage.calls) if kind.endswith("-shared") else storage.calls  # type: ignore[misc]
    finally:
        await storage.close()


@pytest.fixture(params=["memory", "sqlite", "memory-shared", "sqlite-shared"])
async def records(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncGenerator[CallRecords]:
    """A store of each kind; ``-shared``: keys claimed in the store (the replicas' way), otherwise in
    the process's memory (the store's only writer)."""
    async for opened in _open_records(str(request.param), tmp_path):
        yield opened


@pytest.fixture(params=["memory-shared", "sqlite-shared"])
async def shared_records(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncGenerator[CallRecords]:
    """A store whose keys are claimed in it (RUNNING records), as replicas share PostgreSQL."""
    async for opened in _open_records(str(request.param), tmp_path):
        yield opened


@pytest.fixture(params=["memory", "sqlite"])
async def own_records(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncGenerator[CallRecords]:
    """A store with this process as its only writer: keys claimed in memory."""
    async for opened in _open_records(str(request.param), tmp_path):
        yield opened


async def test_a_call_starts_a_conversation_and_the_next_one_sees_its_turns(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    first = await contract.run(ALICE, target(agent), call("one"))
    assert first.context_id is not None
    assert first.outcome == FinalResult(f"one|{first.context_id}|")
    second = await contract.run(ALICE, target(agent), call("two", context_id=first.context_id))
    assert second.context_id == first.context_id
    assert second.outcome == FinalResult(f"two|{first.context_id}|user:one,agent:one|{first.context_id}|")
    turns = await records.turns(first.context_id, "u-alice")
    assert turns is not None
    assert [(turn.role, turn.text) for turn in turns][:2] == [
        (TurnRole.USER, "one"),
        (TurnRole.AGENT, f"one|{first.context_id}|"),
    ]
    assert len(turns) == 4
    stored = await records.conversation(first.context_id)
    assert stored is not None
    assert (stored.user_id, stored.agent_id, stored.turn_count) == ("u-alice", "a", 4)


async def test_each_call_without_a_context_id_or_session_gets_a_new_conversation(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    ids = {(await contract.run(ALICE, target(agent), call("x"))).context_id for _ in range(3)}
    assert len(ids) == 3


async def test_a_session_maps_to_one_conversation_per_user_and_agent(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    first = await contract.run(ALICE, target(agent), call("one"), session="s-1")
    again = await contract.run(ALICE, target(agent), call("two"), session="s-1")
    assert first.context_id == again.context_id
    assert again.outcome == FinalResult(f"two|{first.context_id}|user:one,agent:one|{first.context_id}|")
    other_agent = await contract.run(ALICE, target(agent, "b"), call("x", agent_id="b"), session="s-1")
    other_user = await contract.run(BOB, target(agent), call("x"), session="s-1")
    other_session = await contract.run(ALICE, target(agent), call("x"), session="s-2")
    assert len({first.context_id, other_agent.context_id, other_user.context_id, other_session.context_id}) == 4


async def test_another_users_or_agents_or_an_unknown_context_id_is_refused_alike(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    alices = (await contract.run(ALICE, target(agent), call("one"))).context_id
    assert alices is not None
    messages: set[str] = set()
    for who, agent_id, context_id in [(BOB, "a", alices), (ALICE, "b", alices), (ALICE, "a", "no-such-conversation")]:
        with pytest.raises(InvalidParamsError) as refused:
            await contract.run(who, target(agent, agent_id), call("x", agent_id, context_id=context_id))
        messages.add(refused.value.message)
    assert len(messages) == 1  # the same answer: no conversation's existence leaks
    assert len(agent.calls) == 1


async def test_anonymous_callers_keep_nothing_and_cannot_use_keys_or_name_conversations(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    settled = await contract.run(ANONYMOUS, target(agent), call("x"))
    assert settled.context_id is None
    assert settled.outcome == FinalResult("x|None|")
    for fields in ({"context_id": "c1"},):
        with pytest.raises(InvalidParamsError):
            await contract.run(ANONYMOUS, target(agent), call("x", **fields))
    with pytest.raises(InvalidParamsError):
        await contract.run(ANONYMOUS, target(agent), call("x"), key="k")
    # A plane's own id for an anonymous call (an A2A task's contextId) is the call's, not checked.
    made = await contract.run(ANONYMOUS, target(agent), call("x", context_id="ctx-made"), new_context=True)
    assert made.context_id == "ctx-made"
    assert len(agent.calls) == 2


async def test_a_key_replays_the_stored_outcome_without_invoking(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    first = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    again = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    assert len(agent.calls) == 1
    assert again.outcome == first.outcome
    assert again.context_id == first.context_id
    assert first.replayed is None
    assert again.replayed is not None


async def test_an_agent_failure_is_kept_and_replayed_as_the_same_failure(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    agent.fail = True
    first = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    again = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    assert isinstance(first.outcome, CallFailed)
    assert isinstance(again.outcome, CallFailed)
    assert again.outcome.agent_failed
    assert again.outcome.error.message == first.outcome.error.message == "cannot pay"
    assert len(agent.calls) == 1


async def test_a_changed_payload_under_a_used_key_is_a_conflict(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    await contract.run(ALICE, target(agent), call("pay 10"), key="k1")
    for changed in (call("pay 20"), call("pay 10", skill_id="s"), call("pay 10", attachments=(Attachment(uri="u"),))):
        with pytest.raises(ConflictError) as conflict:
            await contract.run(ALICE, target(agent), changed, key="k1")
        assert conflict.value.data == {"code": "conflict", "param": "idempotency_key"}
    assert len(agent.calls) == 1


async def test_keys_are_per_user_and_per_agent(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    await contract.run(ALICE, target(agent), call("x"), key="same")
    await contract.run(BOB, target(agent), call("other payload"), key="same")
    await contract.run(ALICE, target(agent, "b"), call("other payload", "b"), key="same")
    assert len(agent.calls) == 3


async def test_ten_concurrent_calls_with_one_key_invoke_once_and_share_the_outcome(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    agent.hold = anyio.Event()
    results: list[Any] = []

    async def one() -> None:
        results.append(await contract.run(ALICE, target(agent), call("pay"), key="k1"))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(one)
            await agent.started.wait()
            agent.hold.set()
    assert len(agent.calls) == 1
    assert len({repr(result.outcome) for result in results}) == 1
    assert sum(result.replayed is None for result in results) == 1


async def test_a_holder_cancelled_releases_the_key_and_a_waiter_runs_the_call(records: CallRecords) -> None:
    """The call holding a key is cancelled (its client left) while another with the key waits: the key is
    released, the waiter claims it and runs the call itself, and its outcome is the key's."""
    contract, agent = CallContract(records), Agent()
    agent.hold = anyio.Event()
    waited: list[Any] = []

    async def waiter() -> None:
        waited.append(await contract.run(ALICE, target(agent), call("pay"), key="k2"))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as outer:
            async with anyio.create_task_group() as holder:
                holder.start_soon(lambda: contract.run(ALICE, target(agent), call("pay"), key="k2"))
                await agent.started.wait()
                outer.start_soon(waiter)
                await wait_all_tasks_blocked()  # the waiter found the key held and waits on it
                holder.cancel_scope.cancel()
            agent.hold.set()
    assert len(agent.calls) == 2  # the cancelled call, then the waiter's own
    assert waited[0].replayed is None
    assert waited[0].outcome == FinalResult(f"pay|{waited[0].context_id}|")
    stored = await records.key("u-alice", "a", "k2")
    assert stored is not None
    assert stored.state is KeyState.DONE


async def test_a_claim_left_by_a_crash_goes_stale_and_is_taken_over(records: CallRecords) -> None:
    """(In the store: a RUNNING record past its stale time is taken over; in memory: such a record, which
    only a crash can have left, is not looked at.)"""
    now = datetime.now(UTC)
    contract, agent = CallContract(records), Agent()
    left = IdempotencyRecord(
        "u-alice",
        "a",
        "k1",
        fingerprint(call("pay"), None),
        "0" * 32,
        KeyState.RUNNING,
        now,
        now - timedelta(seconds=1),
    )
    assert (await records.claim(left, now - timedelta(seconds=2))).claim == left.claim
    settled = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    assert settled.replayed is None
    assert len(agent.calls) == 1
    stored = await records.key("u-alice", "a", "k1")
    assert stored is not None
    assert stored.state is KeyState.DONE


async def test_a_waiter_gives_up_at_its_deadline_while_a_live_claim_holds_the_key(shared_records: CallRecords) -> None:
    """A live claim of another process (nothing in this one to wake the waiter) is polled until the deadline."""
    records = shared_records
    now = datetime.now(UTC)
    held = IdempotencyRecord(
        "u-alice", "a", "k1", fingerprint(call("pay"), None), "1" * 32, KeyState.RUNNING, now, now + timedelta(hours=1)
    )
    await records.claim(held, now)
    contract, agent = CallContract(records), Agent()
    with anyio.fail_after(10), pytest.raises(ServiceTimeoutError):
        await contract.run(ALICE, target(agent, timeout=0.3), call("pay"), key="k1")
    assert agent.calls == []


async def test_a_running_record_in_a_single_writer_store_is_not_waited_for(own_records: CallRecords) -> None:
    """The store has this process as its only writer: a live RUNNING record can only be a crashed
    process's (an earlier release claimed in the store), so the key's call runs and its DONE record
    replaces it."""
    records = own_records
    now = datetime.now(UTC)
    left = IdempotencyRecord(
        "u-alice", "a", "k1", fingerprint(call("pay"), None), "1" * 32, KeyState.RUNNING, now, now + timedelta(hours=1)
    )
    await records.claim(left, now)
    contract, agent = CallContract(records), Agent()
    with anyio.fail_after(10):
        settled = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    assert settled.replayed is None
    assert len(agent.calls) == 1
    stored = await records.key("u-alice", "a", "k1")
    assert stored is not None
    assert stored.state is KeyState.DONE
    assert stored.claim != left.claim
    again = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    assert again.replayed is not None
    assert len(agent.calls) == 1


async def test_a_plane_failure_keeps_nothing_so_a_retry_runs_again(records: CallRecords) -> None:
    contract, agent = CallContract(records), Agent()
    agent.hold = anyio.Event()  # never set: the call times out
    first = await contract.run(ALICE, target(agent, timeout=0.2), call("pay"), key="k1")
    assert isinstance(first.outcome, CallFailed)
    assert isinstance(first.outcome.error, ServiceTimeoutError)
    assert await records.key("u-alice", "a", "k1") is None
    assert first.context_id is not None
    assert await records.conversation(first.context_id) is None  # nothing was said back: no turns kept
    agent.hold = None
    again = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    assert isinstance(again.outcome, FinalResult)
    assert len(agent.calls) == 2


async def test_purge_removes_expired_keys_and_idle_conversations(records: CallRecords, tmp_path: Path) -> None:
    clock = [datetime.now(UTC)]
    contract = CallContract(records, ContractLimits(key_ttl_seconds=60, retention_seconds=3600), lambda: clock[0])
    agent = Agent()
    settled = await contract.run(ALICE, target(agent), call("pay"), key="k1")
    assert settled.context_id is not None
    clock[0] += timedelta(seconds=61)
    assert await contract.purge() == (1, 0)
    clock[0] += timedelta(hours=1)
    assert await contract.purge() == (0, 1)
    assert await records.conversation(settled.context_id) is None
    with pytest.raises(InvalidParamsError):
        await contract.run(ALICE, target(agent), call("again", context_id=settled.context_id))


async def test_without_a_store_every_call_runs_and_contract_fields_are_refused() -> None:
    contract, agent = CallContract(None), Agent()
    assert (await contract.run(ALICE, target(agent), call("x"))).outcome == FinalResult("x|None|")
    with pytest.raises(InvalidParamsError):
        await contract.run(ALICE, target(agent), call("x"), key="k")
    with pytest.raises(InvalidParamsError):
        await contract.run(ALICE, target(agent), call("x", context_id="c"))


@given(st.one_of(st.none(), st.integers(), st.text(max_size=300), st.lists(st.text(max_size=3), max_size=2)))
def test_keys_and_context_ids_are_checked_strings_of_bounded_length(value: Any) -> None:
    for check, most in ((check_idempotency_key, 255), (check_context_id_argument, 64)):
        if value is None:
            assert check(value) is None
        elif isinstance(value, str) and 0 < len(value) <= most and "\x00" not in value:
            assert check(value) == value
        else:
            with pytest.raises(InvalidParamsError):
                check(value)


@given(
    st.text(max_size=40),
    st.text(max_size=40),
    st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    st.dictionaries(st.sampled_from(["idempotency_key", "context_id", "x", "y"]), st.integers(), max_size=4),
)
def test_a_fingerprint_is_the_payload_the_caller_chose(
    message: str, other: str, skill: str | None, args: dict[str, Any]
) -> None:
    base = call(message, skill_id=skill, arguments=args)
    # The key and the context id inside a skill's arguments are not part of its payload.
    trimmed = {k: v for k, v in args.items() if k not in ("idempotency_key", "context_id")}
    assert fingerprint(base, None) == fingerprint(replace(base, arguments={**trimmed, "idempotency_key": "z"}), None)
    assert (fingerprint(base, None) == fingerprint(replace(base, message=other), None)) == (message == other)
    assert fingerprint(base, None) != fingerprint(base, "c1")
    if skill is None:  # the message tool: one payload whatever plane (arguments) carried it
        assert fingerprint(base, None) == fingerprint(replace(base, arguments={"q": 1}), None)
