"""The served world of the A2A binding and ``/v1/invoke`` e2e tests (test_a2a_bindings, test_rest_invoke).

One gateway on a SQLite registry with two users, alice and bob, each with an ``oag_`` key, and
alice's ``bak_`` key for ``echo``; the agents of the test's config, whose modules come from
``examples/`` and from the world's folder (where :data:`~tests.e2e.marker_agent.WAITER_AGENT` is
written as ``waiter_agent.py``, with its ``marks`` folder).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.marker_agent import WAITER_AGENT
from tests.e2e.registry_cli import create_user_with_key, first_line, run_cli
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

__all__ = ["ALICE_AGENTS", "OPEN_AND_BOB_AGENTS", "InvokeWorld", "serve_invoke_world"]

ALICE_AGENTS = """
[[agents]]
id = "echo"
name = "Echo"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "echo2"
name = "Echo two"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "waiter"
name = "Waiter"
owner = "alice"
backend = { type = "python", callable = "waiter_agent:reply" }

[[agents]]
id = "slow"
name = "Slow"
owner = "alice"
invoke_timeout_seconds = 1
backend = { type = "python", callable = "waiter_agent:reply" }

[[agents]]
id = "failing"
name = "Failing"
owner = "alice"
backend = { type = "python", callable = "waiter_agent:fail" }

[[agents]]
id = "notes"
name = "Notes"
owner = "alice"
backend = { type = "python", server = "notes_agent:server" }

[[agents]]
id = "off"
name = "Off"
owner = "alice"
a2a_enabled = false
backend = { type = "python", callable = "echo_agent:reply" }
"""
"""alice's ``echo`` and ``echo2`` (the demo echo agent), ``waiter``, ``slow`` (1 s deadline) and
``failing`` (the marker agent), ``notes`` (an MCP server only) and ``off`` (``a2a_enabled = false``)."""

OPEN_AND_BOB_AGENTS = """
[[agents]]
id = "open"
name = "Open"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "bobecho"
name = "Bob's echo"
owner = "bob"
backend = { type = "python", callable = "echo_agent:reply" }
"""
"""alice's ``open`` (``auth = "none"``) and bob's ``bobecho``."""


@dataclass(frozen=True)
class InvokeWorld:
    """The running gateway, its folder, the keys (alice's and bob's ``oag_``, alice's ``bak_`` for ``echo``)."""

    gateway: GatewayProcess
    folder: Path
    alice: str
    bob: str
    alice_echo_bak: str
    path: tuple[str, str]
    """The agents' module folders (``examples/`` and ``folder``), for ``agents apply``."""
    database_url: str

    def invoke_url(self, agent_id: str) -> str:
        """``POST /{agentId}/v1/invoke`` of ``agent_id``."""
        return f"{self.gateway.url}/{agent_id}/v1/invoke"


@contextmanager
def serve_invoke_world(folder: Path, config: str, env: Mapping[str, str]) -> Generator[InvokeWorld]:
    """Seed the registry in ``folder`` (users, keys, the agents of ``config``) and serve it with ``env``."""
    (folder / "marks").mkdir()
    (folder / "waiter_agent.py").write_text(WAITER_AGENT, encoding="utf-8")
    config_file = folder / "agents.toml"
    config_file.write_text(config, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    path = (str(ROOT / "examples"), str(folder))
    keys = {user: create_user_with_key(database_url, user) for user in ("alice", "bob")}
    run_cli(database_url, "agents", "apply", str(config_file), pythonpath=path)
    bak = first_line(run_cli(database_url, "keys", "create", "--user", "alice", "--agent", "echo"))
    with run_gateway(
        config_file, database_url=database_url, env={"PYTHONPATH": os.pathsep.join(path), **env}
    ) as running:
        yield InvokeWorld(running, folder, keys["alice"], keys["bob"], bak, path, database_url)
