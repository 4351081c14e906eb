"""Issue 7 item 5: a real ``hivegate serve`` whose database goes away answers 503 in each plane's own shape.

PostgreSQL is taken away from one server only, through a loopback proxy the test controls
(``tests/tcp_proxy.py``): first refusing connections, then accepting them and never answering.
Every plane must answer 503 with its own error body, code ``store_unavailable`` and ``Retry-After``,
within the configured limits: JSON-RPC on the agent endpoints (both eras, the lean paths and the
SDK path) and on ``/mcp``; the REST envelope on ``/{agentId}/v1/invoke``;
RFC 6749 §5.2 JSON on ``/oauth/*``; an HTML page for the sign-in
pages; ``/readyz`` 503. When the database is back, the same server serves again.

SQLite: a writer from another process holding the lock (``BEGIN IMMEDIATE``) makes ``/readyz``
report the database refusing writes and the OAuth writes answer 503, while reads go on.

Start-up: an unreachable database (refused, black-holed, not a database file) is one line on
stderr naming the database without its password, and exit status 4, no traceback.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy.engine import make_url

from hivegate.a2a.tasks import STORE_UNAVAILABLE_MESSAGE
from hivegate.auth.oauth.pending import PendingRequests
from hivegate.auth.passwords import hash_password
from hivegate.auth.tokens import TokenCodec
from hivegate.storage import open_storage
from tests.e2e.registry_seed import add_key
from tests.gateway_process import ROOT, GatewayProcess, run_gateway
from tests.read_only_file import read_only
from tests.tcp_proxy import TcpProxy, running_proxy

SECRET = "outage-secret-0123456789abcdef0123456789abcdef"
AGENTS = """
[[agents]]
id = "alpha"
name = "Alpha"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }
"""
LIMITS_ENV = {
    "HIVEGATE_DATABASE__CONNECT_TIMEOUT_SECONDS": "1",
    "HIVEGATE_DATABASE__STATEMENT_TIMEOUT_SECONDS": "1",
    "HIVEGATE_DATABASE__POOL_TIMEOUT_SECONDS": "1",
    "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0",
    "HIVEGATE_SECURITY__CURSOR_KEY": SECRET,
    "HIVEGATE_SECURITY__TOKEN_SIGNING_KEY": SECRET,
    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "examples")]),
}
BOUND_SECONDS = 12.0
"""Upper bound for one request while the database is gone: pool + connect + a statement (+1 s) + closing a
dead connection (2 s), with slack for a loaded machine. Without limits the same request took 85 s or hung."""

JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
MODERN = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
LIST_MODERN = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": META}}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "outage", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST_LEGACY = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@dataclass
class Served:
    gateway: GatewayProcess
    key: str
    session_id: str
    proxy: TcpProxy


async def _seed(database_url: str) -> str:
    """User alice and her ``oag_`` key, written by the store itself; returns the key."""
    storage = await open_storage(database_url)
    store = storage.credentials
    try:
        alice = await store.create_user("alice", hash_password("alice pw"))
        return await add_key(store, alice.id)
    finally:
        await storage.close()


def _config(folder: Path) -> Path:
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    return config


def _open_session(url: str, key: str) -> str:
    auth = {"Authorization": f"Bearer {key}"}
    opened = httpx.post(f"{url}/alpha/mcp", json=INITIALIZE, headers={**JSON, **auth}, timeout=30)
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    headers = {**JSON, **auth, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    assert httpx.post(f"{url}/alpha/mcp", json=INITIALIZED, headers=headers, timeout=30).status_code == 202
    return session_id


@pytest.fixture
def served_on_postgres(registry_url: str, tmp_path: Path) -> Iterator[Served]:
    """A server on a fresh PostgreSQL database reached through a proxy (with a password in its URL)."""
    key = anyio.run(_seed, registry_url)
    with running_proxy(make_url(registry_url).port or 5432) as proxy:
        through = make_url(proxy.url_for(registry_url)).set(password="hunter2-secret")
        url = through.render_as_string(hide_password=False)
        with run_gateway(_config(tmp_path), database_url=url, env=LIMITS_ENV, dev=False) as gateway:
            yield Served(gateway, key, _open_session(gateway.url, key), proxy)


def _timed(send: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = send()
    return response, time.monotonic() - started


def _requests(served: Served) -> dict[str, Any]:
    """Every kind of request that needs the database, by name (each a call returning the response)."""
    url, auth = served.gateway.url, {"Authorization": f"Bearer {served.key}"}
    legacy = {**JSON, **auth, "Mcp-Session-Id": served.session_id, "MCP-Protocol-Version": "2025-11-25"}
    timeout = BOUND_SECONDS + 10
    post, get = partial(httpx.post, timeout=timeout), partial(httpx.get, timeout=timeout)
    request_id = "r" * 43  # a stored request's id (consent looks it up)
    sealed = PendingRequests(SECRET.encode(), 600).seal(  # what /oauth/authorize hands the sign-in page
        client_id="c",
        redirect_uri="http://127.0.0.1:9/cb",
        redirect_uri_provided_explicitly=True,
        state=None,
        scopes=(),
        code_challenge="x" * 43,
        resource=None,
        now=datetime.now(UTC),
    )
    codec = TokenCodec(url, SECRET.encode(), 3600)
    token, _ = codec.mint(
        subject="usr_alice", audience=[f"{url}/alpha/mcp"], client_id="c", scopes=("agent:alpha",), grant_id="grt_x"
    )
    oauth = {"Authorization": f"Bearer {token}"}
    agent_key = {"X-Agent-API-Key": "bak_" + "0" * 64}
    return {
        "agent modern (lean path)": lambda: post(
            f"{url}/alpha/mcp", json=LIST_MODERN, headers={**JSON, **MODERN, **auth}
        ),
        "agent modern, OAuth access token": lambda: post(
            f"{url}/alpha/mcp", json=LIST_MODERN, headers={**JSON, **MODERN, **oauth}
        ),
        "agent modern, bak_ key": lambda: post(
            f"{url}/alpha/mcp", json=LIST_MODERN, headers={**JSON, **MODERN, **agent_key}
        ),
        "agent alias modern": lambda: post(
            f"{url}/agents/alpha/mcp", json=LIST_MODERN, headers={**JSON, **MODERN, **auth}
        ),
        "agent initialize (SDK path)": lambda: post(f"{url}/alpha/mcp", json=INITIALIZE, headers={**JSON, **auth}),
        "agent legacy session (lean legacy path)": lambda: post(f"{url}/alpha/mcp", json=LIST_LEGACY, headers=legacy),
        "agent legacy GET stream": lambda: get(f"{url}/alpha/mcp", headers={**legacy, "Accept": "text/event-stream"}),
        "rest invoke": lambda: post(f"{url}/alpha/v1/invoke", json={"message": "hi"}, headers={**JSON, **auth}),
        "rest invoke, bak_ key": lambda: post(
            f"{url}/alpha/v1/invoke", json={"message": "hi"}, headers={**JSON, **agent_key}
        ),
        "user /mcp modern": lambda: post(f"{url}/mcp", json=LIST_MODERN, headers={**JSON, **MODERN, **auth}),
        "user /mcp initialize": lambda: post(f"{url}/mcp", json=INITIALIZE, headers={**JSON, **auth}),
        "oauth token": lambda: post(
            f"{url}/oauth/token",
            data={"grant_type": "authorization_code", "code": "x" * 43, "client_id": "c", "code_verifier": "v" * 43},
        ),
        "oauth register": lambda: post(
            f"{url}/oauth/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "outage"}
        ),
        "oauth revoke": lambda: post(f"{url}/oauth/revoke", data={"client_id": "c", "token": "t"}),
        "authorize page": lambda: get(
            f"{url}/oauth/authorize",
            params={"client_id": "c", "response_type": "code", "code_challenge": "x" * 43},
        ),
        "sign-in page": lambda: get(f"{url}/oauth/login", params={"request": sealed}),
        "consent page": lambda: get(f"{url}/oauth/consent", params={"request": request_id}),
        "readyz": lambda: get(f"{url}/readyz"),
    }


def _assert_plane_error(name: str, response: httpx.Response) -> None:
    """503 with the plane's error body, ``store_unavailable``, ``Retry-After``; never a traceback or the password."""
    assert response.status_code == 503, f"{name}: {response.status_code} {response.text[:300]}"
    assert "Traceback" not in response.text, name
    assert "hunter2" not in response.text, name
    media = response.headers.get("content-type", "")
    if name == "readyz":
        assert response.json()["code"] == "store_unavailable", name
    elif name.endswith("page"):
        assert media.startswith("text/html"), f"{name}: {media}"
        assert "Temporarily unavailable" in response.text, name
        assert response.headers["retry-after"] == "5", name
    elif name.startswith("rest"):
        body = response.json()
        assert (body["success"], body["error"]["code"]) == (False, "store_unavailable"), f"{name}: {body}"
        assert response.headers["retry-after"] == "5", name
    elif name.startswith("oauth"):
        body = response.json()
        assert body["error"] == "temporarily_unavailable", f"{name}: {body}"
        assert body["code"] == "store_unavailable", f"{name}: {body}"
        assert response.headers["retry-after"] == "5", name
    else:
        body = response.json()
        assert (body["jsonrpc"], body["id"]) == ("2.0", None), f"{name}: {body}"
        assert (body["error"]["code"], body["error"]["data"]["code"]) == (-32603, "store_unavailable"), name
        assert response.headers["retry-after"] == "5", name
        assert "mcp-session-id" not in response.headers, name


