"""The ``CallRecords`` contract (issue 10 items 1-2) over memory, SQLite and PostgreSQL: conversations and their
turns, idempotency claims (atomic under concurrency), the one write of a finished call, the purge."""

from __future__ import annotations

import asyncio
import inspect
import secrets
import sqlite3
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.errors import StoreUnavailableError
from hivegate.storage import DatabaseLimits, open_storage
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
from hivegate.storage.sql.calls import SqlCallRecords
from tests.storage.cleanup import clean_database
from tests.storage.time_bound import bounded
from tests.tcp_proxy import running_proxy

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
WAIT_SECONDS = 30.0
RUNNING_FOR = timedelta(minutes=5)
KEPT_FOR = timedelta(hours=24)
FAULT_LIMITS = DatabaseLimits(connect_timeout_seconds=1.0, statement_timeout_seconds=1.0, pool_timeout_seconds=1.0)
MARGIN_SECONDS = 3.0


@pytest.fixture
async def calls(store_url: str) -> AsyncGenerator[CallRecords]:
    async with clean_database(store_url):
        storage = await open_storage(store_url)
        try:
            yield storage.calls
        finally:
            await storage.close()


def conversation(
    conversation_id: str = "c1", user_id: str = "u1", agent_id: str = "echo", *, at: datetime = NOW
) -> Conversation:
    return Conversation(id=conversation_id, user_id=user_id, agent_id=agent_id, created_at=at, updated_at=at)


def exchange(message: str = "hi", reply: str = "hello", *, at: datetime = NOW, failed: bool = False) -> list[Turn]:
    return [Turn(TurnRole.USER, message, at), Turn(TurnRole.AGENT, reply, at, failed=failed)]


def running(key: str = "k1", *, claim: str | None = None, at: datetime = NOW) -> IdempotencyRecord:
    return IdempotencyRecord(
        user_id="u1",
        agent_id="echo",
        key=key,
        fingerprint="f" * 64,
        claim=claim or secrets.token_hex(16),
        state=KeyState.RUNNING,
        created_at=at,
        expires_at=at + RUNNING_FOR,
    )


def done(record: IdempotencyRecord, text: str = "hello", *, at: datetime = NOW) -> IdempotencyRecord:
    outcome = StoredOutcome(text, context_id="c1", task_id="t-1")
    return replace(record, state=KeyState.DONE, expires_at=at + KEPT_FOR, outcome=outcome)


def texts(turns: list[Turn] | None) -> list[str]:
    assert turns is not None
    return [turn.text for turn in turns]


# -- conversations and turns ----------------------------------------------------------------------------


async def test_record_creates_the_conversation_and_counts_its_turns(calls: CallRecords) -> None:
    assert await calls.conversation("c1") is None
    given = replace(conversation(), turn_count=7)  # a new conversation's count is the turns written
    assert await calls.record(CallWrite(given, exchange())) is True
    assert await calls.conversation("c1") == replace(conversation(), turn_count=2)
    later = NOW + timedelta(minutes=3)
    assert await calls.record(CallWrite(conversation(at=NOW + timedelta(minutes=1)), exchange("again", at=later)))
    moved = await calls.conversation("c1")
    assert moved == replace(conversation(), updated_at=later, turn_count=4)  # created_at stays


async def test_updated_at_never_moves_back(calls: CallRecords) -> None:
    await calls.record(CallWrite(conversation(at=NOW), exchange(at=NOW)))
    earlier = NOW - timedelta(hours=1)
    await calls.record(CallWrite(conversation(at=earlier), exchange(at=earlier)))
    stored = await calls.conversation("c1")
    assert stored is not None
    assert (stored.updated_at, stored.turn_count) == (NOW, 4)


async def test_a_conversation_without_turns_and_a_write_without_conversation(calls: CallRecords) -> None:
    assert await calls.record(CallWrite(conversation()))
    assert await calls.conversation("c1") == conversation()
    assert await calls.turns("c1", "u1") == []
    assert await calls.record(CallWrite(None, exchange()))  # no conversation kept: the turns go nowhere
    assert await calls.turns("c1", "u1") == []


