"""Conversations, turns and idempotency records in the gateway's database (tables of migration ``0013``).

Reads (:meth:`~SqlCallRecords.conversation`, :meth:`~SqlCallRecords.conversations`,
:meth:`~SqlCallRecords.turns`, :meth:`~SqlCallRecords.last_turns`, :meth:`~SqlCallRecords.key`) are one
``SELECT`` each. The writes every call makes, :meth:`~SqlCallRecords.claim` and
:meth:`~SqlCallRecords.record`, are **group-committed**
(:class:`~hivegate.storage.sql.group_commit.GroupCommit`): the claims and records queued while one
write transaction runs are written by the next, in one transaction of at most four statements
whatever the batch holds, each an ``executemany`` over the batch's rows:

1. ``INSERT INTO conversations … ON CONFLICT (id) DO UPDATE SET turn_count = turn_count +
   excluded.turn_count, updated_at = <the later of the two>``: one row per conversation written (the
   batch's writes to one conversation summed), so a new conversation is created and an existing one
   moves on in one statement;
2. ``INSERT INTO conversation_turns``: every turn, in the order of the batch (``seq`` increases);
3. the claims: ``INSERT INTO idempotency_keys … ON CONFLICT (user_id, agent_id, key) DO UPDATE SET
   <the claim's columns> WHERE idempotency_keys.expires_at <= :now`` (a live record is kept; on
   PostgreSQL the conflicting row stays locked to the end of the transaction even when kept);
4. the DONE records: ``UPDATE idempotency_keys SET … WHERE (user_id, agent_id, key) = … AND claim =
   :claim``.

When the rows changed by 3 and 4 are fewer than the batch's claims and DONE records (a key held by
a live record, a claim taken over; or always on PostgreSQL, whose driver gives no count for an
``executemany``), one ``SELECT`` of those keys in the same transaction tells each caller what holds
its key. A batch holds each idempotency key at most once (a second claim of a key waits for the next
batch, and sees the first), so the statements' order within the transaction does not matter.

Across replicas on one PostgreSQL, each statement takes its row locks in key order (rows sorted by
conversation id or idempotency key), so two batches writing the same conversations or claiming the same
keys wait for each other instead of deadlocking. One crossing remains: a batch claiming key A and
finishing key B against another replica's batch claiming B and finishing A; PostgreSQL then aborts one
of the two transactions and that batch's callers get ``StoreUnavailableError``.

Turns go with their conversation by ``ON DELETE CASCADE`` (the engine turns SQLite's foreign keys on
for every connection: :func:`~hivegate.storage.sql.engine.create_sql_engine`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, case, delete, func, or_, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite

from hivegate.storage.calls import (
    CallWrite,
    Conversation,
    IdempotencyRecord,
    KeyState,
    StoredOutcome,
    Turn,
    TurnRole,
    check_page,
    require_aware,
    require_aware_write,
)
from hivegate.storage.sql.call_tables import conversation_turns, conversations, idempotency_keys
from hivegate.storage.sql.engine import SqlDatabase, SqlStore, execute_many, fetch_first
from hivegate.storage.sql.group_commit import GroupCommit
from hivegate.storage.sql.key_filter import KeyFilter
from hivegate.storage.sql.tables import UtcDateTime, record_columns

__all__ = ["FILTER_RETRY_SECONDS", "MAX_BATCH_ITEMS", "SqlCallRecords"]

logger = logging.getLogger(__name__)

MAX_BATCH_ITEMS = 128
"""Most claims and records one group-committed write transaction holds."""


_CONVERSATION_COLUMNS = record_columns(conversations, Conversation)
_TURN_COLUMNS = record_columns(conversation_turns, Turn)
_KEY_IDENTITY = (idempotency_keys.c.user_id, idempotency_keys.c.agent_id, idempotency_keys.c.key)
_RECORD_COLUMNS = (
    *_KEY_IDENTITY,
    idempotency_keys.c.fingerprint,
    idempotency_keys.c.claim,
    idempotency_keys.c.state,
    idempotency_keys.c.created_at,
    idempotency_keys.c.expires_at,
    idempotency_keys.c.outcome_text,
    idempotency_keys.c.outcome_failed,
    idempotency_keys.c.context_id,
    idempotency_keys.c.task_id,
)
FILTER_RETRY_SECONDS = 30.0
"""After a failed build of the key filter, reads go to the database for this long before it is tried again."""

_LIMITS = {"conversation id": 64, "context_id": 64, "task_id": 64, "key": 255, "claim": 32, "fingerprint": 64}
"""The longest value each column takes (PostgreSQL enforces them; checked before a write joins a batch)."""

_Identity = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class _Claim:
    """A queued :meth:`SqlCallRecords.claim`."""

    record: IdempotencyRecord
    now: datetime


_Item = _Claim | CallWrite
_Outcome = IdempotencyRecord | bool


class SqlCallRecords(SqlStore):
    """:class:`~hivegate.storage.calls.CallRecords` in the database (module docstring).

    Every method raises :class:`~hivegate.errors.StoreUnavailableError` when the database fails.
    """

    def __init__(self, database: SqlDatabase) -> None:
        super().__init__(database)
        self._statements: dict[str, tuple[Any, Any, Any]] = {}
        self._writer: GroupCommit[_Item, _Outcome] = GroupCommit(
            database, self._write, keys=_item_keys, max_batch=MAX_BATCH_ITEMS, name="hivegate-call-writer"
        )
        self._single_writer = self._engine.dialect.name == "sqlite"
        self._filter: KeyFilter | None = None
        """The keys the table may hold (SQLite only: :meth:`key`); None until built."""
        self._noted: list[_Identity] | None = None
        """The keys written while a filter is being built (added to it when it is handed over)."""
        self._building: asyncio.Task[None] | None = None
        self._build_after = 0.0

    @property
    def single_writer(self) -> bool:
        """See :attr:`CallRecords.single_writer`: True on SQLite (one gateway process serves a file),
        False on PostgreSQL (shared by replicas)."""
        return self._single_writer

    async def conversation(self, conversation_id: str) -> Conversation | None:
        """See :meth:`CallRecords.conversation`."""
        row = await self._first(select(*_CONVERSATION_COLUMNS).where(conversations.c.id == conversation_id))
        return None if row is None else Conversation(*row)

    async def conversations(
        self, user_id: str, *, agent_id: str | None = None, before: tuple[datetime, str] | None = None, limit: int = 50
    ) -> list[Conversation]:
        """See :meth:`CallRecords.conversations`: one ``SELECT`` on ``(user_id, updated_at, id)``.

        Raises:
            ValueError: ``limit`` outside 1–1000, or a naive ``before`` time.
        """
        check_page(limit)
        query = select(*_CONVERSATION_COLUMNS).where(conversations.c.user_id == user_id)
        if agent_id is not None:
            query = query.where(conversations.c.agent_id == agent_id)
        if before is not None:
            require_aware(before[0])
            at, last_id = before
            updated_at = conversations.c.updated_at
            query = query.where(or_(updated_at < at, and_(updated_at == at, conversations.c.id < last_id)))
        query = query.order_by(conversations.c.updated_at.desc(), conversations.c.id.desc()).limit(limit)
        async with self._engine.connect() as conn:
            return [Conversation(*row) for row in await conn.execute(query)]

    async def turns(
        self, conversation_id: str, user_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[Turn] | None:
        """See :meth:`CallRecords.turns`: one ``SELECT`` (the conversation joined with its turns).

        Raises:
            ValueError: ``limit`` outside 1–1000.
        """
        check_page(limit)
        joined = conversations.outerjoin(
            conversation_turns,
            and_(conversation_turns.c.conversation_id == conversations.c.id, conversation_turns.c.seq > after_seq),
        )
        query = (
            select(*_TURN_COLUMNS)
            .select_from(joined)
            .where(conversations.c.id == conversation_id, conversations.c.user_id == user_id)
            .order_by(conversation_turns.c.seq)
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        if not rows:
            return None
        return [_turn(row) for row in rows if row.seq is not None]

    async def last_turns(self, conversation_id: str, limit: int) -> list[Turn]:
        """See :meth:`CallRecords.last_turns` (``limit`` below 1: [])."""
        if limit < 1:
            return []
        query = (
            select(*_TURN_COLUMNS)
            .where(conversation_turns.c.conversation_id == conversation_id)
            .order_by(conversation_turns.c.seq.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_turn(row) for row in reversed(rows)]

    async def delete_conversation(self, conversation_id: str, user_id: str) -> bool:
        """See :meth:`CallRecords.delete_conversation`: one ``DELETE`` (its turns by ``ON DELETE CASCADE``)."""
        async with self._write_transaction() as conn:
            result = await conn.execute(
                delete(conversations).where(conversations.c.id == conversation_id, conversations.c.user_id == user_id)
            )
        return result.rowcount > 0

    async def claim(self, record: IdempotencyRecord, now: datetime) -> IdempotencyRecord:
        """See :meth:`CallRecords.claim`: a conditional upsert in a group-committed batch (module docstring).

        Raises:
            ValueError: a naive datetime, or a value longer than its column holds.
            StoreUnavailableError: the database failed.
        """
        require_aware(record.created_at, record.expires_at, now)
        _check_record(record)
        self._note(record)
        held = await self._writer.submit(_Claim(record, now))
        if not isinstance(held, IdempotencyRecord):  # pragma: no cover - _write answers a claim with a record
            raise TypeError("a claim's outcome is a record")
        return held

    async def key(self, user_id: str, agent_id: str, key: str) -> IdempotencyRecord | None:
        """See :meth:`CallRecords.key`: one ``SELECT`` by primary key (on SQLite on the event loop,
        :meth:`~hivegate.storage.sql.engine.SqlDatabase.run_read`: a keyed call reads it first).

        On SQLite, whose only writer this process is, a key the key filter
        (:class:`~hivegate.storage.sql.key_filter.KeyFilter`) does not hold was never written and is
        answered None without a read. The filter holds every key of the table when it was built (in a
        worker thread, begun by the first read) and every key :meth:`claim` and :meth:`record` were given
        since; until it is built, and for the keys it may hold, the record is read.
        """
        if self.known_absent(user_id, agent_id, key):
            return None
        identity = {"k_user_id": user_id, "k_agent_id": agent_id, "k_key": key}
        row = await self._db.run_read(lambda conn: fetch_first(conn, _KEY_RECORD, identity))
        return None if row is None else _record(row)

    def known_absent(self, user_id: str, agent_id: str, key: str) -> bool:
        """See :meth:`CallRecords.known_absent`: on SQLite, a key the key filter does not hold (:meth:`key`);
        always False on PostgreSQL (other replicas write too), and until the filter is built."""
        if not self._single_writer:
            return False
        known = self._filter
        if known is None or known.full:
            self._build_filter()
        return known is not None and not known.may_hold(user_id, agent_id, key)

    async def release(self, user_id: str, agent_id: str, key: str, claim: str) -> None:
        """See :meth:`CallRecords.release`: one ``DELETE … WHERE claim = :claim AND state = 'running'``."""
        async with self._write_transaction() as conn:
            await conn.execute(
                delete(idempotency_keys).where(
                    *_identity_is((user_id, agent_id, key)),
                    idempotency_keys.c.claim == claim,
                    idempotency_keys.c.state == KeyState.RUNNING.value,
                )
            )

    async def record(self, write: CallWrite) -> bool:
        """See :meth:`CallRecords.record`: written in a group-committed batch (module docstring);
        ``updated_at`` becomes the latest of its stored value, the written conversation's ``updated_at``
        and the turns' ``at`` (it never moves back).

        Raises:
            ValueError: a naive datetime, or a value longer than its column holds.
            StoreUnavailableError: the database failed.
        """
        require_aware_write(write)
        if write.conversation is not None:
            _check_length("conversation id", write.conversation.id)
        if write.done is not None:
            _check_record(write.done)
            self._note(write.done)
        stored = await self._writer.submit(write)
        return stored is True

    async def purge(self, now: datetime, idle_before: datetime | None) -> tuple[int, int]:
        """See :meth:`CallRecords.purge`: two ``DELETE`` statements on indexed times, one transaction."""
        require_aware(now, idle_before)
        async with self._write_transaction() as conn:
            keys = await conn.execute(delete(idempotency_keys).where(idempotency_keys.c.expires_at < now))
            idle = 0
            if idle_before is not None:
                gone = await conn.execute(delete(conversations).where(conversations.c.updated_at < idle_before))
                idle = gone.rowcount
        return keys.rowcount, idle

    def _note(self, record: IdempotencyRecord) -> None:
        """A key is about to be written: the key filter (and the one being built) holds it from now on."""
        if self._filter is not None:
            self._filter.add(record.user_id, record.agent_id, record.key)
        if self._noted is not None:
            self._noted.append(_identity(record))

    def _build_filter(self) -> None:
        """Start building the key filter (a larger one when the current one is full), unless a build runs
        or failed less than :data:`FILTER_RETRY_SECONDS` ago."""
        if self._building is not None or time.monotonic() < self._build_after:
            return
        self._noted = []
        self._building = asyncio.get_running_loop().create_task(self._built_filter(), name="hivegate-key-filter")

    async def _built_filter(self) -> None:
        """Build the key filter and hand it over (:meth:`key`).

        Every key noted from the start of the build on is added to it; every key written before is in
        the table when the scan reads it, because an empty write queued behind them has been committed
        first (the group-committed writer keeps their order, and a batch commits whole)."""
        try:
            await self._writer.submit(CallWrite())
            built = await self._db.read_apart(_scan_keys)
        except Exception as exc:  # the reads go on without the filter, and it is tried again later
            error = self.unavailable(exc)
            logger.warning("the idempotency key filter was not built (keys are read): %s", error or repr(exc))
            self._build_after = time.monotonic() + FILTER_RETRY_SECONDS
        else:
            for user_id, agent_id, key in self._noted or ():
                built.add(user_id, agent_id, key)
            self._filter = built
        finally:
            self._noted = None
            self._building = None

    def _write(self, conn: Connection, items: Sequence[_Item]) -> list[_Outcome]:
        """Write one batch in its transaction (module docstring); each item's outcome, in order."""
        writes = [item for item in items if isinstance(item, CallWrite)]
        # Rows sorted by key: two replicas' batches on PostgreSQL lock shared rows in one order.
        claims = sorted((item for item in items if isinstance(item, _Claim)), key=lambda claim: _identity(claim.record))
        dones = sorted(
            (write.done for write in writes if write.done is not None and write.claimed_in_store), key=_identity
        )
        inserted = sorted(
            (write.done for write in writes if write.done is not None and not write.claimed_in_store), key=_identity
        )
        upsert_conversations, upsert_claims, upsert_dones = self._dialect_statements(conn.dialect.name)
        totals = _conversation_totals(writes)
        execute_many(conn, upsert_conversations, totals)
        turn_rows = [
            _turn_row(write.conversation.id, turn) for write in writes if write.conversation for turn in write.turns
        ]
        execute_many(conn, _INSERT_TURNS, turn_rows)
        changed: list[int] = []  # rows changed per statement; -1: the driver does not say (asyncpg executemany)
        if claims:
            changed.append(execute_many(conn, upsert_claims, [_claim_row(claim) for claim in claims]))
        if dones:
            changed.append(execute_many(conn, _FINISH, [_done_row(done) for done in dones]))
        if inserted:  # keys claimed in the memory of the store's only writer: the DONE record replaces any
            changed.append(execute_many(conn, upsert_dones, [_inserted_row(done) for done in inserted]))
        held: dict[_Identity, IdempotencyRecord] | None = None  # None: every claim and DONE record took
        if min(changed, default=0) < 0 or sum(changed) != len(claims) + len(dones) + len(inserted):
            held = _holders(
                conn,
                [_identity(claim.record) for claim in claims] + [_identity(d) for d in (*dones, *inserted)],
            )
        return [_outcome(item, held) for item in items]

    def _dialect_statements(self, dialect_name: str) -> tuple[Any, Any, Any]:
        """The conversation upsert, the conditional claim upsert and the DONE upsert for ``dialect_name``."""
        statements = self._statements.get(dialect_name)
        if statements is None:
            statements = (_conversation_upsert(dialect_name), _claim_upsert(dialect_name), _done_upsert(dialect_name))
            self._statements[dialect_name] = statements
        return statements


