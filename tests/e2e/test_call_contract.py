"""The call contract on a real server (issue 10 items 1, 2 and 5): conversations and idempotency keys on every plane.

One gateway per database kind (SQLite always; PostgreSQL for the key-concurrency and conversation tests
when ``HIVEGATE_TEST_POSTGRES_URL`` is set, else those runs are skipped, naming the variable), its
registry seeded by the store itself with two users, alice and bob, each with an ``oag_`` key. Agents, all running
:data:`~tests.e2e.contract_agent.CONTRACT_AGENT` (it records each run in a marker file, holds a
``hold:`` message until the test releases it, and replies with the call's ``context_id`` and the
earlier turns it read): alice's ``ctr`` and ``ctr2``, bob's ``bobctr``, alice's ``openctr``
(``auth = "none"``).

Planes: MCP ``tools/call`` (the official client in both eras, and raw 2026-07-28 JSON-RPC), A2A
``SendMessage`` (JSON-RPC, ``A2A-Version: 1.0``, the lean path), REST ``POST /{agent}/v1/invoke``, and
``/api/v1/conversations``. Every wait is bounded; the tests poll marker files, never sleep.

Spec: ``src/hivegate/calls/contract.py`` (the rules); MCP 2026-07-28 server/tools; A2A 1.0 §3.1.1.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
import httpx2
import orjson
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.auth.passwords import hash_password
from hivegate.storage import open_storage
from tests.conftest import POSTGRES_ENV, postgres_url
from tests.e2e.contract_agent import CONTRACT_AGENT, calls_of, parse_reply, release
from tests.e2e.registry_seed import add_key
from tests.gateway_process import GatewayProcess, run_gateway

CONFIG = """
[[agents]]
id = "ctr"
name = "Contract"
owner = "alice"
backend = { type = "python", callable = "contract_agent:reply" }

[[agents]]
id = "ctr2"
name = "Contract two"
owner = "alice"
backend = { type = "python", callable = "contract_agent:reply" }

[[agents]]
id = "bobctr"
name = "Bob's contract"
owner = "bob"
backend = { type = "python", callable = "contract_agent:reply" }

[[agents]]
id = "openctr"
name = "Open contract"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "contract_agent:reply" }
"""

MODERN = "2026-07-28"
TIMEOUT = 60
CONCURRENT = 10
INVALID_PARAMS = -32602
A2A_V1 = {"A2A-Version": "1.0"}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "call-contract-tests", "version": "0"},
}
"""The 2026-07-28 per-request ``_meta`` envelope of a raw request (SEP-2575)."""

JsonObject = dict[str, Any]


# -- the served world -----------------------------------------------------------------------------------


class ContractWorld:
    """A seeded registry (alice, bob, the agents of :data:`CONFIG`) and the gateway serving it.

    Args:
        folder: holds ``contract_agent.py``, its ``marks`` and ``agents.toml``.
        database_url: the registry.
    """

    def __init__(self, folder: Path, database_url: str) -> None:
        self.folder = folder
        self.database_url = database_url
        (folder / "marks").mkdir()
        (folder / "contract_agent.py").write_text(CONTRACT_AGENT, encoding="utf-8")
        self.config = folder / "agents.toml"
        self.config.write_text(CONFIG, encoding="utf-8")
        self.alice, self.bob = anyio.run(_seed, database_url)
        self._stack = ExitStack()
        self.gateway = self._start()

    def _start(self) -> GatewayProcess:
        self._stack = ExitStack()
        env = {"PYTHONPATH": str(self.folder)}
        return self._stack.enter_context(run_gateway(self.config, database_url=self.database_url, env=env))

    @property
    def url(self) -> str:
        """The running gateway's base URL (a restart changes it)."""
        return self.gateway.url

    def restart(self) -> None:
        """Stop the gateway and start a new one on the same registry."""
        self._stack.close()
        self.gateway = self._start()

    def close(self) -> None:
        """Stop the gateway."""
        self._stack.close()


async def _seed(database_url: str) -> tuple[str, str]:
    """Users alice and bob with an ``oag_`` key each, written by the store itself; the two keys."""
    storage = await open_storage(database_url)
    store = storage.credentials
    try:
        keys: list[str] = []
        for username in ("alice", "bob"):
            user = await store.create_user(username, hash_password(f"{username}'s password"))
            keys.append(await add_key(store, user.id))
        return keys[0], keys[1]
    finally:
        await storage.close()


async def _create_database(server: str, name: str) -> None:
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        await admin.dispose()


async def _drop_database(server: str, name: str) -> None:
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


