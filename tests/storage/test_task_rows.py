"""``task_row``: the ``tasks`` row hivegate writes is the one the SDK's ``DatabaseTaskStore`` writes
(which the SDK's reads invert), made from the task's JSON form rendered once. Property test over
generated tasks (states, timestamps, status messages, text/data/url parts, artifacts, history,
metadata): each batch is saved by the SDK's own store, through its public ``save``, into a SQLite
file, and every row read back must equal ``task_row`` of its task."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks.database_task_store import DatabaseTaskStore
from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.storage.sql.task_tables import SDK_ATTRIBUTES
from hivegate.storage.sql.tasks import task_row

_TEXT = st.text(max_size=20)
_JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False, width=32) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def parts(draw: st.DrawFn) -> Part:
    kind = draw(st.sampled_from(["text", "data", "url"]))
    part = Part(filename=draw(_TEXT), media_type=draw(_TEXT))
    if kind == "text":
        part.text = draw(_TEXT)
    elif kind == "url":
        part.url = "https://example.test/" + draw(_TEXT)
    else:
        part.data.struct_value.update(draw(st.dictionaries(_TEXT, _JSON, max_size=3)))
    return part


@st.composite
def messages(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from([Role.ROLE_USER, Role.ROLE_AGENT]))
    return Message(message_id=draw(_TEXT), role=role, parts=draw(st.lists(parts(), min_size=1, max_size=3)))


@st.composite
def tasks(draw: st.DrawFn) -> Task:
    task = Task(
        id=draw(st.uuids()).hex,
        context_id=draw(_TEXT),
        status=TaskStatus(state=draw(st.sampled_from(list(TaskState.keys())))),
        history=draw(st.lists(messages(), max_size=3)),
    )
    if draw(st.booleans()):
        task.status.timestamp.FromSeconds(draw(st.integers(0, 4_000_000_000)))
    if draw(st.booleans()):
        task.status.message.CopyFrom(draw(messages()))
    for index in range(draw(st.integers(0, 2))):
        name = draw(_TEXT)
        task.artifacts.append(Artifact(artifact_id=f"a{index}", name=name, parts=draw(st.lists(parts(), max_size=2))))
    task.metadata.update(draw(st.dictionaries(_TEXT, _JSON, max_size=3)))
    return task


async def _sdk_rows(batch: list[Task], owner: str, folder: Path) -> dict[str, dict[str, Any]]:
    """What the SDK's store writes for ``batch``: each task saved by its ``save``, rows read back by id."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{folder / f'{uuid.uuid4().hex}.db'}")
    try:
        store = DatabaseTaskStore(engine, owner_resolver=lambda _context: owner)
        for task in batch:
            await store.save(task, ServerCallContext())
        async with engine.connect() as conn:
            rows = (await conn.execute(text(f"SELECT {', '.join(SDK_ATTRIBUTES)} FROM tasks"))).mappings().all()
    finally:
        await engine.dispose()
    return {row["id"]: {column: _loaded(column, row[column]) for column in SDK_ATTRIBUTES} for row in rows}


def _loaded(column: str, value: Any) -> Any:
    """A column as SQLAlchemy's JSON type would give it (the raw ``SELECT`` returns the JSON text)."""
    if column in ("status", "artifacts", "history", "metadata") and isinstance(value, str):
        return json.loads(value)
    if column == "last_updated" and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(tasks(), min_size=1, max_size=25, unique_by=lambda task: task.id), _TEXT)
def test_the_row_is_the_sdks(tmp_path: Path, batch: list[Task], owner: str) -> None:
    written = asyncio.run(_sdk_rows(batch, owner, tmp_path))
    for task in batch:
        assert task_row(task, MessageToDict(task), owner) == written[task.id]


def test_an_empty_task_gives_the_sdks_row(tmp_path: Path) -> None:
    task = Task(id="t")
    assert task_row(task, MessageToDict(task), "o") == asyncio.run(_sdk_rows([task], "o", tmp_path))["t"]