_INSERT_TURNS = conversation_turns.insert()

_KEY_RECORD = select(*_RECORD_COLUMNS).where(
    idempotency_keys.c.user_id == bindparam("k_user_id"),
    idempotency_keys.c.agent_id == bindparam("k_agent_id"),
    idempotency_keys.c.key == bindparam("k_key"),
)
"""One key's record, by primary key (:meth:`SqlCallRecords.key`)."""

_FINISH = update(idempotency_keys).where(
    idempotency_keys.c.user_id == bindparam("w_user_id"),
    idempotency_keys.c.agent_id == bindparam("w_agent_id"),
    idempotency_keys.c.key == bindparam("w_key"),
    idempotency_keys.c.claim == bindparam("w_claim"),
)
"""The DONE record replacing the RUNNING one of the same key, only while its claim is the writer's."""


def _dialect(dialect_name: str) -> Any:
    return postgresql if dialect_name == "postgresql" else sqlite


def _conversation_upsert(dialect_name: str) -> Any:
    insert = _dialect(dialect_name).insert(conversations)
    later = case(
        (insert.excluded.updated_at > conversations.c.updated_at, insert.excluded.updated_at),
        else_=conversations.c.updated_at,
    )
    return insert.on_conflict_do_update(
        index_elements=[conversations.c.id],
        set_={"turn_count": conversations.c.turn_count + insert.excluded.turn_count, "updated_at": later},
    )


