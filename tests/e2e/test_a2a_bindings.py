"""The A2A bindings on a real server (issue 9 items 2, 3 and 5): the a2a-sdk client, from the card URL alone.

One gateway, a SQLite registry with two users (alice, bob), each with an ``oag_`` key, and alice's
``bak_`` key for ``echo``. Agents: alice's ``echo`` and ``echo2`` (the demo echo agent, streaming a
reply word by word), ``waiter`` (waits until cancelled, recording start and cancellation in marker
files), ``slow`` (the same with a 1 s deadline), ``failing`` (raises an AgentError), ``notes`` (an
MCP server only: no invocable backend), ``off`` (``a2a_enabled = false``) and ``open``
(``auth = "none"``); bob's ``bobecho``.
"""

from __future__ import annotations

import functools
import signal
import uuid
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import orjson
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.helpers import get_artifact_text
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.invoke_world import ALICE_AGENTS, OPEN_AND_BOB_AGENTS, InvokeWorld, serve_invoke_world
from tests.e2e.marker_agent import WAITER_AGENT, wait_for_marker
from tests.e2e.registry_cli import run_cli
from tests.gateway_process import run_gateway

CONFIG = ALICE_AGENTS + OPEN_AND_BOB_AGENTS

MESSAGE = "hello over a2a"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InvokeWorld]:
    with serve_invoke_world(
        tmp_path_factory.mktemp("a2a"), CONFIG, {"HIVEGATE_DATABASE__POLL_INTERVAL_SECONDS": "0.1"}
    ) as world:
        yield world


