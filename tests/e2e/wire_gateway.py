"""A real hivegate server on SQLite for the wire tests: open agents, keyed agents and the keys to call them.

Agents (the example modules in ``examples/``):

- ``echo`` (``auth = "none"``, a callable: plain requests take the lean paths);
- ``notes`` (``auth = "none"``, an SDK server backend: requests take the SDK transport);
- ``conformance`` (``auth = "none"``, the conformance fixture agent, an SDK server);
- ``keyed`` (credentials required, a callable) and ``keyed-notes`` (credentials required, an
  SDK server), both owned by ``alice``.

Keys, written to the server's database after it started: ``oag`` (alice's user key),
``bak`` (bound to ``keyed``) and ``bak_notes`` (bound to ``keyed-notes``).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from hivegate.auth.passwords import hash_password
from hivegate.storage import open_storage
from tests.e2e.registry_seed import add_key
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

__all__ = ["WireWorld", "wire_gateway"]

AGENTS = """
[[agents]]
id = "echo"
name = "Echo"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "notes"
name = "Notes"
owner = "alice"
auth = "none"
backend = { type = "python", server = "notes_agent:server" }

[[agents]]
id = "conformance"
name = "Conformance fixture"
owner = "alice"
auth = "none"
backend = { type = "python", server = "conformance_server:server" }

[[agents]]
id = "keyed"
name = "Keyed"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "keyed-notes"
name = "Keyed notes"
owner = "alice"
backend = { type = "python", server = "notes_agent:server" }
"""


@dataclass
class WireWorld:
    """The running server and the keys: ``keys["oag"]``, ``keys["bak"]``, ``keys["bak_notes"]``."""

    gateway: GatewayProcess
    keys: dict[str, str]

    @property
    def url(self) -> str:
        return self.gateway.url


async def _seed(database_url: str) -> dict[str, str]:
    storage = await open_storage(database_url)
    credentials = storage.credentials
    try:
        alice = await credentials.create_user("alice", hash_password("alice pw"))

        return {
            "oag": await add_key(credentials, alice.id),
            "bak": await add_key(credentials, alice.id, "keyed"),
            "bak_notes": await add_key(credentials, alice.id, "keyed-notes"),
        }
    finally:
        await storage.close()


@contextmanager
def wire_gateway(folder: Path) -> Generator[WireWorld]:
    """Serve :data:`AGENTS` from a SQLite file in ``folder`` and seed the keys."""
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    python_path = [str(ROOT / "src"), str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")]
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in python_path if p),
        "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0",
    }
    with run_gateway(config, database_url=database_url, env=env) as gateway:
        keys = anyio.run(_seed, database_url)
        yield WireWorld(gateway, keys)