def _key_upsert(dialect_name: str, where: Any = None) -> Any:
    """An ``idempotency_keys`` insert that replaces the record of its key (only ``where`` it holds, if given)."""
    insert = _dialect(dialect_name).insert(idempotency_keys)
    identity = {column.name for column in _KEY_IDENTITY}
    return insert.on_conflict_do_update(
        index_elements=list(_KEY_IDENTITY),
        set_={
            column.name: insert.excluded[column.name]
            for column in idempotency_keys.columns
            if column.name not in identity
        },
        where=where,
    )


def _claim_upsert(dialect_name: str) -> Any:
    """A claim: replaces only a stale or expired record."""
    return _key_upsert(dialect_name, idempotency_keys.c.expires_at <= bindparam("claimed_at", type_=UtcDateTime))


def _done_upsert(dialect_name: str) -> Any:
    """A DONE record of a key claimed in memory: replaces any record of its key."""
    return _key_upsert(dialect_name)


def _item_keys(item: _Item) -> Iterable[Hashable]:
    """A batch holds each idempotency key once; writes to one conversation may share a batch."""
    if isinstance(item, _Claim):
        return (_identity(item.record),)
    return () if item.done is None else (_identity(item.done),)


def _identity(record: IdempotencyRecord) -> _Identity:
    return (record.user_id, record.agent_id, record.key)


