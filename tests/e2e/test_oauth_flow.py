"""The official MCP SDK client's OAuth flow against a real hivegate server, signed in and consented in Chromium.

The SDK's ``OAuthClientProvider`` gets a 401 from ``/alpha/mcp``, discovers the protected resource
metadata (RFC 9728) and the authorization server metadata (RFC 8414, issuer checked), registers
(RFC 7591) or uses a client ID metadata document served by the test over https on loopback, and
authorizes with PKCE S256 and ``resource`` (RFC 8707). Headless Chromium opens the authorization URL,
signs in as alice and allows the pre-checked agent; it then lands on a callback server on loopback,
whose query goes back to the SDK, which checks ``state`` and ``iss`` (RFC 9207) and redeems the code.
With that token the official MCP client lists and calls the agent's tool; raw requests check that
the token opens nothing else, and its claims are read back. A wrong password in the browser keeps it
on the sign-in page, with the error shown, and sends nothing to the client.

Acceptance: "An e2e test runs the official Python SDK client's OAuth flow ... once with a registered
client and once with a client ID metadata document served by the test on loopback."
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import anyio.to_thread
import httpx
import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp_types import TextContent
from playwright.sync_api import Page, expect
from pydantic import AnyUrl

from hivegate.storage import open_storage
from tests.auth.tls import DocServer, make_loopback_pki
from tests.browser import chromium_page, require_chromium
from tests.e2e.registry_seed import create_users
from tests.gateway_process import ROOT, GatewayProcess, run_gateway
from tests.oauth_token_storage import MemoryTokenStorage

pytestmark = pytest.mark.browser

AGENTS = """
[[agents]]
id = "alpha"
name = "Alpha"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "gamma"
name = "Gamma"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "beta"
name = "Beta"
owner = "bob"
backend = { type = "python", callable = "echo_agent:reply" }
"""
ALICE_PASSWORD = "correct horse battery staple"
BOB_PASSWORD = "bob's own password"
CLIENT_NAME = "hivegate e2e client"
"""The name the SDK client registers under (DCR)."""
CIMD_CLIENT_NAME = "CIMD e2e client"
"""The name in the client ID metadata document; the SDK's own ``client_name`` is not sent in that case."""
FLOW_TIMEOUT_SECONDS = 45.0
"""Bound on one whole flow; every browser action also has its own (``tests/browser.py``)."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "0"}},
}


class CallbackServer:
    """``http://127.0.0.1:{port}/callback``, where the browser ends the flow: records each query it is sent."""

    def __init__(self) -> None:
        self.queries: list[dict[str, list[str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path == "/callback":
                    server.queries.append(parse_qs(parts.query))
                    status, body = 200, b"<!doctype html><title>Done</title><p>Signed in. You may close this window."
                else:
                    status, body = 404, b"not found"
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/callback"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


@dataclass
class World:
    gateway: GatewayProcess
    database_url: str
    callback: CallbackServer
    documents: DocServer
    metadata_url: str
    """The https URL (on loopback, under the test CA) of a client ID metadata document."""


async def _seed(database_url: str) -> None:
    await create_users(database_url, {"alice": ALICE_PASSWORD, "bob": BOB_PASSWORD})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_chromium()
    folder = tmp_path_factory.mktemp("oauth-flow")
    pki = make_loopback_pki(folder)
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{Path(folder) / 'hivegate.db'}"
    env = {
        "PYTHONPATH": str(ROOT / "examples"),
        "HIVEGATE_SECURITY__CLIENT_METADATA_ALLOW_PRIVATE_ADDRESSES": "true",
        "HIVEGATE_SECURITY__CLIENT_METADATA_CA_FILE": str(pki.ca_file),
        "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0",
    }
    callback = CallbackServer()
    documents = DocServer(tls=pki.server_context)
    try:
        metadata_url = documents.serve(
            documents.url("/clients/e2e.json"),
            {"client_name": CIMD_CLIENT_NAME, "redirect_uris": [callback.url]},
        )
        with run_gateway(config, database_url=database_url, env=env) as gateway:
            anyio.run(_seed, database_url)
            yield World(gateway, database_url, callback, documents, metadata_url)
    finally:
        documents.close()
        callback.close()


# --- the browser (sync Playwright, run in a worker thread: no asyncio loop there) --------------------------------


def _sign_in(page: Page, base: str, password: str) -> None:
    """On the sign-in page the authorization request was sent to, sign in as alice with ``password``."""
    expect(page).to_have_url(re.compile(re.escape(f"{base}/oauth/login?request=") + r"[^&]+$"))
    page.locator("input[name=username]").fill("alice")
    page.locator("input[name=password]").fill(password)
    page.get_by_role("button", name="Sign in").click()


def _consent_in_browser(authorization_url: str, base: str, callback_url: str, client_identity: str | None) -> str:
    """Open the authorization URL, sign in as alice, allow what is pre-checked; the URL the browser ends on.

    ``client_identity``: the metadata document URL the pages must name (and whose ``client_name`` they show).
    """
    shown_name = CLIENT_NAME if client_identity is None else CIMD_CLIENT_NAME
    with chromium_page() as page:
        page.goto(authorization_url)
        expect(page.get_by_role("heading", level=1)).to_have_text(f"Sign in to continue to {shown_name}")
        _sign_in(page, base, ALICE_PASSWORD)
        expect(page).to_have_url(re.compile(re.escape(f"{base}/oauth/consent?request=") + r"[^&]+$"))
        expect(page.get_by_text("Signed in as")).to_contain_text("alice")
        if client_identity is not None:
            expect(page.locator("section.client")).to_contain_text(f"client identified by {client_identity}")
        else:
            expect(page.locator("section.client")).to_contain_text("not verified")
        expect(page.locator("input[name=agent][value=alpha]")).to_be_checked()  # the requested resource
        expect(page.locator("input[name=agent][value=gamma]")).not_to_be_checked()  # alice's, not asked for
        expect(page.locator("input[name=agent][value=beta]")).to_have_count(0)  # bob's
        page.get_by_role("button", name="Allow").click()
        page.wait_for_url(re.compile(re.escape(callback_url) + r"\?"))
        expect(page.get_by_text("Signed in. You may close this window.")).to_be_visible()
        return page.url


# --- the flow ----------------------------------------------------------------------------------------------------


def _claims(token: str) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return claims


def _text(content: object) -> str:
    assert isinstance(content, TextContent)
    return content.text


async def _run_flow(world: World, *, metadata_url: str | None) -> None:
    base = world.gateway.url
    callback = world.callback
    landed: list[str] = []
    authorization_urls: list[str] = []
    sent: list[tuple[str, str]] = []

    async def redirect_handler(authorization_url: str) -> None:
        authorization_urls.append(authorization_url)
        already = len(callback.queries)
        url = await anyio.to_thread.run_sync(
            partial(_consent_in_browser, authorization_url, base, callback.url, metadata_url)
        )
        landed.append(url)
        assert len(callback.queries) == already + 1  # the callback server really got the redirect

    async def callback_handler() -> AuthorizationCodeResult:
        query = callback.queries[-1]
        assert set(query) == {"code", "state", "iss"}, query
        assert query["iss"] == [base]  # RFC 9207: also checked by the SDK, byte for byte
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query["iss"][0])

    async def record(request: httpx2.Request) -> None:
        sent.append((request.method, request.url.path))

    storage = MemoryTokenStorage()
    provider = OAuthClientProvider(
        server_url=f"{base}/alpha/mcp",
        client_metadata=OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[AnyUrl(callback.url)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=metadata_url,
    )
    message = "hello from the browser flow"
    with anyio.fail_after(FLOW_TIMEOUT_SECONDS):
        async with (
            httpx2.AsyncClient(auth=provider, timeout=20, event_hooks={"request": [record]}) as http,
            Client(streamable_http_client(f"{base}/alpha/mcp", http_client=http)) as client,
        ):
            tools = await client.list_tools()
            assert [tool.name for tool in tools.tools] == ["alpha"]
            result = await client.call_tool("alpha", {"message": message})
    assert not result.is_error
    assert "".join(_text(content) for content in result.content) == message

    # The flow the SDK went through: 401, RFC 9728 and RFC 8414 discovery, registration (DCR case only),
    # one browser round trip, one token request; then only MCP traffic.
    oauth_calls = [(method, path) for method, path in sent if path != "/alpha/mcp"]
    registration = [] if metadata_url else [("POST", "/oauth/register")]
    assert oauth_calls == [
        ("GET", "/.well-known/oauth-protected-resource/alpha/mcp"),
        ("GET", "/.well-known/oauth-authorization-server"),
        *registration,
        ("POST", "/oauth/token"),
    ], sent
    [authorization_url] = authorization_urls
    asked = parse_qs(urlsplit(authorization_url).query)
    assert asked["resource"] == [f"{base}/alpha/mcp"]
    assert asked["scope"] == ["agent:alpha"]
    assert asked["code_challenge_method"] == ["S256"]
    [url] = landed
    assert url.startswith(callback.url + "?")

    # The client: the registered one, or the metadata document's URL (never registered).
    assert storage.client is not None
    client_id = storage.client.client_id
    assert client_id is not None
    if metadata_url is None:
        assert client_id
        assert not client_id.startswith("https://")
    else:
        assert client_id == metadata_url
        assert "/clients/e2e.json" in [seen.path for seen in world.documents.seen]  # the AS fetched it
    assert asked["client_id"] == [client_id]
    stores = await open_storage(world.database_url)
    oauth_store = stores.oauth
    try:
        registered = await oauth_store.get_client(client_id)
        grants = [grant for grant in await oauth_store.list_grants() if grant.client_id == client_id]
    finally:
        await stores.close()
    assert (registered is None) == (metadata_url is not None)  # a CIMD client is not stored as registered
    assert [grant.agents for grant in grants] == [("alpha",)]

    # The token: issued by this server for alpha only, to this client, for an hour.
    assert storage.tokens is not None
    token = storage.tokens.access_token
    claims = _claims(token)
    assert claims["iss"] == base
    assert f"{base}/alpha/mcp" in claims["aud"]
    assert not any(aud.endswith(("/gamma/mcp", "/beta/mcp")) for aud in claims["aud"])
    assert claims["scope"] == "agent:alpha"
    assert claims["client_id"] == client_id
    assert claims["exp"] - claims["iat"] == 3600

    # It opens nothing else: alice's gamma was not granted, and bob's beta is not hers.
    async with httpx.AsyncClient(timeout=10) as raw:
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        for agent in ("gamma", "beta"):
            response = await raw.post(f"{base}/{agent}/mcp", json=INITIALIZE, headers=headers)
            assert response.status_code == 401, (agent, response.text)
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer "), challenge
            assert 'error="invalid_token"' in challenge, challenge
        allowed = await raw.post(f"{base}/alpha/mcp", json=INITIALIZE, headers=headers)
        assert allowed.status_code == 200, allowed.text


async def test_registered_client(world: World) -> None:
    await _run_flow(world, metadata_url=None)


async def test_client_id_metadata_document(world: World) -> None:
    await _run_flow(world, metadata_url=world.metadata_url)


# --- a wrong password --------------------------------------------------------------------------------------------


def _wrong_password_in_browser(authorization_url: str, base: str) -> tuple[str, str]:
    """Sign in with a wrong password; the URL the browser is left on and the error it shows."""
    with chromium_page() as page:
        page.goto(authorization_url)
        _sign_in(page, base, "not alice's password")
        error = page.get_by_role("alert")
        expect(error).to_be_visible()
        expect(page.locator("input[name=username]")).to_have_value("alice")
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        return page.url, error.inner_text()


async def test_wrong_password_stays_on_the_sign_in_page(world: World) -> None:
    base = world.gateway.url
    async with httpx.AsyncClient(timeout=10) as raw:
        registered = await raw.post(
            f"{base}/oauth/register",
            json={
                "client_name": CLIENT_NAME,
                "redirect_uris": [world.callback.url],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            },
        )
    assert registered.status_code == 201, registered.text
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    authorization_url = f"{base}/oauth/authorize?" + urlencode(
        {
            "response_type": "code",
            "client_id": registered.json()["client_id"],
            "redirect_uri": world.callback.url,
            "state": secrets.token_urlsafe(16),
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": f"{base}/alpha/mcp",
            "scope": "agent:alpha",
        }
    )
    already = len(world.callback.queries)
    with anyio.fail_after(FLOW_TIMEOUT_SECONDS):
        url, error = await anyio.to_thread.run_sync(_wrong_password_in_browser, authorization_url, base)
    assert error == "Invalid username or password."
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == base
    assert parts.path == "/oauth/login"  # the form posted back to itself: no redirect
    assert len(world.callback.queries) == already  # nothing reached the client
