"""Group commit: writes that arrive while one write transaction runs are committed together by the next.

A SQL store that writes on every request (the A2A task saves, the calls' conversation turns and
idempotency keys) queues its writes through a :class:`GroupCommit` (one per kind of write: a lane).
Every lane of one database shares one queue and one flusher task, which writes the queued items in
batches, one write transaction per batch (one ``BEGIN IMMEDIATE``/``COMMIT`` on SQLite, one worker-thread
hop: :meth:`~hivegate.storage.sql.engine.SqlDatabase.run_write`), instead of each caller queueing on
SQLite's single writer lock with a transaction of its own: an A2A message's task save and its
conversation turns commit together. Each caller still returns only once its batch is committed, with
its own outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Generic, TypeVar

import anyio
from sqlalchemy import Connection

from hivegate.storage.sql.engine import SqlDatabase, SqlStore

__all__ = ["BatchWriter", "GroupCommit"]

ItemT = TypeVar("ItemT")
OutcomeT = TypeVar("OutcomeT")

BatchWriter = Callable[[Connection, Sequence[ItemT]], Sequence[OutcomeT]]
"""Writes a batch on a connection inside its write transaction (synchronous Core: on SQLite it runs in a
worker thread, :meth:`~hivegate.storage.sql.engine.SqlDatabase.run_write`); returns one outcome per item,
in order."""


class GroupCommit(SqlStore, Generic[ItemT, OutcomeT]):
    """One kind of write of a store (a lane): items submitted concurrently, of this lane and of the other
    lanes of the database, are written in one write transaction.

    Items queue in the database's shared queue; one flusher task (started by the first :meth:`submit` of
    an idle database, ended when the queue is empty) takes the oldest queued items, up to ``max_batch``
    of a lane and up to the first item that shares a key with an earlier one of its lane in the batch
    (so writes of one key keep their order and each sees the one before), and hands each lane's items to
    its ``write`` inside one write transaction. A database failure fails every item of its batch (as
    :class:`~hivegate.errors.StoreUnavailableError`); the next batch tries again. A cancelled
    :meth:`submit` leaves nothing behind: dropped while queued, waited for while its batch is being
    written, so once ``submit`` has returned or raised, no write of it is still to come.

    Args:
        database: the database written to.
        write: writes a batch of this lane's items (:data:`BatchWriter`); it runs inside the transaction,
            so anything it raises rolls the whole batch back.
        keys: the keys of an item (a task id, an idempotency key); a batch holds each key of a lane at most once.
        max_batch: most items of this lane one transaction holds (at least 1).
        name: the flusher task's name (the first lane's names the shared flusher).
    """

    def __init__(
        self,
        database: SqlDatabase,
        write: BatchWriter[ItemT, OutcomeT],
        *,
        keys: Callable[[ItemT], Iterable[Hashable]],
        max_batch: int,
        name: str,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        super().__init__(database)
        self._write = write
        self._keys = keys
        self._max_batch = max_batch
        shared = _SHARED.get(database)
        if shared is None:
            shared = _SHARED[database] = _SharedQueue(database, name)
        self._shared = shared

    async def submit(self, item: ItemT) -> OutcomeT:
        """Queue ``item`` and wait until its batch is committed.

        Returns:
            The outcome ``write`` gave for ``item``.

        Raises:
            StoreUnavailableError: the database failed while writing its batch.
            Exception: anything else a lane's ``write`` raised for the batch (a bug, not an outage).
        """
        return await self._shared.submit(self, item)

    def write_items(self, conn: Connection, items: Sequence[Any]) -> Sequence[Any]:
        """This lane's ``write`` of ``items`` (for the shared flusher)."""
        return self._write(conn, items)

    def item_keys(self, item: Any) -> Iterable[Hashable]:
        """This lane's keys of ``item`` (for the shared flusher)."""
        return self._keys(item)

    @property
    def max_batch(self) -> int:
        """Most items of this lane one transaction holds."""
        return self._max_batch


class _Pending:
    """A queued item, its lane and the future its caller waits on."""

    __slots__ = ("done", "item", "lane")

    def __init__(self, lane: GroupCommit[Any, Any], item: Any, done: asyncio.Future[Any]) -> None:
        self.lane = lane
        self.item = item
        self.done = done


class _SharedQueue:
    """The queue and the flusher of every lane of one database (:class:`GroupCommit`)."""

    def __init__(self, database: SqlDatabase, name: str) -> None:
        self._database = weakref.ref(database)
        self._name = name
        self._queue: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, lane: GroupCommit[Any, OutcomeT], item: Any) -> OutcomeT:
        loop = asyncio.get_running_loop()
        if self._flusher is not None and self._flusher.get_loop() is not loop:
            self._flusher, self._queue = None, []  # left by an event loop that has ended: its callers are gone
        done: asyncio.Future[OutcomeT] = loop.create_future()
        pending = _Pending(lane, item, done)
        self._queue.append(pending)
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush(), name=self._name)
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            # A cancelled item is not left behind to land later: still queued, it is dropped; already
            # being written, its batch is waited for (bounded by the statement timeout).
            if any(queued is pending for queued in self._queue):
                self._queue.remove(pending)
                raise
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(done)
            raise

    async def _flush(self) -> None:
        batch: list[_Pending] = []
        try:
            while self._queue:
                batch = self._next_batch()
                lane = batch[0].lane
                try:
                    outcomes = await lane.sql_database.run_write(functools.partial(_write_lanes, batch))
                except Exception as exc:
                    error = lane.unavailable(exc) or exc
                    for pending in batch:
                        if not pending.done.done():
                            pending.done.set_exception(error)
                    continue
                for pending, outcome in zip(batch, outcomes, strict=True):
                    if not pending.done.done():
                        pending.done.set_result(outcome)
        finally:
            # Only when cancelled (the loop is shutting down) is anything left: nobody will write it.
            for pending in [*batch, *self._queue]:
                pending.done.cancel()
            self._queue = []
            self._flusher = None

    def _next_batch(self) -> list[_Pending]:
        """The oldest queued items, up to a lane's ``max_batch`` and up to a second item of one key of a lane."""
        batch: list[_Pending] = []
        seen: set[tuple[int, Hashable]] = set()
        counts: dict[int, int] = {}
        for pending in self._queue:
            lane = id(pending.lane)
            keys = {(lane, key) for key in pending.lane.item_keys(pending.item)}
            if counts.get(lane, 0) == pending.lane.max_batch or not seen.isdisjoint(keys):
                break
            seen |= keys
            counts[lane] = counts.get(lane, 0) + 1
            batch.append(pending)
        del self._queue[: len(batch)]
        return batch


def _write_lanes(batch: Sequence[_Pending], conn: Connection) -> list[Any]:
    """Each lane's items of ``batch`` written by its ``write`` (lanes in the order they first appear);
    the outcomes in ``batch``'s order."""
    by_lane: dict[int, list[int]] = {}
    for index, pending in enumerate(batch):
        by_lane.setdefault(id(pending.lane), []).append(index)
    outcomes: list[Any] = [None] * len(batch)
    for indexes in by_lane.values():
        lane = batch[indexes[0]].lane
        written = lane.write_items(conn, [batch[i].item for i in indexes])
        for i, outcome in zip(indexes, written, strict=True):
            outcomes[i] = outcome
    return outcomes


_SHARED: weakref.WeakKeyDictionary[SqlDatabase, _SharedQueue] = weakref.WeakKeyDictionary()
"""The shared queue of each database that has a lane."""
