"""Issue 9 item 4: the A2A task stores (``storage.tasks.open(owner_resolver)``), run over memory, SQLite
and PostgreSQL: round trips, isolation by owner (user and agent), listing order and pages, filters,
the purge of expired tasks, and saves that are all or nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import (
    Artifact,
    ListTasksRequest,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivegate.storage import A2ATasks, open_storage
from hivegate.storage.memory.tasks import MemoryA2ATasks
from hivegate.storage.tasks import MAX_OWNER_LENGTH, stored_owner
from tests.storage.cleanup import clean_database
from tests.storage.conftest import ALL_BACKENDS

WAIT_SECONDS = 30
"""Bound on every concurrent race."""

ALICE_ECHO = "usr_alice/echo"
ALICE_OTHER = "usr_alice/other"
BOB_ECHO = "usr_bob/echo"
ANONYMOUS_ECHO = "anonymous:127.0.0.1/echo"


def _resolve(context: ServerCallContext) -> str:
    owner = context.state["owner"]
    assert isinstance(owner, str)
    return owner


def as_owner(owner: str) -> ServerCallContext:
    return ServerCallContext(state={"owner": owner})


def make_task(
    task_id: str | None = None,
    *,
    context_id: str = "ctx-1",
    state: TaskState = TaskState.TASK_STATE_WORKING,
    seconds: int | None = 1_800_000_000,
) -> Task:
    task = Task(id=task_id or str(uuid.uuid4()), context_id=context_id, status=TaskStatus(state=state))
    if seconds is not None:
        task.status.timestamp.FromSeconds(seconds)
    return task


def rich_task() -> Task:
    task = make_task(state=TaskState.TASK_STATE_COMPLETED)
    task.history.append(Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="hello")]))
    task.artifacts.append(Artifact(artifact_id="a1", name="reply", parts=[Part(text="héllo back")]))
    task.metadata.update({"source": "test", "n": 2})
    task.status.message.CopyFrom(Message(message_id="m2", role=Role.ROLE_AGENT, parts=[Part(text="done")]))
    return task


@pytest.fixture(params=ALL_BACKENDS)
def tasks_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for ``open_storage`` on each backend (PostgreSQL's session database is set up here, synchronously)."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'missing-folder' / 'tasks.db'}"
    url = request.getfixturevalue("postgres_database_url")
    assert isinstance(url, str)
    return url


@pytest.fixture
async def a2a_tasks(tasks_url: str) -> AsyncGenerator[A2ATasks]:
    async with clean_database(tasks_url):
        storage = await open_storage(tasks_url)
        try:
            yield storage.tasks
        finally:
            await storage.close()


@pytest.fixture
def store(a2a_tasks: A2ATasks) -> TaskStore:
    return a2a_tasks.open(_resolve)


async def test_save_get_replace_delete(store: TaskStore) -> None:
    task = rich_task()
    assert await store.get(task.id, as_owner(ALICE_ECHO)) is None
    await store.save(task, as_owner(ALICE_ECHO))
    assert await store.get(task.id, as_owner(ALICE_ECHO)) == task

    task.status.state = TaskState.TASK_STATE_FAILED
    task.history.append(Message(message_id="m3", role=Role.ROLE_USER, parts=[Part(text="again")]))
    await store.save(task, as_owner(ALICE_ECHO))
    assert await store.get(task.id, as_owner(ALICE_ECHO)) == task

    await store.delete(task.id, as_owner(ALICE_ECHO))
    assert await store.get(task.id, as_owner(ALICE_ECHO)) is None
    await store.delete(task.id, as_owner(ALICE_ECHO))  # deleting again is no error


async def test_another_user_cannot_get_list_delete_or_take_over_a_task(store: TaskStore) -> None:
    task = rich_task()
    await store.save(task, as_owner(ALICE_ECHO))
    for other in (BOB_ECHO, ANONYMOUS_ECHO, "usr_alice", "usr_alice/echo/", ""):
        assert await store.get(task.id, as_owner(other)) is None
        listed = await store.list(ListTasksRequest(), as_owner(other))
        assert list(listed.tasks) == []
        assert listed.total_size == 0
        await store.delete(task.id, as_owner(other))
        intruder = make_task(task.id, state=TaskState.TASK_STATE_WORKING)
        with pytest.raises(TaskNotFoundError):
            await store.save(intruder, as_owner(other))
    assert await store.get(task.id, as_owner(ALICE_ECHO)) == task


async def test_a_task_of_one_agent_is_not_visible_under_another(store: TaskStore) -> None:
    task = make_task()
    await store.save(task, as_owner(ALICE_ECHO))
    assert await store.get(task.id, as_owner(ALICE_OTHER)) is None
    assert list((await store.list(ListTasksRequest(), as_owner(ALICE_OTHER))).tasks) == []
    mine = make_task()
    await store.save(mine, as_owner(ALICE_OTHER))
    assert [t.id for t in (await store.list(ListTasksRequest(), as_owner(ALICE_ECHO))).tasks] == [task.id]
    assert [t.id for t in (await store.list(ListTasksRequest(), as_owner(ALICE_OTHER))).tasks] == [mine.id]


async def test_stores_opened_apart_share_the_tasks(a2a_tasks: A2ATasks) -> None:
    first = a2a_tasks.open(_resolve)
    second = a2a_tasks.open(lambda context: ALICE_ECHO)
    task = make_task()
    await first.save(task, as_owner(ALICE_ECHO))
    assert await second.get(task.id, ServerCallContext()) == task
    with pytest.raises(TaskNotFoundError):
        await first.save(make_task(task.id), as_owner(BOB_ECHO))


async def test_list_is_newest_first_and_paginated(store: TaskStore) -> None:
    # Ties on the timestamp are broken by id (descending); a task without a timestamp comes last.
    seconds = [1_800_000_005, 1_800_000_001, 1_800_000_003, 1_800_000_003, 1_800_000_009, 1_800_000_000, None]
    saved = [make_task(f"task-{i:02d}", seconds=s) for i, s in enumerate(seconds)]
    for task in saved:
        await store.save(task, as_owner(ALICE_ECHO))
    await store.save(make_task(seconds=1_900_000_000), as_owner(BOB_ECHO))
    expected = ["task-04", "task-00", "task-03", "task-02", "task-01", "task-05", "task-06"]

    everything = await store.list(ListTasksRequest(), as_owner(ALICE_ECHO))
    assert [t.id for t in everything.tasks] == expected
    assert everything.total_size == len(expected)
    assert not everything.next_page_token

    pages: list[list[str]] = []
    token = ""
    for _ in range(10):  # bounded: 7 tasks in pages of 3
        page = await store.list(ListTasksRequest(page_size=3, page_token=token), as_owner(ALICE_ECHO))
        pages.append([t.id for t in page.tasks])
        assert page.total_size == len(expected)
        token = page.next_page_token
        if not token:
            break
    assert pages == [expected[0:3], expected[3:6], expected[6:]]


async def test_page_tokens_are_per_owner(store: TaskStore) -> None:
    for i in range(4):
        await store.save(make_task(f"a-{i}", seconds=1_800_000_000 + i), as_owner(ALICE_ECHO))
    page = await store.list(ListTasksRequest(page_size=2), as_owner(ALICE_ECHO))
    assert page.next_page_token
    bobs = await store.list(ListTasksRequest(page_size=2, page_token=page.next_page_token), as_owner(BOB_ECHO))
    assert list(bobs.tasks) == []


async def test_list_filters_by_context_and_status(store: TaskStore) -> None:
    done = make_task("done", context_id="ctx-a", state=TaskState.TASK_STATE_COMPLETED)
    working = make_task("working", context_id="ctx-a", state=TaskState.TASK_STATE_WORKING)
    elsewhere = make_task("elsewhere", context_id="ctx-b", state=TaskState.TASK_STATE_COMPLETED)
    for task in (done, working, elsewhere):
        await store.save(task, as_owner(ALICE_ECHO))
    by_context = await store.list(ListTasksRequest(context_id="ctx-a"), as_owner(ALICE_ECHO))
    assert sorted(t.id for t in by_context.tasks) == ["done", "working"]
    by_status = await store.list(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED), as_owner(ALICE_ECHO))
    assert sorted(t.id for t in by_status.tasks) == ["done", "elsewhere"]
    both = await store.list(
        ListTasksRequest(context_id="ctx-a", status=TaskState.TASK_STATE_COMPLETED), as_owner(ALICE_ECHO)
    )
    assert [t.id for t in both.tasks] == ["done"]
    assert list((await store.list(ListTasksRequest(context_id="ctx-a"), as_owner(BOB_ECHO))).tasks) == []


async def test_ids_the_table_cannot_hold_are_invalid_params(store: TaskStore) -> None:
    for task in (make_task("x" * 37), make_task(context_id="c" * 37), Task(context_id="c")):
        with pytest.raises(InvalidParamsError):
            await store.save(task, as_owner(ALICE_ECHO))
    fits = make_task("x" * 36, context_id="c" * 36)
    await store.save(fits, as_owner(ALICE_ECHO))
    assert await store.get(fits.id, as_owner(ALICE_ECHO)) == fits


async def test_long_owners_are_kept_apart_by_digest(store: TaskStore) -> None:
    long_a = "usr_" + "a" * MAX_OWNER_LENGTH + "/echo"
    long_b = "usr_" + "a" * MAX_OWNER_LENGTH + "/echo2"
    assert stored_owner(long_a) != stored_owner(long_b)
    assert len(stored_owner(long_a)) <= MAX_OWNER_LENGTH
    task = make_task()
    await store.save(task, as_owner(long_a))
    assert await store.get(task.id, as_owner(long_a)) == task
    assert await store.get(task.id, as_owner(long_b)) is None


async def test_purge_removes_only_terminal_tasks_saved_before_the_cutoff(a2a_tasks: A2ATasks, store: TaskStore) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    terminal = [
        make_task(state=state)
        for state in (
            TaskState.TASK_STATE_COMPLETED,
            TaskState.TASK_STATE_FAILED,
            TaskState.TASK_STATE_CANCELED,
            TaskState.TASK_STATE_REJECTED,
        )
    ]
    open_ = [
        make_task(state=state)
        for state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
            TaskState.TASK_STATE_INPUT_REQUIRED,
            TaskState.TASK_STATE_AUTH_REQUIRED,
        )
    ]
    untimed = make_task(state=TaskState.TASK_STATE_COMPLETED, seconds=None)
    for task in [*terminal, *open_, untimed]:
        await store.save(task, as_owner(ALICE_ECHO if len(task.id) % 2 else BOB_ECHO))

    assert await a2a_tasks.purge_expired(before) == 0
    assert await a2a_tasks.purge_expired(datetime.now(UTC) + timedelta(seconds=1)) == len(terminal) + 1
    for owner in (ALICE_ECHO, BOB_ECHO):
        for task in [*terminal, untimed]:
            assert await store.get(task.id, as_owner(owner)) is None
    remaining = [
        t.id for owner in (ALICE_ECHO, BOB_ECHO) for t in (await store.list(ListTasksRequest(), as_owner(owner))).tasks
    ]
    assert sorted(remaining) == sorted(t.id for t in open_)
    assert await a2a_tasks.purge_expired(datetime.now(UTC) + timedelta(seconds=1)) == 0
    with pytest.raises(ValueError, match="aware"):
        await a2a_tasks.purge_expired(datetime(2026, 1, 1))


async def test_a_saved_again_task_is_not_expired_by_its_first_save(a2a_tasks: A2ATasks, store: TaskStore) -> None:
    task = make_task(state=TaskState.TASK_STATE_WORKING)
    await store.save(task, as_owner(ALICE_ECHO))
    await anyio.sleep(0.05)
    middle = datetime.now(UTC)
    await anyio.sleep(0.05)
    task.status.state = TaskState.TASK_STATE_COMPLETED
    await store.save(task, as_owner(ALICE_ECHO))
    assert await a2a_tasks.purge_expired(middle) == 0
    assert await store.get(task.id, as_owner(ALICE_ECHO)) == task


async def test_racing_owners_one_wins_the_id(store: TaskStore) -> None:
    task_id = str(uuid.uuid4())
    outcomes: dict[str, str] = {}

    async def save_as(owner: str) -> None:
        try:
            await store.save(make_task(task_id, context_id=owner[-30:]), as_owner(owner))
        except TaskNotFoundError:
            outcomes[owner] = "refused"
        else:
            outcomes[owner] = "saved"

    owners = [f"usr_{i}/echo" for i in range(6)]
    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg:
            for owner in owners:
                tg.start_soon(save_as, owner)
    winners = [owner for owner, outcome in outcomes.items() if outcome == "saved"]
    assert len(winners) == 1
    for owner in owners:
        found = await store.get(task_id, as_owner(owner))
        assert (found is not None) == (owner == winners[0])
    assert found_context(await store.get(task_id, as_owner(winners[0]))) == winners[0][-30:]


async def test_a_burst_of_saves_is_each_stored_or_refused_on_its_own(store: TaskStore) -> None:
    """Saves that arrive together (the SQL stores commit them as one batch) keep their own outcome:
    a task id another owner holds is refused without failing the others, and of several saves of one
    task the last one started is what is stored."""
    taken = make_task(context_id="bob's")
    await store.save(taken, as_owner(BOB_ECHO))
    fresh = [make_task(context_id=f"c{i}") for i in range(40)]
    versions = []
    for step in range(5):
        version = make_task(fresh[0].id, context_id="c0")
        version.history.append(Message(message_id=f"v{step}", role=Role.ROLE_USER, parts=[Part(text=str(step))]))
        versions.append(version)
    refused: list[str] = []

    async def save(task: Task, owner: str) -> None:
        try:
            await store.save(task, as_owner(owner))
        except TaskNotFoundError:
            refused.append(task.id)

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg:
            for task in [*fresh[:20], make_task(taken.id, context_id="alice's"), *fresh[20:], *versions]:
                tg.start_soon(save, task, ALICE_ECHO)
    assert refused == [taken.id]
    assert await store.get(taken.id, as_owner(BOB_ECHO)) == taken
    for task in fresh[1:]:
        assert await store.get(task.id, as_owner(ALICE_ECHO)) == task
    assert await store.get(fresh[0].id, as_owner(ALICE_ECHO)) == versions[-1]


def found_context(task: Task | None) -> str:
    assert task is not None
    return task.context_id


async def test_a_cancelled_save_leaves_the_old_task_or_the_new_one(store: TaskStore) -> None:
    """Kill-safety: a save cut off at any point leaves the task whole (before or after), never half-written."""
    old = rich_task()
    await store.save(old, as_owner(ALICE_ECHO))
    for step in range(40):
        new = Task()
        new.CopyFrom(old)
        new.status.state = TaskState.TASK_STATE_FAILED
        new.history.append(Message(message_id=f"n{step}", role=Role.ROLE_USER, parts=[Part(text="x" * 5000)]))
        with anyio.move_on_after(step * 0.0005):
            await store.save(new, as_owner(ALICE_ECHO))
        with anyio.fail_after(WAIT_SECONDS):
            found = await store.get(old.id, as_owner(ALICE_ECHO))
        assert found in (old, new)
        if found == new:
            old = new


# -- a property of the listing, on the memory store (the same SDK cursor code as SQL's) ------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    timestamps=st.lists(st.one_of(st.none(), st.integers(1_800_000_000, 1_800_000_006)), min_size=0, max_size=15),
    page_size=st.integers(1, 6),
)
def test_pages_cover_the_listing_exactly_once(timestamps: list[int | None], page_size: int) -> None:
    async def check() -> None:
        store = MemoryA2ATasks().open(_resolve)
        for i, seconds in enumerate(timestamps):
            await store.save(make_task(f"t{i:02d}", seconds=seconds), as_owner(ALICE_ECHO))
        full = [t.id for t in (await store.list(ListTasksRequest(page_size=100), as_owner(ALICE_ECHO))).tasks]
        expected = sorted(
            (f"t{i:02d}" for i in range(len(timestamps))),
            key=lambda task_id: (timestamps[int(task_id[1:])] is not None, timestamps[int(task_id[1:])] or 0, task_id),
            reverse=True,
        )
        assert full == expected
        paged: list[str] = []
        token = ""
        for _ in range(len(timestamps) + 1):
            page = await store.list(ListTasksRequest(page_size=page_size, page_token=token), as_owner(ALICE_ECHO))
            assert len(page.tasks) <= page_size
            paged.extend(t.id for t in page.tasks)
            token = page.next_page_token
            if not token:
                break
        assert paged == expected

    anyio.run(check)