class Worlds:
    """The module's worlds, made on first use (one per database kind) and closed at the module's end."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._factory = tmp_path_factory
        self._made: dict[str, ContractWorld] = {}
        self._cleanup = ExitStack()

    def get(self, kind: str) -> ContractWorld:
        """The world on ``kind`` (``sqlite`` or ``postgresql``); a PostgreSQL one gets a database of its own."""
        if kind not in self._made:
            folder = self._factory.mktemp(f"contract-{kind}")
            if kind == "sqlite":
                database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
            else:
                server = postgres_url()
                assert server is not None
                name = f"hivegate_contract_{secrets.token_hex(4)}"
                anyio.run(_create_database, server, name)
                self._cleanup.callback(anyio.run, _drop_database, server, name)
                database_url = make_url(server).set(database=name).render_as_string(hide_password=False)
            world = ContractWorld(folder, database_url)
            self._cleanup.callback(world.close)
            self._made[kind] = world
        return self._made[kind]

    def close(self) -> None:
        """Stop every gateway, then drop the PostgreSQL databases."""
        self._cleanup.close()


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worlds]:
    made = Worlds(tmp_path_factory)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def world(worlds: Worlds) -> ContractWorld:
    """The SQLite world."""
    return worlds.get("sqlite")


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_world(request: pytest.FixtureRequest, worlds: Worlds) -> ContractWorld:
    """The SQLite world, then the PostgreSQL one (skipped without ``HIVEGATE_TEST_POSTGRES_URL``)."""
    kind: str = request.param
    if kind == "postgresql" and postgres_url() is None:
        pytest.skip(f"PostgreSQL runs need {POSTGRES_ENV} (e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test)")
    return worlds.get(kind)


# -- the planes -----------------------------------------------------------------------------------------


def _bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _rpc_message(response: httpx.Response) -> JsonObject:
    """The JSON-RPC answer in a response: a JSON body, or the last answer event of an SSE body.

    An error may come with a 4xx status (the 2026-07-28 transport maps some error codes to one)."""
    assert "Traceback" not in response.text, response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [
            orjson.loads(line[5:])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
        answers = [event for event in events if "result" in event or "error" in event]
        assert answers, response.text
        return cast(JsonObject, answers[-1])
    answer = cast(JsonObject, response.json())
    assert response.status_code == 200 or "error" in answer, response.text
    return answer


async def mcp_call(
    http: httpx.AsyncClient,
    world: ContractWorld,
    agent: str,
    token: str | None,
    arguments: JsonObject,
    *,
    meta: JsonObject | None = None,
) -> JsonObject:
    """A raw 2026-07-28 ``tools/call`` of ``agent``'s message tool; the JSON-RPC answer."""
    params: JsonObject = {"name": agent, "arguments": arguments, "_meta": {**ENVELOPE, **(meta or {})}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": agent,
        **_bearer(token),
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return _rpc_message(await http.post(f"{world.url}/{agent}/mcp", json=body, headers=headers))


async def mcp_list_tools(http: httpx.AsyncClient, world: ContractWorld, agent: str, token: str) -> JsonObject:
    """A raw 2026-07-28 ``tools/list`` of ``agent``; the JSON-RPC answer."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
        **_bearer(token),
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    return _rpc_message(await http.post(f"{world.url}/{agent}/mcp", json=body, headers=headers))


def mcp_result(answer: JsonObject) -> tuple[str, str, bool]:
    """A successful ``tools/call`` answer's (reply text, context_id, replayed), checked for its shape."""
    assert "result" in answer, answer
    result: JsonObject = answer["result"]
    assert result["isError"] is False, result
    reply: str = result["content"][0]["text"]
    context_id: str = result["_meta"]["context_id"]
    assert result["structuredContent"] == {"reply": reply, "context_id": context_id}
    return reply, context_id, result["_meta"].get("idempotency_replayed", False)


def mcp_error(answer: JsonObject) -> JsonObject:
    """A ``tools/call`` answer's JSON-RPC error object."""
    assert "error" in answer, answer
    return cast(JsonObject, answer["error"])


@asynccontextmanager
async def mcp_client(
    world: ContractWorld, agent: str, token: str, mode: str, on_request: Callable[[httpx2.Request], None] | None = None
) -> AsyncGenerator[McpClient]:
    """The official MCP client on ``agent``'s endpoint in ``mode`` (``legacy``: the handshake era)."""

    async def hook(request: httpx2.Request) -> None:
        if on_request is not None:
            on_request(request)

    async with (
        httpx2.AsyncClient(headers=_bearer(token), timeout=TIMEOUT, event_hooks={"request": [hook]}) as http,
        McpClient(streamable_http_client(f"{world.url}/{agent}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def client_result(result: CallToolResult) -> tuple[str, str, bool]:
    """An official client's ``CallToolResult``: (reply text, context_id, replayed), checked for its shape."""
    assert result.is_error is False, result
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert result.meta is not None
    context_id: str = result.meta["context_id"]
    assert result.structured_content == {"reply": block.text, "context_id": context_id}
    return block.text, context_id, bool(result.meta.get("idempotency_replayed", False))


async def a2a_send(
    http: httpx.AsyncClient,
    world: ContractWorld,
    agent: str,
    token: str | None,
    message_text: str,
    *,
    context_id: Any = None,
    metadata: JsonObject | None = None,
) -> JsonObject:
    """A blocking A2A ``SendMessage`` (JSON-RPC, 1.0; the lean path); the JSON-RPC answer."""
    message: JsonObject = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": message_text}]}
    if context_id is not None:
        message["contextId"] = context_id
    if metadata is not None:
        message["metadata"] = metadata
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    response = await http.post(f"{world.url}/{agent}/a2a", json=body, headers={**A2A_V1, **_bearer(token)})
    return _rpc_message(response)


def a2a_task(answer: JsonObject) -> tuple[str, str, str]:
    """A completed task's (reply text, contextId, task id)."""
    assert "result" in answer, answer
    task: JsonObject = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return task["artifacts"][0]["parts"][0]["text"], task["contextId"], task["id"]


async def rest_invoke(
    http: httpx.AsyncClient, world: ContractWorld, agent: str, token: str | None, body: JsonObject
) -> httpx.Response:
    """``POST /{agent}/v1/invoke`` with ``body``."""
    return await http.post(f"{world.url}/{agent}/v1/invoke", json=body, headers=_bearer(token))


def rest_reply(response: httpx.Response) -> tuple[str, str]:
    """A successful invoke's (reply text, context_id)."""
    assert response.status_code == 200, response.text
    body: JsonObject = response.json()
    assert body["is_error"] is False, body
    return body["text"], body["context_id"]


def rest_error(response: httpx.Response, status: int, code: str) -> JsonObject:
    """The REST error envelope's ``error``, checked for its status and code."""
    assert response.status_code == status, response.text
    body: JsonObject = response.json()
    assert body["success"] is False, body
    assert body["error"]["code"] == code, body
    return cast(JsonObject, body["error"])


async def wait_for_calls(world: ContractWorld, message: str, count: int, seconds: float = 30) -> None:
    """Poll until the backend ran ``count`` times for ``message``; fail after ``seconds``."""
    with anyio.fail_after(seconds):
        while len(calls_of(world.folder, message)) < count:  # noqa: ASYNC110  # the gateway's process writes it
            await anyio.sleep(0.02)


def _earlier(reply: str) -> list[list[str]]:
    return cast(list[list[str]], parse_reply(reply)["earlier"])


# -- 1. one key, ten concurrent calls: one run ----------------------------------------------------------

Answer = tuple[str, str, str | None, bool]
"""What one call returned: reply text, context_id, A2A task id (else None), replayed (MCP only)."""


async def _ten_at_once(
    world: ContractWorld, message: str, call: Callable[[], Awaitable[Answer]], sent: Callable[[], int]
) -> list[Answer]:
    """Start :data:`CONCURRENT` calls at once; release the held backend once the first runs and every
    request is on the wire (``sent`` counts them); their answers."""
    answers: list[Answer] = []

    async def one() -> None:
        answers.append(await call())

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            for _ in range(CONCURRENT):
                tg.start_soon(one)
            await wait_for_calls(world, message, 1)
            while sent() < CONCURRENT:  # noqa: ASYNC110  # the clients' hooks count the requests they send
                await anyio.sleep(0.02)
            assert answers == []  # nothing answers while the one run is held
            release(world.folder, message)
    return answers


def _check_one_run(world: ContractWorld, message: str, answers: list[Answer]) -> None:
    assert len(answers) == CONCURRENT
    runs = calls_of(world.folder, message)
    assert len(runs) == 1, runs
    assert len({(text, context_id) for text, context_id, _, _ in answers}) == 1, answers
    task_ids = [task_id for _, _, task_id, _ in answers]
    assert len(set(task_ids)) == 1, f"the answers carry {len(set(task_ids))} task ids: {task_ids}"
    text, context_id, _, _ = answers[0]
    reply = parse_reply(text)
    assert (reply["message"], reply["context_id"]) == (message, context_id)
    assert runs[0][1] == context_id


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_ten_concurrent_mcp_calls_with_one_key_run_once(any_world: ContractWorld, mode: str) -> None:
    """Ten ``tools/call`` with one ``idempotency_key`` at once, from the official client (one session in
    the handshake era): the backend runs once; all ten get its reply and conversation, nine marked replayed.
    A later call replays it; the key with another message is the client's MCPError ``conflict``."""
    world = any_world
    message = _unique(f"hold:mcp-{mode}")
    key = str(uuid.uuid4())
    sent: list[httpx2.Request] = []

    def count(request: httpx2.Request) -> None:
        if request.method == "POST" and b'"tools/call"' in request.content:
            sent.append(request)

    async with mcp_client(world, "ctr", world.alice, mode, count) as client:
        await client.list_tools()

        async def call() -> Answer:
            result = await client.call_tool("ctr", {"message": message, "idempotency_key": key})
            text, context_id, replayed = client_result(result)
            return text, context_id, None, replayed

        answers = await _ten_at_once(world, message, call, lambda: len(sent))
        _check_one_run(world, message, answers)
        assert sorted(replayed for *_, replayed in answers) == [False] + [True] * (CONCURRENT - 1)
        again = client_result(await client.call_tool("ctr", {"message": message, "idempotency_key": key}))
        changed = f"{message}-changed"
        with pytest.raises(MCPError) as caught:
            await client.call_tool("ctr", {"message": changed, "idempotency_key": key})
    assert (caught.value.code, caught.value.data["code"]) == (INVALID_PARAMS, "conflict")
    assert again == (answers[0][0], answers[0][1], True)
    assert len(calls_of(world.folder, message)) == 1
    assert calls_of(world.folder, changed) == []


async def test_ten_concurrent_a2a_messages_with_one_key_run_once(any_world: ContractWorld) -> None:
    """Ten ``SendMessage`` with one ``metadata.idempotency_key`` at once: the backend runs once and all ten
    answers are the first call's task (one task id, one contextId, one reply)."""
    world = any_world
    message = _unique("hold:a2a")
    key = str(uuid.uuid4())
    sent: list[httpx.Request] = []

    async def count(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(timeout=TIMEOUT, event_hooks={"request": [count]}) as http:

        async def call() -> Answer:
            answer = await a2a_send(http, world, "ctr", world.alice, message, metadata={"idempotency_key": key})
            text, context_id, task_id = a2a_task(answer)
            return text, context_id, task_id, False

        answers = await _ten_at_once(world, message, call, lambda: len(sent))
        _check_one_run(world, message, answers)
        again = a2a_task(await a2a_send(http, world, "ctr", world.alice, message, metadata={"idempotency_key": key}))
    assert again == answers[0][:3]
    assert len(calls_of(world.folder, message)) == 1


async def test_ten_concurrent_rest_invokes_with_one_key_run_once(any_world: ContractWorld) -> None:
    """Ten ``POST /ctr/v1/invoke`` with one ``idempotency_key`` at once: one run, one reply, one context_id."""
    world = any_world
    message = _unique("hold:rest")
    key = str(uuid.uuid4())
    sent: list[httpx.Request] = []

    async def count(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(timeout=TIMEOUT, event_hooks={"request": [count]}) as http:

        async def call() -> Answer:
            response = await rest_invoke(http, world, "ctr", world.alice, {"message": message, "idempotency_key": key})
            text, context_id = rest_reply(response)
            return text, context_id, None, False

        answers = await _ten_at_once(world, message, call, lambda: len(sent))
        _check_one_run(world, message, answers)
        again = await rest_invoke(http, world, "ctr", world.alice, {"message": message, "idempotency_key": key})
    assert rest_reply(again) == answers[0][:2]
    assert len(calls_of(world.folder, message)) == 1


# -- 2. a replay after a restart ------------------------------------------------------------------------


async def test_a_replay_after_a_restart_returns_the_stored_result(world: ContractWorld) -> None:
    """Calls with keys on MCP, A2A and REST; the gateway stops and a new process starts on the same
    SQLite file; each key's replay returns the stored result (A2A: the same task) without a run."""
    mcp_message, a2a_message, rest_message = _unique("restart-mcp"), _unique("restart-a2a"), _unique("restart-rest")
    mcp_key, a2a_key, rest_key = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())

    async def send_all() -> tuple[tuple[str, str, bool], tuple[str, str, str], tuple[str, str]]:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            mcp = mcp_result(
                await mcp_call(http, world, "ctr", world.alice, {"message": mcp_message, "idempotency_key": mcp_key})
            )
            a2a = a2a_task(
                await a2a_send(http, world, "ctr", world.alice, a2a_message, metadata={"idempotency_key": a2a_key})
            )
            body = {"message": rest_message, "idempotency_key": rest_key}
            rest = rest_reply(await rest_invoke(http, world, "ctr", world.alice, body))
        return mcp, a2a, rest

    first_mcp, first_a2a, first_rest = await send_all()
    assert first_mcp[2] is False
    world.restart()
    again_mcp, again_a2a, again_rest = await send_all()
    assert again_mcp == (first_mcp[0], first_mcp[1], True)
    assert again_a2a == first_a2a
    assert again_rest == first_rest
    for message in (mcp_message, a2a_message, rest_message):
        assert len(calls_of(world.folder, message)) == 1, message


# -- 3. the same key with another payload ---------------------------------------------------------------


async def test_the_same_key_with_another_payload_is_a_conflict(world: ContractWorld) -> None:
    """A key used again with another message (or, on MCP, another named conversation) is refused:
    MCP and A2A -32602 with ``data.code`` ``conflict``, REST 409 ``conflict``; nothing runs."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        key = str(uuid.uuid4())
        first, changed = _unique("conflict-mcp"), _unique("conflict-mcp-changed")
        _, context_id, _ = mcp_result(await mcp_call(http, world, "ctr", world.alice, {"message": first}))
        mcp_result(await mcp_call(http, world, "ctr", world.alice, {"message": first, "idempotency_key": key}))
        error = mcp_error(await mcp_call(http, world, "ctr", world.alice, {"message": changed, "idempotency_key": key}))
        assert (error["code"], error["data"]["code"]) == (INVALID_PARAMS, "conflict"), error
        named = {"message": first, "idempotency_key": key, "context_id": context_id}
        error = mcp_error(await mcp_call(http, world, "ctr", world.alice, named))
        assert (error["code"], error["data"]["code"]) == (INVALID_PARAMS, "conflict"), error
        assert calls_of(world.folder, changed) == []
        assert len(calls_of(world.folder, first)) == 2  # the call without a key, and the key's

        key = str(uuid.uuid4())
        first, changed = _unique("conflict-a2a"), _unique("conflict-a2a-changed")
        a2a_task(await a2a_send(http, world, "ctr", world.alice, first, metadata={"idempotency_key": key}))
        answer = await a2a_send(http, world, "ctr", world.alice, changed, metadata={"idempotency_key": key})
        error = mcp_error(answer)
        assert error["code"] == INVALID_PARAMS, error
        assert "conflict" in orjson.dumps(error.get("data")).decode(), error
        assert calls_of(world.folder, changed) == []

        key = str(uuid.uuid4())
        first, changed = _unique("conflict-rest"), _unique("conflict-rest-changed")
        rest_reply(await rest_invoke(http, world, "ctr", world.alice, {"message": first, "idempotency_key": key}))
        response = await rest_invoke(http, world, "ctr", world.alice, {"message": changed, "idempotency_key": key})
        rest_error(response, 409, "conflict")
        assert calls_of(world.folder, changed) == []


async def test_a_key_is_one_across_planes(world: ContractWorld) -> None:
    """One message sent with one key over MCP (the key in ``params._meta``), then over REST and A2A,
    runs once: the later planes replay the MCP call's reply and conversation."""
    message = _unique("planes")
    key = str(uuid.uuid4())
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        answer = await mcp_call(http, world, "ctr", world.alice, {"message": message}, meta={"idempotency_key": key})
        reply, context_id, _ = mcp_result(answer)
        again = mcp_result(
            await mcp_call(http, world, "ctr", world.alice, {"message": message, "idempotency_key": key})
        )
        assert again == (reply, context_id, True)
        body = {"message": message, "idempotency_key": key}
        assert rest_reply(await rest_invoke(http, world, "ctr", world.alice, body)) == (reply, context_id)
        a2a = a2a_task(await a2a_send(http, world, "ctr", world.alice, message, metadata={"idempotency_key": key}))
        assert a2a[:2] == (reply, context_id)
    assert len(calls_of(world.folder, message)) == 1


# -- 4. keys are per user and agent ---------------------------------------------------------------------


async def test_keys_are_per_user_and_agent(world: ContractWorld) -> None:
    """One key used by alice on ``ctr`` and ``ctr2`` and by bob on ``bobctr``: three independent calls,
    each run once; bob's other message under it is his conflict, not alice's."""
    message = _unique("per-user")
    key = str(uuid.uuid4())
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        arguments = {"message": message, "idempotency_key": key}
        alice = mcp_result(await mcp_call(http, world, "ctr", world.alice, arguments))
        bob = mcp_result(await mcp_call(http, world, "bobctr", world.bob, arguments))
        alice2 = mcp_result(await mcp_call(http, world, "ctr2", world.alice, arguments))
        assert [replayed for *_, replayed in (alice, bob, alice2)] == [False, False, False]
        assert len({alice[1], bob[1], alice2[1]}) == 3
        assert sorted(agent for agent, _ in calls_of(world.folder, message)) == ["bobctr", "ctr", "ctr2"]
        other = _unique("per-user-bob")
        error = mcp_error(await mcp_call(http, world, "bobctr", world.bob, {"message": other, "idempotency_key": key}))
        assert error["data"]["code"] == "conflict", error
        assert mcp_result(await mcp_call(http, world, "ctr", world.alice, arguments)) == (alice[0], alice[1], True)
        bob_rest = await rest_invoke(http, world, "bobctr", world.bob, arguments)
        assert rest_reply(bob_rest) == bob[:2]
    assert len(calls_of(world.folder, message)) == 3
    assert calls_of(world.folder, other) == []


# -- 5. one conversation across the planes --------------------------------------------------------------


async def test_a_conversation_continues_across_mcp_a2a_and_rest(any_world: ContractWorld) -> None:
    """The first MCP call starts a conversation and returns its context_id; an A2A message with that
    ``contextId``, a REST invoke and an MCP call with it reach the backend in that conversation, and
    the backend reads the earlier turns of every plane."""
    world = any_world
    m1, m2, m3, m4 = (_unique(f"turn{n}") for n in range(1, 5))
    async with mcp_client(world, "ctr", world.alice, MODERN) as client:
        r1, context_id, _ = client_result(await client.call_tool("ctr", {"message": m1}))
        assert _earlier(r1) == []
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            r2, task_context, _ = a2a_task(await a2a_send(http, world, "ctr", world.alice, m2, context_id=context_id))
            assert task_context == context_id
            assert _earlier(r2) == [["user", m1], ["agent", r1]]
            r3, rest_context = rest_reply(
                await rest_invoke(http, world, "ctr", world.alice, {"message": m3, "context_id": context_id})
            )
            assert rest_context == context_id
            assert _earlier(r3) == [["user", m1], ["agent", r1], ["user", m2], ["agent", r2]]
        r4, again, _ = client_result(await client.call_tool("ctr", {"message": m4, "context_id": context_id}))
    assert again == context_id
    assert _earlier(r4) == [["user", m1], ["agent", r1], ["user", m2], ["agent", r2], ["user", m3], ["agent", r3]]
    for message, reply in ((m1, r1), (m2, r2), (m3, r3), (m4, r4)):
        assert parse_reply(reply)["context_id"] == context_id
        assert calls_of(world.folder, message) == [("ctr", context_id)]


async def test_a_session_is_one_conversation_and_a_stateless_call_starts_one(any_world: ContractWorld) -> None:
    """Handshake era: two calls in one session without a context_id share the session's conversation
    (the second sees the first). 2026-07-28: each call without one starts a new conversation."""
    world = any_world
    m1, m2, m3, m4 = (_unique(f"session{n}") for n in range(1, 5))
    async with mcp_client(world, "ctr", world.alice, "legacy") as client:
        r1, first, _ = client_result(await client.call_tool("ctr", {"message": m1}))
        r2, second, _ = client_result(await client.call_tool("ctr", {"message": m2}))
    assert second == first
    assert _earlier(r2) == [["user", m1], ["agent", r1]]
    async with mcp_client(world, "ctr", world.alice, MODERN) as client:
        r3, third, _ = client_result(await client.call_tool("ctr", {"message": m3}))
        r4, fourth, _ = client_result(await client.call_tool("ctr", {"message": m4}))
    assert len({first, third, fourth}) == 3
    assert _earlier(r3) == _earlier(r4) == []


# -- 6. someone else's context_id -----------------------------------------------------------------------


async def test_someone_elses_context_id_is_refused_like_an_unknown_one(world: ContractWorld) -> None:
    """bob names alice's conversation (on his agent), alice names hers on another of her agents, and both
    name an id that exists nowhere: each is ``invalid_params`` with one and the same text on MCP, A2A and
    REST, so nothing tells whether the id exists; nothing runs."""
    unknown = str(uuid.uuid4())
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        _, alices, _ = mcp_result(await mcp_call(http, world, "ctr", world.alice, {"message": _unique("mine")}))
        attempts = [("bobctr", world.bob, alices), ("bobctr", world.bob, unknown), ("ctr2", world.alice, alices)]
        mcp_texts: set[str] = set()
        a2a_texts: set[str] = set()
        rest_texts: set[str] = set()
        for agent, token, context_id in attempts:
            message = _unique(f"foreign-{agent}")
            error = mcp_error(await mcp_call(http, world, agent, token, {"message": message, "context_id": context_id}))
            assert (error["code"], error["data"]["param"]) == (INVALID_PARAMS, "context_id"), error
            mcp_texts.add(error["message"])
            error = mcp_error(await a2a_send(http, world, agent, token, message, context_id=context_id))
            assert error["code"] == INVALID_PARAMS, error
            a2a_texts.add(error["message"])
            response = await rest_invoke(http, world, agent, token, {"message": message, "context_id": context_id})
            rest_texts.add(rest_error(response, 400, "invalid_params")["message"])
            assert calls_of(world.folder, message) == [], (agent, context_id)
    assert len(mcp_texts) == len(a2a_texts) == len(rest_texts) == 1, (mcp_texts, a2a_texts, rest_texts)
    assert mcp_texts == a2a_texts == rest_texts


# -- 7. /api/v1/conversations ---------------------------------------------------------------------------


async def test_conversations_are_listed_read_and_deleted_by_their_owner_only(world: ContractWorld) -> None:
    """alice lists her conversation and reads its turns in order; bob does not see it (not listed, 404
    on it and its messages, 404 deleting it); alice deletes it (204) and its context_id is then
    ``invalid_params`` with nothing run."""
    base = f"{world.url}/api/v1/conversations"
    m1, m2, m3 = _unique("listed1"), _unique("listed2"), _unique("listed3")
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        r1, context_id = rest_reply(await rest_invoke(http, world, "ctr", world.alice, {"message": m1}))
        r2, _ = rest_reply(
            await rest_invoke(http, world, "ctr", world.alice, {"message": m2, "context_id": context_id})
        )
        alice, bob = _bearer(world.alice), _bearer(world.bob)
        listed = await http.get(base, params={"agent_id": "ctr", "limit": 200}, headers=alice)
        assert listed.status_code == 200, listed.text
        mine = [c for c in listed.json()["conversations"] if c["conversation_id"] == context_id]
        assert [(c["agent_id"], c["turn_count"]) for c in mine] == [("ctr", 4)]
        one = await http.get(f"{base}/{context_id}", headers=alice)
        assert (one.status_code, one.json()["conversation_id"]) == (200, context_id)
        messages = await http.get(f"{base}/{context_id}/messages", headers=alice)
        assert messages.status_code == 200, messages.text
        turns = [(m["role"], m["text"], m["is_error"]) for m in messages.json()["messages"]]
        assert turns == [("user", m1, False), ("agent", r1, False), ("user", m2, False), ("agent", r2, False)]

        bobs = await http.get(base, params={"limit": 200}, headers=bob)
        assert bobs.status_code == 200, bobs.text
        assert context_id not in [c["conversation_id"] for c in bobs.json()["conversations"]]
        for response in (
            await http.get(f"{base}/{context_id}", headers=bob),
            await http.get(f"{base}/{context_id}/messages", headers=bob),
            await http.delete(f"{base}/{context_id}", headers=bob),
        ):
            rest_error(response, 404, "not_found")
        assert (await http.get(f"{base}/{context_id}", headers=alice)).status_code == 200

        deleted = await http.delete(f"{base}/{context_id}", headers=alice)
        assert deleted.status_code == 204, deleted.text
        rest_error(await http.get(f"{base}/{context_id}", headers=alice), 404, "not_found")
        relisted = await http.get(base, params={"agent_id": "ctr", "limit": 200}, headers=alice)
        assert context_id not in [c["conversation_id"] for c in relisted.json()["conversations"]]
        response = await rest_invoke(http, world, "ctr", world.alice, {"message": m3, "context_id": context_id})
        rest_error(response, 400, "invalid_params")
        error = mcp_error(await mcp_call(http, world, "ctr", world.alice, {"message": m3, "context_id": context_id}))
        assert error["code"] == INVALID_PARAMS, error
    assert calls_of(world.folder, m3) == []


# -- 8. bad input and the advertised schema -------------------------------------------------------------

LONG_KEY = "k" * 256


async def test_the_message_tool_advertises_the_contract(world: ContractWorld) -> None:
    """``tools/list``: the message tool's inputSchema has ``message`` (required), ``context_id``,
    ``idempotency_key`` and ``attachments``."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        answer = await mcp_list_tools(http, world, "ctr", world.alice)
    tools: list[JsonObject] = answer["result"]["tools"]
    schema: JsonObject = next(tool for tool in tools if tool["name"] == "ctr")["inputSchema"]
    assert set(schema["properties"]) == {"message", "context_id", "idempotency_key", "attachments"}
    assert schema["required"] == ["message"]
    assert schema["properties"]["idempotency_key"]["maxLength"] == 255
    assert schema["properties"]["context_id"]["type"] == "string"


BAD_MCP_ARGUMENTS: list[tuple[JsonObject, str]] = [
    ({"message": ""}, "message"),
    ({"message": "   "}, "message"),
    ({"context_id": 5}, "context_id"),
    ({"context_id": ""}, "context_id"),
    ({"idempotency_key": LONG_KEY}, "idempotency_key"),
    ({"idempotency_key": 7}, "idempotency_key"),
    ({"idempotency_key": ""}, "idempotency_key"),
    ({"idempotency_key": ["a"]}, "idempotency_key"),
]


@pytest.mark.parametrize(
    ("change", "param"),
    BAD_MCP_ARGUMENTS,
    ids=[
        "empty-message",
        "blank-message",
        "int-context",
        "empty-context",
        "long-key",
        "int-key",
        "empty-key",
        "list-key",
    ],
)
async def test_bad_mcp_arguments_are_an_error_result_and_nothing_runs(
    world: ContractWorld, change: JsonObject, param: str
) -> None:
    """An empty message, a context_id that is no string, a key of 256 characters or of another type: an
    ``isError`` result naming the argument; the backend does not run."""
    message = _unique("bad-mcp")
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        answer = await mcp_call(http, world, "ctr", world.alice, {"message": message, **change})
    result: JsonObject = answer["result"]
    assert result["isError"] is True, result
    assert f"'{param}'" in result["content"][0]["text"], result
    assert calls_of(world.folder, message) == []
    assert calls_of(world.folder, str(change.get("message", message))) == []


BAD_REST_BODIES: list[tuple[JsonObject, str]] = [
    ({"message": ""}, "message"),
    ({"context_id": 5}, "context_id"),
    ({"idempotency_key": LONG_KEY}, "idempotency_key"),
    ({"idempotency_key": 7}, "idempotency_key"),
]


@pytest.mark.parametrize(
    ("change", "param"), BAD_REST_BODIES, ids=["empty-message", "int-context", "long-key", "int-key"]
)
async def test_bad_rest_bodies_are_invalid_params_and_nothing_runs(
    world: ContractWorld, change: JsonObject, param: str
) -> None:
    """The same bad input on REST invoke: 400 ``invalid_params`` naming the field; the backend does not run."""
    message = _unique("bad-rest")
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await rest_invoke(http, world, "ctr", world.alice, {"message": message, **change})
    assert rest_error(response, 400, "invalid_params")["param"] == param
    assert calls_of(world.folder, message) == []


BAD_A2A_MESSAGES: list[tuple[JsonObject, str]] = [
    ({"metadata": {"idempotency_key": LONG_KEY}}, "idempotency_key"),
    ({"metadata": {"idempotency_key": 7}}, "idempotency_key"),
    ({"metadata": {"idempotency_key": ""}}, "idempotency_key"),
    ({"contextId": 5}, "contextId"),
    ({"parts": [{"text": ""}]}, "empty"),
]


@pytest.mark.parametrize(
    ("change", "words"), BAD_A2A_MESSAGES, ids=["long-key", "int-key", "empty-key", "int-context", "empty-text"]
)
async def test_bad_a2a_messages_are_invalid_params_and_nothing_runs(
    world: ContractWorld, change: JsonObject, words: str
) -> None:
    """A bad key in ``metadata``, a ``contextId`` that is no string, an empty text part: -32602 naming it;
    the backend does not run."""
    message = _unique("bad-a2a")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": message}], **change}
        },
    }
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await http.post(f"{world.url}/ctr/a2a", json=body, headers={**A2A_V1, **_bearer(world.alice)})
    error = mcp_error(_rpc_message(response))
    assert error["code"] == INVALID_PARAMS, error
    assert words in orjson.dumps(error).decode(), error
    assert calls_of(world.folder, message) == []


# -- 9. anonymous callers -------------------------------------------------------------------------------


async def test_an_anonymous_call_works_and_its_idempotency_key_is_invalid_params(world: ContractWorld) -> None:
    """On an ``auth = "none"`` agent a call works on every plane (no conversation is kept: the backend
    reads no earlier turns); an ``idempotency_key`` is refused with ``invalid_params`` (a retry could not
    be made safe), and so is a ``context_id`` naming a conversation; nothing runs for those."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        message = _unique("anonymous")
        answer = await mcp_call(http, world, "openctr", None, {"message": message})
        result: JsonObject = answer["result"]
        assert result["isError"] is False, result
        reply = parse_reply(result["content"][0]["text"])
        assert (reply["message"], reply["earlier"]) == (message, [])
        rest_text, _ = rest_reply(await rest_invoke(http, world, "openctr", None, {"message": message}))
        assert parse_reply(rest_text)["earlier"] == []
        a2a_text, a2a_context, _ = a2a_task(await a2a_send(http, world, "openctr", None, message))
        assert parse_reply(a2a_text)["context_id"] == a2a_context
        assert len(calls_of(world.folder, message)) == 3

        keyed = _unique("anonymous-keyed")
        error = mcp_error(
            await mcp_call(http, world, "openctr", None, {"message": keyed, "idempotency_key": str(uuid.uuid4())})
        )
        assert (error["code"], error["data"]["param"]) == (INVALID_PARAMS, "idempotency_key"), error
        response = await rest_invoke(http, world, "openctr", None, {"message": keyed, "idempotency_key": "k1"})
        rest_error(response, 400, "invalid_params")
        answer = await a2a_send(http, world, "openctr", None, keyed, metadata={"idempotency_key": "k1"})
        assert mcp_error(answer)["code"] == INVALID_PARAMS
        error = mcp_error(
            await mcp_call(http, world, "openctr", None, {"message": keyed, "context_id": str(uuid.uuid4())})
        )
        assert (error["code"], error["data"]["param"]) == (INVALID_PARAMS, "context_id"), error
    assert calls_of(world.folder, keyed) == []