def _identity_is(identity: _Identity) -> tuple[Any, ...]:
    return tuple(column == value for column, value in zip(_KEY_IDENTITY, identity, strict=True))


def _conversation_totals(writes: Sequence[CallWrite]) -> list[dict[str, Any]]:
    """One ``conversations`` row per conversation the writes touch (their turns counted, the latest time), by id."""
    totals: dict[str, dict[str, Any]] = {}
    for write in writes:
        conversation = write.conversation
        if conversation is None:
            continue
        latest = max([conversation.updated_at, *(turn.at for turn in write.turns)])
        row = totals.get(conversation.id)
        if row is None:
            totals[conversation.id] = {
                "id": conversation.id,
                "user_id": conversation.user_id,
                "agent_id": conversation.agent_id,
                "created_at": conversation.created_at,
                "updated_at": latest,
                "turn_count": len(write.turns),
            }
        else:
            row["updated_at"] = max(row["updated_at"], latest)
            row["turn_count"] += len(write.turns)
    return [totals[conversation_id] for conversation_id in sorted(totals)]


def _turn_row(conversation_id: str, turn: Turn) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "role": turn.role.value,
        "text": _text(turn.text),
        "at": turn.at,
        "failed": turn.failed,
    }


def _record_row(record: IdempotencyRecord) -> dict[str, Any]:
    outcome = record.outcome
    return {
        "fingerprint": record.fingerprint,
        "state": record.state.value,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "outcome_text": None if outcome is None else _text(outcome.text),
        "outcome_failed": outcome is not None and outcome.failed,
        "context_id": None if outcome is None else outcome.context_id,
        "task_id": None if outcome is None else outcome.task_id,
    }


