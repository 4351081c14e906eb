"""Issue 11 item 1: agents that front remote A2A agents (``backend = { type = "a2a", card_url = … }``).

Real processes on loopback: the test upstream (``tests/upstreams/a2a_upstream.py``, an a2a-sdk server;
one streaming with a request log, one blocking that demands its own bearer token) and ``hivegate serve``
on SQLite. The callers are the official MCP client, the a2a-sdk client on hivegate's own A2A surface,
raw JSON-RPC and REST; ``hivegate agents import-a2a`` makes an agent from the upstream's card.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from collections.abc import AsyncGenerator, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import GatewayProcess, run_gateway
from tests.upstreams.running import Upstream, run_upstream

UPSTREAM_TOKEN = "upstream-secret-7f3a"
TIMEOUT = 60
MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "a2a-backend-tests", "version": "0"},
}


@dataclass
class World:
    gateway: GatewayProcess
    streaming: Upstream
    guarded: Upstream
    alice: str
    bob: str
    database_url: str
    folder: Path

    @property
    def url(self) -> str:
        return self.gateway.url


def _agents(streaming: Upstream, guarded: Upstream, closed_port: int) -> str:
    card = "/agent/.well-known/agent-card.json"
    elsewhere = streaming.url.replace("127.0.0.1", "localhost")  # the same server, another origin
    return f"""
[[agents]]
id = "remote"
name = "Remote"
owner = "alice"
backend = {{ type = "a2a", card_url = "{streaming.url}{card}" }}

[[agents]]
id = "remote-quick"
name = "Remote, 3 s deadline"
owner = "alice"
invoke_timeout_seconds = 3
backend = {{ type = "a2a", card_url = "{streaming.url}/agent" }}  # the base URL: the card's well-known path

[[agents]]
id = "remote-small"
name = "Remote, 64 KiB results"
owner = "alice"
backend = {{ type = "a2a", card_url = "{streaming.url}{card}", max_result_bytes = 65536 }}

[[agents]]
id = "remote-guarded"
name = "Remote with its own token"
owner = "alice"
backend = {{ type = "a2a", card_url = "{guarded.url}{card}", bearer_env = "UPSTREAM_TOKEN" }}

[[agents]]
id = "remote-unpaid"
name = "Remote without its token"
owner = "alice"
backend = {{ type = "a2a", card_url = "{guarded.url}{card}", headers = {{ "X-Note" = "no token" }} }}

[[agents]]
id = "remote-elsewhere"
name = "Remote whose card names another origin"
owner = "alice"
backend = {{ type = "a2a", card_url = "{elsewhere}{card}", bearer_env = "UPSTREAM_TOKEN" }}

[[agents]]
id = "remote-allowed"
name = "Remote whose card names another origin, allowed"
owner = "alice"
backend = {{ type = "a2a", card_url = "{elsewhere}{card}", bearer_env = "UPSTREAM_TOKEN", allowed_origins = [
    "{streaming.url}",
] }}

[[agents]]
id = "remote-open"
name = "Remote for anyone"
owner = "alice"
auth = "none"
backend = {{ type = "a2a", card_url = "{streaming.url}{card}" }}

