"""The test upstream A2A agent (``tests/upstreams/a2a_upstream.py``), run as a process, through the a2a-sdk client.

Three upstreams for the module: a streaming one with a request log, a ``--no-streaming`` one, and one
guarded by ``--require-bearer`` (with a log too).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from a2a.client import A2AClientError, Client, ClientConfig, create_client
from a2a.helpers import get_artifact_text, get_data_parts
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from tests.upstreams.running import Upstream, run_upstream

CALL_TIMEOUT_SECONDS = 30.0
TOKEN = "upstream-secret"


@pytest.fixture(scope="module")
def streaming(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    with run_upstream(log=tmp_path_factory.mktemp("upstream") / "requests.jsonl") as upstream:
        yield upstream


@pytest.fixture(scope="module")
def blocking() -> Iterator[Upstream]:
    with run_upstream("--no-streaming") as upstream:
        yield upstream


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    log = tmp_path_factory.mktemp("guarded") / "requests.jsonl"
    with run_upstream("--require-bearer", TOKEN, log=log) as upstream:
        yield upstream


@asynccontextmanager
async def _client(
    upstream: Upstream, *, streaming: bool = True, token: str | None = None, binding: str = "JSONRPC"
) -> AsyncGenerator[Client]:
    """The SDK client of the upstream agent, made from its URL (the card's), sending ``token`` as a bearer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_SECONDS) as http:
        with anyio.fail_after(CALL_TIMEOUT_SECONDS):
            client = await create_client(
                upstream.agent,
                client_config=ClientConfig(
                    httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
                ),
            )
        try:
            yield client
        finally:
            await client.close()


def _message(text: str, *, task_id: str = "", context_id: str = "", files: list[Part] | None = None) -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text=text), *(files or [])],
    )


async def _send(client: Client, message: Message, *, return_immediately: bool = False) -> list[StreamResponse]:
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=return_immediately)
    )
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        return [event async for event in client.send_message(request)]


def _final_task(events: list[StreamResponse]) -> Task:
    tasks = [event.task for event in events if event.HasField("task")]
    assert tasks, events
    return tasks[-1]


def _text(task: Task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts if part.HasField("text"))


async def test_card_is_public_and_says_whether_it_streams(guarded: Upstream, blocking: Upstream) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        card = (await http.get(f"{guarded.agent}/.well-known/agent-card.json")).json()
        plain = (await http.get(f"{blocking.agent}/.well-known/agent-card.json")).json()
    assert (card["name"], card["description"], card["version"]) == ("Upstream", "A remote A2A agent for tests", "1.2.3")
    assert card["supportedInterfaces"][0] == {
        "url": f"{guarded.agent}/a2a",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert [(s["id"], s["name"]) for s in card["skills"]] == [("echo", "Echo"), ("shout", "Shout")]
    assert card["skills"][0]["tags"] == ["demo"]
    assert card["defaultInputModes"] == card["defaultOutputModes"] == ["text/plain", "application/json"]
    assert (card["capabilities"]["streaming"], plain["capabilities"]["streaming"]) == (True, False)


@pytest.mark.parametrize("client_streams", [False, True])
async def test_echo_blocking(streaming: Upstream, blocking: Upstream, client_streams: bool) -> None:
    """A blocking call (or any call to the --no-streaming upstream) returns the whole reply in one task."""
    upstream = streaming if not client_streams else blocking  # a streaming client falls back to SendMessage
    async with _client(upstream, streaming=client_streams) as client:
        events = await _send(client, _message("echo hello big world"))
    assert [event.WhichOneof("payload") for event in events] == ["task"]
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.name for a in task.artifacts] == ["response"]
    assert _text(task) == "hello big world"


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_echo_streams_word_chunks(streaming: Upstream, binding: str) -> None:
    async with _client(streaming, binding=binding) as client:
        events = await _send(client, _message("echo hello big world"))
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == ["task", "status_update", "artifact_update", "artifact_update", "artifact_update", "status_update"]
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    chunks = [event.artifact_update for event in events if event.HasField("artifact_update")]
    assert [(c.artifact.parts[0].text, c.append, c.last_chunk) for c in chunks] == [
        ("hello ", False, False),
        ("big ", True, False),
        ("world", True, True),
    ]
    states = [event.status_update.status.state for event in events if event.HasField("status_update")]
    assert states == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]


async def test_context_continuity_and_log(streaming: Upstream) -> None:
    async with _client(streaming, streaming=False) as client:
        first = _final_task(await _send(client, _message("context")))
        context_id = first.context_id
        assert _text(first) == f"context={context_id} turns=0"
        await _send(client, _message("echo in between", context_id=context_id))
        third = _final_task(await _send(client, _message("context", context_id=context_id)))
        assert _text(third) == f"context={context_id} turns=2"
        other = _final_task(await _send(client, _message("context")))
        assert other.context_id != context_id
        assert _text(other).endswith(" turns=0")
    logged = [line for line in streaming.log_lines() if line["context_id"] == context_id]
    assert [(line["method"], line["text"], line["authorization"]) for line in logged] == [
        ("execute", "context", None),
        ("execute", "echo in between", None),
        ("execute", "context", None),
    ]
    assert logged[0]["task_id"] == first.id