def _inserted_row(done: IdempotencyRecord) -> dict[str, Any]:
    return _record_row(done) | {
        "user_id": done.user_id,
        "agent_id": done.agent_id,
        "key": done.key,
        "claim": done.claim,
    }


def _claim_row(claim: _Claim) -> dict[str, Any]:
    record = claim.record
    return _record_row(record) | {
        "user_id": record.user_id,
        "agent_id": record.agent_id,
        "key": record.key,
        "claim": record.claim,
        "claimed_at": claim.now,
    }


def _done_row(done: IdempotencyRecord) -> dict[str, Any]:
    return _record_row(done) | {
        "w_user_id": done.user_id,
        "w_agent_id": done.agent_id,
        "w_key": done.key,
        "w_claim": done.claim,
    }


def _scan_keys(conn: Connection) -> KeyFilter:
    """A key filter holding every key of ``idempotency_keys`` (sized for twice as many as it counted)."""
    with conn.begin():
        count = conn.execute(select(func.count()).select_from(idempotency_keys)).scalar_one()
        built = KeyFilter(2 * count)
        for user_id, agent_id, key in conn.execute(select(*_KEY_IDENTITY)):
            built.add(user_id, agent_id, key)
    return built


def _holders(conn: Connection, identities: list[_Identity]) -> dict[_Identity, IdempotencyRecord]:
    """The records of ``identities`` as the batch's transaction sees them (one ``SELECT``)."""
    query = select(*_RECORD_COLUMNS).where(tuple_(*_KEY_IDENTITY).in_(identities))
    held = [_record(row) for row in conn.execute(query)]
    return {_identity(record): record for record in held}


