"""A running server's cards follow `hivegate agents apply`: a new skill changes the card and its ETag,
``a2a_enabled = false`` makes it 404, switching it back serves it again (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import httpx

from tests.gateway_process import ROOT, run_gateway

AGENT = """
[[agents]]
id = "payroll"
name = "Payroll"
owner = "alice"
visibility = "public"
a2a_enabled = {enabled}
{extra}
"""
NEW_SKILL = """
[[agents.skills]]
id = "payslip"
name = "Payslip"
tags = ["hr"]
"""
CHANGE_TIMEOUT_SECONDS = 10.0
"""How long the server's registry poll (every 0.1 s here) may take to show an applied change."""


def _write(path: Path, *, enabled: bool = True, extra: str = "") -> Path:
    path.write_text(AGENT.format(enabled=str(enabled).lower(), extra=extra), encoding="utf-8")
    return path


async def _apply(file: Path, database_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = await anyio.run_process(
        [sys.executable, "-m", "hivegate", "agents", "apply", str(file), "--database-url", database_url],
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode() + result.stdout.decode()


async def _card_until(http: httpx.AsyncClient, url: str, status: int, etag_not: str | None = None) -> httpx.Response:
    """GET ``url`` until it answers ``status`` (with an ETag other than ``etag_not``), within the timeout."""
    with anyio.fail_after(CHANGE_TIMEOUT_SECONDS):
        while True:
            response = await http.get(url)
            if response.status_code == status and (etag_not is None or response.headers["etag"] != etag_not):
                return response
            await anyio.sleep(0.05)


async def test_cards_follow_applied_changes(tmp_path: Path, registry_url: str) -> None:
    config = _write(tmp_path / "agents.toml")
    env = {"HIVEGATE_DATABASE__POLL_INTERVAL_SECONDS": "0.1"}
    with run_gateway(config, database_url=registry_url, env=env) as gateway:
        url = f"{gateway.url}/payroll/.well-known/agent-card.json"
        async with httpx.AsyncClient(timeout=10) as http:
            first = await http.get(url)
            assert first.status_code == 200
            assert [skill["id"] for skill in first.json()["skills"]] == ["payroll"]

            await _apply(_write(tmp_path / "skill.toml", extra=NEW_SKILL), registry_url)
            changed = await _card_until(http, url, 200, etag_not=first.headers["etag"])
            assert [skill["id"] for skill in changed.json()["skills"]] == ["payslip"]
            stale = await http.get(url, headers={"If-None-Match": first.headers["etag"]})
            assert stale.status_code == 200

            await _apply(_write(tmp_path / "off.toml", enabled=False, extra=NEW_SKILL), registry_url)
            gone = await _card_until(http, url, 404)
            assert gone.json()["error"]["details"][0]["metadata"]["code"] == "agent_not_found"

            await _apply(_write(tmp_path / "on.toml", extra=NEW_SKILL), registry_url)
            back = await _card_until(http, url, 200)
            assert back.headers["etag"] == changed.headers["etag"]
