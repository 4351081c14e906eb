"""The call contract around one call of an agent: its conversation and its idempotency key (issue 10 items 1-2).

Every plane (MCP ``tools/call`` on both endpoints, A2A ``SendMessage``, REST invoke) runs a call through
:meth:`CallContract.run` instead of :func:`~hivegate.calls.invoke.invoke`, so the rules are one:

**Conversations** (``context_id``; A2A ``contextId``). A conversation belongs to one user and one agent.

- A ``context_id`` the caller names must be one of its own conversations with this agent; anything
  else (unknown, purged, another user's, another agent's) is ``invalid_params`` with the same text, so
  no conversation's existence leaks. A conversation whose first call is still running in this process
  counts (an A2A stream shows its ``contextId`` before the call ends).
- Without one, a handshake-era MCP session maps to one conversation per agent (its id derived from the
  session id, the user and the agent: unguessable, the same on every replica and after a restart);
  otherwise the call starts a new conversation (a uuid4) whose id the plane returns.
- The backend receives the id (``Invocation.context_id``) and reads the earlier turns with
  ``await invocation.earlier_turns(limit)``. The call's message and the agent's reply (or failure
  text) are appended as two turns when it ends; a call that ends with no reply (cancelled, timed out,
  backend unavailable) appends nothing. Conversations idle for ``retention_seconds`` are purged.
- Anonymous callers (``auth = "none"``) keep no conversations: a ``context_id`` from one is
  ``invalid_params``; the plane's own id (A2A) still groups its tasks.

**Idempotency keys** (``idempotency_key``; A2A message ``metadata.idempotency_key``), per user × agent:

- The first call with a key claims it (a RUNNING record, stale after the agent's invoke timeout plus
  :data:`CLAIM_GRACE_SECONDS`) and runs; its outcome is stored with the key for ``ttl_seconds``.
- The same key with the same payload (:func:`fingerprint`) within the TTL replays the stored outcome
  without invoking; while the first call still runs, the second waits for it (in this process: woken
  when it ends; on another replica: the record is polled) up to the invoke timeout
  (``service_timeout`` beyond) and returns the same outcome.
- The same key with another payload is :class:`~hivegate.errors.ConflictError` (409 ``conflict``).
- A call that ends with no outcome to keep releases its claim (a retry runs again); a claim left by a
  crash goes stale and the next call takes the key over.
- Anonymous callers cannot use keys (``invalid_params``: a retry would not be safe, so it is refused
  rather than ignored).

Source: the original platform's ``tools/call`` (/work/shared/reference/product-surface.md §3.4 steps
3 and 5, with its recommendation: attach to a call in flight, replay a completed one, 409 for a
changed payload); ``docs/calls.md``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import os
import secrets
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import orjson

from hivegate.auth.principal import Principal
from hivegate.backends.base import Invocation
from hivegate.calls.events import CallFailed, CallOutcome, FinalResult, ReplySink
from hivegate.calls.invoke import CallTarget, invoke
from hivegate.errors import AgentError, ConflictError, InvalidParamsError, ServiceTimeoutError, StoreUnavailableError
from hivegate.storage.calls import (
    CallRecords,
    CallWrite,
    Conversation,
    IdempotencyRecord,
    KeyState,
    StoredOutcome,
    Turn,
    TurnRole,
)

__all__ = [
    "CLAIM_GRACE_SECONDS",
    "MAX_CONTEXT_ID_CHARS",
    "MAX_KEY_CHARS",
    "OPEN_CONTRACT",
    "CallContract",
    "ContractLimits",
    "Keeper",
    "Settled",
    "check_context_id_argument",
    "check_idempotency_key",
    "fingerprint",
]

logger = logging.getLogger(__name__)

MAX_KEY_CHARS = 255
"""The longest ``idempotency_key`` (characters)."""

MAX_CONTEXT_ID_CHARS = 64
"""The longest ``context_id`` a conversation can have (characters)."""

CLAIM_GRACE_SECONDS = 30.0
"""How long after its invoke timeout a RUNNING claim goes stale (the call was cut off by a crash)."""

_POLL_FIRST_SECONDS = 0.05
_POLL_MAX_SECONDS = 0.5

_SESSION_NAMESPACE = uuid.UUID("5f1c8e0e-6a8e-4a38-9d55-2f4c9b0e7a11")
"""The uuid5 namespace of the conversation ids derived from handshake-era MCP sessions."""

_UNKNOWN_CONTEXT = "context_id names no conversation of yours with this agent"

_claim_prefix = secrets.token_hex(8)
_claim_numbers = itertools.count()


def _new_claim() -> str:
    """A claim token (32 hex digits) no other call of any process claims with: this process's random
    64-bit prefix (drawn again in a forked child) and a counter. A claim is compared, never guessed at
    (no caller sees one), so it needs uniqueness only, not a fresh secret per call."""
    return f"{_claim_prefix}{next(_claim_numbers) & 0xFFFF_FFFF_FFFF_FFFF:016x}"


def _new_claim_prefix() -> None:
    global _claim_prefix, _claim_numbers
    _claim_prefix, _claim_numbers = secrets.token_hex(8), itertools.count()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_claim_prefix)

Keeper = Callable[[CallOutcome, str | None], Awaitable[None]]
"""What a plane stores of a call's outcome before the contract records it (:meth:`CallContract.run`'s ``keep``)."""


def check_idempotency_key(value: Any) -> str | None:
    """``value`` as an idempotency key (None when absent).

    Raises:
        InvalidParamsError: not a string of 1–:data:`MAX_KEY_CHARS` characters (``data.param``).
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_CHARS or "\x00" in value:
        raise InvalidParamsError(
            f"'idempotency_key' must be a string of 1 to {MAX_KEY_CHARS} characters, none of them NUL",
            data={"param": "idempotency_key"},
        )
    return value