async def test_data_file_big_attachments_and_other_commands(streaming: Upstream) -> None:
    async with _client(streaming, streaming=False) as client:
        data = _final_task(await _send(client, _message("data")))
        file = _final_task(await _send(client, _message("file")))
        big = _final_task(await _send(client, _message("big 100000")))
        body = bytes(range(256)) * 3
        attachment = Part(raw=body, filename="in.bin", media_type="application/octet-stream")
        card_url = f"{streaming.agent}/.well-known/agent-card.json"
        linked = Part(url=card_url, filename="card.json", media_type="application/json")
        listed = _final_task(await _send(client, _message("attachments", files=[attachment, linked])))
        shouted = _final_task(await _send(client, _message("shout hey you")))
        other = _final_task(await _send(client, _message("just  words")))
    async with httpx.AsyncClient(timeout=10) as http:
        card = (await http.get(card_url)).content
    parts = data.artifacts[0].parts
    assert get_data_parts(parts) == [{"answer": 42.0, "items": ["a", "b"]}]  # protobuf Value: numbers are doubles
    assert get_artifact_text(data.artifacts[0]) == "see data"
    raw = [part for part in file.artifacts[0].parts if part.HasField("raw")]
    assert [(p.raw, p.filename, p.media_type) for p in raw] == [(b"%PDF-1.4 upstream", "u.pdf", "application/pdf")]
    assert get_artifact_text(file.artifacts[0]) == "see file"
    assert _text(big) == "x" * 100000
    sha = hashlib.sha256(body).hexdigest()
    card_sha = hashlib.sha256(card).hexdigest()
    assert _text(listed).splitlines() == [
        f"in.bin|application/octet-stream|{sha}|{len(body)}",
        f"card.json|application/json|{card_sha}|{len(card)}",
    ]
    assert (_text(shouted), _text(other)) == ("HEY YOU", "just  words")


@pytest.mark.parametrize("client_streams", [False, True])
async def test_ask_then_follow_up(streaming: Upstream, client_streams: bool) -> None:
    async with _client(streaming, streaming=client_streams) as client:
        events = await _send(client, _message("ask"))
        asked = await client.get_task(GetTaskRequest(id=_final_task(events).id))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert asked.status.message.parts[0].text == "what is your name?"
        assert asked.status.message.role == Role.ROLE_AGENT
        await _send(client, _message("name Bob", task_id=asked.id, context_id=asked.context_id))
        answered = await client.get_task(GetTaskRequest(id=asked.id))
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert _text(answered) == "hello Bob"


async def test_fail(streaming: Upstream) -> None:
    async with _client(streaming, streaming=False) as client:
        task = _final_task(await _send(client, _message("fail")))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == "upstream failure"


async def test_cancel_a_slow_task(streaming: Upstream) -> None:
    async with _client(streaming, streaming=False) as client:
        task = _final_task(await _send(client, _message("slow 30"), return_immediately=True))
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        with anyio.fail_after(CALL_TIMEOUT_SECONDS):
            cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        assert (await client.get_task(GetTaskRequest(id=task.id))).status.state == TaskState.TASK_STATE_CANCELED
    assert [line["method"] for line in streaming.log_lines() if line["task_id"] == task.id] == ["execute", "cancel"]


async def test_cancel_ends_a_running_stream(streaming: Upstream) -> None:
    events: list[StreamResponse] = []
    async with _client(streaming) as client, _client(streaming, streaming=False) as other:
        request = SendMessageRequest(message=_message("slow 30"))
        with anyio.fail_after(CALL_TIMEOUT_SECONDS):
            async for event in client.send_message(request):
                events.append(event)
                if event.HasField("status_update") and event.status_update.status.state == TaskState.TASK_STATE_WORKING:
                    cancelled = await other.cancel_task(CancelTaskRequest(id=event.status_update.task_id))
                    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    states = [event.status_update.status.state for event in events if event.HasField("status_update")]
    assert states == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_CANCELED]


async def test_require_bearer(guarded: Upstream) -> None:
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}
    async with httpx.AsyncClient(timeout=10, headers={"A2A-Version": "1.0"}) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            response = await http.post(f"{guarded.agent}/a2a", json=rpc, headers=headers)
            assert response.status_code == 401, headers
            assert response.headers["www-authenticate"].startswith("Bearer")
        response = await http.get(f"{guarded.agent}/rest/tasks/nope")
        assert response.status_code == 401
    async with _client(guarded, streaming=False) as anonymous:
        with pytest.raises(A2AClientError, match="401"):
            await _send(anonymous, _message("echo hi"))
    async with _client(guarded, token="wrong") as wrong:
        with pytest.raises(A2AClientError, match="401"):
            await _send(wrong, _message("echo hi"))
    for client_streams in (False, True):
        async with _client(guarded, streaming=client_streams, token=TOKEN) as client:
            task = await client.get_task(GetTaskRequest(id=_final_task(await _send(client, _message("auth"))).id))
            assert _text(task) == f"Bearer {TOKEN}"
    assert [(line["text"], line["authorization"]) for line in guarded.log_lines()] == [
        ("auth", f"Bearer {TOKEN}"),
        ("auth", f"Bearer {TOKEN}"),
    ]