@asynccontextmanager
async def _client(
    served: InvokeWorld, agent_id: str, key: str | None, *, streaming: bool = True, binding: str = "JSONRPC"
) -> AsyncGenerator[Client]:
    """The SDK client of ``agent_id``, made from its card URL alone, sending ``key`` as a bearer token."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding])
        client = await create_client(f"{served.gateway.url}/{agent_id}", client_config=config)
        try:
            yield client
        finally:
            await client.close()


def _request(text: str, *, return_immediately: bool = False) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    configuration = SendMessageConfiguration(return_immediately=return_immediately)
    return SendMessageRequest(message=message, configuration=configuration)


async def _send(client: Client, text: str, *, return_immediately: bool = False) -> list[StreamResponse]:
    with anyio.fail_after(30):
        return [event async for event in client.send_message(_request(text, return_immediately=return_immediately))]


def _final_task(events: list[StreamResponse]) -> Task:
    tasks = [event.task for event in events if event.HasField("task")]
    assert tasks, events
    return tasks[-1]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_send_get_and_list_from_the_card_url(served: InvokeWorld, binding: str) -> None:
    async with _client(served, "echo", served.alice, streaming=False, binding=binding) as client:
        task = _final_task(await _send(client, MESSAGE))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert [get_artifact_text(a) for a in task.artifacts] == [MESSAGE]
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        assert (fetched.id, fetched.status.state) == (task.id, TaskState.TASK_STATE_COMPLETED)
        assert get_artifact_text(fetched.artifacts[0]) == MESSAGE
        listed = await client.list_tasks(ListTasksRequest())
        assert task.id in [t.id for t in listed.tasks]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_stream_delivers_chunks_then_the_whole_reply(served: InvokeWorld, binding: str) -> None:
    async with _client(served, "echo", served.alice, binding=binding) as client:
        events = await _send(client, MESSAGE)
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task"
    chunks = [event.artifact_update for event in events if event.HasField("artifact_update")]
    assert len(chunks) == len(MESSAGE.split(" ")) + 1  # one per word, then the whole reply
    assert "".join(c.artifact.parts[0].text for c in chunks[:-1]) == MESSAGE
    assert (chunks[-1].artifact.parts[0].text, chunks[-1].append, chunks[-1].last_chunk) == (MESSAGE, False, True)
    statuses = [event.status_update.status.state for event in events if event.HasField("status_update")]
    assert statuses == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]


async def test_cancel_cancels_the_running_call(served: InvokeWorld) -> None:
    text = f"wait-{uuid.uuid4().hex[:8]}"
    async with _client(served, "waiter", served.alice, streaming=False) as client:
        task = _final_task(await _send(client, text, return_immediately=True))
        await wait_for_marker(served.folder / "marks" / f"started-{text}")
        with anyio.fail_after(30):
            cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        await wait_for_marker(served.folder / "marks" / f"cancelled-{text}")
        assert (await client.get_task(GetTaskRequest(id=task.id))).status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))
    async with _client(served, "waiter", served.alice) as streaming:
        with pytest.raises(UnsupportedOperationError), anyio.fail_after(30):  # a terminal task has nothing to send
            async for _ in streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
                pass


async def test_agent_failure_and_deadline_are_failed_tasks_with_their_text(served: InvokeWorld) -> None:
    async with _client(served, "failing", served.alice, streaming=False) as client:
        task = _final_task(await _send(client, "this"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == "cannot answer this"
    text = f"slow-{uuid.uuid4().hex[:8]}"
    async with _client(served, "slow", served.alice, streaming=False) as client:
        task = _final_task(await _send(client, text))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == "Agent reply timeout"
    await wait_for_marker(served.folder / "marks" / f"cancelled-{text}")  # the deadline cancelled the backend call


async def test_a_running_task_stays_cancellable_across_a_change_of_its_agent(served: InvokeWorld) -> None:
    """An edit of the agent (``agents apply`` on the running server) keeps its running tasks reachable."""
    text = f"edit-{uuid.uuid4().hex[:8]}"
    async with _client(served, "waiter", served.alice, streaming=False) as client:
        task = _final_task(await _send(client, text, return_immediately=True))
        await wait_for_marker(served.folder / "marks" / f"started-{text}")
        edited = served.folder / "edited.toml"
        edited.write_text(CONFIG.replace('name = "Waiter"', 'name = "Waiter"\ndescription = "edited"'), "utf-8")
        await anyio.to_thread.run_sync(
            lambda: run_cli(served.database_url, "agents", "apply", str(edited), pythonpath=served.path)
        )
        card_url = f"{served.gateway.url}/waiter/.well-known/agent-card.json"
        # waiter is private: its card is its owner's (docs/a2a.md#discovery)
        async with httpx.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {served.alice}"}) as http:
            with anyio.fail_after(10):  # the server's registry poll runs every 0.1 s
                while (await http.get(card_url)).json()["description"] != "edited":  # noqa: ASYNC110  # another process
                    await anyio.sleep(0.05)
        with anyio.fail_after(30):
            cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        await wait_for_marker(served.folder / "marks" / f"cancelled-{text}")


async def test_tasks_are_isolated_by_user_and_by_agent(served: InvokeWorld) -> None:
    async with _client(served, "echo", served.alice, streaming=False) as alice:
        task = _final_task(await _send(alice, MESSAGE))
    async with _client(served, "bobecho", served.bob, streaming=False) as bob:
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await bob.cancel_task(CancelTaskRequest(id=task.id))
        assert task.id not in [t.id for t in (await bob.list_tasks(ListTasksRequest())).tasks]
    async with _client(served, "echo2", served.alice, streaming=False) as other_agent:
        with pytest.raises(TaskNotFoundError):
            await other_agent.get_task(GetTaskRequest(id=task.id))
        assert task.id not in [t.id for t in (await other_agent.list_tasks(ListTasksRequest())).tasks]
    # The same user through another credential kind (her bak_ key for echo, in X-Agent-API-Key) sees it.
    headers = {"X-Agent-API-Key": served.alice_echo_bak, "A2A-Version": "1.0"}
    async with httpx.AsyncClient(headers=headers, timeout=10) as http:
        response = await http.get(f"{served.gateway.url}/echo/a2a/tasks/{task.id}")
    assert (response.status_code, response.json()["id"]) == (200, task.id)
    # Bob cannot reach alice's agent at all: the gate's 404, in the binding's shape.
    response = _rpc(served, "echo", "GetTask", {"id": task.id}, served.bob)
    assert response.status_code == 404
    assert response.json()["error"]["data"][0]["metadata"]["code"] == "agent_not_found"


def test_anonymous_callers_are_isolated_by_address(served: InvokeWorld) -> None:
    """Two loopback addresses calling an ``auth = "none"`` agent do not see each other's tasks."""
    body = _message_body("from one address")
    first = httpx.post(f"{served.gateway.url}/open/a2a/message:send", json=body, headers=_V1, timeout=10)
    assert first.status_code == 200, first.text
    task_id = first.json()["task"]["id"]
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(transport=transport, timeout=10, headers=_V1) as other:
        assert other.get(f"{served.gateway.url}/open/a2a/tasks/{task_id}").status_code == 404
        assert task_id not in [t["id"] for t in other.get(f"{served.gateway.url}/open/a2a/tasks").json()["tasks"]]
    same = httpx.get(f"{served.gateway.url}/open/a2a/tasks/{task_id}", headers=_V1, timeout=10)
    assert same.status_code == 200


