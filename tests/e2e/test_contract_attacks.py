"""Attacks on the call contract (issue 10 items 1, 2, 5) that found bugs: each test fails until its bug is fixed.

A real gateway on SQLite (PostgreSQL for the one test that needs it, skipped without
``HIVEGATE_TEST_POSTGRES_URL``), seeded with alice and bob as in ``test_call_contract.py``; its agents run
:data:`~tests.e2e.contract_agent.CONTRACT_AGENT`. Every wait is bounded.

1. ``/api/v1/conversations`` page parameters that ``str.isdigit`` accepts but ``int`` does not (``²``,
   more than 4,300 digits) are a bare 500, not 400 ``invalid_params`` (``rest/conversations.py``
   ``_int_param``).
2. A forged ``cursor`` whose time cannot be converted to UTC (``9999-12-31T23:59:59-14:00``) is 503
   ``store_unavailable`` (the bind fails in the driver), not 400 ``invalid_cursor``.
3. A keyed call whose record cannot be written (the database locked after the agent replied) gets its
   reply, and then its claim is *released* (``contract.py`` ``_invoke``'s ``finally``: ``if not stored:
   await _release(...)``), so a retry with the same key runs the backend again at once; docs/calls.md
   ("When the database fails") says the claim stays ``running`` until stale.
4. PostgreSQL: one user's message with a NUL character (which ``text`` cannot hold) fails the whole
   group-committed batch, so other users' records written with it are lost, and their keys then run
   again (3); a NUL in a key or context_id is 503 ``store_unavailable`` instead of 400.
5. A2A ``SendStreamingMessage`` (the SDK path) hashes a keyed call's payload without its ``contextId``
   (the executor passes ``new_context=True``): the same message, key and conversation sent then over REST
   is 409 ``conflict``, and the same key with another ``contextId`` on the SDK path replays instead of 409.
"""

from __future__ import annotations

import base64
import secrets
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import POSTGRES_ENV, postgres_url
from tests.e2e.contract_agent import CONTRACT_AGENT, calls_of, release
from tests.e2e.test_call_contract import _create_database, _drop_database, _seed
from tests.gateway_process import GatewayProcess, run_gateway

CONFIG = """
[[agents]]
id = "ctr"
name = "Contract"
owner = "alice"
backend = { type = "python", callable = "contract_agent:reply" }

[[agents]]
id = "bobctr"
name = "Bob's contract"
owner = "bob"
backend = { type = "python", callable = "contract_agent:reply" }

[[agents]]
id = "quick"
name = "Quick"
owner = "alice"
invoke_timeout_seconds = 5
backend = { type = "python", callable = "contract_agent:reply" }
"""

TIMEOUT = 60
STATEMENT_TIMEOUT = 3
"""The SQLite busy timeout of the gateway (seconds): how long a write waits on a locked database."""


class AttackWorld:
    """alice and bob, the agents of :data:`CONFIG`, a gateway on ``database_url``."""

    def __init__(self, folder: Path, database_url: str) -> None:
        self.folder = folder
        self.database_url = database_url
        (folder / "marks").mkdir()
        (folder / "contract_agent.py").write_text(CONTRACT_AGENT, encoding="utf-8")
        self.config = folder / "agents.toml"
        self.config.write_text(CONFIG, encoding="utf-8")
        self.alice, self.bob = anyio.run(_seed, database_url)
        self._stack = ExitStack()
        env = {
            "PYTHONPATH": str(folder),
            "HIVEGATE_DATABASE__STATEMENT_TIMEOUT_SECONDS": str(STATEMENT_TIMEOUT),
        }
        self.gateway: GatewayProcess = self._stack.enter_context(
            run_gateway(self.config, database_url=database_url, env=env)
        )
        self.url = self.gateway.url

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AttackWorld]:
    folder = tmp_path_factory.mktemp("contract-attacks")
    made = AttackWorld(folder, f"sqlite+aiosqlite:///{folder / 'hivegate.db'}")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def pg_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AttackWorld]:
    server = postgres_url()
    if server is None:
        pytest.skip(f"PostgreSQL runs need {POSTGRES_ENV} (e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test)")
    name = f"hivegate_attacks_{secrets.token_hex(4)}"
    anyio.run(_create_database, server, name)
    try:
        url = make_url(server).set(database=name).render_as_string(hide_password=False)
        made = AttackWorld(tmp_path_factory.mktemp("contract-attacks-pg"), url)
        try:
            yield made
        finally:
            made.close()
    finally:
        anyio.run(_drop_database, server, name)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _rest_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    body: dict[str, Any] = response.json()
    assert body["success"] is False, body
    assert body["error"]["code"] == code, body
    return body