async def test_turns_in_order_paged_by_seq(calls: CallRecords) -> None:
    for i in range(5):
        at = NOW + timedelta(seconds=i)
        await calls.record(CallWrite(conversation(), exchange(f"m{i}", f"r{i}", at=at, failed=i == 4)))
    turns = await calls.turns("c1", "u1")
    assert turns is not None
    assert texts(turns) == [text for i in range(5) for text in (f"m{i}", f"r{i}")]
    assert [turn.role for turn in turns[:2]] == [TurnRole.USER, TurnRole.AGENT]
    assert [turn.failed for turn in turns] == [False] * 9 + [True]
    assert turns[3].at == NOW + timedelta(seconds=1)
    seqs = [turn.seq for turn in turns]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == 10
    assert 0 not in seqs
    assert texts(await calls.turns("c1", "u1", limit=3)) == ["m0", "r0", "m1"]
    assert texts(await calls.turns("c1", "u1", after_seq=seqs[2], limit=3)) == ["r1", "m2", "r2"]
    assert await calls.turns("c1", "u1", after_seq=seqs[-1]) == []


async def test_turns_of_another_user_or_an_unknown_id_are_none(calls: CallRecords) -> None:
    await calls.record(CallWrite(conversation(), exchange()))
    assert await calls.turns("c1", "u2") is None
    assert await calls.turns("nope", "u1") is None


async def test_last_turns_are_the_newest_oldest_first(calls: CallRecords) -> None:
    for i in range(3):
        await calls.record(CallWrite(conversation(), exchange(f"m{i}", f"r{i}")))
    assert texts(await calls.last_turns("c1", 3)) == ["r1", "m2", "r2"]
    assert texts(await calls.last_turns("c1", 100)) == [t for i in range(3) for t in (f"m{i}", f"r{i}")]
    assert await calls.last_turns("nope", 5) == []


async def test_large_texts_round_trip(calls: CallRecords) -> None:
    big = "é" * 2_000_000 + "\n\x01 end"
    await calls.record(CallWrite(conversation(), exchange(big, big)))
    assert texts(await calls.last_turns("c1", 2)) == [big, big]


async def test_conversations_newest_first_per_user_and_agent(calls: CallRecords) -> None:
    await calls.record(CallWrite(conversation("a", at=NOW), exchange(at=NOW)))
    await calls.record(CallWrite(conversation("b", agent_id="other", at=NOW), exchange(at=NOW)))
    await calls.record(CallWrite(conversation("c", at=NOW + timedelta(minutes=1)), exchange()))
    await calls.record(CallWrite(conversation("d", user_id="u2"), exchange()))
    assert [c.id for c in await calls.conversations("u1")] == ["c", "b", "a"]  # same time: id descending
    assert [c.id for c in await calls.conversations("u1", agent_id="echo")] == ["c", "a"]
    assert [c.id for c in await calls.conversations("u2")] == ["d"]
    assert await calls.conversations("u3") == []