[[agents]]
id = "remote-gone"
name = "Remote that is not there"
owner = "alice"
backend = {{ type = "a2a", card_url = "http://127.0.0.1:{closed_port}{card}", timeout_seconds = 5 }}
"""


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens there


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("a2a-backend")
    url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    with ExitStack() as stack:
        streaming = stack.enter_context(run_upstream(log=folder / "streaming.jsonl"))
        guarded = stack.enter_context(
            run_upstream("--no-streaming", "--require-bearer", UPSTREAM_TOKEN, log=folder / "guarded.jsonl")
        )
        config = folder / "agents.toml"
        config.write_text(_agents(streaming, guarded, _closed_port()), encoding="utf-8")
        alice = create_user_with_key(url, "alice")
        bob = create_user_with_key(url, "bob")
        run_cli(url, "agents", "apply", str(config))
        gateway = stack.enter_context(run_gateway(None, database_url=url, env={"UPSTREAM_TOKEN": UPSTREAM_TOKEN}))
        yield World(gateway, streaming, guarded, alice, bob, url, folder)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def mcp_client(world: World, agent: str, key: str, mode: str = MODERN) -> AsyncGenerator[McpClient]:
    async with (
        httpx2.AsyncClient(headers=_bearer(key), timeout=TIMEOUT) as http,
        McpClient(streamable_http_client(f"{world.url}/{agent}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


@asynccontextmanager
async def a2a_client(world: World, agent: str, key: str, *, streaming: bool) -> AsyncGenerator[Client]:
    async with httpx.AsyncClient(headers=_bearer(key), timeout=TIMEOUT) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=["JSONRPC"])
        client = await create_client(f"{world.url}/{agent}", client_config=config)
        try:
            yield client
        finally:
            await client.close()


def mcp_call(world: World, agent: str, key: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A raw 2026-07-28 ``tools/call`` of the agent's message tool; the JSON-RPC answer."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": agent,
        **_bearer(key),
    }
    params = {"name": agent, "arguments": arguments, "_meta": ENVELOPE}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    response = httpx.post(f"{world.url}/{agent}/mcp", json=body, headers=headers, timeout=TIMEOUT)
    assert "Traceback" not in response.text, response.text
    answer: dict[str, Any] = response.json()
    return answer


def reply_of(answer: dict[str, Any]) -> tuple[str, str]:
    result = answer.get("result")
    assert result is not None, answer
    assert result["isError"] is False, result
    return result["content"][0]["text"], result["_meta"]["context_id"]


def _request(text: str, context_id: str = "") -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), context_id=context_id, parts=[Part(text=text)])
    return SendMessageRequest(message=message)


async def test_the_official_mcp_client_calls_a_remote_agent_in_both_eras(world: World) -> None:
    for mode in (MODERN, "legacy"):
        async with mcp_client(world, "remote", world.alice, mode) as client:
            tools = await client.list_tools()
            assert [tool.name for tool in tools.tools] == ["remote"]
            with anyio.fail_after(TIMEOUT):
                result = await client.call_tool("remote", {"message": f"echo hello from {mode}"})
            assert result.is_error is False, result
            block = result.content[0]
            assert isinstance(block, TextContent)
            assert block.text == f"hello from {mode}"  # the streamed chunks, whole


async def test_the_a2a_sdk_client_reaches_it_through_hivegates_a2a_surface(world: World) -> None:
    for streaming in (False, True):
        async with a2a_client(world, "remote", world.alice, streaming=streaming) as client:
            texts: list[str] = []
            final = None
            with anyio.fail_after(TIMEOUT):
                async for event in client.send_message(_request("echo one two three")):
                    kind = event.WhichOneof("payload")
                    if kind == "task":
                        final = event.task
                    elif kind == "artifact_update":
                        texts.extend(p.text for p in event.artifact_update.artifact.parts)
                    elif kind == "status_update" and event.status_update.status.state == TaskState.TASK_STATE_COMPLETED:
                        final = final or True
            assert final is not None
            if streaming:  # the upstream's chunks as artifact updates, then the whole reply (lastChunk)
                assert texts == ["one ", "two ", "three", "one two three"], texts
            else:
                assert not isinstance(final, bool)
                assert final.status.state == TaskState.TASK_STATE_COMPLETED
                assert "".join(p.text for a in final.artifacts for p in a.parts) == "one two three"


async def test_a_conversation_continues_upstream_across_mcp_and_a2a(world: World) -> None:
    first, context_id = reply_of(mcp_call(world, "remote", world.alice, {"message": "context"}))
    assert first == f"context={context_id} turns=0"
    second, same = reply_of(mcp_call(world, "remote", world.alice, {"message": "context", "context_id": context_id}))
    assert same == context_id
    assert second == f"context={context_id} turns=1"
    async with a2a_client(world, "remote", world.alice, streaming=False) as client:
        with anyio.fail_after(TIMEOUT):
            events = [event async for event in client.send_message(_request("context", context_id))]
    task = events[-1].task
    assert task.context_id == context_id
    assert "".join(p.text for a in task.artifacts for p in a.parts) == f"context={context_id} turns=2"
    # Bob cannot continue Alice's conversation, upstream or not.
    refused = mcp_call(world, "remote", world.bob, {"message": "context", "context_id": context_id})
    assert "error" in refused or refused["result"]["isError"] is True


def test_the_upstream_gets_the_agents_own_token_never_the_callers(world: World) -> None:
    reply, _ = reply_of(mcp_call(world, "remote-guarded", world.alice, {"message": "auth"}))
    assert reply == f"Bearer {UPSTREAM_TOKEN}"
    unpaid = mcp_call(world, "remote-unpaid", world.alice, {"message": "auth"})
    assert unpaid["error"]["data"]["code"] == "agent_service_unavailable", unpaid
    assert UPSTREAM_TOKEN not in json.dumps(unpaid)
    logged = "\n".join(
        path.read_text("utf-8")
        for path in (world.folder / "streaming.jsonl", world.folder / "guarded.jsonl")
        if path.exists()
    )
    assert world.alice not in logged
    assert world.bob not in logged


def test_a_card_cannot_send_the_gateway_to_another_origin(world: World) -> None:
    """The card at ``localhost`` names its interfaces at ``127.0.0.1``, another origin (RFC 6454): they are
    not used (a card could name an internal address), unless the agent allows that origin, and only
    then does the agent's token go there."""
    refused = mcp_call(world, "remote-elsewhere", world.alice, {"message": "auth"})
    assert refused["error"]["data"]["code"] == "agent_service_unavailable", refused
    assert "names no interface on http://localhost" in world.gateway.output()
    reply, _ = reply_of(mcp_call(world, "remote-allowed", world.alice, {"message": "auth"}))
    assert reply == f"Bearer {UPSTREAM_TOKEN}"


