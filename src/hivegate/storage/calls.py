"""What calls leave behind: conversations with their turns, and idempotency records (issue 10 items 1-2).

The ``CallRecords`` protocol, its records and the one write a finished call makes
(:class:`CallWrite`). Implementations: :class:`hivegate.storage.memory.calls.MemoryCallRecords` and
:class:`hivegate.storage.sql.calls.SqlCallRecords` (tables ``conversations``, ``conversation_turns``
and ``idempotency_keys``, migration ``0013_call_records``); one contract suite
(``tests/storage/test_call_records_contract.py``) runs over memory, SQLite and PostgreSQL.

The rules callers rely on (the invocation layer, :mod:`hivegate.calls.contract`):

- a conversation belongs to one user and one agent; the store answers reads by id and the caller
  checks the owner, except where a method takes ``user_id`` (then another user's conversation is
  answered as if it did not exist);
- an idempotency record is keyed by (user, agent, key). :meth:`CallRecords.claim` is the one place
  a call takes a key: atomically, it stores a RUNNING record carrying the caller's claim token unless
  a live record holds the key (a RUNNING one whose ``expires_at`` has not passed, or a DONE one whose
  ``expires_at`` has not passed); a stale or expired record is replaced. The record returned tells
  the caller whether it holds the key (``record.claim == its token``) or what holds it;
- :meth:`CallRecords.record` is the one write of a finished call, one transaction: the
  conversation (created when new, ``updated_at`` and ``turn_count`` moved on), its turns, and the
  DONE record replacing the caller's RUNNING claim, only if that claim is still the caller's; or,
  for a key claimed in the memory of the store's only writer (:attr:`CallRecords.single_writer`,
  ``CallWrite.claimed_in_store`` False), the DONE record inserted, replacing any record of its key.

Times are aware UTC datetimes. SQL stores raise :class:`~hivegate.errors.StoreUnavailableError`
when the database fails, and commit concurrent :meth:`~CallRecords.claim` and
:meth:`~CallRecords.record` calls together (one write transaction per batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

__all__ = [
    "MAX_PAGE",
    "CallRecords",
    "CallWrite",
    "Conversation",
    "IdempotencyRecord",
    "KeyState",
    "StoredOutcome",
    "Turn",
    "TurnRole",
    "check_page",
    "require_aware",
    "require_aware_write",
]

MAX_PAGE = 1000
"""The largest ``limit`` of a page of conversations or turns."""


class TurnRole(StrEnum):
    """Who said a turn: the caller (``user``) or the agent (``agent``)."""

    USER = "user"
    AGENT = "agent"


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation: a caller's exchange with one agent, continued by its id (``context_id``).

    Attributes:
        id: at most 64 characters of ``[A-Za-z0-9._:-]`` (uuid4 strings when hivegate makes them).
        user_id: its owner.
        agent_id: the one agent it is with.
        created_at, updated_at: aware UTC; ``updated_at`` is the time of the last turn written.
        turn_count: turns stored (purged conversations take their turns with them).
    """

    id: str
    user_id: str
    agent_id: str
    created_at: datetime
    updated_at: datetime
    turn_count: int = 0


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a conversation.

    Attributes:
        role: who said it.
        text: what was said (the caller's message, or the agent's reply or failure text).
        at: aware UTC.
        failed: True for an agent turn that is the agent's failure message, not a reply.
        seq: its position: increasing within the store (not dense; 0 in a turn not yet stored).
    """

    role: TurnRole
    text: str
    at: datetime
    failed: bool = False
    seq: int = 0


class KeyState(StrEnum):
    """An idempotency record's state: a call holds the key and runs (``running``), or it ended (``done``)."""

    RUNNING = "running"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class StoredOutcome:
    """The end of a call kept for replay: the agent's reply (or its failure text) and where it went.

    Attributes:
        text: the reply text, or the agent's failure message when ``failed``.
        failed: whether the agent failed (MCP: an ``isError`` result; A2A: a FAILED task).
        context_id: the conversation the call was part of (None for none).
        task_id: the A2A task that holds the outcome, when the call came in on A2A.
    """

    text: str
    failed: bool = False
    context_id: str | None = None
    task_id: str | None = None


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """An idempotency key of a (user, agent) pair and what it holds.

    Attributes:
        user_id, agent_id, key: the record's identity (``key``: 1–255 characters).
        fingerprint: the lowercase hex SHA-256 of the call's payload (:mod:`hivegate.calls.contract`).
        claim: the token of the call that holds or held the key (32 hex digits).
        state: RUNNING while that call runs, DONE once its outcome is stored.
        outcome: the stored outcome (DONE only).
        created_at: aware UTC.
        expires_at: RUNNING: when the claim goes stale (a call cut off by a crash holds the key until
            then); DONE: when the record stops answering replays (the TTL).
    """

    user_id: str
    agent_id: str
    key: str
    fingerprint: str
    claim: str
    state: KeyState
    created_at: datetime
    expires_at: datetime
    outcome: StoredOutcome | None = None


