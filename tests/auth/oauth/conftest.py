"""A real authorization server for the OAuth tests: ``AuthorizationServer(...).routes()`` under uvicorn on loopback.

The server runs as a task on the test's own event loop (so tests may reach into the memory
stores between requests), on a socket bound and listening before the task starts, so the
first request needs no start-up wait. The app also serves a client ID metadata document at
``/clients/app.json`` (for the CIMD tests; the resolver may fetch from loopback here) and a stand-in
resource server at ``/{agentId}/mcp`` that only checks the token's audience (for the official client).

Fixture users: ``alice`` (owns ``alpha``, ``beta``, and ``hidden`` which is not MCP-enabled),
``bob`` (owns ``bobs``), ``carol`` (disabled). Passwords are ``{username}-password``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
import socket
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import pytest_asyncio
import uvicorn
from argon2 import PasswordHasher
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from hivegate.agents.model import AgentSpec
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.oauth.cimd import ClientMetadataResolver
from hivegate.auth.oauth.redirects import RedirectPolicy
from hivegate.auth.oauth.server import AuthorizationServer
from hivegate.auth.passwords import hash_password
from hivegate.auth.tokens import InvalidAccessToken, TokenCodec
from hivegate.settings import SecuritySettings, Settings
from hivegate.storage import open_storage
from hivegate.storage.memory.agents import MemoryAgentStore
from hivegate.storage.memory.credentials import MemoryCredentialStore
from hivegate.storage.oauth import OAuthStore

SIGNING_KEY = "test-signing-key-" + "k" * 32
MAX_FAILURES = 3
CALLBACK = "http://127.0.0.1:9/callback"
"""The redirect URI the test clients register (nothing listens there: redirects are not followed)."""
STOP_TIMEOUT_SECONDS = 10
_CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


@dataclass
class OAuthServer:
    """The running server and what tests need to drive and inspect it."""

    base: str
    server: AuthorizationServer
    store: OAuthStore
    credentials: MemoryCredentialStore
    registry: AgentRegistry
    codec: TokenCodec
    settings: Settings


@pytest_asyncio.fixture
async def oauth(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncGenerator[OAuthServer]:
    """The server over a memory OAuth store, or over SQLite with ``parametrize("oauth", ["sqlite"], indirect=True)``."""
    kind: str = getattr(request, "param", "memory")
    storage = await open_storage("memory://" if kind == "memory" else f"sqlite+aiosqlite:///{tmp_path / 'oauth.db'}")
    try:
        async for running in _serve(storage.oauth):
            yield running
    finally:
        await storage.close()


async def _serve(store: OAuthStore, **security: Any) -> AsyncGenerator[OAuthServer]:
    """Serve over ``store``; ``security`` overrides :class:`SecuritySettings` fields (``allowed_redirect_uris``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = Settings(
        security=SecuritySettings(token_signing_key=SecretStr(SIGNING_KEY), login_max_failures=MAX_FAILURES, **security)
    )
    credentials = MemoryCredentialStore()
    for name in ("alice", "bob", "carol"):
        await credentials.create_user(name, hash_password(f"{name}-password", hasher=_CHEAP))
    await credentials.set_user_disabled("carol", True)
    agent_store = MemoryAgentStore()
    await agent_store.apply(
        [
            AgentSpec(id="alpha", name="Alpha", description="The first agent", owner="alice"),
            AgentSpec(id="beta", name="Beta <b>", owner="Alice"),
            AgentSpec(id="hidden", name="Hidden", owner="alice", mcp_enabled=False),
            AgentSpec(id="bobs", name="Bob's", owner="bob"),
        ]
    )
    registry = AgentRegistry(agent_store)
    await registry.refresh()
    codec = TokenCodec(base, SIGNING_KEY.encode(), settings.security.access_token_ttl_seconds)
    resolver = ClientMetadataResolver(  # loopback http only
        allow_private_addresses=True,
        allow_http=True,
        verify=False,
        redirect_policy=RedirectPolicy(settings.security.allowed_redirect_uris),
    )
    server = AuthorizationServer(
        settings=settings,
        base_url=base,
        credentials=credentials,
        store=store,
        registry=registry,
        codec=codec,
        client_metadata=resolver,
    )
    server.timing_hash = hash_password("unknown-user-timing", hasher=_CHEAP)  # users' hashes are cheap here too

    async def metadata_document(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "client_id": f"{base}/clients/app.json",
                "client_name": "Metadata App",
                "redirect_uris": [CALLBACK],
                "grant_types": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_method": "none",
            }
        )

    async def protected(request: Request) -> JSONResponse:
        """A stand-in resource server for ``/{agent_id}/mcp`` that checks the audience only."""
        agent_id = request.path_params["agent_id"]
        resource = f"{base}/{agent_id}/mcp"
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        try:
            claims = codec.verify(token) if scheme.lower() == "bearer" else None
        except InvalidAccessToken:
            claims = None
        if claims is None or resource not in claims.audience:
            challenge = (
                f'Bearer scope="agent:{agent_id}", '
                f'resource_metadata="{base}/.well-known/oauth-protected-resource/{agent_id}/mcp"'
            )
            return JSONResponse({"error": "unauthorized"}, 401, headers={"WWW-Authenticate": challenge})
        return JSONResponse({"agent": agent_id, "sub": claims.subject, "aud": list(claims.audience)})

    app = Starlette(
        routes=[
            *server.routes(),
            Route("/clients/app.json", metadata_document),
            Route("/{agent_id}/mcp", protected, methods=["POST"]),
        ]
    )
    uv = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False))
    task = asyncio.create_task(uv.serve(sockets=[sock]))
    try:
        yield OAuthServer(base, server, store, credentials, registry, codec, settings)
    finally:
        uv.should_exit = True
        await asyncio.wait_for(task, STOP_TIMEOUT_SECONDS)
        await resolver.aclose()
        sock.close()