def _assert_served_again(served: Served) -> None:
    url, auth = served.gateway.url, {"Authorization": f"Bearer {served.key}"}
    listed = httpx.post(f"{url}/alpha/mcp", json=LIST_MODERN, headers={**JSON, **MODERN, **auth}, timeout=30)
    assert listed.status_code == 200, listed.text
    assert httpx.get(f"{url}/readyz", timeout=30).status_code == 200


@pytest.mark.postgres
@pytest.mark.parametrize("registry_url", ["postgresql"], indirect=True)
def test_postgres_refusing_connections_is_503_in_every_plane(served_on_postgres: Served) -> None:
    """Issue 7 item 5: PostgreSQL refuses connections: every plane answers 503 ``store_unavailable`` at once."""
    served = served_on_postgres
    _assert_served_again(served)
    served.proxy.refuse()
    for name, send in _requests(served).items():
        response, elapsed = _timed(send)
        _assert_plane_error(name, response)
        assert elapsed < BOUND_SECONDS, f"{name}: {elapsed:.1f} s"
    assert httpx.get(f"{served.gateway.url}/healthz", timeout=10).status_code == 200  # the process is alive
    served.proxy.forward()
    _assert_served_again(served)
    assert "Traceback" not in served.gateway.output()


@pytest.mark.postgres
@pytest.mark.parametrize("registry_url", ["postgresql"], indirect=True)
def test_postgres_not_answering_is_503_within_the_limits(served_on_postgres: Served) -> None:
    """Issue 7 item 5: PostgreSQL accepts connections and never answers: 503 within the configured time limits."""
    served = served_on_postgres
    served.proxy.blackhole()
    for name, send in _requests(served).items():
        response, elapsed = _timed(send)
        _assert_plane_error(name, response)
        assert elapsed < BOUND_SECONDS, f"{name}: {elapsed:.1f} s"
    served.proxy.forward()
    _assert_served_again(served)
    assert "Traceback" not in served.gateway.output()