_V1 = {"A2A-Version": "1.0"}


def _message_body(text: str) -> dict[str, Any]:
    return {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}}


def _rpc(
    served: InvokeWorld,
    agent_id: str,
    method: str,
    params: dict[str, Any],
    key: str | None,
    *,
    version: str | None = "1.0",
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if version is not None:
        headers["A2A-Version"] = version
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return httpx.post(f"{served.gateway.url}/{agent_id}/a2a", json=body, headers=headers, timeout=10)


def test_a2a_version_missing_is_0_3(served: InvokeWorld) -> None:
    """No ``A2A-Version`` means 0.3 (A2A 1.0 §3.2.6): a 1.0 method is VersionNotSupported (-32009), a 0.3
    method name is served (the v0.3 compatibility mode); an unsupported version is -32009 too."""
    refused = _rpc(served, "echo", "SendMessage", _message_body(MESSAGE), served.alice, version=None).json()
    assert refused["error"]["code"] == -32009
    assert refused["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert (
        _rpc(served, "echo", "SendMessage", _message_body(MESSAGE), served.alice, version="2.0").json()["error"]["code"]
        == -32009
    )
    old = {
        "message": {"messageId": "m-03", "role": "user", "kind": "message", "parts": [{"kind": "text", "text": "hi"}]}
    }
    result = _rpc(served, "echo", "message/send", old, served.alice, version=None).json()["result"]
    assert (result["kind"], result["status"]["state"]) == ("task", "completed")
    assert result["artifacts"][0]["parts"][0]["text"] == "hi"
    headers = {"Authorization": f"Bearer {served.alice}"}
    rest = httpx.post(
        f"{served.gateway.url}/echo/a2a/message:send", json=_message_body("x"), headers=headers, timeout=10
    )
    assert rest.status_code == 400
    assert rest.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"


def test_no_credential_is_401_with_a_challenge_in_each_binding_shape(served: InvokeWorld) -> None:
    rpc = _rpc(served, "echo", "SendMessage", _message_body(MESSAGE), None)
    assert rpc.status_code == 401
    challenge = rpc.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{served.gateway.url}/.well-known/oauth-protected-resource/echo/mcp"' in challenge
    assert 'scope="agent:echo"' in challenge
    error = rpc.json()["error"]
    assert (error["code"], error["data"][0]["metadata"]["code"]) == (-32600, "unauthorized")
    rest = httpx.get(f"{served.gateway.url}/echo/a2a/tasks", headers=_V1, timeout=10)
    assert rest.status_code == 401
    assert rest.headers["www-authenticate"] == challenge
    assert rest.json()["error"]["status"] == "UNAUTHENTICATED"
    wrong_agent_key = _rpc(served, "echo2", "GetTask", {"id": "x"}, served.alice_echo_bak)
    assert wrong_agent_key.status_code == 403
    assert 'error="insufficient_scope"' in wrong_agent_key.headers["www-authenticate"]


def test_wrong_method_and_unknown_operation_answer_in_the_binding_shape(served: InvokeWorld) -> None:
    headers = {"Authorization": f"Bearer {served.alice}", **_V1}
    wrong = httpx.get(f"{served.gateway.url}/echo/a2a", headers=headers, timeout=10)
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
    assert wrong.json()["error"]["data"][0]["metadata"]["code"] == "method_not_allowed"
    unknown = httpx.get(f"{served.gateway.url}/echo/a2a/no/such/operation", headers=headers, timeout=10)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["details"][0]["metadata"]["code"] == "not_found"


@pytest.mark.parametrize("agent_id", ["off", "nobody", "bad%20id"])
def test_disabled_or_unknown_agent_is_404(served: InvokeWorld, agent_id: str) -> None:
    rpc = _rpc(served, agent_id, "SendMessage", _message_body(MESSAGE), served.alice)
    assert rpc.status_code == 404
    assert rpc.json()["error"]["data"][0]["metadata"]["code"] == "agent_not_found"
    auth = {**_V1, "Authorization": f"Bearer {served.alice}"}
    rest = httpx.get(f"{served.gateway.url}/{agent_id}/a2a/tasks", headers=auth, timeout=10)
    assert rest.status_code == 404
    assert rest.json()["error"]["details"][0]["metadata"]["code"] == "agent_not_found"


@pytest.mark.parametrize("path", ["a2a", "a2a/tasks", "v1/invoke"])
def test_without_a_credential_an_unknown_agent_answers_as_a_private_one(served: InvokeWorld, path: str) -> None:
    """Found by issue 9's attack trial: an unknown agent was 404 before the credential was read while a
    private one asked for a credential (401), so the answer told them apart. Now both are the gate's 401
    challenge, as on MCP; with a credential both are 404 ``agent_not_found`` with the same message."""
    url = served.gateway.url

    def answer(agent_id: str, key: str | None) -> tuple[int, str]:
        headers = {**_V1, "Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        body = {"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {}} if path == "a2a" else {"message": "x"}
        if path == "a2a/tasks":
            response = httpx.get(f"{url}/{agent_id}/{path}", headers=headers, timeout=10)
        else:
            response = httpx.post(f"{url}/{agent_id}/{path}", json=body, headers=headers, timeout=10)
        return response.status_code, response.headers.get("www-authenticate", "").replace(agent_id, "ID")

    assert answer("waiter", None) == answer("nobody", None)
    assert answer("nobody", None)[0] == 401
    for other_id in ("waiter", "nobody"):  # bob's credential: alice's private agent is not his
        assert answer(other_id, served.bob)[0] == 404


async def test_an_agent_without_an_invocable_backend_refuses_messages(served: InvokeWorld) -> None:
    async with _client(served, "notes", served.alice, streaming=False) as client:
        with pytest.raises(UnsupportedOperationError):
            await _send(client, MESSAGE)
        assert not (await client.list_tasks(ListTasksRequest())).tasks  # nothing was written


async def test_same_reply_over_mcp_and_a2a(served: InvokeWorld) -> None:
    """Issue 9 acceptance: the same message gets the same reply text over MCP tools/call and A2A SendMessage."""
    text = "the same words both ways"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {served.alice}"}, timeout=30) as http,
        McpClient(streamable_http_client(f"{served.gateway.url}/echo/mcp", http_client=http)) as mcp,  # type: ignore[arg-type]
    ):
        with anyio.fail_after(30):
            result = await mcp.call_tool("echo", {"message": text})
    mcp_text: str = result.content[0].text  # type: ignore[union-attr]
    async with _client(served, "echo", served.alice, streaming=False) as client:
        task = _final_task(await _send(client, text))
    assert get_artifact_text(task.artifacts[0]) == mcp_text == text


