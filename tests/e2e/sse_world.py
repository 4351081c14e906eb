"""A gateway for the SSE resumption and event-budget tests: alice's ``alpha``, bob's ``beta``, their credentials.

The registry is a SQLite file in the test's folder; the server runs this checkout's sources
and the demo agents (:data:`~tests.e2e.sse_session.SERVER_PYTHONPATH`), with the credential
cache off; :func:`~tests.e2e.sse_session.seed_principals` writes the users and keys once it
listens.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from tests.e2e.sse_session import SERVER_PYTHONPATH, seed_principals
from tests.gateway_process import GatewayProcess, run_gateway

__all__ = ["AGENTS", "SseWorld", "serve_sse_world"]

AGENTS = """
[[agents]]
id = "alpha"
name = "Alpha"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "beta"
name = "Beta"
owner = "bob"
backend = { type = "python", callable = "echo_agent:reply" }
"""


@dataclass(frozen=True)
class SseWorld:
    """The gateway and the credentials' headers: ``alice``, ``bob`` (``oag_``), ``alice_bak`` (for ``alpha``)."""

    gateway: GatewayProcess
    credentials: dict[str, dict[str, str]]

    @property
    def mcp(self) -> str:
        """The user-level endpoint."""
        return f"{self.gateway.url}/mcp"

    @property
    def alpha(self) -> str:
        """``alpha``'s endpoint."""
        return f"{self.gateway.url}/alpha/mcp"


@contextmanager
def serve_sse_world(folder: Path, env: Mapping[str, str] | None = None) -> Generator[SseWorld]:
    """Serve :data:`AGENTS` from ``folder`` with ``env`` on top of the defaults; seed the principals."""
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    server_env = {"PYTHONPATH": SERVER_PYTHONPATH, "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0", **(env or {})}
    with run_gateway(config, database_url=database_url, env=server_env) as gateway:
        yield SseWorld(gateway, anyio.run(seed_principals, database_url, "alpha"))
