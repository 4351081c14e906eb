"""``hivegate grants list|revoke`` as the real command line, on grants written to a SQLite file by the store."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import anyio

from hivegate.auth.passwords import hash_password
from hivegate.storage import open_storage
from hivegate.storage.oauth import GrantRecord
from tests.cli.command_line import run_cli


def _cli(database_url: str, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    return run_cli(database_url, "grants", *args, expect=expect)


async def _seed(database_url: str) -> None:
    storage = await open_storage(database_url)
    credentials = storage.credentials
    oauth = storage.oauth
    try:
        alice = await credentials.create_user("alice", hash_password("pw"))
        bob = await credentials.create_user("bob", hash_password("pw"))
        for grant_id, user_id, agents in (
            ("grt_alice1", alice.id, ("alpha", "gamma")),
            ("grt_bob1", bob.id, ("beta",)),
        ):
            await oauth.create_grant(
                GrantRecord(
                    id=grant_id,
                    user_id=user_id,
                    client_id="cli_123",
                    client_name="Claude Desktop",
                    agents=agents,
                    scopes=tuple(f"agent:{a}" for a in agents),
                    resource=None,
                    created_at=datetime.now(UTC),
                )
            )
    finally:
        await storage.close()


async def _grant(database_url: str, grant_id: str) -> GrantRecord | None:
    storage = await open_storage(database_url)
    oauth = storage.oauth
    try:
        return await oauth.get_grant(grant_id)
    finally:
        await storage.close()


def test_grants_list_and_revoke(tmp_path: Path) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hivegate.db'}"
    anyio.run(_seed, database_url)

    listed = _cli(database_url, "list").stdout
    assert re.search(r"grt_alice1\s.*alice\s.*Claude Desktop.*alpha gamma", listed)
    assert re.search(r"grt_bob1\s.*bob\s.*beta", listed)
    only_alice = _cli(database_url, "list", "--user", "ALICE").stdout
    assert "grt_alice1" in only_alice
    assert "grt_bob1" not in only_alice

    assert "revoked grt_alice1" in _cli(database_url, "revoke", "grt_alice1").stdout
    assert "already revoked" in _cli(database_url, "revoke", "grt_alice1").stdout
    revoked = anyio.run(_grant, database_url, "grt_alice1")
    assert revoked is not None
    assert revoked.revoked_at is not None
    untouched = anyio.run(_grant, database_url, "grt_bob1")
    assert untouched is not None
    assert untouched.active

    assert "grt_alice1" not in _cli(database_url, "list").stdout  # revoked ones only with --all
    assert re.search(r"grt_alice1\s.*\d{4}-\d\d-\d\dT.*\d{4}-\d\d-\d\dT", _cli(database_url, "list", "--all").stdout)
    assert "no grant" in _cli(database_url, "revoke", "grt_missing", expect=1).stderr
    assert "no user" in _cli(database_url, "list", "--user", "nobody", expect=1).stderr