async def test_shutdown_stops_running_a2a_tasks(tmp_path: Path) -> None:
    """Stopping the server cancels the A2A calls still running (the backend sees it) and exits cleanly."""
    (tmp_path / "marks").mkdir()
    (tmp_path / "waiter_agent.py").write_text(WAITER_AGENT, encoding="utf-8")
    config = tmp_path / "agents.toml"
    config.write_text(
        '[[agents]]\nid = "w"\nname = "W"\nowner = "alice"\nauth = "none"\n'
        'backend = { type = "python", callable = "waiter_agent:reply" }\n',
        encoding="utf-8",
    )
    text = f"shutdown-{uuid.uuid4().hex[:8]}"
    with run_gateway(config, env={"PYTHONPATH": str(tmp_path)}) as gateway:
        async with httpx.AsyncClient(timeout=10, headers=_V1) as http:
            body = {**_message_body(text), "configuration": {"returnImmediately": True}}
            response = await http.post(f"{gateway.url}/w/a2a/message:send", json=body)
            assert response.status_code == 200, response.text
        await wait_for_marker(tmp_path / "marks" / f"started-{text}")
        gateway.process.terminate()
        with anyio.fail_after(20):
            code = await anyio.to_thread.run_sync(gateway.process.wait)
        output = gateway.output()
    # uvicorn re-raises the signal it handled once shutdown is complete, so SIGTERM is the exit status.
    assert code in (0, -signal.SIGTERM), output
    assert (tmp_path / "marks" / f"cancelled-{text}").exists(), output
    assert "Traceback" not in output
    assert "was destroyed but it is pending" not in output