def test_anonymous_callers_share_no_upstream_context_or_waiting_task(world: World) -> None:
    """Found by the attack trial: an anonymous caller's ``contextId`` is only a label it chose, so it is
    not the upstream's context, and a question one anonymous caller left cannot be answered by another."""

    def send(text: str, context_id: str) -> dict[str, Any]:
        message = {
            "role": "ROLE_USER",
            "messageId": str(uuid.uuid4()),
            "contextId": context_id,
            "parts": [{"text": text}],
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        response = httpx.post(
            f"{world.url}/remote-open/a2a", json=body, headers={"A2A-Version": "1.0"}, timeout=TIMEOUT
        )
        assert response.status_code == 200, response.text
        task: dict[str, Any] = response.json()["result"]["task"]
        return task

    def text_of(task: dict[str, Any]) -> str:
        return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])

    asked = send("ask", "support-1")
    assert text_of(asked) == "what is your name?"
    answered = send("name Mallory", "support-1")  # another anonymous caller, the same label
    assert text_of(answered) == "name Mallory"  # a new upstream task (the echo), not the victim's
    entries = [json.loads(line) for line in (world.folder / "streaming.jsonl").read_text("utf-8").splitlines()]
    sent = [e for e in entries if e["text"] in ("ask", "name Mallory")]
    assert sent
    assert all(e["context_id"] != "support-1" for e in sent)


