"""Group commit: writes that arrive while one write transaction runs are committed together by the next.

A SQL store that writes on every request (the A2A task saves, the calls' conversation turns and
idempotency keys) queues its writes in one :class:`GroupCommit`: one flusher task writes the queued
items in batches, one write transaction per batch (one ``BEGIN IMMEDIATE``/``COMMIT`` on SQLite, one
connection from the pool), instead of each caller queueing on SQLite's single writer lock with a
transaction of its own. Each caller still returns only once its batch is committed, with its own
outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Generic, TypeVar

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
    """One writer for a store: items submitted concurrently are written in one write transaction.

    Items queue; one flusher task (started by the first :meth:`submit` of an idle writer, ended when the
    queue is empty) hands the oldest queued items, up to ``max_batch`` of them and up to the first item
    that shares a key with an earlier one of the batch (so writes of one key keep their order and each
    sees the one before), to ``write`` inside one write transaction. A database failure fails every item
    of its batch (as :class:`~hivegate.errors.StoreUnavailableError`); the next batch tries again. A
    cancelled :meth:`submit` leaves nothing behind: dropped while queued, waited for while its batch is
    being written, so once ``submit`` has returned or raised, no write of it is still to come.

    Args:
        database: the database written to.
        write: writes a batch (:data:`BatchWriter`); it runs inside the transaction, so anything it
            raises rolls the whole batch back.
        keys: the keys of an item (a task id, an idempotency key); a batch holds each key at most once.
        max_batch: most items one transaction holds (at least 1).
        name: the flusher task's name.
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
        self._name = name
        self._queue: list[_Pending[ItemT, OutcomeT]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, item: ItemT) -> OutcomeT:
        """Queue ``item`` and wait until its batch is committed.

        Returns:
            The outcome ``write`` gave for ``item``.

        Raises:
            StoreUnavailableError: the database failed while writing its batch.
            Exception: anything else ``write`` raised for the batch (a bug, not an outage).
        """
        loop = asyncio.get_running_loop()
        if self._flusher is not None and self._flusher.get_loop() is not loop:
            self._flusher, self._queue = None, []  # left by an event loop that has ended: its callers are gone
        done: asyncio.Future[OutcomeT] = loop.create_future()
        pending = _Pending(item, done)
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
        batch: list[_Pending[ItemT, OutcomeT]] = []
        try:
            while self._queue:
                batch = self._next_batch()
                try:
                    items = [pending.item for pending in batch]
                    outcomes = await self._db.run_write(functools.partial(self._write_batch, items))
                except Exception as exc:
                    error = self.unavailable(exc) or exc
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

    def _write_batch(self, items: Sequence[ItemT], conn: Connection) -> Sequence[OutcomeT]:
        return self._write(conn, items)

    def _next_batch(self) -> list[_Pending[ItemT, OutcomeT]]:
        """The oldest queued items, up to ``max_batch`` and up to a second item of one key."""
        batch: list[_Pending[ItemT, OutcomeT]] = []
        seen: set[Hashable] = set()
        for pending in self._queue:
            keys = set(self._keys(pending.item))
            if len(batch) == self._max_batch or not seen.isdisjoint(keys):
                break
            seen |= keys
            batch.append(pending)
        del self._queue[: len(batch)]
        return batch


class _Pending(Generic[ItemT, OutcomeT]):
    """A queued item and the future its caller waits on."""

    __slots__ = ("done", "item")

    def __init__(self, item: ItemT, done: asyncio.Future[OutcomeT]) -> None:
        self.item = item
        self.done = done