async def _invoke(
    http: httpx.AsyncClient, world: AttackWorld, agent: str, token: str, body: dict[str, Any]
) -> httpx.Response:
    return await http.post(f"{world.url}/{agent}/v1/invoke", json=body, headers=_bearer(token))


async def _wait_for_calls(world: AttackWorld, message: str, count: int, seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        while len(calls_of(world.folder, message)) < count:  # noqa: ASYNC110  # the gateway's process writes it
            await anyio.sleep(0.02)


# -- 1. page parameters -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("", "limit=%C2%B2"),  # "²": isdigit() but not int()
        ("", "limit=" + "9" * 5000),  # beyond int()'s 4,300 digits
        ("/{id}/messages", "after=%C2%B2"),
        ("/{id}/messages", "limit=%C2%B9"),
        ("/{id}/messages", "after=" + "9" * 5000),
    ],
    ids=[
        "list-limit-superscript",
        "list-limit-5000-digits",
        "after-superscript",
        "messages-limit-superscript",
        "after-5000-digits",
    ],
)
async def test_conversation_page_parameters_that_int_refuses_are_invalid_params(
    world: AttackWorld, path: str, query: str
) -> None:
    """Got: a bare ``500 Internal Server Error`` (text/plain) and a traceback in the log."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        created = await _invoke(http, world, "ctr", world.alice, {"message": _unique("pages")})
        context_id = created.json()["context_id"]
        url = f"{world.url}/api/v1/conversations{path.format(id=context_id)}?{query}"
        response = await http.get(url, headers=_bearer(world.alice))
    _rest_error(response, 400, "invalid_params")


# -- 2. a forged cursor -----------------------------------------------------------------------------------


@pytest.mark.parametrize("moment", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
async def test_a_forged_cursor_beyond_the_datetime_range_is_invalid_cursor(world: AttackWorld, moment: str) -> None:
    """Got: 503 ``store_unavailable`` ("the gateway's database is unavailable"): the OverflowError of the
    bind is taken for a database failure."""
    cursor = base64.urlsafe_b64encode(orjson.dumps([moment, "x"])).decode("ascii").rstrip("=")
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await http.get(
            f"{world.url}/api/v1/conversations", params={"cursor": cursor}, headers=_bearer(world.alice)
        )
    _rest_error(response, 400, "invalid_cursor")


# -- 3. a record that could not be written ----------------------------------------------------------------


async def test_a_key_whose_record_was_not_written_is_not_released_to_run_again(world: AttackWorld) -> None:
    """A keyed call runs; the database is locked before the agent replies, so the record fails after the
    busy timeout; the lock goes while the claim's release waits. The caller gets its reply (documented).
    A retry with the same key must not invoke the backend again (docs/calls.md: the claim stays
    ``running`` until stale; the retry waits for it and gets 504). Got: the retry runs the backend twice."""
    message = _unique("hold:record-lost")
    key = str(uuid.uuid4())
    database = world.database_url.removeprefix("sqlite+aiosqlite:///")
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        answers: list[httpx.Response] = []

        async def first() -> None:
            answers.append(
                await _invoke(http, world, "quick", world.alice, {"message": message, "idempotency_key": key})
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await _wait_for_calls(world, message, 1)
            lock = sqlite3.connect(database, timeout=5, isolation_level=None)
            try:
                lock.execute("BEGIN EXCLUSIVE")
                release(world.folder, message)
                await anyio.to_thread.run_sync(
                    world.gateway.wait_for, "the call's record was not stored", STATEMENT_TIMEOUT + 10
                )
            finally:
                lock.rollback()
                lock.close()
        assert answers[0].status_code == 200, answers[0].text
        assert len(calls_of(world.folder, message)) == 1
        retry = await _invoke(http, world, "quick", world.alice, {"message": message, "idempotency_key": key})
    runs = calls_of(world.folder, message)
    assert len(runs) == 1, f"the key's backend ran {len(runs)} times (retry answered {retry.status_code})"
    _rest_error(retry, 504, "service_timeout")


# -- 4. PostgreSQL: NUL characters ------------------------------------------------------------------------


@pytest.mark.postgres
async def test_one_users_nul_character_does_not_lose_another_users_records(pg_world: AttackWorld) -> None:
    """alice sends messages with a NUL character while bob makes keyed calls. Got: some of bob's batches
    fail with alice's, his records are lost (their keys released), and his retries run his backend again."""
    world = pg_world
    calls = [(_unique("bob-keyed"), str(uuid.uuid4())) for _ in range(60)]
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(timeout=TIMEOUT, limits=limits) as http:
        statuses: list[int] = []

        async def bob(message: str, key: str) -> None:
            response = await _invoke(http, world, "bobctr", world.bob, {"message": message, "idempotency_key": key})
            statuses.append(response.status_code)

        async def alice(n: int) -> None:
            await _invoke(http, world, "ctr", world.alice, {"message": f"poison {n} \u0000"})

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                for n, (message, key) in enumerate(calls):
                    tg.start_soon(bob, message, key)
                    tg.start_soon(alice, n)
        assert statuses == [200] * len(calls)
        for message, key in calls:
            response = await _invoke(http, world, "bobctr", world.bob, {"message": message, "idempotency_key": key})
            assert response.status_code == 200, response.text
        reran = [message for message, _ in calls if len(calls_of(world.folder, message)) > 1]
    assert reran == [], f"{len(reran)} of bob's keys ran his backend twice"


