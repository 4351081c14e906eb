"""A gateway killed (SIGKILL) while A2A tasks run or right after it answered: restarted on the same
SQLite file, it shows every task it answered and none half-made. The lean path of a blocking
``SendMessage`` (``docs/a2a.md``) saves a task once, when it ends, so a call cut off by the kill
leaves no task (the SDK path left one WORKING for ever); an answered task was committed before the
answer (``database.sqlite_synchronous = "normal"``: WAL, durable through a killed process)."""

from __future__ import annotations

import contextlib
import signal
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.e2e.marker_agent import WAITER_AGENT, wait_for_marker
from tests.e2e.registry_cli import run_cli
from tests.gateway_process import ROOT, run_gateway

CONFIG = """
[[agents]]
id = "echo"
name = "Echo"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "waiter"
name = "Waiter"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "waiter_agent:reply" }
"""

_V1 = {"A2A-Version": "1.0"}


def _send_body(text: str) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def _listed(http: httpx.AsyncClient, url: str, agent_id: str) -> list[dict[str, Any]]:
    """Every task of the (anonymous, loopback) caller on ``agent_id``: each agent gets one message here."""
    body = {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {"includeArtifacts": True}}
    response = await http.post(f"{url}/{agent_id}/a2a", json=body, headers=_V1)
    assert response.status_code == 200, response.text
    tasks: list[dict[str, Any]] = response.json()["result"].get("tasks", [])
    return tasks


async def _send_until_killed(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(httpx.TransportError):  # the gateway is killed under this request
        await http.post(url, json=body, headers=_V1)


async def test_a_killed_gateway_keeps_answered_tasks_and_leaves_no_half_made_one(tmp_path: Path) -> None:
    (tmp_path / "marks").mkdir()
    (tmp_path / "waiter_agent.py").write_text(WAITER_AGENT, encoding="utf-8")
    config = tmp_path / "agents.toml"
    config.write_text(CONFIG, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hivegate.db'}"
    env = {"PYTHONPATH": f"{ROOT / 'examples'}:{tmp_path}"}
    await anyio.to_thread.run_sync(
        lambda: run_cli(database_url, "users", "create", "alice", "--password-stdin", stdin="alice's password\n")
    )
    text = f"killed-{uuid.uuid4().hex[:8]}"
    with run_gateway(config, database_url=database_url, env=env) as gateway:
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(f"{gateway.url}/echo/a2a", json=_send_body("kept"), headers=_V1)
        answered = answer.json()["result"]["task"]
        async with httpx.AsyncClient(timeout=30) as http, anyio.create_task_group() as tg:
            tg.start_soon(_send_until_killed, http, f"{gateway.url}/waiter/a2a", _send_body(text))
            await wait_for_marker(tmp_path / "marks" / f"started-{text}", 20)
            gateway.process.send_signal(signal.SIGKILL)
            with anyio.fail_after(20):
                assert await anyio.to_thread.run_sync(gateway.process.wait) == -signal.SIGKILL
            tg.cancel_scope.cancel()
    with run_gateway(config, database_url=database_url, env=env) as restarted:
        async with httpx.AsyncClient(timeout=30) as http:
            kept = await _listed(http, restarted.url, "echo")
            assert await _listed(http, restarted.url, "waiter") == []
        assert [t["id"] for t in kept] == [answered["id"]]
        assert kept[0]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert kept[0]["artifacts"][0]["parts"][0]["text"] == "kept"