@dataclass(frozen=True, slots=True)
class CallWrite:
    """What one finished call leaves in the store (:meth:`CallRecords.record`), in one transaction.

    Attributes:
        conversation: the conversation the turns go to, created when the store has no row of its id
            (``turn_count`` is then counted from the turns written). None: no conversation is kept.
        turns: appended in order; ``seq`` is assigned by the store.
        done: the DONE record that replaces the RUNNING record of the same (user, agent, key) when
            that record's ``claim`` is still ``done.claim``. None: the call held no key.
        claimed_in_store: False when ``done``'s key was claimed in the memory of the store's only writer
            (:attr:`CallRecords.single_writer`), not by :meth:`CallRecords.claim`: ``done`` is then
            inserted, replacing any record of its key.
    """

    conversation: Conversation | None = None
    turns: Sequence[Turn] = ()
    done: IdempotencyRecord | None = None
    claimed_in_store: bool = True


class CallRecords(Protocol):
    """Where conversations and idempotency records live (module docstring).

    Attributes:
        single_writer: True when this process is the store's only writer (memory; a SQLite file, which
            one gateway process serves): a call's key can then be claimed in the process's memory, with
            only its DONE record stored (:class:`CallWrite` ``claimed_in_store``). False (PostgreSQL,
            shared by replicas): keys are claimed in the store (:meth:`claim`).
    """

    @property
    def single_writer(self) -> bool: ...

    async def conversation(self, conversation_id: str) -> Conversation | None:
        """The conversation ``conversation_id``, or None."""
        ...

    async def conversations(
        self, user_id: str, *, agent_id: str | None = None, before: tuple[datetime, str] | None = None, limit: int = 50
    ) -> list[Conversation]:
        """``user_id``'s conversations (only those with ``agent_id`` when given), newest ``updated_at``
        first, then by id descending; ``before`` (an ``(updated_at, id)`` of an earlier page's last
        item) starts after that item. At most ``limit`` (1–1000)."""
        ...

    async def turns(
        self, conversation_id: str, user_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[Turn] | None:
        """The turns of ``user_id``'s conversation ``conversation_id`` with ``seq > after_seq``, oldest
        first, at most ``limit`` (1–1000); None when it does not exist or is another user's."""
        ...

    async def last_turns(self, conversation_id: str, limit: int) -> list[Turn]:
        """The newest ``limit`` turns of the conversation, oldest first ([] for none or an unknown id).
        For the backend reading its conversation's history; the caller checked the owner."""
        ...

    async def delete_conversation(self, conversation_id: str, user_id: str) -> bool:
        """Delete ``user_id``'s conversation and its turns; False when it does not exist or is another's."""
        ...

    async def claim(self, record: IdempotencyRecord, now: datetime) -> IdempotencyRecord:
        """Take ``record``'s key for the call whose token is ``record.claim`` (module docstring), atomically.

        ``record`` is RUNNING, its ``expires_at`` the time its claim goes stale.

        Returns:
            The record the key now has: ``record`` itself (same ``claim``) when the key was free, stale
            or expired at ``now``; otherwise the live record that holds it (RUNNING or DONE).
        """
        ...

    async def key(self, user_id: str, agent_id: str, key: str) -> IdempotencyRecord | None:
        """The record of the key, live or not, or None."""
        ...

    def known_absent(self, user_id: str, agent_id: str, key: str) -> bool:
        """True when the store knows, without a read, that it holds no record of the key (a store whose
        only writer is this process: :attr:`single_writer`); False: it may hold one (ask :meth:`key`)."""
        ...

    async def release(self, user_id: str, agent_id: str, key: str, claim: str) -> None:
        """Delete the RUNNING record of the key if ``claim`` still holds it (a call that ended with no
        outcome to keep: cancelled, timed out, the backend unavailable)."""
        ...

    async def record(self, write: CallWrite) -> bool:
        """Store ``write`` in one transaction (:class:`CallWrite`).

        Returns:
            Whether ``write.done`` was stored (True also when ``done`` is None); False when the key's
            claim was no longer ``done.claim`` (another call took it over after it went stale): the
            conversation and turns are stored all the same.
        """
        ...

    async def purge(self, now: datetime, idle_before: datetime | None) -> tuple[int, int]:
        """Delete idempotency records whose ``expires_at`` is before ``now``, and conversations (with
        their turns) whose ``updated_at`` is before ``idle_before`` (None: keep every conversation).

        Returns:
            (records deleted, conversations deleted).
        """
        ...


def check_page(limit: int) -> None:
    """Raise ``ValueError`` unless ``limit`` is 1–:data:`MAX_PAGE` (both stores check it alike)."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be 1-{MAX_PAGE}, not {limit}")


def require_aware(*values: datetime | None) -> None:
    """Refuse naive datetimes (``ValueError``): a direct check (the generic ``require_aware`` of
    :mod:`hivegate.storage.oauth` walks fields, ~40 times slower)."""
    for value in values:
        if value is not None and value.tzinfo is None:
            raise ValueError("call records need aware datetimes")


def require_aware_write(write: CallWrite) -> None:
    """:func:`require_aware` of every time ``write`` carries."""
    conversation, done = write.conversation, write.done
    if conversation is not None:
        require_aware(conversation.created_at, conversation.updated_at, *(turn.at for turn in write.turns))
    if done is not None:
        require_aware(done.created_at, done.expires_at)