@pytest.mark.parametrize("path", ["open/a2a", "open/a2a/message:send"])
def test_a_body_over_the_limit_is_413_on_both_bindings(served: InvokeWorld, path: str) -> None:
    """Found by issue 9's attack trial: the bindings read any body (a 5 MiB text part became a stored task,
    anonymously on an ``auth = "none"`` agent). Now ``server.max_body_bytes`` (4 MiB) holds, as on MCP and
    ``/v1/invoke``: 413 ``payload_too_large`` in the binding's shape, and no task is written."""
    text = "x" * (5 * 1024 * 1024)
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if path.endswith("/a2a"):
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}}
    else:
        body = {"message": message}
    response = httpx.post(f"{served.gateway.url}/{path}", json=body, headers=_V1, timeout=30)
    assert response.status_code == 413, response.text[:300]
    if path.endswith("/a2a"):
        assert response.json()["error"]["data"][0]["metadata"]["code"] == "payload_too_large"
    else:
        assert response.json()["error"]["details"][0]["metadata"]["code"] == "payload_too_large"
    listed = _rpc(served, "open", "ListTasks", {}, None)
    assert listed.status_code == 200
    assert text[:100] not in listed.text


@pytest.mark.parametrize("path", ["open/a2a", "open/a2a/message:send"])
def test_json_nested_too_deep_is_a_parse_error_without_internals(served: InvokeWorld, path: str) -> None:
    """Found by issue 9's attack trial: a body nested ~100,000 levels deep was -32603 with Python's
    "maximum recursion depth exceeded" message. It is a parse error (JSON-RPC 2.0 §5.1 -32700; HTTP+JSON
    400 ``parse_error``), and nothing of the server's internals reaches the client."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = httpx.post(
        f"{served.gateway.url}/{path}", content=body, headers={**_V1, "Content-Type": "application/json"}, timeout=30
    )
    assert response.status_code == 400, response.text[:300]
    assert "recursion" not in response.text
    if path.endswith("/a2a"):
        assert response.json()["error"]["code"] == -32700
    else:
        assert response.json()["error"]["details"][0]["metadata"]["code"] == "parse_error"


# -- the lean path of a blocking SendMessage (hivegate.a2a.lean) ----------------------------------------

_SDK_PATH = {"A2A-Extensions": "urn:hivegate:test:no-such-extension"}
"""A requested extension sends a SendMessage down the SDK's path (the lean path takes none)."""


def _normalized(task: dict[str, Any]) -> dict[str, Any]:
    """``task`` (a JSON task) with its ids, message ids and timestamps replaced by placeholders."""
    text = orjson.dumps(task).decode()
    for value in {task["id"], task["contextId"], *(m["messageId"] for m in task.get("history", []))}:
        text = text.replace(value, "<id>")
    normalized: dict[str, Any] = orjson.loads(text)
    normalized["status"].pop("timestamp", None)
    return normalized