def test_an_upstream_failure_is_the_agents_failure(world: World) -> None:
    answer = mcp_call(world, "remote", world.alice, {"message": "fail"})
    result = answer["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "upstream failure"


def test_input_required_is_answered_by_the_next_call_of_the_conversation(world: World) -> None:
    question, context_id = reply_of(mcp_call(world, "remote", world.alice, {"message": "ask"}))
    assert question == "what is your name?"
    answer, _ = reply_of(mcp_call(world, "remote", world.alice, {"message": "name Bob", "context_id": context_id}))
    assert answer == "hello Bob"


def test_data_and_file_parts_reach_mcp_callers_as_structured_content_and_resources(world: World) -> None:
    """Spec: MCP 2025-11-25 server/tools#structured-content (the JSON also in a text block) and
    #embedded-resources; the reply text keeps the data's JSON and the file's one-line description."""
    answer = mcp_call(world, "remote", world.alice, {"message": "data"})
    data, _ = reply_of(answer)
    lines = data.split("\n")
    assert json.loads(lines[0]) == {"answer": 42, "items": ["a", "b"]}  # 42.0: protobuf's numbers are doubles
    assert lines[1] == "see data"
    assert answer["result"]["structuredContent"]["data"] == [{"answer": 42, "items": ["a", "b"]}]
    answer = mcp_call(world, "remote", world.alice, {"message": "file"})
    file, _ = reply_of(answer)
    assert "[file u.pdf (application/pdf), 17 bytes]" in file
    blocks = answer["result"]["content"]
    assert [block["type"] for block in blocks] == ["text", "resource"], blocks
    resource = blocks[1]["resource"]
    assert resource["mimeType"] == "application/pdf"
    assert base64.b64decode(resource["blob"]) == b"%PDF-1.4 upstream"
    assert resource["uri"].startswith("hivegate:reply/")
    assert resource["uri"].endswith("/u.pdf")


async def test_data_and_file_parts_pass_through_hivegates_a2a_surface_unchanged(world: World) -> None:
    for streaming in (False, True):
        async with a2a_client(world, "remote", world.alice, streaming=streaming) as client:
            for command in ("data", "file"):
                final = None
                with anyio.fail_after(TIMEOUT):
                    async for event in client.send_message(_request(command)):
                        kind = event.WhichOneof("payload")
                        if kind == "task":
                            final = event.task
                        elif kind == "artifact_update" and event.artifact_update.last_chunk:
                            final = event.artifact_update.artifact
                assert final is not None
                parts = list(final.artifacts[0].parts) if isinstance(final, Task) else list(final.parts)
                kinds = [part.WhichOneof("content") for part in parts]
                if command == "data":
                    assert kinds == ["data", "text"], parts
                    assert MessageToDict(parts[0].data) == {"answer": 42, "items": ["a", "b"]}
                    assert parts[1].text == "see data"
                else:
                    assert kinds == ["raw", "text"], parts
                    assert parts[0].raw == b"%PDF-1.4 upstream"
                    assert (parts[0].filename, parts[0].media_type) == ("u.pdf", "application/pdf")
                    assert parts[1].text == "see file"


def test_an_attachment_reaches_the_upstream_byte_identical(world: World) -> None:
    content = os.urandom(50_000)
    upload = httpx.post(
        f"{world.url}/api/v1/files",
        params={"filename": "blob.bin"},
        content=content,
        headers={**_bearer(world.alice), "Content-Type": "application/octet-stream"},
        timeout=TIMEOUT,
    )
    assert upload.status_code == 201, upload.text
    file_id = upload.json()["file_id"]
    listed, _ = reply_of(
        mcp_call(world, "remote", world.alice, {"message": "attachments", "attachments": [{"file_id": file_id}]})
    )
    assert listed == f"blob.bin|application/octet-stream|{hashlib.sha256(content).hexdigest()}|{len(content)}"


def test_a_call_past_its_deadline_is_service_timeout_and_cancels_the_upstream_task(world: World) -> None:
    answer = mcp_call(world, "remote-quick", world.alice, {"message": "slow 30"})
    assert answer["error"]["code"] == -32003, answer
    # The gateway sends CancelTask (and the upstream logs its executor's cancel) before it answers.
    log = world.folder / "streaming.jsonl"
    entries = [json.loads(line) for line in log.read_text("utf-8").splitlines()]
    slow = [e for e in entries if e["method"] == "execute" and e["text"] == "slow 30"]
    assert slow
    cancels = [e for e in entries if e["method"] == "cancel" and e["task_id"] == slow[-1]["task_id"]]
    assert cancels, entries[-5:]


def test_a_result_past_the_limit_is_cut_off_and_the_gateway_goes_on(world: World) -> None:
    answer = mcp_call(world, "remote-small", world.alice, {"message": "big 2000000"})
    assert answer["error"]["data"]["code"] == "agent_service_unavailable", answer
    reply, _ = reply_of(mcp_call(world, "remote-small", world.alice, {"message": "echo still here"}))
    assert reply == "still here"


def test_an_unreachable_upstream_is_agent_service_unavailable(world: World) -> None:
    answer = mcp_call(world, "remote-gone", world.alice, {"message": "echo hi"})
    assert answer["error"]["data"]["code"] == "agent_service_unavailable", answer
    assert "127.0.0.1" not in answer["error"]["message"]
    rest = httpx.post(
        f"{world.url}/remote-gone/v1/invoke", json={"message": "hi"}, headers=_bearer(world.alice), timeout=TIMEOUT
    )
    assert rest.status_code == 503, rest.text
    assert rest.json()["error"]["code"] == "agent_service_unavailable"


def test_import_a2a_makes_an_agent_from_the_card_and_refreshes_it(world: World) -> None:
    made = run_cli(
        world.database_url,
        "agents",
        "import-a2a",
        f"{world.streaming.url}/agent",
        "--owner",
        "alice",
        "--id",
        "imported",
    )
    assert "created" in made, made
    listed = run_cli(world.database_url, "agents", "list")
    assert "imported" in listed
    assert "a2a http://127.0.0.1" in listed
    again = run_cli(world.database_url, "agents", "import-a2a", f"{world.streaming.url}/agent", "--id", "imported")
    assert "unchanged" in again, again
    reply, _ = reply_of(mcp_call(world, "imported", world.alice, {"message": "echo imported"}))
    assert reply == "imported"
    card = httpx.get(
        f"{world.url}/imported/.well-known/agent-card.json", headers=_bearer(world.alice), timeout=TIMEOUT
    ).json()
    assert card["name"] == "Upstream"
    assert card["version"] == "1.2.3"
    assert [skill["id"] for skill in card["skills"]] == ["echo", "shout"]


async def test_a_working_status_message_is_progress_not_reply_on_every_plane(world: World) -> None:
    """A2A 1.0 §4.1.3 (TaskStatus.message) → MCP progress (basic/utilities/progress), an A2A ``working``
    status on hivegate's own stream, a REST ``status`` frame; the reply stays ``found it``."""
    notes: list[str | None] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message)

    async with mcp_client(world, "remote", world.alice) as client:
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool("remote", {"message": "status"}, progress_callback=progress)
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert block.text == "found it", result
    assert "looking it up" in notes, notes
    async with a2a_client(world, "remote", world.alice, streaming=True) as client:
        statuses: list[str] = []
        with anyio.fail_after(TIMEOUT):
            async for event in client.send_message(_request("status")):
                if event.WhichOneof("payload") == "status_update":
                    status = event.status_update.status
                    if status.state == TaskState.TASK_STATE_WORKING and status.HasField("message"):
                        statuses.append("".join(p.text for p in status.message.parts))
    assert statuses == ["looking it up"], statuses
    headers = {**_bearer(world.alice), "Accept": "text/event-stream"}
    with httpx.stream(
        "POST", f"{world.url}/remote/v1/invoke", json={"message": "status"}, headers=headers, timeout=TIMEOUT
    ) as response:
        frames = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    assert {"type": "status", "text": "looking it up"} in frames, frames
    assert frames[-1]["type"] == "done", frames
    assert frames[-1]["text"] == "found it", frames