def serve_oauth(store: OAuthStore, **security: Any) -> AsyncGenerator[OAuthServer]:
    """Serve over ``store`` with :class:`SecuritySettings` overrides (``async for server in serve_oauth(...)``)."""
    return _serve(store, **security)


def pkce() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636 §4.1–4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


class _Form(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[dict[str, str | None]] = []
        self.buttons: list[dict[str, str | None]] = []
        self.forms: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "input":
            self.inputs.append(dict(attrs))
        elif tag == "button":
            self.buttons.append(dict(attrs))
        elif tag == "form":
            self.forms.append(dict(attrs))


def parse_form(html: str) -> _Form:
    """The inputs, buttons and forms of an HTML page."""
    parser = _Form()
    parser.feed(html)
    return parser


def hidden(html: str, name: str) -> str:
    """The value of the hidden input ``name``."""
    for item in parse_form(html).inputs:
        if item.get("type") == "hidden" and item.get("name") == name:
            return item.get("value") or ""
    raise AssertionError(f"no hidden input {name!r} in page")


def query(location: str) -> dict[str, str]:
    """The query parameters of a redirect target (one value each)."""
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query, keep_blank_values=True).items()}


@dataclass
class Browser:
    """An httpx client acting as one browser (its own cookie jar), redirects not followed."""

    base: str
    http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.AsyncClient(base_url=self.base, follow_redirects=False, timeout=10)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def register(self, **metadata: Any) -> dict[str, Any]:
        body = {"client_name": "Test App", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"}
        body.update(metadata)
        response = await self.http.post("/oauth/register", json=body)
        assert response.status_code == 201, response.text
        return response.json()

    async def authorize(self, **params: str) -> httpx.Response:
        return await self.http.get("/oauth/authorize", params=params)

    async def start(
        self, client_id: str, challenge: str, *, state: str = "st-1", redirect_uri: str = CALLBACK, **extra: str
    ) -> str:
        """Authorize and return the sealed request from the redirect to the sign-in page (nothing is stored yet)."""
        response = await self.authorize(
            response_type="code",
            client_id=client_id,
            redirect_uri=redirect_uri,
            code_challenge=challenge,
            code_challenge_method="S256",
            state=state,
            **extra,
        )
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith("/oauth/login?request="), location
        return query(location)["request"]

    async def login(self, request_id: str, username: str = "alice", password: str | None = None) -> httpx.Response:
        page = await self.http.get("/oauth/login", params={"request": request_id})
        assert page.status_code == 200, page.text
        return await self.http.post(
            "/oauth/login",
            data={
                "request": request_id,
                "csrf": hidden(page.text, "csrf"),
                "username": username,
                "password": password if password is not None else f"{username}-password",
            },
        )

    async def sign_in(self, sealed: str, username: str = "alice") -> str:
        """Sign in for the sealed request and return the stored request's id from the redirect to consent."""
        response = await self.login(sealed, username)
        assert response.status_code == 303, response.text
        location = response.headers["location"]
        assert location.startswith("/oauth/consent?request="), location
        return query(location)["request"]

    async def consent_page(self, request_id: str) -> httpx.Response:
        return await self.http.get("/oauth/consent", params={"request": request_id})

    async def consent(
        self, request_id: str, agents: list[str], action: str = "allow", csrf: str | None = None
    ) -> httpx.Response:
        if csrf is None:
            page = await self.consent_page(request_id)
            assert page.status_code == 200, page.text
            csrf = hidden(page.text, "csrf")
        data: dict[str, str | list[str]] = {"request": request_id, "csrf": csrf, "action": action, "agent": agents}
        return await self.http.post("/oauth/consent", data=data)

    async def code(
        self,
        client_id: str,
        challenge: str,
        agents: list[str],
        *,
        username: str = "alice",
        state: str = "st-1",
        **extra: str,
    ) -> str:
        """Run authorize → sign-in → consent (allow ``agents``) and return the code from the redirect."""
        request_id = await self.sign_in(await self.start(client_id, challenge, state=state, **extra), username)
        response = await self.consent(request_id, agents)
        assert response.status_code == 303, response.text
        params = query(response.headers["location"])
        assert params["state"] == state
        return params["code"]

    async def token(self, **form: str) -> httpx.Response:
        return await self.http.post("/oauth/token", data=form)

    async def exchange(
        self, client_id: str, code: str, verifier: str, *, redirect_uri: str = CALLBACK, **extra: str
    ) -> httpx.Response:
        return await self.token(
            grant_type="authorization_code",
            client_id=client_id,
            code=code,
            code_verifier=verifier,
            redirect_uri=redirect_uri,
            **extra,
        )

    async def refresh(self, client_id: str, refresh_token: str, **extra: str) -> httpx.Response:
        return await self.token(grant_type="refresh_token", client_id=client_id, refresh_token=refresh_token, **extra)

    async def revoke(self, **form: str) -> httpx.Response:
        return await self.http.post("/oauth/revoke", data=form)


@pytest_asyncio.fixture
async def browser(oauth: OAuthServer) -> AsyncGenerator[Browser]:
    client = Browser(oauth.base)
    try:
        yield client
    finally:
        await client.aclose()


@pytest_asyncio.fixture
async def other_browser(oauth: OAuthServer) -> AsyncGenerator[Browser]:
    """A second browser with a cookie jar of its own."""
    client = Browser(oauth.base)
    try:
        yield client
    finally:
        await client.aclose()


def checkboxes(html: str) -> dict[str, bool]:
    """The consent page's ``agent`` checkboxes: value → checked."""
    return {
        item["value"] or "": "checked" in item
        for item in parse_form(html).inputs
        if item.get("type") == "checkbox" and item.get("name") == "agent" and item.get("value") is not None
    }


WORD = re.compile(r"\s+")


def text_of(html: str) -> str:
    """The page's text with tags removed and whitespace collapsed (for phrase assertions)."""
    return WORD.sub(" ", re.sub(r"<[^>]+>", " ", html)).strip()


async def stored_rows(store: OAuthStore) -> int:
    """How many requests, codes and refresh tokens ``store`` holds (it removes them: call it last)."""
    return await store.purge_expired(datetime.now(UTC) + timedelta(days=3650))