@pytest.mark.postgres
@pytest.mark.parametrize("field", ["idempotency_key", "context_id"])
async def test_a_nul_character_in_a_key_or_context_id_is_invalid_params(pg_world: AttackWorld, field: str) -> None:
    """Got: 503 ``store_unavailable`` (the database refused the value), logged as a database outage."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await _invoke(http, pg_world, "ctr", pg_world.alice, {"message": _unique("nul"), field: "a\u0000b"})
    _rest_error(response, 400, "invalid_params")


# -- 5. the A2A SDK path's fingerprint --------------------------------------------------------------------


async def _stream(http: httpx.AsyncClient, world: AttackWorld, text: str, context_id: str, key: str) -> str:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "contextId": context_id,
        "metadata": {"idempotency_key": key},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}
    headers = {**_bearer(world.alice), "A2A-Version": "1.0", "Accept": "text/event-stream"}
    response = await http.post(f"{world.url}/ctr/a2a", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert "TASK_STATE_COMPLETED" in response.text, response.text
    return response.text


async def test_a_streamed_a2a_message_has_the_fingerprint_of_the_same_message_on_rest(world: AttackWorld) -> None:
    """``SendStreamingMessage`` with a key in conversation C, then the same message, key and ``context_id``
    on REST invoke: a replay (contract.py ``fingerprint``: one message has one fingerprint on every plane).
    Got: 409 ``conflict``."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        created = await _invoke(http, world, "ctr", world.alice, {"message": _unique("conversation")})
        context_id = created.json()["context_id"]
        text, key = _unique("streamed"), str(uuid.uuid4())
        await _stream(http, world, text, context_id, key)
        again = await _invoke(
            http, world, "ctr", world.alice, {"message": text, "idempotency_key": key, "context_id": context_id}
        )
    assert again.status_code == 200, again.text
    assert len(calls_of(world.folder, text)) == 1


async def test_a_key_reused_in_another_conversation_on_the_a2a_sdk_path_is_a_conflict(world: AttackWorld) -> None:
    """One key, one message, two of alice's conversations, both on ``SendStreamingMessage``: the second
    names another conversation, so its payload differs (as on the lean path and REST: 409 ``conflict``).
    Got: the second replays the first call's reply into the other conversation."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        first = (await _invoke(http, world, "ctr", world.alice, {"message": _unique("c1")})).json()["context_id"]
        second = (await _invoke(http, world, "ctr", world.alice, {"message": _unique("c2")})).json()["context_id"]
        text, key = _unique("reused"), str(uuid.uuid4())
        await _stream(http, world, text, first, key)
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            "contextId": second,
            "metadata": {"idempotency_key": key},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}
        headers = {**_bearer(world.alice), "A2A-Version": "1.0", "Accept": "text/event-stream"}
        response = await http.post(f"{world.url}/ctr/a2a", json=body, headers=headers)
    assert "conflict" in response.text, response.text
