""":class:`~hivegate.storage.calls.CallRecords` in process memory (``memory://``)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from hivegate.storage.calls import (
    CallWrite,
    Conversation,
    IdempotencyRecord,
    KeyState,
    Turn,
    check_page,
    require_aware,
    require_aware_write,
)

__all__ = ["MemoryCallRecords"]


class MemoryCallRecords:
    """Conversations, turns and idempotency records in dicts.

    Every method is synchronous inside (no ``await``), so each one, :meth:`claim` and :meth:`record`
    included, is atomic on the event loop: no other call runs between its check and its write.
    """

    def __init__(self) -> None:
        self._conversations: dict[str, Conversation] = {}
        self._turns: dict[str, list[Turn]] = {}
        self._keys: dict[tuple[str, str, str], IdempotencyRecord] = {}
        self._last_seq = 0

    @property
    def single_writer(self) -> bool:
        """See :attr:`CallRecords.single_writer`: always (the dicts are this process's own)."""
        return True

    async def conversation(self, conversation_id: str) -> Conversation | None:
        """See :meth:`CallRecords.conversation`."""
        return self._conversations.get(conversation_id)

    async def conversations(
        self, user_id: str, *, agent_id: str | None = None, before: tuple[datetime, str] | None = None, limit: int = 50
    ) -> list[Conversation]:
        """See :meth:`CallRecords.conversations`.

        Raises:
            ValueError: ``limit`` outside 1–1000, or a naive ``before`` time.
        """
        check_page(limit)
        if before is not None:
            require_aware(before[0])
        found = [
            item
            for item in self._conversations.values()
            if item.user_id == user_id
            and (agent_id is None or item.agent_id == agent_id)
            and (before is None or (item.updated_at, item.id) < before)
        ]
        found.sort(key=lambda item: (item.updated_at, item.id), reverse=True)
        return found[:limit]

    async def turns(
        self, conversation_id: str, user_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[Turn] | None:
        """See :meth:`CallRecords.turns`.

        Raises:
            ValueError: ``limit`` outside 1–1000.
        """
        check_page(limit)
        held = self._conversations.get(conversation_id)
        if held is None or held.user_id != user_id:
            return None
        turns = self._turns.get(conversation_id, [])
        start = bisect.bisect_right(turns, after_seq, key=lambda turn: turn.seq)
        return turns[start : start + limit]

    async def last_turns(self, conversation_id: str, limit: int) -> list[Turn]:
        """See :meth:`CallRecords.last_turns` (``limit`` below 1: [])."""
        if limit < 1:
            return []
        return self._turns.get(conversation_id, [])[-limit:]

    async def delete_conversation(self, conversation_id: str, user_id: str) -> bool:
        """See :meth:`CallRecords.delete_conversation`."""
        held = self._conversations.get(conversation_id)
        if held is None or held.user_id != user_id:
            return False
        del self._conversations[conversation_id]
        self._turns.pop(conversation_id, None)
        return True

    async def claim(self, record: IdempotencyRecord, now: datetime) -> IdempotencyRecord:
        """See :meth:`CallRecords.claim`.

        Raises:
            ValueError: a naive datetime in ``record`` or ``now``.
        """
        require_aware(record.created_at, record.expires_at, now)
        identity = (record.user_id, record.agent_id, record.key)
        held = self._keys.get(identity)
        if held is not None and now < held.expires_at:
            return held
        self._keys[identity] = record
        return record

    async def key(self, user_id: str, agent_id: str, key: str) -> IdempotencyRecord | None:
        """See :meth:`CallRecords.key`."""
        return self._keys.get((user_id, agent_id, key))

    def known_absent(self, user_id: str, agent_id: str, key: str) -> bool:
        """See :meth:`CallRecords.known_absent`: the records are all in memory."""
        return (user_id, agent_id, key) not in self._keys

    async def release(self, user_id: str, agent_id: str, key: str, claim: str) -> None:
        """See :meth:`CallRecords.release`."""
        identity = (user_id, agent_id, key)
        held = self._keys.get(identity)
        if held is not None and held.claim == claim and held.state is KeyState.RUNNING:
            del self._keys[identity]

    async def record(self, write: CallWrite) -> bool:
        """See :meth:`CallRecords.record`: ``updated_at`` becomes the latest of its stored value, the
        written conversation's ``updated_at`` and the turns' ``at`` (it never moves back).

        Raises:
            ValueError: a naive datetime in ``write``.
        """
        require_aware_write(write)
        stored = True
        if write.done is not None:
            done = write.done
            identity = (done.user_id, done.agent_id, done.key)
            held = self._keys.get(identity)
            stored = not write.claimed_in_store or (held is not None and held.claim == done.claim)
            if stored:
                self._keys[identity] = done
        if write.conversation is not None:
            self._append(write.conversation, write.turns)
        return stored

    def _append(self, conversation: Conversation, written: Sequence[Turn]) -> None:
        held = self._conversations.get(conversation.id)
        if held is None:
            held = replace(conversation, turn_count=0)
            self._turns[conversation.id] = []
        kept = self._turns[conversation.id]
        for turn in written:
            self._last_seq += 1
            kept.append(replace(turn, seq=self._last_seq))
        updated_at = max([held.updated_at, conversation.updated_at, *(turn.at for turn in written)])
        self._conversations[conversation.id] = replace(
            held, updated_at=updated_at, turn_count=held.turn_count + len(written)
        )

    async def purge(self, now: datetime, idle_before: datetime | None) -> tuple[int, int]:
        """See :meth:`CallRecords.purge`.

        Raises:
            ValueError: a naive ``now`` or ``idle_before``.
        """
        require_aware(now, idle_before)
        expired = [identity for identity, held in self._keys.items() if held.expires_at < now]
        for identity in expired:
            del self._keys[identity]
        idle: list[str] = []
        if idle_before is not None:
            idle = [item.id for item in self._conversations.values() if item.updated_at < idle_before]
        for conversation_id in idle:
            del self._conversations[conversation_id]
            self._turns.pop(conversation_id, None)
        return len(expired), len(idle)