# -- SQLite: another process holds the write lock ----------------------------------------------------


def test_sqlite_locked_by_another_writer_fails_readiness_and_writes(tmp_path: Path) -> None:
    """Issue 7 item 5: another process holds SQLite's write lock: ``/readyz`` reports the database refusing
    writes (503), OAuth writes answer 503 ``temporarily_unavailable`` (``/oauth/authorize``: a redirect
    with that error), reads are still served."""
    database = tmp_path / "hivegate.db"
    url = f"sqlite+aiosqlite:///{database}"
    key = anyio.run(_seed, url)
    with run_gateway(_config(tmp_path), database_url=url, env=LIMITS_ENV, dev=False) as gateway:
        assert httpx.get(f"{gateway.url}/readyz", timeout=30).status_code == 200
        client = httpx.post(
            f"{gateway.url}/oauth/register",
            json={"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"},
            timeout=30,
        )
        assert client.status_code == 201, client.text
        authorize = {
            "response_type": "code",
            "client_id": client.json()["client_id"],
            "redirect_uri": "http://127.0.0.1:9/cb",
            "state": "st4te",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
        }
        holder = sqlite3.connect(database, isolation_level=None, timeout=5)
        holder.execute("BEGIN IMMEDIATE")  # e.g. a stuck `hivegate agents apply` elsewhere
        try:
            ready, elapsed = _timed(lambda: httpx.get(f"{gateway.url}/readyz", timeout=30))
            _assert_plane_error("readyz", ready)
            assert elapsed < BOUND_SECONDS
            registration = {"redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "locked"}
            registered, elapsed = _timed(
                lambda: httpx.post(f"{gateway.url}/oauth/register", json=registration, timeout=30)
            )
            _assert_plane_error("oauth register", registered)
            assert elapsed < BOUND_SECONDS
            # The client and its redirect URI are known (reads work) and /oauth/authorize writes nothing
            # (issue 7 item 4: the request travels sealed), so the flow goes on to the sign-in page.
            redirected = httpx.get(f"{gateway.url}/oauth/authorize", params=authorize, timeout=30)
            assert redirected.status_code == 302, redirected.text
            location = httpx.URL(redirected.headers["location"])
            assert location.path == "/oauth/login"
            auth = {"Authorization": f"Bearer {key}"}
            listed = httpx.post(
                f"{gateway.url}/alpha/mcp", json=LIST_MODERN, headers={**JSON, **MODERN, **auth}, timeout=30
            )
            assert listed.status_code == 200, listed.text  # reading the key works; its last-use write waits
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert httpx.get(f"{gateway.url}/readyz", timeout=30).status_code == 200
        assert "Traceback" not in gateway.output()


# -- start-up ------------------------------------------------------------------------------------------

STARTUP_BOUND_SECONDS = 45.0
"""A whole `hivegate serve` run that gives up on its database: interpreter start-up and imports (slow on a
loaded machine) plus the 1 s connect timeout. Without the limits it waited 85 s, or for ever."""


def _command(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``python -m hivegate ARGS`` to completion (bounded), with real secrets and the short limits."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "hivegate", *args],
        cwd=ROOT,
        env={**os.environ, **LIMITS_ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=STARTUP_BOUND_SECONDS * 2,
        check=False,
    )
    return done, time.monotonic() - started


def _assert_one_line_exit_4(done: subprocess.CompletedProcess[str], elapsed: float, database: str) -> None:
    # the one error line, after the line every command prints first naming its database (issue 7 item 15)
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("database: ")]
    assert done.returncode == 4, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: cannot use the database "), lines[0]
    assert database in lines[0], lines[0]
    assert "hunter2" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    assert "listening" not in done.stdout
    assert elapsed < STARTUP_BOUND_SECONDS, f"{elapsed:.1f} s"


def test_serve_on_a_sqlite_path_that_is_no_database_is_one_line_and_exit_4(tmp_path: Path) -> None:
    """Issue 7 item 5: a database that cannot be opened at start-up: one line naming it, exit status 4."""
    folder = tmp_path / "a-folder-not-a-file"
    folder.mkdir()
    url = f"sqlite+aiosqlite:///{folder}"
    done, elapsed = _command("serve", "--port", "0", "--database-url", url)
    _assert_one_line_exit_4(done, elapsed, url)


@pytest.mark.postgres
def test_serve_and_cli_on_unreachable_postgres_are_one_line_and_exit_4(tmp_path: Path) -> None:
    """Issue 7 item 5: PostgreSQL refusing, or never answering, at start-up: one line (no password), exit 4."""
    server = os.environ.get("HIVEGATE_TEST_POSTGRES_URL")
    if not server:
        pytest.skip("PostgreSQL runs need HIVEGATE_TEST_POSTGRES_URL")
    with running_proxy(make_url(server).port or 5432) as proxy:
        url = make_url(proxy.url_for(server)).set(password="hunter2-secret").render_as_string(hide_password=False)
        shown = make_url(url).render_as_string(hide_password=True)
        proxy.refuse()
        _assert_one_line_exit_4(*_command("serve", "--port", "0", "--database-url", url), shown)
        _assert_one_line_exit_4(*_command("users", "list", "--database-url", url), shown)
        proxy.blackhole()
        _assert_one_line_exit_4(*_command("serve", "--port", "0", "--database-url", url), shown)


def test_serve_whose_start_up_writes_are_refused_is_one_error_line_and_exit_4(tmp_path: Path) -> None:
    """Issue 7 item 5: the database opens but refuses start-up's writes (read-only file, ``--config`` agents to
    apply): the lifespan fails with the one-line error (no traceback) and ``serve`` exits with status 4."""
    database = tmp_path / "hivegate.db"
    url = f"sqlite+aiosqlite:///{database}"
    anyio.run(_seed, url)  # migrated; the agents of the config file are not applied yet
    with read_only(database):
        done, elapsed = _command("serve", "--port", "0", "--database-url", url, "--config", str(_config(tmp_path)))
    assert done.returncode == 4, done.stderr
    assert f"cannot use the database {url}" in done.stderr
    assert "readonly" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert elapsed < STARTUP_BOUND_SECONDS


# -- PostgreSQL goes away after the caller's credential was cached ------------------------------------


@pytest.fixture
def served_with_cached_credentials(registry_url: str, tmp_path: Path) -> Iterator[Served]:
    """As ``served_on_postgres``, with the credential cache on (the default), so a request that needs the
    database only after its credential is resolved (an idempotency key's claim) gets that far."""
    key = anyio.run(_seed, registry_url)
    env = {**LIMITS_ENV, "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "60"}
    with running_proxy(make_url(registry_url).port or 5432) as proxy:
        url = proxy.url_for(registry_url)
        with run_gateway(_config(tmp_path), database_url=url, env=env, dev=False) as gateway:
            yield Served(gateway, key, "", proxy)


@pytest.mark.postgres
@pytest.mark.parametrize("registry_url", ["postgresql"], indirect=True)
def test_a_keyed_a2a_message_refused_by_the_database_is_the_task_store_message(
    served_with_cached_credentials: Served,
) -> None:
    """Found by issue 10's attack trial: the lean ``SendMessage`` path answered a database outage met before
    the call (the claim of its idempotency key) with a bare -32603 "Internal error" and logged a traceback;
    it is now the A2A plane's fixed outage message (as its task store gives, docs/a2a.md), with one warning
    line. Spec: A2A 1.0 §3.3.2 (InternalError, -32603)."""
    served = served_with_cached_credentials
    url, headers = served.gateway.url, {"Authorization": f"Bearer {served.key}", "A2A-Version": "1.0"}

    def send(key: str) -> httpx.Response:
        message: dict[str, Any] = {"role": "ROLE_USER", "messageId": f"m-{key}", "parts": [{"text": "hi"}]}
        message["metadata"] = {"idempotency_key": key}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        return httpx.post(f"{url}/alpha/a2a", json=body, headers=headers, timeout=BOUND_SECONDS + 10)

    warm = send("warm")  # caches the credential
    assert warm.status_code == 200, warm.text
    assert warm.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    served.proxy.refuse()
    refused, elapsed = _timed(lambda: send("during-the-outage"))
    assert elapsed < BOUND_SECONDS
    assert refused.status_code == 200, refused.text
    error = refused.json()["error"]
    assert error["code"] == -32603
    assert error["message"] == STORE_UNAVAILABLE_MESSAGE
    assert "postgres" not in refused.text.lower()
    served.proxy.forward()
    again = send("during-the-outage")  # the key was never claimed: it runs now
    assert again.status_code == 200, again.text
    assert again.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "Traceback" not in served.gateway.output()
