"""Issue 9 item 4: the gateway's scheduled purge of expired A2A tasks (``a2a.task_retention_seconds``)."""

from __future__ import annotations

from datetime import timedelta

import anyio
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Task, TaskState, TaskStatus

from hivegate.gateway import purge_expired_tasks
from hivegate.settings import load_settings
from hivegate.storage.memory.tasks import MemoryA2ATasks

WAIT_SECONDS = 10


def _owner(_: ServerCallContext) -> str:
    return "usr_alice/echo"


async def test_the_schedule_purges_finished_tasks_past_retention_and_keeps_the_rest() -> None:
    tasks = MemoryA2ATasks()
    store = tasks.open(_owner)
    done = Task(id="done", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    working = Task(id="working", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    for task in (done, working):
        await store.save(task, ServerCallContext())
    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(purge_expired_tasks, tasks, timedelta(seconds=0), 0.01)
            for _ in range(WAIT_SECONDS * 100):  # the purge runs every 0.01 s
                if await store.get("done", ServerCallContext()) is None:
                    break
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert await store.get("working", ServerCallContext()) == working


async def test_retention_keeps_recent_finished_tasks() -> None:
    tasks = MemoryA2ATasks()
    store = tasks.open(_owner)
    done = Task(id="done", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    await store.save(done, ServerCallContext())
    with anyio.move_on_after(0.2):
        await purge_expired_tasks(tasks, timedelta(hours=1), 0.01)
    assert await store.get("done", ServerCallContext()) == done


def test_retention_setting_defaults_to_seven_days() -> None:
    assert load_settings().a2a.task_retention_seconds == 7 * 24 * 3600
    assert load_settings(a2a={"task_retention_seconds": 120}).a2a.task_retention_seconds == 120