def _outcome(item: _Item, held: dict[_Identity, IdempotencyRecord] | None) -> _Outcome:
    """A claim's record (its own when it took the key), or whether a write's DONE record was stored.

    ``held``: the keys' records as the batch left them; None when every claim and DONE record of the
    batch changed its row (so each took its key).
    """
    if isinstance(item, _Claim):
        holder = None if held is None else held.get(_identity(item.record))
        return item.record if holder is None or holder.claim == item.record.claim else holder
    done = item.done
    if done is None or held is None:
        return True
    holder = held.get(_identity(done))
    return holder is not None and holder.claim == done.claim and holder.state is KeyState.DONE


def _record(row: Any) -> IdempotencyRecord:
    state = KeyState(row.state)
    outcome = None
    if state is KeyState.DONE and row.outcome_text is not None:
        outcome = StoredOutcome(row.outcome_text, bool(row.outcome_failed), row.context_id, row.task_id)
    return IdempotencyRecord(
        user_id=row.user_id,
        agent_id=row.agent_id,
        key=row.key,
        fingerprint=row.fingerprint,
        claim=row.claim,
        state=state,
        created_at=row.created_at,
        expires_at=row.expires_at,
        outcome=outcome,
    )


def _turn(row: Any) -> Turn:
    return Turn(role=TurnRole(row.role), text=row.text, at=row.at, failed=bool(row.failed), seq=int(row.seq))


def _check_length(name: str, value: str | None) -> None:
    if value is not None and (len(value) > _LIMITS[name] or "\x00" in value):
        raise ValueError(f"{name} is at most {_LIMITS[name]} characters, none of them NUL")


def _text(value: str) -> str:
    """A text as the tables keep it: PostgreSQL's ``text`` cannot hold NUL, so U+FFFD stands for it on
    every database (one caller's NUL must not fail the batch it shares with others)."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _check_record(record: IdempotencyRecord) -> None:
    """Refuse, before it joins a batch (where it would fail every write of the batch), what the table cannot hold."""
    if not record.key:
        raise ValueError("an idempotency key has 1-255 characters")
    for name, value in (("key", record.key), ("claim", record.claim), ("fingerprint", record.fingerprint)):
        _check_length(name, value)
    if record.outcome is not None:
        _check_length("context_id", record.outcome.context_id)
        _check_length("task_id", record.outcome.task_id)
