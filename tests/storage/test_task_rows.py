"""``task_row``: the ``tasks`` row hivegate writes is the one the SDK's ``DatabaseTaskStore`` would
write (its ``_to_orm``, which the SDK's reads invert), made from the task's JSON form rendered once.
Property test over generated tasks: states, timestamps, status messages, text/data/url parts,
artifacts, history and metadata."""

from __future__ import annotations

from typing import Any

from a2a.server.tasks.database_task_store import DatabaseTaskStore
from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.storage.sql.task_tables import SDK_ATTRIBUTES
from hivegate.storage.sql.tasks import task_row

_SDK = DatabaseTaskStore(create_async_engine("sqlite+aiosqlite:///unused.db"), create_table=False)
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


def _sdk_row(task: Task, owner: str) -> dict[str, Any]:
    model = _SDK._to_orm(task, owner)  # pyright: ignore[reportPrivateUsage]  # the SDK's own mapping is the reference
    return {column: getattr(model, attribute) for column, attribute in SDK_ATTRIBUTES.items()}


@settings(max_examples=300, deadline=None)
@given(tasks(), _TEXT)
def test_the_row_is_the_sdks(task: Task, owner: str) -> None:
    assert task_row(task, MessageToDict(task), owner) == _sdk_row(task, owner)


def test_an_empty_task_gives_the_sdks_row() -> None:
    task = Task(id="t")
    assert task_row(task, MessageToDict(task), "o") == _sdk_row(task, "o")