def check_context_id_argument(value: Any) -> str | None:
    """``value`` as a ``context_id`` argument (None when absent).

    Raises:
        InvalidParamsError: not a string of 1–:data:`MAX_CONTEXT_ID_CHARS` characters (``data.param``).
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_CONTEXT_ID_CHARS or "\x00" in value:
        raise InvalidParamsError(
            f"'context_id' must be a string of 1 to {MAX_CONTEXT_ID_CHARS} characters, none of them NUL",
            data={"param": "context_id"},
        )
    return value


def fingerprint(invocation: Invocation, context_id: str | None) -> str:
    """The SHA-256 (hex) of a call's payload, as an idempotency key compares it.

    The payload is what the caller chose: the skill (None: the message tool), the message, the
    conversation it named (``context_id``; None when it named none), the attachments as sent (a
    ``file_id`` by its id, inline ones by their bytes), and for a skill tool its arguments without
    ``idempotency_key`` and ``context_id``. The message tool's arguments are not hashed beyond those,
    so one message sent over MCP, A2A or REST invoke has one fingerprint on every plane.
    """
    arguments: dict[str, Any] = {}
    if invocation.skill_id is not None:
        arguments = {k: v for k, v in invocation.arguments.items() if k not in ("idempotency_key", "context_id")}
    attachments = [
        [a.file_id, a.name, a.mime_type, a.uri, a.data if a.file_id is None else None] for a in invocation.attachments
    ]
    payload = [invocation.agent_id, invocation.skill_id, invocation.message, context_id, attachments, arguments]
    try:
        canonical = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson cannot write (an integer beyond 64 bits, NaN): the stdlib's JSON
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True, slots=True)
class ContractLimits:
    """The contract's settings (``[conversations]`` and ``[idempotency]``).

    Attributes:
        key_ttl_seconds: how long a finished call's outcome answers its key's replays.
        retention_seconds: how long an idle conversation is kept; None keeps them until deleted.
    """

    key_ttl_seconds: float = 24 * 3600.0
    retention_seconds: float | None = 30 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Settled:
    """How a call ended under the contract.

    Attributes:
        outcome: the terminal event (replayed or fresh).
        context_id: the conversation the call was part of (None: an anonymous call given none).
        replayed: the stored outcome when the call was not invoked but replayed from its key.
    """

    outcome: CallOutcome
    context_id: str | None
    replayed: StoredOutcome | None = None


class CallContract:
    """Runs calls with their conversations and idempotency keys (module docstring); one per gateway.

    Args:
        records: the store; None keeps nothing (every call runs, each ``context_id`` is refused, keys too).
        limits: the TTL and retention.
        clock: the current aware UTC time (tests move it).
    """

    def __init__(
        self,
        records: CallRecords | None,
        limits: ContractLimits = ContractLimits(),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._records = records
        self._limits = limits
        self._clock = clock or (lambda: datetime.now(UTC))
        self._opening: dict[str, tuple[str, str]] = {}
        """Conversations whose first call runs in this process (not stored yet): id → (user, agent)."""
        self._running: dict[tuple[str, str, str], _Holder] = {}
        """Keys whose claim a call of this process holds (in the store, or only here when the store has a
        single writer) → the holding call's fingerprint and an event set when it has ended."""

    @property
    def records(self) -> CallRecords | None:
        """The store of conversations and keys (None: nothing is kept)."""
        return self._records

    async def check_context(self, principal: Principal, agent_id: str, context_id: str) -> None:
        """Refuse a ``context_id`` that names no conversation of ``principal`` with ``agent_id``.

        For a plane that must check before it hands the call on (the A2A SDK path checks at admission).

        Raises:
            InvalidParamsError: as :meth:`run` does for such a ``context_id``.
            StoreUnavailableError: the database failed.
        """
        await self._existing(principal, agent_id, context_id)

    async def run(
        self,
        principal: Principal,
        target: CallTarget,
        invocation: Invocation,
        on_delta: ReplySink | None = None,
        *,
        key: str | None = None,
        session: str | None = None,
        new_context: bool = False,
        task_id: str | None = None,
        keep: Keeper | None = None,
    ) -> Settled:
        """Run ``invocation`` on ``target`` as ``principal`` under the contract (module docstring).

        Args:
            invocation: the call; its ``context_id`` is the one the caller named (checked), or, with
                ``new_context``, one the plane made for a new conversation (an A2A task's).
            on_delta: receives reply deltas of a call that runs (not of a replay).
            key: the checked ``idempotency_key`` (:func:`check_idempotency_key`), or None.
            session: the handshake-era MCP session id, when the call came in one (its conversation).
            task_id: the A2A task that will hold the outcome (kept with the key for replays).
            keep: called with an outcome to keep (a reply or the agent's failure) and the conversation id,
                after the call and before the outcome is stored with the key, so what the plane stores
                (an A2A task) exists when a waiting call replays it. Not called for a replay.

        Returns:
            The outcome and the conversation id (:class:`Settled`).

        Raises:
            InvalidParamsError: a ``context_id`` that names no conversation of the caller with the
                agent, or a context id or key from an anonymous caller.
            ConflictError: ``key`` was used with another payload within its TTL.
            ServiceTimeoutError: the call that holds ``key`` did not end within the invoke timeout.
            StoreUnavailableError: the database failed before the call was invoked.
        """
        user = principal.user_id
        named = None if new_context else invocation.context_id
        if user is None or self._records is None:
            if named is not None or key is not None:
                what = "context_id" if named is not None else "idempotency_key"
                why = "a signed-in caller" if user is None else "a gateway that keeps call records"
                raise InvalidParamsError(f"'{what}' needs {why}", data={"param": what})
            outcome = await invoke(principal, target, invocation, on_delta)
            if keep is not None and _keeps(outcome):
                await keep(outcome, invocation.context_id)
            return Settled(outcome, invocation.context_id)
        records = self._records
        agent_id = invocation.agent_id
        if named is not None:
            conversation = await self._existing(principal, agent_id, named)
        else:
            conversation = self._start(user, agent_id, invocation.context_id, session)
        call = replace(invocation, context_id=conversation.id, history=_history(records, conversation.id))
        opens = named is None
        if key is None:
            return await self._invoke(principal, target, call, on_delta, (conversation, opens), None, keep)
        print_ = fingerprint(invocation, named)
        keyed = self._run_keyed_here if records.single_writer else self._run_keyed_in_store
        return await keyed(principal, target, call, on_delta, (conversation, opens), key, print_, task_id, keep)

    async def _run_keyed_in_store(
        self,
        principal: Principal,
        target: CallTarget,
        call: Invocation,
        on_delta: ReplySink | None,
        where: tuple[Conversation, bool],
        key: str,
        print_: str,
        task_id: str | None,
        keep: Keeper | None,
    ) -> Settled:
        """A keyed call on a store shared by replicas: the key is claimed in the store (a RUNNING record,
        :meth:`CallRecords.claim`) before the call, and a call that finds it held waits (woken here when
        the holder is in this process; polling the record otherwise)."""
        records = self._records
        assert principal.user_id is not None
        assert records is not None
        user, agent_id = principal.user_id, call.agent_id
        deadline = anyio.current_time() + target.spec.invoke_timeout_seconds
        while True:
            now = self._clock()
            stale = now + timedelta(seconds=target.spec.invoke_timeout_seconds + CLAIM_GRACE_SECONDS)
            mine = IdempotencyRecord(user, agent_id, key, print_, _new_claim(), KeyState.RUNNING, now, stale, None)
            held = await records.claim(mine, now)
            if held.fingerprint != print_:
                raise ConflictError()
            if held.claim == mine.claim:
                done = IdempotencyRecord(user, agent_id, key, print_, mine.claim, KeyState.DONE, now, stale, None)
                held_key = _HeldKey(done, task_id, in_store=True)
                return await self._invoke(principal, target, call, on_delta, where, held_key, keep)
            if held.state is KeyState.DONE:
                return _replay(held)
            ended = await self._wait(held, deadline, target.spec.invoke_timeout_seconds)
            if ended is not None:
                if ended.fingerprint != print_:
                    raise ConflictError()
                return _replay(ended)
            # The holder released the key (its call ended with nothing to keep) or went stale: claim again.

    async def _run_keyed_here(
        self,
        principal: Principal,
        target: CallTarget,
        call: Invocation,
        on_delta: ReplySink | None,
        where: tuple[Conversation, bool],
        key: str,
        print_: str,
        task_id: str | None,
        keep: Keeper | None,
    ) -> Settled:
        """A keyed call when the store has this process as its only writer: the key is claimed in memory
        (no write before the call); its stored DONE record, read first, answers replays and conflicts, and
        the call's own DONE record is written with its turns (one write, as an unkeyed call makes).

        A claim left by a crash was in memory only: after a restart the key is free (a RUNNING record in
        the store, left by a crash of an earlier release that claimed in the store, is not waited for)."""
        assert principal.user_id is not None
        assert self._records is not None
        user, agent_id = principal.user_id, call.agent_id
        ticket = (user, agent_id, key)
        waited_for = target.spec.invoke_timeout_seconds
        deadline: float | None = None  # set when the call first waits for another holding the key
        while True:
            holder = self._running.get(ticket)
            if holder is None:
                if self._records.known_absent(user, agent_id, key):  # nearly every key: no read
                    stored = None
                else:
                    stored = await self._records.key(user, agent_id, key)
                    holder = self._running.get(ticket)  # taken by another call during the read?
                if holder is None:
                    now = self._clock()
                    if stored is not None and stored.state is KeyState.DONE and now < stored.expires_at:
                        if stored.fingerprint != print_:
                            raise ConflictError()
                        return _replay(stored)
                    stale = now + timedelta(seconds=waited_for + CLAIM_GRACE_SECONDS)
                    done = IdempotencyRecord(user, agent_id, key, print_, _new_claim(), KeyState.DONE, now, stale, None)
                    held_key = _HeldKey(done, task_id, in_store=False)
                    return await self._invoke(principal, target, call, on_delta, where, held_key, keep)
            if holder.fingerprint != print_:
                raise ConflictError()
            if deadline is None:
                deadline = anyio.current_time() + waited_for
            left = deadline - anyio.current_time()
            if left <= 0:
                raise ServiceTimeoutError(waited_for)
            with anyio.move_on_after(left):
                await holder.ended.wait()
            # The holder ended (stored its outcome, or released the key): look again.

    async def _existing(self, principal: Principal, agent_id: str, context_id: str) -> Conversation:
        """The conversation ``context_id`` when it is one of ``principal``'s with ``agent_id`` (or one
        opening in this process); raises ``invalid_params`` otherwise."""
        user = principal.user_id
        if user is None or self._records is None:
            raise InvalidParamsError(_UNKNOWN_CONTEXT, data={"param": "context_id"})
        if self._opening.get(context_id) == (user, agent_id):
            now = self._clock()
            return Conversation(context_id, user, agent_id, now, now)
        if len(context_id) <= MAX_CONTEXT_ID_CHARS and "\x00" not in context_id:
            found = await self._records.conversation(context_id)
            if found is not None and found.user_id == user and found.agent_id == agent_id:
                return found
        raise InvalidParamsError(_UNKNOWN_CONTEXT, data={"param": "context_id"})

    def _start(self, user: str, agent_id: str, made: str | None, session: str | None) -> Conversation:
        """The conversation of a call that named none: its session's, or a new one (``made``: the plane's
        id). The store creates its row with the call's turns (or finds the session's)."""
        if session is not None:
            conversation_id = str(uuid.uuid5(_SESSION_NAMESPACE, f"{user}\n{agent_id}\n{session}"))
        else:
            conversation_id = made or str(uuid.uuid4())
        now = self._clock()
        return Conversation(conversation_id, user, agent_id, now, now)

    async def _invoke(
        self,
        principal: Principal,
        target: CallTarget,
        call: Invocation,
        on_delta: ReplySink | None,
        where: tuple[Conversation, bool],
        held: _HeldKey | None,
        keep: Keeper | None = None,
    ) -> Settled:
        """Invoke ``call`` and store its turns (and its key's outcome, when it holds one) in one write.

        ``where``: the conversation, and whether the call opens it (it is then findable by id in this
        process while the call runs); ``held``: the key the call holds (:class:`_HeldKey`)."""
        conversation, opens = where
        assert self._records is not None
        assert principal.user_id is not None
        records = self._records
        ticket = None if held is None else (held.done.user_id, held.done.agent_id, held.done.key)
        holder: _Holder | None = None
        if ticket is not None and held is not None:
            holder = self._running[ticket] = _Holder(held.done.fingerprint, asyncio.Event())
        lost = False  # a key claimed here whose DONE record could not be written: held until stale
        opening = opens and conversation.id not in self._opening
        if opening:
            self._opening[conversation.id] = (principal.user_id, call.agent_id)
        kept = False  # an outcome to keep: its key is not released, even when its record could not be written
        try:
            outcome = await invoke(principal, target, call, on_delta)
            if not _keeps(outcome):
                return Settled(outcome, conversation.id)
            kept = True
            # The plane's own write (an A2A task) is submitted first and alongside the record, so both
            # usually share one group-committed transaction; it is awaited before the call returns.
            plane_write = None if keep is None else asyncio.ensure_future(keep(outcome, conversation.id))
            at = self._clock()
            failed = isinstance(outcome, CallFailed)
            text = outcome.error.message if isinstance(outcome, CallFailed) else outcome.text
            done = None
            if held is not None:
                claimed, ttl = held.done, timedelta(seconds=self._limits.key_ttl_seconds)
                stored = StoredOutcome(text, failed, conversation.id, held.task_id)
                done = IdempotencyRecord(
                    claimed.user_id,
                    claimed.agent_id,
                    claimed.key,
                    claimed.fingerprint,
                    claimed.claim,
                    KeyState.DONE,
                    claimed.created_at,
                    at + ttl,
                    stored,
                )
            turns = (Turn(TurnRole.USER, call.message, at), Turn(TurnRole.AGENT, text, at, failed=failed))
            in_store = held is None or held.in_store
            write = CallWrite(replace(conversation, updated_at=at), turns, done, claimed_in_store=in_store)
            try:
                with anyio.CancelScope(shield=True):  # the reply exists: its record is not cut short
                    if plane_write is not None:
                        await asyncio.sleep(0)  # the plane's write is queued first: a replay then finds it
                    await records.record(write)
            except StoreUnavailableError as exc:
                # The caller still gets the reply its call produced; the turns are lost, and a key stays
                # held until stale (RUNNING in the store, or here) (docs/calls.md, "When the database fails").
                logger.warning("agent %s: the call's record was not stored: %s", call.agent_id, exc.reason)
                lost = held is not None and not held.in_store
            finally:
                if plane_write is not None:
                    with anyio.CancelScope(shield=True):
                        await plane_write
            return Settled(outcome, conversation.id)
        finally:
            if opening:
                self._opening.pop(conversation.id, None)
            if ticket is not None and held is not None and holder is not None:
                if not kept and held.in_store:  # cancelled, timed out, the backend unavailable: nothing to keep
                    await _release(records, held.done)
                if lost:  # its waiters wait to their deadline, as for a RUNNING record in the store
                    asyncio.get_running_loop().call_later(
                        (held.done.expires_at - held.done.created_at).total_seconds(), self._let_go, ticket, holder
                    )
                else:
                    self._let_go(ticket, holder)

    def _let_go(self, ticket: tuple[str, str, str], holder: _Holder) -> None:
        """The call holding ``ticket`` in this process has ended: wake its waiters."""
        if self._running.get(ticket) is holder:
            del self._running[ticket]
        holder.ended.set()

    async def _wait(self, held: IdempotencyRecord, deadline: float, waited_for: float) -> IdempotencyRecord | None:
        """Wait for the call holding ``held``'s key to end, until ``deadline`` (anyio time; ``waited_for``
        seconds after the call began, for the error).

        Returns:
            The DONE record, or None when the key was released or its claim went stale (claim again).

        Raises:
            ServiceTimeoutError: the holder did not end by ``deadline``.
        """
        assert self._records is not None
        ticket = (held.user_id, held.agent_id, held.key)
        pause = _POLL_FIRST_SECONDS
        while True:
            left = deadline - anyio.current_time()
            if left <= 0:
                raise ServiceTimeoutError(waited_for)
            local = self._running.get(ticket)
            with anyio.move_on_after(min(left, pause if local is None else left)):
                if local is not None:
                    await local.ended.wait()
                else:
                    await anyio.sleep(pause)  # another replica holds it: poll the record
            pause = min(pause * 2, _POLL_MAX_SECONDS)
            current = await self._records.key(held.user_id, held.agent_id, held.key)
            if current is None or current.claim != held.claim:
                return current if current is not None and current.state is KeyState.DONE else None
            if current.state is KeyState.DONE:
                return current
            if current.expires_at <= self._clock():
                return None

    async def maintain(self, interval_seconds: float) -> None:
        """Purge expired keys and idle conversations every ``interval_seconds``, until cancelled.

        A failed purge is logged and tried again at the next interval.
        """
        while True:
            await anyio.sleep(interval_seconds)
            await self.purge()

    async def purge(self) -> tuple[int, int]:
        """Delete expired idempotency records and conversations idle past the retention, now.

        Returns:
            (records deleted, conversations deleted); (0, 0) without a store or when the database failed.
        """
        if self._records is None:
            return (0, 0)
        now = self._clock()
        retention = self._limits.retention_seconds
        idle_before = None if retention is None else now - timedelta(seconds=retention)
        try:
            return await self._records.purge(now, idle_before)
        except StoreUnavailableError as exc:
            logger.warning("the call records' purge failed: %s", exc.reason)
            return (0, 0)