async def test_conversations_keyset_pages_cover_each_once(calls: CallRecords) -> None:
    ids = [f"c{i:02d}" for i in range(11)]
    for i, conversation_id in enumerate(ids):
        at = NOW + timedelta(minutes=i // 3)  # ties on updated_at
        await calls.record(CallWrite(conversation(conversation_id, at=at), exchange(at=at)))
    expected = sorted(ids, key=lambda cid: (int(cid[1:]) // 3, cid), reverse=True)
    paged: list[str] = []
    before: tuple[datetime, str] | None = None
    for _ in range(len(ids)):
        page = await calls.conversations("u1", before=before, limit=4)
        assert len(page) <= 4
        paged.extend(c.id for c in page)
        if len(page) < 4:
            break
        before = (page[-1].updated_at, page[-1].id)
    assert paged == expected


async def test_page_limits_are_checked(calls: CallRecords) -> None:
    with pytest.raises(ValueError, match="limit"):
        await calls.conversations("u1", limit=0)
    with pytest.raises(ValueError, match="limit"):
        await calls.turns("c1", "u1", limit=1001)


async def test_delete_is_owner_checked_and_takes_the_turns(calls: CallRecords) -> None:
    await calls.record(CallWrite(conversation(), exchange()))
    await calls.record(CallWrite(conversation("c2"), exchange("kept")))
    assert await calls.delete_conversation("c1", "u2") is False
    assert await calls.conversation("c1") is not None
    assert await calls.delete_conversation("c1", "u1") is True
    assert await calls.conversation("c1") is None
    assert await calls.last_turns("c1", 10) == []
    assert await calls.delete_conversation("c1", "u1") is False
    assert texts(await calls.last_turns("c2", 10)) == ["kept", "hello"]
    await calls.record(CallWrite(conversation(), exchange("anew")))  # the id can start over
    assert texts(await calls.turns("c1", "u1")) == ["anew", "hello"]


# -- idempotency records ----------------------------------------------------------------------------------


async def test_claim_of_a_free_key_takes_it(calls: CallRecords) -> None:
    mine = running()
    assert await calls.claim(mine, NOW) == mine
    assert await calls.key("u1", "echo", "k1") == mine
    assert await calls.key("u1", "echo", "k2") is None
    assert await calls.key("u2", "echo", "k1") is None


async def test_keys_are_per_user_and_agent(calls: CallRecords) -> None:
    mine = running()
    assert await calls.claim(mine, NOW) == mine
    theirs = replace(running(), user_id="u2")
    assert await calls.claim(theirs, NOW) == theirs
    elsewhere = replace(running(), agent_id="other")
    assert await calls.claim(elsewhere, NOW) == elsewhere


async def test_a_live_running_record_holds_the_key(calls: CallRecords) -> None:
    holder = running()
    await calls.claim(holder, NOW)
    second = running(at=NOW + timedelta(minutes=1))
    assert await calls.claim(second, NOW + RUNNING_FOR - timedelta(microseconds=1)) == holder
    assert await calls.key("u1", "echo", "k1") == holder


async def test_a_live_done_record_answers_with_its_outcome(calls: CallRecords) -> None:
    first = running()
    await calls.claim(first, NOW)
    finished = done(first, "the reply")
    assert await calls.record(CallWrite(conversation(), exchange(), finished)) is True
    assert await calls.key("u1", "echo", "k1") == finished
    replay = running(at=NOW + timedelta(hours=1))
    found = await calls.claim(replay, NOW + timedelta(hours=1))
    assert found == finished
    assert found.outcome == StoredOutcome("the reply", False, "c1", "t-1")


async def test_a_failed_outcome_and_one_without_ids_round_trip(calls: CallRecords) -> None:
    first = running()
    await calls.claim(first, NOW)
    finished = replace(first, state=KeyState.DONE, expires_at=NOW + KEPT_FOR, outcome=StoredOutcome("boom", True))
    assert await calls.record(CallWrite(done=finished))
    assert await calls.key("u1", "echo", "k1") == finished


async def test_a_stale_running_record_is_taken_over(calls: CallRecords) -> None:
    crashed = running()
    await calls.claim(crashed, NOW)
    later = NOW + RUNNING_FOR  # expires_at has passed: stale
    taker = running(at=later)
    assert await calls.claim(taker, later) == taker
    assert await calls.key("u1", "echo", "k1") == taker


async def test_an_expired_done_record_is_replaced(calls: CallRecords) -> None:
    first = running()
    await calls.claim(first, NOW)
    await calls.record(CallWrite(done=done(first)))
    later = NOW + KEPT_FOR + timedelta(seconds=1)
    fresh = running(at=later)
    assert await calls.claim(fresh, later) == fresh
    assert await calls.key("u1", "echo", "k1") == fresh


async def test_done_after_a_takeover_is_refused_but_the_turns_are_kept(calls: CallRecords) -> None:
    slow = running()
    await calls.claim(slow, NOW)
    later = NOW + RUNNING_FOR + timedelta(seconds=1)
    taker = running(at=later)
    await calls.claim(taker, later)
    assert await calls.record(CallWrite(conversation(), exchange("late"), done(slow, "late"))) is False
    assert await calls.key("u1", "echo", "k1") == taker
    assert texts(await calls.turns("c1", "u1")) == ["late", "hello"]
    stored = await calls.conversation("c1")
    assert stored is not None
    assert stored.turn_count == 2


async def test_done_for_a_released_key_stores_nothing(calls: CallRecords) -> None:
    mine = running()
    await calls.claim(mine, NOW)
    await calls.release("u1", "echo", "k1", mine.claim)
    assert await calls.record(CallWrite(done=done(mine))) is False
    assert await calls.key("u1", "echo", "k1") is None


async def test_a_done_record_claimed_in_memory_is_inserted_with_its_turns(calls: CallRecords) -> None:
    """``claimed_in_store`` False (the store's only writer claimed the key in its memory): no RUNNING record
    was written; the DONE record is inserted, in the write of the call's turns."""
    mine = done(running())
    write = CallWrite(conversation(), exchange(), mine, claimed_in_store=False)
    assert await calls.record(write) is True
    assert await calls.key("u1", "echo", "k1") == mine
    assert texts(await calls.turns("c1", "u1")) == ["hi", "hello"]


async def test_a_done_record_claimed_in_memory_replaces_any_record_of_its_key(calls: CallRecords) -> None:
    """A RUNNING record left by a crash, or an expired DONE record: the new DONE record takes the key."""
    left = running()
    await calls.claim(left, NOW)
    mine = done(running(at=NOW + timedelta(seconds=1)), "second")
    assert await calls.record(CallWrite(done=mine, claimed_in_store=False)) is True
    assert await calls.key("u1", "echo", "k1") == mine
    again = done(running(at=NOW + KEPT_FOR), "third")
    assert await calls.record(CallWrite(done=again, claimed_in_store=False)) is True
    assert await calls.key("u1", "echo", "k1") == again


async def test_single_writer_is_true_but_for_a_database_replicas_share(calls: CallRecords, store_url: str) -> None:
    assert calls.single_writer is (not store_url.startswith("postgresql"))


async def test_release_only_by_its_claim_and_only_running(calls: CallRecords) -> None:
    mine = running()
    await calls.claim(mine, NOW)
    await calls.release("u1", "echo", "k1", "0" * 32)
    assert await calls.key("u1", "echo", "k1") == mine
    await calls.release("u1", "echo", "k1", mine.claim)
    assert await calls.key("u1", "echo", "k1") is None
    await calls.release("u1", "echo", "k1", mine.claim)  # nothing left: no error
    again = running()
    await calls.claim(again, NOW)
    await calls.record(CallWrite(done=done(again)))
    await calls.release("u1", "echo", "k1", again.claim)  # a DONE record is kept for replays
    assert await calls.key("u1", "echo", "k1") == done(again)


async def test_purge_expired_records_and_idle_conversations(calls: CallRecords) -> None:
    old = running("old")
    await calls.claim(old, NOW)
    kept = running("kept", at=NOW + timedelta(hours=1))
    await calls.claim(kept, NOW + timedelta(hours=1))
    await calls.record(CallWrite(conversation("idle", at=NOW), exchange(at=NOW)))
    active = NOW + timedelta(days=2)
    await calls.record(CallWrite(conversation("active", at=active), exchange(at=active)))
    purge_at = NOW + timedelta(minutes=30)  # after old's expires_at, before kept's
    assert await calls.purge(purge_at, None) == (1, 0)  # None: every conversation stays
    assert await calls.key("u1", "echo", "old") is None
    assert await calls.key("u1", "echo", "kept") == kept
    assert await calls.conversation("idle") is not None
    assert await calls.purge(purge_at, NOW + timedelta(days=1)) == (0, 1)
    assert await calls.conversation("idle") is None
    assert await calls.last_turns("idle", 10) == []
    assert await calls.conversation("active") is not None
    assert await calls.purge(purge_at, NOW + timedelta(days=1)) == (0, 0)


# -- concurrency ----------------------------------------------------------------------------------------


async def test_fifty_concurrent_claims_of_one_key_have_one_holder(calls: CallRecords) -> None:
    contenders = [running() for _ in range(50)]
    with anyio.fail_after(WAIT_SECONDS):
        found = await asyncio.gather(*(calls.claim(record, NOW) for record in contenders))
    holders = {record.claim for record in found}
    assert len(holders) == 1
    (holder,) = holders
    assert sum(record.claim == holder for record in contenders) == 1
    assert all(record == found[0] for record in found)
    stored = await calls.key("u1", "echo", "k1")
    assert stored is not None
    assert stored.claim == holder


async def test_concurrent_records_on_one_conversation_count_every_turn(calls: CallRecords) -> None:
    with anyio.fail_after(WAIT_SECONDS):
        stored = await asyncio.gather(
            *(calls.record(CallWrite(conversation(), exchange(f"m{i}", f"r{i}"))) for i in range(30))
        )
    assert all(stored)
    found = await calls.conversation("c1")
    assert found is not None
    assert found.turn_count == 60
    turns = await calls.turns("c1", "u1", limit=1000)
    assert turns is not None
    assert len(turns) == 60
    for i in range(30):  # each call's turns in its own order
        assert texts(turns).index(f"m{i}") < texts(turns).index(f"r{i}")


async def test_a_burst_of_mixed_writes_gives_each_its_own_outcome(calls: CallRecords) -> None:
    """Claims and records that arrive together (one batch on SQL) keep their own outcomes."""
    taken = running("taken")
    await calls.claim(taken, NOW)
    stale = running("stale")
    await calls.claim(stale, NOW)
    later = NOW + RUNNING_FOR
    taker = running("stale", at=later)
    await calls.claim(taker, later)
    free = [running(f"free{i}", at=later) for i in range(10)]
    with anyio.fail_after(WAIT_SECONDS):
        results = await asyncio.gather(
            *(calls.claim(record, later) for record in free),
            calls.claim(running("taken", at=later), later - timedelta(minutes=1)),
            calls.record(CallWrite(conversation("x"), exchange(), done(stale))),
            calls.record(CallWrite(conversation("y"), exchange(), done(taken))),
            calls.record(CallWrite(conversation("x"), exchange("second"))),
        )
    assert list(results[:10]) == free
    assert results[10] == taken
    assert results[11:] == [False, True, True]
    assert await calls.key("u1", "echo", "stale") == taker
    assert await calls.key("u1", "echo", "taken") == done(taken)
    x = await calls.conversation("x")
    assert x is not None
    assert x.turn_count == 4


async def test_a_cancelled_record_leaves_its_write_whole_or_absent(calls: CallRecords) -> None:
    """Kill-safety: a record cut off at any point leaves all of its write or none of it."""
    for step in range(30):
        mine = running(f"k{step}")
        await calls.claim(mine, NOW)
        with anyio.move_on_after(step * 0.0005):
            await calls.record(CallWrite(conversation(), exchange(f"m{step}", "x" * 5000), done(mine)))
        with anyio.fail_after(WAIT_SECONDS):
            found = await calls.conversation("c1")
            turns = texts(await calls.turns("c1", "u1", limit=1000)) if found is not None else []
            key = await calls.key("u1", "echo", f"k{step}")
        assert len(turns) == (0 if found is None else found.turn_count)
        landed = f"m{step}" in turns
        assert key is not None
        assert key.state is (KeyState.DONE if landed else KeyState.RUNNING)


# -- the SQL stores' group commit: cancellation and outages ---------------------------------------------


@asynccontextmanager
async def writes_blocked(url: str) -> AsyncGenerator[None]:
    """Another connection holds the write lock (SQLite) or locks ``conversations`` (PostgreSQL) in the block."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        holder = sqlite3.connect(parsed.database or "", isolation_level=None, timeout=5)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn, conn.begin():
            await conn.execute(text("LOCK TABLE conversations IN EXCLUSIVE MODE"))
            yield
    finally:
        await engine.dispose()


async def test_a_record_cancelled_while_queued_writes_nothing(sql_url: str) -> None:
    """A record cancelled while it waits for the writer is dropped; one cancelled while its batch is being
    written is waited for: once it has raised, its write is committed, none of it still to come."""
    async with clean_database(sql_url):
        storage = await open_storage(sql_url)
        try:
            calls = storage.calls
            async with writes_blocked(sql_url):
                writing = asyncio.create_task(calls.record(CallWrite(conversation("writing"), exchange())))
                with anyio.fail_after(WAIT_SECONDS):
                    await anyio.wait_all_tasks_blocked()  # its batch waits for the lock
                queued = asyncio.create_task(calls.record(CallWrite(conversation("queued"), exchange())))
                with anyio.fail_after(WAIT_SECONDS):
                    await anyio.wait_all_tasks_blocked()  # queued behind that batch
                queued.cancel()
                writing.cancel()
                with anyio.fail_after(WAIT_SECONDS):
                    (dropped,) = await asyncio.gather(queued, return_exceptions=True)
                assert isinstance(dropped, asyncio.CancelledError)
                assert not writing.done()  # waits for its batch, which waits for the lock
            with anyio.fail_after(WAIT_SECONDS):
                (cancelled,) = await asyncio.gather(writing, return_exceptions=True)
            assert isinstance(cancelled, asyncio.CancelledError)
            assert await calls.conversation("queued") is None
            assert await calls.last_turns("queued", 10) == []
            written = await calls.conversation("writing")
            assert written is not None
            assert written.turn_count == 2
            assert await calls.record(CallWrite(conversation("queued"), exchange()))  # the writer goes on
        finally:
            await storage.close()


def test_every_public_method_reports_database_failures() -> None:
    methods = [
        name
        for name, member in vars(SqlCallRecords).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    ]
    assert set(methods) == {
        "conversation",
        "conversations",
        "turns",
        "last_turns",
        "delete_conversation",
        "claim",
        "key",
        "release",
        "record",
        "purge",
    }
    for name in methods:
        assert getattr(vars(SqlCallRecords)[name], "__wrapped__", None) is not None, name


def _every_call(calls: CallRecords) -> list[Callable[[], Awaitable[object]]]:
    mine = running("k2")
    return [
        lambda: calls.conversation("c1"),
        lambda: calls.conversations("u1"),
        lambda: calls.turns("c1", "u1"),
        lambda: calls.last_turns("c1", 5),
        lambda: calls.delete_conversation("c1", "u1"),
        lambda: calls.claim(mine, NOW),
        lambda: calls.key("u1", "echo", "k1"),
        lambda: calls.release("u1", "echo", "k1", "0" * 32),
        lambda: calls.record(CallWrite(conversation(), exchange("lost"), done(mine))),
        lambda: calls.purge(NOW + timedelta(days=9), NOW + timedelta(days=9)),
    ]


async def _seed(calls: CallRecords) -> IdempotencyRecord:
    first = running()
    await calls.claim(first, NOW)
    await calls.record(CallWrite(conversation(), exchange()))
    return first


async def test_locked_sqlite_is_store_unavailable_and_recovers(tmp_path: Path) -> None:
    path = tmp_path / "calls.db"
    storage = await open_storage(f"sqlite+aiosqlite:///{path}", FAULT_LIMITS)
    try:
        calls = storage.calls
        assert isinstance(calls, SqlCallRecords)
        first = await _seed(calls)
        # An open WAL connection keeps a shared lock on the -shm file: empty the pool first, as after a restart.
        await calls.release_connections()
        holder = sqlite3.connect(path, isolation_level=None, timeout=5)
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        try:
            for call in _every_call(calls):
                limit = FAULT_LIMITS.statement_timeout_seconds + MARGIN_SECONDS
                with bounded(limit), pytest.raises(StoreUnavailableError):
                    await call()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert await calls.key("u1", "echo", "k1") == first  # recovers, nothing half-written
        assert texts(await calls.turns("c1", "u1")) == ["hi", "hello"]
        assert await calls.key("u1", "echo", "k2") is None
    finally:
        await storage.close()


@pytest.mark.postgres
async def test_postgres_refused_is_store_unavailable_and_recovers(postgres_database_url: str) -> None:
    url = postgres_database_url
    async with clean_database(url):
        with running_proxy(make_url(url).port or 5432) as tcp:
            storage = await open_storage(tcp.url_for(url), FAULT_LIMITS)
            try:
                calls = storage.calls
                first = await _seed(calls)
                tcp.refuse()
                for call in _every_call(calls):
                    with bounded(MARGIN_SECONDS), pytest.raises(StoreUnavailableError) as caught:
                        await call()
                    assert f"127.0.0.1:{tcp.port}" in caught.value.database
                tcp.forward()
                assert await calls.key("u1", "echo", "k1") == first
                assert texts(await calls.turns("c1", "u1")) == ["hi", "hello"]
            finally:
                await storage.close()


async def test_naive_times_are_refused(calls: CallRecords) -> None:
    naive = NOW.replace(tzinfo=None)
    with pytest.raises(ValueError, match="aware"):
        await calls.record(CallWrite(conversation(), [Turn(TurnRole.USER, "hi", naive)]))
    with pytest.raises(ValueError, match="aware"):
        await calls.claim(running(), naive)
    with pytest.raises(ValueError, match="aware"):
        await calls.purge(NOW, naive)
    assert await calls.conversation("c1") is None


async def test_the_sqlite_wal_stays_small_while_writes_run_on_the_event_loop(tmp_path: Path) -> None:
    """The loop's connection never checkpoints; checkpoints run in the worker thread, and once the WAL holds
    ``WAL_RESTART_FRAMES`` frames (4 MiB) one batch finishes a checkpoint with no write running, so the
    WAL starts over. The file stays within 4 MiB plus what was committed while the checkpoints ran.
    Without it, 1,200 commits left a WAL of 37 MiB (it only grew)."""
    path = tmp_path / "wal.db"
    storage = await open_storage(f"sqlite+aiosqlite:///{path}")
    try:
        for n in range(1200):
            await storage.calls.record(CallWrite(conversation(f"c{n}"), exchange(f"m{n}")))
        wal = path.with_name("wal.db-wal").stat().st_size
        assert wal < 12 * 1024 * 1024, f"WAL of {wal} bytes after 1,200 commits"
        assert len(texts(await storage.calls.turns("c1199", "u1"))) == 2
    finally:
        await storage.close()
