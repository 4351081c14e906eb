"""The A2A bindings while the database refuses writes: the plane's error, never the database's name."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from hivegate.a2a.tasks import STORE_UNAVAILABLE_MESSAGE
from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

CONFIG = """
[[agents]]
id = "priv"
name = "Priv"
description = "private"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "bobs"
name = "Bobs"
description = "bob's"
owner = "bob"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "open"
name = "Open"
description = "auth none"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "echo_agent:reply" }
"""


@dataclass(frozen=True)
class Served:
    gateway: GatewayProcess
    alice: str
    bob: str
    db: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("a2a-attack")
    config = folder / "agents.toml"
    config.write_text(CONFIG, encoding="utf-8")
    db = str(folder / "hivegate.db")
    url = f"sqlite+aiosqlite:///{db}"
    examples = (str(ROOT / "examples"),)
    keys = {user: create_user_with_key(url, user, pythonpath=examples) for user in ("alice", "bob")}
    run_cli(url, "agents", "apply", str(config), pythonpath=examples)
    with run_gateway(config, database_url=url, env={"PYTHONPATH": str(ROOT / "examples")}) as running:
        yield Served(running, keys["alice"], keys["bob"], db)


def _headers(key: str | None = None) -> dict[str, str]:
    headers = {"A2A-Version": "1.0"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _send(text: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": text}]}},
    }


def test_a_locked_database_is_the_store_unavailable_message_never_its_url(served: Served) -> None:
    """Found by issue 9's attack trial: with the SQLite file locked by another process, ``SendMessage`` was
    answered -32603 with ``str()`` of the outage — the database URL (on PostgreSQL: host, user, database) —
    and the HTTP+JSON binding a bare 500 "unknown exception". The a2a-sdk dispatchers render whatever a
    task store raises; hivegate's store now raises the SDK's ``InternalError`` with a fixed message
    (A2A 1.0 §3.3.2, -32603 / HTTP 500 ``INTERNAL``), and the gateway keeps serving."""
    release = threading.Event()
    locked = threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(served.db, isolation_level=None, timeout=10)
        conn.execute("BEGIN EXCLUSIVE")
        locked.set()
        release.wait(90)
        conn.execute("ROLLBACK")
        conn.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert locked.wait(15)
    try:
        with httpx.Client(timeout=60) as client:
            rpc = client.post(f"{served.gateway.url}/priv/a2a", json=_send("db"), headers=_headers(served.alice))
            rest = client.post(
                f"{served.gateway.url}/priv/a2a/message:send",
                json=_send("db")["params"],
                headers=_headers(served.alice),
            )
    finally:
        release.set()
        holder.join(15)
    for response in (rpc, rest):
        assert "sqlite" not in response.text, response.text
        assert "database is locked" not in response.text, response.text
        assert STORE_UNAVAILABLE_MESSAGE in response.text, response.text
    assert rpc.json()["error"]["code"] == -32603
    assert rest.status_code == 500
    with httpx.Client(timeout=30) as client:  # the lock is gone: served again
        again = client.post(f"{served.gateway.url}/priv/a2a", json=_send("again"), headers=_headers(served.alice))
    assert again.status_code == 200, again.text
    assert "again" in again.text