def _send_rpc(
    served: InvokeWorld, agent_id: str, message: dict[str, Any], *, extra: dict[str, str] | None = None, **params: Any
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {served.alice}", **_V1, **(extra or {})}
    body = {"jsonrpc": "2.0", "id": "s-1", "method": "SendMessage", "params": {"message": message, **params}}
    response = httpx.post(f"{served.gateway.url}/{agent_id}/a2a", json=body, headers=headers, timeout=20)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert answer["id"] == "s-1"
    return answer


def test_the_lean_and_the_sdk_path_answer_alike(served: InvokeWorld) -> None:
    """A blocking SendMessage gets the same task from the lean path as from the SDK's handler (ids and
    timestamps aside), and GetTask then returns that task as stored, on either path."""
    answers = []
    for extra in ({}, _SDK_PATH):
        message = _message_body(MESSAGE)["message"]
        task = _send_rpc(served, "echo", message, extra=extra)["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        fetched = _rpc(served, "echo", "GetTask", {"id": task["id"]}, served.alice).json()["result"]
        assert fetched == task
        answers.append(_normalized(task))
    assert answers[0] == answers[1]
    assert answers[0]["artifacts"][0]["parts"] == [{"text": MESSAGE}]


def test_the_lean_path_applies_history_length_to_the_answer_only(served: InvokeWorld) -> None:
    message = _message_body(MESSAGE)["message"]
    task = _send_rpc(served, "echo", message, configuration={"historyLength": 0})["result"]["task"]
    assert "history" not in task
    stored = _rpc(served, "echo", "GetTask", {"id": task["id"]}, served.alice).json()["result"]
    assert [m["messageId"] for m in stored["history"]] == [message["messageId"]]


@pytest.mark.parametrize("extra", [{}, _SDK_PATH], ids=["lean", "sdk"])
@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"role": "ROLE_AGENT"}, "role"),
        ({"parts": [{"text": ""}]}, "empty"),
        ({"contextId": "c" * 37}, "at most"),
    ],
    ids=["agent-role", "empty-text", "long-context-id"],
)
def test_a_message_the_task_cannot_take_is_invalid_params_before_the_call(
    served: InvokeWorld, extra: dict[str, str], change: dict[str, Any], words: str
) -> None:
    """Before: a ROLE_AGENT message was -32603 with the SDK's ValueError text. Now it, an empty text part
    and a contextId the task store cannot hold are -32602 on both paths, before the agent is called
    (the waiter would block the answer for two minutes) and with no task written."""
    text = f"refused-{uuid.uuid4().hex[:8]}"
    message = {**_message_body(text)["message"], **change}
    error = _send_rpc(served, "waiter", message, extra=extra)["error"]  # within 20 s: the waiter would take 120
    assert error["code"] == -32602, error
    assert words in error["message"]
    assert not (served.folder / "marks" / f"started-{text}").exists()
    listed = _rpc(served, "waiter", "ListTasks", {}, served.alice).json()["result"]
    assert text not in orjson.dumps(listed).decode()


async def test_a_lean_task_is_stored_when_it_ends_and_a_dropped_client_cancels_it(served: InvokeWorld) -> None:
    """The lean path stores a task once, when it ends: while the call runs, ListTasks does not show it
    (nobody can know its id before the answer). A client that drops the request cancels the call (the
    backend sees the cancellation) and the task is stored CANCELED."""
    text = f"drop-{uuid.uuid4().hex[:8]}"
    message = _message_body(text)["message"]  # a contextId must name a conversation: a new one is made
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    headers = {"Authorization": f"Bearer {served.alice}", **_V1}

    def in_context() -> list[dict[str, Any]]:
        listed = _rpc(served, "waiter", "ListTasks", {}, served.alice).json()["result"]
        tasks: list[dict[str, Any]] = listed.get("tasks", [])
        return [task for task in tasks if text in orjson.dumps(task).decode()]

    async with httpx.AsyncClient(timeout=30) as http, anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(http.post, f"{served.gateway.url}/waiter/a2a", json=body, headers=headers))
        await wait_for_marker(served.folder / "marks" / f"started-{text}")
        assert in_context() == []
        tg.cancel_scope.cancel()  # the client drops the request
    await wait_for_marker(served.folder / "marks" / f"cancelled-{text}")
    with anyio.fail_after(10):
        while not (tasks := in_context()):  # noqa: ASYNC110  # the gateway's process stores it: nothing to wait on
            await anyio.sleep(0.05)
    assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_CANCELED"]