@dataclass(frozen=True, slots=True)
class _HeldKey:
    """The idempotency key a running call holds.

    Attributes:
        done: its DONE record as claimed (the outcome and TTL are filled in when the call ends).
        task_id: the A2A task that will hold the outcome (kept with it for replays).
        in_store: claimed in the store (a RUNNING record); False: claimed in this process's memory, the
            store having this process as its only writer.
    """

    done: IdempotencyRecord
    task_id: str | None
    in_store: bool


@dataclass(frozen=True, slots=True)
class _Holder:
    """A call of this process holding a key: its payload's fingerprint, and an event set when it ends."""

    fingerprint: str
    ended: asyncio.Event


def _history(records: CallRecords, conversation_id: str) -> Callable[[int], Awaitable[Sequence[Turn]]]:
    """The reader of the conversation's earlier turns a backend gets (``Invocation.earlier_turns``)."""

    async def earlier(limit: int) -> Sequence[Turn]:
        return await records.last_turns(conversation_id, max(1, min(limit, 1000)))

    return earlier


def _keeps(outcome: CallOutcome) -> bool:
    """Whether a call's outcome is kept (a reply or the agent's own failure), not a plane failure."""
    return isinstance(outcome, FinalResult) or outcome.agent_failed


def _replay(record: IdempotencyRecord) -> Settled:
    """The :class:`Settled` a DONE record replays."""
    kept = record.outcome
    assert kept is not None
    outcome: CallOutcome = CallFailed(AgentError(kept.text)) if kept.failed else FinalResult(kept.text)
    return Settled(outcome, kept.context_id, replayed=kept)


async def _release(records: CallRecords, held: IdempotencyRecord | None) -> None:
    """Give a held key back (shielded: a cancelled call still releases); a failure leaves it to go stale."""
    if held is None:
        return
    with anyio.CancelScope(shield=True):
        try:
            await records.release(held.user_id, held.agent_id, held.key, held.claim)
        except StoreUnavailableError as exc:
            logger.warning("agent %s: an idempotency key was not released: %s", held.agent_id, exc.reason)


OPEN_CONTRACT = CallContract(None)
"""No store: every call runs; ``context_id`` and ``idempotency_key`` are refused (tests, tools)."""
