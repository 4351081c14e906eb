"""OAuth state under process faults: real ``hivegate serve`` processes on one database (issue 7 items 7 and 8).

Item 7: a stream of refreshes is cut by ``SIGKILL``; the gateway restarts on the same database and
every client's family is still alive — its latest refresh token works, or, when the response
carrying the newest one was lost with the process, the one before it does (within
``security.refresh_reuse_grace_seconds``) and yields that newest one.

Item 8: twenty simultaneous redemptions of one code, spread over two replicas sharing the
database: exactly one succeeds and the grant it produced is revoked (RFC 6749 §4.1.2); and a
later replay at the other replica revokes too — which needs the redemption and its grant in the
database, not in one process's memory.

Each test runs on SQLite and on PostgreSQL (``HIVEGATE_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Generator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from hivegate.storage import open_storage
from tests.auth.oauth.conftest import Browser, pkce
from tests.e2e.registry_seed import create_users
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

AGENTS = """
[[agents]]
id = "alpha"
name = "Alpha"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }
"""
FAMILIES = 8
"""Clients refreshing at once when the process is killed."""
REFRESHES_BEFORE_KILL = 60
"""Successful refreshes (all clients together) after which the process is killed."""
WAIT_SECONDS = 60.0
"""Bound on each phase (the refresh stream, a burst of redemptions)."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "0"}},
}


async def _seed(database_url: str) -> None:
    await create_users(database_url, {"alice": "alice-password"})


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(AGENTS, encoding="utf-8")
    return path


@contextmanager
def _gateway(config: Path, database_url: str) -> Generator[GatewayProcess]:
    # src first: the sources of this checkout, not whichever hivegate the venv has installed
    path = os.pathsep.join((str(ROOT / "src"), str(ROOT / "examples")))
    env = {"PYTHONPATH": path, "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0"}
    with run_gateway(config, database_url=database_url, env=env) as gateway:
        yield gateway


async def _first_tokens(browser: Browser) -> tuple[str, dict[str, Any]]:
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    response = await browser.exchange(client["client_id"], code, verifier)
    assert response.status_code == 200, response.text
    return client["client_id"], response.json()


async def _grants(database_url: str) -> list[bool]:
    storage = await open_storage(database_url)
    store = storage.oauth
    try:
        return [grant.active for grant in await store.list_grants()]
    finally:
        await storage.close()


class _Family:
    """One client's refresh loop: ``latest`` is the newest refresh token it received."""

    def __init__(self, browser: Browser, client_id: str, tokens: dict[str, Any]) -> None:
        self.browser = browser
        self.client_id = client_id
        self.latest: str = tokens["refresh_token"]
        self.refused: list[str] = []

    async def run(self, counter: list[int], enough: anyio.Event) -> None:
        while True:
            try:
                response = await self.browser.refresh(self.client_id, self.latest)
            except httpx.TransportError:
                return  # the process is gone; whatever it committed, the client never heard of it
            if response.status_code != 200:
                self.refused.append(response.text)
                return
            self.latest = response.json()["refresh_token"]
            counter[0] += 1
            if counter[0] >= REFRESHES_BEFORE_KILL:
                enough.set()


async def test_kill_9_during_a_stream_of_refreshes_loses_no_grant(registry_url: str, config: Path) -> None:
    """Issue 7 item 7: SIGKILL mid-stream, restart on the same database: every family still refreshes."""
    await _seed(registry_url)
    with _gateway(config, registry_url) as gateway:
        families: list[_Family] = []
        for _ in range(FAMILIES):
            browser = Browser(gateway.url)
            client_id, tokens = await _first_tokens(browser)
            families.append(_Family(browser, client_id, tokens))
        counter, enough = [0], anyio.Event()
        with anyio.fail_after(WAIT_SECONDS):
            async with anyio.create_task_group() as group:
                for family in families:
                    group.start_soon(family.run, counter, enough)
                await enough.wait()
                gateway.process.kill()  # SIGKILL while every client has a refresh in flight
        assert gateway.process.wait(timeout=10) == -9
        for family in families:
            await family.browser.aclose()
    assert [f.refused for f in families] == [[]] * FAMILIES  # no refusal before the kill either

    with _gateway(config, registry_url) as restarted:
        async with httpx.AsyncClient(base_url=restarted.url, timeout=10) as http:
            for family in families:
                browser = Browser(restarted.url)
                try:
                    retried = await browser.refresh(family.client_id, family.latest)
                    assert retried.status_code == 200, retried.text
                    onward = await browser.refresh(family.client_id, retried.json()["refresh_token"])
                    assert onward.status_code == 200, onward.text
                finally:
                    await browser.aclose()
                bearer = {"Authorization": f"Bearer {onward.json()['access_token']}"}
                call = await http.post(
                    "/alpha/mcp",
                    json=INITIALIZE,
                    headers={**bearer, "Accept": "application/json, text/event-stream"},
                )
                assert call.status_code == 200, call.text
    assert await _grants(registry_url) == [True] * FAMILIES


async def test_simultaneous_redemptions_across_two_replicas(registry_url: str, config: Path) -> None:
    """Issue 7 item 8: 20 redemptions of one code over two replicas: one succeeds, and its grant is revoked."""
    await _seed(registry_url)
    with ExitStack() as stack:
        replicas = [stack.enter_context(_gateway(config, registry_url)) for _ in range(2)]
        browsers = [Browser(replica.url) for replica in replicas]
        try:
            client = await browsers[0].register()
            verifier, challenge = pkce()
            code = await browsers[0].code(client["client_id"], challenge, ["alpha"])
            turns = itertools.cycle(browsers)
            responses: list[httpx.Response] = []

            async def redeem(browser: Browser) -> None:
                responses.append(await browser.exchange(client["client_id"], code, verifier))

            with anyio.fail_after(WAIT_SECONDS):
                async with anyio.create_task_group() as group:
                    for _ in range(20):
                        group.start_soon(redeem, next(turns))
            assert sorted(r.status_code for r in responses) == [200] + [400] * 19
            assert {r.json()["error"] for r in responses if r.status_code == 400} == {"invalid_grant"}
            assert await _grants(registry_url) == [False]
            winner = next(r.json() for r in responses if r.status_code == 200)
            for browser in browsers:
                refused = await browser.refresh(client["client_id"], winner["refresh_token"])
                assert refused.json()["error"] == "invalid_grant"

            # a replay after the fact reaching the other replica revokes too
            verifier, challenge = pkce()
            code = await browsers[0].code(client["client_id"], challenge, ["alpha"])
            assert (await browsers[0].exchange(client["client_id"], code, verifier)).status_code == 200
            replayed = await browsers[1].exchange(client["client_id"], code, verifier)
            assert replayed.json()["error"] == "invalid_grant"
            assert await _grants(registry_url) == [False, False]
        finally:
            for browser in browsers:
                await browser.aclose()
