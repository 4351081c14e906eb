"""A raw handshake-era (2025-11-25) MCP session over httpx2, for tests that craft resumption headers.

Official clients resume only their own streams; these helpers let a test present any
``Last-Event-ID`` on any session, as an attacker would. SSE is parsed by httpx2's ``EventSource``
(the one the official SDK client uses).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from httpx2 import EventSource, ServerSentEvent

from hivegate.auth.passwords import hash_password
from hivegate.storage import open_storage
from tests.e2e.registry_seed import add_key
from tests.gateway_process import ROOT

__all__ = ["SERVER_PYTHONPATH", "Resumed", "SseSession", "open_session", "seed_principals"]

SERVER_PYTHONPATH = os.pathsep.join([str(ROOT / "src"), str(ROOT / "examples")])
"""The server runs this checkout's sources (not whatever ``hivegate`` is installed) and the demo agents."""

VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


@dataclass
class SseSession:
    """One initialized session: ``call`` a tool over SSE, ``resume`` a stream, ``delete`` the session."""

    http: httpx2.AsyncClient
    url: str
    credential: dict[str, str]
    session_id: str
    cursors: dict[int, list[str]] = field(default_factory=lambda: {})
    """Event ids seen per request id, oldest first (the first is the stream's priming event)."""

    @property
    def headers(self) -> dict[str, str]:
        return {**self.credential, "Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": VERSION}

    async def call(self, request_id: int, tool: str, message: str) -> list[dict[str, Any]]:
        """``tools/call`` with a progress token; the messages of its SSE stream, through its response."""
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"message": message}, "_meta": {"progressToken": request_id}},
        }
        headers = {**self.headers, "Content-Type": "application/json", "Accept": ACCEPT}
        messages: list[dict[str, Any]] = []
        async with self.http.stream("POST", self.url, json=body, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in EventSource(response, max_event_size=None):
                if event.id:
                    self.cursors.setdefault(request_id, []).append(event.id)
                if not event.data:
                    continue
                received: dict[str, Any] = json.loads(event.data)
                messages.append(received)
                if received.get("id") == request_id:
                    break
        return messages

    async def resume(self, last_event_id: str) -> Resumed:
        """``GET`` with ``Last-Event-ID``: the replayed messages (up to the priming event that re-opens the
        stream), or the refusal's status and JSON body."""
        headers = {**self.headers, "Accept": "text/event-stream", "Last-Event-ID": last_event_id}
        async with self.http.stream("GET", self.url, headers=headers) as response:
            if response.status_code != 200:
                return Resumed(response.status_code, [], json.loads(await response.aread()))
            assert response.headers["content-type"].startswith("text/event-stream")
            replayed: list[ServerSentEvent] = []
            async for event in EventSource(response, max_event_size=None):
                if not event.data:  # the priming event minted for the resumed stream: the replay is over
                    break
                replayed.append(event)
        return Resumed(200, [json.loads(e.data) for e in replayed], None)

    @asynccontextmanager
    async def listening(self) -> AsyncGenerator[None]:
        """Hold the session's GET stream open (an open stream keeps the session from expiring)."""
        headers = {**self.headers, "Accept": "text/event-stream"}
        async with self.http.stream("GET", self.url, headers=headers) as response:
            assert response.status_code == 200
            yield

    async def delete(self) -> int:
        response = await self.http.delete(self.url, headers=self.headers)
        return response.status_code


@dataclass(frozen=True)
class Resumed:
    status: int
    messages: list[dict[str, Any]]
    error: dict[str, Any] | None

    @property
    def text(self) -> str:
        return json.dumps(self.messages)

    def assert_refused(self) -> None:
        """A refusal: 400 with a JSON-RPC error body naming ``unknown_event_id``, nothing replayed."""
        assert self.status == 400
        assert self.error is not None
        assert self.error["jsonrpc"] == "2.0"
        assert self.error["id"] is None
        assert self.error["error"]["code"] == -32600
        assert self.error["error"]["data"]["code"] == "unknown_event_id"


async def open_session(http: httpx2.AsyncClient, url: str, credential: dict[str, str]) -> SseSession:
    """``initialize`` and ``notifications/initialized`` at 2025-11-25; the session."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "resume", "version": "0"}},
    }
    headers = {**credential, "Content-Type": "application/json", "Accept": ACCEPT}
    response = await http.post(url, json=initialize, headers=headers)
    assert response.status_code == 200, response.text
    session = SseSession(http, url, credential, response.headers["mcp-session-id"])
    notified = await http.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**session.headers, "Content-Type": "application/json", "Accept": ACCEPT},
    )
    assert notified.status_code == 202, notified.text
    return session


async def seed_principals(database_url: str, agent_id: str) -> dict[str, dict[str, str]]:
    """Users alice and bob, an ``oag_`` key each and alice's ``bak_`` key for ``agent_id``: their headers."""
    storage = await open_storage(database_url)
    credentials = storage.credentials
    try:
        alice = await credentials.create_user("alice", hash_password("alice pw"))
        bob = await credentials.create_user("bob", hash_password("bob pw"))

        return {
            "alice": {"Authorization": f"Bearer {await add_key(credentials, alice.id)}"},
            "bob": {"Authorization": f"Bearer {await add_key(credentials, bob.id)}"},
            "alice_bak": {"X-Agent-API-Key": await add_key(credentials, alice.id, agent_id)},
        }
    finally:
        await storage.close()
